// Store benchmark (docs/trace-format.md, "Measured"):
//  1. small events ingested per second into one run, batched by the writer (commit every
//     100 ms) vs one transaction per event (Append + Flush), same event stream;
//  2. acknowledged events (what the recorder does: Append then WaitDurable before the
//     answer) from 1, 8 and 32 threads: events/s and the median/p99 wait, i.e. the
//     latency an acknowledgement adds; group commit shares transactions between threads;
//  3. stored bytes per sampled token for a realistic LlmCall stream: Zipf-distributed token
//     ids, logits and runner-up gaps as a chat model produces them, random 64-bit digests.
// Usage: store_bench [BATCHED_EVENTS] [SINGLE_EVENTS] [CALLS]
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "store/store.h"
#include "testkit/pg_server.h"
#include "testkit/store_test_util.h"

namespace {

using namespace trace;
using namespace trace::store;
using Clock = std::chrono::steady_clock;

proto::Event SmallEvent(int i) {
  proto::Event e;
  switch (i % 3) {
    case 0:
      e.mutable_clock_read()->set_clock("wall");
      e.mutable_clock_read()->set_value_ns(1'700'000'000'000'000'000 + i);
      break;
    case 1:
      e.mutable_output()->set_data("step " + std::to_string(i) + " ok\n");
      break;
    default:
      e.mutable_template_var()->set_name("user_id");
      e.mutable_template_var()->set_value(std::to_string(i * 7919));
  }
  return e;
}

double CpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_stime.tv_sec + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

// Events per wall-clock second; *cpu_rate gets events per CPU second of this process (all
// threads), the figure that does not depend on how busy the shared machine is.
double IngestRate(const std::string& path, int n, bool flush_each, double* cpu_rate) {
  auto store = Store::Open(path);
  if (!store.ok()) {
    std::fprintf(stderr, "%s\n", store.status().message().c_str());
    std::exit(2);
  }
  auto w = (*store)->BeginRun({});
  if (!w.ok()) std::exit(2);
  auto start = Clock::now();
  const double cpu_start = CpuSeconds();
  for (int i = 0; i < n; ++i) {
    if (!(*w)->Append(SmallEvent(i)).ok()) std::exit(2);
    if (flush_each && !(*w)->Flush().ok()) std::exit(2);
  }
  if (!(*w)->Flush().ok()) std::exit(2);
  double s = std::chrono::duration<double>(Clock::now() - start).count();
  *cpu_rate = n / (CpuSeconds() - cpu_start);
  return n / s;
}

struct Acked {
  double events_per_s = 0;
  double median_us = 0;
  double p99_us = 0;
};

// `threads` threads each Append + WaitDurable `each` small events (an acknowledged
// event), as the recorder's HTTP handlers do.
Acked AcknowledgedRate(const std::string& path, int threads, int each,
                       const StoreOptions& options = {}) {
  auto store = Store::Open(path, options);
  if (!store.ok()) std::exit(2);
  auto w = (*store)->BeginRun({});
  if (!w.ok()) std::exit(2);
  std::vector<std::vector<double>> waits(threads);
  auto start = Clock::now();
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      for (int i = 0; i < each; ++i) {
        auto t0 = Clock::now();
        auto seq = (*w)->Append(SmallEvent(i));
        if (!seq.ok() || !(*w)->WaitDurable(*seq).ok()) std::exit(2);
        waits[t].push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
      }
    });
  }
  for (auto& th : pool) th.join();
  double s = std::chrono::duration<double>(Clock::now() - start).count();
  std::vector<double> all;
  for (auto& v : waits) all.insert(all.end(), v.begin(), v.end());
  std::sort(all.begin(), all.end());
  Acked a;
  a.events_per_s = all.size() / s;
  a.median_us = all[all.size() / 2];
  a.p99_us = all[all.size() * 99 / 100];
  return a;
}

// Zipf(s=1.1) over a 151,936-token vocabulary by inverse CDF on a precomputed table.
class Zipf {
 public:
  explicit Zipf(int n, double s = 1.1) : cdf_(n) {
    double sum = 0;
    for (int k = 0; k < n; ++k) cdf_[k] = (sum += 1.0 / std::pow(k + 1, s));
    for (double& c : cdf_) c /= sum;
  }
  int32_t operator()(std::mt19937_64& rng) {
    double u = std::uniform_real_distribution<double>(0, 1)(rng);
    return static_cast<int32_t>(std::lower_bound(cdf_.begin(), cdf_.end(), u) - cdf_.begin());
  }

 private:
  std::vector<double> cdf_;
};

