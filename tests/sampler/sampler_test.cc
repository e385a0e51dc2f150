// The sampler (docs/numerics.md, "Sampling"): Philox4x32-10 known answers, sampled
// frequencies against the softmax (chi-square), exact top-k/top-p candidate sets, the
// greedy tie rule, the top-k tie rule and ranking of Hugging Face's warpers (checked against
// an independent float64 re-implementation of them), seeds, the allowed mask and parameter
// errors.
#include "engine/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "kernels/kernels.h"

namespace trace::engine {
namespace {

// Filled in from the first run of SamplerGolden.PinnedDrawsOfThisContractVersion.
const std::string kGoldenDraws =
    "36 58 47 47 14 14 14 25 36 14 36 14 25 14 14 47 58 3 47 14 25 25 58 14 ";

TEST(SamplerPhilox, Random123KnownAnswers) {
  // Random123 tests/kat_vectors, philox4x32 10 rounds.
  EXPECT_EQ(Philox4x32_10({0, 0, 0, 0}, {0, 0}),
            (std::array<uint32_t, 4>{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
  EXPECT_EQ(
      Philox4x32_10({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff}),
      (std::array<uint32_t, 4>{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}));
  EXPECT_EQ(
      Philox4x32_10({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0}),
      (std::array<uint32_t, 4>{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}));
}

TEST(SamplerPhilox, UniformIsTopBitsOfWordZero) {
  for (uint64_t seed : {0ull, 1ull, 0x123456789abcdefull}) {
    for (uint64_t step : {0ull, 7ull, 0xffffffff1ull}) {
      const auto out =
          Philox4x32_10({static_cast<uint32_t>(step), static_cast<uint32_t>(step >> 32), 0, 0},
                        {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)});
      const float u = PhiloxUniform(seed, step);
      EXPECT_EQ(u, static_cast<float>(out[0] >> 8) / 16777216.0f);
      EXPECT_GE(u, 0.0f);
      EXPECT_LT(u, 1.0f);
    }
  }
}

std::vector<double> SoftmaxDouble(const std::vector<float>& logits, double temperature) {
  std::vector<double> p(logits.size());
  double mx = -INFINITY, sum = 0;
  for (float l : logits) mx = std::max(mx, l / temperature);
  for (size_t i = 0; i < p.size(); ++i) sum += (p[i] = std::exp(logits[i] / temperature - mx));
  for (auto& x : p) x /= sum;
  return p;
}

// Pearson chi-square statistic of `counts` against probabilities `p` (n draws).
double ChiSquare(const std::vector<int>& counts, const std::vector<double>& p, int n) {
  double chi = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i] == 0) continue;
    const double expect = p[i] * n;
    chi += (counts[i] - expect) * (counts[i] - expect) / expect;
  }
  return chi;
}

// Chi-square critical values at significance 0.001, by degrees of freedom.
const std::map<int, double> kChiSquareCritical001 = {{1, 10.828}, {2, 13.816}, {3, 16.266},
                                                     {4, 18.467}, {5, 20.515}, {7, 24.322}};

TEST(SamplerDistribution, FrequenciesMatchSoftmaxChiSquare) {
  // 8 tokens, 100000 draws (steps 0..99999, seed 42) per temperature; reject at
  // significance 0.001 (df = 7, critical 24.322). The seed is fixed, so the outcome is
  // deterministic; a correct sampler fails with probability 0.001 per temperature for a
  // random seed.
  const std::vector<float> logits = {1.0f, 2.0f, 0.5f, -1.0f, 3.0f, 2.0f, 0.0f, -0.5f};
  const int n = 100000;
  for (float temperature : {0.5f, 1.0f, 2.0f}) {
    SamplingParams params;
    params.temperature = temperature;
    std::vector<int> counts(logits.size());
    for (int step = 0; step < n; ++step) counts[Sample(logits, params, 42, step).token]++;
    const auto p = SoftmaxDouble(logits, temperature);
    const double chi = ChiSquare(counts, p, n);
    std::printf("temperature %.1f: chi-square %.2f (df 7, critical 24.32 at 0.001)\n", temperature,
                chi);
    EXPECT_LT(chi, kChiSquareCritical001.at(7)) << "temperature " << temperature;
    // The test has power: the same counts are rejected against a 10% different temperature.
    EXPECT_GT(ChiSquare(counts, SoftmaxDouble(logits, temperature * 1.1), n),
              kChiSquareCritical001.at(7));
  }
}

TEST(SamplerDistribution, TopKTopPRenormaliseChiSquare) {
  const std::vector<float> logits = {1.0f, 2.0f, 0.5f, -1.0f, 3.0f, 2.0f, 0.0f, -0.5f};
  const int n = 50000;
  SamplingParams params;
  params.top_k = 4;  // keeps ids 4, 1, 5, 0 (z desc, id asc on the 1/5 tie)
  std::vector<int> counts(logits.size());
  for (int step = 0; step < n; ++step) counts[Sample(logits, params, 7, step).token]++;
  std::vector<double> p = SoftmaxDouble(logits, 1.0);
  double kept = 0;
  for (int i : {4, 1, 5, 0}) kept += p[i];
  for (int i = 0; i < 8; ++i) p[i] = (i == 4 || i == 1 || i == 5 || i == 0) ? p[i] / kept : 0;
  for (int i : {2, 3, 6, 7}) EXPECT_EQ(counts[i], 0) << i;
  EXPECT_LT(ChiSquare(counts, p, n), kChiSquareCritical001.at(3));
}

std::vector<float> LogProbs(const std::vector<double>& p) {
  std::vector<float> l;
  for (double x : p) l.push_back(static_cast<float>(std::log(x)));
  return l;
}

TEST(SamplerCandidates, ExactTopKTopPSets) {
  // Probabilities 0.1, 0.4, 0.2, 0.3 (ids 0..3) -> order 1, 3, 2, 0.
  const auto logits = LogProbs({0.1, 0.4, 0.2, 0.3});
  SamplingParams params;
  EXPECT_EQ(SamplingCandidates(logits, params), (std::vector<int32_t>{1, 3, 2, 0}));
  params.top_k = 2;
  EXPECT_EQ(SamplingCandidates(logits, params), (std::vector<int32_t>{1, 3}));
  params.top_k = 10;
  EXPECT_EQ(SamplingCandidates(logits, params), (std::vector<int32_t>{1, 3, 2, 0}));
  params.top_k = 0;
  params.top_p = 0.35f;  // 0.4 >= 0.35
  EXPECT_EQ(SamplingCandidates(logits, params), (std::vector<int32_t>{1}));
  params.top_p = 0.65f;  // 0.4 < 0.65 <= 0.7
  EXPECT_EQ(SamplingCandidates(logits, params), (std::vector<int32_t>{1, 3}));
  params.top_p = 0.85f;  // 0.7 < 0.85 <= 0.9
  EXPECT_EQ(SamplingCandidates(logits, params), (std::vector<int32_t>{1, 3, 2}));
  // top-k first, then top-p of the mass that is left: 0.4 / 0.7 = 0.571 < 0.6.
  params.top_k = 2;
  params.top_p = 0.6f;
  EXPECT_EQ(SamplingCandidates(logits, params), (std::vector<int32_t>{1, 3}));
  params.top_p = 0.5f;
  EXPECT_EQ(SamplingCandidates(logits, params), (std::vector<int32_t>{1}));
  // Draws only ever come from the candidate set, and every candidate is drawn.
  params.top_k = 0;
  params.top_p = 0.85f;
  std::set<int32_t> drawn;
  for (int step = 0; step < 2000; ++step) drawn.insert(Sample(logits, params, 3, step).token);
  EXPECT_EQ(drawn, (std::set<int32_t>{1, 2, 3}));
}

TEST(SamplerCandidates, TiesOrderedByLowestIdAndKeptAtTheTopKCut) {
  const std::vector<float> logits = {0.0f, 1.0f, 1.0f, 0.0f, 1.0f};
  SamplingParams params;
  params.top_k = 1;  // all three ties with the first candidate stay (Hugging Face's rule)
  EXPECT_EQ(SamplingCandidates(logits, params), (std::vector<int32_t>{1, 2, 4}));
  params.top_k = 3;  // no tie past the cut
  EXPECT_EQ(SamplingCandidates(logits, params), (std::vector<int32_t>{1, 2, 4}));
  params.top_k = 4;  // the 4th (id 0, z 0) ties with id 3
  EXPECT_EQ(SamplingCandidates(logits, params), (std::vector<int32_t>{1, 2, 4, 0, 3}));
  // Draws reach every tied candidate, none outside.
  params.top_k = 1;
  std::set<int32_t> drawn;
  for (int step = 0; step < 300; ++step) drawn.insert(Sample(logits, params, 5, step).token);
  EXPECT_EQ(drawn, (std::set<int32_t>{1, 2, 4}));
}

TEST(SamplerCandidates, ExtremeTemperatureRanksByScaledLogit) {
  // At temperature 1e8 every Exp(z - max) rounds to 1.0f: equal probabilities. The ranking
  // follows z = logit / temperature (distinct floats here), as Hugging Face's does, not the id.
  const std::vector<float> logits = {0.0f, 1.0f, 2.0f, 3.0f};
  SamplingParams params;
  params.temperature = 1e8f;
  EXPECT_EQ(SamplingCandidates(logits, params), (std::vector<int32_t>{3, 2, 1, 0}));
  params.top_k = 2;
  EXPECT_EQ(SamplingCandidates(logits, params), (std::vector<int32_t>{3, 2}));
  params.top_k = 0;
  params.top_p = 0.5f;  // four equal masses: two reach half
  EXPECT_EQ(SamplingCandidates(logits, params), (std::vector<int32_t>{3, 2}));
}

TEST(SamplerCandidates, SignedZeroScaledLogitsTie) {
  // -0 and +0 compare equal, so they tie and order by id (both sorting paths).
  const std::vector<float> logits = {-0.0f, 0.0f, -0.0f, -1.0f};
  SamplingParams params;
  EXPECT_EQ(SamplingCandidates(logits, params), (std::vector<int32_t>{0, 1, 2, 3}));
  params.top_k = 1;
  EXPECT_EQ(SamplingCandidates(logits, params), (std::vector<int32_t>{0, 1, 2}));
}

// Hugging Face's TopKLogitsWarper then TopPLogitsWarper, re-implemented independently in
// float64 from their documented rules: top-k removes scores < the k-th largest; top-p sorts
// ascending, takes the softmax's cumulative sum and removes entries whose sum is
// <= 1 - top_p, keeping at least one. Returns the kept ids as a set, and whether some
// cumulative sum lies within `tolerance` of the top-p boundary (where float32 and float64
// may legitimately disagree). Which members of a tie group straddling the top-p boundary
// stay is not defined by Hugging Face (torch.sort is not stable by default); this one keeps
// the highest ids (a stable ascending sort), the contract the lowest.
std::set<int32_t> HuggingFaceKeptSet(const std::vector<float>& logits, float temperature, int top_k,
                                     float top_p, double tolerance, bool* borderline) {
  const size_t n = logits.size();
  std::vector<float> z(n);
  for (size_t i = 0; i < n; ++i) z[i] = logits[i] / temperature;  // the same float divide
  std::vector<bool> kept(n, true);
  if (top_k > 0 && static_cast<size_t>(top_k) < n) {
    std::vector<float> sorted = z;
    std::sort(sorted.begin(), sorted.end(), std::greater<float>());
    const float kth = sorted[top_k - 1];
    for (size_t i = 0; i < n; ++i) kept[i] = z[i] >= kth;
  }
  *borderline = false;
  if (top_p < 1.0f) {
    std::vector<size_t> order;
    double mx = -INFINITY;
    for (size_t i = 0; i < n; ++i) {
      if (kept[i]) {
        order.push_back(i);
        mx = std::max(mx, static_cast<double>(z[i]));
      }
    }
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return z[a] < z[b]; });
    double sum = 0;
    for (size_t i : order) sum += std::exp(static_cast<double>(z[i]) - mx);
    double cumulative = 0;
    for (size_t j = 0; j + 1 < order.size(); ++j) {  // the last (largest) always stays
      cumulative += std::exp(static_cast<double>(z[order[j]]) - mx) / sum;
      if (std::fabs(cumulative - (1.0 - top_p)) < tolerance) *borderline = true;
      if (cumulative <= 1.0 - top_p) kept[order[j]] = false;
    }
  }
  std::set<int32_t> ids;
  for (size_t i = 0; i < n; ++i) {
    if (kept[i]) ids.insert(static_cast<int32_t>(i));
  }
  return ids;
}

