// Tokenizer: a Hugging Face tokenizer.json byte-level BPE tokenizer (Qwen2/Qwen3, Llama-3),
// id-for-id equal to the reference implementation.
//
// Ownership: Load() returns a Tokenizer the caller owns; it owns its vocabulary, merges and
// caches. An IncrementalDecoder borrows its Tokenizer, which must outlive it.
// Thread safety: a loaded Tokenizer is immutable to callers and every const method is safe
// to call from many threads at once (the internal pre-token cache is sharded and locked);
// an IncrementalDecoder is single-threaded.
// Errors: Load() returns a one-line Status naming the file and the unsupported or missing
// field; Encode/Decode cannot fail (invalid UTF-8 input is replaced with U+FFFD the way a
// WHATWG TextDecoder does; unknown ids decode to nothing).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "base/utf8.h"

namespace trace::engine {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Loads a tokenizer.json (model.type "BPE" with a ByteLevel decoder). When a
  // tokenizer_config.json sits next to it, its added_tokens_decoder entries are merged in
  // and its bos_token / eos_token and split_special_tokens are read.
  static Result<std::unique_ptr<Tokenizer>> Load(const std::string& tokenizer_json_path);
  // Same, from the file contents; `name` is used in error messages in place of a path.
  // `tokenizer_config_json`, when not empty, is applied as a tokenizer_config.json next to it
  // would be (a GGUF file's metadata gives both: engine/gguf_model.h).
  static Result<std::unique_ptr<Tokenizer>> LoadFromString(
      std::string_view tokenizer_json, std::string_view name,
      std::string_view tokenizer_config_json = {});

  // Text -> ids. Added tokens are matched first (special ones only when
  // split_special_tokens is false), then NFC, the pre-tokenizer and BPE run on the rest.
  std::vector<int32_t> Encode(std::string_view text) const { return Encode(text, SIZE_MAX); }
  // The first `max_tokens` ids of Encode(text) (all of them when there are fewer), without
  // encoding past them: pre-tokens are made and encoded one at a time, so a prompt longer
  // than a model's context costs the ids of one context, not of the whole text.
  virtual std::vector<int32_t> Encode(std::string_view text, size_t max_tokens) const = 0;

  // Ids -> text. Byte-level pieces are mapped back to bytes; bytes that do not form valid
  // UTF-8 become U+FFFD (as the reference does). skip_special drops special tokens.
  virtual std::string Decode(std::span<const int32_t> ids, bool skip_special = false) const = 0;

  // The raw bytes one token stands for (added tokens: their content). Empty for an id out
  // of range. Constrained decoding builds token tries from these.
  virtual std::string TokenBytes(int32_t id) const = 0;

  // The token's string as written in tokenizer.json (byte-level alphabet for BPE pieces,
  // e.g. "Ġthe"); empty for an id out of range.
  virtual std::string TokenText(int32_t id) const = 0;

  // The id of a token by its tokenizer.json text: "<|im_end|>", "<tool_call>", "Ġthe".
  virtual std::optional<int32_t> TokenId(std::string_view token_text) const = 0;

  // One past the largest id (vocabulary plus added tokens).
  virtual int32_t vocab_size() const = 0;

  // True for added tokens marked special.
  virtual bool IsSpecial(int32_t id) const = 0;
  // True for every added token (special or not): matched before BPE, decoded verbatim.
  virtual bool IsAdded(int32_t id) const = 0;

  // bos/eos from tokenizer_config.json, when present.
  virtual std::optional<int32_t> bos_token_id() const = 0;
  virtual std::optional<int32_t> eos_token_id() const = 0;
};

// Streaming decode: push ids as they are sampled, get back only complete UTF-8. Bytes of a
// character split across tokens are held until it completes; Flush() emits what is left
// (an incomplete tail becomes U+FFFD). The concatenation of all Push() results and Flush()
// equals tokenizer.Decode(all ids, skip_special).
class IncrementalDecoder {
 public:
  explicit IncrementalDecoder(const Tokenizer& tokenizer, bool skip_special = false)
      : tokenizer_(tokenizer), skip_special_(skip_special) {}

  // Returns the newly completed text (possibly empty).
  std::string Push(int32_t id);
  std::string Push(std::span<const int32_t> ids);
  // Returns the held incomplete bytes, each maximal invalid subpart as U+FFFD, and resets.
  std::string Flush();

 private:
  const Tokenizer& tokenizer_;
  bool skip_special_;
  std::string pending_;  // bytes not yet emitted: an incomplete UTF-8 sequence at the end
};

// Replaces every maximal invalid subpart of `bytes` with U+FFFD (WHATWG UTF-8 decode):
// base/utf8.h's, named here too because the tokenizer's callers know it by this name.
using ::trace::SanitizeUtf8;

// NFC-normalises valid UTF-8 (utf8proc). Invalid input is sanitised first.
std::string NormalizeNfc(std::string_view utf8);

}  // namespace trace::engine
