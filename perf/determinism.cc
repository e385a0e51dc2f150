// perf/determinism.h: the continuous-batching simulation, its setup and its summary.
#include "perf/determinism.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <string>

#include "perf/throughput.h"

namespace trace::perf {
namespace {

using Clock = std::chrono::steady_clock;

// One request of the simulated server: a prompt prefilled in chunks, then decode steps.
struct Request {
  bool is_main = false;
  engine::SeqId seq = -1;
  std::vector<int32_t> prompt;
  int64_t arrival = 0;   // the tick it joins the batch
  int64_t budget = 0;    // decode steps before it leaves (others)
  size_t prefilled = 0;  // prompt tokens already in the cache
  int32_t next = -1;     // the token to feed at the next decode step
  int64_t decoded = 0;
  bool done = false;
  std::vector<int32_t> feed;  // the tokens of this tick's item (kept alive over Forward)
};

// One simulated server over an engine: the reference run (the prompt alone) records the
// batch-1 logits of every step; each batched run compares its steps with them.
class DeterminismBench {
 public:
  DeterminismBench(engine::Engine* engine, const DeterminismOptions& args,
                   std::vector<int32_t> prompt, std::vector<int32_t> eos, int32_t token_upper,
                   const engine::Tokenizer* tokenizer)
      : engine_(engine),
        args_(args),
        prompt_(std::move(prompt)),
        eos_(std::move(eos)),
        token_upper_(token_upper),
        tokenizer_(tokenizer) {}

  // The main request alone, every step at batch size 1: the reference logits.
  Status RunReference(RunResult* out) {
    Rng rng(0);
    return RunOnce(rng, /*with_others=*/false, out, /*record_reference=*/true);
  }

  Status RunBatched(int run, RunResult* out) {
    Rng rng(args_.seed * 0x100000001b3ull + 0x5bd1e995ull * static_cast<uint64_t>(run + 1));
    return RunOnce(rng, /*with_others=*/true, out, /*record_reference=*/false);
  }

  const std::map<int64_t, BatchStat>& stats() const { return stats_; }

 private:
  int32_t RandomToken(Rng& rng) {
    for (int tries = 0; tries < 64; ++tries) {
      int32_t id = static_cast<int32_t>(rng.Uniform(0, token_upper_ - 1));
      if (tokenizer_ == nullptr || !tokenizer_->IsSpecial(id)) return id;
    }
    return 0;
  }

  bool IsEos(int32_t id) const { return std::find(eos_.begin(), eos_.end(), id) != eos_.end(); }

