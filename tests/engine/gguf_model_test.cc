// Models from GGUF files (engine/gguf_model.h). The files are made here by a converter written
// for the test from llama.cpp's convert_hf_to_gguf.py and gguf-py's names (LLM_KV keys,
// MODEL_TENSOR names, the q/k row permutation of `llama`, Llama 3's rope_freqs, the vocabulary
// with its token types), over trace's own presets, and written by testkit/gguf_writer.h:
//
// - qwen3 (q/k norms), a small qwen2 (q/k/v biases) and mistral-tiny as `llama` (permuted q/k
//   rows), with F32 and BF16 weights: every logit bitwise equal to the safetensors folder's;
// - llama3-tiny with rope_freqs: within 1e-4 of the folder (the factors are the converter's
//   float32 divisors, not the formula in double);
// - the tokenizer made from the metadata: the same ids as tokenizer.json on 2,000 corpus
//   strings and the chat template's special tokens, for the qwen2 and llama-bpe pre-tokenizers;
// - Q8_0 files (quantized as llama.cpp's quantize_row_q8_0_ref does): every logit bitwise
//   equal to an F32 file of the values the blocks stand for, and within a stated tolerance of
//   the unquantized folder;
// - other quantizations, unknown architectures, missing or misshaped tensors: one-line errors.
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>

#include "base/hash.h"
#include "engine/gguf_model.h"
#include "engine/model_init.h"
#include "engine/safetensors.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine_test_util.h"
#include "gguf_convert.h"
#include "testkit/corpus.h"
#include "testkit/gguf_writer.h"

