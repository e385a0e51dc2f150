// memory_bench: what one request body costs the recorder's server in memory, as bytes of
// growth of its peak resident set per byte of body, for the bodies that cost the most
// (testkit/memory_probe.h: many tiny messages, one huge message, tiny JSON values,
// content parts, tools, wide and deep tool schemas, tool-call arguments, each API; at the
// size of the body limit, where they are refused as soon as they are read, and just within
// the limits, where they go through parsing, the chat template and the tokenizer):
//
//   memory_bench [--trace PATH] [--model DIR] [--mib N]
//
// Each body goes to a fresh `trace serve` (PATH, default the build's bin/trace) with the
// model DIR (default: the demo model, made in a temporary folder), after a 1-token warm-up
// request; the growth is VmHWM after the body minus VmRSS after the warm-up. The baseline
// row is a second 1-token request: what any request costs. Memory, not time: the figures do
// not depend on the machine's load (docs/recorder.md, "Limits" and "Benchmarks").
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "engine/model_init.h"
#include "testkit/memory_probe.h"

namespace {

namespace fs = std::filesystem;
using trace::recorder::testing::BodiesAtTheLimits;
using trace::recorder::testing::MeasureInFreshServer;
using trace::recorder::testing::Measurement;
using trace::recorder::testing::OversizedBodies;
using trace::recorder::testing::ProbeBody;

constexpr double kMiB = 1 << 20;

void Row(const std::string& trace, const std::string& model, const std::string& store,
         const ProbeBody& body) {
  const Measurement m = MeasureInFreshServer(trace, model, store, body);
  if (!m.error.empty()) {
    std::printf("%-42s error: %s\n", body.name.c_str(), m.error.c_str());
    return;
  }
  // A ratio means nothing for the baseline's few bytes.
  char ratio[32] = "-";
  if (m.body_bytes >= 4096) {
    std::snprintf(ratio, sizeof ratio, "%.2f", m.growth / static_cast<double>(m.body_bytes));
  }
  std::printf("%-42s %9.2f %10.1f %8s   %d%s\n", body.name.c_str(), m.body_bytes / kMiB,
              m.growth / kMiB, ratio, m.reply.status,
              m.peak_reset ? "" : "  (peak since start: clear_refs refused)");
}

}  // namespace

int main(int argc, char** argv) {
  std::string trace = std::string(TRACE_BINARY_DIR) + "/bin/trace";
  std::string model;
  double mib = 32;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--trace" && i + 1 < argc) {
      trace = argv[++i];
    } else if (a == "--model" && i + 1 < argc) {
      model = argv[++i];
    } else if (a == "--mib" && i + 1 < argc) {
      mib = std::atof(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: memory_bench [--trace PATH] [--model DIR] [--mib N]\n");
      return 2;
    }
  }
  std::error_code ec;
  const fs::path dir = fs::temp_directory_path(ec) / ("memory_bench_" + std::to_string(getpid()));
  fs::create_directories(dir, ec);
  if (model.empty()) {
    model = (dir / "model").string();
    trace::Status st = trace::engine::InitModel(trace::engine::kDemoModelPreset,
                                                trace::engine::kDemoModelSeed, model);
    if (!st.ok()) {
      std::fprintf(stderr, "memory_bench: %s\n", st.message().c_str());
      return 1;
    }
  }
  const std::string store = (dir / "s.db").string();
  std::printf("%-42s %9s %10s %8s   %s\n", "body", "MiB", "growth MiB", "growth/B", "status");
  ProbeBody baseline;
  baseline.name = "baseline: a 1-token chat request";
  baseline.path = "/v1/chat/completions";
  baseline.body = R"({"model":"m","max_tokens":1,"messages":[{"role":"user","content":"hi"}]})";
  baseline.status = 200;
  Row(trace, model, store, baseline);
  for (const ProbeBody& body : OversizedBodies(static_cast<size_t>(mib * kMiB) - 4096)) {
    Row(trace, model, store, body);
  }
  for (const ProbeBody& body : BodiesAtTheLimits()) Row(trace, model, store, body);
  fs::remove_all(dir, ec);
  return 0;
}
