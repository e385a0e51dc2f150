// Byte-level BPE tokenizer loaded from a Hugging Face tokenizer.json (docs/tokenizer.md).
//
// Pipeline of Encode: sanitise invalid UTF-8 -> split out added tokens (longest match) ->
// per remaining section: NFC -> regex pre-tokenizer stages -> byte-level BPE (cached per
// pre-token). The behaviour follows the reference implementation we test against
// (@lenml/tokenizers, a port of transformers.js), including its regex dialect.
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <array>
#include <climits>
#include <cstdint>
#include <cstring>
#include <deque>
#include <fstream>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <queue>
#include <sstream>
#include <unordered_map>

#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/tokenizer_json_reader.h"
#include "engine/tokenizer/tokenizer_testing.h"

#include "base/escape.h"

namespace trace::engine {
namespace {

using json = nlohmann::json;

// ---------------------------------------------------------------------------------------
// GPT-2 byte <-> unicode alphabet: printable bytes stand for themselves, the others are
// shifted to U+0100 and up, so every byte has a visible one-character name.
struct ByteAlphabet {
  std::array<std::string, 256> byte_to_utf8;
  // By code point (the alphabet's characters are all below U+0800, which is every code
  // point a one- or two-byte sequence can name): the byte, or -1 when not in the alphabet.
  std::array<int16_t, 0x800> codepoint_to_byte;

  ByteAlphabet() {
    codepoint_to_byte.fill(-1);
    int next = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174);
      const uint32_t cp = printable ? static_cast<uint32_t>(b) : 256u + next++;
      codepoint_to_byte[cp] = static_cast<uint8_t>(b);
      std::string s;
      if (cp < 0x80) {
        s.push_back(static_cast<char>(cp));
      } else {
        s.push_back(static_cast<char>(0xC0 | (cp >> 6)));
        s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
      }
      byte_to_utf8[b] = s;
    }
  }
};

const ByteAlphabet& Alphabet() {
  static const ByteAlphabet alphabet;
  return alphabet;
}

// Maps a byte-level token string ("Ġthe") to the bytes it stands for (" the"). Returns
// false when a character is not in the byte alphabet.
bool ByteLevelToBytes(std::string_view text, std::string* bytes) {
  const auto& map = Alphabet().codepoint_to_byte;
  bytes->clear();
  bytes->reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    const auto b = static_cast<uint8_t>(text[i]);
    uint32_t cp;
    if (b < 0x80) {
      cp = b;
      i += 1;
    } else if ((b & 0xE0) == 0xC0 && i + 1 < text.size()) {
      cp = ((b & 0x1Fu) << 6) | (static_cast<uint8_t>(text[i + 1]) & 0x3Fu);
      i += 2;
    } else {
      return false;  // the alphabet only uses one- and two-byte characters
    }
    const int16_t byte = map[cp];  // cp < 0x800 by construction
    if (byte < 0) return false;
    bytes->push_back(static_cast<char>(byte));
  }
  return true;
}

// True when `s` is well-formed UTF-8 (fast for ASCII).
bool IsValidUtf8(std::string_view s) {
  size_t i = 0;
  const size_t n = s.size();
  while (i < n) {
    while (i + 8 <= n) {  // eight ASCII bytes at a time
      uint64_t word;
      std::memcpy(&word, s.data() + i, 8);
      if (word & 0x8080808080808080ull) break;
      i += 8;
    }
    if (i >= n) break;
    const auto b = static_cast<uint8_t>(s[i]);
    if (b < 0x80) {
      ++i;
      continue;
    }
    size_t len;
    uint8_t lo = 0x80, hi = 0xBF;
    if (b >= 0xC2 && b <= 0xDF) {
      len = 2;
    } else if (b >= 0xE0 && b <= 0xEF) {
      len = 3;
      if (b == 0xE0) lo = 0xA0;
      if (b == 0xED) hi = 0x9F;
    } else if (b >= 0xF0 && b <= 0xF4) {
      len = 4;
      if (b == 0xF0) lo = 0x90;
      if (b == 0xF4) hi = 0x8F;
    } else {
      return false;
    }
    if (i + len > n) return false;
    const auto c1 = static_cast<uint8_t>(s[i + 1]);
    if (c1 < lo || c1 > hi) return false;
    for (size_t j = 2; j < len; ++j) {
      if ((static_cast<uint8_t>(s[i + j]) & 0xC0) != 0x80) return false;
    }
    i += len;
  }
  return true;
}

