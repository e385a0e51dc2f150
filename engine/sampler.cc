// The sampler of docs/numerics.md ("Sampling"): temperature, softmax with the engine Exp,
// candidates ordered by (scaled logit desc, id asc), top-k (ties at the cut kept) then
// top-p, one Philox4x32-10 uniform keyed by (seed, step), and a walk of the cumulative sum
// in candidate order.
#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>

#include "kernels/canonical.h"
#include "kernels/kernels.h"

namespace trace::engine {
namespace {

// Whether the mask lets `id` be drawn: an empty mask allows every id, and an id past the
// mask's end (a tokenizer's mask inside a model's padded vocabulary) is not allowed.
bool IsAllowed(std::span<const uint8_t> allowed, size_t id) {
  return allowed.empty() || (id < allowed.size() && allowed[id] != 0);
}

std::string FloatText(float v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.9g", static_cast<double>(v));
  return buf;
}

// A candidate: its scaled logit z = logit / temperature, its unnormalised probability
// Exp(z - max z) and its id.
struct Candidate {
  float z;
  float p;
  int32_t id;
};

// Highest logit among `ids` other than `exclude`, lowest id on ties; -1 if none.
int32_t BestLogit(std::span<const float> logits, const std::vector<int32_t>& ids, int32_t exclude) {
  int32_t best = -1;
  for (int32_t id : ids) {
    if (id == exclude) continue;
    if (best < 0 || logits[id] > logits[best]) best = id;
  }
  return best;
}

struct Distribution {
  std::vector<float> z;  // logit / temperature, per eligible id (id order)
  std::vector<float> p;  // Exp(z - max), per eligible id (id order)
  float max_z = 0.0f;
  float sum = 0.0f;  // CanonicalSum(p) in id order: the softmax denominator
};

Distribution Softmax(std::span<const float> logits, const std::vector<int32_t>& ids,
                     float temperature) {
  Distribution d;
  d.z.resize(ids.size());
  d.p.resize(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) d.z[i] = logits[ids[i]] / temperature;
  d.max_z =
      d.z.empty() ? 0.0f : kernels::canonical::Max(d.z.data(), static_cast<int64_t>(d.z.size()));
  if (std::isinf(d.max_z)) {
    // z = +inf (an infinite logit, or a finite one over a tiny temperature) takes all the
    // mass, shared equally by every such token.
    for (size_t i = 0; i < ids.size(); ++i) d.p[i] = d.z[i] == d.max_z ? 1.0f : 0.0f;
  } else {
    for (size_t i = 0; i < ids.size(); ++i) d.p[i] = d.z[i] - d.max_z;
    kernels::ExpArray(kernels::KernelContext{}, d.p.data(), static_cast<int64_t>(d.p.size()),
                      d.p.data());
  }
  d.sum = kernels::CanonicalSum(d.p.data(), static_cast<int64_t>(d.p.size()));
  return d;
}

// An unsigned key that orders like the float (z is never NaN here); -0 and +0 map to the
// same key because they compare equal.
uint32_t OrderedBits(float z) {
  const float normalised = z + 0.0f;  // -0 + +0 = +0 under round to nearest
  uint32_t bits;
  std::memcpy(&bits, &normalised, 4);
  return (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
}

// Sorts by (z desc, id asc): LSD radix sort of 64-bit keys ~OrderedBits(z) << 32 | index,
// 8 bits per pass (256 buckets stay in L1), skipping passes whose digit is the same for
// every key. `index` is the candidate's position in the id-ascending input, so it orders
// like the id.
void RadixSortCandidates(std::vector<Candidate>* candidates) {
  const size_t n = candidates->size();
  std::vector<uint64_t> keys(n), scratch(n);
  for (size_t i = 0; i < n; ++i) {
    keys[i] = (static_cast<uint64_t>(~OrderedBits((*candidates)[i].z)) << 32) | i;
  }
  std::vector<size_t> count(1u << 8);
  for (int shift = 0; shift < 64; shift += 8) {
    std::fill(count.begin(), count.end(), 0);
    for (uint64_t key : keys) ++count[(key >> shift) & 0xff];
    if (n == 0 || count[(keys[0] >> shift) & 0xff] == n) continue;  // one digit: no-op
    size_t total = 0;
    for (auto& c : count) {
      const size_t here = c;
      c = total;
      total += here;
    }
    for (uint64_t key : keys) scratch[count[(key >> shift) & 0xff]++] = key;
    keys.swap(scratch);
  }
  std::vector<Candidate> sorted(n);
  for (size_t i = 0; i < n; ++i) sorted[i] = (*candidates)[static_cast<uint32_t>(keys[i])];
  candidates->swap(sorted);
}

// Sorted candidates after the top-k and top-p cuts, with their running cumulative sums.
struct Cut {
  std::vector<Candidate> kept;
  std::vector<float> cumulative;  // cumulative[i] = cumulative[i-1] + kept[i].p
};

Cut CutCandidates(const std::vector<int32_t>& ids, const Distribution& d,
                  const SamplingParams& params) {
  Cut cut;
  cut.kept.resize(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) cut.kept[i] = {d.z[i], d.p[i], ids[i]};
  auto order = [](const Candidate& a, const Candidate& b) {
    return a.z > b.z || (a.z == b.z && a.id < b.id);
  };
  const size_t n = ids.size();
  const size_t k = params.top_k > 0 ? std::min<size_t>(params.top_k, n) : n;
  // The order is total (ids are distinct), so every sorting method gives the same sequence:
  // a heap for a small top-k, a radix sort of the whole vocabulary otherwise. top-k keeps
  // every candidate whose z equals the k-th one's (Hugging Face's TopKLogitsWarper keeps all
  // scores >= the k-th largest), so a tie at the cut extends the kept set past k.
  if (k < n && k <= n / 16) {
    std::partial_sort(cut.kept.begin(), cut.kept.begin() + k, cut.kept.end(), order);
    const float kth = cut.kept[k - 1].z;
    // The tail is unordered; its ties with the k-th come after it, in id order.
    auto tail_end = std::partition(cut.kept.begin() + k, cut.kept.end(),
                                   [kth](const Candidate& c) { return c.z == kth; });
    std::sort(cut.kept.begin() + k, tail_end, order);
    cut.kept.erase(tail_end, cut.kept.end());
  } else {
    RadixSortCandidates(&cut.kept);
    size_t keep = k;
    while (keep > 0 && keep < n && cut.kept[keep].z == cut.kept[keep - 1].z) ++keep;
    cut.kept.resize(keep);
  }
  cut.cumulative.resize(cut.kept.size());
  float running = 0.0f;
  for (size_t i = 0; i < cut.kept.size(); ++i) {
    running = running + cut.kept[i].p;
    cut.cumulative[i] = running;
  }
  if (params.top_p < 1.0f && !cut.kept.empty()) {
    // Keep the shortest prefix whose mass reaches top_p of the mass left after top-k.
    const float threshold = params.top_p * cut.cumulative.back();
    size_t keep = cut.kept.size();
    for (size_t i = 0; i < cut.kept.size(); ++i) {
      if (cut.cumulative[i] >= threshold) {
        keep = i + 1;
        break;
      }
    }
    cut.kept.resize(keep);
    cut.cumulative.resize(keep);
  }
  return cut;
}

}  // namespace

std::vector<int32_t> EligibleIds(std::span<const float> logits, std::span<const uint8_t> allowed) {
  std::vector<int32_t> ids;
  ids.reserve(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) {
    if (IsAllowed(allowed, i) && !std::isnan(logits[i]) && logits[i] != -INFINITY) {
      ids.push_back(static_cast<int32_t>(i));
    }
  }
  return ids;
}

Status ValidateSamplingParams(const SamplingParams& params) {
  if (!(params.temperature >= 0.0f) || std::isinf(params.temperature)) {
    return InvalidArgument("sampling param temperature must be a finite number >= 0 (got " +
                           FloatText(params.temperature) + ")");
  }
  if (!(params.top_p > 0.0f && params.top_p <= 1.0f)) {
    return InvalidArgument("sampling param top_p must be in (0, 1] (got " +
                           FloatText(params.top_p) + ")");
  }
  if (params.top_k < 0) {
    return InvalidArgument("sampling param top_k must be >= 0 (got " +
                           std::to_string(params.top_k) + ")");
  }
  if (params.max_tokens < 0) {
    return InvalidArgument("sampling param max_tokens must be >= 0 (got " +
                           std::to_string(params.max_tokens) + ")");
  }
  for (size_t i = 0; i < params.stop.size(); ++i) {
    if (params.stop[i].empty()) {
      return InvalidArgument("sampling param stop[" + std::to_string(i) + "] is empty");
    }
  }
  auto penalty_ok = [](float v) { return v >= -2.0f && v <= 2.0f; };  // false for NaN
  if (!penalty_ok(params.frequency_penalty)) {
    return InvalidArgument("sampling param frequency_penalty must be in [-2, 2] (got " +
                           FloatText(params.frequency_penalty) + ")");
  }
  if (!penalty_ok(params.presence_penalty)) {
    return InvalidArgument("sampling param presence_penalty must be in [-2, 2] (got " +
                           FloatText(params.presence_penalty) + ")");
  }
  for (size_t i = 0; i < params.logit_bias.size(); ++i) {
    const auto& [id, bias] = params.logit_bias[i];
    if (id < 0) {
      return InvalidArgument("sampling param logit_bias token id must be >= 0 (got " +
                             std::to_string(id) + ")");
    }
    if (i > 0 && id <= params.logit_bias[i - 1].first) {
      return InvalidArgument("sampling param logit_bias ids must be ascending and unique (" +
                             std::to_string(id) + " after " +
                             std::to_string(params.logit_bias[i - 1].first) + ")");
    }
    if (!(bias >= -100.0f && bias <= 100.0f)) {
      return InvalidArgument("sampling param logit_bias[" + std::to_string(id) +
                             "] must be in [-100, 100] (got " + FloatText(bias) + ")");
    }
  }
  return Status::Ok();
}

std::array<uint32_t, 4> Philox4x32_10(std::array<uint32_t, 4> counter,
                                      std::array<uint32_t, 2> key) {
  constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
  constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      key[0] += kWeyl0;
      key[1] += kWeyl1;
    }
    const uint64_t p0 = static_cast<uint64_t>(kMul0) * counter[0];
    const uint64_t p1 = static_cast<uint64_t>(kMul1) * counter[2];
    const uint32_t hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
    const uint32_t hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
    counter = {hi1 ^ counter[1] ^ key[0], lo1, hi0 ^ counter[3] ^ key[1], lo0};
  }
  return counter;
}

