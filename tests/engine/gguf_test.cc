// The GGUF reader (engine/gguf.h) on files written by testkit/gguf_writer.h (a writer made from
// the format's description): every value type, tensor infos, alignment, and a one-line error
// naming the file for each way a file can be broken, every truncation included.
#include <gtest/gtest.h>

#include <cmath>

#include "engine/gguf.h"
#include "testkit/gguf_writer.h"

namespace trace::engine {
namespace {

using testkit::GgufWriter;

constexpr const char* kPath = "/m/model.gguf";

// A small file with one value of every type, two arrays and three tensors.
GgufWriter Sample() {
  GgufWriter w;
  w.String("general.architecture", "llama");
  w.U8("t.u8", 200);
  w.I8("t.i8", -5);
  w.U16("t.u16", 65000);
  w.I16("t.i16", -30000);
  w.U32("t.u32", 4000000000u);
  w.I32("t.i32", -7);
  w.U64("t.u64", uint64_t{1} << 60);
  w.I64("t.i64", -(int64_t{1} << 50));
  w.F32("t.f32", 0.5f);
  w.F64("t.f64", 1e-300);
  w.Bool("t.bool", true);
  w.StringArray("tokenizer.ggml.tokens", {"a", "", "\xe2\x96\x81hi", std::string("\0x", 2)});
  w.NumberArray<int32_t>("tokenizer.ggml.token_type", GgufWriter::kI32, {1, 3, 1, 4});
  std::string f32(4 * 6, '\0');
  for (int i = 0; i < 6; ++i) {
    const float v = static_cast<float>(i) - 2.5f;
    std::memcpy(f32.data() + 4 * i, &v, 4);
  }
  w.Tensor("a.weight", {3, 2}, 0, f32);
  w.Tensor("b.weight", {64, 2}, 8, std::string(2 * 2 * 34, '\x11'));  // Q8_0: 2 blocks a row
  w.Tensor("c.weight", {5}, 30, std::string(10, '\x22'));             // BF16
  return w;
}

TEST(GgufReader, ReadsEveryValueTypeAndTensor) {
  const std::string bytes = Sample().Finish();
  auto file = GgufFile::Parse(bytes, kPath);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  const GgufFile& f = **file;
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.alignment(), 32u);
  EXPECT_EQ(*f.Find("general.architecture"), "llama");
  EXPECT_EQ(f.Find("t.u8")->get<uint64_t>(), 200u);
  EXPECT_EQ(f.Find("t.i8")->get<int64_t>(), -5);
  EXPECT_EQ(f.Find("t.u16")->get<uint64_t>(), 65000u);
  EXPECT_EQ(f.Find("t.i16")->get<int64_t>(), -30000);
  EXPECT_EQ(f.Find("t.u32")->get<uint64_t>(), 4000000000u);
  EXPECT_EQ(f.Find("t.i32")->get<int64_t>(), -7);
  EXPECT_EQ(f.Find("t.u64")->get<uint64_t>(), uint64_t{1} << 60);
  EXPECT_EQ(f.Find("t.i64")->get<int64_t>(), -(int64_t{1} << 50));
  EXPECT_EQ(f.Find("t.f32")->get<double>(), 0.5);
  EXPECT_EQ(f.Find("t.f64")->get<double>(), 1e-300);
  EXPECT_EQ(f.Find("t.bool")->get<bool>(), true);
  const nlohmann::json& tokens = *f.Find("tokenizer.ggml.tokens");
  ASSERT_EQ(tokens.size(), 4u);
  EXPECT_EQ(tokens[2].get<std::string>(), "\xe2\x96\x81hi");
  EXPECT_EQ(tokens[3].get<std::string>(), std::string("\0x", 2));  // bytes as stored
  EXPECT_EQ(*f.Find("tokenizer.ggml.token_type"), nlohmann::json({1, 3, 1, 4}));
  EXPECT_EQ(f.Find("absent"), nullptr);