TEST(SamplerCandidates, KeptSetsMatchHuggingFaceWarpers) {
  // Logits on a coarse grid (many exact ties), random top-k / top-p / temperature. The
  // top-k set must equal Hugging Face's exactly (it only compares z values); with top-p the
  // kept scaled logits (as a multiset: which ids of a tie group straddling the boundary
  // stay is Hugging Face's sort's choice) must agree, except where a cumulative sum is
  // within 1e-5 of the boundary.
  std::mt19937 rng(2024);
  int compared = 0, borderline_skipped = 0;
  for (int trial = 0; trial < 400; ++trial) {
    const int n = std::uniform_int_distribution<int>(2, 300)(rng);
    const int levels = std::uniform_int_distribution<int>(2, 40)(rng);
    std::vector<float> logits(n);
    for (auto& l : logits)
      l = static_cast<float>(std::uniform_int_distribution<int>(0, levels)(rng)) * 0.25f - 3.0f;
    SamplingParams params;
    params.temperature = std::array<float, 4>{0.3f, 0.7f, 1.0f, 1.9f}[trial % 4];
    params.top_k = std::uniform_int_distribution<int>(0, n + 2)(rng);
    params.top_p = trial % 3 == 0 ? 1.0f : std::uniform_real_distribution<float>(0.05f, 1.0f)(rng);
    bool borderline = false;
    const std::set<int32_t> expect = HuggingFaceKeptSet(logits, params.temperature, params.top_k,
                                                        params.top_p, 1e-5, &borderline);
    if (borderline) {
      ++borderline_skipped;
      continue;
    }
    const std::vector<int32_t> got = SamplingCandidates(logits, params);
    if (params.top_p == 1.0f) {
      EXPECT_EQ(std::set<int32_t>(got.begin(), got.end()), expect)
          << "trial " << trial << " n " << n << " top_k " << params.top_k;
    } else {
      auto scaled = [&](auto ids) {
        std::vector<float> z;
        for (int32_t id : ids) z.push_back(logits[id] / params.temperature);
        std::sort(z.begin(), z.end());
        return z;
      };
      EXPECT_EQ(scaled(got), scaled(expect)) << "trial " << trial << " n " << n << " top_k "
                                             << params.top_k << " top_p " << params.top_p;
    }
    ++compared;
  }
  EXPECT_GT(compared, 350);
  std::printf("compared %d kept sets with Hugging Face's rules (%d borderline skipped)\n", compared,
              borderline_skipped);
}