float PhiloxUniform(uint64_t seed, uint64_t step) {
  const auto out =
      Philox4x32_10({static_cast<uint32_t>(step), static_cast<uint32_t>(step >> 32), 0u, 0u},
                    {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)});
  // The top 24 bits: an exact float in [0, 1 - 2^-24].
  return static_cast<float>(out[0] >> 8) * 0x1p-24f;
}

std::vector<float> AdjustedLogits(std::span<const float> logits, const SamplingParams& params,
                                  std::span<const int32_t> generated) {
  std::vector<float> adjusted(logits.begin(), logits.end());
  const size_t n = adjusted.size();
  // Step 0 of docs/numerics.md "Sampling", in float32: bias first, then the frequency
  // penalty (multiplied by the count converted to float), then the presence penalty.
  for (const auto& [id, bias] : params.logit_bias) {
    if (static_cast<size_t>(id) < n) adjusted[id] = adjusted[id] + bias;
  }
  if (params.frequency_penalty != 0.0f || params.presence_penalty != 0.0f) {
    // Counted by sorting the (short) history rather than a vocabulary-sized table; each
    // token is adjusted once, so the order among tokens does not matter.
    std::vector<int32_t> sorted(generated.begin(), generated.end());
    std::sort(sorted.begin(), sorted.end());
    for (size_t i = 0; i < sorted.size();) {
      size_t j = i;
      while (j < sorted.size() && sorted[j] == sorted[i]) ++j;
      const int32_t t = sorted[i];
      const int64_t count = static_cast<int64_t>(j - i);
      i = j;
      if (t < 0 || static_cast<size_t>(t) >= n) continue;
      float v = adjusted[t];
      v = v - params.frequency_penalty * static_cast<float>(count);
      v = v - params.presence_penalty;
      adjusted[t] = v;
    }
  }
  return adjusted;
}

