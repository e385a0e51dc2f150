// http_layer_bench: what the recorder's hardened HTTP layer (server/frontend +
// server/http_connections: admission checks, body read before routing, its own connection
// loop) costs against the plain cpp-httplib server it replaced (a fixed pool of 80
// threads, the key compared in the handler), both serving the same trivial POST route in
// the same run, back to back in each of R rounds; the ratios are per round, their median
// reported (docs/recorder.md):
//
//   http_layer_bench [--requests N] [--rounds R]
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

// The median of `v` (copied: sorted here).
double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// One figure across rounds: the hardened layer's and plain httplib's value per round.
struct Figure {
  std::vector<double> guarded, plain, ratio;
  void Add(double g, double p) {
    guarded.push_back(g);
    plain.push_back(p);
    ratio.push_back(g / p);
  }
};

}  // namespace

int main(int argc, char** argv) {
  int requests = 2000;
  int rounds = 5;
  for (int i = 1; i + 1 < argc; ++i) {
    if (!std::strcmp(argv[i], "--requests")) requests = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--rounds")) rounds = std::max(1, std::atoi(argv[i + 1]));
  }
  Figure p50, p99, rps, mib;
  for (int round = 0; round < rounds; ++round) {
    // Both servers back to back in each round, the order alternating, so that a change in
    // the machine's load falls on both; the ratio is taken within the round.
    Latency lat[2];
    double r[2], m[2];
    for (int k = 0; k < 2; ++k) {
      const bool guarded = (round + k) % 2 == 1;
      std::unique_ptr<Target> t;
      if (guarded) {
        t = std::make_unique<GuardedTarget>();
      } else {
        t = std::make_unique<PlainTarget>();
      }
      lat[guarded] = KeepAliveLatency(*t, requests);
      r[guarded] = ConcurrentRps(*t, requests, 8);
      m[guarded] = LargeBodyMiBps(*t, std::max(10, requests / 40));
    }
    p50.Add(lat[1].p50_us, lat[0].p50_us);
    p99.Add(lat[1].p99_us, lat[0].p99_us);
    rps.Add(r[1], r[0]);
    mib.Add(m[1], m[0]);
  }
  std::printf(
      "http_layer_bench: %d requests per figure, %d rounds (plain httplib and the hardened "
      "layer back to back); medians over rounds, ratio = hardened / plain per round\n",
      requests, rounds);
  std::printf(
      "keep-alive 1 KiB POST latency p50  %8.1f us vs %8.1f us plain  ratio %.2fx\n"
      "keep-alive 1 KiB POST latency p99  %8.1f us vs %8.1f us plain  ratio %.2fx\n",
      Median(p50.guarded), Median(p50.plain), Median(p50.ratio), Median(p99.guarded),
      Median(p99.plain), Median(p99.ratio));
  std::printf("8 clients, 1 KiB POSTs            %8.0f /s vs %8.0f /s plain  ratio %.2fx\n",
              Median(rps.guarded), Median(rps.plain), Median(rps.ratio));
  std::printf("1 MiB POST bodies                 %8.0f MiB/s vs %6.0f MiB/s plain  ratio %.2fx\n",
              Median(mib.guarded), Median(mib.plain), Median(mib.ratio));
  return 0;
}