// One realistic call's per-token records (nothing else set).
proto::Event TokenRecords(std::mt19937_64& rng, Zipf& zipf, int tokens, float temperature) {
  proto::Event e;
  auto* c = e.mutable_llm_call();
  std::normal_distribution<float> logit(22.0f, 4.0f);
  std::exponential_distribution<float> gap(0.5f);
  for (int i = 0; i < tokens; ++i) {
    float l = logit(rng);
    float g = gap(rng);
    c->add_token_ids(zipf(rng));
    c->add_logits_digests(rng());
    c->add_logits(l);
    // log-softmax of the chosen token against the runner-up and a tail of 40 others.
    float tail = std::exp(-g / temperature) * (1.0f + 40.0f * std::exp(-3.0f / temperature));
    c->add_logprobs(-std::log1p(tail));
    c->add_runner_up_ids(zipf(rng));
    c->add_runner_up_logits(l - g);
  }
  return e;
}

struct Bytes {
  double per_token = 0;
  int64_t tokens = 0;
};

Bytes BytesPerToken(const std::string& path, int calls, int tokens_per_call, bool layers) {
  auto store = Store::Open(path);
  if (!store.ok()) std::exit(2);
  auto w = (*store)->BeginRun({});
  std::mt19937_64 rng(1);
  Zipf zipf(151936);
  int64_t tokens = 0;
  for (int k = 0; k < calls; ++k) {
    proto::Event e = TokenRecords(rng, zipf, tokens_per_call, k % 2 ? 0.7f : 1.0f);
    if (layers) {
      e.mutable_llm_call()->set_num_layers(28);
      for (int i = 0; i < tokens_per_call * 28; ++i) e.mutable_llm_call()->add_layer_digests(rng());
    }
    tokens += tokens_per_call;
    if (!(*w)->Append(e).ok()) std::exit(2);
  }
  if (!(*w)->Flush().ok()) std::exit(2);
  auto s = (*store)->Stats();
  return {static_cast<double>(s->event_payload_bytes + s->blob_bytes) / tokens, tokens};
}

}  // namespace