namespace {

// The logits a draw reads. Without penalties or bias the caller's, read in place (no copy),
// so the arithmetic is exactly that of the sampler before penalties existed; else
// AdjustedLogits, held in `storage`.
std::span<const float> DrawLogits(std::span<const float> raw_logits, const SamplingParams& params,
                                  std::span<const int32_t> generated, std::vector<float>& storage) {
  if (!params.AdjustsLogits()) return raw_logits;
  storage = AdjustedLogits(raw_logits, params, generated);
  return storage;
}

}  // namespace

std::vector<int32_t> SamplingCandidates(std::span<const float> raw_logits,
                                        const SamplingParams& params,
                                        std::span<const uint8_t> allowed,
                                        std::span<const int32_t> generated) {
  std::vector<float> adjusted;
  const std::span<const float> logits = DrawLogits(raw_logits, params, generated, adjusted);
  const std::vector<int32_t> ids = EligibleIds(raw_logits, allowed);  // as Sample
  if (ids.empty()) return {};
  if (params.temperature == 0.0f) return {BestLogit(logits, ids, -1)};
  const Distribution d = Softmax(logits, ids, params.temperature);
  const Cut cut = CutCandidates(ids, d, params);
  std::vector<int32_t> out;
  out.reserve(cut.kept.size());
  for (const auto& c : cut.kept) out.push_back(c.id);
  return out;
}

