// Small helpers for tests that run the `trace` binary through the shell: read a whole
// file, quote an argument for /bin/sh. Shared by the tests and the benchmarks that run it.
//
// Ownership: values only. Thread safety: reentrant. Errors: ReadWholeFile returns "" for a
// file that cannot be read; the test's own assertions then fail.
#pragma once

#include <fstream>
#include <sstream>
#include <string>

namespace trace::testing {

inline std::string ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// 'text' with embedded single quotes escaped: one shell word whatever it holds.
inline std::string ShellQuote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

}  // namespace trace::testing
