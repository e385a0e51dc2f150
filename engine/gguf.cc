// GgufFile: the GGUF reader (engine/gguf.h). Every count, length and offset read from the file
// is checked against the bytes that remain before it is used, so a hostile header costs at
// most its own size.
#include "engine/gguf.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <unordered_map>

#include "base/escape.h"

namespace trace::engine {
namespace {

constexpr GgmlTypeInfo kTypes[] = {
    {GgmlType::kF32, "F32", 1, 4},       {GgmlType::kF16, "F16", 1, 2},
    {GgmlType::kQ4_0, "Q4_0", 32, 18},   {GgmlType::kQ4_1, "Q4_1", 32, 20},
    {GgmlType::kQ5_0, "Q5_0", 32, 22},   {GgmlType::kQ5_1, "Q5_1", 32, 24},
    {GgmlType::kQ8_0, "Q8_0", 32, 34},   {GgmlType::kQ8_1, "Q8_1", 32, 36},
    {GgmlType::kQ2_K, "Q2_K", 256, 84},  {GgmlType::kQ3_K, "Q3_K", 256, 110},
    {GgmlType::kQ4_K, "Q4_K", 256, 144}, {GgmlType::kQ5_K, "Q5_K", 256, 176},
    {GgmlType::kQ6_K, "Q6_K", 256, 210}, {GgmlType::kQ8_K, "Q8_K", 256, 292},
    {GgmlType::kBF16, "BF16", 1, 2},     {GgmlType::kMXFP4, "MXFP4", 32, 17},
};

// The metadata value types of the format.
enum ValueType : uint32_t {
  kU8 = 0,
  kI8 = 1,
  kU16 = 2,
  kI16 = 3,
  kU32 = 4,
  kI32 = 5,
  kF32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kU64 = 10,
  kI64 = 11,
  kF64 = 12,
};
// The fewest bytes one value of a type takes (an array: its type and count).
uint64_t MinValueBytes(uint32_t type) {
  switch (type) {
    case kU8:
    case kI8:
    case kBool:
      return 1;
    case kU16:
    case kI16:
      return 2;
    case kU32:
    case kI32:
    case kF32:
      return 4;
    case kU64:
    case kI64:
    case kF64:
    case kString:
      return 8;
    case kArray:
      return 12;
  }
  return 1;
}

constexpr int kMaxArrayDepth = 4;  // arrays of arrays: none in practice, a few allowed
constexpr uint32_t kMaxDims = 4;   // ggml's GGML_MAX_DIMS

// A bounds-checked little-endian reader over the header.
class Cursor {
 public:
  Cursor(std::string_view bytes, std::string path) : bytes_(bytes), path_(std::move(path)) {}

  uint64_t position() const { return pos_; }
  uint64_t remaining() const { return bytes_.size() - pos_; }