// The pinned draws' fixed logits (with ties) and parameters.
std::vector<float> GoldenLogits() {
  std::vector<float> logits(64);
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = static_cast<float>((i * 7) % 11) * 0.5f;
  return logits;
}

SamplingParams GoldenParams() {
  SamplingParams params;
  params.temperature = 0.9f;
  params.top_k = 5;
  params.top_p = 0.9f;
  return params;
}

TEST(SamplerGolden, PinnedDrawsOfThisContractVersion) {
  // Draws on fixed logits with ties, computed once by this code under canonical-v2 and
  // pinned: a change means the sampler's contract changed (bump kNumericsVersion, re-pin).
  ASSERT_STREQ(kernels::kNumericsVersion, "canonical-v2");
  const std::vector<float> logits = GoldenLogits();
  SamplingParams params = GoldenParams();
  std::string drawn;
  for (uint64_t step = 0; step < 24; ++step) {
    drawn += std::to_string(Sample(logits, params, 42, step).token) + " ";
  }
  std::printf("golden draws: %s\n", drawn.c_str());
  EXPECT_EQ(drawn, kGoldenDraws);
}

TEST(SamplerGreedy, ArgmaxLowestIdOnTies) {
  const std::vector<float> logits = {0.5f, 2.0f, -1.0f, 2.0f, 1.5f};
  SamplingParams params;
  params.temperature = 0.0f;
  for (uint64_t seed : {0ull, 1ull, 99ull}) {
    const SampleResult r = Sample(logits, params, seed, 0);
    EXPECT_EQ(r.token, 1);
    EXPECT_EQ(r.logit, 2.0f);
    EXPECT_EQ(r.runner_up, 3);
    EXPECT_EQ(r.runner_up_logit, 2.0f);
  }
  // Log-probability of the model's distribution (temperature 1).
  const auto p = SoftmaxDouble(logits, 1.0);
  EXPECT_NEAR(Sample(logits, params, 0, 0).logprob, std::log(p[1]), 1e-6);
}

