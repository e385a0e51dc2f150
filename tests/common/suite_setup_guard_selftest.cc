// A suite whose SetUpTestSuite fails: with suite_setup_guard.cc linked in, its test fails
// with the guard's message; without it, GoogleTest would report the test as skipped
// (tests/CMakeLists.txt: TestSuiteSetUpFailureFailsItsTests).
#include <gtest/gtest.h>

namespace {

class GuardSelfTest : public ::testing::Test {
 public:
  static void SetUpTestSuite() { FAIL() << "this suite's set-up fails on purpose"; }
};

TEST_F(GuardSelfTest, NeverRuns) {
  ADD_FAILURE() << "a test of a suite whose set-up failed ran";
}

}  // namespace
