// A file mapped read-only into memory (mmap, MAP_PRIVATE): the one way weight files
// (safetensors, GGUF) are read, so their bytes are paged in on use and shared with the page
// cache instead of copied.
//
// Ownership: a MappedFile owns its mapping; pointers into bytes() stay valid while it lives.
// Thread safety: immutable after Open, safe to share. Errors: a one-line Status naming the
// path (cannot open, cannot stat, cannot mmap).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "base/status.h"

namespace trace {

class MappedFile {
 public:
  static Result<std::unique_ptr<MappedFile>> Open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::string& path() const { return path_; }
  const uint8_t* data() const { return static_cast<const uint8_t*>(map_); }
  size_t size() const { return size_; }
  std::string_view bytes() const { return {static_cast<const char*>(map_), size_}; }

 private:
  MappedFile() = default;
  std::string path_;
  void* map_ = nullptr;
  size_t size_ = 0;
};

}  // namespace trace
