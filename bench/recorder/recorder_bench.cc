// recorder_bench: end-to-end figures of the recorder's server with the tiny demo model,
// every comparison measured in the same run and reported as a ratio (docs/recorder.md).
//
//   recorder_bench [--requests N] [--max-tokens T]
//
// 1. throughput (sampled tokens/s) with 1, 8 and 32 concurrent clients, continuous
//    batching on vs one request at a time;
// 2. recording on vs off (8 clients, batching on): throughput, and the latency one
//    client sees per model call and per event-API call, now that every answer waits for
//    its event to be committed (docs/recorder.md, "Durability");
// 3. proxy mode: median latency added per request against a loopback upstream;
// 4. prefix reuse: time to first token of the fifth turn of a conversation, with vs
//    without reuse;
// 5. structured outputs: tokens/s of 8 concurrent clients decoding under a JSON-schema
//    grammar vs the same requests unconstrained (target >= 0.8x);
// 6. small-request latency on a keep-alive connection (1-token chat completions), p50 and
//    p99, with TCP_NODELAY on the accepted sockets vs off (Nagle + delayed ACK).
#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <thread>

#include "engine/model_init.h"
#include "recorder/server.h"
#include "store/store.h"

namespace {

using namespace trace;
using namespace trace::recorder;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

std::string g_model_dir;

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

std::unique_ptr<Server> Start(SchedulerOptions so, RunLog* log = nullptr,
                              ServerOptions options = ServerOptions()) {
  engine::EngineOptions eo;
  auto backend = LoadLocalBackend(g_model_dir, eo, so, false);
  if (!backend.ok()) {
    std::fprintf(stderr, "recorder_bench: %s\n", backend.status().message().c_str());
    std::exit(2);
  }
  auto server = Server::CreateLocal(std::move(backend).value(), options);
  server->SetRunLog(log);
  if (!server->Start().ok()) std::exit(2);
  return server;
}

json Request(const std::string& model, int k, int max_tokens) {
  return {{"model", model},
          {"messages",
           {{{"role", "user"},
             {"content", "Request " + std::to_string(k) + ": summarise the refund policy."}}}},
          {"max_tokens", max_tokens},
          {"seed", k},
          {"temperature", 0.8}};
}

// Sends json to the server; returns the parsed reply (null on failure).
json Post(int port, const json& body) {
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(600, 0);
  auto r = c.Post("/v1/chat/completions", body.dump(), "application/json");
  if (!r || r->status != 200) return nullptr;
  return json::parse(r->body);
}

// `clients` threads share `requests` requests; returns sampled tokens per second.
double Throughput(Server& server, int clients, int requests, int max_tokens) {
  std::atomic<int> next{0};
  std::atomic<int64_t> tokens{0};
  auto t0 = Clock::now();
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&] {
      for (int k; (k = next++) < requests;) {
        json r = Post(server.port(), Request(server.model_name(), k, max_tokens));
        if (!r.is_null()) tokens += r["usage"]["completion_tokens"].get<int64_t>();
      }
    });
  }
  for (auto& t : threads) t.join();
  return static_cast<double>(tokens) / Seconds(t0, Clock::now());
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double Percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

// `clients` threads each send `per_client` requests built by `make(k)`; sampled tokens/s.
double Throughput(Server& server, int clients, int per_client,
                  const std::function<json(int)>& make) {
  std::atomic<int64_t> tokens{0};
  auto t0 = Clock::now();
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      for (int i = 0; i < per_client; ++i) {
        json r = Post(server.port(), make(c * per_client + i));
        if (!r.is_null()) tokens += r["usage"]["completion_tokens"].get<int64_t>();
      }
    });
  }
  for (auto& t : threads) t.join();
  return static_cast<double>(tokens) / Seconds(t0, Clock::now());
}

// Latency (ms) of `n` 1-token chat completions on one keep-alive connection.
std::vector<double> KeepAliveLatencies(Server& server, int n) {
  httplib::Client c("127.0.0.1", server.port());
  c.set_keep_alive(true);
  std::vector<double> ms;
  for (int k = 0; k < n; ++k) {
    json body = {{"model", "gpt-4o-mini"},
                 {"messages", {{{"role", "user"}, {"content", "Hi."}}}},
                 {"max_tokens", 1},
                 {"seed", k}};
    auto t0 = Clock::now();
    auto r = c.Post("/v1/chat/completions", body.dump(), "application/json");
    if (r && r->status == 200) ms.push_back(Seconds(t0, Clock::now()) * 1e3);
  }
  return ms;
}

}  // namespace

