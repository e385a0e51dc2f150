// A GGUF writer for tests and fuzz seeds, written from the format's description (llama.cpp's
// ggml/docs/gguf.md) and sharing no code with engine/gguf.cc: the header (magic, version,
// counts), typed metadata, tensor infos and the aligned data section, little-endian. It can
// also write what a reader must refuse (any version, value type or offset), so the tests can
// build each broken file on purpose.
//
// Ownership: values. Thread safety: none needed. Errors: none (it writes what it is told).
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace trace::testkit {

class GgufWriter {
 public:
  // The format's value types.
  enum Type : uint32_t {
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

  void U8(const std::string& key, uint8_t v) { Kv(key, kU8, Le(v)); }
  void I8(const std::string& key, int8_t v) { Kv(key, kI8, Le(v)); }
  void U16(const std::string& key, uint16_t v) { Kv(key, kU16, Le(v)); }
  void I16(const std::string& key, int16_t v) { Kv(key, kI16, Le(v)); }
  void U32(const std::string& key, uint32_t v) { Kv(key, kU32, Le(v)); }
  void I32(const std::string& key, int32_t v) { Kv(key, kI32, Le(v)); }
  void U64(const std::string& key, uint64_t v) { Kv(key, kU64, Le(v)); }
  void I64(const std::string& key, int64_t v) { Kv(key, kI64, Le(v)); }
  void F32(const std::string& key, float v) { Kv(key, kF32, Le(v)); }
  void F64(const std::string& key, double v) { Kv(key, kF64, Le(v)); }
  void Bool(const std::string& key, bool v) { Kv(key, kBool, std::string(1, v ? '\1' : '\0')); }
  void String(const std::string& key, const std::string& v) { Kv(key, kString, Str(v)); }
  void StringArray(const std::string& key, const std::vector<std::string>& v) {
    std::string body = Le(static_cast<uint32_t>(kString)) + Le(static_cast<uint64_t>(v.size()));
    for (const std::string& s : v) body += Str(s);
    Kv(key, kArray, body);
  }
  template <class T>
  void NumberArray(const std::string& key, Type element, const std::vector<T>& v) {
    std::string body = Le(static_cast<uint32_t>(element)) + Le(static_cast<uint64_t>(v.size()));
    for (T x : v) body += Le(x);
    Kv(key, kArray, body);
  }
  // A value given as its type number and raw bytes (for broken files).
  void Raw(const std::string& key, uint32_t type, const std::string& value_bytes) {
    Kv(key, type, value_bytes);
  }

  // A tensor: dims innermost first, the ggml type number, its bytes (empty: none written, the
  // file lacks them). Its offset is the next aligned one unless `offset` is given.
  void Tensor(const std::string& name, const std::vector<uint64_t>& dims, uint32_t ggml_type,
              const std::string& bytes, int64_t offset = -1) {
    tensors_.push_back({name, dims, ggml_type, bytes, offset});
  }

  // The file. `alignment` pads the data section and each tensor (also written as
  // general.alignment when not 32).
  std::string Finish(uint32_t version = 3, uint64_t alignment = 32) const {
    std::string kvs = kvs_;
    uint64_t kv_count = kv_count_;
    if (alignment != 32) {
      kvs += Str("general.alignment") + Le(static_cast<uint32_t>(kU32)) +
             Le(static_cast<uint32_t>(alignment));
      ++kv_count;
    }
    std::string out =
        "GGUF" + Le(version) + Le(static_cast<uint64_t>(tensors_.size())) + Le(kv_count) + kvs;
    std::vector<uint64_t> offsets;
    uint64_t next = 0;
    for (const auto& t : tensors_) {
      const uint64_t at = t.offset >= 0 ? static_cast<uint64_t>(t.offset) : next;
      offsets.push_back(at);
      next = (at + t.bytes.size() + alignment - 1) / alignment * alignment;
      out += Str(t.name) + Le(static_cast<uint32_t>(t.dims.size()));
      for (uint64_t d : t.dims) out += Le(d);
      out += Le(t.type) + Le(at);
    }
    out.resize((out.size() + alignment - 1) / alignment * alignment, '\0');
    const size_t data = out.size();
    for (size_t i = 0; i < tensors_.size(); ++i) {
      const std::string& b = tensors_[i].bytes;
      if (b.empty()) continue;  // a tensor whose data the file lacks (a broken file)
      if (out.size() < data + offsets[i] + b.size()) out.resize(data + offsets[i] + b.size(), '\0');
      std::memcpy(out.data() + data + offsets[i], b.data(), b.size());
    }
    return out;
  }

  template <class T>
  static std::string Le(T v) {  // x86 and aarch64 are little-endian, as the format
    std::string s(sizeof(T), '\0');
    std::memcpy(s.data(), &v, sizeof(T));
    return s;
  }
  static std::string Str(const std::string& s) { return Le(static_cast<uint64_t>(s.size())) + s; }

 private:
  struct TensorEntry {
    std::string name;
    std::vector<uint64_t> dims;
    uint32_t type;
    std::string bytes;
    int64_t offset;
  };
  void Kv(const std::string& key, uint32_t type, const std::string& value) {
    kvs_ += Str(key) + Le(type) + value;
    ++kv_count_;
  }

  std::string kvs_;
  uint64_t kv_count_ = 0;
  std::vector<TensorEntry> tensors_;
};

}  // namespace trace::testkit