TEST(SamplerSeeds, SameSeedSameTokensDifferentSeedDifferentDraws) {
  std::vector<float> logits(50);
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = std::sin(static_cast<float>(i));
  SamplingParams params;
  params.temperature = 1.5f;
  std::vector<int32_t> a, b, c;
  for (int step = 0; step < 200; ++step) {
    a.push_back(Sample(logits, params, 1234, step).token);
    b.push_back(Sample(logits, params, 1234, step).token);
    c.push_back(Sample(logits, params, 1235, step).token);
  }
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  int same = 0;
  for (size_t i = 0; i < a.size(); ++i) same += a[i] == c[i];
  EXPECT_LT(same, 100);  // independent draws from ~50 tokens agree rarely
  // A draw depends on (seed, step) only: replaying step 17 alone gives the same token.
  EXPECT_EQ(Sample(logits, params, 1234, 17).token, a[17]);
}

TEST(SamplerMask, AllowedMaskRestrictsDrawsAndSoftmax) {
  const std::vector<float> logits = {5.0f, 1.0f, 0.0f, 4.0f};
  const std::vector<uint8_t> allowed = {0, 1, 1, 0};
  SamplingParams params;
  std::vector<int> counts(4);
  const int n = 20000;
  for (int step = 0; step < n; ++step) counts[Sample(logits, params, 5, step, allowed).token]++;
  EXPECT_EQ(counts[0], 0);
  EXPECT_EQ(counts[3], 0);
  // Renormalised over the allowed tokens only: p(1) = e / (e + 1).
  const double p1 = std::exp(1.0) / (std::exp(1.0) + 1.0);
  EXPECT_LT(ChiSquare({counts[1], counts[2]}, {p1, 1 - p1}, n), kChiSquareCritical001.at(1));
  const SampleResult r = Sample(logits, params, 5, 0, allowed);
  EXPECT_NEAR(r.logprob, r.token == 1 ? std::log(p1) : std::log(1 - p1), 1e-6);
  params.temperature = 0.0f;
  EXPECT_EQ(Sample(logits, params, 5, 0, allowed).token, 1);
  EXPECT_EQ(Sample(logits, params, 5, 0, std::vector<uint8_t>{0, 0, 0, 0}).token, -1);
}

