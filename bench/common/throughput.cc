// bench/common/throughput.h: the timed prefill + decode loop and the model's cost model.
#include "bench/common/throughput.h"

#include <algorithm>
#include <chrono>
#include <cmath>

namespace trace::bench {

using Clock = std::chrono::steady_clock;

int32_t Argmax(std::span<const float> logits) {
  int32_t best = -1;
  for (size_t i = 0; i < logits.size(); ++i) {
    if (std::isnan(logits[i])) continue;
    if (best < 0 || logits[i] > logits[best]) best = static_cast<int32_t>(i);
  }
  return best;
}

Status Measure(engine::Engine* engine, const std::vector<std::vector<int32_t>>& prompts,
               int decode_tokens, Timing* t) {
  std::vector<engine::SeqId> seqs;
  for (size_t i = 0; i < prompts.size(); ++i) seqs.push_back(engine->NewSequence());
  auto free_all = [&] {
    for (auto s : seqs) engine->FreeSequence(s);
  };
  std::vector<engine::BatchItem> items;
  for (size_t i = 0; i < prompts.size(); ++i) {
    items.push_back({seqs[i], prompts[i], {static_cast<int32_t>(prompts[i].size() - 1)}});
  }
  engine::ForwardOutput out;
  auto t0 = Clock::now();
  Status st = engine->Forward(items, &out);
  t->prefill_seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  if (!st.ok()) {
    free_all();
    return st;
  }
  std::vector<std::vector<int32_t>> next(prompts.size(), std::vector<int32_t>(1));
  for (size_t i = 0; i < prompts.size(); ++i) next[i][0] = std::max(Argmax(out.row(i)), 0);
  t->decode_seconds = 0;
  for (int step = 0; step < decode_tokens; ++step) {
    for (size_t i = 0; i < prompts.size(); ++i) items[i] = {seqs[i], next[i], {0}};
    t0 = Clock::now();
    st = engine->Forward(items, &out);
    t->decode_seconds += std::chrono::duration<double>(Clock::now() - t0).count();
    if (!st.ok()) break;
    for (size_t i = 0; i < prompts.size(); ++i) next[i][0] = std::max(Argmax(out.row(i)), 0);
  }
  free_all();
  if (!st.ok()) return st;
  const double b = static_cast<double>(prompts.size());
  t->prefill_tps = t->prefill_seconds > 0 ? b * prompts[0].size() / t->prefill_seconds : 0;
  t->decode_tps = t->decode_seconds > 0 ? b * decode_tokens / t->decode_seconds : 0;
  return Status::Ok();
}

ModelCost CostOf(const engine::Model& model) {
  ModelCost cost;
  auto elements = [](const kernels::WeightView& w) {
    return w.data == nullptr ? 0.0 : static_cast<double>(w.rows) * static_cast<double>(w.cols);
  };
  const engine::ModelWeights& weights = model.weights();
  for (const engine::LayerWeights& lw : weights.layers) {
    for (const kernels::WeightView* w : {&lw.q_proj, &lw.k_proj, &lw.v_proj, &lw.o_proj,
                                         &lw.gate_proj, &lw.up_proj, &lw.down_proj}) {
      cost.flops_per_prefill_token += 2 * elements(*w);
      cost.bytes_per_decode_step += elements(*w) * kernels::DTypeSize(w->dtype);
    }
  }
  cost.bytes_per_decode_step +=
      elements(weights.lm_head) * kernels::DTypeSize(weights.lm_head.dtype);
  return cost;
}

}  // namespace trace::bench
