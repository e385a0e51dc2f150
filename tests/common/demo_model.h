// The demo model (engine::kDemoModelPreset, engine::kDemoModelSeed: what `trace record` runs
// without --model) in a fresh temporary folder, for the tests that run the server or the
// `trace` binary on it: DemoModelFolder makes one, DemoModelSuite is the base fixture of a
// suite whose tests share one (made before the suite's first test, removed after its last).
//
// Ownership: a DemoModelFolder owns its folder (a TempDir) and removes it with everything in
// it; DemoModelSuite owns its suite's folder between SetUpTestSuite and TearDownTestSuite.
// Thread safety: single-threaded set-up and tear-down, as GoogleTest runs them. Errors: a
// folder or model that cannot be made is DemoModelFolder::status(); DemoModelSuite fails the
// suite with it (tests/common/suite_setup_guard.cc makes that fail its tests).
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "base/status.h"
#include "engine/model_init.h"
#include "testkit/temp_dir.h"

namespace trace::testing {

class DemoModelFolder : public TempDir {
 public:
  // Writes the demo model to file(model_name); the folder's name is the model name a server
  // on it serves.
  explicit DemoModelFolder(const std::string& model_name = "model")
      : model_(file(model_name)),
        status_(path().empty()
                    ? IOError("cannot make a temporary folder")
                    : engine::InitModel(engine::kDemoModelPreset, engine::kDemoModelSeed, model_)) {
  }

  // The model's folder, inside path().
  const std::string& model() const { return model_; }
  const Status& status() const { return status_; }

 private:
  std::string model_;
  Status status_;
};

class DemoModelSuite : public ::testing::Test {
 protected:
  // A suite that needs more set-up calls this first, then returns on HasFatalFailure().
  static void SetUpTestSuite() { SetUpDemoModel(); }
  static void TearDownTestSuite() {
    delete demo_;
    demo_ = nullptr;
  }

  // Makes the suite's folder with the model at file(model_name).
  static void SetUpDemoModel(const std::string& model_name = "model") {
    demo_ = new DemoModelFolder(model_name);
    ASSERT_TRUE(demo_->status().ok()) << demo_->status().message();
  }

  // The suite's folder (files of its own go to demo().file(name)) and model.
  static const DemoModelFolder& demo() { return *demo_; }
  static const std::string& model_dir() { return demo_->model(); }

 private:
  static inline DemoModelFolder* demo_ = nullptr;
};

}  // namespace trace::testing
