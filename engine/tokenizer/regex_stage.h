// RegexStage: one regex pre-tokenizer step of a tokenizer.json (a Split pattern, or the
// GPT-2 pattern of a ByteLevel step), internal to engine/tokenizer.
//
// The pattern is written in the dialect of the reference implementation (a JS RegExp with
// the "u" flag); Compile translates it to PCRE2 (JS's \s, the (?i:'s|...) group) and
// compiles it with UTF and JIT. This is the tokenizer's only PCRE2 user: pcre2.h stays in
// regex_stage.cc.
//
// Ownership: a RegexStage owns its compiled pattern; Compile returns it in a unique_ptr.
// Thread safety: Split is const and safe from many threads at once (the match state is
// per thread, shared by all patterns). Errors: Compile returns Unsupported, naming `where`,
// for a pattern PCRE2 cannot compile or \S inside a character class; Split cannot fail (if
// the engine does, the rest of the text is one piece).
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "base/status.h"

struct pcre2_real_code_8;  // pcre2_code with PCRE2_CODE_UNIT_WIDTH 8

namespace trace::engine::internal {

class RegexStage {
 public:
  ~RegexStage();
  RegexStage(const RegexStage&) = delete;
  RegexStage& operator=(const RegexStage&) = delete;

  // `js_pattern` as tokenizer.json writes it; `where` (escaped) starts error messages.
  static Result<std::unique_ptr<RegexStage>> Compile(const std::string& js_pattern,
                                                     const std::string& where);

  // Isolated split: calls `emit(ctx, piece)` for the matches and the gaps between them, in
  // order, until it returns false. Pieces are made one at a time, so a caller can encode
  // each before the next is found and stop early (Tokenizer::Encode's token cap). `emit`
  // may call Split again (a later stage on this piece): the loop keeps its positions in
  // locals, never in the thread's match data, which the nested call reuses.
  using PieceSink = bool (*)(void* ctx, std::string_view piece);
  void Split(std::string_view text, PieceSink emit, void* ctx) const;

 private:
  RegexStage() = default;
  pcre2_real_code_8* code_ = nullptr;
  bool jit_ = false;
};

}  // namespace trace::engine::internal