// Decodes the code point at s[i] of valid UTF-8; sets *len to its byte length.
uint32_t DecodeAt(std::string_view s, size_t i, size_t* len) {
  const auto b = static_cast<uint8_t>(s[i]);
  if (b < 0x80) {
    *len = 1;
    return b;
  }
  if (b < 0xE0) {
    *len = 2;
    return ((b & 0x1Fu) << 6) | (static_cast<uint8_t>(s[i + 1]) & 0x3Fu);
  }
  if (b < 0xF0) {
    *len = 3;
    return ((b & 0x0Fu) << 12) | ((static_cast<uint8_t>(s[i + 1]) & 0x3Fu) << 6) |
           (static_cast<uint8_t>(s[i + 2]) & 0x3Fu);
  }
  *len = 4;
  return ((b & 0x07u) << 18) | ((static_cast<uint8_t>(s[i + 1]) & 0x3Fu) << 12) |
         ((static_cast<uint8_t>(s[i + 2]) & 0x3Fu) << 6) | (static_cast<uint8_t>(s[i + 3]) & 0x3Fu);
}

// True for characters with NFC_Quick_Check=Yes and canonical combining class 0 that are
// never the second half of a composition: NFC has a boundary before each of them, so text
// can be normalised piecewise between them. Only whole, long-assigned blocks are listed
// (checked against the Unicode data); everything else takes the utf8proc path.
bool IsNfcBoundary(uint32_t cp) {
  if (cp < 0x300) return true;
  if (cp < 0x2000) {
    return (cp >= 0x391 && cp <= 0x3A9) || (cp >= 0x3B1 && cp <= 0x3C9) ||
           (cp >= 0x400 && cp <= 0x482) || (cp >= 0x48A && cp <= 0x52F) ||
           (cp >= 0x5D0 && cp <= 0x5EA) || (cp >= 0x620 && cp <= 0x64A) ||
           (cp >= 0x904 && cp <= 0x939) || (cp >= 0xE01 && cp <= 0xE30) ||
           (cp >= 0x1E00 && cp <= 0x1EFF);
  }
  return (cp >= 0x2002 && cp <= 0x206F) || (cp >= 0x20A0 && cp <= 0x20BF) ||
         (cp >= 0x2190 && cp <= 0x21FF) || (cp >= 0x2500 && cp <= 0x27BF) ||
         (cp >= 0x3000 && cp <= 0x3029) || (cp >= 0x3041 && cp <= 0x3096) ||
         (cp >= 0x30A1 && cp <= 0x30FA) || (cp >= 0x4E00 && cp <= 0x9FFF) ||
         (cp >= 0xAC00 && cp <= 0xD7A3) || (cp >= 0xFE00 && cp <= 0xFE0F) ||
         (cp >= 0xFF01 && cp <= 0xFF5E) || (cp >= 0x1F300 && cp <= 0x1F64F) ||
         (cp >= 0x1F680 && cp <= 0x1F6FF) || (cp >= 0x1F900 && cp <= 0x1F9FF);
}

// NFC of valid UTF-8, touching only the spans that need it: each run of non-boundary
// characters together with the boundary character before it goes through utf8proc; the
// rest is copied. Returns false (and leaves *out alone) when the text is already NFC by
// this check, so the caller can keep using its view.
bool NfcSpans(std::string_view s, std::string* out) {
  size_t i = 0;
  size_t copied = 0;      // s[0, copied) is already in *out
  size_t last_start = 0;  // start of the previous character (a boundary one)
  bool changed = false;
  while (i < s.size()) {
    if (static_cast<uint8_t>(s[i]) < 0x80) {
      last_start = i++;
      continue;
    }
    size_t len;
    const uint32_t cp = DecodeAt(s, i, &len);
    if (IsNfcBoundary(cp)) {
      last_start = i;
      i += len;
      continue;
    }
    // A span: the boundary character before (it may compose with what follows), then up
    // to the next boundary character.
    const size_t span_start = i == 0 ? 0 : last_start;
    size_t end = i + len;
    while (end < s.size()) {
      size_t l;
      if (IsNfcBoundary(DecodeAt(s, end, &l))) break;
      end += l;
    }
    if (!changed) {
      out->clear();
      out->reserve(s.size() + 16);
      changed = true;
    }
    out->append(s.data() + copied, span_start - copied);
    *out += NormalizeNfc(s.substr(span_start, end - span_start));
    copied = end;
    i = end;
    last_start = end;  // the next character, if any, is a boundary one
  }
  if (changed) out->append(s.data() + copied, s.size() - copied);
  return changed;
}

// ---------------------------------------------------------------------------------------
// Open-addressing hash map from a merge pair (left id, right id) to its rank and result.
class MergeTable {
 public:
  struct Entry {
    uint64_t key = kEmpty;
    int32_t rank = 0;
    int32_t merged_id = 0;
  };

