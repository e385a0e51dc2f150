// Byte-level BPE tokenizer loaded from a Hugging Face tokenizer.json (docs/tokenizer.md).
//
// Pipeline of Encode: sanitise invalid UTF-8 -> split out added tokens (longest match) ->
// per remaining section: NFC -> regex pre-tokenizer stages -> byte-level BPE (cached per
// pre-token). The behaviour follows the reference implementation we test against
// (@lenml/tokenizers, a port of transformers.js), including its regex dialect.
//
// This file: Encode and Decode of BpeTokenizer (bpe_tokenizer.h; its tables are built in
// tokenizer_build.cc), and the loaders of tokenizer.h that read the files and build one.
#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <queue>
#include <span>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "base/escape.h"
#include "base/utf8.h"
#include "engine/tokenizer/bpe_tokenizer.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/tokenizer_json_reader.h"
#include "engine/tokenizer/tokenizer_testing.h"
#include "engine/tokenizer/utf8.h"

namespace trace::engine {
namespace internal {
namespace {

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

}  // namespace

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

std::vector<int32_t> BpeTokenizer::Encode(std::string_view raw, size_t max_tokens) const {
  std::vector<int32_t> ids;
  // Valid input (the common case) is used in place; invalid input is sanitised first.
  std::string sanitized;
  std::string_view text = raw;
  if (!IsValidUtf8(raw)) {
    sanitized = SanitizeUtf8(raw);
    text = sanitized;
  }
  ids.reserve(std::min(text.size() / 3 + 4, max_tokens));

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
    if (ids.size() >= max_tokens) break;
    if (s.token != nullptr) {
      ids.push_back(s.token->id);
    } else if (!s.text.empty()) {
      std::string normalized;
      std::string_view section = s.text;
      if (!norm_steps_.empty()) {
        if (NormalizeSection(s.text, &normalized)) section = normalized;
      } else if (nfc_ && NfcSpans(s.text, &normalized)) {
        section = normalized;
      }
      if (!section.empty()) EncodeStages(0, section, max_tokens, &ids);
    }
  }
  if (ids.size() > max_tokens) ids.resize(max_tokens);  // a piece's last ids went past it
  return ids;
}

// Each stage applies to every piece the previous one produced, in order; going depth first
// gives the same pieces in the same order as splitting the whole text stage by stage, with
// no list of every piece (16 bytes a piece of a few bytes, twice, for a long prompt).
bool BpeTokenizer::EncodeStages(size_t stage, std::string_view piece, size_t max_tokens,
                                std::vector<int32_t>* ids) const {
  if (stage == stages_.size()) {
    EncodePiece(piece, ids);
    return ids->size() < max_tokens;
  }
  const PreStage& s = stages_[stage];
  std::string with_space;  // outlives the split of this piece, whose pieces point into it
  if (s.add_prefix_space && (piece.empty() || piece[0] != ' ')) {
    with_space.reserve(piece.size() + 1);
    with_space.push_back(' ');
    with_space.append(piece);
    piece = with_space;
  }
  if (s.regex == nullptr) return EncodeStages(stage + 1, piece, max_tokens, ids);
  struct Next {
    const BpeTokenizer* self;
    size_t stage;
    size_t max_tokens;
    std::vector<int32_t>* ids;
  } next{this, stage + 1, max_tokens, ids};
  s.regex->Split(
      piece,
      [](void* ctx, std::string_view p) {
        auto* n = static_cast<Next*>(ctx);
        return n->self->EncodeStages(n->stage, p, n->max_tokens, n->ids);
      },
      &next);
  return ids->size() < max_tokens;
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
    sp_ ? SpBpe(piece, ids) : Bpe(piece, ids);
    return;
  }
  const size_t hash = std::hash<std::string_view>()(piece);
  if (cache_.Get(piece, hash, ids)) return;
  const size_t before = ids->size();
  sp_ ? SpBpe(piece, ids) : Bpe(piece, ids);
  cache_.Put(piece, hash, std::span<const int32_t>(ids->data() + before, ids->size() - before));
}