namespace trace::engine {
namespace {

using json = nlohmann::json;
using kernels::Impl;
using kernels::Numerics;
using testing::AllLogits;
using testing::Bits;
using testing::EngineOrDie;
using testing::RandomTokens;
using testkit::GgufWriter;

using testing::ConvertOptions;
using testing::kGgmlF32;
using testing::MatrixType;

class GgufModelTest : public ::testing::Test {
 protected:
  std::string Preset(const std::string& preset, ModelConfig* changed = nullptr) {
    const std::string dir = tmp_.path() + "/" + preset;
    if (changed != nullptr) {
      EXPECT_TRUE(InitModelFromConfig(*changed, 17, dir, 1, preset).ok());
    } else {
      EXPECT_TRUE(InitModel(preset, 17, dir).ok());
    }
    return dir;
  }
  // Every position's logits of the folder and of the GGUF file, 24 random tokens.
  void ExpectSameLogits(const std::string& dir, const std::string& gguf, double tolerance) {
    auto folder = testing::LoadOrDie(dir);
    auto file = testing::LoadOrDie(gguf);
    ASSERT_NE(file, nullptr);
    EXPECT_EQ(file->config().vocab_size, folder->config().vocab_size);
    EXPECT_EQ(file->config().num_layers, folder->config().num_layers);
    EXPECT_EQ(file->config().tie_word_embeddings, folder->config().tie_word_embeddings);
    std::mt19937_64 rng(3);
    const auto tokens = RandomTokens(&rng, 24, static_cast<int32_t>(folder->config().vocab_size));
    auto a = EngineOrDie(folder, Numerics::kCanonical, Impl::kAuto, 2);
    auto b = EngineOrDie(file, Numerics::kCanonical, Impl::kAuto, 2);
    const auto want = AllLogits(a.get(), tokens, 0), got = AllLogits(b.get(), tokens, 5);
    if (tolerance == 0) {
      EXPECT_EQ(Bits(got), Bits(want)) << gguf;
    } else {
      double num = 0, den = 0;
      for (size_t i = 0; i < want.size(); ++i) {
        num += (got[i] - want[i]) * static_cast<double>(got[i] - want[i]);
        den += want[i] * static_cast<double>(want[i]);
      }
      EXPECT_LT(std::sqrt(num / den), tolerance) << gguf;
      EXPECT_NE(Bits(got), Bits(want)) << "the factors should change some bit";
    }
  }
  testing::TempDir tmp_;
};

TEST_F(GgufModelTest, Qwen3F32AndBf16FilesGiveTheFolderBitForBit) {
  const std::string dir = Preset("tiny");
  for (bool bf16 : {false, true}) {
    const std::string out = tmp_.path() + (bf16 ? "/tiny-bf16.gguf" : "/tiny-f32.gguf");
    testing::ConvertToGguf(dir, out, {bf16 ? MatrixType::kBF16 : MatrixType::kF32, "qwen2"});
    ExpectSameLogits(dir, out, 0);
  }
  auto loaded = Model::Load(tmp_.path() + "/tiny-bf16.gguf", /*hash_weights=*/true);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  const auto& m = *loaded;
  EXPECT_EQ(m->fingerprint().dtype, "gguf BF16");
  EXPECT_EQ(m->fingerprint().architecture, "qwen3");
  EXPECT_EQ(m->fingerprint().weights_sha256,
            Sha256Hex(testing::ReadAll(tmp_.path() + "/tiny-bf16.gguf")));
  EXPECT_FALSE(m->fingerprint().chat_template_sha256.empty());
}

TEST_F(GgufModelTest, Qwen2BiasesAndMistralAsPermutedLlamaGiveTheFolderBitForBit) {
  auto qwen2 = PresetConfig("qwen2.5-0.5b");
  ASSERT_TRUE(qwen2.ok());
  qwen2->hidden_size = 64;
  qwen2->intermediate_size = 96;
  qwen2->num_layers = 2;
  qwen2->num_heads = 4;
  qwen2->num_kv_heads = 2;
  qwen2->head_dim = 16;
  const std::string q2 = Preset("qwen2.5-0.5b", &*qwen2);
  testing::ConvertToGguf(q2, tmp_.path() + "/q2.gguf", {MatrixType::kBF16, "qwen2"});
  ExpectSameLogits(q2, tmp_.path() + "/q2.gguf", 0);
  const std::string mistral = Preset("mistral-tiny");
  testing::ConvertToGguf(mistral, tmp_.path() + "/mistral.gguf", {MatrixType::kF32, "llama-bpe"});
  ExpectSameLogits(mistral, tmp_.path() + "/mistral.gguf", 0);
}

// ggml's blocks of 32: Q8_0, Q4_0 and Q5_0 dequantize exactly (f16 scale x int8, x (nibble - 8),
// x (q - 16)), Q4_1 and Q5_1 with one rounding (d * q + m): a quantized file is, bit for bit,
// the model of its dequantized values (computed by the test's converter in double), on every
// CPU path, in decode, prefill and chunks.
TEST_F(GgufModelTest, BlockOf32FilesAreTheirDequantizedValuesBitForBit) {
  const std::string dir = Preset("tiny");
  auto folder = testing::LoadOrDie(dir);
  std::mt19937_64 rng(8);
  const auto tokens = RandomTokens(&rng, 40, static_cast<int32_t>(folder->config().vocab_size));
  auto exact = EngineOrDie(folder, Numerics::kCanonical, Impl::kAuto, 2);
  const auto full = AllLogits(exact.get(), tokens, 0);
  // Each type against its dequantized F32 file (bitwise), then against the unquantized bf16
  // weights (the quantization's rounding only: a bound per type, for this random model).
  for (const auto& [type, dequantized, name, bound] :
       {std::tuple{MatrixType::kQ8_0, MatrixType::kQ8_0Dequantized, "Q8_0", 2e-2},
        std::tuple{MatrixType::kQ4_0, MatrixType::kQ4_0Dequantized, "Q4_0", 0.3},
        std::tuple{MatrixType::kQ5_0, MatrixType::kQ5_0Dequantized, "Q5_0", 0.15},
        std::tuple{MatrixType::kQ4_1, MatrixType::kQ4_1Dequantized, "Q4_1", 0.3},
        std::tuple{MatrixType::kQ5_1, MatrixType::kQ5_1Dequantized, "Q5_1", 0.15}}) {
    testing::ConvertToGguf(dir, tmp_.path() + "/q.gguf", {type, "qwen2"});
    testing::ConvertToGguf(dir, tmp_.path() + "/dq.gguf", {dequantized, "qwen2"});
    auto q = testing::LoadOrDie(tmp_.path() + "/q.gguf");
    auto dq = testing::LoadOrDie(tmp_.path() + "/dq.gguf");
    ASSERT_NE(q, nullptr);
    EXPECT_EQ(q->fingerprint().dtype, std::string("gguf ") + name);
    auto want_engine = EngineOrDie(dq, Numerics::kCanonical, Impl::kReference, 1);
    const auto want = AllLogits(want_engine.get(), tokens, 0);
    for (Impl impl : kernels::AvailableCpuIsaPaths()) {
      auto engine = EngineOrDie(q, Numerics::kCanonical, impl, 2);
      // One pass (prefill), decode, chunks; the chunked pass for the first two types only (the
      // kernel tests hold every block type to every split).
      const bool first = type == MatrixType::kQ8_0 || type == MatrixType::kQ4_0;
      for (size_t chunk : first ? std::vector<size_t>{0, 1, 7} : std::vector<size_t>{0, 1}) {
        EXPECT_EQ(Bits(AllLogits(engine.get(), tokens, chunk)), Bits(want))
            << name << " " << kernels::CpuIsaPathName(impl) << " chunk " << chunk;
      }
    }
    double num = 0, den = 0;
    for (size_t i = 0; i < full.size(); ++i) {
      num += (want[i] - full[i]) * static_cast<double>(want[i] - full[i]);
      den += full[i] * static_cast<double>(full[i]);
    }
    std::printf("%s vs the bf16 folder: relative L2 %.3g\n", name, std::sqrt(num / den));
    EXPECT_LT(std::sqrt(num / den), bound) << name;
  }
}

// A Q4_K_M-like file (Q4_K, Q5_K and Q6_K matrices; Q8_0 where a row is not whole blocks of
// 256) is, bit for bit, the model of its dequantized values (computed in double by the test's
// own dequantizer, testkit/kquant_reference.h, and rounded once) on every CPU path, in decode,
// prefill and chunks, with the weights in the engine's interleaved K-quant records.
TEST_F(GgufModelTest, KQuantFilesAreTheirDequantizedValuesBitForBit) {
  ModelConfig config = testing::KQuantTinyConfig();
  const std::string dir = Preset("tiny", &config);
  testing::ConvertToGguf(dir, tmp_.path() + "/k.gguf", {MatrixType::kKQuants, "qwen2"});
  testing::ConvertToGguf(dir, tmp_.path() + "/dk.gguf", {MatrixType::kKQuantsDequantized, "qwen2"});
  auto q = testing::LoadOrDie(tmp_.path() + "/k.gguf");
  auto dq = testing::LoadOrDie(tmp_.path() + "/dk.gguf");
  ASSERT_NE(q, nullptr);
  ASSERT_NE(dq, nullptr);
  std::map<kernels::DType, int> types;
  for (const LayerWeights& l : q->weights().layers) {
    for (const kernels::WeightView* w :
         {&l.q_proj, &l.k_proj, &l.v_proj, &l.o_proj, &l.gate_proj, &l.up_proj, &l.down_proj}) {
      ++types[w->dtype];
    }
  }
  EXPECT_EQ(types[kernels::DType::kQ4_K], 10);  // q, k, o, gate, up of 2 layers
  EXPECT_EQ(types[kernels::DType::kQ6_K], 2);   // v
  EXPECT_EQ(types[kernels::DType::kQ5_K], 2);   // down
  EXPECT_EQ(q->weights().embed_tokens.dtype, kernels::DType::kQ4_K);
  std::mt19937_64 rng(9);
  const auto tokens = RandomTokens(&rng, 24, static_cast<int32_t>(q->config().vocab_size));
  auto want_engine = EngineOrDie(dq, Numerics::kCanonical, Impl::kReference, 1);
  const auto want = AllLogits(want_engine.get(), tokens, 0);
  for (Impl impl : kernels::AvailableCpuIsaPaths()) {
    auto engine = EngineOrDie(q, Numerics::kCanonical, impl, 2);
    for (size_t chunk : {0, 1, 5}) {  // one pass (prefill), decode, chunks
      EXPECT_EQ(Bits(AllLogits(engine.get(), tokens, chunk)), Bits(want))
          << kernels::CpuIsaPathName(impl) << " chunk " << chunk;
    }
  }
}

TEST_F(GgufModelTest, Llama3RopeFreqsAreHonoured) {
  const std::string dir = Preset("llama3-tiny");
  testing::ConvertToGguf(dir, tmp_.path() + "/llama3.gguf", {MatrixType::kBF16, "llama-bpe", true});
  auto m = testing::LoadOrDie(tmp_.path() + "/llama3.gguf");
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->config().rope_scaling.type, kernels::RopeScaling::Type::kFreqFactors);
  ExpectSameLogits(dir, tmp_.path() + "/llama3.gguf", 1e-4);
}

// The tokenizer made from tokenizer.ggml.* gives tokenizer.json's ids.
TEST_F(GgufModelTest, TokenizerFromMetadataMatchesTokenizerJson) {
  for (const auto& [preset, pre] :
       {std::pair<std::string, std::string>{"tiny", "qwen2"}, {"llama3-tiny", "llama-bpe"}}) {
    const std::string dir = Preset(preset);
    const std::string out = tmp_.path() + "/" + preset + ".gguf";
    testing::ConvertToGguf(dir, out, {MatrixType::kBF16, pre});
    auto file = GgufFile::Open(out);
    ASSERT_TRUE(file.ok()) << file.status().ToString();
    auto files = GgufTokenizer(**file);
    ASSERT_TRUE(files.ok()) << files.status().ToString();
    auto from_gguf = Tokenizer::LoadFromString(files->tokenizer_json, out);
    ASSERT_TRUE(from_gguf.ok()) << from_gguf.status().ToString();
    auto from_json = Tokenizer::Load(dir + "/tokenizer.json");
    ASSERT_TRUE(from_json.ok());
    std::vector<std::string> texts = testing::GenerateCorpus(11, 2000);
    texts.push_back("<|im_start|>user\nhi<|im_end|>\n<think>\n</think><|begin_of_text|>");
    texts.push_back("<|start_header_id|>system<|end_header_id|>\n\n  x<|eot_id|>");
    for (const std::string& t : texts) {
      ASSERT_EQ((*from_gguf)->Encode(t), (*from_json)->Encode(t)) << preset << ": " << t;
    }
    const json config = json::parse(files->tokenizer_config_json);
    EXPECT_TRUE(config.contains("chat_template")) << preset;
  }
}

TEST_F(GgufModelTest, UnsupportedAndBrokenFilesAreOneLineErrors) {
  const std::string dir = Preset("tiny");
  const std::string good = tmp_.path() + "/good.gguf";
  testing::ConvertToGguf(dir, good, {MatrixType::kF32, "qwen2"});
  const std::string bytes = testing::ReadAll(good);
  auto expect_error = [&](const std::string& file_bytes, const std::string& says) {
    const std::string path = tmp_.path() + "/bad.gguf";
    testing::WriteAll(path, file_bytes);
    auto m = Model::Load(path, false);
    ASSERT_FALSE(m.ok()) << says;
    EXPECT_NE(m.status().message().find(says), std::string::npos) << m.status().message();
    EXPECT_EQ(m.status().message().find('\n'), std::string::npos);
    EXPECT_EQ(m.status().message().rfind(path + ": ", 0), 0u) << m.status().message();
  };
  std::string arch = bytes;
  const size_t at = arch.find("qwen3");
  ASSERT_NE(at, std::string::npos);
  arch.replace(at, 5, "mamba");
  expect_error(arch, "GGUF architecture 'mamba' is not supported (supported: llama, qwen2, qwen3)");
  expect_error(bytes.substr(0, bytes.size() - 100), "truncated GGUF file");
  expect_error(testing::Q2KFile("qwen3"),
               "tensor 'token_embd.weight' is Q2_K: this quantization is not supported yet (F32, "
               "F16, BF16, Q8_0, Q4_0, Q5_0, Q4_1, Q5_1, Q4_K, Q5_K and Q6_K are)");
  GgufWriter no_eps;
  no_eps.String("general.architecture", "qwen3");
  no_eps.Tensor("token_embd.weight", {64, 8}, kGgmlF32, std::string(64 * 8 * 4, '\0'));
  expect_error(no_eps.Finish(), "metadata 'qwen3.embedding_length' is missing");
}

}  // namespace
}  // namespace trace::engine