  void Reserve(size_t n) {
    size_t cap = 16;
    while (cap < n * 2) cap <<= 1;
    slots_.assign(cap, Entry{});
    mask_ = cap - 1;
  }

  // Keeps the first (lowest-rank) entry for a duplicate pair.
  void Insert(int32_t left, int32_t right, int32_t rank, int32_t merged_id) {
    const uint64_t key = Key(left, right);
    for (size_t i = Hash(key) & mask_;; i = (i + 1) & mask_) {
      if (slots_[i].key == kEmpty) {
        slots_[i] = Entry{key, rank, merged_id};
        return;
      }
      if (slots_[i].key == key) return;
    }
  }

  // Calls fn(left, right, rank, merged_id) for every entry, in slot order.
  template <typename Fn>
  void ForEach(Fn&& fn) const {
    for (const Entry& e : slots_) {
      if (e.key == kEmpty) continue;
      fn(static_cast<int32_t>(e.key >> 32), static_cast<int32_t>(e.key & 0xFFFFFFFFu), e.rank,
         e.merged_id);
    }
  }

  const Entry* Find(int32_t left, int32_t right) const {
    const uint64_t key = Key(left, right);
    for (size_t i = Hash(key) & mask_;; i = (i + 1) & mask_) {
      const Entry& e = slots_[i];
      if (e.key == key) return &e;
      if (e.key == kEmpty) return nullptr;
    }
  }

 private:
  static constexpr uint64_t kEmpty = ~uint64_t{0};
  static uint64_t Key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
  static size_t Hash(uint64_t key) {
    key ^= key >> 29;
    key *= 0xBF58476D1CE4E5B9ull;
    key ^= key >> 32;
    return static_cast<size_t>(key);
  }

  std::vector<Entry> slots_;
  size_t mask_ = 0;
};

// ---------------------------------------------------------------------------------------
// Regex pre-tokenizer stage: a PCRE2 pattern (UTF, JIT) translated from the JS dialect.

// JavaScript's \s (WhiteSpace + LineTerminator), which the reference uses; PCRE2's own \s
// differs (U+0085 in, U+FEFF out).
constexpr char kJsWhitespaceClassBody[] =
    "\\t\\n\\x{0B}\\f\\r \\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}"
    "\\x{205F}\\x{3000}\\x{FEFF}";

// Rewrites a tokenizer.json regex into the PCRE2 pattern that matches what the reference
// (a JS RegExp with the "u" flag) matches.
Result<std::string> TranslateRegex(std::string pattern, const std::string& where) {
  // The reference rewrites the one case-insensitive group tokenizers use (JS has no (?i:)).
  const std::string kCaseless = "(?i:'s|'t|'re|'ve|'m|'ll|'d)";
  const std::string kExplicit = "(?:'(?:[sS]|[tT]|[rR][eE]|[vV][eE]|[mM]|[lL][lL]|[dD]))";
  for (size_t pos; (pos = pattern.find(kCaseless)) != std::string::npos;) {
    pattern.replace(pos, kCaseless.size(), kExplicit);
  }
  std::string out;
  bool in_class = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      const char e = pattern[i + 1];
      ++i;
      if (e == 's') {
        if (!in_class) out += '[';
        out += kJsWhitespaceClassBody;
        if (!in_class) out += ']';
      } else if (e == 'S') {
        if (in_class) return Unsupported(where + ": \\S inside a character class is not supported");
        out += "[^";
        out += kJsWhitespaceClassBody;
        out += ']';
      } else {
        out += c;
        out += e;
      }
      continue;
    }
    if (c == '[' && !in_class) {
      in_class = true;
      out += c;
      if (i + 1 < pattern.size() && pattern[i + 1] == '^') out += pattern[++i];
      continue;
    }
    if (c == ']' && in_class) in_class = false;
    out += c;
  }
  return out;
}

class RegexStage {
 public:
  ~RegexStage() {
    if (code_ != nullptr) pcre2_code_free(code_);
  }