TEST(SamplerParams, InvalidParamsNameTheField) {
  SamplingParams ok;
  EXPECT_TRUE(ValidateSamplingParams(ok).ok());
  struct Case {
    SamplingParams params;
    std::string field;
  };
  std::vector<Case> cases;
  SamplingParams p;
  p.temperature = -0.1f;
  cases.push_back({p, "temperature"});
  p = {};
  p.temperature = NAN;
  cases.push_back({p, "temperature"});
  p = {};
  p.top_p = 0.0f;
  cases.push_back({p, "top_p"});
  p = {};
  p.top_p = 1.5f;
  cases.push_back({p, "top_p"});
  p = {};
  p.top_k = -1;
  cases.push_back({p, "top_k"});
  p = {};
  p.max_tokens = -5;
  cases.push_back({p, "max_tokens"});
  p = {};
  p.stop = {"ok", ""};
  cases.push_back({p, "stop[1]"});
  for (const auto& c : cases) {
    const Status st = ValidateSamplingParams(c.params);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << c.field;
    EXPECT_NE(st.message().find(c.field), std::string::npos) << st.message();
  }
  p = {};
  p.temperature = 0.0f;
  p.top_p = 1.0f;
  EXPECT_TRUE(ValidateSamplingParams(p).ok());
}

