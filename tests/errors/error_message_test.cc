// Control characters, invalid UTF-8 and huge values through every error path of the
// parsers that quote user data (tokenizer.json, tokenizer_config.json, config.json,
// generation_config.json, safetensors headers and index, chat templates, the store): each
// message is one bounded printable line, and the hostile value shows up escaped.
//
// The JSON formats are covered systematically: starting from a valid document, every node
// in turn is replaced by the hostile text and every key renamed to it, and each variant
// the parser rejects must give a clean message.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/model_config.h"
#include "engine/model_init.h"
#include "engine/safetensors.h"
#include "engine/template/chat_template.h"
#include "engine/tokenizer/tokenizer.h"
#include "store/store.h"
#include "testkit/temp_dir.h"
#include "tests/errors/hostile.h"
#include "tests/tokenizer/test_util.h"

namespace trace {
namespace {

using ojson = nlohmann::ordered_json;
using testing::HostileBytes;
using testing::HostileText;
using testing::IsOneSafeLine;
using testing::kEscapedStart;
using testing::TempDir;

// A path as a careless (or hostile) user might have one: with a newline and an ESC in it.
const std::string kOddPath = "models/\x1b[1mq\nwen/file.json";

void WriteFile(const std::string& path, const std::string& data) {
  std::ofstream(path, std::ios::binary) << data;
}

// Every document that differs from `doc` by one node replaced with the hostile text or one
// object key renamed to it, as text.
std::vector<std::string> HostileDocuments(const ojson& doc) {
  std::vector<std::string> out;
  for (const auto& [pointer, variant] : testing::HostileVariants(doc))
    out.push_back(variant.dump());
  return out;
}

// Runs `parse` on every variant; checks each error message; returns {errors, echoes}.
struct Tally {
  int errors = 0;
  int echoes = 0;  // messages that quote the hostile value (escaped)
};
Tally CheckAll(const std::vector<std::string>& inputs,
               const std::function<Status(const std::string&)>& parse) {
  Tally t;
  for (const std::string& input : inputs) {
    const Status st = parse(input);
    if (st.ok()) continue;
    ++t.errors;
    EXPECT_TRUE(IsOneSafeLine(st.message())) << st.message().substr(0, 300);
    if (st.message().find(kEscapedStart) != std::string::npos) ++t.echoes;
  }
  return t;
}

void ExpectCleanError(const Status& st, bool echoes_hostile_value = true) {
  ASSERT_FALSE(st.ok());
  EXPECT_TRUE(IsOneSafeLine(st.message())) << st.message().substr(0, 300);
  if (echoes_hostile_value) {
    EXPECT_NE(st.message().find(kEscapedStart), std::string::npos) << st.message();
  }
}

// ---- tokenizer.json / tokenizer_config.json -----------------------------------------

TEST(ErrorMessages, TokenizerJsonEveryNode) {
  const ojson doc = ojson::parse(engine::testing::MakeLlama3StyleTokenizerJson());
  const Tally t = CheckAll(HostileDocuments(doc), [](const std::string& text) {
    auto r = engine::Tokenizer::LoadFromString(text, kOddPath);
    return r.ok() ? Status::Ok() : r.status();
  });
  EXPECT_GT(t.errors, 100);
  EXPECT_GT(t.echoes, 100);  // vocab keys, merges, types, behaviours...
}

// The places BuildModel and its helpers quote a value from the file.
TEST(ErrorMessages, TokenizerJsonQuotedValues) {
  const ojson base = ojson::parse(engine::testing::MakeLlama3StyleTokenizerJson());
  const std::string h = HostileText();
  std::vector<std::function<void(ojson&)>> edits = {
      [&](ojson& j) { j["model"]["type"] = h; },
      [&](ojson& j) { j["model"]["vocab"][h] = 5; },  // not byte-level
      [&](ojson& j) {
        j["model"]["vocab"].erase("a");
        j["model"]["vocab"]["a" + h] = "x";  // not a token id; erase keeps the order useful
      },
      [&](ojson& j) { j["pre_tokenizer"]["pretokenizers"][0]["behavior"] = h; },
      [&](ojson& j) { j["pre_tokenizer"]["pretokenizers"][0]["type"] = h; },
      [&](ojson& j) {
        j["normalizer"] = {{"type", h}};
      },
      [&](ojson& j) { j["decoder"]["type"] = h; },
  };
  for (size_t i = 0; i < edits.size(); ++i) {
    ojson j = base;
    edits[i](j);
    auto r = engine::Tokenizer::LoadFromString(j.dump(), kOddPath);
    SCOPED_TRACE("edit " + std::to_string(i));
    ExpectCleanError(r.ok() ? Status::Ok() : r.status());
  }
  // Bytes that are not JSON: the parser's message quotes them.
  auto r = engine::Tokenizer::LoadFromString("{\"model\": \"" + HostileBytes(), kOddPath);
  ExpectCleanError(r.ok() ? Status::Ok() : r.status(), /*echoes_hostile_value=*/false);
}

TEST(ErrorMessages, TokenizerConfigAddedTokensDecoder) {
  TempDir dir;
  WriteFile(dir.file("tokenizer.json"), engine::testing::MakeLlama3StyleTokenizerJson());
  ojson config = {{"added_tokens_decoder", {{HostileText(), {{"content", "x"}}}}}};
  WriteFile(dir.file("tokenizer_config.json"), config.dump());
  auto r = engine::Tokenizer::Load(dir.file("tokenizer.json"));
  ExpectCleanError(r.ok() ? Status::Ok() : r.status());
  auto missing = engine::Tokenizer::Load(dir.path() + "/" + kOddPath);
  ExpectCleanError(missing.ok() ? Status::Ok() : missing.status(), false);
}

// ---- config.json / generation_config.json --------------------------------------------

TEST(ErrorMessages, ModelConfigEveryNode) {
  auto preset = engine::PresetConfig("tiny");
  ASSERT_TRUE(preset.ok());
  ojson doc = ojson::parse(engine::ModelConfigToJson(*preset));
  doc["rope_scaling"] = {{"rope_type", "default"}};
  const Tally t = CheckAll(HostileDocuments(doc), [](const std::string& text) {
    auto r = engine::ParseModelConfig(text, kOddPath);
    return r.ok() ? Status::Ok() : r.status();
  });
  EXPECT_GT(t.errors, 15);
  EXPECT_GE(t.echoes, 3);  // model_type, torch_dtype, rope_type
  const Tally g = CheckAll(HostileDocuments(ojson::parse(R"({"eos_token_id": [1, 2]})")),
                           [](const std::string& text) {
                             engine::ModelConfig c;
                             return engine::MergeGenerationConfig(text, kOddPath, &c);
                           });
  EXPECT_GT(g.errors, 2);
}

// Llama 3's rope_scaling: written by `trace model init` and read back the same; every node of
// it hostile gives a clean one-line error; other scalings and missing fields are named.
TEST(ErrorMessages, ModelConfigLlama3RopeScaling) {
  auto preset = engine::PresetConfig("llama3-tiny");
  ASSERT_TRUE(preset.ok());
  const std::string text = engine::ModelConfigToJson(*preset);
  auto back = engine::ParseModelConfig(text, kOddPath);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->rope_scaling.type, kernels::RopeScaling::Type::kLlama3);
  EXPECT_EQ(back->rope_scaling.factor, 32.0);
  EXPECT_EQ(back->rope_scaling.low_freq_factor, 1.0);
  EXPECT_EQ(back->rope_scaling.high_freq_factor, 4.0);
  EXPECT_EQ(back->rope_scaling.original_max_position_embeddings, 8192.0);
  EXPECT_EQ(back->rope_theta, 500000.0);
  const Tally t = CheckAll(HostileDocuments(ojson::parse(text)), [](const std::string& doc) {
    auto r = engine::ParseModelConfig(doc, kOddPath);
    return r.ok() ? Status::Ok() : r.status();
  });
  EXPECT_GT(t.errors, 15);
  struct Case {
    const char* edit;
    const char* says;
  } cases[] = {
      {R"({"rope_type": "yarn", "factor": 4.0})",
       "field 'rope_scaling' (yarn) is not supported (supported: llama3, linear, default)"},
      {R"({"rope_type": "llama3", "low_freq_factor": 1, "high_freq_factor": 4,
           "original_max_position_embeddings": 8192})",
       "rope_scaling (llama3): field 'factor' is missing or not a finite number"},
      {R"({"rope_type": "llama3", "factor": 8, "low_freq_factor": 4, "high_freq_factor": 1,
           "original_max_position_embeddings": 8192})",
       "0 < low_freq_factor < high_freq_factor"},
      // Past any context (a model_config_fuzz finding: it overflowed ModelConfigToJson's
      // integer write).
      {R"({"rope_type": "llama3", "factor": 8, "low_freq_factor": 1, "high_freq_factor": 4,
           "original_max_position_embeddings": 1e308})",
       "original_max_position_embeddings in 1..67108864"},
  };
  for (const Case& c : cases) {
    ojson doc = ojson::parse(text);
    doc["rope_scaling"] = ojson::parse(c.edit);
    auto r = engine::ParseModelConfig(doc.dump(), kOddPath);
    ASSERT_FALSE(r.ok()) << c.edit;
    EXPECT_NE(r.status().message().find(c.says), std::string::npos) << r.status().message();
    ExpectCleanError(r.status(), /*echoes_hostile_value=*/false);
  }
}

