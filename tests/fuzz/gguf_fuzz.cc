// Fuzz target: the GGUF reader (engine/gguf.h), which reads the header of every .gguf model.
// Promises: no crash, over-read or allocation beyond what the input's size allows; an error is
// one line naming the file; an accepted file keeps every tensor inside its data section,
// aligned, with bytes = blocks x block size, and no two tensors overlapping.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/gguf.h"
#include "testkit/gguf_writer.h"
#include "tests/fuzz/fuzz_checks.h"
#include "tests/fuzz/fuzz_target.h"

std::vector<std::string> TraceFuzzSeeds() {
  using trace::testkit::GgufWriter;
  GgufWriter w;
  w.String("general.architecture", "qwen2");
  w.U32("qwen2.block_count", 2);
  w.F32("qwen2.rope.freq_base", 1e6f);
  w.StringArray("tokenizer.ggml.tokens", {"a", "b", "\xc4\xa0"});
  w.NumberArray<int32_t>("tokenizer.ggml.token_type", GgufWriter::kI32, {1, 1, 3});
  w.Bool("flag", false);
  w.Tensor("token_embd.weight", {32, 3}, 8, std::string(3 * 34, '\x01'));
  w.Tensor("output_norm.weight", {32}, 0, std::string(128, '\x02'));
  w.Tensor("blk.0.attn_q.weight", {256, 1}, 12, std::string(144, '\x03'));
  GgufWriter empty;
  return {w.Finish(), w.Finish(2, 64), empty.Finish()};
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto parsed = trace::engine::GgufFile::Parse(bytes, "fuzz.gguf");
  if (!parsed.ok()) {
    trace::fuzz::RequireOneLine(parsed.status(), "GgufFile::Parse", "fuzz.gguf");
    return 0;
  }
  const trace::engine::GgufFile& f = **parsed;
  std::vector<std::pair<uint64_t, uint64_t>> spans;
  for (const trace::engine::GgufTensor& t : f.tensors()) {
    const trace::engine::GgmlTypeInfo* info =
        trace::engine::FindGgmlType(static_cast<uint32_t>(t.type));
    if (info == nullptr) trace::fuzz::Fail("tensor " + t.name + " of an unknown type accepted");
    if (t.dims.empty() || t.dims[0] % info->block != 0) trace::fuzz::Fail("partial block accepted");
    if (static_cast<uint64_t>(t.numel() / info->block * info->block_bytes) != t.bytes) {
      trace::fuzz::Fail("tensor " + t.name + " bytes != blocks x block size");
    }
    const uint64_t begin = static_cast<uint64_t>(t.data - data);
    if (begin < f.data_offset() || begin + t.bytes > size) {
      trace::fuzz::Fail("tensor " + t.name + " outside the data section");
    }
    if ((begin - f.data_offset()) % f.alignment() != 0) trace::fuzz::Fail("misaligned tensor");
    spans.push_back({begin, begin + t.bytes});
  }
  std::sort(spans.begin(), spans.end());
  for (size_t i = 1; i < spans.size(); ++i) {
    if (spans[i - 1].second > spans[i].first) trace::fuzz::Fail("overlapping tensors accepted");
  }
  return 0;
}