TEST(SamplerEdge, InfiniteAndNanLogits) {
  SamplingParams params;
  const std::vector<float> logits = {NAN, 1.0f, INFINITY, -INFINITY, INFINITY};
  std::set<int32_t> drawn;
  for (int step = 0; step < 200; ++step) drawn.insert(Sample(logits, params, 1, step).token);
  EXPECT_EQ(drawn, (std::set<int32_t>{2, 4}));
}

// ---- frequency_penalty, presence_penalty, logit_bias ---------------------------------

// The adjusted logits in float64, written from the OpenAI formula independently of the
// sampler: logit + bias - frequency * count - presence * (count > 0).
std::vector<double> AdjustedDouble(const std::vector<float>& logits, const SamplingParams& params,
                                   const std::vector<int32_t>& generated) {
  std::vector<double> out(logits.begin(), logits.end());
  std::vector<int> count(logits.size());
  for (int32_t t : generated) ++count[t];
  for (const auto& [id, bias] : params.logit_bias) {
    if (static_cast<size_t>(id) < out.size()) out[id] += bias;
  }
  for (size_t t = 0; t < out.size(); ++t) {
    out[t] -= static_cast<double>(params.frequency_penalty) * count[t] +
              (count[t] > 0 ? static_cast<double>(params.presence_penalty) : 0.0);
  }
  return out;
}

// The documented float32 order (docs/numerics.md, "Sampling", step 0), restated here.
std::vector<float> AdjustedFloatOrder(const std::vector<float>& logits,
                                      const SamplingParams& params,
                                      const std::vector<int32_t>& generated) {
  std::vector<float> out = logits;
  std::vector<int> count(logits.size());
  for (int32_t t : generated) ++count[t];
  for (const auto& [id, bias] : params.logit_bias) {
    if (static_cast<size_t>(id) < out.size()) out[id] = out[id] + bias;
  }
  for (size_t t = 0; t < out.size(); ++t) {
    if (count[t] == 0) continue;
    out[t] = out[t] - params.frequency_penalty * static_cast<float>(count[t]);
    out[t] = out[t] - params.presence_penalty;
  }
  return out;
}

// A fixed random case: 8 logits, 20 generated tokens with repeats, both penalties and a
// bias (one id past the vocabulary, which is ignored).
struct PenaltyCase {
  std::vector<float> logits;
  std::vector<int32_t> generated;
  SamplingParams params;
};

PenaltyCase MakePenaltyCase() {
  PenaltyCase c;
  std::mt19937 rng(20261202);
  std::normal_distribution<float> normal(0.0f, 1.5f);
  std::uniform_int_distribution<int32_t> id(0, 7);
  for (int i = 0; i < 8; ++i) c.logits.push_back(normal(rng));
  for (int i = 0; i < 20; ++i) c.generated.push_back(id(rng) % 4);  // ids 0..3 repeat
  c.params.temperature = 0.8f;
  c.params.frequency_penalty = 0.35f;
  c.params.presence_penalty = -0.6f;
  c.params.logit_bias = {{1, 1.75f}, {5, -3.0f}, {6, 2.5f}, {1000, 100.0f}};
  EXPECT_TRUE(ValidateSamplingParams(c.params).ok());
  return c;
}

