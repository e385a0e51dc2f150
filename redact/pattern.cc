#include "redact/pattern.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <memory>

namespace trace::redact {

Result<CompiledPattern> CompiledPattern::Compile(const std::string& pattern) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   PCRE2_UTF | PCRE2_MATCH_INVALID_UTF, &error, &offset, nullptr);
  if (code == nullptr) {
    PCRE2_UCHAR buf[256];
    pcre2_get_error_message(error, buf, sizeof buf);
    return InvalidArgument("bad regex at offset " + std::to_string(offset) + ": " +
                           reinterpret_cast<const char*>(buf));
  }
  // Without JIT the interpreter is used: slower, same results.
  (void)pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
  CompiledPattern out;
  out.code_ = code;
  int group = pcre2_substring_number_from_name(code, reinterpret_cast<PCRE2_SPTR>("secret"));
  out.secret_group_ = group > 0 ? group : 0;
  return out;
}

CompiledPattern::CompiledPattern(CompiledPattern&& other) noexcept
    : code_(std::exchange(other.code_, nullptr)), secret_group_(other.secret_group_) {}

CompiledPattern& CompiledPattern::operator=(CompiledPattern&& other) noexcept {
  if (this != &other) {
    if (code_ != nullptr) pcre2_code_free(code_);
    code_ = std::exchange(other.code_, nullptr);
    secret_group_ = other.secret_group_;
  }
  return *this;
}

CompiledPattern::~CompiledPattern() {
  if (code_ != nullptr) pcre2_code_free(code_);
}

bool CompiledPattern::FindAll(std::string_view subject,
                              std::vector<std::pair<size_t, size_t>>* ranges) const {
  std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> md(
      pcre2_match_data_create_from_pattern(code_, nullptr), &pcre2_match_data_free);
  const auto* data = reinterpret_cast<PCRE2_SPTR>(subject.data());
  size_t offset = 0;
  while (offset <= subject.size()) {
    int rc = pcre2_match(code_, data, subject.size(), offset, 0, md.get(), nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) return true;
    if (rc < 0) return false;
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md.get());
    size_t match_begin = ov[0], match_end = ov[1];
    size_t begin = match_begin, end = match_end;
    if (secret_group_ > 0) {
      if (rc > secret_group_ && ov[2 * secret_group_] != PCRE2_UNSET) {
        begin = ov[2 * secret_group_];
        end = ov[2 * secret_group_ + 1];
      } else {
        begin = end = 0;  // the group did not take part: nothing to redact
      }
    }
    if (end > begin) ranges->emplace_back(begin, end);
    if (match_end > match_begin) {
      offset = match_end;
    } else {
      // An empty match: step over one character (UTF-8 continuation bytes included).
      offset = match_end + 1;
      while (offset < subject.size() &&
             (static_cast<unsigned char>(subject[offset]) & 0xC0) == 0x80)
        ++offset;
    }
  }
  return true;
}

}  // namespace trace::redact
