// End-to-end: `trace model init`, `trace model info`, `trace logits` and `trace generate`
// run as a user runs them, checked against the engine's own results.

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <span>
#include <sstream>

#include "base/hash.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine_test_util.h"

namespace trace::engine {
namespace {

using testing::Ran;
using testing::RunTrace;

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = tmp_.path() + "/tiny";
    Ran init = RunTrace("model init --preset tiny --seed 7 " + dir_, tmp_.path());
    ASSERT_EQ(init.exit_code, 0) << init.err;
  }
  testing::TempDir tmp_;
  std::string dir_;
};

TEST_F(CliTest, ModelInfoJsonMatchesTheLoadedModel) {
  Ran info = RunTrace("model info --json " + dir_, tmp_.path());
  ASSERT_EQ(info.exit_code, 0) << info.err;
  auto j = nlohmann::json::parse(info.out);
  auto model = Model::Load(dir_);
  ASSERT_TRUE(model.ok());
  EXPECT_EQ(j["architecture"], "qwen3");
  EXPECT_EQ(j["parameters"].get<int64_t>(), (*model)->fingerprint().parameter_count);
  EXPECT_EQ(j["fingerprint"]["weights_sha256"], *Sha256File(dir_ + "/model.safetensors"));
  EXPECT_EQ(j["num_kv_heads"].get<int64_t>(), (*model)->config().num_kv_heads);
}

