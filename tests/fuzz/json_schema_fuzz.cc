// Fuzz target: the structured-output grammar (recorder/grammar/), the parser of the JSON
// Schemas a client sends in response_format and tool parameters. The input is a schema
// (JSON text). Promises:
//   - CompileJsonSchema never crashes, throws or runs away, in strict and lax mode; an
//     error is one printable line;
//   - a compiled grammar has no dead end: walking it through the matcher's token masks
//     (a small byte-level vocabulary, choices drawn from the input's hash) always finds an
//     allowed token, every picked token is one WouldAccept allows, and Advance takes it;
//   - what a finished walk wrote is accepted by the grammar's reference matcher
//     (Grammar::Accepts) and is one valid JSON value.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/tokenizer/tokenizer.h"
#include "recorder/grammar/json_schema.h"
#include "recorder/grammar/matcher.h"
#include "recorder/grammar/token_index.h"
#include "tests/fuzz/fuzz_checks.h"
#include "tests/fuzz/fuzz_target.h"
#include "tests/tokenizer/test_util.h"

namespace {

using trace::fuzz::Fail;
using trace::recorder::grammar::Grammar;
using trace::recorder::grammar::Matcher;
using trace::recorder::grammar::TokenIndex;
using ojson = nlohmann::ordered_json;

// Every byte as a token, plus merged words and specials: masks are cheap, walks reach
// every byte the grammar allows.
struct Vocabulary {
  std::unique_ptr<trace::engine::Tokenizer> tokenizer;
  std::shared_ptr<const TokenIndex> index;
  int32_t end = -1;
};

const Vocabulary& Vocab() {
  static const Vocabulary* v = [] {
    auto* out = new Vocabulary;
    auto tok = trace::engine::Tokenizer::LoadFromString(
        trace::engine::testing::MakeLlama3StyleTokenizerJson(), "fuzz/tokenizer.json");
    if (!tok.ok()) Fail("cannot load the test tokenizer: " + tok.status().message());
    out->tokenizer = std::move(tok).value();
    out->index = TokenIndex::Build(*out->tokenizer);
    auto end = out->tokenizer->TokenId("<|eot_id|>");
    if (!end) Fail("the test tokenizer has no <|eot_id|>");
    out->end = *end;
    return out;
  }();
  return *v;
}

using Rng = trace::fuzz::SplitMix64;

// `text` with every run of digits outside strings shortened to one or two digits of the
// same kind ("0" stays "0", a run with a leading zero becomes "00", any other "1"): the
// syntax is unchanged, leading zeros included, but no number is out of a double's range.
// JSON has no range limit (a schema's {"type": "number"} allows 1e999), while nlohmann
// refuses such numbers as overflow.
std::string SmallNumbers(const std::string& text) {
  std::string out;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      out += c;
      if (c == '\\' && i + 1 < text.size()) {
        out += text[++i];
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') in_string = true;
    if (c < '0' || c > '9') {
      out += c;
      continue;
    }
    size_t end = i + 1;
    while (end < text.size() && text[end] >= '0' && text[end] <= '9') ++end;
    out += c != '0' ? "1" : end - i > 1 ? "00" : "0";
    i = end - 1;
  }
  return out;
}

void Walk(const std::shared_ptr<const Grammar>& grammar, uint64_t seed) {
  const Vocabulary& v = Vocab();
  Matcher m(grammar, v.index, v.end);
  Rng rng{seed};
  std::vector<uint8_t> mask;
  std::vector<int32_t> allowed;
  std::string text;
  for (int step = 0; step < 256 && !m.Done(); ++step) {
    m.FillMask(&mask);
    allowed.clear();
    for (int32_t t = 0; t < static_cast<int32_t>(mask.size()); ++t) {
      if (mask[t]) allowed.push_back(t);
    }
    if (allowed.empty()) Fail("dead end after " + std::to_string(step) + " tokens: " + text);
    // Favour ending once the grammar allows it, so walks finish.
    int32_t pick = allowed[rng.Next() % allowed.size()];
    if (m.CanEnd() && rng.Next() % 2 == 0) pick = v.end;
    if (!m.WouldAccept(pick)) Fail("mask allows a token WouldAccept refuses, after: " + text);
    const int32_t other = static_cast<int32_t>(rng.Next() % mask.size());
    if ((mask[other] != 0) != m.WouldAccept(other)) {
      Fail("mask and WouldAccept disagree on token " + std::to_string(other) + " after: " + text);
    }
    trace::Status st = m.Advance(pick);
    if (!st.ok()) Fail("Advance refused an allowed token: " + st.message());
    if (pick != v.end) text += v.tokenizer->TokenBytes(pick);
  }
  if (!m.Done()) return;  // long outputs are cut, not judged
  if (!grammar->Accepts(text)) Fail("the reference matcher rejects the walk's output: " + text);
  if (ojson::parse(SmallNumbers(text), nullptr, false).is_discarded()) {
    Fail("output is not JSON: " + text);
  }
}

}  // namespace

std::vector<std::string> TraceFuzzSeeds() {
  return {};
}  // tests/fuzz/corpus/ holds them

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const ojson schema = ojson::parse(text, nullptr, /*allow_exceptions=*/false);
  if (schema.is_discarded()) return 0;
  uint64_t hash = 0xcbf29ce484222325ull;  // FNV-1a: the walk's choices follow the input
  for (unsigned char c : text) hash = (hash ^ c) * 0x100000001b3ull;
  for (bool strict : {false, true}) {
    trace::recorder::grammar::SchemaOptions options;
    options.strict = strict;
    auto grammar = trace::recorder::grammar::CompileJsonSchema(schema, options);
    if (!grammar.ok()) {
      trace::fuzz::RequireOneLine(grammar.status(), "CompileJsonSchema");
      continue;
    }
    Walk(*grammar, hash ^ strict);
  }
  return 0;
}