  Status RunOnce(Rng& rng, bool with_others, RunResult* out, bool record_reference) {
    std::vector<Request> reqs;
    Request main;
    main.is_main = true;
    main.prompt = prompt_;
    main.arrival = with_others ? rng.Uniform(0, 2) : 0;
    reqs.push_back(std::move(main));
    if (with_others) {
      const int64_t n = rng.Uniform(0, args_.max_others);
      out->others = n;
      const int64_t horizon = reqs[0].arrival + args_.max_tokens;
      for (int64_t i = 0; i < n; ++i) {
        Request r;
        const int64_t len = rng.Uniform(1, args_.other_max_len);
        for (int64_t t = 0; t < len; ++t) r.prompt.push_back(RandomToken(rng));
        // Half are already running when the main request arrives, half join later.
        r.arrival = rng.Uniform(0, 1) == 0 ? rng.Uniform(0, reqs[0].arrival)
                                           : rng.Uniform(reqs[0].arrival, horizon);
        r.budget = rng.Uniform(1, 2 * args_.max_tokens);
        reqs.push_back(std::move(r));
      }
    }
    for (auto& r : reqs) r.seq = -1;

    Status status = Status::Ok();
    std::vector<size_t> order;
    std::vector<engine::BatchItem> items;
    std::vector<size_t> item_req;
    engine::ForwardOutput fwd;
    for (int64_t tick = 0; !reqs[0].done; ++tick) {
      order.clear();
      for (size_t i = 0; i < reqs.size(); ++i) {
        if (!reqs[i].done && reqs[i].arrival <= tick) order.push_back(i);
      }
      // A random order of the items in the batch (Fisher-Yates with our stream).
      for (size_t i = order.size(); i > 1; --i) {
        std::swap(order[i - 1], order[static_cast<size_t>(rng.Uniform(0, i - 1))]);
      }
      items.clear();
      item_req.clear();
      for (size_t idx : order) {
        Request& r = reqs[idx];
        if (r.seq < 0) r.seq = engine_->NewSequence();
        engine::BatchItem item;
        item.seq = r.seq;
        if (r.prefilled < r.prompt.size()) {
          // The main prompt in one piece; the others in random chunks (chunked prefill).
          const size_t rest = r.prompt.size() - r.prefilled;
          const size_t chunk =
              r.is_main ? rest : static_cast<size_t>(rng.Uniform(1, static_cast<int64_t>(rest)));
          r.feed.assign(r.prompt.begin() + static_cast<ptrdiff_t>(r.prefilled),
                        r.prompt.begin() + static_cast<ptrdiff_t>(r.prefilled + chunk));
          if (r.prefilled + chunk == r.prompt.size()) {
            item.logits_at = {static_cast<int32_t>(chunk - 1)};
          }
        } else {
          r.feed.assign(1, r.next);
          item.logits_at = {0};
        }
        item.tokens = r.feed;
        items.push_back(std::move(item));
        item_req.push_back(idx);
      }
      status = engine_->Forward(items, &fwd);
      if (!status.ok()) break;
      const int64_t batch = static_cast<int64_t>(items.size());
      out->max_batch = std::max(out->max_batch, batch);
      size_t row = 0;
      for (size_t k = 0; k < items.size(); ++k) {
        Request& r = reqs[item_req[k]];
        const bool prefill = r.prefilled < r.prompt.size();
        if (prefill) r.prefilled += items[k].tokens.size();
        if (items[k].logits_at.empty()) continue;
        std::span<const float> logits = fwd.row(row++);
        if (r.is_main && args_.test_perturb > 0 && batch > 1) {
          perturbed_.assign(logits.begin(), logits.end());
          std::vector<Candidate> top = TopCandidates(logits, 2);
          if (top.size() == 2) {
            perturbed_[static_cast<size_t>(top[1].id)] =
                top[0].logit + args_.test_perturb * static_cast<float>(batch);
          }
          logits = perturbed_;
        }
        if (!r.is_main) {
          r.next = Argmax(logits);
          if (r.next < 0) r.next = 0;
          if (++r.decoded >= r.budget) {
            r.done = true;
            engine_->FreeSequence(r.seq);
            r.seq = -1;
          }
          continue;
        }
        const size_t step = out->steps.size();
        if (step == 0) out->first_step_batch = batch;
        if (record_reference) {
          reference_.emplace_back(logits.begin(), logits.end());
        } else {
          BatchStat& s = stats_[batch];
          ++s.forwards;
          if (step == 0) ++s.first_step_forwards;
          // Comparable with the reference only while the completion follows its path.
          const bool same_path =
              step < reference_.size() && step <= reference_tokens_.size() &&
              std::equal(out->tokens.begin(), out->tokens.end(), reference_tokens_.begin());
          if (same_path) {
            ++s.compared;
            const double d = MaxAbsDiff(logits, reference_[step]);
            s.max_diff = std::max(s.max_diff, d);
            if (step == 0) s.max_diff_first = std::max(s.max_diff_first, d);
            if (!BitwiseEqual(logits, reference_[step])) s.bitwise = false;
          }
        }
        StepRecord rec;
        rec.top = TopCandidates(logits, 5);
        rec.token = rec.top.empty() ? -1 : rec.top[0].id;  // greedy: argmax, lowest id on ties
        out->steps.push_back(rec);
        if (rec.token < 0 || IsEos(rec.token)) {
          r.done = true;
        } else {
          out->tokens.push_back(rec.token);
          r.next = rec.token;
          if (static_cast<int64_t>(out->tokens.size()) >= args_.max_tokens) r.done = true;
        }
      }
    }
    for (auto& r : reqs) {
      if (r.seq >= 0) engine_->FreeSequence(r.seq);
      r.seq = -1;
    }
    if (record_reference) reference_tokens_ = out->tokens;
    return status;
  }

