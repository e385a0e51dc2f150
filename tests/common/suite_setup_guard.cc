// Linked into every test binary (trace_add_test): a test suite whose SetUpTestSuite fails
// fails its tests instead of skipping them.
//
// Why: GoogleTest runs the tests of a suite whose SetUpTestSuite hit a fatal failure as
// skipped ("[  SKIPPED ]") and exits 1, but gtest_discover_tests gives every test
// SKIP_REGULAR_EXPRESSION "\[  SKIPPED \]", which wins over the exit status: ctest then
// reports "Skipped" and "100% tests passed" for tests that never ran (the bench CLI tests
// did so when tools/js/node_modules was missing). The listener sees the suite's failure
// when its first test starts, before the skip is printed, says so and ends the process
// with status 1, so ctest reports a failure.
//
// Thread safety: GoogleTest calls listeners on the main thread. Errors: none returned; the
// process exits.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>

namespace trace::testing {
namespace {

class SuiteSetUpGuard : public ::testing::EmptyTestEventListener {
 public:
  void OnTestStart(const ::testing::TestInfo& test) override {
    const ::testing::TestSuite* suite = ::testing::UnitTest::GetInstance()->current_test_suite();
    if (suite == nullptr || !suite->ad_hoc_test_result().Failed()) return;
    std::printf(
        "\ntrace tests: set-up of test suite %s failed (see above), so %s.%s and the rest of "
        "the suite fail instead of being skipped\n",
        test.test_suite_name(), test.test_suite_name(), test.name());
    std::fflush(stdout);
    std::_Exit(1);
  }
};

// Runs before main (gtest_main), so the listener is in place for every test.
const bool kInstalled = [] {
  ::testing::UnitTest::GetInstance()->listeners().Append(new SuiteSetUpGuard);
  return true;
}();

}  // namespace
}  // namespace trace::testing
