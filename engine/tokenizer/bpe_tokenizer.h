// BpeTokenizer: the one Tokenizer implementation, a byte-level BPE built from a Hugging
// Face tokenizer.json (internal to engine/tokenizer; callers use tokenizer.h).
//
// Its methods are defined in two files: tokenizer_build.cc builds the tables from
// tokenizer.json and tokenizer_config.json (Build, ApplyConfig, DumpTables); tokenizer.cc
// encodes and decodes with them, next to the loaders (Tokenizer::Load, LoadFromString)
// that make one.
//
// Ownership: owns its tables, its regex stages and its pre-token cache; Load returns it as
// a std::unique_ptr<Tokenizer>. Thread safety: Build, then ApplyConfig, run on one thread
// before the tokenizer is shared; after that every const method (Encode, Decode, the token
// lookups, DumpTables) may run on many threads at once: the only state they change is the
// PieceCache, whose shards are locked. Errors: Build and ApplyConfig return a one-line
// Status naming the file and the field (InvalidArgument for a malformed field, Unsupported
// for a feature this tokenizer does not implement); the half-built tokenizer is then
// discarded (the loaders return only the Status). Encode and Decode cannot fail
// (tokenizer.h).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "engine/tokenizer/merge_table.h"
#include "engine/tokenizer/piece_cache.h"
#include "engine/tokenizer/regex_stage.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/tokenizer_json_reader.h"

namespace trace::engine::internal {

// A token matched in the text before BPE (tokenizer.json added_tokens, or
// tokenizer_config.json added_tokens_decoder).
struct AddedToken {
  std::string content;
  int32_t id = 0;
  bool special = false;
  bool lstrip = false;
  bool rstrip = false;
};

// The byte a SentencePiece byte-fallback token names ("<0x41>" -> 0x41), or -1.
int ByteFallbackByte(std::string_view key);

class BpeTokenizer final : public Tokenizer {
 public:
  using Tokenizer::Encode;
  std::vector<int32_t> Encode(std::string_view text, size_t max_tokens) const override;
  std::string Decode(std::span<const int32_t> ids, bool skip_special) const override;
  std::string TokenBytes(int32_t id) const override {
    return InRange(id) ? token_bytes_[id] : std::string();
  }
  std::string TokenText(int32_t id) const override {
    return InRange(id) ? token_text_[id] : std::string();
  }
  std::optional<int32_t> TokenId(std::string_view token_text) const override {
    auto it = text_to_id_.find(token_text);
    if (it == text_to_id_.end()) return std::nullopt;
    return it->second;
  }
  int32_t vocab_size() const override { return static_cast<int32_t>(token_bytes_.size()); }
  bool IsSpecial(int32_t id) const override { return InRange(id) && (flags_[id] & kSpecial); }
  bool IsAdded(int32_t id) const override { return InRange(id) && (flags_[id] & kAdded); }
  std::optional<int32_t> bos_token_id() const override { return bos_; }
  std::optional<int32_t> eos_token_id() const override { return eos_; }

  // `name` is the file as errors show it (already escaped); values taken from the JSON go
  // through EscapeForDisplay before they enter a message.
  // `root` and `flat` are the document as ReadTokenizerJson gives it (tokenizer_json_reader.h):
  // model.vocab and model.merges are read from `flat`, only their types from `root`.
  Status Build(const nlohmann::json& root, const FlatVocabAndMerges& flat, const std::string& name);
  Status ApplyConfig(const nlohmann::json& config, const std::string& name);
  std::string DumpTables() const;

 private:
  static constexpr uint8_t kSpecial = 1;
  static constexpr uint8_t kAdded = 2;