  static Result<std::unique_ptr<RegexStage>> Compile(const std::string& js_pattern,
                                                     const std::string& where) {
    TRACE_ASSIGN_OR_RETURN(std::string pattern, TranslateRegex(js_pattern, where));
    int error = 0;
    PCRE2_SIZE offset = 0;
    pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                     PCRE2_UTF, &error, &offset, nullptr);
    if (code == nullptr) {
      PCRE2_UCHAR buf[256];
      pcre2_get_error_message(error, buf, sizeof(buf));
      return Unsupported(where + ": regex does not compile at offset " + std::to_string(offset) +
                         ": " + reinterpret_cast<const char*>(buf));
    }
    auto stage = std::unique_ptr<RegexStage>(new RegexStage());
    stage->code_ = code;
    stage->jit_ = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
    return stage;
  }

  // Isolated split: appends the matches and the gaps between them, in order, to `out`.
  void Split(std::string_view text, std::vector<std::string_view>* out) const {
    MatchContext& ctx = ThreadContext();
    const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
    size_t prev = 0;
    size_t pos = 0;
    while (pos <= text.size()) {
      int rc = jit_ ? pcre2_jit_match(code_, subject, text.size(), pos, 0, ctx.data, ctx.context)
                    : PCRE2_ERROR_JIT_BADOPTION;
      if (rc < 0 && rc != PCRE2_ERROR_NOMATCH) {
        // JIT stack exhausted or unavailable: the interpreter gives the same answer.
        rc = pcre2_match(code_, subject, text.size(), pos, PCRE2_NO_UTF_CHECK, ctx.data, nullptr);
      }
      if (rc < 0) break;  // no further match (or an engine failure: the rest is one gap)
      const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(ctx.data);
      const size_t start = ov[0];
      const size_t end = ov[1];
      if (start > prev) out->push_back(text.substr(prev, start - prev));
      if (end > start) {
        out->push_back(text.substr(start, end - start));
        prev = end;
        pos = end;
      } else {
        // An empty match: step over one character, as JS matchAll does in "u" mode.
        prev = end;
        if (end >= text.size()) break;
        size_t step = 1;
        while (end + step < text.size() &&
               (static_cast<uint8_t>(text[end + step]) & 0xC0) == 0x80) {
          ++step;
        }
        pos = end + step;
      }
    }
    if (prev < text.size()) out->push_back(text.substr(prev));
  }

 private:
  struct MatchContext {
    pcre2_match_data* data = nullptr;
    pcre2_jit_stack* stack = nullptr;
    pcre2_match_context* context = nullptr;
    MatchContext() {
      data = pcre2_match_data_create(1, nullptr);
      stack = pcre2_jit_stack_create(32 * 1024, 4 * 1024 * 1024, nullptr);
      context = pcre2_match_context_create(nullptr);
      pcre2_jit_stack_assign(context, nullptr, stack);
    }
    ~MatchContext() {
      pcre2_match_context_free(context);
      pcre2_jit_stack_free(stack);
      pcre2_match_data_free(data);
    }
  };
  // One per thread, shared by all patterns (only the whole-match offsets are read).
  static MatchContext& ThreadContext() {
    thread_local MatchContext ctx;
    return ctx;
  }

  RegexStage() = default;
  pcre2_code* code_ = nullptr;
  bool jit_ = false;
};

// ---------------------------------------------------------------------------------------
// Pre-token -> ids cache, sharded so that concurrent Encode calls rarely contend.
class PieceCache {
 public:
  bool Get(std::string_view piece, size_t hash, std::vector<int32_t>* ids) const {
    Shard& shard = shards_[hash % kShards];
    std::lock_guard<std::mutex> lock(shard.mu);
    auto it = shard.map.find(piece);
    if (it == shard.map.end()) return false;
    ids->insert(ids->end(), it->second.begin(), it->second.end());
    return true;
  }

  void Put(std::string_view piece, size_t hash, std::span<const int32_t> ids) const {
    Shard& shard = shards_[hash % kShards];
    std::lock_guard<std::mutex> lock(shard.mu);
    // Bounded memory: a full shard starts over (cheap, and hot pieces come back at once).
    if (shard.map.size() >= kMaxPerShard) shard.map.clear();
    shard.map.emplace(std::string(piece), std::vector<int32_t>(ids.begin(), ids.end()));
  }

  static constexpr size_t kMaxPieceBytes = 96;

 private:
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
  };
  struct Shard {
    std::mutex mu;
    std::unordered_map<std::string, std::vector<int32_t>, Hash, std::equal_to<>> map;
  };
  static constexpr size_t kShards = 16;
  static constexpr size_t kMaxPerShard = 16384;
  mutable std::array<Shard, kShards> shards_;
};

// ---------------------------------------------------------------------------------------

struct AddedToken {
  std::string content;
  int32_t id = 0;
  bool special = false;
  bool lstrip = false;
  bool rstrip = false;
};

