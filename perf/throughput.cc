// perf/throughput.h: the timed prefill + decode loop and the model's cost model.
#include "perf/throughput.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>

namespace trace::perf {

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

Result<std::vector<SweepRow>> RunThroughputSweep(
    std::array<engine::Engine*, 2> engines, const SweepOptions& options, int64_t token_upper,
    const engine::Tokenizer* tokenizer, const std::function<void(const std::string&)>& progress) {
  auto say = [&](const std::string& line) {
    if (progress) progress(line);
  };
  auto mode_name = [](int m) {
    return std::string(
        kernels::NumericsName(m == 0 ? kernels::Numerics::kCanonical : kernels::Numerics::kFast));
  };
  Rng rng(options.seed ^ 0x7468726f75676870ull);
  auto random_token = [&] {
    for (int tries = 0; tries < 64; ++tries) {
      const int32_t id =
          static_cast<int32_t>(rng.Uniform(0, std::max<int64_t>(token_upper, 1) - 1));
      if (tokenizer == nullptr || !tokenizer->IsSpecial(id)) return id;
    }
    return int32_t{0};
  };
  // Warm-up: first-touch of the weights, thread pool start, device init.
  for (int m = 0; m < 2; ++m) {
    say("warming up (" + mode_name(m) + ")...");
    std::vector<std::vector<int32_t>> warm(1, std::vector<int32_t>(8));
    for (auto& t : warm[0]) t = random_token();
    Timing ignored;
    TRACE_RETURN_IF_ERROR(Measure(engines[static_cast<size_t>(m)], warm, 2, &ignored));
  }
  std::vector<SweepRow> rows;
  for (int64_t b : options.batches) {
    std::vector<std::vector<int32_t>> prompts(static_cast<size_t>(b),
                                              std::vector<int32_t>(options.prompt_len));
    for (auto& p : prompts) {
      for (auto& t : p) t = random_token();
    }
    SweepRow row{b, {}};
    for (int rep = 0; rep < options.repeat; ++rep) {
      for (int m = 0; m < 2; ++m) {
        say("batch " + std::to_string(b) + ": " + mode_name(m) + ", repeat " +
            std::to_string(rep + 1) + "/" + std::to_string(options.repeat) + "...");
        Timing t;
        if (Status st =
                Measure(engines[static_cast<size_t>(m)], prompts, options.decode_tokens, &t);
            !st.ok()) {
          return st.WithContext("batch " + std::to_string(b) + ", " + mode_name(m));
        }
        // The best of the repeats: the least disturbed measurement.
        Timing& best = row.t[m];
        if (rep == 0 || t.prefill_tps > best.prefill_tps) {
          best.prefill_tps = t.prefill_tps;
          best.prefill_seconds = t.prefill_seconds;
        }
        if (rep == 0 || t.decode_tps > best.decode_tps) {
          best.decode_tps = t.decode_tps;
          best.decode_seconds = t.decode_seconds;
        }
      }
    }
    rows.push_back(row);
  }
  return rows;
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

}  // namespace trace::perf