  engine::Engine* engine_;
  const DeterminismOptions& args_;
  std::vector<int32_t> prompt_;
  std::vector<int32_t> eos_;
  int32_t token_upper_;
  const engine::Tokenizer* tokenizer_;
  std::vector<std::vector<float>> reference_;  // per step, the batch-1 logits
  std::vector<int32_t> reference_tokens_;
  std::map<int64_t, BatchStat> stats_;
  std::vector<float> perturbed_;
};

}  // namespace

std::vector<Candidate> TopCandidates(std::span<const float> logits, size_t k) {
  std::vector<Candidate> top;
  top.reserve(k + 1);
  auto better = [](const Candidate& a, const Candidate& b) {
    return a.logit != b.logit ? a.logit > b.logit : a.id < b.id;
  };
  for (size_t i = 0; i < logits.size(); ++i) {
    float v = logits[i];
    if (std::isnan(v)) continue;
    Candidate c{static_cast<int32_t>(i), v};
    if (top.size() == k && !better(c, top.back())) continue;
    top.insert(std::upper_bound(top.begin(), top.end(), c, better), c);
    if (top.size() > k) top.pop_back();
  }
  return top;
}

// max |a - b| over a row; 0 when bitwise equal, +inf when a NaN/inf appears on one side only.
double MaxAbsDiff(std::span<const float> a, std::span<const float> b) {
  double worst = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    if (a[i] == b[i] || (std::isnan(a[i]) && std::isnan(b[i]))) continue;
    double d = std::fabs(static_cast<double>(a[i]) - static_cast<double>(b[i]));
    if (std::isnan(d)) d = INFINITY;
    worst = std::max(worst, d);
  }
  return worst;
}