// Mistral: its sliding_window honoured (null; shorter than the context: every layer slides;
// no shorter: nothing to slide) or refused with a one-line error.
TEST(ErrorMessages, ModelConfigMistralSlidingWindow) {
  auto preset = engine::PresetConfig("mistral-tiny");
  ASSERT_TRUE(preset.ok());
  ojson doc = ojson::parse(engine::ModelConfigToJson(*preset));
  EXPECT_TRUE(doc["sliding_window"].is_null());
  EXPECT_EQ(doc["architectures"][0], "MistralForCausalLM");
  ASSERT_TRUE(engine::ParseModelConfig(doc.dump(), kOddPath).ok());
  doc["sliding_window"] = doc["max_position_embeddings"];
  auto r = engine::ParseModelConfig(doc.dump(), kOddPath);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->sliding_window, 0);
  doc["sliding_window"] = 4096;
  r = engine::ParseModelConfig(doc.dump(), kOddPath);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->sliding_window, 4096);
  for (const ojson& bad : {ojson("wide"), ojson(0), ojson(-5)}) {
    doc["sliding_window"] = bad;
    r = engine::ParseModelConfig(doc.dump(), kOddPath);
    ASSERT_FALSE(r.ok()) << bad.dump();
    EXPECT_NE(
        r.status().message().find("field 'sliding_window' must be a positive integer or null"),
        std::string::npos)
        << r.status().message();
    ExpectCleanError(r.status(), /*echoes_hostile_value=*/false);
  }
}

