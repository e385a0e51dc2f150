#include "base/files.h"

#include <filesystem>

namespace trace {
namespace {

Status NotAccessible(const std::string& path, const std::error_code& ec) {
  return IOError(path + ": not accessible: " + ec.message());
}

}  // namespace

Result<bool> PathExists(const std::string& path) {
  std::error_code ec;
  std::filesystem::file_status st = std::filesystem::status(path, ec);
  if (ec && ec != std::errc::no_such_file_or_directory && ec != std::errc::not_a_directory) {
    return NotAccessible(path, ec);
  }
  return std::filesystem::exists(st);
}

Result<bool> IsDirectory(const std::string& path) {
  std::error_code ec;
  std::filesystem::file_status st = std::filesystem::status(path, ec);
  if (ec && ec != std::errc::no_such_file_or_directory && ec != std::errc::not_a_directory) {
    return NotAccessible(path, ec);
  }
  return std::filesystem::is_directory(st);
}

}  // namespace trace