  Status Need(uint64_t n, const std::string& what) const {
    if (n > remaining()) {
      return Corruption(path_ + ": truncated GGUF file: " + what + " at byte " +
                        std::to_string(pos_) + " needs " + std::to_string(n) + " bytes, " +
                        std::to_string(remaining()) + " remain");
    }
    return Status::Ok();
  }
  template <class T>
  Result<T> Read(const std::string& what) {
    TRACE_RETURN_IF_ERROR(Need(sizeof(T), what));
    T v;
    std::memcpy(&v, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  Result<std::string> ReadString(const std::string& what) {
    TRACE_ASSIGN_OR_RETURN(uint64_t len, Read<uint64_t>(what + " (its length)"));
    TRACE_RETURN_IF_ERROR(Need(len, what));
    std::string s(bytes_.data() + pos_, static_cast<size_t>(len));
    pos_ += len;
    return s;
  }
  Status Error(const std::string& what) const { return Corruption(path_ + ": " + what); }

 private:
  std::string_view bytes_;
  std::string path_;
  uint64_t pos_ = 0;
};

Result<nlohmann::json> ReadValue(Cursor* in, uint32_t type, const std::string& key, int depth);

Result<nlohmann::json> ReadArray(Cursor* in, const std::string& key, int depth) {
  if (depth >= kMaxArrayDepth) {
    return in->Error("metadata '" + EscapeForDisplay(key) + "': arrays nested deeper than " +
                     std::to_string(kMaxArrayDepth) + " levels");
  }
  const std::string shown = EscapeForDisplay(key);
  TRACE_ASSIGN_OR_RETURN(uint32_t type, in->Read<uint32_t>("metadata '" + shown + "' array type"));
  TRACE_ASSIGN_OR_RETURN(uint64_t count,
                         in->Read<uint64_t>("metadata '" + shown + "' array length"));
  if (type > kF64) {
    return in->Error("metadata '" + EscapeForDisplay(key) + "': unknown array element type " +
                     std::to_string(type));
  }
  // Every element takes at least MinValueBytes: a count the rest of the file cannot hold is
  // refused before anything is allocated for it.
  if (count > in->remaining() / MinValueBytes(type)) {
    return in->Error("metadata '" + EscapeForDisplay(key) + "': array of " + std::to_string(count) +
                     " elements is longer than the file");
  }
  nlohmann::json out = nlohmann::json::array();
  out.get_ref<nlohmann::json::array_t&>().reserve(static_cast<size_t>(count));
  for (uint64_t i = 0; i < count; ++i) {
    TRACE_ASSIGN_OR_RETURN(nlohmann::json v, ReadValue(in, type, key, depth + 1));
    out.push_back(std::move(v));
  }
  return out;
}

Result<nlohmann::json> ReadValue(Cursor* in, uint32_t type, const std::string& key, int depth) {
  const std::string what = "metadata '" + EscapeForDisplay(key) + "'";
  switch (type) {
    case kU8: {
      TRACE_ASSIGN_OR_RETURN(uint8_t v, in->Read<uint8_t>(what));
      return nlohmann::json(v);
    }
    case kI8: {
      TRACE_ASSIGN_OR_RETURN(int8_t v, in->Read<int8_t>(what));
      return nlohmann::json(v);
    }
    case kU16: {
      TRACE_ASSIGN_OR_RETURN(uint16_t v, in->Read<uint16_t>(what));
      return nlohmann::json(v);
    }
    case kI16: {
      TRACE_ASSIGN_OR_RETURN(int16_t v, in->Read<int16_t>(what));
      return nlohmann::json(v);
    }
    case kU32: {
      TRACE_ASSIGN_OR_RETURN(uint32_t v, in->Read<uint32_t>(what));
      return nlohmann::json(v);
    }
    case kI32: {
      TRACE_ASSIGN_OR_RETURN(int32_t v, in->Read<int32_t>(what));
      return nlohmann::json(v);
    }
    case kU64: {
      TRACE_ASSIGN_OR_RETURN(uint64_t v, in->Read<uint64_t>(what));
      return nlohmann::json(v);
    }
    case kI64: {
      TRACE_ASSIGN_OR_RETURN(int64_t v, in->Read<int64_t>(what));
      return nlohmann::json(v);
    }
    case kF32: {
      TRACE_ASSIGN_OR_RETURN(float v, in->Read<float>(what));
      return nlohmann::json(static_cast<double>(v));
    }
    case kF64: {
      TRACE_ASSIGN_OR_RETURN(double v, in->Read<double>(what));
      return nlohmann::json(v);
    }
    case kBool: {
      TRACE_ASSIGN_OR_RETURN(uint8_t v, in->Read<uint8_t>(what));
      if (v > 1) return in->Error(what + ": a bool of value " + std::to_string(v));
      return nlohmann::json(v == 1);
    }
    case kString: {
      TRACE_ASSIGN_OR_RETURN(std::string s, in->ReadString(what));
      return nlohmann::json(std::move(s));
    }
    case kArray:
      return ReadArray(in, key, depth);
  }
  return in->Error(what + ": unknown value type " + std::to_string(type));
}

std::string DimsText(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

}  // namespace

const GgmlTypeInfo* FindGgmlType(uint32_t type) {
  for (const GgmlTypeInfo& t : kTypes) {
    if (static_cast<uint32_t>(t.type) == type) return &t;
  }
  return nullptr;
}

int64_t GgufTensor::numel() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

Result<std::unique_ptr<GgufFile>> GgufFile::Open(const std::string& path) {
  TRACE_ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> map, MappedFile::Open(path));
  const std::string_view bytes = map->bytes();
  TRACE_ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> file, Parse(bytes, path));
  file->map_ = std::move(map);
  return file;
}

Result<std::unique_ptr<GgufFile>> GgufFile::Parse(std::string_view bytes,
                                                  const std::string& path_text) {
  const std::string path = EscapePathForDisplay(path_text);
  std::unique_ptr<GgufFile> file(new GgufFile());
  file->path_ = path_text;
  file->bytes_ = bytes;
  Cursor in(bytes, path);
  TRACE_RETURN_IF_ERROR(in.Need(4, "the magic"));
  if (bytes.substr(0, 4) != "GGUF") return in.Error("not a GGUF file (no 'GGUF' magic)");
  TRACE_RETURN_IF_ERROR(in.Read<uint32_t>("the magic").status());
  TRACE_ASSIGN_OR_RETURN(file->version_, in.Read<uint32_t>("the version"));
  if (file->version_ != 2 && file->version_ != 3) {
    return in.Error("GGUF version " + std::to_string(file->version_) +
                    " is not supported (versions 2 and 3 are)");
  }
  TRACE_ASSIGN_OR_RETURN(uint64_t tensor_count, in.Read<uint64_t>("the tensor count"));
  TRACE_ASSIGN_OR_RETURN(uint64_t kv_count, in.Read<uint64_t>("the metadata count"));
  // A key/value takes at least 8 + 4 + 1 bytes and a tensor info 8 + 4 + 4 + 8.
  if (kv_count > in.remaining() / 13) {
    return in.Error(std::to_string(kv_count) + " metadata entries cannot fit in the file");
  }
  for (uint64_t i = 0; i < kv_count; ++i) {
    TRACE_ASSIGN_OR_RETURN(std::string key, in.ReadString("metadata key " + std::to_string(i)));
    TRACE_ASSIGN_OR_RETURN(
        uint32_t type, in.Read<uint32_t>("metadata '" + EscapeForDisplay(key) + "' value type"));
    if (type > kF64) {
      return in.Error("metadata '" + EscapeForDisplay(key) + "': unknown value type " +
                      std::to_string(type));
    }
    if (file->metadata_.contains(key)) {
      return in.Error("metadata key '" + EscapeForDisplay(key) + "' appears twice");
    }
    TRACE_ASSIGN_OR_RETURN(nlohmann::json value, ReadValue(&in, type, key, 0));
    file->metadata_[key] = std::move(value);
  }
  if (const nlohmann::json* a = file->Find("general.alignment")) {
    if (!a->is_number_unsigned() || a->get<uint64_t>() == 0 ||
        (a->get<uint64_t>() & (a->get<uint64_t>() - 1)) != 0 || a->get<uint64_t>() > 1 << 20) {
      return in.Error("metadata 'general.alignment' must be a power of two up to 1 MiB, not " +
                      a->dump());
    }
    file->alignment_ = a->get<uint64_t>();
  }
  if (tensor_count > in.remaining() / 24) {
    return in.Error(std::to_string(tensor_count) + " tensors cannot fit in the file");
  }
  file->tensors_.reserve(static_cast<size_t>(tensor_count));
  for (uint64_t i = 0; i < tensor_count; ++i) {
    GgufTensor t;
    TRACE_ASSIGN_OR_RETURN(t.name, in.ReadString("tensor " + std::to_string(i) + "'s name"));
    const std::string where = "tensor '" + EscapeForDisplay(t.name) + "'";
    if (!file->index_.emplace(t.name, file->tensors_.size()).second) {
      return in.Error(where + " appears twice");
    }
    TRACE_ASSIGN_OR_RETURN(uint32_t n_dims, in.Read<uint32_t>(where + " dimension count"));
    if (n_dims == 0 || n_dims > kMaxDims) {
      return in.Error(where + ": " + std::to_string(n_dims) + " dimensions (1 to 4 are allowed)");
    }
    __int128 numel = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      TRACE_ASSIGN_OR_RETURN(uint64_t dim, in.Read<uint64_t>(where + " dimension"));
      if (dim == 0 || dim > (uint64_t{1} << 40)) {
        return in.Error(where + ": dimension " + std::to_string(d) + " is " + std::to_string(dim));
      }
      numel *= dim;
      t.dims.push_back(static_cast<int64_t>(dim));
    }
    TRACE_ASSIGN_OR_RETURN(uint32_t type, in.Read<uint32_t>(where + " type"));
    const GgmlTypeInfo* info = FindGgmlType(type);
    if (info == nullptr) {
      return in.Error(where + ": unknown ggml tensor type " + std::to_string(type));
    }
    t.type = info->type;
    if (t.dims[0] % info->block != 0) {
      return in.Error(where + ": its rows of " + std::to_string(t.dims[0]) +
                      " elements are not whole " + info->name + " blocks of " +
                      std::to_string(info->block));
    }
    const __int128 bytes128 = numel / info->block * info->block_bytes;
    if (bytes128 > static_cast<__int128>(bytes.size())) {
      return in.Error(where + " " + DimsText(t.dims) + " of " + info->name +
                      " is larger than the file");
    }
    t.bytes = static_cast<uint64_t>(bytes128);
    TRACE_ASSIGN_OR_RETURN(t.offset, in.Read<uint64_t>(where + " offset"));
    file->tensors_.push_back(std::move(t));
  }
  const uint64_t header_end = in.position();
  const uint64_t a = file->alignment_;
  file->data_offset_ = (header_end + a - 1) / a * a;
  if (!file->tensors_.empty() && file->data_offset_ > bytes.size()) {
    return in.Error("truncated GGUF file: the data section would begin at byte " +
                    std::to_string(file->data_offset_) + ", past its end (" +
                    std::to_string(bytes.size()) + " bytes)");
  }
  const uint64_t data_size = bytes.size() - std::min<uint64_t>(file->data_offset_, bytes.size());
  std::vector<const GgufTensor*> by_offset;
  for (GgufTensor& t : file->tensors_) {
    const std::string where = "tensor '" + EscapeForDisplay(t.name) + "'";
    if (t.offset % a != 0) {
      return in.Error(where + ": offset " + std::to_string(t.offset) +
                      " is not a multiple of the alignment " + std::to_string(a));
    }
    if (t.offset > data_size || t.bytes > data_size - t.offset) {
      return in.Error("truncated GGUF file: " + where + " needs bytes " + std::to_string(t.offset) +
                      ".." + std::to_string(t.offset + t.bytes) +
                      " of the data section, which has " + std::to_string(data_size));
    }
    t.data = reinterpret_cast<const uint8_t*>(bytes.data()) + file->data_offset_ + t.offset;
    by_offset.push_back(&t);
  }
  std::sort(by_offset.begin(), by_offset.end(),
            [](const GgufTensor* x, const GgufTensor* y) { return x->offset < y->offset; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    if (by_offset[i - 1]->offset + by_offset[i - 1]->bytes > by_offset[i]->offset) {
      return in.Error("tensors '" + EscapeForDisplay(by_offset[i - 1]->name) + "' and '" +
                      EscapeForDisplay(by_offset[i]->name) + "' overlap");
    }
  }
  return file;
}

const nlohmann::json* GgufFile::Find(const std::string& key) const {
  auto it = metadata_.find(key);
  return it == metadata_.end() ? nullptr : &*it;
}

const GgufTensor* GgufFile::FindTensor(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

std::map<std::string, int64_t> GgufFile::TensorTypeCounts() const {
  std::map<std::string, int64_t> counts;
  for (const GgufTensor& t : tensors_) ++counts[FindGgmlType(static_cast<uint32_t>(t.type))->name];
  return counts;
}

bool IsGgufFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  return in.read(magic, 4) && std::memcmp(magic, "GGUF", 4) == 0;
}

}  // namespace trace::engine