// Gemma 3: what the text model does not run is refused, naming the field.
TEST(ErrorMessages, ModelConfigGemma3Refusals) {
  auto preset = engine::PresetConfig("gemma3-tiny");
  ASSERT_TRUE(preset.ok());
  const ojson good = ojson::parse(engine::ModelConfigToJson(*preset));
  ASSERT_TRUE(engine::ParseModelConfig(good.dump(), kOddPath).ok());
  struct Case {
    const char* key;
    ojson value;
    const char* says;
  };
  const Case cases[] = {
      {"attn_logit_softcapping", 50.0, "field 'attn_logit_softcapping' (Gemma 2's attention"},
      {"final_logit_softcapping", -1.0, "field 'final_logit_softcapping' must be null or a"},
      {"hidden_activation", "relu", "field 'hidden_activation' is \"relu\""},
      {"layer_types", ojson::array({"full_attention"}), "must list one type per layer (2)"},
      {"layer_types", ojson::array({"full_attention", "chunked_attention"}),
       "holds \"chunked_attention\""},
      {"query_pre_attn_scalar", 0, "field 'query_pre_attn_scalar' must be positive"},
      {"use_bidirectional_attention", true, "field 'use_bidirectional_attention'"},
      {"model_type", "gemma3", "model_type gemma3 needs a 'text_config' object"},
      {"rope_scaling", ojson{{"rope_type", "linear"}, {"factor", 0.5}},
       "rope_scaling (linear): field 'factor' must be a number >= 1"},
      {"rope_scaling", ojson{{"rope_type", "yarn"}, {"factor", 4}},
       "field 'rope_scaling' (yarn) is not supported (supported: llama3, linear, default)"},
  };
  for (const Case& c : cases) {
    ojson doc = good;
    doc[c.key] = c.value;
    auto r = engine::ParseModelConfig(doc.dump(), kOddPath);
    ASSERT_FALSE(r.ok()) << c.key;
    EXPECT_NE(r.status().message().find(c.says), std::string::npos) << r.status().message();
    ExpectCleanError(r.status(), /*echoes_hostile_value=*/false);
  }
}

// ---- safetensors -------------------------------------------------------------------------

std::string SafetensorsFile(const std::string& header, size_t data_bytes) {
  std::string h = header;
  while (h.size() % 8 != 0) h.push_back(' ');
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((h.size() >> (8 * i)) & 0xff);
  return out + h + std::string(data_bytes, '\0');
}

TEST(ErrorMessages, SafetensorsHeaderEveryNode) {
  const ojson doc = ojson::parse(
      R"({"__metadata__": {"format": "pt"}, "w": {"dtype": "BF16", "shape": [2, 2],)"
      R"( "data_offsets": [0, 8]}, "b": {"dtype": "F32", "shape": [1], "data_offsets": [8, 12]}})");
  const Tally t = CheckAll(HostileDocuments(doc), [](const std::string& header) {
    const std::string file = SafetensorsFile(header, 12);
    auto r = engine::ParseSafetensorsHeader(reinterpret_cast<const uint8_t*>(file.data()),
                                            file.size(), kOddPath);
    return r.ok() ? Status::Ok() : r.status();
  });
  EXPECT_GT(t.errors, 10);
  EXPECT_GE(t.echoes, 3);  // tensor names, dtype
  // Raw bytes in the header.
  const std::string raw = SafetensorsFile("{\"" + HostileBytes() + "\": 1}", 0);
  auto r = engine::ParseSafetensorsHeader(reinterpret_cast<const uint8_t*>(raw.data()), raw.size(),
                                          kOddPath);
  ExpectCleanError(r.ok() ? Status::Ok() : r.status(), false);
}

