// Regex pre-tokenizer stage (regex_stage.h): the only user of PCRE2.
#define PCRE2_CODE_UNIT_WIDTH 8
#include "engine/tokenizer/regex_stage.h"

#include <pcre2.h>

#include <cstdint>

namespace trace::engine::internal {
namespace {

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

// PCRE2 match state: match data for the whole-match offsets, and a match context that
// gives the JIT a stack of up to 4 MB (the default 32 KB runs out on long pieces).
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
MatchContext& ThreadContext() {
  thread_local MatchContext ctx;
  return ctx;
}

}  // namespace

RegexStage::~RegexStage() {
  if (code_ != nullptr) pcre2_code_free(code_);
}

Result<std::unique_ptr<RegexStage>> RegexStage::Compile(const std::string& js_pattern,
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

void RegexStage::Split(std::string_view text, PieceSink emit, void* emit_ctx) const {
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
    if (start > prev && !emit(emit_ctx, text.substr(prev, start - prev))) return;
    if (end > start) {
      if (!emit(emit_ctx, text.substr(start, end - start))) return;
      prev = end;
      pos = end;
    } else {
      // An empty match: step over one character, as JS matchAll does in "u" mode.
      prev = end;
      if (end >= text.size()) break;
      size_t step = 1;
      while (end + step < text.size() && (static_cast<uint8_t>(text[end + step]) & 0xC0) == 0x80) {
        ++step;
      }
      pos = end + step;
    }
  }
  if (prev < text.size()) emit(emit_ctx, text.substr(prev));
}

}  // namespace trace::engine::internal
