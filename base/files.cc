#include "base/files.h"

#include <filesystem>

namespace trace {
namespace {

// The status of `path`; "does not exist" is a status (not_found), any other failure an
// error naming the path.
Result<std::filesystem::file_status> StatusOf(const std::string& path) {
  std::error_code ec;
  std::filesystem::file_status st = std::filesystem::status(path, ec);
  if (ec && ec != std::errc::no_such_file_or_directory && ec != std::errc::not_a_directory) {
    return IOError(path + ": not accessible: " + ec.message());
  }
  return st;
}

}  // namespace

Result<bool> PathExists(const std::string& path) {
  TRACE_ASSIGN_OR_RETURN(std::filesystem::file_status st, StatusOf(path));
  return std::filesystem::exists(st);
}

Result<bool> IsDirectory(const std::string& path) {
  TRACE_ASSIGN_OR_RETURN(std::filesystem::file_status st, StatusOf(path));
  return std::filesystem::is_directory(st);
}

}  // namespace trace