// `store_bench backends [BATCHED] [ACKED]`: the same ingest on SQLite and PostgreSQL (a
// throwaway local server, tests/common/pg_server.h), alternating, three rounds; the
// ratio PostgreSQL/SQLite per round and its median.
int CompareBackends(int batched, int acked) {
  trace::testing::PgServer server;
  const std::string base = server.Start();
  if (base.empty()) {
    std::fprintf(stderr, "store_bench backends: %s\n", server.error().c_str());
    return 2;
  }
  store::testing::TempDir dir;
  std::vector<double> batched_ratio, acked_ratio, acked_full_ratio;
  StoreOptions full;
  full.sync_full = true;
  for (int round = 0; round < 3; ++round) {
    const std::string r = std::to_string(round);
    double cpu_sqlite, cpu_pg;
    const double sqlite = IngestRate(dir.file("b" + r + ".db"), batched, false, &cpu_sqlite);
    const double pg = IngestRate(server.NewDatabase("b" + r), batched, false, &cpu_pg);
    const Acked sqlite_acked = AcknowledgedRate(dir.file("a" + r + ".db"), 8, acked / 8);
    const Acked sqlite_full = AcknowledgedRate(dir.file("f" + r + ".db"), 8, acked / 8, full);
    const Acked pg_acked = AcknowledgedRate(server.NewDatabase("a" + r), 8, acked / 8);
    batched_ratio.push_back(pg / sqlite);
    acked_ratio.push_back(pg_acked.events_per_s / sqlite_acked.events_per_s);
    acked_full_ratio.push_back(pg_acked.events_per_s / sqlite_full.events_per_s);
    std::printf(
        "round %d: batched ingest (%d small events, one run) SQLite %.0f events/s, PostgreSQL "
        "%.0f events/s (%.2fx); acknowledged, 8 threads (%d events) SQLite %.0f events/s "
        "(median wait %.0f us), SQLite synchronous=FULL %.0f events/s (median wait %.0f us), "
        "PostgreSQL %.0f events/s (median wait %.0f us) (%.3fx, %.3fx of FULL)\n",
        round, batched, sqlite, pg, pg / sqlite, acked / 8 * 8, sqlite_acked.events_per_s,
        sqlite_acked.median_us, sqlite_full.events_per_s, sqlite_full.median_us,
        pg_acked.events_per_s, pg_acked.median_us,
        pg_acked.events_per_s / sqlite_acked.events_per_s,
        pg_acked.events_per_s / sqlite_full.events_per_s);
  }
  std::sort(batched_ratio.begin(), batched_ratio.end());
  std::sort(acked_ratio.begin(), acked_ratio.end());
  std::sort(acked_full_ratio.begin(), acked_full_ratio.end());
  std::printf(
      "PostgreSQL/SQLite, median of 3 rounds: batched ingest %.2fx, acknowledged %.3fx "
      "(%.3fx of SQLite synchronous=FULL, which also flushes every commit)\n",
      batched_ratio[1], acked_ratio[1], acked_full_ratio[1]);
  return 0;
}

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "backends") {
    return CompareBackends(argc > 2 ? std::atoi(argv[2]) : 50000,
                           argc > 3 ? std::atoi(argv[3]) : 4000);
  }
  const int batched = argc > 1 ? std::atoi(argv[1]) : 300000;
  const int single = argc > 2 ? std::atoi(argv[2]) : 3000;
  const int calls = argc > 3 ? std::atoi(argv[3]) : 300;
  store::testing::TempDir dir;

  double cpu_batched, cpu_single;
  double rate_batched = IngestRate(dir.file("batched.db"), batched, false, &cpu_batched);
  double rate_single = IngestRate(dir.file("single.db"), single, true, &cpu_single);
  std::printf(
      "ingest, small events, one run: batched %.0f events/s wall (%.0f per CPU second, "
      "%d events); one transaction per event %.0f events/s wall (%.0f per CPU second, "
      "%d events); batched/single = %.1fx wall; target >= 200000 batched: %s\n",
      rate_batched, cpu_batched, batched, rate_single, cpu_single, single,
      rate_batched / rate_single, rate_batched >= 200000 ? "met" : "NOT met");

  for (int threads : {1, 8, 32}) {
    const int each = std::max(1, (threads == 1 ? single : single * 2) / threads);
    Acked a = AcknowledgedRate(dir.file("acked" + std::to_string(threads) + ".db"), threads, each);
    std::printf(
        "acknowledged (Append + WaitDurable), %2d threads: %.0f events/s, wait median %.0f us, "
        "p99 %.0f us (%d events; batched/acknowledged = %.1fx)\n",
        threads, a.events_per_s, a.median_us, a.p99_us, threads * each,
        rate_batched / a.events_per_s);
  }

  {
    // What acknowledging adds to a model call: Append of a realistic LlmCall (50-turn
    // conversation, 200 sampled tokens, request JSON, prompt, response) + WaitDurable.
    auto st = Store::Open(dir.file("acked_calls.db"));
    auto w = (*st)->BeginRun({});
    auto conv = store::testing::MakeConversation(50, 200);
    std::vector<double> waits;
    for (const auto& e : conv.calls) {
      auto t0 = Clock::now();
      auto seq = (*w)->Append(e);
      if (!seq.ok() || !(*w)->WaitDurable(*seq).ok()) return 2;
      waits.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
    }
    std::sort(waits.begin(), waits.end());
    std::printf(
        "acknowledged model call (50-turn conversation, 200 tokens/turn): Append + WaitDurable "
        "median %.0f us, p90 %.0f us, max %.0f us\n",
        waits[waits.size() / 2], waits[waits.size() * 9 / 10], waits.back());
  }

  Bytes b = BytesPerToken(dir.file("tokens.db"), calls, 200, false);
  std::printf(
      "sampled-token records: %.2f stored bytes per token over %lld tokens (%d calls x "
      "200; raw arrays: 28 B/token = 1.00x, stored = %.2fx of raw); target <= 24: %s\n",
      b.per_token, static_cast<long long>(b.tokens), calls, b.per_token / 28.0,
      b.per_token <= 24 ? "met" : "NOT met");
  Bytes l = BytesPerToken(dir.file("layers.db"), calls / 4, 200, true);
  std::printf(
      "with --layer-digests (28 layers): %.2f stored bytes per token (28 x 8 = 224 B raw "
      "digests, incompressible)\n",
      l.per_token);

  // Whole realistic calls (prompt, request, rendered prompt, output, response) for context.
  auto store = Store::Open(dir.file("conv.db"));
  auto w = (*store)->BeginRun({});
  auto conv = store::testing::MakeConversation(50, 200);
  int64_t tokens = 0;
  for (const auto& e : conv.calls) {
    tokens += e.llm_call().token_ids_size();
    if (!(*w)->Append(e).ok()) return 2;
  }
  if (!(*w)->Flush().ok()) return 2;
  auto s = (*store)->Stats();
  std::printf(
      "50-turn conversation (uniform token ids, 200 tokens/turn): %.2f stored bytes per "
      "sampled token including all text, prompts and history\n",
      static_cast<double>(s->event_payload_bytes + s->blob_bytes) / tokens);
  return 0;
}
