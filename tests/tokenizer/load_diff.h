// The differential check of the streaming tokenizer.json reader: one input loaded by
// Tokenizer::LoadFromString and by the whole-document DOM oracle (dom_oracle.h) must give
// the same Status (code and message) or tokenizers with the same tables and the same
// encodings and decodings of a fixed set of strings.
//
// Ownership: values. Thread safety: safe to call from many threads (loads are independent).
// Errors: a difference is returned as a description (empty: none).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/tokenizer_testing.h"
#include "tests/tokenizer/dom_oracle.h"
#include "tests/tokenizer/test_util.h"

namespace trace::engine::testing {

inline std::string IdsText(const std::vector<int32_t>& ids) {
  std::string out;
  for (int32_t id : ids) out += std::to_string(id) + " ";
  return out;
}

// Tables, encodings and decodings of two loaded tokenizers; empty when equal.
inline std::string CompareTokenizers(const Tokenizer& streaming, const Tokenizer& dom) {
  const std::string a = DumpTokenizerTablesForTesting(streaming);
  const std::string b = DumpTokenizerTablesForTesting(dom);
  if (a.empty() || b.empty()) return "a tokenizer dumped no tables";
  if (a != b) {
    size_t at = 0;
    while (at < a.size() && at < b.size() && a[at] == b[at]) ++at;
    const size_t from = at < 80 ? 0 : at - 80;
    return "tables differ at byte " + std::to_string(at) + ": streaming ..." + a.substr(from, 160) +
           "... dom ..." + b.substr(from, 160) + "...";
  }
  for (const char* s :
       {"Hello world, it's 123456 <|eot_id|> a <tag> b \xF0\x9F\x98\x80 \xFF", "",
        "  the model's tokens:\n\n\tabc ABC 2024 replay\r\n",
        "a\xCC\x81 caf\xC3\xA9 \xE4\xBD\xA0\xE5\xA5\xBD",
        "<|im_start|>user\nhi<|im_end|> <think>x</think>", "aaaaaaaaaaaaaaaaaaaaabababab"}) {
    const std::vector<int32_t> x = streaming.Encode(s);
    const std::vector<int32_t> y = dom.Encode(s);
    if (x != y) {
      return "Encode(\"" + std::string(s) + "\") differs: " + IdsText(x) + "vs " + IdsText(y);
    }
    if (streaming.Decode(x) != dom.Decode(y) || streaming.Decode(x, true) != dom.Decode(y, true)) {
      return "Decode of Encode(\"" + std::string(s) + "\") differs";
    }
  }
  return "";
}

// Loads `text` both ways; empty when both give the same Status or the same tokenizer.
// *loaded and *error (optional) say whether it loaded and, if not, the message.
inline std::string CompareLoads(std::string_view text, bool* loaded = nullptr,
                                std::string* error = nullptr) {
  auto streaming = Tokenizer::LoadFromString(text, "fuzz.json");
  auto dom = DomOracleLoadFromString(text, "fuzz.json");
  if (loaded != nullptr) *loaded = streaming.ok();
  if (error != nullptr) *error = streaming.ok() ? "" : streaming.status().message();
  if (streaming.ok() != dom.ok()) {
    return std::string("one loader failed: streaming ") +
           (streaming.ok() ? "ok" : streaming.status().ToString()) + ", dom " +
           (dom.ok() ? "ok" : dom.status().ToString());
  }
  if (!streaming.ok()) {
    if (streaming.status().code() != dom.status().code() ||
        streaming.status().message() != dom.status().message()) {
      return "errors differ: streaming " + streaming.status().ToString() + ", dom " +
             dom.status().ToString();
    }
    return "";
  }
  return CompareTokenizers(**streaming, **dom);
}

// A small tokenizer.json around a model object given as text.
inline std::string LoadDiffDoc(const std::string& model, const std::string& extra = "") {
  return "{" + extra + "\"model\":" + model +
         ",\"pre_tokenizer\":{\"type\":\"ByteLevel\",\"add_prefix_space\":true},"
         "\"decoder\":{\"type\":\"ByteLevel\"},\"normalizer\":{\"type\":\"NFC\"},"
         "\"added_tokens\":[{\"id\":9,\"content\":\"<s>\",\"special\":true},"
         "{\"id\":10,\"content\":\"ab\",\"lstrip\":true}]}";
}

// Seeds of the differential checks: the Llama-3-style tokenizer.json and small documents
// aimed at the streaming loader's special cases (duplicated keys at every level, vocab
// values and merge elements of every JSON type, "model" and "vocab" in other places).
inline std::vector<std::string> LoadDiffSeeds() {
  const std::string vocab =
      "{\"a\":0,\"b\":1,\"ab\":2,\"c\":3,\"abc\":4,\"\xC4\xA0\":5,\"\xC4\xA0"
      "a\":6}";
  return {
      MakeLlama3StyleTokenizerJson(true),
      MakeLlama3StyleTokenizerJson(false),
      MakeLlama3StyleTokenizerJson(false, true),
      // "a b" merges (a third part ignored), unk_token, ignore_merges, duplicated vocab keys.
      LoadDiffDoc("{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1,\"ab\":2,\"b\":7,\"c\":3,\"abc\":4,"
                  "\"\xC4\xA0\":5,\"\xC4\xA0"
                  "a\":6},\"merges\":[\"a b\",\"ab c x\",\"\xC4\xA0 a\"],"
                  "\"unk_token\":\"c\",\"ignore_merges\":true}"),
      // Two keys with one id; a merge listed twice.
      LoadDiffDoc("{\"type\":\"BPE\",\"vocab\":{\"b\":0,\"a\":0,\"ab\":1,\"c\":2},"
                  "\"merges\":[[\"a\",\"b\"],[\"a\",\"b\"],\"a b\"]}"),
      // "model", "vocab" and "merges" duplicated: the last one wins.
      LoadDiffDoc("{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[]}",
                  "\"model\":{\"vocab\":{\"x\":1},"
                  "\"merges\":[[\"x\",\"x\"]],\"type\":\"BPE\"},"),
      LoadDiffDoc("{\"type\":\"BPE\",\"vocab\":{\"zz\":5},\"merges\":[[\"q\",\"q\"]],\"vocab\":" +
                  vocab + ",\"merges\":[[\"a\",\"b\"],\"ab c\"]}"),
      LoadDiffDoc("{\"type\":\"BPE\",\"vocab\":[1,2],\"vocab\":" + vocab +
                  ",\"merges\":{\"a\":1},\"merges\":[[\"a\",\"b\"]]}"),
      LoadDiffDoc("{\"type\":\"BPE\",\"vocab\":" + vocab +
                  ",\"vocab\":7,\"merges\":[],\"merges\":\"x\"}"),
      LoadDiffDoc("{\"type\":\"BPE\"}",
                  "\"model\":{\"type\":\"BPE\",\"vocab\":" + vocab + ",\"merges\":[]},"),
      // Vocab values and merge elements of every JSON type.
      LoadDiffDoc("{\"type\":\"BPE\",\"vocab\":{\"a\":1.0,\"b\":\"2\",\"c\":null,\"d\":[1,[2]],"
                  "\"e\":{\"x\":{\"y\":1}},\"f\":true,\"g\":18446744073709551615,\"h\":-1,"
                  "\"i\":16000001,\"j\":16000000,\"k\":9223372036854775808},\"merges\":[]}"),
      LoadDiffDoc("{\"type\":\"BPE\",\"vocab\":" + vocab +
                  ",\"merges\":[[\"a\",\"b\"],[\"a\",\"b\",\"c\"],[\"a\"],[[\"a\"],\"b\"],[\"a\",{"
                  "\"b\":1}],"
                  "{\"a\":\"b\"},5,null,\"ab\",[],[\"a\",2]]}"),
      // "model" not an object, and "model" / "vocab" where they are not the model's.
      LoadDiffDoc("[{\"type\":\"BPE\",\"vocab\":" + vocab + ",\"merges\":[]}]"),
      LoadDiffDoc(
          "{\"type\":\"BPE\",\"vocab\":" + vocab + ",\"merges\":[],\"model\":{\"vocab\":{}}}",
          "\"normalizer\":{\"model\":{\"vocab\":{\"q\":1},\"merges\":[1]}},"),
      "[{\"model\":{\"type\":\"BPE\",\"vocab\":{},\"merges\":[]}}]",
      // Keys that need escapes and sort differently as bytes.
      LoadDiffDoc("{\"type\":\"BPE\",\"vocab\":{\"\\u00e9\":0,\"\\u0000\":1,\"\xC3\xA9\":2,"
                  "\"\\u00c4\\u00a0\":3,"
                  "\"~\":4,\"\xC5\x82\":5},\"merges\":[\"\\u0000 \xC5\x82\"]}"),
  };
}

}  // namespace trace::engine::testing