int main(int argc, char** argv) {
  int requests = 32, max_tokens = 16;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--requests")) requests = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--max-tokens")) max_tokens = std::atoi(argv[i + 1]);
  }
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path tmp = fs::temp_directory_path(ec) / ("trace_recorder_bench_" + std::to_string(getpid()));
  if (ec) tmp = fs::path("/tmp") / ("trace_recorder_bench_" + std::to_string(getpid()));
  g_model_dir = (tmp / "model").string();
  if (Status st = engine::InitModel("tiny", 1, g_model_dir); !st.ok()) {
    std::fprintf(stderr, "recorder_bench: %s\n", st.message().c_str());
    return 2;
  }
  std::printf("recorder_bench: tiny demo model, %d requests of %d tokens per point\n\n", requests,
              max_tokens);

  // 1. Batching on vs off.
  SchedulerOptions batched, serial;
  serial.max_active_sequences = 1;
  auto on = Start(batched);
  auto off = Start(serial);
  Throughput(*on, 4, 8, 4);  // warm-up
  std::printf("%-10s %14s %14s %8s\n", "clients", "batched tok/s", "serial tok/s", "ratio");
  for (int clients : {1, 8, 32}) {
    double b = Throughput(*on, clients, requests, max_tokens);
    double s = Throughput(*off, clients, requests, max_tokens);
    std::printf("%-10d %14.1f %14.1f %7.2fx\n", clients, b, s, b / s);
  }
  off.reset();

  // 2. Recording on vs off (alternating, best of 3 each).
  auto store = store::Store::Open((tmp / "bench.db").string());
  auto writer = (*store)->BeginRun(proto::RunHeader());
  RunLog log(std::move(writer).value(), 1);
  auto recorded = Start(batched, &log);
  // Alternating pairs, so both sides see the same load; the median of the per-pair ratios
  // (the shared machine's noise is larger than the effect).
  std::vector<double> ratios;
  double sum_on = 0, sum_off = 0;
  for (int rep = 0; rep < 7; ++rep) {
    double off_rate = Throughput(*on, 8, requests, max_tokens);
    double on_rate = Throughput(*recorded, 8, requests, max_tokens);
    ratios.push_back(on_rate / off_rate);
    sum_on += on_rate;
    sum_off += off_rate;
  }
  std::sort(ratios.begin(), ratios.end());
  std::printf(
      "\nrecording: on %.1f tok/s, off %.1f tok/s (means of 7 alternating pairs); median "
      "on/off %.3f (pairs %.3f..%.3f): cost %.1f%% (target <= 3%%)\n",
      sum_on / 7, sum_off / 7, Median(ratios), ratios.front(), ratios.back(),
      100.0 * (1.0 - Median(ratios)));
  // Latency, one client, alternating: a model call (4 tokens) and one event.
  std::vector<double> call_on, call_off, event_on, event_off;
  httplib::Client rec("127.0.0.1", recorded->port()), plain("127.0.0.1", on->port());
  const std::string note = R"({"type":"note","text":"bench"})";
  for (int k = 0; k < 200; ++k) {
    json body = Request(on->model_name(), 2000 + k % 8, 4);
    auto t0 = Clock::now();
    Post(on->port(), body);
    auto t1 = Clock::now();
    Post(recorded->port(), body);
    auto t2 = Clock::now();
    plain.Post("/trace/v1/events", note, "application/json");
    auto t3 = Clock::now();
    auto r = rec.Post("/trace/v1/events", note, "application/json");
    auto t4 = Clock::now();
    if (!r || r->status != 200) std::exit(2);
    call_off.push_back(Seconds(t0, t1) * 1e3);
    call_on.push_back(Seconds(t1, t2) * 1e3);
    event_off.push_back(Seconds(t2, t3) * 1e3);
    event_on.push_back(Seconds(t3, t4) * 1e3);
  }
  std::printf(
      "acknowledged after commit, 1 client: model call (4 tokens) median %.3f ms recorded vs "
      "%.3f ms not: %+.3f ms; event median %.3f ms recorded vs %.3f ms not: %+.3f ms\n",
      Median(call_on), Median(call_off), Median(call_on) - Median(call_off), Median(event_on),
      Median(event_off), Median(event_on) - Median(event_off));
  // Event bursts: 16 clients posting single events, each answered after its commit.
  std::atomic<int> sent{0};
  auto e0 = Clock::now();
  std::vector<std::thread> burst;
  for (int c = 0; c < 16; ++c) {
    burst.emplace_back([&] {
      httplib::Client cl("127.0.0.1", recorded->port());
      while (sent++ < 8000) cl.Post("/trace/v1/events", note, "application/json");
    });
  }
  for (auto& t : burst) t.join();
  std::printf("event bursts: 16 clients, 8000 events acknowledged after commit: %.0f events/s\n",
              8000 / Seconds(e0, Clock::now()));
  recorded.reset();

  // 3. Proxy latency: direct vs through a proxy to the same upstream, max_tokens 1.
  auto proxy = Server::CreateProxy(on->origin() + "/v1", ServerOptions());
  (*proxy)->Start().ok();
  std::vector<double> direct, via;
  for (int k = 0; k < 40; ++k) {
    json body = Request(on->model_name(), 1000 + k % 4, 1);
    auto t0 = Clock::now();
    Post(on->port(), body);
    auto t1 = Clock::now();
    Post((*proxy)->port(), body);
    auto t2 = Clock::now();
    direct.push_back(Seconds(t0, t1) * 1e3);
    via.push_back(Seconds(t1, t2) * 1e3);
  }
  std::printf("proxy: median %.3f ms direct, %.3f ms via proxy: %.3f ms added (target <= 1)\n",
              Median(direct), Median(via), Median(via) - Median(direct));
  (*proxy)->Stop();

  // 4. Prefix reuse: time to first token (max_tokens 1) of turn 5, warm vs cold.
  SchedulerOptions no_reuse;
  no_reuse.prefix_reuse = false;
  auto cold = Start(no_reuse);
  json messages = json::array({{{"role", "system"}, {"content", "You are a support agent."}}});
  for (int turn = 0; turn < 4; ++turn) {
    messages.push_back(
        {{"role", "user"},
         {"content", "Turn " + std::to_string(turn) + ": tell me about refunds and shipping."}});
    json r = Post(
        on->port(),
        {{"model", on->model_name()}, {"messages", messages}, {"max_tokens", 48}, {"seed", turn}});
    messages.push_back({{"role", "assistant"}, {"content", r["choices"][0]["message"]["content"]}});
  }
  messages.push_back({{"role", "user"}, {"content", "Turn 5: and deletion?"}});
  json fifth = {
      {"model", on->model_name()}, {"messages", messages}, {"max_tokens", 1}, {"seed", 5}};
  std::vector<double> warm_ms, cold_ms;
  int64_t cached = 0, prompt = 0;
  for (int rep = 0; rep < 5; ++rep) {
    // A fresh fifth turn each time for the warm server: its own turn-4 prefix is cached.
    auto t0 = Clock::now();
    json w = Post(on->port(), fifth);
    auto t1 = Clock::now();
    Post(cold->port(), fifth);
    auto t2 = Clock::now();
    warm_ms.push_back(Seconds(t0, t1) * 1e3);
    cold_ms.push_back(Seconds(t1, t2) * 1e3);
    cached = w["usage"]["prompt_tokens_details"]["cached_tokens"];
    prompt = w["usage"]["prompt_tokens"];
  }
  std::printf(
      "prefix reuse: turn-5 TTFT %.2f ms with reuse (%lld of %lld prompt tokens "
      "cached), %.2f ms without: %.2fx faster\n",
      Median(warm_ms), static_cast<long long>(cached), static_cast<long long>(prompt),
      Median(cold_ms), Median(cold_ms) / Median(warm_ms));
  cold.reset();

  // 5. Structured outputs at batch 8: a JSON-schema grammar vs unconstrained, same tokens.
  const json schema = {{"type", "object"},
                       {"properties",
                        {{"name", {{"type", "string"}}},
                         {"age", {{"type", "integer"}, {"minimum", 0}, {"maximum", 120}}},
                         {"notes", {{"type", "string"}}}}},
                       {"required", {"name", "age", "notes"}}};
  auto make = [&](bool constrained) {
    return [&, constrained](int k) {
      json r = Request(on->model_name(), 2000 + k, 64);
      if (constrained) {
        r["response_format"] = {
            {"type", "json_schema"},
            {"json_schema", {{"name", "person"}, {"strict", true}, {"schema", schema}}}};
      }
      return r;
    };
  };
  Throughput(*on, 8, 1, make(true));  // warm-up: compiles the grammar and vocabulary tables
  double best_plain = 0, best_json = 0;
  for (int rep = 0; rep < 3; ++rep) {
    best_plain = std::max(best_plain, Throughput(*on, 8, 2, make(false)));
    best_json = std::max(best_json, Throughput(*on, 8, 2, make(true)));
  }
  std::printf(
      "structured outputs, 8 clients: %.1f tok/s under a JSON-schema grammar, %.1f tok/s "
      "unconstrained: %.2fx (target >= 0.8x)\n",
      best_json, best_plain, best_json / best_plain);

  // 6. Keep-alive latency of 1-token requests, TCP_NODELAY on vs off.
  ServerOptions nagle;
  nagle.tcp_nodelay = false;
  auto with_nagle = Start(batched, nullptr, nagle);
  KeepAliveLatencies(*on, 5);
  KeepAliveLatencies(*with_nagle, 5);
  std::vector<double> fast = KeepAliveLatencies(*on, 100);
  std::vector<double> slow = KeepAliveLatencies(*with_nagle, 100);
  std::printf(
      "keep-alive 1-token requests: p50 %.2f ms, p99 %.2f ms with TCP_NODELAY; p50 %.2f ms, "
      "p99 %.2f ms without: p50 %.1fx, p99 %.1fx\n",
      Percentile(fast, 0.5), Percentile(fast, 0.99), Percentile(slow, 0.5), Percentile(slow, 0.99),
      Percentile(slow, 0.5) / Percentile(fast, 0.5),
      Percentile(slow, 0.99) / Percentile(fast, 0.99));
  with_nagle.reset();
  on.reset();
  (void)log.writer().End(proto::RunEnd());
  fs::remove_all(tmp, ec);
  return 0;
}
