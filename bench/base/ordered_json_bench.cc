// ParseOrderedJson against nlohmann's ordered_json::parse, same texts, same run:
//
//   ordered_json_bench [--reps N]
//
// Texts: a chat request as agents send them (a system prompt, 40 messages, tool calls with
// JSON arguments, two tools with schemas: about 7 KB), parsed N times (default 200); and
// one object of 1,000, 10,000 and 40,000 keys (nlohmann's parse is quadratic in the keys of
// an object, so the larger sizes are ours alone: 100,000 and 1,000,000). Prints the CPU
// time of this thread per parse (a busy machine does not skew it; each figure the best of
// 3 rounds) and the ratio ours / nlohmann where both ran.
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "base/ordered_json.h"

namespace {

size_t g_sink = 0;  // what the parses return goes here, so none is optimised away

double ThreadCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// The best of 3 rounds of `reps` calls, in seconds per call.
double Time(int reps, const std::function<void()>& call) {
  double best = 1e300;
  for (int round = 0; round < 3; ++round) {
    const double start = ThreadCpuSeconds();
    for (int i = 0; i < reps; ++i) call();
    best = std::min(best, (ThreadCpuSeconds() - start) / reps);
  }
  return best;
}

std::string ChatRequest() {
  using nlohmann::ordered_json;
  ordered_json messages = ordered_json::array();
  messages.push_back({{"role", "system"}, {"content", std::string(2000, 's')}});
  for (int i = 0; i < 20; ++i) {
    messages.push_back(
        {{"role", "user"}, {"content", "Please look up order " + std::to_string(i)}});
    messages.push_back({{"role", "assistant"},
                        {"content", ""},
                        {"tool_calls",
                         {{{"id", "call_" + std::to_string(i)},
                           {"type", "function"},
                           {"function",
                            {{"name", "lookup_order"},
                             {"arguments", R"({"order_id": ")" + std::to_string(i) +
                                               R"(", "fields": ["status", "total"]})"}}}}}}});
  }
  ordered_json params = {{"type", "object"},
                         {"properties",
                          {{"order_id", {{"type", "string"}, {"description", "The order's id"}}},
                           {"fields", {{"type", "array"}, {"items", {{"type", "string"}}}}}}},
                         {"required", {"order_id"}}};
  ordered_json tools = ordered_json::array();
  for (const char* name : {"lookup_order", "cancel_order"}) {
    tools.push_back(
        {{"type", "function"},
         {"function", {{"name", name}, {"description", "An order tool"}, {"parameters", params}}}});
  }
  ordered_json body = {{"model", "m"},       {"messages", messages}, {"tools", tools},
                       {"temperature", 0.7}, {"max_tokens", 256},    {"stream", true}};
  return body.dump();
}

std::string WideObject(int keys) {
  std::string text = "{";
  for (int i = 0; i < keys; ++i) {
    text += (i ? ",\"k" : "\"k") + std::to_string(i) + "\":" + std::to_string(i);
  }
  return text + "}";
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 200;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--reps") == 0 && i + 1 < argc) {
      reps = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: ordered_json_bench [--reps N]\n");
      return 2;
    }
  }
  if (reps < 1) {
    std::fprintf(stderr, "ordered_json_bench: --reps must be at least 1\n");
    return 2;
  }
  std::printf("%-26s %14s %14s %8s\n", "text", "ours", "nlohmann", "ratio");
  const auto row = [](const std::string& label, double ours, double theirs) {
    if (theirs > 0) {
      std::printf("%-26s %11.3f ms %11.3f ms %8.2f\n", label.c_str(), ours * 1e3, theirs * 1e3,
                  ours / theirs);
    } else {
      std::printf("%-26s %11.3f ms %14s %8s\n", label.c_str(), ours * 1e3, "-", "-");
    }
  };
  const std::string chat = ChatRequest();
  row("chat request (" + std::to_string(chat.size() / 1024) + " KB)",
      Time(reps, [&] { g_sink += trace::ParseOrderedJson(chat).size(); }),
      Time(reps, [&] { g_sink += nlohmann::ordered_json::parse(chat).size(); }));
  for (int keys : {1'000, 10'000, 40'000, 100'000, 1'000'000}) {
    const std::string text = WideObject(keys);
    const int n = std::max(1, reps * 1000 / keys);
    const double ours = Time(n, [&] { g_sink += trace::ParseOrderedJson(text).size(); });
    const double theirs = keys <= 40'000
                              ? Time(std::max(1, n / 10),
                                     [&] { g_sink += nlohmann::ordered_json::parse(text).size(); })
                              : 0;
    row("object of " + std::to_string(keys) + " keys", ours, theirs);
  }
  return g_sink == 0 ? 1 : 0;
}
