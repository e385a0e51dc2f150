#include "base/hash.h"

#include <openssl/evp.h>
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

namespace trace {
namespace {

std::string ToHex(const unsigned char* bytes, size_t n) {
  static const char kHex[] = "0123456789abcdef";
  std::string out(n * 2, '0');
  for (size_t i = 0; i < n; ++i) {
    out[2 * i] = kHex[bytes[i] >> 4];
    out[2 * i + 1] = kHex[bytes[i] & 15];
  }
  return out;
}

struct MdCtxDeleter {
  void operator()(EVP_MD_CTX* c) const { EVP_MD_CTX_free(c); }
};

}  // namespace

std::string Sha256Hex(std::string_view data) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(data.data(), data.size(), md, &len, EVP_sha256(), nullptr);
  return ToHex(md, len);
}

Result<std::string> Sha256File(const std::string& path) {
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) return IOError(path + ": cannot open: " + std::strerror(errno));
  std::unique_ptr<EVP_MD_CTX, MdCtxDeleter> ctx(EVP_MD_CTX_new());
  EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr);
  std::vector<char> buf(1 << 20);
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), f.get())) > 0) {
    EVP_DigestUpdate(ctx.get(), buf.data(), n);
  }
  if (std::ferror(f.get())) return IOError(path + ": read failed: " + std::strerror(errno));
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_DigestFinal_ex(ctx.get(), md, &len);
  return ToHex(md, len);
}

uint64_t Digest64(const void* data, size_t size) {
  return XXH3_64bits(data, size);
}

uint64_t LogitsDigest(std::span<const float> logits) {
  const auto is_nan = [](float v) { return v != v; };
  if (std::none_of(logits.begin(), logits.end(), is_nan)) {
    return Digest64(logits.data(), logits.size_bytes());
  }
  std::vector<float> one_nan(logits.begin(), logits.end());
  uint32_t bits = 0x7fc00000u;
  float nan;
  std::memcpy(&nan, &bits, 4);
  std::replace_if(one_nan.begin(), one_nan.end(), is_nan, nan);
  return Digest64(one_nan.data(), one_nan.size() * sizeof(float));
}

std::string DigestHex(uint64_t digest) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(digest));
  return buf;
}

}  // namespace trace
