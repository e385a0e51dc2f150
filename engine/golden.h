// The pinned canonical-v2 golden logits digests of a whole model: the `tiny` preset written
// by InitModel with seed 7, two prompts, each alone in a new sequence, the XXH3 digest of the
// logits of its last token. Pinned by tests/engine/forward_test.cc, held on the GPU by
// tests/gpu/engine_gpu_test.cc, and checked on any machine by `trace doctor`. A change is a
// change of canonical-v2 (bump kernels::kNumericsVersion and re-pin).
//
// Ownership: static constants. Thread safety: immutable; GoldenDigests uses the engine.
// Errors: GoldenDigests returns the engine's Status.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "engine/engine.h"

namespace trace::engine {

inline constexpr const char* kGoldenPreset = "tiny";
inline constexpr uint64_t kGoldenSeed = 7;

struct GoldenPrompt {
  const char* name;
  std::vector<int32_t> tokens;
  const char* digest;  // 16 hex digits
};

const std::vector<GoldenPrompt>& GoldenPrompts();

// The digests `engine` (loaded with the golden model) gives for GoldenPrompts(), in order.
Result<std::vector<std::string>> GoldenDigests(Engine& engine);

}  // namespace trace::engine
