#include "base/hash.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <vector>

namespace trace {
namespace {

TEST(HashTest, Sha256KnownVectors) {
  // FIPS 180-2 test vectors.
  EXPECT_EQ(Sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(HashTest, Sha256FileMatchesBytes) {
  std::string path = ::testing::TempDir() + "/hash_test.bin";
  std::string data(3 << 20, 'x');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 131);
  std::ofstream(path, std::ios::binary).write(data.data(), data.size());
  EXPECT_EQ(Sha256File(path).value(), Sha256Hex(data));
  EXPECT_FALSE(Sha256File(path + ".missing").ok());
  std::remove(path.c_str());
}

TEST(HashTest, LogitsDigestSeesEveryBit) {
  std::vector<float> a = {1.0f, -0.0f, 3.5f};
  std::vector<float> b = {1.0f, 0.0f, 3.5f};  // differs only in the sign bit of zero
  EXPECT_NE(LogitsDigest(a), LogitsDigest(b));
  EXPECT_EQ(LogitsDigest(a), LogitsDigest(std::vector<float>(a)));
  EXPECT_EQ(DigestHex(0x1234), "0000000000001234");
}

// x86's default NaN (0xffc00000) and AArch64's (0x7fc00000), and any payload, digest alike;
// every other bit still counts, and a row without NaN digests as its raw bytes (the digests
// recorded before NaNs were folded stay valid).
TEST(HashTest, LogitsDigestFoldsEveryNanIntoOne) {
  const auto from_bits = [](uint32_t bits) {
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  };
  const std::vector<float> x86 = {1.0f, from_bits(0xffc00000u), -2.0f};
  const std::vector<float> arm = {1.0f, from_bits(0x7fc00000u), -2.0f};
  const std::vector<float> payload = {1.0f, from_bits(0x7f800123u), -2.0f};
  EXPECT_EQ(LogitsDigest(x86), LogitsDigest(arm));
  EXPECT_EQ(LogitsDigest(x86), LogitsDigest(payload));
  EXPECT_NE(LogitsDigest(x86),
            LogitsDigest(std::vector<float>{1.0f, from_bits(0x7fc00000u), 2.0f}));
  const std::vector<float> plain = {1.0f, -0.0f, 3.5f};
  EXPECT_EQ(LogitsDigest(plain), Digest64(plain.data(), plain.size() * sizeof(float)));
}

}  // namespace
}  // namespace trace
