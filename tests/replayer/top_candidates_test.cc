// TopCandidates, the replayed call's top tokens that a divergence report shows: the same ids
// the sampler could draw, whatever the mask and the logits hold.
#include <gtest/gtest.h>

#include <cmath>
#include <span>
#include <vector>

#include "replayer/verifier.h"

namespace trace::replayer {
namespace {

std::vector<int32_t> Ids(const std::vector<Candidate>& candidates) {
  std::vector<int32_t> ids;
  for (const auto& c : candidates) ids.push_back(c.id);
  return ids;
}

// A tokenizer's mask is shorter than the model's padded vocabulary: the ids past its end
// are not candidates (the sampler never draws them), and the mask is never read past its
// end. Here the bytes past the span are 1, so reading them would let id 8 in. (Found by
// ASan: `trace replay` of a diverged MoE call read 267 bytes past a 151,669-entry mask.)
TEST(TopCandidates, AMaskShorterThanTheLogitsAllowsNothingPastItsEnd) {
  const std::vector<float> logits = {0.5f, 1.0f, 0.25f, 2.0f, 0.0f, 1.5f, 9.0f, 8.0f, 7.0f, 6.0f};
  const std::vector<uint8_t> backing(10, 1);
  const std::span<const uint8_t> mask(backing.data(), 6);
  engine::SamplingParams params;
  params.temperature = 1.0f;
  const auto top = TopCandidates(logits, params, mask, 3);
  EXPECT_EQ(Ids(top), (std::vector<int32_t>{3, 5, 1}));
  double sum = 0.0;
  for (float l : {0.5f, 1.0f, 0.25f, 2.0f, 0.0f, 1.5f}) sum += std::exp(l - 2.0);
  ASSERT_EQ(top.size(), 3u);
  EXPECT_NEAR(top[0].probability, 1.0 / sum, 1e-12);
}

// NaN would break the sort's ordering, and -inf is never drawn: neither is a candidate.
TEST(TopCandidates, NanAndMinusInfinityAreNeverCandidates) {
  const std::vector<float> logits = {NAN, 1.0f, -INFINITY, 3.0f, NAN, 2.0f};
  engine::SamplingParams params;
  params.temperature = 0.0f;
  EXPECT_EQ(Ids(TopCandidates(logits, params, {}, 10)), (std::vector<int32_t>{3, 5, 1}));
}

}  // namespace
}  // namespace trace::replayer