TEST(ErrorMessages, ModelFolderIndexAndMissingFiles) {
  TempDir dir;
  auto preset = engine::PresetConfig("tiny");
  ASSERT_TRUE(preset.ok());
  WriteFile(dir.file("config.json"), engine::ModelConfigToJson(*preset));
  ojson index = {{"weight_map", {{HostileText(), 5}}}};
  WriteFile(dir.file("model.safetensors.index.json"), index.dump());
  auto r = engine::Model::Load(dir.path(), false);
  ExpectCleanError(r.ok() ? Status::Ok() : r.status());
  // A shard file name with control characters: the path is clipped at its start, so the
  // message ends with the name's tail and the reason.
  index = {{"weight_map", {{"model.norm.weight", "x" + HostileText()}}}};
  WriteFile(dir.file("model.safetensors.index.json"), index.dump());
  r = engine::Model::Load(dir.path(), false);
  ExpectCleanError(r.ok() ? Status::Ok() : r.status(), false);
  EXPECT_NE(r.status().message().find("zzz: cannot open"), std::string::npos);
  r = engine::Model::Load(dir.path() + "/" + kOddPath, false);
  ExpectCleanError(r.ok() ? Status::Ok() : r.status(), false);
}

// ---- chat templates ------------------------------------------------------------------

TEST(ErrorMessages, ChatTemplates) {
  const std::string h = HostileText();
  const std::string raw = HostileBytes();
  struct Case {
    std::string source;
    bool echoes;
  };
  const std::vector<Case> cases = {
      {"{{ " + raw + " }}", false},                         // lexer: unexpected character
      {"{{ raise_exception('" + h + "') }}", true},         // the template's own message
      {"{{ x['" + h + "'].y }}", true},                     // undefined attribute
      {"{{ [1, 2].index('" + h + "') }}", true},            // ToPyRepr of the value
      {"{{ 1 | " + std::string(5000, 'f') + " }}", false},  // unknown filter, huge name
      {"{{ " + std::string(5000, '9') + " }}", false},      // integer literal out of range
      {"{% for " + raw + " %}", false},
      {"{{ messages[0].content.nope() }}", false},
      {"{{ messages[0].content ~ (1 / 0) }}", false},
      {"{% if %}" + raw, false},
      {"{{ '" + h + "' + 1 }}", false},
  };
  const ojson messages = ojson::array({{{"role", "user"}, {"content", h}}});
  const ojson kwargs = {{"x", ojson::object()}};
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE("case " + std::to_string(i));
    auto t = engine::ChatTemplate::Parse(cases[i].source, kOddPath);
    if (!t.ok()) {
      ExpectCleanError(t.status(), cases[i].echoes);
      continue;
    }
    auto out = (*t)->RenderOrdered(messages, nullptr, true, kwargs);
    ExpectCleanError(out.ok() ? Status::Ok() : out.status(), cases[i].echoes);
  }
  // tokenizer_config.json that cannot be found or read.
  auto missing = engine::ChatTemplate::FromTokenizerConfig("/nonexistent/" + kOddPath);
  ExpectCleanError(missing.ok() ? Status::Ok() : missing.status(), false);
}

// ---- the store -----------------------------------------------------------------------

TEST(ErrorMessages, StoreRunIdsAndSchemaVersion) {
  TempDir dir;
  const std::string path = dir.file("traces.db");
  {
    auto st = store::Store::Open(path);
    ASSERT_TRUE(st.ok());
    auto id = (*st)->ResolveRunId(HostileText());
    ExpectCleanError(id.ok() ? Status::Ok() : id.status());
    proto::RunHeader header;
    header.set_run_id(HostileText());
    auto w = (*st)->BeginRun(header);
    ExpectCleanError(w.ok() ? Status::Ok() : w.status());
  }
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  sqlite3_stmt* stmt = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db, "UPDATE meta SET value=? WHERE key='schema_version'", -1, &stmt,
                               nullptr),
            SQLITE_OK);
  const std::string v = HostileText();
  sqlite3_bind_text(stmt, 1, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
  EXPECT_EQ(sqlite3_step(stmt), SQLITE_DONE);
  sqlite3_finalize(stmt);
  sqlite3_close(db);
  auto st = store::Store::Open(path);
  ExpectCleanError(st.ok() ? Status::Ok() : st.status());
}

}  // namespace
}  // namespace trace