// An MoE preset through the CLI: model info names the mixture, and `trace logits` on it gives
// the engine's digest (the logits of an MoE model, routed on the CPU).
TEST_F(CliTest, MoePresetInfoAndLogits) {
  const std::string moe = tmp_.path() + "/moe";
  Ran init = RunTrace("model init --preset qwen3-moe-a3b-narrow --seed 2 " + moe, tmp_.path());
  ASSERT_EQ(init.exit_code, 0) << init.err;
  Ran info = RunTrace("model info --json --no-hash " + moe, tmp_.path());
  ASSERT_EQ(info.exit_code, 0) << info.err;
  auto j = nlohmann::json::parse(info.out);
  EXPECT_EQ(j["architecture"], "qwen3_moe");
  EXPECT_EQ(j["moe"]["num_experts"], 128);
  EXPECT_EQ(j["moe"]["num_experts_per_tok"], 8);
  EXPECT_EQ(j["moe"]["moe_layers"], 2);
  EXPECT_TRUE(j["moe"]["norm_topk_prob"].get<bool>());
  Ran text = RunTrace("model info --no-hash " + moe, tmp_.path());
  EXPECT_NE(text.out.find("experts        128 per MoE layer (2 of 2 layers), top 8"),
            std::string::npos)
      << text.out;

  Ran r = RunTrace("logits --model " + moe + " --tokens 9707,11,1879,0 --json", tmp_.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto engine = testing::EngineOrDie(testing::LoadOrDie(moe), kernels::Numerics::kCanonical,
                                     kernels::Impl::kAuto, 1);
  std::vector<int32_t> tokens = {9707, 11, 1879, 0};
  BatchItem item{engine->NewSequence(), tokens, {3}};
  ForwardOutput out;
  ASSERT_TRUE(engine->Forward(std::span<const BatchItem>(&item, 1), &out).ok());
  EXPECT_EQ(nlohmann::json::parse(r.out)["digest"], DigestHex(LogitsDigest(out.row(0))));
}

TEST_F(CliTest, LogitsAllJsonReadsBackToTheEnginesBits) {
  Ran r = RunTrace("logits --model " + dir_ + " --tokens 9707,11,1879,0 --all --json --top 3",
                   tmp_.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  auto model = testing::LoadOrDie(dir_);
  auto engine = testing::EngineOrDie(model, kernels::Numerics::kCanonical, kernels::Impl::kAuto, 1);
  std::vector<int32_t> tokens = {9707, 11, 1879, 0};
  BatchItem item{engine->NewSequence(), tokens, {3}};
  ForwardOutput out;
  ASSERT_TRUE(engine->Forward(std::span<const BatchItem>(&item, 1), &out).ok());
  EXPECT_EQ(j["tokens"].get<std::vector<int32_t>>(), tokens);
  EXPECT_EQ(j["digest"], DigestHex(LogitsDigest(out.row(0))));
  std::vector<float> printed;
  for (const auto& v : j["logits"]) printed.push_back(static_cast<float>(v.get<double>()));
  EXPECT_EQ(testing::Bits(printed), testing::Bits(out.row(0)));
  ASSERT_EQ(j["top"].size(), 3u);
  EXPECT_GE(j["top"][0]["logit"].get<double>(), j["top"][1]["logit"].get<double>());

  // The text form prints %.9g: also exact.
  Ran text = RunTrace("logits --model " + dir_ + " --tokens 9707,11,1879,0 --all", tmp_.path());
  ASSERT_EQ(text.exit_code, 0) << text.err;
  std::istringstream lines(text.out);
  std::string line;
  std::getline(lines, line);  // "# tokens ..."
  size_t id = 0;
  float parsed;
  while (lines >> id >> parsed) {
    ASSERT_LT(id, out.row(0).size());
    ASSERT_EQ(std::memcmp(&parsed, &out.row(0)[id], 4), 0) << "logit " << id;
  }
  EXPECT_EQ(id + 1, out.row(0).size());
}

// Token pieces are user data on a terminal line: `trace logits` escapes them like every
// other message (base/escape.h), so a vocabulary's bidirectional controls (Qwen3 has
// " \u202b", RIGHT-TO-LEFT EMBEDDING) and C1 controls cannot reorder or restyle the table.
TEST_F(CliTest, LogitsTableEscapesTokenPiecesForTheTerminal) {
  auto tokenizer = Tokenizer::Load(dir_ + "/tokenizer.json");
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status().message();
  const std::string rle = "\xe2\x80\xab";  // U+202B in UTF-8
  int32_t rle_id = -1;
  for (int32_t id = 0; id < (*tokenizer)->vocab_size() && rle_id < 0; ++id) {
    if ((*tokenizer)->Decode(std::span<const int32_t>(&id, 1)).find(rle) != std::string::npos) {
      rle_id = id;
    }
  }
  ASSERT_GE(rle_id, 0) << "the bundled tokenizer has no token holding U+202B";

  // Every token ranked: the table holds each piece once.
  Ran text =
      RunTrace("logits --model " + dir_ + " --tokens 9707,11,1879,0 --top 200000", tmp_.path());
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_EQ(text.out.find(rle), std::string::npos) << "a raw U+202B reached the terminal";
  EXPECT_EQ(text.out.find("\xc2\x80"), std::string::npos)
      << "a raw C1 control reached the terminal";
  std::istringstream lines(text.out);
  std::string line;
  bool found = false;
  while (std::getline(lines, line)) {
    std::istringstream fields(line);
    std::string rank, id;
    fields >> rank >> id;
    if (id != std::to_string(rle_id)) continue;
    found = true;
    EXPECT_NE(line.find("\" \\u202B\""), std::string::npos) << line;  // quoted, as escaped
  }
  EXPECT_TRUE(found) << "no row for token " << rle_id;
}

TEST_F(CliTest, GenerateIsAFunctionOfTheSeed) {
  const std::string args = "generate --model " + dir_ + " --prompt 'Hello there' --max-tokens 12 ";
  Ran a = RunTrace(args + "--seed 5", tmp_.path());
  Ran b = RunTrace(args + "--seed 5 --threads 1", tmp_.path());
  Ran c = RunTrace(args + "--seed 6", tmp_.path());
  ASSERT_EQ(a.exit_code, 0) << a.err;
  EXPECT_EQ(a.out, b.out);
  EXPECT_NE(a.out, c.out);
  EXPECT_NE(a.err.find("seed 5"), std::string::npos) << a.err;
  Ran chat = RunTrace(args + "--chat --temperature 0", tmp_.path());
  EXPECT_EQ(chat.exit_code, 0) << chat.err;
}

TEST_F(CliTest, BadInputIsOneLineAndExitTwo) {
  Ran bad_tokens = RunTrace("logits --model " + dir_ + " --tokens 1,x", tmp_.path());
  EXPECT_EQ(bad_tokens.exit_code, 2);
  EXPECT_NE(bad_tokens.err.find("--tokens"), std::string::npos) << bad_tokens.err;
  EXPECT_EQ(std::count(bad_tokens.err.begin(), bad_tokens.err.end(), '\n'), 1);

  Ran out_of_vocab = RunTrace("logits --model " + dir_ + " --tokens 999999", tmp_.path());
  EXPECT_EQ(out_of_vocab.exit_code, 2);
  EXPECT_NE(out_of_vocab.err.find("vocabulary"), std::string::npos) << out_of_vocab.err;

  const std::string weights = dir_ + "/model.safetensors";
  std::string bytes = testing::ReadAll(weights);
  testing::WriteAll(weights, bytes.substr(0, 1000));
  Ran truncated = RunTrace("logits --model " + dir_ + " --tokens 1", tmp_.path());
  EXPECT_EQ(truncated.exit_code, 2);
  EXPECT_NE(truncated.err.find(weights), std::string::npos) << truncated.err;
  EXPECT_EQ(std::count(truncated.err.begin(), truncated.err.end(), '\n'), 1);

  Ran missing = RunTrace("model info " + tmp_.path() + "/nope", tmp_.path());
  EXPECT_EQ(missing.exit_code, 2);
  Ran preset = RunTrace("model init --preset huge " + tmp_.path() + "/x", tmp_.path());
  EXPECT_NE(preset.exit_code, 0);
  Ran temp = RunTrace("generate --model " + dir_ + " --prompt hi --temperature -1", tmp_.path());
  EXPECT_EQ(temp.exit_code, 2);
  EXPECT_NE(temp.err.find("temperature"), std::string::npos) << temp.err;
}

}  // namespace
}  // namespace trace::engine