SampleResult Sample(std::span<const float> raw_logits, const SamplingParams& params, uint64_t seed,
                    uint64_t step, std::span<const uint8_t> allowed,
                    std::span<const int32_t> generated) {
  SampleResult result;
  std::vector<float> adjusted;
  const std::span<const float> logits = DrawLogits(raw_logits, params, generated, adjusted);
  // Eligibility is decided on the raw logits (a finite bias or penalty cannot make a finite
  // logit NaN or -inf, nor an excluded one eligible), which MarginOver and the replayer's
  // skip path rely on.
  const std::vector<int32_t> ids = EligibleIds(raw_logits, allowed);
  if (ids.empty()) return result;
  const bool greedy = params.temperature == 0.0f;
  // Greedy reports the log-probability of the model's own distribution (temperature 1).
  const Distribution d = Softmax(logits, ids, greedy ? 1.0f : params.temperature);
  if (greedy) {
    result.token = BestLogit(logits, ids, -1);
  } else {
    const Cut cut = CutCandidates(ids, d, params);
    const float target = PhiloxUniform(seed, step) * cut.cumulative.back();
    // The first candidate whose cumulative sum exceeds the target; when rounding leaves
    // none, the last candidate with a non-zero probability.
    size_t chosen = cut.kept.size();
    for (size_t i = 0; i < cut.kept.size(); ++i) {
      if (target < cut.cumulative[i]) {
        chosen = i;
        break;
      }
    }
    if (chosen == cut.kept.size()) {
      chosen = cut.kept.size() - 1;
      while (chosen > 0 && cut.kept[chosen].p == 0.0f) --chosen;
    }
    result.token = cut.kept[chosen].id;
  }
  const size_t index =
      static_cast<size_t>(std::lower_bound(ids.begin(), ids.end(), result.token) - ids.begin());
  result.logit = raw_logits[result.token];
  const double shifted = std::isinf(d.max_z) ? std::log(static_cast<double>(d.p[index]))
                                             : static_cast<double>(d.z[index] - d.max_z);
  result.logprob = static_cast<float>(shifted - std::log(static_cast<double>(d.sum)));
  result.runner_up = BestLogit(raw_logits, ids, result.token);
  if (result.runner_up >= 0) result.runner_up_logit = raw_logits[result.runner_up];
  return result;
}

}  // namespace trace::engine
