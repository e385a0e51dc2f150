// The safetensors format (https://huggingface.co/docs/safetensors): a little-endian u64
// header length, a JSON header {"name": {"dtype", "shape", "data_offsets"}, ...}, then the
// tensor bytes. A memory-mapped reader that validates every header entry before any tensor
// is touched, and a writer for `trace model init`.
//
// Ownership: a SafetensorsFile owns its mapping; tensor data pointers stay valid while it
// lives. Thread safety: immutable after Open, safe to share across threads. Errors: every
// failure is a one-line Status naming the file and, where there is one, the tensor.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/mapped_file.h"
#include "base/status.h"
#include "kernels/kernels.h"

namespace trace::engine {

struct TensorInfo {
  std::string name;
  kernels::DType dtype = kernels::DType::kF32;
  std::vector<int64_t> shape;
  uint64_t begin = 0;  // offsets into the data section (after the header)
  uint64_t end = 0;
  const void* data = nullptr;  // set by SafetensorsFile; null from ParseSafetensorsHeader
  int64_t numel() const;
};

// Parses and validates a header: `file` is the whole file's bytes (at least the first
// 8 + header length of them when only validating), `file_size` its full size. Checks:
// header length within the file, valid JSON object, known dtype, non-negative shape,
// offsets in order, inside the data section, and matching dtype size x element count.
// `path` only names the file in errors. Never reads past `size`.
Result<std::map<std::string, TensorInfo>> ParseSafetensorsHeader(const uint8_t* file, size_t size,
                                                                 const std::string& path);

class SafetensorsFile {
 public:
  // Maps `path` read-only and validates its header.
  static Result<std::unique_ptr<SafetensorsFile>> Open(const std::string& path);
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  const std::map<std::string, TensorInfo>& tensors() const { return tensors_; }
  // The tensor or nullptr.
  const TensorInfo* Find(const std::string& name) const;
  // The whole mapped file (for hashing).
  std::string_view bytes() const { return map_->bytes(); }

 private:
  SafetensorsFile() = default;
  std::string path_;
  std::unique_ptr<MappedFile> map_;
  size_t size_ = 0;
  std::map<std::string, TensorInfo> tensors_;
};

// One tensor to write: raw little-endian bytes in `dtype`.
struct TensorToWrite {
  std::string name;
  kernels::DType dtype = kernels::DType::kBF16;
  std::vector<int64_t> shape;
  std::string bytes;
};

// Writes tensors (in the given order) to `path`, header padded to 8 bytes so every tensor is
// aligned. `metadata` goes into "__metadata__".
Status WriteSafetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                        const std::map<std::string, std::string>& metadata = {});

// The same, producing each tensor's bytes only when it is written (`fill(i)` returns the
// bytes of tensors[i], whose own `bytes` stay empty), so a model larger than memory can be
// written.
Status WriteSafetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                        const std::function<std::string(size_t)>& fill,
                        const std::map<std::string, std::string>& metadata = {});

// "BF16" / "F16" / "F32".
const char* SafetensorsDTypeName(kernels::DType dtype);

}  // namespace trace::engine