bool BitwiseEqual(std::span<const float> a, std::span<const float> b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

int32_t TokenAt(const DeterminismResult& result, int run, size_t step) {
  const auto& steps = result.runs[static_cast<size_t>(run)].steps;
  return step < steps.size() ? steps[step].token : -1;
}

std::vector<int32_t> TokensBefore(const DeterminismResult& result, int run, size_t step) {
  const std::vector<int32_t>& tokens = result.runs[static_cast<size_t>(run)].tokens;
  return std::vector<int32_t>(
      tokens.begin(), tokens.begin() + static_cast<ptrdiff_t>(std::min(step, tokens.size())));
}

StepView ViewStep(const DeterminismResult& result, const std::vector<int32_t>& eos, int run,
                  size_t step, int32_t other_token) {
  StepView view;
  const auto& steps = result.runs[static_cast<size_t>(run)].steps;
  if (step >= steps.size()) return view;
  view.record = &steps[step];
  const int32_t token = view.record->token;
  view.eos = std::find(eos.begin(), eos.end(), token) != eos.end();
  if (other_token != token) {
    for (const Candidate& c : view.record->top) {
      if (c.id == other_token) view.other = &c;
    }
  }
  return view;
}

Result<DeterminismSetup> PrepareDeterminism(LoadedModel loaded, const std::string& prompt_text,
                                            engine::EngineOptions engine_options,
                                            const DeterminismOptions& options) {
  DeterminismSetup setup;
  setup.loaded = std::move(loaded);
  const engine::ModelConfig& config = setup.loaded.model->config();
  const engine::Tokenizer* tokenizer = setup.loaded.tokenizer.get();
  if (tokenizer == nullptr) {
    return NotFound("no tokenizer.json in '" + setup.loaded.dir + "' (needed to encode --prompt)");
  }
  setup.prompt = tokenizer->Encode(prompt_text);
  if (setup.prompt.empty()) return InvalidArgument("--prompt encodes to no tokens");
  setup.eos = config.eos_token_ids;
  if (auto id = tokenizer->eos_token_id()) setup.eos.push_back(*id);
  setup.token_upper = static_cast<int32_t>(
      std::min<int64_t>(config.vocab_size, std::max<int32_t>(tokenizer->vocab_size(), 1)));
  // The longest request: the prompt or another one, then up to twice max_tokens decoded.
  engine_options.max_context = std::min<int64_t>(
      config.max_position_embeddings,
      std::max<int64_t>(static_cast<int64_t>(setup.prompt.size()), options.other_max_len) +
          2 * options.max_tokens + 2);
  TRACE_ASSIGN_OR_RETURN(setup.engine, engine::Engine::Create(setup.loaded.model, engine_options));
  return setup;
}

namespace {

// The distinct completions of the runs, in order of first appearance.
std::vector<CompletionVariant> GroupCompletions(const std::vector<RunResult>& runs) {
  std::vector<CompletionVariant> variants;
  for (size_t i = 0; i < runs.size(); ++i) {
    const auto& t = runs[i].tokens;
    auto it = std::find_if(variants.begin(), variants.end(),
                           [&](const CompletionVariant& v) { return v.tokens == t; });
    if (it == variants.end()) {
      variants.push_back({t, {static_cast<int>(i)}});
    } else {
      it->runs.push_back(static_cast<int>(i));
    }
  }
  return variants;
}

// Where each later variant left the first one: the first step whose token differs.
std::vector<Divergence> LocateDivergences(const DeterminismResult& result) {
  std::vector<Divergence> divergences;
  for (size_t v = 1; v < result.variants.size(); ++v) {
    const int a = result.variants[0].runs[0], b = result.variants[v].runs[0];
    const auto& sa = result.runs[static_cast<size_t>(a)].steps;
    const auto& sb = result.runs[static_cast<size_t>(b)].steps;
    size_t step = 0;
    while (step < sa.size() && step < sb.size() && sa[step].token == sb[step].token) ++step;
    divergences.push_back({v, a, b, step});
  }
  return divergences;
}

// The range of the runs' largest batches, and the logits statistics over every batch size.
void SummariseBatches(const std::map<int64_t, BatchStat>& stats, DeterminismResult* result) {
  int64_t batch_lo = 1 << 30, batch_hi = 0;
  for (const auto& r : result->runs) {
    batch_lo = std::min(batch_lo, r.max_batch);
    batch_hi = std::max(batch_hi, r.max_batch);
  }
  result->largest_batch_min = batch_lo;
  result->largest_batch_max = batch_hi;
  result->by_batch = stats;
  for (const auto& [b, s] : result->by_batch) {
    result->max_diff_first = std::max(result->max_diff_first, s.max_diff_first);
    result->max_diff = std::max(result->max_diff, s.max_diff);
    result->bitwise = result->bitwise && s.bitwise;
  }
}

}  // namespace

Result<DeterminismResult> RunDeterminism(DeterminismSetup& setup, const DeterminismOptions& options,
                                         const std::function<void(int, double)>& progress) {
  const auto start = Clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };
  DeterminismResult result;
  DeterminismBench bench(setup.engine.get(), options, setup.prompt, setup.eos, setup.token_upper,
                         setup.loaded.tokenizer.get());
  if (progress) progress(-1, elapsed());
  if (Status st = bench.RunReference(&result.reference); !st.ok()) {
    return st.WithContext("reference run");
  }
  result.runs.resize(static_cast<size_t>(options.runs));
  for (int i = 0; i < options.runs; ++i) {
    if (progress) progress(i, elapsed());
    if (Status st = bench.RunBatched(i, &result.runs[static_cast<size_t>(i)]); !st.ok()) {
      return st.WithContext("run " + std::to_string(i));
    }
  }
  result.seconds = elapsed();
  result.variants = GroupCompletions(result.runs);
  result.divergences = LocateDivergences(result);
  SummariseBatches(bench.stats(), &result);
  return result;
}

}  // namespace trace::perf
