// TempDir: a fresh folder under $TMPDIR for one test, removed with its contents on
// destruction. Shared by every test folder (include "testkit/temp_dir.h").
//
// Ownership: owns the folder. Thread safety: one instance per test. Errors: if the folder
// cannot be made, path() is empty and the test's own file operations fail loudly.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <string>
#include <system_error>

namespace trace::testing {

class TempDir {
 public:
  TempDir() {
    // The error-code overload: an unusable $TMPDIR falls back to /tmp instead of throwing
    // out of a test's set-up.
    std::error_code ec;
    std::filesystem::path base = std::filesystem::temp_directory_path(ec);
    if (ec) base = "/tmp";
    std::string tmpl = (base / "trace-test-XXXXXX").string();
    if (char* made = ::mkdtemp(tmpl.data())) path_ = made;
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

}  // namespace trace::testing