bool BpeTokenizer::NormalizeSection(std::string_view section, std::string* out) const {
  std::string text(section);
  for (const NormStep& step : norm_steps_) {
    switch (step.kind) {
      case NormStep::Kind::kNfc: {
        std::string nfc;
        if (NfcSpans(text, &nfc)) text = std::move(nfc);
        break;
      }
      case NormStep::Kind::kPrepend:
        if (!text.empty()) text.insert(0, step.text);  // tokenizers: never onto nothing
        break;
      case NormStep::Kind::kReplace: {
        std::string replaced;
        size_t from = 0;
        for (size_t at; (at = text.find(step.text, from)) != std::string::npos;
             from = at + step.text.size()) {
          replaced.append(text, from, at - from).append(step.with);
        }
        replaced.append(text, from, std::string::npos);
        text = std::move(replaced);
        break;
      }
    }
  }
  if (text == section) return false;
  *out = std::move(text);
  return true;
}

// SentencePiece-style BPE: the word starts as its characters (a character outside the
// vocabulary as the <0xXX> tokens of its bytes, or the unknown token, consecutive unknowns
// fused when fuse_unk), then the same merging as byte-level BPE, on token ids.
void BpeTokenizer::SpBpe(std::string_view piece, std::vector<int32_t>* ids) const {
  std::vector<int32_t> sym;
  sym.reserve(piece.size());
  bool last_unk = false;
  for (size_t i = 0; i < piece.size();) {
    size_t len = 1;
    const uint8_t lead = static_cast<uint8_t>(piece[i]);
    if (lead >= 0xF0) {
      len = 4;
    } else if (lead >= 0xE0) {
      len = 3;
    } else if (lead >= 0xC0) {
      len = 2;
    }
    len = std::min(len, piece.size() - i);  // valid UTF-8 (Encode sanitises first)
    const std::string_view ch = piece.substr(i, len);
    i += len;
    if (auto it = text_to_id_.find(ch); it != text_to_id_.end()) {
      sym.push_back(it->second);
      last_unk = false;
      continue;
    }
    bool all_bytes = true;
    for (char c : ch) all_bytes = all_bytes && byte_fallback_id_[static_cast<uint8_t>(c)] >= 0;
    if (all_bytes) {
      for (char c : ch) sym.push_back(byte_fallback_id_[static_cast<uint8_t>(c)]);
      last_unk = false;
    } else if (unk_ && !(fuse_unk_ && last_unk)) {
      sym.push_back(*unk_);
      last_unk = true;
    }
  }
  MergeIds(&sym);
  ids->insert(ids->end(), sym.begin(), sym.end());
}

// Merges adjacent ids in place, lowest rank first (leftmost on ties): byte-level BPE's long
// word path, on any starting symbols.
void BpeTokenizer::MergeIds(std::vector<int32_t>* symbols) const {
  std::vector<int32_t>& sym = *symbols;
  const size_t n = sym.size();
  if (n < 2) return;
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
  size_t out = 0;
  for (int32_t i = 0; i >= 0; i = next[i]) sym[out++] = sym[i];
  sym.resize(out);
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
  MergeIds(&sym);
  for (int32_t id : sym) emit(id);
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
  // SentencePiece's Strip decoder: the leading spaces the normalizer's Prepend added.
  size_t strip = 0;
  while (strip < static_cast<size_t>(strip_start_) && strip < out.size() && out[strip] == ' ') {
    ++strip;
  }
  if (strip > 0) out.erase(0, strip);
  return out;
}

}  // namespace internal

namespace {

using internal::BpeTokenizer;
using json = nlohmann::json;

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

Result<std::unique_ptr<Tokenizer>> Tokenizer::LoadFromString(
    std::string_view tokenizer_json, std::string_view name,
    std::string_view tokenizer_config_json) {
  const std::string n = EscapePathForDisplay(name);  // messages only
  FlatVocabAndMerges flat;
  TRACE_ASSIGN_OR_RETURN(json root, ReadTokenizerJson(tokenizer_json, n, &flat));
  if (tokenizer_config_json.empty()) return BuildTokenizer(root, flat, n);
  auto tokenizer = std::make_unique<BpeTokenizer>();
  TRACE_RETURN_IF_ERROR(Guarded(n, [&] { return tokenizer->Build(root, flat, n); }));
  TRACE_ASSIGN_OR_RETURN(json config, ParseJson(std::string(tokenizer_config_json), n));
  TRACE_RETURN_IF_ERROR(Guarded(n, [&] { return tokenizer->ApplyConfig(config, n); }));
  return std::unique_ptr<Tokenizer>(std::move(tokenizer));
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