// JavaScript String.prototype.trim whitespace (same set as the reference's \s).
size_t JsWhitespaceLengthAt(std::string_view s, size_t i) {
  const auto b = static_cast<uint8_t>(s[i]);
  if (b == ' ' || (b >= 0x09 && b <= 0x0D)) return 1;
  if (b == 0xC2) return i + 1 < s.size() && static_cast<uint8_t>(s[i + 1]) == 0xA0 ? 2 : 0;
  if ((b & 0xF0) != 0xE0 || i + 2 >= s.size()) return 0;
  const uint32_t cp = ((b & 0x0Fu) << 12) | ((static_cast<uint8_t>(s[i + 1]) & 0x3Fu) << 6) |
                      (static_cast<uint8_t>(s[i + 2]) & 0x3Fu);
  if (cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 ||
      cp == 0x202F || cp == 0x205F || cp == 0x3000 || cp == 0xFEFF) {
    return 3;
  }
  return 0;
}

std::string_view TrimJsStart(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const size_t n = JsWhitespaceLengthAt(s, i);
    if (n == 0) break;
    i += n;
  }
  return s.substr(i);
}

std::string_view TrimJsEnd(std::string_view s) {
  // Walk forward remembering where the trailing whitespace run starts.
  size_t i = 0;
  size_t run_start = 0;
  bool in_run = false;
  while (i < s.size()) {
    const size_t n = JsWhitespaceLengthAt(s, i);
    if (n > 0) {
      if (!in_run) run_start = i;
      in_run = true;
      i += n;
    } else {
      in_run = false;
      ++i;
    }
  }
  return in_run ? s.substr(0, run_start) : s;
}

class BpeTokenizer final : public Tokenizer {
 public:
  std::vector<int32_t> Encode(std::string_view text) const override;
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
  Status Build(const json& root, const FlatVocabAndMerges& flat, const std::string& name);
  Status ApplyConfig(const json& config, const std::string& name);
  std::string DumpTables() const;

 private:
  static constexpr uint8_t kSpecial = 1;
  static constexpr uint8_t kAdded = 2;