  ASSERT_EQ(f.tensors().size(), 3u);
  const GgufTensor* a = f.FindTensor("a.weight");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->dims, (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(a->type, GgmlType::kF32);
  EXPECT_EQ(a->bytes, 24u);
  float v;
  std::memcpy(&v, a->data + 4 * 5, 4);
  EXPECT_EQ(v, 2.5f);
  const GgufTensor* b = f.FindTensor("b.weight");
  EXPECT_EQ(b->type, GgmlType::kQ8_0);
  EXPECT_EQ(b->bytes, 136u);
  EXPECT_EQ(b->offset, 32u);  // after a.weight's 24 bytes, aligned to 32
  EXPECT_EQ((b->data - reinterpret_cast<const uint8_t*>(bytes.data())) % 32, 0);
  EXPECT_EQ(b->data[0], 0x11);
  EXPECT_EQ(f.FindTensor("c.weight")->type, GgmlType::kBF16);
  EXPECT_EQ(f.FindTensor("none"), nullptr);
  EXPECT_EQ(f.TensorTypeCounts(),
            (std::map<std::string, int64_t>{{"BF16", 1}, {"F32", 1}, {"Q8_0", 1}}));
  EXPECT_STREQ(FindGgmlType(12)->name, "Q4_K");
  EXPECT_EQ(FindGgmlType(12)->block_bytes, 144);
  EXPECT_EQ(FindGgmlType(5), nullptr);  // Q4_2: removed from ggml long ago
}

TEST(GgufReader, HonoursAlignmentAndVersion2) {
  const std::string bytes = Sample().Finish(2, 64);
  auto file = GgufFile::Parse(bytes, kPath);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_EQ((*file)->version(), 2u);
  EXPECT_EQ((*file)->alignment(), 64u);
  EXPECT_EQ((*file)->data_offset() % 64, 0u);
  EXPECT_EQ((*file)->FindTensor("b.weight")->offset, 64u);
}

// Every prefix of a valid file is refused with one line naming the file: no crash, no read
// past the end (run under ASan in CI's sanitizer slice).
TEST(GgufReader, EveryTruncationIsAOneLineError) {
  const std::string bytes = Sample().Finish();
  for (size_t n = 0; n < bytes.size(); ++n) {
    const std::string cut = bytes.substr(0, n);
    auto file = GgufFile::Parse(cut, kPath);
    ASSERT_FALSE(file.ok()) << "prefix of " << n << " bytes";
    const std::string msg = file.status().message();
    ASSERT_EQ(msg.rfind(std::string(kPath) + ": ", 0), 0u) << msg;
    ASSERT_EQ(msg.find('\n'), std::string::npos) << msg;
  }
}

struct Broken {
  const char* what;
  std::string bytes;
  const char* says;
};

std::vector<Broken> BrokenFiles() {
  std::vector<Broken> out;
  auto with = [](auto edit) {
    GgufWriter w = Sample();
    edit(w);
    return w.Finish();
  };
  const std::string good = Sample().Finish();
  out.push_back({"magic", "GGUG" + good.substr(4), "not a GGUF file (no 'GGUF' magic)"});
  out.push_back({"version", Sample().Finish(4), "GGUF version 4 is not supported"});
  out.push_back({"value type", with([](GgufWriter& w) { w.Raw("bad", 13, "x"); }),
                 "metadata 'bad': unknown value type 13"});
  out.push_back({"bool", with([](GgufWriter& w) { w.Raw("flag", GgufWriter::kBool, "\x02"); }),
                 "metadata 'flag': a bool of value 2"});
  out.push_back({"array length", with([](GgufWriter& w) {
                   w.Raw("arr", GgufWriter::kArray,
                         GgufWriter::Le(uint32_t{GgufWriter::kString}) +
                             GgufWriter::Le(uint64_t{1} << 60));
                 }),
                 "metadata 'arr': array of 1152921504606846976 elements is longer than the file"});
  out.push_back({"string length", with([](GgufWriter& w) {
                   w.Raw("s", GgufWriter::kString, GgufWriter::Le(uint64_t{1} << 62));
                 }),
                 "truncated GGUF file: metadata 's'"});
  out.push_back({"duplicate key", with([](GgufWriter& w) { w.U32("t.u8", 1); }),
                 "metadata key 't.u8' appears twice"});
  out.push_back({"alignment", with([](GgufWriter& w) { w.U32("general.alignment", 48); }),
                 "metadata 'general.alignment' must be a power of two"});
  out.push_back({"tensor type",
                 with([](GgufWriter& w) { w.Tensor("d.weight", {32}, 99, std::string(4, 0)); }),
                 "tensor 'd.weight': unknown ggml tensor type 99"});
  out.push_back({"dims", with([](GgufWriter& w) { w.Tensor("d.weight", {}, 0, ""); }),
                 "tensor 'd.weight': 0 dimensions (1 to 4 are allowed)"});
  out.push_back({"zero dim", with([](GgufWriter& w) {
                   w.Tensor("d.weight", {4, 0}, 0, std::string(4, 0));
                 }),
                 "tensor 'd.weight': dimension 1 is 0"});
  out.push_back({"blocks",
                 with([](GgufWriter& w) { w.Tensor("d.weight", {40}, 8, std::string(34, 0)); }),
                 "tensor 'd.weight': its rows of 40 elements are not whole Q8_0 blocks of 32"});
  out.push_back({"duplicate tensor",
                 with([](GgufWriter& w) { w.Tensor("a.weight", {1}, 0, std::string(4, 0)); }),
                 "tensor 'a.weight' appears twice"});
  out.push_back({"misaligned",
                 with([](GgufWriter& w) { w.Tensor("d.weight", {1}, 0, std::string(4, 0), 1000); }),
                 "tensor 'd.weight': offset 1000 is not a multiple of the alignment 32"});
  out.push_back({"past the end",
                 with([](GgufWriter& w) { w.Tensor("d.weight", {1}, 0, "", int64_t{1} << 40); }),
                 "truncated GGUF file: tensor 'd.weight' needs bytes 1099511627776.."});
  out.push_back({"overlap",
                 with([](GgufWriter& w) { w.Tensor("d.weight", {2}, 0, std::string(8, 0), 32); }),
                 "overlap"});
  out.push_back({"tensor count",
                 good.substr(0, 8) + GgufWriter::Le(uint64_t{1} << 50) + good.substr(16),
                 "1125899906842624 tensors cannot fit in the file"});
  return out;
}

TEST(GgufReader, BrokenFilesAreOneLineErrorsNamingWhatAndWhere) {
  for (const Broken& b : BrokenFiles()) {
    auto file = GgufFile::Parse(b.bytes, kPath);
    ASSERT_FALSE(file.ok()) << b.what;
    const std::string msg = file.status().message();
    EXPECT_EQ(msg.rfind(std::string(kPath) + ": ", 0), 0u) << b.what << ": " << msg;
    EXPECT_NE(msg.find(b.says), std::string::npos) << b.what << ": " << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << b.what;
  }
}

TEST(GgufReader, OpenMapsTheFileAndNamesAMissingOne) {
  auto missing = GgufFile::Open("/nonexistent/model.gguf");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("/nonexistent/model.gguf: cannot open"),
            std::string::npos);
  EXPECT_FALSE(IsGgufFile("/nonexistent/model.gguf"));
}

}  // namespace
}  // namespace trace::engine
