// The GGUF format (llama.cpp's ggml/docs/gguf.md): a little-endian header ("GGUF", version 2
// or 3, tensor count, metadata count), typed key/value metadata, tensor infos (name,
// dimensions innermost first, ggml type, offset), padding to `general.alignment` (default
// 32), then the tensor data. A memory-mapped reader that validates the whole header before
// any tensor is used.
//
// Ownership: a GgufFile owns its mapping (or, from Parse, borrows the caller's bytes);
// tensor data pointers stay valid while it (and those bytes) live. Thread safety: immutable
// after Open, safe to share. Errors: every failure is one line naming the file and what is
// wrong where (the key, the tensor, the byte offset): truncated file, bad magic, unknown
// version, value type or tensor type, implausible counts or lengths, a dimension or offset
// outside the file, misaligned or overlapping data, duplicate keys or tensor names.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/mapped_file.h"
#include "base/status.h"

namespace trace::engine {

// The ggml tensor types a GGUF file can hold, by their numbers in ggml.h.
enum class GgmlType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ8_1 = 9,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kQ8_K = 15,
  kBF16 = 30,
  kMXFP4 = 39,
};

// How a ggml type is stored: blocks of `block` consecutive elements (along the innermost
// dimension) in `block_bytes` bytes each.
struct GgmlTypeInfo {
  GgmlType type;
  const char* name;  // "F32", "Q8_0", "Q4_K", ...
  int64_t block;
  int64_t block_bytes;
};
// The type's storage, or nullptr for a number this reader does not know.
const GgmlTypeInfo* FindGgmlType(uint32_t type);

struct GgufTensor {
  std::string name;
  std::vector<int64_t> dims;  // GGUF order: dims[0] is the innermost (contiguous) one
  GgmlType type = GgmlType::kF32;
  uint64_t offset = 0;  // from the start of the data section
  uint64_t bytes = 0;
  const uint8_t* data = nullptr;
  int64_t numel() const;
};

class GgufFile {
 public:
  // Maps `path` read-only and parses it.
  static Result<std::unique_ptr<GgufFile>> Open(const std::string& path);
  // Parses `bytes` (which must outlive the result); `path` names the file in errors.
  static Result<std::unique_ptr<GgufFile>> Parse(std::string_view bytes, const std::string& path);

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  // The metadata, key -> value: integers as JSON numbers (signed or unsigned as stored),
  // floats as doubles, bools, strings (bytes as stored), arrays as arrays.
  const nlohmann::json& metadata() const { return metadata_; }
  // A metadata value or nullptr.
  const nlohmann::json* Find(const std::string& key) const;
  // Tensors in file order.
  const std::vector<GgufTensor>& tensors() const { return tensors_; }
  const GgufTensor* FindTensor(const std::string& name) const;
  // How many tensors of each ggml type the file holds, by type name ("Q8_0": 169).
  std::map<std::string, int64_t> TensorTypeCounts() const;
  // The whole file (for hashing), and where its data section begins.
  std::string_view bytes() const { return bytes_; }
  uint64_t data_offset() const { return data_offset_; }

 private:
  GgufFile() = default;
  std::string path_;
  std::unique_ptr<MappedFile> map_;
  std::string_view bytes_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  nlohmann::json metadata_ = nlohmann::json::object();
  std::vector<GgufTensor> tensors_;
  std::unordered_map<std::string, size_t> index_;  // name -> position in tensors_
};

// Whether `path` names a GGUF file (by its first four bytes; false when it cannot be read).
bool IsGgufFile(const std::string& path);

}  // namespace trace::engine