TEST(SamplerPenalties, AdjustedDistributionMatchesFloat64Reference) {
  const PenaltyCase c = MakePenaltyCase();
  const std::vector<double> ref = AdjustedDouble(c.logits, c.params, c.generated);
  const std::vector<float> adjusted = AdjustedLogits(c.logits, c.params, c.generated);
  ASSERT_EQ(adjusted.size(), ref.size());
  // The float32 adjustment is the documented order, bit for bit, and within rounding of
  // the float64 formula.
  const std::vector<float> order = AdjustedFloatOrder(c.logits, c.params, c.generated);
  for (size_t t = 0; t < ref.size(); ++t) {
    EXPECT_EQ(std::memcmp(&adjusted[t], &order[t], sizeof(float)), 0) << "token " << t;
    EXPECT_NEAR(adjusted[t], ref[t], 1e-5) << "token " << t;
  }
  // Each draw is the plain sampler's draw on the adjusted logits, bitwise, while logprob is
  // relative to the float64 reference distribution (tolerance 1e-5 absolute).
  std::vector<float> ref_float(ref.begin(), ref.end());
  SamplingParams plain = c.params;
  plain.frequency_penalty = plain.presence_penalty = 0.0f;
  plain.logit_bias.clear();
  std::vector<double> p(ref.size());
  double mx = -INFINITY, sum = 0;
  for (double z : ref) mx = std::max(mx, z / c.params.temperature);
  for (size_t t = 0; t < p.size(); ++t)
    sum += (p[t] = std::exp(ref[t] / c.params.temperature - mx));
  for (auto& x : p) x /= sum;
  const int n = 100000;
  std::vector<int> counts(8);
  for (int step = 0; step < n; ++step) {
    const SampleResult r = Sample(c.logits, c.params, 42, step, {}, c.generated);
    const SampleResult plain_r = Sample(order, plain, 42, step);
    ASSERT_EQ(r.token, plain_r.token) << "step " << step;
    ASSERT_EQ(std::memcmp(&r.logprob, &plain_r.logprob, sizeof(float)), 0) << "step " << step;
    ASSERT_EQ(r.logit, c.logits[r.token]);  // the raw logit, not the adjusted one
    if (step < 1000) {
      ASSERT_NEAR(r.logprob, std::log(p[r.token]), 1e-5) << "step " << step;
    }
    ++counts[r.token];
  }
  // The frequencies follow the float64 reference distribution (df 7, significance 0.001).
  EXPECT_LT(ChiSquare(counts, p, n), kChiSquareCritical001.at(7));
  // The test has power: the unadjusted distribution is rejected.
  EXPECT_GT(ChiSquare(counts, SoftmaxDouble(c.logits, c.params.temperature), n),
            kChiSquareCritical001.at(7));
}

TEST(SamplerPenalties, ZeroPenaltiesAndNoBiasAreTheOldPathBitForBit) {
  // The golden draws, with a generated history that zero penalties must ignore.
  const std::vector<float> logits = GoldenLogits();
  SamplingParams params = GoldenParams();
  params.frequency_penalty = 0.0f;
  params.presence_penalty = -0.0f;
  ASSERT_FALSE(params.AdjustsLogits());
  const std::vector<int32_t> generated = {3, 3, 14, 36, 36, 36};
  std::string drawn;
  for (uint64_t step = 0; step < 24; ++step) {
    const SampleResult a = Sample(logits, params, 42, step, {}, generated);
    const SampleResult b = Sample(logits, params, 42, step);
    EXPECT_EQ(std::memcmp(&a.logprob, &b.logprob, sizeof(float)), 0);
    EXPECT_EQ(a.runner_up, b.runner_up);
    drawn += std::to_string(a.token) + " ";
  }
  EXPECT_EQ(drawn, kGoldenDraws);
}

