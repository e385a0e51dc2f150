// A GGUF file through the `trace` binary, as a user runs it: `trace record --model FILE.gguf`
// records the same calls (rendered prompt, prompt ids, sampled ids) as the same model's
// Hugging Face folder, `trace replay` reproduces the run bit for bit, `trace tokenize`,
// `trace template` and `trace model info` read the file, the same on a Q8_0 file, and a
// quantization not supported yet is refused with one line naming its tensor.
#include <nlohmann/json.hpp>

#include "base/hash.h"
#include "engine/model_init.h"
#include "engine_test_util.h"
#include "gguf_convert.h"

namespace trace::engine {
namespace {

using json = nlohmann::json;
using testing::RunTrace;

constexpr const char* kAgent = R"(
import json, os, urllib.request
base, key, model = os.environ["OPENAI_BASE_URL"], os.environ["OPENAI_API_KEY"], os.environ["OPENAI_MODEL"]
def post(path, body):
    req = urllib.request.Request(base + path, data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "Authorization": "Bearer " + key})
    return json.loads(urllib.request.urlopen(req).read())
post("/chat/completions", {"model": model, "max_tokens": 10, "seed": 3, "temperature": 0.7,
     "messages": [{"role": "system", "content": "Be brief."},
                  {"role": "user", "content": "Hi <think> there, caf\u00e9 \U0001F642"}]})
post("/chat/completions", {"model": model, "max_tokens": 6, "temperature": 0,
     "messages": [{"role": "user", "content": "Count to three."}]})
)";

// The model calls of the only run in `store`.
json Calls(const std::string& store, const std::string& scratch, std::string* run_id) {
  auto ls = RunTrace("--store " + store + " ls --json", scratch);
  EXPECT_EQ(ls.exit_code, 0) << ls.err;
  const json runs = json::parse(ls.out);
  EXPECT_EQ(runs.size(), 1u);
  *run_id = runs[0]["run_id"];
  auto exported = RunTrace("--store " + store + " export " + *run_id + " --no-redact", scratch);
  EXPECT_EQ(exported.exit_code, 0) << exported.err;
  json calls = json::array();
  const json doc = json::parse(exported.out);
  EXPECT_TRUE(doc.contains("events")) << exported.out.substr(0, 400);
  for (const json& e : doc["events"]) {
    if (e.contains("llm_call")) calls.push_back(e["llm_call"]);
  }
  return calls;
}

