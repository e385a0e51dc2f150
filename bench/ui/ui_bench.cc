// trace ui's run list at scale (docs/ui.md, "Measured"): a store of RUNS synthetic runs
// (three labels, two models, every third crashed; each with a model call and a tool result),
// then the API's pages, each the median of 15 requests (5 for a content search) through
// UiApi::Handle (the server's handler minus the socket):
//   - the first page (50 runs, newest first), the tenth (walked by cursor);
//   - a label filter, a text filter (command or label), a status filter (decoded rows), a
//     content search (the events of 500 runs read);
// against listing every run as `trace ls` does (Store::ListRuns), the baseline, measured
// in the same run. Usage: ui_bench [RUNS] [postgres]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "store/store.h"
#include "testkit/pg_server.h"
#include "testkit/temp_dir.h"
#include "ui/api.h"

namespace {

using namespace trace;
using Clock = std::chrono::steady_clock;

double Ms(Clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

double MedianMs(int reps, const std::function<void()>& f) {
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    auto start = Clock::now();
    f();
    t.push_back(Ms(Clock::now() - start));
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

void Fill(store::Store& st, int runs) {
  const char* labels[] = {"nightly", "support", "ci"};
  auto start = Clock::now();
  for (int i = 0; i < runs; ++i) {
    proto::RunHeader h;
    h.set_label(labels[i % 3]);
    h.add_argv("python3");
    h.add_argv(i % 1000 == 0 ? "rare_agent.py" : "agent.py");
    h.add_argv("--task=" + std::to_string(i));
    h.mutable_model()->set_model_name(i % 2 ? "qwen3-tiny" : "llama3-tiny");
    auto w = st.BeginRun(h);
    if (!w.ok()) {
      std::fprintf(stderr, "ui_bench: %s\n", w.status().message().c_str());
      std::exit(2);
    }
    // One model call and one tool result per run: what a content search reads.
    proto::Event call;
    call.mutable_llm_call()->set_rendered_prompt(
        "<|im_start|>system\nYou are the support agent of Example Corp. Answer briefly and "
        "look customers up before changing anything.<|im_end|>\n<|im_start|>user\nTask " +
        std::to_string(i) + ": where is my order?<|im_end|>\n<|im_start|>assistant\n");
    call.mutable_llm_call()->set_output_text("Let me look that up for you.");
    proto::Event result;
    result.mutable_tool_result()->set_name("lookup_order");
    result.mutable_tool_result()->set_content(i % 1000 == 7 ? "{\"status\": \"lost in transit\"}"
                                                            : "{\"status\": \"shipped\"}");
    if (!(*w)->Append(call).ok() || !(*w)->Append(result).ok()) std::exit(2);
    proto::RunEnd end;
    end.set_how(i % 3 == 0 ? proto::RunEnd::SIGNALLED : proto::RunEnd::EXITED);
    if (!(*w)->End(end).ok()) std::exit(2);
    if ((i + 1) % 20000 == 0) {
      std::fprintf(stderr, "  %d runs written (%.0f s)\n", i + 1, Ms(Clock::now() - start) / 1000);
    }
  }
}

void Measure(const std::string& backend, store::Store& st) {
  ui::UiApi api(&st, {});
  auto page = [&api](std::map<std::string, std::string> params) {
    ui::ApiRequest r;
    r.path = "/ui/api/runs";
    r.params = std::move(params);
    ui::ApiReply reply = api.Handle(r);
    if (reply.status != 200) {
      std::fprintf(stderr, "ui_bench: %s\n", reply.body.dump().c_str());
      std::exit(2);
    }
    return reply.body;
  };
  // The cursor of the tenth page, walked once.
  std::string tenth;
  {
    nlohmann::json p = page({});
    for (int i = 1; i < 10; ++i) {
      tenth = p["next"];
      p = page({{"cursor", tenth}});
    }
  }
  const int reps = 15;
  struct Row {
    const char* what;
    double ms;
  };
  auto timed = [&page](int n, std::map<std::string, std::string> params) {
    return MedianMs(n, [&] { page(params); });
  };
  std::vector<Row> rows = {
      {"first page (50 runs)", timed(reps, {})},
      {"tenth page (cursor)", timed(reps, {{"cursor", tenth}})},
      {"label filter", timed(reps, {{"label", "support"}})},
      {"text filter (1 run in 1000)", timed(reps, {{"q", "rare_agent"}})},
      {"status filter (crashed)", timed(reps, {{"status", "crashed"}})},
      // 1 run in 1000 matches: the page stops after reading 500 runs' events.
      {"content search (500 runs read)", timed(5, {{"content", "lost in transit"}})},
  };
  const double all = MedianMs(3, [&] {
    auto runs = st.ListRuns();
    if (!runs.ok()) std::exit(2);
  });
  std::printf("%s\n  %-30s %10s %14s\n", backend.c_str(), "request", "median ms", "vs list all");
  for (const Row& r : rows) {
    std::printf("  %-30s %10.2f %13.1fx\n", r.what, r.ms, all / r.ms);
  }
  std::printf("  %-30s %10.2f %14s\n", "list every run (trace ls)", all, "1.0x");
}

}  // namespace

int main(int argc, char** argv) {
  const int runs = argc > 1 ? std::atoi(argv[1]) : 100000;
  const bool postgres = argc > 2 && std::string(argv[2]) == "postgres";
  testing::TempDir dir;
  testing::PgServer pg;
  std::string location = dir.file("runs.db");
  if (postgres) {
    std::string url = pg.Start();
    if (url.empty()) {
      std::fprintf(stderr, "ui_bench: %s\n", pg.error().c_str());
      return 2;
    }
    location = pg.NewDatabase("uibench");
  }
  auto st = store::Store::Open(location);
  if (!st.ok()) {
    std::fprintf(stderr, "ui_bench: %s\n", st.status().message().c_str());
    return 2;
  }
  std::fprintf(stderr, "ui_bench: writing %d runs to %s\n", runs,
               postgres ? "PostgreSQL" : "SQLite");
  Fill(**st, runs);
  Measure(std::string(postgres ? "PostgreSQL" : "SQLite") + ", " + std::to_string(runs) + " runs",
          **st);
  return 0;
}
