#include "base/hash.h"

#include <gtest/gtest.h>

#include <cstdio>
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

}  // namespace
}  // namespace trace