TEST(GgufCli, RecordReplayTokenizeTemplateAndInfoOnAGgufFile) {
  testing::TempDir tmp;
  const std::string s = tmp.path();
  ASSERT_TRUE(InitModel("tiny", 23, s + "/tiny").ok());
  testing::ConvertToGguf(s + "/tiny", s + "/tiny.gguf", {testing::MatrixType::kBF16, "qwen2"});
  testing::WriteAll(s + "/agent.py", kAgent);

  std::string folder_run, gguf_run;
  for (const char* model : {"tiny", "tiny.gguf"}) {
    auto rec = RunTrace("--store " + s + "/" + model + ".db record --model " + s + "/" + model +
                            " -- python3 " + s + "/agent.py",
                        s);
    ASSERT_EQ(rec.exit_code, 0) << rec.err;
    EXPECT_EQ(rec.err.find("Traceback"), std::string::npos) << model << ": " << rec.err;
  }
  const json folder = Calls(s + "/tiny.db", s, &folder_run);
  const json gguf = Calls(s + "/tiny.gguf.db", s, &gguf_run);
  ASSERT_EQ(folder.size(), 2u);
  ASSERT_EQ(gguf.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(gguf[i]["rendered_prompt"], folder[i]["rendered_prompt"]) << i;
    EXPECT_EQ(gguf[i]["prompt_token_ids"], folder[i]["prompt_token_ids"]) << i;
    EXPECT_EQ(gguf[i]["token_ids"], folder[i]["token_ids"]) << "same logits, same draws: " << i;
    EXPECT_FALSE(gguf[i]["token_ids"].empty());
  }

  auto replay = RunTrace("--store " + s + "/tiny.gguf.db replay " + gguf_run + " --json", s);
  ASSERT_EQ(replay.exit_code, 0) << replay.err << replay.out;
  EXPECT_EQ(json::parse(replay.out)["level"], "bitwise") << replay.out;

  // A Q8_0 file: recorded and replayed bit for bit (CPU; its kernels stream the blocks).
  testing::ConvertToGguf(s + "/tiny", s + "/q8.gguf", {testing::MatrixType::kQ8_0, "qwen2"});
  auto rec_q8 = RunTrace(
      "--store " + s + "/q8.db record --model " + s + "/q8.gguf -- python3 " + s + "/agent.py", s);
  ASSERT_EQ(rec_q8.exit_code, 0) << rec_q8.err;
  std::string q8_run;
  const json q8 = Calls(s + "/q8.db", s, &q8_run);
  ASSERT_EQ(q8.size(), 2u);
  EXPECT_EQ(q8[0]["prompt_token_ids"], folder[0]["prompt_token_ids"]);
  auto replay_q8 = RunTrace("--store " + s + "/q8.db replay " + q8_run + " --json", s);
  ASSERT_EQ(replay_q8.exit_code, 0) << replay_q8.err << replay_q8.out;
  EXPECT_EQ(json::parse(replay_q8.out)["level"], "bitwise") << replay_q8.out;

  // A K-quant file (Q4_K, Q5_K, Q6_K: tiny with matrices 256 wide, whole super-blocks), and
  // Q5_0 / Q4_1 / Q5_1 files: recorded and replayed bit for bit through the engine's records.
  ASSERT_TRUE(InitModelFromConfig(testing::KQuantTinyConfig(), 23, s + "/wide", 1, "tiny").ok());
  const std::pair<const char*, testing::MatrixType> quantized[] = {
      {"kq", testing::MatrixType::kKQuants},
      {"q5_0", testing::MatrixType::kQ5_0},
      {"q4_1", testing::MatrixType::kQ4_1},
      {"q5_1", testing::MatrixType::kQ5_1}};
  for (const auto& [name, type] : quantized) {
    const std::string file = s + "/" + name + ".gguf", store = s + "/" + name + ".db";
    testing::ConvertToGguf(s + "/wide", file, {type, "qwen2"});
    auto rec = RunTrace(
        "--store " + store + " record --model " + file + " -- python3 " + s + "/agent.py", s);
    ASSERT_EQ(rec.exit_code, 0) << name << ": " << rec.err;
    std::string run;
    const json calls = Calls(store, s, &run);
    ASSERT_EQ(calls.size(), 2u) << name;
    EXPECT_EQ(calls[0]["prompt_token_ids"], folder[0]["prompt_token_ids"]) << name;
    auto again = RunTrace("--store " + store + " replay " + run + " --json", s);
    ASSERT_EQ(again.exit_code, 0) << name << ": " << again.err << again.out;
    EXPECT_EQ(json::parse(again.out)["level"], "bitwise") << name << ": " << again.out;
  }

  auto tok_gguf = RunTrace("tokenize --model " + s + "/tiny.gguf --json 'Hello, <|im_end|> w'", s);
  auto tok_dir = RunTrace("tokenize --model " + s + "/tiny --json 'Hello, <|im_end|> w'", s);
  ASSERT_EQ(tok_gguf.exit_code, 0) << tok_gguf.err;
  EXPECT_EQ(tok_gguf.out, tok_dir.out);

  testing::WriteAll(s + "/messages.json", R"([{"role": "user", "content": "hi"}])");
  auto tmpl_gguf = RunTrace("template --model " + s + "/tiny.gguf " + s + "/messages.json", s);
  auto tmpl_dir = RunTrace("template --model " + s + "/tiny " + s + "/messages.json", s);
  ASSERT_EQ(tmpl_gguf.exit_code, 0) << tmpl_gguf.err;
  EXPECT_EQ(tmpl_gguf.out, tmpl_dir.out);

  auto info = RunTrace("model info " + s + "/tiny.gguf --json", s);
  ASSERT_EQ(info.exit_code, 0) << info.err;
  const json j = json::parse(info.out);
  EXPECT_EQ(j["architecture"], "qwen3");
  EXPECT_EQ(j["weight_files"], json::array({"tiny.gguf"}));
  EXPECT_EQ(j["fingerprint"]["weights_sha256"], Sha256Hex(testing::ReadAll(s + "/tiny.gguf")));
  EXPECT_EQ(j["gguf"]["version"], 3);
  EXPECT_GT(j["gguf"]["tensor_types"]["BF16"].get<int>(), 0);
  EXPECT_GT(j["gguf"]["tensor_types"]["F32"].get<int>(), 0);
}

TEST(GgufCli, AnUnsupportedQuantizationIsRefusedNamingTheTensor) {
  testing::TempDir tmp;
  testing::WriteAll(tmp.path() + "/q2k.gguf", testing::Q2KFile("qwen2"));
  auto r = RunTrace("generate --model " + tmp.path() + "/q2k.gguf --prompt hi", tmp.path());
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("q2k.gguf: tensor 'token_embd.weight' is Q2_K: this quantization is not "
                       "supported yet"),
            std::string::npos)
      << r.err;
}

}  // namespace
}  // namespace trace::engine
