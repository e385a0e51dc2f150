// File-system questions answered without exceptions: std::filesystem's overloads without
// a std::error_code throw (and an uncaught filesystem_error aborts the command), so
// trace calls the error-code overloads everywhere (scripts/check-fs-errors.py, run by
// ctest, fails on a new throwing call). These wrap the common questions.
//
// Ownership: plain values. Thread safety: reentrant. Errors: anything but "does not
// exist" (permission denied, I/O error, a file where a folder should be) is an IOError
// naming the path and the reason.
#pragma once

#include <string>

#include "base/status.h"

namespace trace {

// Whether `path` exists (following symlinks).
Result<bool> PathExists(const std::string& path);
// Whether `path` is a directory (false when it does not exist).
Result<bool> IsDirectory(const std::string& path);

}  // namespace trace
