#include "engine/safetensors.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

#include "base/escape.h"
#include "base/mapped_file.h"

namespace trace::engine {
namespace {

using json = nlohmann::json;

size_t ElementSize(kernels::DType dtype) {
  return dtype == kernels::DType::kF32 ? 4 : 2;
}

// The safetensors header size is capped (the reference implementation uses 100 MB).
constexpr uint64_t kMaxHeaderBytes = 100ull << 20;

}  // namespace

int64_t TensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

const char* SafetensorsDTypeName(kernels::DType dtype) {
  switch (dtype) {
    case kernels::DType::kF32:
      return "F32";
    case kernels::DType::kBF16:
      return "BF16";
    case kernels::DType::kF16:
      return "F16";
    case kernels::DType::kQ8_0:  // not safetensors dtypes
    case kernels::DType::kQ4_0:
    case kernels::DType::kQ5_0:
    case kernels::DType::kQ4_1:
    case kernels::DType::kQ5_1:
    case kernels::DType::kQ4_K:
    case kernels::DType::kQ5_K:
    case kernels::DType::kQ6_K:
      break;
  }
  return "?";
}

Result<std::map<std::string, TensorInfo>> ParseSafetensorsHeader(const uint8_t* file, size_t size,
                                                                 const std::string& path_text) {
  const std::string path = EscapePathForDisplay(path_text);  // as messages show it
  if (size < 8) {
    return Corruption(path + ": truncated safetensors file (" + std::to_string(size) +
                      " bytes, no header length)");
  }
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | file[i];
  if (header_len > kMaxHeaderBytes) {
    return Corruption(path + ": safetensors header length " + std::to_string(header_len) +
                      " is implausible (over 100 MB)");
  }
  if (header_len > size - 8) {
    return Corruption(path + ": truncated safetensors file (header of " +
                      std::to_string(header_len) + " bytes, file has " + std::to_string(size) +
                      ")");
  }
  const uint64_t data_size = size - 8 - header_len;
  json header = json::parse(reinterpret_cast<const char*>(file) + 8,
                            reinterpret_cast<const char*>(file) + 8 + header_len, nullptr,
                            /*allow_exceptions=*/false);
  if (header.is_discarded() || !header.is_object()) {
    return Corruption(path + ": safetensors header is not a JSON object");
  }
  std::map<std::string, TensorInfo> tensors;
  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string& name = it.key();
    if (name == "__metadata__") continue;
    const json& entry = it.value();
    const std::string where = path + ": tensor '" + EscapeForDisplay(name) + "'";
    if (!entry.is_object()) return Corruption(where + ": header entry is not an object");
    auto dt = entry.find("dtype");
    auto sh = entry.find("shape");
    auto off = entry.find("data_offsets");
    if (dt == entry.end() || !dt->is_string()) return Corruption(where + ": missing dtype");
    if (sh == entry.end() || !sh->is_array()) return Corruption(where + ": missing shape");
    if (off == entry.end() || !off->is_array() || off->size() != 2) {
      return Corruption(where + ": data_offsets must be [begin, end]");
    }
    TensorInfo info;
    info.name = name;
    const std::string dtype = dt->get<std::string>();
    if (dtype == "BF16") {
      info.dtype = kernels::DType::kBF16;
    } else if (dtype == "F16") {
      info.dtype = kernels::DType::kF16;
    } else if (dtype == "F32") {
      info.dtype = kernels::DType::kF32;
    } else {
      return Unsupported(where + ": dtype " + EscapeForDisplay(dtype) +
                         " is not supported (BF16, F16, F32)");
    }
    uint64_t elements = 1;
    for (const json& d : *sh) {
      if (!d.is_number_unsigned()) {
        return Corruption(where + ": shape has a non-integer or negative dimension");
      }
      uint64_t v = d.get<uint64_t>();
      if (v > (1ull << 40) || (v != 0 && elements > (1ull << 50) / v)) {
        return Corruption(where + ": shape is implausibly large");
      }
      elements *= v;
      info.shape.push_back(static_cast<int64_t>(v));
    }
    if (!(*off)[0].is_number_unsigned() || !(*off)[1].is_number_unsigned()) {
      return Corruption(where + ": data_offsets are not non-negative integers");
    }
    info.begin = (*off)[0].get<uint64_t>();
    info.end = (*off)[1].get<uint64_t>();
    if (info.begin > info.end) return Corruption(where + ": data_offsets begin > end");
    if (info.end > data_size) {
      return Corruption(where + ": data_offsets [" + std::to_string(info.begin) + ", " +
                        std::to_string(info.end) + "] run past the end of the data (" +
                        std::to_string(data_size) + " bytes; truncated file?)");
    }
    if (info.end - info.begin != elements * ElementSize(info.dtype)) {
      return Corruption(where + ": " + std::to_string(info.end - info.begin) +
                        " bytes do not match dtype " + EscapeForDisplay(dtype) + " and its shape");
    }
    if ((8 + header_len + info.begin) % ElementSize(info.dtype) != 0) {
      return Corruption(where + ": data is not aligned to its element size");
    }
    tensors.emplace(name, std::move(info));
  }
  return tensors;
}

