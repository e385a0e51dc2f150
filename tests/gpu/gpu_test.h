// A minimal test harness for the GPU tests, so they build where GoogleTest is absent (the
// GPU machine: tests/gpu/check.sh builds them standalone). Tests register with GPU_TEST;
// main() exits 77 (ctest's SKIP_RETURN_CODE) when no CUDA device is present, 1 when a
// check failed, 0 otherwise. EXPECT_BITS_EQ names the first differing index with both
// values and their bit patterns.
//
// Ownership: the registry owns nothing but function pointers. Thread safety: tests run
// one after another on the main thread. Errors: a failing check marks the test failed and
// prints one line; a fatal setup error (ASSERT_OK) ends that test.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "base/status.h"

namespace trace::gputest {

struct TestCase {
  const char* name;
  void (*fn)();
};

inline std::vector<TestCase>& Registry() {
  static std::vector<TestCase> tests;
  return tests;
}

inline bool& CurrentFailed() {
  static bool failed = false;
  return failed;
}

struct Registrar {
  Registrar(const char* name, void (*fn)()) { Registry().push_back({name, fn}); }
};

inline uint32_t Bits(float v) {
  uint32_t b;
  std::memcpy(&b, &v, 4);
  return b;
}

// Bitwise comparison of two float arrays; prints the first difference and the count.
inline bool BitsEqual(const char* what, const float* expected, const float* actual, size_t n,
                      const char* file, int line) {
  size_t first = n;
  size_t count = 0;
  for (size_t i = 0; i < n; ++i) {
    if (Bits(expected[i]) != Bits(actual[i])) {
      if (first == n) first = i;
      ++count;
    }
  }
  if (count == 0) return true;
  std::printf(
      "  %s:%d: %s: %zu of %zu values differ; first at index %zu: cpu %.9g (0x%08x) "
      "gpu %.9g (0x%08x)\n",
      file, line, what, count, n, first, expected[first], Bits(expected[first]), actual[first],
      Bits(actual[first]));
  CurrentFailed() = true;
  return false;
}

}  // namespace trace::gputest

#define GPU_TEST(name)                                               \
  static void name();                                                \
  static ::trace::gputest::Registrar name##_registrar(#name, &name); \
  static void name()

#define EXPECT_BITS_EQ(what, expected, actual, n) \
  ::trace::gputest::BitsEqual((what), (expected), (actual), (n), __FILE__, __LINE__)

#define EXPECT_TRUE_MSG(cond, ...)                                           \
  do {                                                                       \
    if (!(cond)) {                                                           \
      std::printf("  %s:%d: check failed: %s: ", __FILE__, __LINE__, #cond); \
      std::printf(__VA_ARGS__);                                              \
      std::printf("\n");                                                     \
      ::trace::gputest::CurrentFailed() = true;                              \
    }                                                                        \
  } while (0)

#define ASSERT_OK(expr)                                                                    \
  do {                                                                                     \
    ::trace::Status _st = (expr);                                                          \
    if (!_st.ok()) {                                                                       \
      std::printf("  %s:%d: %s: %s\n", __FILE__, __LINE__, #expr, _st.ToString().c_str()); \
      ::trace::gputest::CurrentFailed() = true;                                            \
      return;                                                                              \
    }                                                                                      \
  } while (0)
