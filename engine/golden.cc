#include "engine/golden.h"

#include "base/hash.h"

namespace trace::engine {

const std::vector<GoldenPrompt>& GoldenPrompts() {
  static const std::vector<GoldenPrompt> prompts = {
      {"short", {9707, 11, 1879, 0}, "b2d50cf002344dc4"},  // "Hello, world!"
      {"chat",
       {151644, 872, 198, 3838, 374, 220, 17, 10, 17, 30, 151645, 198, 151644, 77091, 198},
       "8e59fec4c6296760"},
  };
  return prompts;
}

Result<std::vector<std::string>> GoldenDigests(Engine& engine) {
  std::vector<std::string> digests;
  for (const GoldenPrompt& p : GoldenPrompts()) {
    const SeqId seq = engine.NewSequence();
    BatchItem item{seq, p.tokens, {static_cast<int32_t>(p.tokens.size() - 1)}};
    ForwardOutput out;
    const Status st = engine.Forward(std::span<const BatchItem>(&item, 1), &out);
    engine.FreeSequence(seq);
    TRACE_RETURN_IF_ERROR(st);
    digests.push_back(DigestHex(LogitsDigest(out.row(0))));
  }
  return digests;
}

}  // namespace trace::engine