TEST(SamplerPenalties, GreedyPicksTheAdjustedArgmax) {
  const std::vector<float> logits = {1.0f, 3.0f, 2.9f, 0.0f};
  SamplingParams params;
  params.temperature = 0.0f;
  EXPECT_EQ(Sample(logits, params, 0, 0, {}, std::vector<int32_t>{1}).token, 1);
  params.frequency_penalty = 0.2f;  // 3.0 - 0.2 = 2.8 < 2.9
  SampleResult r = Sample(logits, params, 0, 0, {}, std::vector<int32_t>{1});
  EXPECT_EQ(r.token, 2);
  EXPECT_EQ(r.logit, 2.9f);
  EXPECT_EQ(r.runner_up, 1);  // the highest raw logit among the others
  std::vector<float> adjusted = {1.0f, 3.0f - 0.2f, 2.9f, 0.0f};
  EXPECT_NEAR(r.logprob, std::log(SoftmaxDouble(adjusted, 1.0)[2]), 1e-6);
  // Presence counts a token once; frequency counts every occurrence.
  params.frequency_penalty = 0.0f;
  params.presence_penalty = 0.05f;
  EXPECT_EQ(Sample(logits, params, 0, 0, {}, std::vector<int32_t>{1, 1, 1}).token, 1);
  params.presence_penalty = 0.0f;
  params.frequency_penalty = 0.04f;
  EXPECT_EQ(Sample(logits, params, 0, 0, {}, std::vector<int32_t>{1, 1}).token, 1);
  EXPECT_EQ(Sample(logits, params, 0, 0, {}, std::vector<int32_t>{1, 1, 1}).token, 2);
  // A negative penalty favours repeats.
  params.frequency_penalty = -0.5f;
  EXPECT_EQ(Sample(logits, params, 0, 0, {}, std::vector<int32_t>{3, 3, 3, 3, 3, 3, 3}).token, 3);
}

TEST(SamplerPenalties, BiasOfMinus100RemovesTheArgmaxInGreedy) {
  const std::vector<float> logits = {0.0f, 5.0f, 4.5f};
  SamplingParams params;
  params.temperature = 0.0f;
  EXPECT_EQ(Sample(logits, params, 0, 0).token, 1);
  params.logit_bias = {{1, -100.0f}};
  EXPECT_EQ(Sample(logits, params, 0, 0).token, 2);
  params.logit_bias = {{0, 100.0f}, {1, -100.0f}};
  EXPECT_EQ(Sample(logits, params, 0, 0).token, 0);
  // At temperature 1 the biased-out token is (essentially) never drawn.
  params.temperature = 1.0f;
  params.logit_bias = {{1, -100.0f}};
  for (uint64_t step = 0; step < 2000; ++step) ASSERT_NE(Sample(logits, params, 9, step).token, 1);
  // The candidate set ranks by the adjusted logits too.
  params.temperature = 0.0f;
  EXPECT_EQ(SamplingCandidates(logits, params), (std::vector<int32_t>{2}));
}

TEST(SamplerPenalties, InvalidPenaltiesAndBiasNameTheField) {
  std::vector<std::pair<SamplingParams, std::string>> cases;
  SamplingParams p;
  p.frequency_penalty = 2.5f;
  cases.push_back({p, "frequency_penalty"});
  p = {};
  p.frequency_penalty = NAN;
  cases.push_back({p, "frequency_penalty"});
  p = {};
  p.presence_penalty = -2.01f;
  cases.push_back({p, "presence_penalty"});
  p = {};
  p.presence_penalty = INFINITY;
  cases.push_back({p, "presence_penalty"});
  p = {};
  p.logit_bias = {{-1, 1.0f}};
  cases.push_back({p, "logit_bias"});
  p = {};
  p.logit_bias = {{3, 100.5f}};
  cases.push_back({p, "logit_bias[3]"});
  p = {};
  p.logit_bias = {{3, NAN}};
  cases.push_back({p, "logit_bias[3]"});
  p = {};
  p.logit_bias = {{5, 1.0f}, {2, 1.0f}};
  cases.push_back({p, "ascending"});
  p = {};
  p.logit_bias = {{2, 1.0f}, {2, 1.0f}};
  cases.push_back({p, "unique"});
  for (const auto& [params, field] : cases) {
    const Status st = ValidateSamplingParams(params);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << field;
    EXPECT_NE(st.message().find(field), std::string::npos) << st.message();
  }
  p = {};
  p.frequency_penalty = -2.0f;
  p.presence_penalty = 2.0f;
  p.logit_bias = {{0, -100.0f}, {7, 100.0f}};
  EXPECT_TRUE(ValidateSamplingParams(p).ok());
}

}  // namespace
}  // namespace trace::engine
