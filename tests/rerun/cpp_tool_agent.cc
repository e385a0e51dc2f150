// A C++ agent for the rerun e2e test, on recorder/clients/cpp/trace_client.h: one model
// call (plain HTTP to OPENAI_BASE_URL), then one tool through Client::Tool whose function
// has a side effect (a line appended to the file in argv[1]). It prints the tool's result
// as it got it ("tool-result <json string>") and whether the recording answered it.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "recorder/clients/cpp/trace_client.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: cpp_tool_agent SIDE_EFFECT_FILE\n");
    return 2;
  }
  const char* base = std::getenv("OPENAI_BASE_URL");  // http://127.0.0.1:PORT/v1
  const char* key = std::getenv("OPENAI_API_KEY");
  if (base == nullptr || key == nullptr) return 2;
  std::string origin = base;
  origin = origin.substr(0, origin.rfind("/v1"));
  httplib::Client http(origin);
  nlohmann::json body{{"model", "m"},
                      {"messages", {{{"role", "user"}, {"content", "Pick a number."}}}},
                      {"max_tokens", 6},
                      {"temperature", 0}};
  httplib::Headers headers{{"Authorization", std::string("Bearer ") + key}};
  auto r = http.Post("/v1/chat/completions", headers, body.dump(), "application/json");
  if (!r || r->status != 200) {
    std::fprintf(stderr, "model call failed\n");
    return 1;
  }
  trace_client::Client tc;
  bool is_error = true;
  std::string out = tc.Tool(
      "write_marker", R"({"n": 1})",
      [&] {
        std::ofstream(argv[1], std::ios::app) << "ran\n";
        return std::string("wrote \"1\"\n\xE2\x9C\x93 \xF0\x9F\x98\x80 done");
      },
      "", &is_error);
  std::printf("tool-result %s error=%d\n", nlohmann::json(out).dump().c_str(), is_error ? 1 : 0);
  return 0;
}
