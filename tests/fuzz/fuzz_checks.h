// Checks shared by the fuzz targets: a broken promise prints what broke and aborts, which
// the fuzzer (or tests/fuzz/fuzz_driver.cc) reports with the input. Also the one seeded
// random sequence the targets and the driver draw from.
//
// Ownership: none. Thread safety: reentrant. Errors: these functions abort on failure.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "base/escape.h"
#include "base/splitmix64.h"
#include "base/status.h"

namespace trace::fuzz {

// Longest error message a parser may produce: values in messages are clipped
// (base/escape.h), so a message that grows with the input is a bug.
inline constexpr size_t kMaxMessageBytes = 1024;

[[noreturn]] inline void Fail(const std::string& what) {
  std::fprintf(stderr, "fuzz target: %s\n", EscapeForDisplay(what, 4096).c_str());
  std::abort();
}

// An error message is one printable line (escaping it changes nothing), bounded, not
// empty, and names `must_name` (the file, when the caller passed one) if given.
inline void RequireOneLine(std::string_view message, const char* where,
                           std::string_view must_name = {}) {
  const std::string m(message);
  if (m.empty()) Fail(std::string(where) + ": empty error message");
  if (EscapeForDisplay(m, kNoLimit) != m) Fail(std::string(where) + ": not one line: " + m);
  if (m.size() > kMaxMessageBytes) {
    Fail(std::string(where) + ": error message of " + std::to_string(m.size()) +
         " bytes: " + m.substr(0, 300));
  }
  if (!must_name.empty() && m.find(must_name) == std::string::npos) {
    Fail(std::string(where) + ": error does not name " + std::string(must_name) + ": " + m);
  }
}

inline void RequireOneLine(const Status& status, const char* where,
                           std::string_view must_name = {}) {
  RequireOneLine(status.message(), where, must_name);
}

// base/splitmix64.h: the same sequence on every platform and standard library, so a fuzz
// run's choices follow its seed and input only.
using SplitMix64 = ::trace::SplitMix64;

}  // namespace trace::fuzz