const TensorInfo* SafetensorsFile::Find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

Result<std::unique_ptr<SafetensorsFile>> SafetensorsFile::Open(const std::string& path) {
  std::unique_ptr<SafetensorsFile> file(new SafetensorsFile());
  file->path_ = path;
  TRACE_ASSIGN_OR_RETURN(file->map_, MappedFile::Open(path));
  file->size_ = file->map_->size();
  const uint8_t* bytes = file->map_->data();
  TRACE_ASSIGN_OR_RETURN(file->tensors_, ParseSafetensorsHeader(bytes, file->size_, path));
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | bytes[i];
  for (auto& [name, info] : file->tensors_) info.data = bytes + 8 + header_len + info.begin;
  return file;
}

Status WriteSafetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                        const std::map<std::string, std::string>& metadata) {
  return WriteSafetensors(
      path, tensors, [&tensors](size_t i) { return tensors[i].bytes; }, metadata);
}

Status WriteSafetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                        const std::function<std::string(size_t)>& fill,
                        const std::map<std::string, std::string>& metadata) {
  // nlohmann::ordered_json keeps the tensors in the order given.
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  std::vector<uint64_t> sizes;
  for (const auto& t : tensors) {
    uint64_t elements = 1;
    for (int64_t d : t.shape) elements *= static_cast<uint64_t>(d);
    const uint64_t size = elements * ElementSize(t.dtype);
    header[t.name] = {{"dtype", SafetensorsDTypeName(t.dtype)},
                      {"shape", t.shape},
                      {"data_offsets", {offset, offset + size}}};
    offset += size;
    sizes.push_back(size);
  }
  std::string text = header.dump();
  while ((8 + text.size()) % 8 != 0) text.push_back(' ');
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) {
    const int err = errno;  // before the message is built
    return IOError(EscapePathForDisplay(path) + ": cannot create: " + std::strerror(err));
  }
  uint64_t len = text.size();
  char len_bytes[8];
  for (int i = 0; i < 8; ++i) len_bytes[i] = static_cast<char>((len >> (8 * i)) & 0xff);
  out.write(len_bytes, 8);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  for (size_t i = 0; i < tensors.size(); ++i) {
    std::string bytes = fill(i);
    if (bytes.size() != sizes[i]) {
      return Internal(EscapePathForDisplay(path) + ": tensor '" +
                      EscapeForDisplay(tensors[i].name) + "' has " + std::to_string(bytes.size()) +
                      " bytes, its shape needs " + std::to_string(sizes[i]));
    }
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  out.close();
  if (!out) {
    const int err = errno;  // before the message is built
    return IOError(EscapePathForDisplay(path) + ": write failed: " + std::strerror(err));
  }
  return Status::Ok();
}

}  // namespace trace::engine