  bool InRange(int32_t id) const { return id >= 0 && id < vocab_size(); }
  void SetToken(int32_t id, std::string text, std::string bytes);
  Status BuildModel(const nlohmann::json& model, const FlatVocabAndMerges& flat,
                    const std::string& name);
  // Fills the vocabulary tables from `flat` in `order` (indices into flat.vocab:
  // the DOM's order, with errors reported), or with order null in document order; then
  // false (tables half built) when that order could differ from the DOM's.
  Result<bool> BuildVocab(const FlatVocabAndMerges& flat, const std::vector<uint32_t>* order,
                          const std::string& name);
  // `depth`: how many Sequences `pre` is inside (kMaxPreTokenizerDepth bounds the recursion).
  Status BuildPreTokenizer(const nlohmann::json& pre, const std::string& name,
                           const std::string& where, int depth = 0);
  void RebuildAddedIndex();
  // Added-token matching: the longest added token starting at `pos`, or nullptr.
  const AddedToken* MatchAddedAt(std::string_view text, size_t pos) const;
  // Pre-tokenizer stages from `stage` on, depth first, then BPE, appending to *ids; false
  // once *ids holds `max_tokens` (the caller stops there).
  bool EncodeStages(size_t stage, std::string_view piece, size_t max_tokens,
                    std::vector<int32_t>* ids) const;
  void EncodePiece(std::string_view piece, std::vector<int32_t>* ids) const;
  void Bpe(std::string_view piece, std::vector<int32_t>* ids) const;
  static constexpr size_t kShortWord = 64;  // longer words take the heap path

  std::vector<std::string> token_bytes_;
  std::vector<std::string> token_text_;
  std::vector<uint8_t> flags_;
  struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
  };
  // tokenizer.json strings (looked up by view: no temporary strings)
  std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>> text_to_id_;
  std::unordered_map<std::string, int32_t> bytes_to_id_;  // vocabulary by bytes (ignore_merges)
  std::array<int32_t, 256> byte_id_{};                    // single-byte tokens (-1: none)
  MergeTable merges_;
  bool ignore_merges_ = false;
  // Token entries the files define (vocab, added_tokens, added_tokens_decoder): bounds the
  // ids accepted (DenseIdLimit).
  size_t tokens_defined_ = 0;
  size_t added_tokens_listed_ = 0;  // tokenizer.json's added_tokens entries
  std::optional<int32_t> unk_;
  bool nfc_ = false;
  // SentencePiece-style BPE (model.byte_fallback: Llama 2, Mistral): vocabulary keys are text
  // with U+2581 for spaces, words start as characters (a character not in the vocabulary as
  // its bytes' <0xXX> tokens), the normalizer steps below run on each section, there is no
  // pre-tokenizer, and Decode strips `strip_start_` leading spaces (the Strip decoder).
  bool sp_ = false;
  bool fuse_unk_ = false;
  int strip_start_ = 0;
  std::array<int32_t, 256> byte_fallback_id_{};  // "<0xXX>" tokens (-1: none)
  struct NormStep {
    enum class Kind { kNfc, kPrepend, kReplace };
    Kind kind;
    std::string text;  // kPrepend: what is prepended; kReplace: the pattern
    std::string with;  // kReplace: its replacement
  };
  std::vector<NormStep> norm_steps_;  // in order (empty: NFC alone, or nothing)
  // The section's normalized text when it differs from `section` (true), per norm_steps_.
  bool NormalizeSection(std::string_view section, std::string* out) const;
  Status BuildSpDecoder(const nlohmann::json& decoder, const std::string& name);
  bool SplitsNothingAfterNormalizing(const nlohmann::json& pre) const;
  std::string AddedTokenBytes(const std::string& content) const;
  void SpBpe(std::string_view piece, std::vector<int32_t>* ids) const;
  void MergeIds(std::vector<int32_t>* symbols) const;
  bool byte_level_ = false;  // the pre-tokenizer has a ByteLevel step
  // Pre-tokenizer steps in order; each applies to every piece the previous one produced.
  struct PreStage {
    std::unique_ptr<RegexStage> regex;  // null: no split
    bool add_prefix_space = false;      // ByteLevel: prepend ' ' to pieces lacking one
  };
  std::vector<PreStage> stages_;
  std::vector<AddedToken> added_;
  bool split_special_tokens_ = false;
  // Index for added-token matching: candidates by first byte, longest first.
  std::array<std::vector<const AddedToken*>, 256> added_by_first_byte_;
  std::optional<int32_t> bos_, eos_;
  PieceCache cache_;
};

}  // namespace trace::engine::internal
