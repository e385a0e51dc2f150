// BpeTokenizer's tables, built from a parsed tokenizer.json and tokenizer_config.json
// (bpe_tokenizer.h): the vocabulary, merges, pre-tokenizer stages and added tokens, each
// field checked, and DumpTables, which prints them for the tests.
#include <algorithm>
#include <array>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "base/escape.h"
#include "engine/tokenizer/bpe_tokenizer.h"
#include "engine/tokenizer/byte_level.h"

namespace trace::engine::internal {
namespace {

using json = nlohmann::json;

// "NAME: FIELD WHAT": the shape of every load error.
std::string Field(const std::string& name, const std::string& field, const std::string& what) {
  return name + ": " + field + " " + what;
}

// The tables are indexed by token id, sized by the largest id. Real vocabularies are dense
// (Qwen3: ids 0 to 151,668 for 151,669 tokens); a file giving one of its few tokens the id
// 6,666,652 made a 4 KB tokenizer.json cost 1.4 GB of empty entries (a fuzzing finding).
// So an id may be at most twice the number of tokens the files define, plus this slack
// (room for reserved or padded ranges), checked before it sizes anything.
constexpr int64_t kSparseIdSlack = 1024;

int64_t DenseIdLimit(size_t tokens_defined) {
  return 2 * static_cast<int64_t>(tokens_defined) + kSparseIdSlack;
}

std::string TooSparse(int64_t id, size_t tokens_defined) {
  return "has id " + std::to_string(id) + ", far beyond the " + std::to_string(tokens_defined) +
         " tokens defined (ids up to " + std::to_string(DenseIdLimit(tokens_defined)) +
         " are accepted)";
}

// Real tokenizers nest a Sequence at most once or twice; a file nesting them 100,000 deep
// overflowed the stack here (one frame per level) and crashed the process.
constexpr int kMaxPreTokenizerDepth = 32;

}  // namespace

void BpeTokenizer::SetToken(int32_t id, std::string text, std::string bytes) {
  if (static_cast<size_t>(id) >= token_bytes_.size()) {
    token_bytes_.resize(id + 1);
    token_text_.resize(id + 1);
    flags_.resize(id + 1, 0);
  }
  token_bytes_[id] = std::move(bytes);
  token_text_[id] = std::move(text);
}

namespace {

constexpr std::string_view kSpaceMark = "\xE2\x96\x81";  // U+2581, SentencePiece's space

// A SentencePiece token's bytes as Decode gives them: U+2581 as a space, "<0xXX>" as that
// byte, anything else as it is.
std::string SpTokenBytes(std::string_view key) {
  if (const int b = ByteFallbackByte(key); b >= 0) return std::string(1, static_cast<char>(b));
  std::string out;
  for (size_t i = 0; i < key.size();) {
    if (key.substr(i, kSpaceMark.size()) == kSpaceMark) {
      out += ' ';
      i += kSpaceMark.size();
    } else {
      out += key[i++];
    }
  }
  return out;
}

}  // namespace

int ByteFallbackByte(std::string_view key) {
  if (key.size() != 6 || key.substr(0, 3) != "<0x" || key[5] != '>') return -1;
  auto hex = [](char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
  };
  const int hi = hex(key[3]), lo = hex(key[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

// An added token's bytes as Decode gives them: its content, with U+2581 as a space for a
// SentencePiece-style BPE (whose decoder's Replace step applies to every token: Gemma lists
// its runs of spaces as added tokens).
std::string BpeTokenizer::AddedTokenBytes(const std::string& content) const {
  if (!sp_ || ByteFallbackByte(content) >= 0) return content;
  return SpTokenBytes(content);
}

// Gemma's pre-tokenizer: a Split on " " after a normalizer that replaced every " " (with
// "▁"): it never finds its pattern, so the section stays whole, as with none.
bool BpeTokenizer::SplitsNothingAfterNormalizing(const json& pre) const {
  if (!pre.is_object() || pre.value("type", std::string()) != "Split" || !pre.contains("pattern") ||
      !pre["pattern"].is_object() || !pre["pattern"].contains("String") ||
      !pre["pattern"]["String"].is_string()) {
    return false;
  }
  const std::string pattern = pre["pattern"]["String"].get<std::string>();
  if (pattern.empty()) return false;
  for (const NormStep& step : norm_steps_) {
    if (step.kind == NormStep::Kind::kReplace && step.text == pattern &&
        step.with.find(pattern) == std::string::npos) {
      // Replaced everywhere; later steps must not bring it back.
      bool later_adds = false;
      for (const NormStep* t = &step + 1; t != norm_steps_.data() + norm_steps_.size(); ++t) {
        later_adds = later_adds || t->text.find(pattern) != std::string::npos ||
                     t->with.find(pattern) != std::string::npos;
      }
      return !later_adds;
    }
  }
  return false;
}

// The SentencePiece decoder as tokenizers writes it: Replace(U+2581 -> " "), ByteFallback,
// Fuse, then optionally Strip(" ", start N, stop 0); anything else is refused.
Status BpeTokenizer::BuildSpDecoder(const json& decoder, const std::string& name) {
  const std::string shape =
      "is not the SentencePiece decoder (Sequence of Replace \"\u2581\" -> \" \", ByteFallback, "
      "Fuse, optionally Strip of leading spaces)";
  if (decoder.value("type", std::string()) != "Sequence" || !decoder.contains("decoders") ||
      !decoder["decoders"].is_array()) {
    return Unsupported(Field(name, "decoder", shape));
  }
  const json& steps = decoder["decoders"];
  auto type_of = [&](size_t i) {
    return i < steps.size() && steps[i].is_object() ? steps[i].value("type", std::string())
                                                    : std::string();
  };
  const bool replace = type_of(0) == "Replace" && steps[0].contains("pattern") &&
                       steps[0]["pattern"].is_object() &&
                       steps[0]["pattern"].value("String", std::string()) == kSpaceMark &&
                       steps[0].value("content", std::string()) == " ";
  if (!replace || type_of(1) != "ByteFallback" || type_of(2) != "Fuse" ||
      (steps.size() != 3 && steps.size() != 4)) {
    return Unsupported(Field(name, "decoder", shape));
  }
  if (steps.size() == 4) {
    const json& strip = steps[3];
    const json start = strip.value("start", json(0));
    if (type_of(3) != "Strip" || strip.value("content", std::string()) != " " ||
        !start.is_number_integer() || start.get<int64_t>() < 0 || start.get<int64_t>() > 16 ||
        strip.value("stop", json(0)) != json(0)) {
      return Unsupported(Field(name, "decoder.decoders[3]", shape));
    }
    strip_start_ = static_cast<int>(start.get<int64_t>());
  }
  return Status::Ok();
}

Result<bool> BpeTokenizer::BuildVocab(const FlatVocabAndMerges& flat,
                                      const std::vector<uint32_t>* order, const std::string& name) {
  const size_t n = order != nullptr ? order->size() : flat.vocab.size();
  // Counted as the DOM sees the vocab, one entry per distinct key, so both readers accept
  // the same ids and report the same figures: in document order a repeated key sends the
  // build to the sorted order (below) before it completes, and there `n` counts distinct
  // keys. An id refused here in document order is judged again in the sorted order.
  tokens_defined_ = n + added_tokens_listed_;
  std::string bytes;
  byte_id_.fill(-1);
  byte_fallback_id_.fill(-1);
  token_bytes_.reserve(n + 1024);
  token_text_.reserve(n + 1024);
  if (ignore_merges_) bytes_to_id_.reserve(n);
  text_to_id_.reserve(n + 1024);
  std::vector<bool> id_seen;  // document order: ids taken so far
  for (size_t i = 0; i < n; ++i) {
    const FlatVocabAndMerges::VocabEntry& entry = flat.vocab[order != nullptr ? (*order)[i] : i];
    const std::string_view key = flat.Key(entry);
    if (entry.id < 0) {
      if (order == nullptr) return false;
      return InvalidArgument(Field(name, "model.vocab[\"" + EscapeForDisplay(key) + "\"]",
                                   "is not a token id (a non-negative integer)"));
    }
    const int32_t id = entry.id;
    if (id > DenseIdLimit(tokens_defined_)) {
      if (order == nullptr) return false;
      return InvalidArgument(Field(name, "model.vocab[\"" + EscapeForDisplay(key) + "\"]",
                                   TooSparse(id, tokens_defined_)));
    }
    if (sp_) {
      bytes = SpTokenBytes(key);
      if (const int b = ByteFallbackByte(key); b >= 0) {
        if (order == nullptr && byte_fallback_id_[b] >= 0) return false;
        byte_fallback_id_[b] = id;
      }
    } else if (!ByteLevelToBytes(key, &bytes)) {
      if (order == nullptr) return false;
      return Unsupported(Field(name, "model.vocab[\"" + EscapeForDisplay(key) + "\"]",
                               "is not in the byte-level alphabet (not a byte-level BPE)"));
    }
    if (order == nullptr) {
      if (static_cast<size_t>(id) >= id_seen.size()) id_seen.resize(id + n + 1);
      if (id_seen[id]) return false;  // a shared id: the sorted order decides
      id_seen[id] = true;
      // A repeated key: the sorted order decides (its last value wins).
      if (!text_to_id_.emplace(key, id).second) return false;
    } else {
      text_to_id_.emplace(key, id);  // keys are unique in this order
    }
    if (!sp_ && bytes.size() == 1) {
      // (Distinct valid UTF-8 keys name distinct bytes; checked all the same, as the
      // order would matter otherwise.)
      if (order == nullptr && byte_id_[static_cast<uint8_t>(bytes[0])] >= 0) return false;
      byte_id_[static_cast<uint8_t>(bytes[0])] = id;
    }
    if (ignore_merges_) {  // only ignore_merges looks words up
      if (!bytes_to_id_.emplace(bytes, id).second) {
        if (order == nullptr) return false;
        bytes_to_id_[bytes] = id;
      }
    }
    SetToken(id, std::string(key), bytes);
  }
  return true;
}

Status BpeTokenizer::BuildModel(const json& model, const FlatVocabAndMerges& flat,
                                const std::string& name) {
  if (!model.is_object())
    return InvalidArgument(Field(name, "model", "is missing or not an object"));
  if (!model.contains("type")) return InvalidArgument(Field(name, "model.type", "is missing"));
  if (!model["type"].is_string())
    return InvalidArgument(Field(name, "model.type", "is not a string"));
  const std::string type = model["type"].get<std::string>();
  if (type != "BPE") {
    return Unsupported(Field(name, "model.type",
                             "\"" + EscapeForDisplay(type) + "\" is not supported (only BPE)"));
  }
  auto truthy_string = [&](const char* key) {
    return model.contains(key) && model[key].is_string() && !model[key].get<std::string>().empty();
  };
  if (truthy_string("continuing_subword_prefix")) {
    return Unsupported(Field(name, "model.continuing_subword_prefix", "is not supported"));
  }
  if (truthy_string("end_of_word_suffix")) {
    return Unsupported(Field(name, "model.end_of_word_suffix", "is not supported"));
  }
  sp_ = model.contains("byte_fallback") && model["byte_fallback"].is_boolean() &&
        model["byte_fallback"].get<bool>();
  fuse_unk_ =
      model.contains("fuse_unk") && model["fuse_unk"].is_boolean() && model["fuse_unk"].get<bool>();
  if (model.contains("dropout") && model["dropout"].is_number() &&
      model["dropout"].get<double>() > 0) {
    return Unsupported(Field(name, "model.dropout", "> 0 is not supported (not deterministic)"));
  }
  if (model.contains("ignore_merges") && model["ignore_merges"].is_boolean()) {
    ignore_merges_ = model["ignore_merges"].get<bool>();
  }

  // model.vocab and model.merges are in `flat`: the DOM has their types (an empty object /
  // array in their place when the reader streamed them, else the value itself).
  if (!model.contains("vocab")) return InvalidArgument(Field(name, "model.vocab", "is missing"));
  if (!model["vocab"].is_object()) {
    return InvalidArgument(Field(name, "model.vocab", "is not an object"));
  }
  // The DOM visited the keys in sorted order, the last value of a duplicated key. That order
  // only shows when keys repeat, two keys share an id (the later one's text wins) or an
  // entry is bad (the first in that order is reported): the common case, none of these,
  // builds the same tables in document order, without sorting; otherwise the tables are
  // cleared and built again in the DOM's order.
  TRACE_ASSIGN_OR_RETURN(const bool built, BuildVocab(flat, nullptr, name));
  if (!built) {
    token_bytes_.clear();
    token_text_.clear();
    flags_.clear();
    text_to_id_.clear();
    bytes_to_id_.clear();
    const std::vector<uint32_t> order = flat.SortedUniqueVocab();
    TRACE_ASSIGN_OR_RETURN(const bool built_sorted, BuildVocab(flat, &order, name));
    (void)built_sorted;  // always true in that order
  }
  if (model.contains("unk_token") && model["unk_token"].is_string()) {
    auto it = text_to_id_.find(model["unk_token"].get<std::string>());
    if (it != text_to_id_.end()) unk_ = it->second;
  }

  if (!model.contains("merges")) return InvalidArgument(Field(name, "model.merges", "is missing"));
  if (!model["merges"].is_array()) {
    return InvalidArgument(Field(name, "model.merges", "is not an array"));
  }
  merges_.Reserve(flat.merges.size());
  for (size_t rank = 0; rank < flat.merges.size(); ++rank) {
    const FlatVocabAndMerges::Merge& m = flat.merges[rank];
    auto where = [&] { return "model.merges[" + std::to_string(rank) + "]"; };
    if (m.form == FlatVocabAndMerges::MergeForm::kNoSpace) {
      return InvalidArgument(Field(name, where(), "has no space"));
    }
    if (m.form == FlatVocabAndMerges::MergeForm::kNeither) {
      return InvalidArgument(Field(name, where(), "is neither \"a b\" nor [a, b]"));
    }
    // left and right are adjacent in merge_text: their concatenation needs no copy.
    const std::string_view both(flat.merge_text.data() + m.offset, m.left_size + m.right_size);
    auto l = text_to_id_.find(both.substr(0, m.left_size));
    auto r = text_to_id_.find(both.substr(m.left_size));
    auto merged = text_to_id_.find(both);
    if (l == text_to_id_.end() || r == text_to_id_.end() || merged == text_to_id_.end()) {
      return InvalidArgument(Field(name, where(), "names a token that is not in model.vocab"));
    }
    merges_.Insert(l->second, r->second, static_cast<int32_t>(rank), merged->second);
  }
  return Status::Ok();
}

Status BpeTokenizer::BuildPreTokenizer(const json& pre, const std::string& name,
                                       const std::string& where, int depth) {
  if (depth > kMaxPreTokenizerDepth) {
    return Unsupported(
        Field(name, where,
              "nests Sequences deeper than " + std::to_string(kMaxPreTokenizerDepth) + " levels"));
  }
  if (!pre.is_object() || !pre.contains("type") || !pre["type"].is_string()) {
    return InvalidArgument(Field(name, where + ".type", "is missing"));
  }
  const std::string type = pre["type"].get<std::string>();
  if (type == "Sequence") {
    if (!pre.contains("pretokenizers") || !pre["pretokenizers"].is_array()) {
      return InvalidArgument(Field(name, where + ".pretokenizers", "is missing"));
    }
    for (size_t i = 0; i < pre["pretokenizers"].size(); ++i) {
      TRACE_RETURN_IF_ERROR(BuildPreTokenizer(pre["pretokenizers"][i], name,
                                              where + ".pretokenizers[" + std::to_string(i) + "]",
                                              depth + 1));
    }
    return Status::Ok();
  }
  if (type == "Split") {
    const std::string behavior = pre.value("behavior", std::string("Isolated"));
    if (behavior != "Isolated") {
      return Unsupported(Field(name, where + ".behavior",
                               "\"" + EscapeForDisplay(behavior) + "\" is not supported"));
    }
    if (pre.value("invert", false)) {
      return Unsupported(Field(name, where + ".invert", "true is not supported"));
    }
    if (!pre.contains("pattern") || !pre["pattern"].is_object()) {
      return InvalidArgument(Field(name, where + ".pattern", "is missing"));
    }
    const json& pattern = pre["pattern"];
    std::string regex;
    if (pattern.contains("Regex") && pattern["Regex"].is_string()) {
      regex = pattern["Regex"].get<std::string>();
    } else if (pattern.contains("String") && pattern["String"].is_string()) {
      regex = "\\Q" + pattern["String"].get<std::string>() + "\\E";
    } else {
      return InvalidArgument(Field(name, where + ".pattern", "has neither Regex nor String"));
    }
    TRACE_ASSIGN_OR_RETURN(auto stage,
                           RegexStage::Compile(regex, name + ": " + where + ".pattern"));
    stages_.push_back({std::move(stage), false});
    return Status::Ok();
  }
  if (type == "ByteLevel") {
    byte_level_ = true;
    PreStage step;
    step.add_prefix_space = pre.value("add_prefix_space", false);
    if (pre.value("use_regex", true)) {
      // The GPT-2 pattern, as the reference writes it.
      TRACE_ASSIGN_OR_RETURN(
          auto stage,
          RegexStage::Compile("'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|"
                              "\\s+(?!\\S)|\\s+",
                              name + ": " + where));
      step.regex = std::move(stage);
    }
    if (step.regex != nullptr || step.add_prefix_space) stages_.push_back(std::move(step));
    return Status::Ok();
  }
  return Unsupported(
      Field(name, where + ".type", "\"" + EscapeForDisplay(type) + "\" is not supported"));
}

void BpeTokenizer::RebuildAddedIndex() {
  for (auto& v : added_by_first_byte_) v.clear();
  for (const AddedToken& t : added_) {
    if (t.content.empty()) continue;
    if (t.special && split_special_tokens_) continue;  // matched as ordinary text
    added_by_first_byte_[static_cast<uint8_t>(t.content[0])].push_back(&t);
  }
  for (auto& v : added_by_first_byte_) {
    std::stable_sort(v.begin(), v.end(), [](const AddedToken* a, const AddedToken* b) {
      return a->content.size() > b->content.size();
    });
  }
}

Status BpeTokenizer::Build(const json& root, const FlatVocabAndMerges& flat,
                           const std::string& name) {
  if (!root.is_object()) return InvalidArgument(name + ": not a JSON object");
  if (!root.contains("model")) return InvalidArgument(Field(name, "model", "is missing"));
  // BuildVocab adds the vocab's entries to these (tokens_defined_).
  added_tokens_listed_ = 0;
  if (root.contains("added_tokens") && root["added_tokens"].is_array()) {
    added_tokens_listed_ = root["added_tokens"].size();
  }
  TRACE_RETURN_IF_ERROR(BuildModel(root["model"], flat, name));

  if (root.contains("normalizer") && !root["normalizer"].is_null()) {
    const json& n = root["normalizer"];
    std::vector<const json*> parts;
    const std::string type = n.value("type", std::string());
    if (type == "Sequence" && n.contains("normalizers") && n["normalizers"].is_array()) {
      for (const json& p : n["normalizers"]) parts.push_back(&p);
    } else {
      parts.push_back(&n);
    }
    for (const json* p : parts) {
      const std::string t = p->is_object() ? p->value("type", std::string()) : std::string();
      if (t == "NFC") {
        nfc_ = true;
        norm_steps_.push_back({NormStep::Kind::kNfc, "", ""});
      } else if (sp_ && t == "Prepend" && p->contains("prepend") && (*p)["prepend"].is_string()) {
        norm_steps_.push_back({NormStep::Kind::kPrepend, (*p)["prepend"].get<std::string>(), ""});
      } else if (sp_ && t == "Replace" && p->contains("pattern") && (*p)["pattern"].is_object() &&
                 (*p)["pattern"].contains("String") && (*p)["pattern"]["String"].is_string() &&
                 !(*p)["pattern"]["String"].get<std::string>().empty() && p->contains("content") &&
                 (*p)["content"].is_string()) {
        norm_steps_.push_back({NormStep::Kind::kReplace,
                               (*p)["pattern"]["String"].get<std::string>(),
                               (*p)["content"].get<std::string>()});
      } else {
        return Unsupported(Field(name, "normalizer.type",
                                 "\"" + EscapeForDisplay(t) +
                                     "\" is not supported (NFC; with byte_fallback also Prepend "
                                     "and Replace of a String)"));
      }
    }
    // NFC alone keeps the fast path (NfcSpans) without steps.
    if (norm_steps_.size() == 1 && norm_steps_[0].kind == NormStep::Kind::kNfc) norm_steps_.clear();
  }

  if (sp_) {
    if (root.contains("pre_tokenizer") && !root["pre_tokenizer"].is_null() &&
        !SplitsNothingAfterNormalizing(root["pre_tokenizer"])) {
      return Unsupported(Field(name, "pre_tokenizer",
                               "is not supported with byte_fallback (a SentencePiece-style BPE "
                               "takes each section whole: null, or a Split on a String the "
                               "normalizer has replaced everywhere)"));
    }
    if (!root.contains("decoder") || !root["decoder"].is_object()) {
      return Unsupported(Field(name, "decoder", "is missing"));
    }
    TRACE_RETURN_IF_ERROR(BuildSpDecoder(root["decoder"], name));
  } else {
    if (!root.contains("pre_tokenizer") || root["pre_tokenizer"].is_null()) {
      return Unsupported(
          Field(name, "pre_tokenizer", "is missing (a ByteLevel pre-tokenizer is required)"));
    }
    TRACE_RETURN_IF_ERROR(BuildPreTokenizer(root["pre_tokenizer"], name, "pre_tokenizer"));
    if (!byte_level_) {
      return Unsupported(
          Field(name, "pre_tokenizer", "has no ByteLevel step (byte-level BPE only)"));
    }
    if (!root.contains("decoder") || !root["decoder"].is_object()) {
      return Unsupported(Field(name, "decoder", "is missing (a ByteLevel decoder is required)"));
    }
    const std::string decoder = root["decoder"].value("type", std::string());
    if (decoder != "ByteLevel") {
      return Unsupported(
          Field(name, "decoder.type",
                "\"" + EscapeForDisplay(decoder) + "\" is not supported (only ByteLevel)"));
    }
  }

  if (root.contains("added_tokens") && !root["added_tokens"].is_null()) {
    const json& list = root["added_tokens"];
    if (!list.is_array()) return InvalidArgument(Field(name, "added_tokens", "is not an array"));
    for (size_t i = 0; i < list.size(); ++i) {
      const json& t = list[i];
      const std::string where = "added_tokens[" + std::to_string(i) + "]";
      if (!t.is_object() || !t.contains("id") || !t["id"].is_number_integer() ||
          t["id"].get<int64_t>() < 0 || t["id"].get<int64_t>() > 16'000'000) {
        return InvalidArgument(Field(name, where + ".id", "is missing or not a token id"));
      }
      if (t["id"].get<int64_t>() > DenseIdLimit(tokens_defined_)) {
        return InvalidArgument(
            Field(name, where + ".id", TooSparse(t["id"].get<int64_t>(), tokens_defined_)));
      }
      if (!t.contains("content") || !t["content"].is_string()) {
        return InvalidArgument(Field(name, where + ".content", "is missing"));
      }
      AddedToken token;
      token.id = static_cast<int32_t>(t["id"].get<int64_t>());
      token.content = t["content"].get<std::string>();
      token.special = t.value("special", false);
      token.lstrip = t.value("lstrip", false);
      token.rstrip = t.value("rstrip", false);
      added_.push_back(std::move(token));
    }
  }
  for (const AddedToken& t : added_) {
    SetToken(t.id, t.content, AddedTokenBytes(t.content));
    flags_[t.id] = kAdded | (t.special ? kSpecial : 0);
    text_to_id_[t.content] = t.id;
  }
  RebuildAddedIndex();
  return Status::Ok();
}

Status BpeTokenizer::ApplyConfig(const json& config, const std::string& name) {
  if (!config.is_object()) return InvalidArgument(name + ": not a JSON object");
  if (config.contains("added_tokens_decoder") && config["added_tokens_decoder"].is_object()) {
    // Its entries may name tokens tokenizer.json already defines: counting them again only
    // loosens the limit a little.
    tokens_defined_ += config["added_tokens_decoder"].size();
    for (auto it = config["added_tokens_decoder"].begin();
         it != config["added_tokens_decoder"].end(); ++it) {
      const std::string where = "added_tokens_decoder[\"" + EscapeForDisplay(it.key()) + "\"]";
      int64_t id = -1;
      try {
        id = std::stoll(it.key());
      } catch (...) {
        id = -1;
      }
      if (id < 0 || id > 16'000'000 || !it.value().is_object() || !it.value().contains("content") ||
          !it.value()["content"].is_string()) {
        return InvalidArgument(Field(name, where, "is not {id: {content: ...}}"));
      }
      if (id > DenseIdLimit(tokens_defined_)) {
        return InvalidArgument(Field(name, where, TooSparse(id, tokens_defined_)));
      }
      const auto id32 = static_cast<int32_t>(id);
      if (IsAdded(id32)) continue;  // tokenizer.json already defines it
      AddedToken token;
      token.id = id32;
      token.content = it.value()["content"].get<std::string>();
      token.special = it.value().value("special", false);
      token.lstrip = it.value().value("lstrip", false);
      token.rstrip = it.value().value("rstrip", false);
      SetToken(token.id, token.content, AddedTokenBytes(token.content));
      flags_[token.id] = kAdded | (token.special ? kSpecial : 0);
      text_to_id_[token.content] = token.id;
      added_.push_back(std::move(token));
    }
  }
  auto token_of = [&](const char* key) -> std::optional<int32_t> {
    if (!config.contains(key)) return std::nullopt;
    const json& v = config[key];
    std::string text;
    if (v.is_string()) {
      text = v.get<std::string>();
    } else if (v.is_object() && v.contains("content") && v["content"].is_string()) {
      text = v["content"].get<std::string>();
    } else {
      return std::nullopt;
    }
    return TokenId(text);
  };
  bos_ = token_of("bos_token");
  eos_ = token_of("eos_token");
  if (config.contains("split_special_tokens") && config["split_special_tokens"].is_boolean()) {
    split_special_tokens_ = config["split_special_tokens"].get<bool>();
  }
  RebuildAddedIndex();
  return Status::Ok();
}

// Every table, in a canonical order, as text (DumpTokenizerTablesForTesting).
std::string BpeTokenizer::DumpTables() const {
  std::ostringstream out;
  auto esc = [](std::string_view s) { return EscapeForDisplay(s, kNoLimit); };
  out << "vocab_size " << vocab_size() << "\n";
  for (int32_t id = 0; id < vocab_size(); ++id) {
    out << "token " << id << " " << int{flags_[id]} << " " << esc(token_text_[id]) << " "
        << esc(token_bytes_[id]) << "\n";
  }
  auto sorted = [](const auto& map) {
    std::vector<std::pair<std::string, int32_t>> v(map.begin(), map.end());
    std::sort(v.begin(), v.end());
    return v;
  };
  for (const auto& [text, id] : sorted(text_to_id_))
    out << "text " << esc(text) << " " << id << "\n";
  for (const auto& [b, id] : sorted(bytes_to_id_)) out << "bytes " << esc(b) << " " << id << "\n";
  for (int b = 0; b < 256; ++b) out << (b == 0 ? "byte_id" : "") << " " << byte_id_[b];
  out << "\n";
  std::vector<std::array<int64_t, 4>> merges;
  merges_.ForEach([&](int32_t l, int32_t r, int32_t rank, int32_t merged) {
    merges.push_back({l, r, rank, merged});
  });
  std::sort(merges.begin(), merges.end());
  for (const auto& m : merges) {
    out << "merge " << m[0] << " " << m[1] << " " << m[2] << " " << m[3] << "\n";
  }
  out << "ignore_merges " << ignore_merges_ << " unk " << unk_.value_or(-1) << " nfc " << nfc_
      << " byte_level " << byte_level_ << " split_special " << split_special_tokens_ << " bos "
      << bos_.value_or(-1) << " eos " << eos_.value_or(-1) << "\n";
  for (const PreStage& stage : stages_) {
    out << "stage regex " << (stage.regex != nullptr) << " prefix " << stage.add_prefix_space
        << "\n";
  }
  for (const AddedToken& t : added_) {
    out << "added " << t.id << " " << esc(t.content) << " " << t.special << t.lstrip << t.rstrip
        << "\n";
  }
  for (int b = 0; b < 256; ++b) {
    for (const AddedToken* t : added_by_first_byte_[b]) {
      out << "added_index " << b << " " << t->id << " " << esc(t->content) << "\n";
    }
  }
  return out.str();
}

}  // namespace trace::engine::internal
