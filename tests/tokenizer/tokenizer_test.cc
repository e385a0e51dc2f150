// Unit tests of engine/tokenizer: Qwen3's real tokenizer.json, a hand-made Llama-3-style
// one, UTF-8 handling, the streaming decoder, thread safety and bad input.
#include "engine/tokenizer/tokenizer.h"

#include <gtest/gtest.h>

#include <functional>
#include <thread>

#include "testkit/corpus.h"
#include "tests/tokenizer/test_util.h"

namespace trace::engine {
namespace {

using testing::ByteLevel;
using testing::MakeLlama3StyleTokenizerJson;
using testing::Qwen3Dir;
using testing::TempDir;
using testing::WriteFile;

const Tokenizer& Qwen3() {
  static const Tokenizer* tokenizer = [] {
    auto loaded = Tokenizer::Load(Qwen3Dir() + "/tokenizer.json");
    if (!loaded.ok()) {
      ADD_FAILURE() << loaded.status().ToString();
      std::abort();
    }
    return std::move(loaded).value().release();
  }();
  return *tokenizer;
}

std::unique_ptr<Tokenizer> Llama3Style(bool ignore_merges = true) {
  auto loaded =
      Tokenizer::LoadFromString(MakeLlama3StyleTokenizerJson(ignore_merges), "llama3-style");
  EXPECT_TRUE(loaded.ok()) << loaded.status().ToString();
  return std::move(loaded).value();
}

int32_t Id(const Tokenizer& t, const std::string& text) {
  auto id = t.TokenId(text);
  EXPECT_TRUE(id.has_value()) << text;
  return id.value_or(-1);
}

TEST(TokenizerQwen3, LoadsVocabularyAndSpecialTokens) {
  const Tokenizer& t = Qwen3();
  EXPECT_EQ(t.vocab_size(), 151669);
  EXPECT_EQ(t.TokenId("<|im_end|>"), 151645);
  EXPECT_EQ(t.TokenId("<|im_start|>"), 151644);
  EXPECT_TRUE(t.IsSpecial(151645));
  EXPECT_TRUE(t.IsAdded(151667));  // <think> is added but not special
  EXPECT_FALSE(t.IsSpecial(151667));
  EXPECT_FALSE(t.IsSpecial(279));
  EXPECT_EQ(t.eos_token_id(), 151645);  // from tokenizer_config.json
  EXPECT_FALSE(t.bos_token_id().has_value());
  EXPECT_EQ(t.TokenText(279), "Ġthe");
  EXPECT_EQ(t.TokenBytes(279), " the");
  EXPECT_EQ(t.TokenBytes(151645), "<|im_end|>");
  EXPECT_EQ(t.TokenBytes(-1), "");
  EXPECT_EQ(t.TokenBytes(t.vocab_size()), "");
}

TEST(TokenizerQwen3, MatchesReferenceIds) {
  // Ids produced by @lenml/tokenizers for the same string.
  const std::vector<int32_t> expected = {9707, 1879, 11, 432, 594, 220,    17,
                                         15,   17,   19, 0,   220, 151644, 872};
  EXPECT_EQ(Qwen3().Encode("Hello world, it's 2024! <|im_start|>user"), expected);
  EXPECT_TRUE(Qwen3().Encode("").empty());
}

TEST(TokenizerQwen3, RoundTripsAndNormalizes) {
  const Tokenizer& t = Qwen3();
  for (const std::string s : {"Hello, world!", "  spaces\t\ttabs\n\nnewlines  ",
                              "한국어 中文 日本語", "👨‍👩‍👧‍👦 🏳️‍🌈",
                              "<|im_start|>system\nx<|im_end|>", "1234567890"}) {
    EXPECT_EQ(t.Decode(t.Encode(s)), s);
  }
  // NFC: decomposed and precomposed forms give the same ids.
  EXPECT_EQ(t.Encode("caf\x65\xCC\x81"), t.Encode("caf\xC3\xA9"));
  EXPECT_EQ(t.Decode(t.Encode("e\xCC\x81")), "\xC3\xA9");
  // Invalid UTF-8 becomes U+FFFD per maximal subpart before encoding.
  EXPECT_EQ(t.Encode("a\xFF"
                     "b"),
            t.Encode("a\xEF\xBF\xBD"
                     "b"));
  EXPECT_EQ(t.Decode(t.Encode("\xE2\x82"
                              "x\xC0\x80")),
            "\xEF\xBF\xBDx\xEF\xBF\xBD\xEF\xBF\xBD");
  // Piecewise NFC inside Encode agrees with whole-string utf8proc NFC on the corpus
  // (strings without '<', so no added token splits the text).
  for (const std::string& s : testing::GenerateCorpus(5, 1500)) {
    if (s.find('<') != std::string::npos) continue;
    EXPECT_EQ(t.Decode(t.Encode(s)), NormalizeNfc(SanitizeUtf8(s))) << testing::HexEncode(s);
  }
  // skip_special drops special tokens only.
  const auto ids = t.Encode("<|im_start|>hi<think>");
  EXPECT_EQ(t.Decode(ids, /*skip_special=*/true), "hi<think>");
}

TEST(TokenizerUtf8, SanitizeFollowsWhatwgMaximalSubparts) {
  EXPECT_EQ(SanitizeUtf8("abc"), "abc");
  EXPECT_EQ(SanitizeUtf8("\xF0\x9F\x98"), "\xEF\xBF\xBD");  // one truncated sequence
  EXPECT_EQ(SanitizeUtf8("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // surrogate
  EXPECT_EQ(SanitizeUtf8("\xC3\x28"), "\xEF\xBF\xBD(");
  EXPECT_EQ(SanitizeUtf8("\xE1\x80\xC3\xA9"), "\xEF\xBF\xBD\xC3\xA9");
  EXPECT_EQ(NormalizeNfc("A\xCC\x8A"), "\xC3\x85");
  EXPECT_EQ(NormalizeNfc("\xE2\x84\xAB"), "\xC3\x85");  // U+212B ANGSTROM SIGN -> U+00C5
}

TEST(TokenizerIncrementalDecoder, EmitsOnlyCompleteCharactersAndMatchesDecode) {
  const Tokenizer& t = Qwen3();
  const auto corpus = testing::GenerateCorpus(7, 300);
  for (const std::string& s : corpus) {
    const auto ids = t.Encode(s);
    IncrementalDecoder dec(t);
    std::string streamed;
    for (int32_t id : ids) {
      const std::string piece = dec.Push(id);
      EXPECT_EQ(SanitizeUtf8(piece), piece);
      streamed += piece;
    }
    streamed += dec.Flush();
    EXPECT_EQ(streamed, t.Decode(ids)) << testing::HexEncode(s);
  }
  // A rare 4-byte character (U+2A6A5, CJK Extension B) is split over byte tokens; it
  // comes out whole, once.
  const std::string rare = "\xF0\xAA\x9A\xA5";
  const auto ids = t.Encode(rare);
  ASSERT_GT(ids.size(), 1u);
  IncrementalDecoder dec(t);
  std::string out;
  for (size_t i = 0; i < ids.size(); ++i) {
    const std::string piece = dec.Push(ids[i]);
    if (i + 1 < ids.size()) {
      EXPECT_EQ(piece, "") << "partial character emitted at token " << i;
    }
    out += piece;
  }
  EXPECT_EQ(out, rare);
  EXPECT_EQ(dec.Flush(), "");
  // A stream that ends mid-character flushes U+FFFD.
  IncrementalDecoder cut(t);
  EXPECT_EQ(cut.Push(ids.front()), "");
  EXPECT_EQ(cut.Flush(), "\xEF\xBF\xBD");
}

TEST(TokenizerQwen3, ConcurrentEncodeIsDeterministic) {
  const Tokenizer& t = Qwen3();
  const auto corpus = testing::GenerateCorpus(11, 400);
  std::vector<std::vector<int32_t>> expected;
  for (const auto& s : corpus) expected.push_back(t.Encode(s));
  std::vector<std::thread> threads;
  std::vector<int> mismatches(4, 0);
  for (int k = 0; k < 4; ++k) {
    threads.emplace_back([&, k] {
      for (size_t i = 0; i < corpus.size(); ++i) {
        const size_t j = (i * 7 + static_cast<size_t>(k) * 13) % corpus.size();
        if (t.Encode(corpus[j]) != expected[j]) ++mismatches[k];
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int m : mismatches) EXPECT_EQ(m, 0);
}

// Encode(text, cap) stops once it holds `cap` ids (the recorder caps a prompt at the model's
// context): it must give exactly the first `cap` ids of the whole encoding, whichever piece,
// added token or pre-tokenizer stage the cap falls in.
TEST(TokenizerQwen3, CappedEncodeIsThePrefixOfTheWholeEncoding) {
  const Tokenizer& t = Qwen3();
  const auto corpus = testing::GenerateCorpus(13, 300);
  size_t checked = 0, cut_inside = 0;
  for (const std::string& s : corpus) {
    const std::vector<int32_t> all = t.Encode(s);
    for (size_t cap : {size_t{0}, size_t{1}, size_t{2}, all.size() / 3, all.size() / 2,
                       all.size() - std::min<size_t>(all.size(), 1), all.size(), all.size() + 1}) {
      const std::vector<int32_t> head = t.Encode(s, cap);
      const std::vector<int32_t> want(all.begin(), all.begin() + std::min(cap, all.size()));
      ASSERT_EQ(head, want) << "cap " << cap << " of " << all.size();
      ++checked;
      cut_inside += cap > 0 && cap < all.size();
    }
  }
  EXPECT_EQ(checked, corpus.size() * 8);
  EXPECT_GT(cut_inside, corpus.size());  // most caps fall inside the text, not past it
}

TEST(TokenizerLlama3Style, IgnoreMergesAndPairMerges) {
  auto with = Llama3Style(true);
  auto without = Llama3Style(false);
  // " hello" is in the vocabulary but no merge chain reaches it.
  EXPECT_EQ(with->Encode(" hello"), std::vector<int32_t>{Id(*with, ByteLevel(" hello"))});
  // Without ignore_merges: "ll" (an earlier merge) before "he", leftmost lowest rank wins.
  EXPECT_EQ(without->Encode(" hello"),
            (std::vector<int32_t>{Id(*without, ByteLevel(" ")), Id(*without, "he"),
                                  Id(*without, "ll"), Id(*without, "o")}));
  // A merge chain: " the" -> one token either way.
  EXPECT_EQ(without->Encode(" the"), std::vector<int32_t>{Id(*without, ByteLevel(" the"))});
  // \p{N}{1,3}: digits in groups of three.
  EXPECT_EQ(with->Encode("12345"),
            (std::vector<int32_t>{Id(*with, "123"), Id(*with, "4"), Id(*with, "5")}));
  // Case-insensitive contraction group.
  EXPECT_EQ(with->Encode("IT'S"),
            (std::vector<int32_t>{Id(*with, "I"), Id(*with, "T"), Id(*with, "'"), Id(*with, "S")}));
  EXPECT_EQ(with->Encode("it's").back(), Id(*with, "'s"));
}

TEST(TokenizerLlama3Style, AddedTokensStripAndSplit) {
  auto t = Llama3Style();
  const int32_t bot = Id(*t, "<|begin_of_text|>");
  const int32_t tag = Id(*t, "<tag>");
  EXPECT_TRUE(t->IsSpecial(bot));
  EXPECT_FALSE(t->IsSpecial(tag));
  EXPECT_EQ(t->Encode("<|begin_of_text|>hi"),
            (std::vector<int32_t>{bot, Id(*t, "h"), Id(*t, "i")}));
  // <tag> has lstrip and rstrip: the spaces around it go.
  EXPECT_EQ(t->Encode("a  <tag>  b"), (std::vector<int32_t>{Id(*t, "a"), tag, Id(*t, "b")}));
  EXPECT_EQ(t->Decode(t->Encode("x<|eot_id|>y"), /*skip_special=*/true), "xy");

  // split_special_tokens from tokenizer_config.json: special tokens become plain text.
  const std::string dir = TempDir();
  WriteFile(dir + "/tokenizer.json", MakeLlama3StyleTokenizerJson());
  WriteFile(dir + "/tokenizer_config.json",
            R"({"split_special_tokens": true, "bos_token": "<|begin_of_text|>",
                "eos_token": {"content": "<|eot_id|>", "__type": "AddedToken"}})");
  auto split = Tokenizer::Load(dir + "/tokenizer.json");
  ASSERT_TRUE(split.ok()) << split.status().ToString();
  EXPECT_EQ((*split)->bos_token_id(), bot);
  EXPECT_EQ((*split)->eos_token_id(), Id(*t, "<|eot_id|>"));
  const auto ids = (*split)->Encode("<|eot_id|>");
  EXPECT_GT(ids.size(), 1u);
  for (int32_t id : ids) EXPECT_FALSE((*split)->IsSpecial(id));
  EXPECT_EQ((*split)->Decode(ids), "<|eot_id|>");
  EXPECT_EQ((*split)->Encode("<tag>"), std::vector<int32_t>{tag});  // non-special still matched
}

// ---- bad input: one line naming the file and the field ----

std::string LoadError(const std::string& json_text, const std::string& name = "bad.json") {
  auto r = Tokenizer::LoadFromString(json_text, name);
  EXPECT_FALSE(r.ok());
  if (r.ok()) return "";
  const std::string msg = r.status().ToString();
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  EXPECT_NE(msg.find(name), std::string::npos) << msg;
  return msg;
}

// A SentencePiece-style BPE (model.byte_fallback) made by hand, its answers worked out from
// the definitions (tokenizers' Prepend/Replace normalizers, BPE over characters, byte
// fallback, the Replace/ByteFallback/Fuse/Strip decoder): ids 3..258 are <0x00>..<0xFF>.
nlohmann::ordered_json SentencePieceStyleJson() {
  nlohmann::ordered_json vocab = {{"<unk>", 0}, {"<s>", 1}, {"</s>", 2}};
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    vocab[name] = 3 + b;
  }
  const std::string sp = "\xE2\x96\x81";  // U+2581
  vocab[sp] = 259;
  vocab["a"] = 260;
  vocab["b"] = 261;
  vocab[sp + "a"] = 262;
  vocab["ab"] = 263;
  vocab[sp + "ab"] = 264;
  nlohmann::ordered_json j = {
      {"version", "1.0"},
      {"added_tokens",
       {{{"id", 1},
         {"content", "<s>"},
         {"single_word", false},
         {"lstrip", false},
         {"rstrip", false},
         {"normalized", false},
         {"special", true}}}},
      {"normalizer",
       {{"type", "Sequence"},
        {"normalizers",
         {{{"type", "Prepend"}, {"prepend", sp}},
          {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", sp}}}}}},
      {"pre_tokenizer", nullptr},
      {"post_processor", nullptr},
      {"decoder",
       {{"type", "Sequence"},
        {"decoders",
         {{{"type", "Replace"}, {"pattern", {{"String", sp}}}, {"content", " "}},
          {{"type", "ByteFallback"}},
          {{"type", "Fuse"}},
          {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}}}}},
      {"model",
       {{"type", "BPE"},
        {"dropout", nullptr},
        {"unk_token", "<unk>"},
        {"fuse_unk", true},
        {"byte_fallback", true},
        {"vocab", vocab},
        {"merges", {sp + " a", "a b", sp + "a b"}}}}};
  return j;
}

TEST(TokenizerSentencePiece, PrependReplaceByteFallbackAndStrip) {
  auto t = Tokenizer::LoadFromString(SentencePieceStyleJson().dump(), "sp.json");
  ASSERT_TRUE(t.ok()) << t.status().message();
  const Tokenizer& tok = **t;
  EXPECT_EQ(tok.Encode("ab"), (std::vector<int32_t>{264}));  // ▁a first (rank 0), then ▁a+b
  EXPECT_EQ(tok.Encode("a c"), (std::vector<int32_t>{262, 259, 3 + 'c'}));             // c: <0x63>
  EXPECT_EQ(tok.Encode("\xC3\xA9"), (std::vector<int32_t>{259, 3 + 0xC3, 3 + 0xA9}));  // é
  // Each section between added tokens is normalized on its own (a prepended ▁ each).
  EXPECT_EQ(tok.Encode("a<s>b"), (std::vector<int32_t>{262, 1, 259, 261}));
  EXPECT_EQ(tok.Encode(""), std::vector<int32_t>{});
  EXPECT_EQ(tok.Decode(std::vector<int32_t>{264}), "ab");  // " ab", the leading space stripped
  EXPECT_EQ(tok.Decode(std::vector<int32_t>{262, 259, 3 + 'c'}), "a c");
  EXPECT_EQ(tok.Decode(std::vector<int32_t>{259, 3 + 0xC3, 3 + 0xA9}), "\xC3\xA9");
  EXPECT_EQ(tok.Decode(std::vector<int32_t>{3 + 0xC3}), "\xEF\xBF\xBD");  // a lone lead byte
  EXPECT_EQ(tok.TokenBytes(262), " a");
  EXPECT_EQ(tok.TokenBytes(3 + 'c'), "c");
}

// Gemma's shape: Replace " " -> "▁" then a Split on " " (which then finds nothing), no
// Prepend, no Strip: the same words as with no pre-tokenizer, and no space stripped.
TEST(TokenizerSentencePiece, GemmaShapeSplitsNothingAndStripsNothing) {
  auto j = SentencePieceStyleJson();
  j["normalizer"]["normalizers"].erase(0);  // no Prepend
  j["pre_tokenizer"] = {{"type", "Split"},
                        {"pattern", {{"String", " "}}},
                        {"behavior", "MergedWithPrevious"},
                        {"invert", false}};
  j["decoder"]["decoders"].erase(3);  // no Strip
  auto t = Tokenizer::LoadFromString(j.dump(), "gemma.json");
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ((*t)->Encode("a ab"), (std::vector<int32_t>{260, 264}));  // "a", "▁ab"
  EXPECT_EQ((*t)->Decode(std::vector<int32_t>{259, 260}), " a");      // nothing stripped
}

TEST(TokenizerSentencePiece, RefusesWhatItDoesNotImplement) {
  struct Case {
    std::function<void(nlohmann::ordered_json&)> edit;
    std::string says;
  } cases[] = {
      {[](auto& j) {
         j["pre_tokenizer"] = {{"type", "Metaspace"}};
       },
       "pre_tokenizer is not supported with byte_fallback"},
      // Gemma's Split on " " is read only where the normalizer replaced every " " first.
      {[](auto& j) {
         j["normalizer"]["normalizers"].erase(1);
         j["pre_tokenizer"] = {{"type", "Split"},
                               {"pattern", {{"String", " "}}},
                               {"behavior", "MergedWithPrevious"},
                               {"invert", false}};
       },
       "pre_tokenizer is not supported with byte_fallback"},
      {[](auto& j) { j["decoder"]["decoders"][2]["type"] = "Strip"; },
       "is not the SentencePiece decoder"},
      {[](auto& j) { j["decoder"]["decoders"][3]["stop"] = 1; },
       "is not the SentencePiece decoder"},
      {[](auto& j) {
         j["normalizer"]["normalizers"][1]["pattern"] = {{"Regex", " +"}};
       },
       "\"Replace\" is not supported"},
      {[](auto& j) {
         j["normalizer"] = {{"type", "Lowercase"}};
       },
       "\"Lowercase\" is not supported"},
  };
  for (const Case& c : cases) {
    auto j = SentencePieceStyleJson();
    c.edit(j);
    auto t = Tokenizer::LoadFromString(j.dump(), "sp.json");
    ASSERT_FALSE(t.ok()) << c.says;
    EXPECT_NE(t.status().message().find(c.says), std::string::npos) << t.status().message();
  }
  // Without byte_fallback it is read as a byte-level BPE, which it is not: refused by name.
  auto j = SentencePieceStyleJson();
  j["model"]["byte_fallback"] = false;
  auto t = Tokenizer::LoadFromString(j.dump(), "sp.json");
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("is not in the byte-level alphabet"), std::string::npos)
      << t.status().message();
}

TEST(TokenizerLoad, RejectsOtherModelTypes) {
  auto root = nlohmann::json::parse(MakeLlama3StyleTokenizerJson());
  root["model"]["type"] = "WordPiece";
  EXPECT_NE(LoadError(root.dump()).find("model.type \"WordPiece\""), std::string::npos);
  root["model"]["type"] = "Unigram";
  EXPECT_NE(LoadError(root.dump()).find("Unigram"), std::string::npos);
  root["model"].erase("type");
  EXPECT_NE(LoadError(root.dump()).find("model.type"), std::string::npos);
}

TEST(TokenizerLoad, RejectsMissingAndUnsupportedFields) {
  auto base = nlohmann::json::parse(MakeLlama3StyleTokenizerJson());
  {
    auto root = base;
    root["model"].erase("merges");
    EXPECT_NE(LoadError(root.dump()).find("model.merges"), std::string::npos);
  }
  {
    auto root = base;
    root["model"].erase("vocab");
    EXPECT_NE(LoadError(root.dump()).find("model.vocab"), std::string::npos);
  }
  {
    auto root = base;
    root["model"]["merges"][3] = nlohmann::json::array({"zzz", "qqq"});
    EXPECT_NE(LoadError(root.dump()).find("model.merges[3]"), std::string::npos);
  }
  {
    auto root = base;
    root["normalizer"] = {{"type", "NFKC"}};
    EXPECT_NE(LoadError(root.dump()).find("normalizer.type"), std::string::npos);
  }
  {
    auto root = base;
    root["decoder"] = {{"type", "WordPiece"}};
    EXPECT_NE(LoadError(root.dump()).find("decoder.type"), std::string::npos);
  }
  {
    auto root = base;
    root["pre_tokenizer"]["pretokenizers"][0]["behavior"] = "Removed";
    EXPECT_NE(LoadError(root.dump()).find("pre_tokenizer.pretokenizers[0].behavior"),
              std::string::npos);
  }
  {
    auto root = base;
    root["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "(unclosed";
    EXPECT_NE(LoadError(root.dump()).find("pattern"), std::string::npos);
  }
}

// The pre-tokenizer is built by recursion over nested Sequences: a file nesting them
// 100,000 deep crashed the process (stack overflow, SIGSEGV in `trace tokenize`). Nesting
// up to the limit loads; deeper is a one-line error naming the field.
TEST(TokenizerLoad, PreTokenizerSequencesNestedTooDeeplyAreRefusedNotACrash) {
  auto root = nlohmann::json::parse(MakeLlama3StyleTokenizerJson());
  const std::string inner = root["pre_tokenizer"].dump();
  root["pre_tokenizer"] = "@@PRE@@";
  const std::string outer = root.dump();
  // Built as text: nlohmann's dump() of the nested document would recurse itself.
  auto nested = [&](int levels) {
    std::string pre;
    for (int i = 0; i < levels; ++i) pre += R"({"type":"Sequence","pretokenizers":[)";
    pre += inner;
    for (int i = 0; i < levels; ++i) pre += "]}";
    std::string text = outer;
    text.replace(text.find("\"@@PRE@@\""), 9, pre);
    return text;
  };
  // The file's own pre-tokenizer is a Sequence: wrapped in 31 more, its steps sit inside 32
  // Sequences, the limit.
  auto ok = Tokenizer::LoadFromString(nested(31), "nested.json");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  auto flat = Tokenizer::LoadFromString(MakeLlama3StyleTokenizerJson(), "flat.json");
  ASSERT_TRUE(flat.ok());
  EXPECT_EQ((*ok)->Encode("Hello, world! 123"), (*flat)->Encode("Hello, world! 123"));

  EXPECT_NE(LoadError(nested(32), "nested.json").find("deeper than 32 levels"), std::string::npos);
  EXPECT_NE(LoadError(nested(100000), "nested.json").find("deeper than 32 levels"),
            std::string::npos);
}

// The tables are indexed by token id: a 4 KB file giving one token the id 6,666,652 cost
// 1.4 GB and 11 CPU s under ASan (a tokenizer_load_fuzz finding; the input is in the
// target's corpus). Ids up to twice the number of tokens defined plus 1,024 load; beyond is
// a one-line error naming the entry, in model.vocab, added_tokens and added_tokens_decoder.
TEST(TokenizerLoad, TokenIdsFarBeyondTheTokenCountAreRefusedBeforeSizingTables) {
  const auto base = nlohmann::json::parse(MakeLlama3StyleTokenizerJson());
  const size_t defined = base["model"]["vocab"].size() + base["added_tokens"].size();
  const int64_t limit = 2 * static_cast<int64_t>(defined) + 1024;
  ASSERT_TRUE(base["model"]["vocab"].contains("4"));
  {
    auto root = base;
    root["model"]["vocab"]["4"] = limit;  // the largest id accepted
    auto ok = Tokenizer::LoadFromString(root.dump(), "edge.json");
    ASSERT_TRUE(ok.ok()) << ok.status().ToString();
    EXPECT_EQ((*ok)->vocab_size(), limit + 1);
    EXPECT_EQ((*ok)->Encode("4"), std::vector<int32_t>{static_cast<int32_t>(limit)});
    root["model"]["vocab"]["4"] = limit + 1;
    const std::string error = LoadError(root.dump(), "edge.json");
    EXPECT_NE(error.find("model.vocab[\"4\"] has id " + std::to_string(limit + 1) +
                         ", far beyond the " + std::to_string(defined) + " tokens defined"),
              std::string::npos)
        << error;
    root["model"]["vocab"]["4"] = 6666652;  // the fuzzer's input
    EXPECT_NE(LoadError(root.dump(), "edge.json").find("has id 6666652"), std::string::npos);
  }
  {
    auto root = base;
    root["added_tokens"][0]["id"] = limit + 1;
    EXPECT_NE(LoadError(root.dump(), "added.json").find("added_tokens[0].id has id"),
              std::string::npos);
  }
  {
    const std::string dir = TempDir();
    WriteFile(dir + "/tokenizer.json", MakeLlama3StyleTokenizerJson());
    // One entry more in tokenizer_config.json: the limit grows by two.
    const int64_t config_limit = limit + 2;
    auto with_decoder = [&](int64_t id) {
      WriteFile(dir + "/tokenizer_config.json",
                R"({"added_tokens_decoder": {")" + std::to_string(id) +
                    R"(": {"content": "<|far|>", "special": true}}})");
      return Tokenizer::Load(dir + "/tokenizer.json");
    };
    auto ok = with_decoder(config_limit);
    ASSERT_TRUE(ok.ok()) << ok.status().ToString();
    EXPECT_EQ((*ok)->TokenId("<|far|>"), config_limit);
    auto far = with_decoder(config_limit + 1);
    ASSERT_FALSE(far.ok());
    const std::string error = far.status().ToString();
    EXPECT_NE(error.find("tokenizer_config.json"), std::string::npos) << error;
    EXPECT_NE(
        error.find("added_tokens_decoder[\"" + std::to_string(config_limit + 1) + "\"] has id"),
        std::string::npos)
        << error;
    EXPECT_EQ(error.find('\n'), std::string::npos);
  }
}

TEST(TokenizerLoad, RejectsBrokenFiles) {
  const std::string full = MakeLlama3StyleTokenizerJson();
  EXPECT_NE(LoadError(full.substr(0, full.size() / 2)).find("not valid JSON"), std::string::npos);
  EXPECT_NE(LoadError("").find("not valid JSON"), std::string::npos);
  EXPECT_NE(LoadError("[1,2]").find("not a JSON object"), std::string::npos);

  const std::string dir = TempDir();
  WriteFile(dir + "/tokenizer.json", full.substr(0, 1000));
  auto truncated = Tokenizer::Load(dir + "/tokenizer.json");
  ASSERT_FALSE(truncated.ok());
  EXPECT_NE(truncated.status().ToString().find(dir + "/tokenizer.json"), std::string::npos);

  auto missing = Tokenizer::Load(dir + "/nope.json");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().ToString().find("nope.json"), std::string::npos);
}

}  // namespace
}  // namespace trace::engine
