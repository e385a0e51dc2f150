// The sampler (docs/numerics.md, "Sampling"): Philox4x32-10 known answers, sampled
// frequencies against the softmax (chi-square), exact top-k/top-p candidate sets, the
// greedy tie rule, seeds, the allowed mask and parameter errors.
#include "engine/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <random>
#include <set>
#include <vector>

#include "kernels/kernels.h"

namespace trace::engine {
namespace {

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
  params.top_k = 4;  // keeps ids 4, 1, 5, 0 (p desc, id asc on the 1/5 tie)
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

TEST(SamplerCandidates, TiesOrderedByLowestId) {
  const std::vector<float> logits = {0.0f, 1.0f, 1.0f, 0.0f, 1.0f};
  SamplingParams params;
  params.top_k = 2;
  EXPECT_EQ(SamplingCandidates(logits, params), (std::vector<int32_t>{1, 2}));
}

TEST(SamplerCandidates, LargeVocabularyOrderMatchesPlainSort) {
  // 50000 logits with many exact ties: the radix sort (no top-k) and the heap (small top-k)
  // both give the order of a plain comparison sort by (p desc, id asc).
  std::mt19937 rng(17);
  std::uniform_int_distribution<int> level(0, 400);
  std::vector<float> logits(50000);
  for (auto& l : logits) l = static_cast<float>(level(rng)) * 0.05f - 10.0f;
  logits[123] = -INFINITY;  // never a candidate
  SamplingParams params;
  params.temperature = 0.8f;
  float mx = -INFINITY;
  for (float l : logits) mx = std::max(mx, l / params.temperature);
  std::vector<std::pair<float, int32_t>> expect;
  for (int32_t id = 0; id < static_cast<int32_t>(logits.size()); ++id) {
    if (id == 123) continue;
    expect.push_back({kernels::Exp(logits[id] / params.temperature - mx), id});
  }
  std::sort(expect.begin(), expect.end(), [](const auto& a, const auto& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  });
  std::vector<int32_t> expect_ids;
  for (const auto& e : expect) expect_ids.push_back(e.second);
  EXPECT_EQ(SamplingCandidates(logits, params), expect_ids);
  params.top_k = 100;  // heap path
  EXPECT_EQ(SamplingCandidates(logits, params),
            std::vector<int32_t>(expect_ids.begin(), expect_ids.begin() + 100));
  params.top_k = 40000;  // radix path, then the cut
  EXPECT_EQ(SamplingCandidates(logits, params),
            std::vector<int32_t>(expect_ids.begin(), expect_ids.begin() + 40000));
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

}  // namespace
}  // namespace trace::engine
