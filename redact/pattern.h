// A compiled PCRE2 pattern for redaction: UTF mode that tolerates invalid UTF-8 in the
// subject (agent output is raw bytes), JIT-compiled where the platform allows.
// Internal to redact/.
//
// Ownership: owns its pcre2_code; movable, not copyable. Thread safety: FindAll is const
// and allocates its own match data, so one pattern may be used from many threads.
// Errors: Compile returns InvalidArgument with PCRE2's message and the offset.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"

struct pcre2_real_code_8;

namespace trace::redact {

class CompiledPattern {
 public:
  static Result<CompiledPattern> Compile(const std::string& pattern);
  CompiledPattern(CompiledPattern&& other) noexcept;
  CompiledPattern& operator=(CompiledPattern&& other) noexcept;
  CompiledPattern(const CompiledPattern&) = delete;
  CompiledPattern& operator=(const CompiledPattern&) = delete;
  ~CompiledPattern();

  // The [begin, end) byte ranges to redact in `subject`: for each non-overlapping match,
  // the group named `secret` when the pattern has one (and it took part), else the whole
  // match. Empty ranges are skipped. Returns false when PCRE2 gave up (match or depth
  // limit on a pathological pattern): the caller must then treat the whole subject as
  // secret.
  bool FindAll(std::string_view subject, std::vector<std::pair<size_t, size_t>>* ranges) const;

 private:
  CompiledPattern() = default;
  pcre2_real_code_8* code_ = nullptr;
  int secret_group_ = 0;  // 0: the whole match
};

}  // namespace trace::redact
