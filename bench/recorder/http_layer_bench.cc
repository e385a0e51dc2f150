// http_layer_bench: what the recorder's hardened HTTP layer (server/frontend +
// server/http_connections: admission checks, body read before routing, its own connection
// loop) costs against the plain cpp-httplib server it replaced (a fixed pool of 80
// threads, the key compared in the handler), both serving the same trivial POST route in
// the same run, alternating, best of 3 rounds (docs/recorder.md):
//
//   http_layer_bench [--requests N]
//
// 1. p50 / p99 latency of small POSTs (1 KiB JSON) on one keep-alive connection;
// 2. requests/s of 8 concurrent keep-alive clients sending small POSTs;
// 3. MiB/s of 1 MiB POST bodies (the hardened layer reads a body, checks it, and hands it
//    to httplib from memory).
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "recorder/server/frontend.h"

namespace {

using namespace trace::recorder;
using Clock = std::chrono::steady_clock;

constexpr const char* kKey = "bench-key";

void Echo(const httplib::Request& req, httplib::Response& res) {
  res.set_content("{\"bytes\":" + std::to_string(req.body.size()) + "}", "application/json");
}

// The server a bench round talks to.
class Target {
 public:
  virtual ~Target() = default;
  virtual int port() const = 0;
};

// Before: httplib as the recorder configured it (ThreadPool of 80, TCP_NODELAY, the key
// checked in the route).
class PlainTarget : public Target {
 public:
  PlainTarget() {
    http_.new_task_queue = [] { return new httplib::ThreadPool(80); };
    http_.set_tcp_nodelay(true);  // as the frontend had it
    http_.Post("/echo", [](const httplib::Request& req, httplib::Response& res) {
      if (req.get_header_value("Authorization") != std::string("Bearer ") + kKey) {
        res.status = 401;
        return;
      }
      Echo(req, res);
    });
    port_ = http_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { http_.listen_after_bind(); });
    while (!http_.is_running()) std::this_thread::yield();
  }
  ~PlainTarget() override {
    http_.stop();
    thread_.join();
  }
  int port() const override { return port_; }

 private:
  httplib::Server http_;
  int port_ = 0;
  std::thread thread_;
};

// After: the recorder's frontend (admission, body read and depth check, connection layer).
class GuardedTarget : public Target {
 public:
  GuardedTarget() : frontend_(Options()) {
    frontend_.http().Post("/echo", Echo);
    if (!frontend_.Start().ok()) std::abort();
  }
  ~GuardedTarget() override { frontend_.Stop(); }
  int port() const override { return frontend_.port(); }

 private:
  static ServerOptions Options() {
    ServerOptions o;
    o.api_key = kKey;
    o.limits.max_body_bytes = 8 << 20;
    return o;
  }
  HttpFrontend frontend_;
};

std::unique_ptr<httplib::Client> Client(const Target& t) {
  auto c = std::make_unique<httplib::Client>("127.0.0.1", t.port());
  c->set_keep_alive(true);
  c->set_tcp_nodelay(true);
  c->set_read_timeout(60, 0);
  return c;
}

httplib::Headers Auth() {
  return {{"Authorization", std::string("Bearer ") + kKey}};
}

std::string SmallBody() {
  std::string s = "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"";
  s += std::string(1024 - s.size() - 4, 'a');
  return s + "\"}]}";
}

struct Latency {
  double p50_us = 0, p99_us = 0;
};

Latency KeepAliveLatency(const Target& t, int n) {
  auto c = Client(t);
  const std::string body = SmallBody();
  std::vector<double> us;
  for (int i = 0; i < n; ++i) {
    auto start = Clock::now();
    auto r = c->Post("/echo", Auth(), body, "application/json");
    if (!r || r->status != 200) std::abort();
    us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
  }
  std::sort(us.begin(), us.end());
  return {us[us.size() / 2], us[us.size() * 99 / 100]};
}

double ConcurrentRps(const Target& t, int n, int clients) {
  const std::string body = SmallBody();
  std::atomic<int> next{0};
  auto start = Clock::now();
  std::vector<std::thread> threads;
  for (int k = 0; k < clients; ++k) {
    threads.emplace_back([&] {
      auto c = Client(t);
      while (next++ < n) {
        auto r = c->Post("/echo", Auth(), body, "application/json");
        if (!r || r->status != 200) std::abort();
      }
    });
  }
  for (auto& th : threads) th.join();
  return n / std::chrono::duration<double>(Clock::now() - start).count();
}

double LargeBodyMiBps(const Target& t, int n) {
  auto c = Client(t);
  const std::string body = "{\"text\":\"" + std::string((1 << 20) - 11, 'x') + "\"}";
  auto start = Clock::now();
  for (int i = 0; i < n; ++i) {
    auto r = c->Post("/echo", Auth(), body, "application/json");
    if (!r || r->status != 200) std::abort();
  }
  return n * (body.size() / 1048576.0) /
         std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  int requests = 2000;
  for (int i = 1; i + 1 < argc; ++i) {
    if (!std::strcmp(argv[i], "--requests")) requests = std::atoi(argv[i + 1]);
  }
  Latency best_plain{1e18, 1e18}, best_guarded{1e18, 1e18};
  double rps_plain = 0, rps_guarded = 0, mib_plain = 0, mib_guarded = 0;
  for (int round = 0; round < 3; ++round) {
    for (bool guarded : {false, true}) {
      std::unique_ptr<Target> t;
      if (guarded) {
        t = std::make_unique<GuardedTarget>();
      } else {
        t = std::make_unique<PlainTarget>();
      }
      Latency l = KeepAliveLatency(*t, requests);
      double rps = ConcurrentRps(*t, requests, 8);
      double mib = LargeBodyMiBps(*t, std::max(10, requests / 40));
      Latency& best = guarded ? best_guarded : best_plain;
      best.p50_us = std::min(best.p50_us, l.p50_us);
      best.p99_us = std::min(best.p99_us, l.p99_us);
      (guarded ? rps_guarded : rps_plain) = std::max(guarded ? rps_guarded : rps_plain, rps);
      (guarded ? mib_guarded : mib_plain) = std::max(guarded ? mib_guarded : mib_plain, mib);
    }
  }
  std::printf("http_layer_bench: %d requests per figure, best of 3 alternating rounds\n", requests);
  std::printf(
      "keep-alive 1 KiB POST latency  p50 %.1f us vs %.1f us plain (%.2fx), "
      "p99 %.1f us vs %.1f us (%.2fx)\n",
      best_guarded.p50_us, best_plain.p50_us, best_guarded.p50_us / best_plain.p50_us,
      best_guarded.p99_us, best_plain.p99_us, best_guarded.p99_us / best_plain.p99_us);
  std::printf("8 clients, 1 KiB POSTs          %.0f req/s vs %.0f req/s plain (%.2fx)\n",
              rps_guarded, rps_plain, rps_guarded / rps_plain);
  std::printf("1 MiB POST bodies               %.0f MiB/s vs %.0f MiB/s plain (%.2fx)\n",
              mib_guarded, mib_plain, mib_guarded / mib_plain);
  return 0;
}