  bool InRange(int32_t id) const { return id >= 0 && id < vocab_size(); }
  void SetToken(int32_t id, std::string text, std::string bytes);
  Status BuildModel(const json& model, const FlatVocabAndMerges& flat, const std::string& name);
  // Fills the vocabulary tables from `flat` in `order` (indices into flat.vocab:
  // the DOM's order, with errors reported), or with order null in document order; then
  // false (tables half built) when that order could differ from the DOM's.
  Result<bool> BuildVocab(const FlatVocabAndMerges& flat, const std::vector<uint32_t>* order,
                          const std::string& name);
  // `depth`: how many Sequences `pre` is inside (kMaxPreTokenizerDepth bounds the recursion).
  Status BuildPreTokenizer(const json& pre, const std::string& name, const std::string& where,
                           int depth = 0);
  void RebuildAddedIndex();
  // Added-token matching: the longest added token starting at `pos`, or nullptr.
  const AddedToken* MatchAddedAt(std::string_view text, size_t pos) const;
  void EncodeSection(std::string_view section, std::vector<int32_t>* ids) const;
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
  std::optional<int32_t> unk_;
  bool nfc_ = false;
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

void BpeTokenizer::SetToken(int32_t id, std::string text, std::string bytes) {
  if (static_cast<size_t>(id) >= token_bytes_.size()) {
    token_bytes_.resize(id + 1);
    token_text_.resize(id + 1);
    flags_.resize(id + 1, 0);
  }
  token_bytes_[id] = std::move(bytes);
  token_text_[id] = std::move(text);
}

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

Result<bool> BpeTokenizer::BuildVocab(const FlatVocabAndMerges& flat,
                                      const std::vector<uint32_t>* order, const std::string& name) {
  const size_t n = order != nullptr ? order->size() : flat.vocab.size();
  std::string bytes;
  byte_id_.fill(-1);
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
    if (!ByteLevelToBytes(key, &bytes)) {
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
    if (bytes.size() == 1) {
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
  if (model.contains("byte_fallback") && model["byte_fallback"].is_boolean() &&
      model["byte_fallback"].get<bool>()) {
    return Unsupported(
        Field(name, "model.byte_fallback", "true is not supported (byte-level BPE only)"));
  }
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

// Real tokenizers nest a Sequence at most once or twice; a file nesting them 100,000 deep
// overflowed the stack here (one frame per level) and crashed the process.
constexpr int kMaxPreTokenizerDepth = 32;

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
  tokens_defined_ = flat.vocab.size();
  if (root.contains("added_tokens") && root["added_tokens"].is_array()) {
    tokens_defined_ += root["added_tokens"].size();
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
      if (t != "NFC") {
        return Unsupported(Field(name, "normalizer.type",
                                 "\"" + EscapeForDisplay(t) + "\" is not supported (only NFC)"));
      }
      nfc_ = true;
    }
  }

  if (!root.contains("pre_tokenizer") || root["pre_tokenizer"].is_null()) {
    return Unsupported(
        Field(name, "pre_tokenizer", "is missing (a ByteLevel pre-tokenizer is required)"));
  }
  TRACE_RETURN_IF_ERROR(BuildPreTokenizer(root["pre_tokenizer"], name, "pre_tokenizer"));
  if (!byte_level_) {
    return Unsupported(Field(name, "pre_tokenizer", "has no ByteLevel step (byte-level BPE only)"));
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
    SetToken(t.id, t.content, t.content);
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
      SetToken(token.id, token.content, token.content);
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

const AddedToken* BpeTokenizer::MatchAddedAt(std::string_view text, size_t pos) const {
  const auto& candidates = added_by_first_byte_[static_cast<uint8_t>(text[pos])];
  for (const AddedToken* t : candidates) {  // longest first
    if (text.size() - pos >= t->content.size() &&
        std::memcmp(text.data() + pos, t->content.data(), t->content.size()) == 0) {
      return t;
    }
  }
  return nullptr;
}

std::vector<int32_t> BpeTokenizer::Encode(std::string_view raw) const {
  std::vector<int32_t> ids;
  // Valid input (the common case) is used in place; invalid input is sanitised first.
  std::string sanitized;
  std::string_view text = raw;
  if (!IsValidUtf8(raw)) {
    sanitized = SanitizeUtf8(raw);
    text = sanitized;
  }
  ids.reserve(text.size() / 3 + 4);

  // Split into text sections and added tokens (longest match, left to right).
  struct Section {
    std::string_view text;
    const AddedToken* token;
  };
  std::vector<Section> sections;
  size_t start = 0;
  for (size_t i = 0; i < text.size();) {
    const AddedToken* t = added_by_first_byte_[static_cast<uint8_t>(text[i])].empty()
                              ? nullptr
                              : MatchAddedAt(text, i);
    if (t == nullptr) {
      ++i;
      continue;
    }
    if (i > start) sections.push_back({text.substr(start, i - start), nullptr});
    sections.push_back({t->content, t});
    i += t->content.size();
    start = i;
  }
  if (start < text.size()) sections.push_back({text.substr(start), nullptr});

  // lstrip / rstrip of added tokens trim the neighbouring text.
  for (size_t i = 0; i < sections.size(); ++i) {
    const AddedToken* t = sections[i].token;
    if (t == nullptr) continue;
    if (t->lstrip && i > 0 && sections[i - 1].token == nullptr) {
      sections[i - 1].text = TrimJsEnd(sections[i - 1].text);
    }
    if (t->rstrip && i + 1 < sections.size() && sections[i + 1].token == nullptr) {
      sections[i + 1].text = TrimJsStart(sections[i + 1].text);
    }
  }

  for (const Section& s : sections) {
    if (s.token != nullptr) {
      ids.push_back(s.token->id);
    } else if (!s.text.empty()) {
      EncodeSection(s.text, &ids);
    }
  }
  return ids;
}

void BpeTokenizer::EncodeSection(std::string_view section, std::vector<int32_t>* ids) const {
  std::string normalized;
  std::string_view text = section;
  if (nfc_ && NfcSpans(section, &normalized)) text = normalized;
  if (text.empty()) return;
  std::vector<std::string_view> pieces{text};
  std::vector<std::string_view> next;
  std::deque<std::string> prefixed;  // storage for pieces that got a leading space
  for (const PreStage& stage : stages_) {
    next.clear();
    for (std::string_view p : pieces) {
      if (stage.add_prefix_space && (p.empty() || p[0] != ' ')) {
        std::string& with_space = prefixed.emplace_back();
        with_space.reserve(p.size() + 1);
        with_space.push_back(' ');
        with_space.append(p);
        p = with_space;
      }
      if (stage.regex != nullptr) {
        stage.regex->Split(p, &next);
      } else {
        next.push_back(p);
      }
    }
    pieces.swap(next);
  }
  for (std::string_view p : pieces) EncodePiece(p, ids);
}

void BpeTokenizer::EncodePiece(std::string_view piece, std::vector<int32_t>* ids) const {
  if (piece.size() == 1 && byte_id_[static_cast<uint8_t>(piece[0])] >= 0) {
    ids->push_back(byte_id_[static_cast<uint8_t>(piece[0])]);
    return;
  }
  if (ignore_merges_) {
    auto it = bytes_to_id_.find(std::string(piece));
    if (it != bytes_to_id_.end()) {
      ids->push_back(it->second);
      return;
    }
  }
  if (piece.size() > PieceCache::kMaxPieceBytes) {
    Bpe(piece, ids);
    return;
  }
  const size_t hash = std::hash<std::string_view>()(piece);
  if (cache_.Get(piece, hash, ids)) return;
  const size_t before = ids->size();
  Bpe(piece, ids);
  cache_.Put(piece, hash, std::span<const int32_t>(ids->data() + before, ids->size() - before));
}

// Byte-pair merging: repeatedly merge the adjacent pair of lowest rank (leftmost on ties).
// Short words use a direct scan; long ones a heap with lazy invalidation.
void BpeTokenizer::Bpe(std::string_view piece, std::vector<int32_t>* ids) const {
  const size_t n = piece.size();
  auto emit = [&](int32_t id) {
    if (id >= 0) {
      ids->push_back(id);
    } else if (unk_) {
      ids->push_back(*unk_);
    }
  };

  if (n <= kShortWord) {
    // Short words: symbols and the rank of each adjacent pair in small arrays; after a
    // merge only the two pairs touching it are looked up again.
    int32_t sym[kShortWord];
    int32_t rank[kShortWord];
    int32_t merged[kShortWord];
    for (size_t i = 0; i < n; ++i) sym[i] = byte_id_[static_cast<uint8_t>(piece[i])];
    auto lookup = [&](size_t i) {
      const MergeTable::Entry* e =
          (sym[i] < 0 || sym[i + 1] < 0) ? nullptr : merges_.Find(sym[i], sym[i + 1]);
      rank[i] = e != nullptr ? e->rank : INT32_MAX;
      merged[i] = e != nullptr ? e->merged_id : -1;
    };
    size_t len = n;
    for (size_t i = 0; i + 1 < len; ++i) lookup(i);
    while (len > 1) {
      size_t best = 0;
      for (size_t i = 1; i + 1 < len; ++i) {
        if (rank[i] < rank[best]) best = i;  // strict: leftmost wins ties
      }
      if (rank[best] == INT32_MAX) break;
      sym[best] = merged[best];
      for (size_t i = best + 1; i + 1 < len; ++i) {
        sym[i] = sym[i + 1];
        rank[i] = rank[i + 1];
        merged[i] = merged[i + 1];
      }
      --len;
      if (best > 0) lookup(best - 1);
      if (best + 1 < len) lookup(best);
    }
    for (size_t i = 0; i < len; ++i) emit(sym[i]);
    return;
  }

  std::vector<int32_t> sym(n);
  for (size_t i = 0; i < n; ++i) sym[i] = byte_id_[static_cast<uint8_t>(piece[i])];
  std::vector<int32_t> prev(n), next(n);
  for (size_t i = 0; i < n; ++i) {
    prev[i] = static_cast<int32_t>(i) - 1;
    next[i] = i + 1 < n ? static_cast<int32_t>(i + 1) : -1;
  }
  struct Candidate {
    int32_t rank;
    int32_t pos;
    int32_t left_id;
    int32_t right_id;
    int32_t merged_id;
    bool operator>(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> heap;
  auto push = [&](int32_t pos) {
    const int32_t nx = next[pos];
    if (pos < 0 || nx < 0 || sym[pos] < 0 || sym[nx] < 0) return;
    const MergeTable::Entry* e = merges_.Find(sym[pos], sym[nx]);
    if (e != nullptr) heap.push({e->rank, pos, sym[pos], sym[nx], e->merged_id});
  };
  for (size_t i = 0; i + 1 < n; ++i) push(static_cast<int32_t>(i));
  while (!heap.empty()) {
    const Candidate c = heap.top();
    heap.pop();
    // Stale: a merge changed either side since this candidate was pushed. A symbol's id
    // only ever grows into a longer token, so an unchanged id means an unchanged symbol.
    if (sym[c.pos] != c.left_id) continue;
    const int32_t right = next[c.pos];
    if (right < 0 || sym[right] != c.right_id) continue;
    sym[c.pos] = c.merged_id;
    sym[right] = -2;  // dead
    next[c.pos] = next[right];
    if (next[right] >= 0) prev[next[right]] = c.pos;
    if (prev[c.pos] >= 0) push(prev[c.pos]);
    push(c.pos);
  }
  for (int32_t i = 0; i >= 0; i = next[i]) emit(sym[i]);
}

std::string BpeTokenizer::Decode(std::span<const int32_t> ids, bool skip_special) const {
  std::string out;
  std::string bytes;
  for (int32_t id : ids) {
    if (!InRange(id)) continue;
    if (flags_[id] & kAdded) {
      // Byte-level runs and added tokens are decoded separately, as the reference does.
      out += SanitizeUtf8(bytes);
      bytes.clear();
      if (!(skip_special && (flags_[id] & kSpecial))) out += token_bytes_[id];
      continue;
    }
    bytes += token_bytes_[id];
  }
  out += SanitizeUtf8(bytes);
  return out;
}

Result<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound(EscapePathForDisplay(path) + ": cannot open");
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return IOError(EscapePathForDisplay(path) + ": read failed");
  return ss.str();
}

Result<json> ParseJson(std::string_view text, const std::string& name) {
  // nlohmann reports errors by exception; they are caught here and never leave the module.
  try {
    return json::parse(text.begin(), text.end());
  } catch (const json::exception& e) {
    return Corruption(name + ": not valid JSON (" + JsonErrorText(e) + ")");
  }
}

// Runs a build step, turning a stray nlohmann type error (a field of an unexpected JSON
// type that no explicit check caught) into a one-line error naming the file.
template <typename Fn>
Status Guarded(const std::string& name, Fn&& fn) {
  try {
    return fn();
  } catch (const json::exception& e) {
    return InvalidArgument(name + ": a field has an unexpected type (" + JsonErrorText(e) + ")");
  }
}

// The tokenizer a document read by ReadTokenizerJson (or by the test oracle) describes;
// `name` is already escaped.
Result<std::unique_ptr<Tokenizer>> BuildTokenizer(const json& root, const FlatVocabAndMerges& flat,
                                                  const std::string& name) {
  auto tokenizer = std::make_unique<BpeTokenizer>();
  TRACE_RETURN_IF_ERROR(Guarded(name, [&] { return tokenizer->Build(root, flat, name); }));
  return std::unique_ptr<Tokenizer>(std::move(tokenizer));
}

}  // namespace

Result<std::unique_ptr<Tokenizer>> Tokenizer::LoadFromString(std::string_view tokenizer_json,
                                                             std::string_view name) {
  const std::string n = EscapePathForDisplay(name);  // messages only
  FlatVocabAndMerges flat;
  TRACE_ASSIGN_OR_RETURN(json root, ReadTokenizerJson(tokenizer_json, n, &flat));
  return BuildTokenizer(root, flat, n);
}

Result<std::unique_ptr<Tokenizer>> BuildTokenizerForTesting(const nlohmann::json& root,
                                                            const FlatVocabAndMerges& flat,
                                                            std::string_view name) {
  return BuildTokenizer(root, flat, EscapePathForDisplay(name));
}

std::string DumpTokenizerTablesForTesting(const Tokenizer& tokenizer) {
  const auto* bpe = dynamic_cast<const BpeTokenizer*>(&tokenizer);
  return bpe != nullptr ? bpe->DumpTables() : std::string();
}

Result<std::unique_ptr<Tokenizer>> Tokenizer::Load(const std::string& tokenizer_json_path) {
  TRACE_ASSIGN_OR_RETURN(std::string text, ReadFile(tokenizer_json_path));
  const std::string shown = EscapePathForDisplay(tokenizer_json_path);  // in messages
  auto tokenizer = std::make_unique<BpeTokenizer>();
  {
    FlatVocabAndMerges flat;
    TRACE_ASSIGN_OR_RETURN(json root, ReadTokenizerJson(text, shown, &flat));
    text.clear();
    text.shrink_to_fit();
    TRACE_RETURN_IF_ERROR(Guarded(shown, [&] { return tokenizer->Build(root, flat, shown); }));
  }  // the parsed document is freed here

  // tokenizer_config.json next to it: extra added tokens, bos/eos, split_special_tokens.
  const size_t slash = tokenizer_json_path.find_last_of('/');
  const std::string dir =
      slash == std::string::npos ? std::string() : tokenizer_json_path.substr(0, slash + 1);
  const std::string config_path = dir + "tokenizer_config.json";
  std::ifstream probe(config_path);
  if (probe) {
    probe.close();
    TRACE_ASSIGN_OR_RETURN(std::string config_text, ReadFile(config_path));
    const std::string config_shown = EscapePathForDisplay(config_path);
    TRACE_ASSIGN_OR_RETURN(json config, ParseJson(config_text, config_shown));
    TRACE_RETURN_IF_ERROR(
        Guarded(config_shown, [&] { return tokenizer->ApplyConfig(config, config_shown); }));
  }
  return std::unique_ptr<Tokenizer>(std::move(tokenizer));
}

}  // namespace trace::engine
