// Helper of the schema-grammar property test (js/schema_oracle_test.js): the C++ side of
// each question the test asks. Reads one JSON object per line on stdin:
//   {"schema": {...}, "strict": bool, "strings": ["...", ...], "walks": N, "seed": S}
// and answers one line per question:
//   {"ok": true, "accept": [bool per string], "outputs": ["...", ...]}
//   {"ok": false, "error": "..."}   (the schema does not compile)
// "outputs" are N complete outputs of random walks through the token masks over the
// bundled Qwen3 vocabulary (uniform among allowed tokens, seeded), for the test to
// validate with an independent validator.
#include <iostream>
#include <random>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/model_init.h"
#include "engine/tokenizer/tokenizer.h"
#include "recorder/grammar/json_schema.h"
#include "recorder/grammar/matcher.h"

using namespace trace;
using namespace trace::recorder::grammar;
using ojson = nlohmann::ordered_json;

int main() {
  auto dir = engine::BundledTokenizerDir();
  if (!dir.ok()) {
    std::cerr << dir.status().message() << "\n";
    return 2;
  }
  auto tok = engine::Tokenizer::Load(*dir + "/tokenizer.json");
  if (!tok.ok()) {
    std::cerr << tok.status().message() << "\n";
    return 2;
  }
  auto index = TokenIndex::Build(**tok);
  const int32_t end = *(*tok)->TokenId("<|im_end|>");
  for (std::string line; std::getline(std::cin, line);) {
    if (line.empty()) continue;
    ojson q = ojson::parse(line);
    SchemaOptions options;
    options.strict = q.value("strict", false);
    auto g = CompileJsonSchema(q["schema"], options);
    ojson a;
    if (!g.ok()) {
      a = {{"ok", false}, {"error", g.status().message()}};
      std::cout << a.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << std::endl;
      continue;
    }
    ojson accept = ojson::array(), outputs = ojson::array();
    for (const auto& s : q.value("strings", ojson::array())) {
      accept.push_back((*g)->Accepts(s.get<std::string>()));
    }
    std::mt19937_64 rng(q.value("seed", 0));
    const int walks = q.value("walks", 0);
    for (int w = 0; w < walks; ++w) {
      Matcher m(*g, index, end);
      std::vector<uint8_t> mask;
      std::string text;
      for (int step = 0; step < 1500 && !m.Done(); ++step) {
        m.FillMask(&mask);
        std::vector<int32_t> allowed;
        for (int32_t t = 0; t < static_cast<int32_t>(mask.size()); ++t) {
          if (mask[t]) allowed.push_back(t);
        }
        if (allowed.empty()) break;
        int32_t pick = allowed[rng() % allowed.size()];
        // End as soon as allowed, most of the time, so walks stay short.
        if (m.CanEnd() && rng() % 4 != 0) pick = end;
        if (!m.Advance(pick).ok()) break;
        if (pick != end) text += (*tok)->TokenBytes(pick);
      }
      if (m.Done()) outputs.push_back(text);
    }
    a = {{"ok", true}, {"accept", accept}, {"outputs", outputs}};
    std::cout << a.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << std::endl;
  }
  return 0;
}
