#include "recorder/scheduler.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <deque>
#include <list>
#include <thread>

#include "base/hash.h"

namespace trace::recorder {

const GenerationResult& Generation::Wait() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return done_; });
  return result_;
}

bool Generation::done() {
  std::lock_guard<std::mutex> lock(mu_);
  return done_;
}

void Generation::Finish(GenerationResult result) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    result_ = std::move(result);
    done_ = true;
  }
  cv_.notify_all();
}

namespace {

using Clock = std::chrono::steady_clock;

double MsSince(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

// OpenAI-style logprobs: log-softmax of the raw logits, in double.
void ModelLogprobs(std::span<const float> logits, int32_t chosen, int top_n, TokenStep* step) {
  float max = -INFINITY;
  for (float v : logits) max = std::max(max, v);
  double sum = 0;
  for (float v : logits) sum += std::exp(static_cast<double>(v) - max);
  double log_z = max + std::log(sum);
  step->model_logprob = static_cast<float>(logits[chosen] - log_z);
  if (top_n <= 0) return;
  std::vector<int32_t> ids(logits.size());
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(i);
  size_t n = std::min<size_t>(top_n, ids.size());
  std::partial_sort(ids.begin(), ids.begin() + n, ids.end(), [&](int32_t a, int32_t b) {
    return logits[a] != logits[b] ? logits[a] > logits[b] : a < b;
  });
  for (size_t i = 0; i < n; ++i) {
    step->top.emplace_back(ids[i], static_cast<float>(logits[ids[i]] - log_z));
  }
}

size_t CommonPrefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b, size_t limit) {
  size_t n = std::min({a.size(), b.size(), limit});
  size_t i = 0;
  while (i < n && a[i] == b[i]) ++i;
  return i;
}

}  // namespace

class SchedulerImpl : public Scheduler {
  // Members, not anonymous-namespace types: the class is named as a friend in scheduler.h,
  // so it has external linkage, and so must the types of its fields.
  struct Active {
    GenerationRequest req;
    std::shared_ptr<Generation> gen;
    engine::SeqId seq = 0;
    std::vector<int32_t> tokens;  // prompt, then sampled tokens
    size_t fed = 0;               // tokens already in the KV cache
    GenerationResult result;
    Clock::time_point submitted, started, prefill_done;
    bool prefilled = false;
  };

  struct Cached {
    engine::SeqId seq;
    std::vector<int32_t> tokens;  // exactly the cached positions
  };

 public:
  SchedulerImpl(std::unique_ptr<engine::Engine> engine, const SchedulerOptions& options)
      : engine_(std::move(engine)), options_(options) {
    thread_ = std::thread([this] { Loop(); });
  }

  ~SchedulerImpl() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

  std::shared_ptr<Generation> Submit(GenerationRequest request) override {
    auto gen = std::make_shared<Generation>();
    auto a = std::make_unique<Active>();
    a->req = std::move(request);
    a->gen = gen;
    a->submitted = Clock::now();
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) {
        GenerationResult r;
        r.status = Unavailable("the server is shutting down");
        gen->Finish(r);
        if (a->req.observer) a->req.observer->OnFinish(r);
        return gen;
      }
      queue_.push_back(std::move(a));
    }
    cv_.notify_all();
    return gen;
  }

  const engine::Engine& engine() const override { return *engine_; }

  SchedulerStats stats() const override {
    std::lock_guard<std::mutex> lock(stats_mu_);
    return stats_;
  }

 private:
  void Loop() {
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return stopping_ || !queue_.empty() || !active_.empty(); });
        if (stopping_) break;
        while (!queue_.empty() &&
               static_cast<int>(active_.size()) < options_.max_active_sequences) {
          active_.push_back(std::move(queue_.front()));
          queue_.pop_front();
          Admit(active_.back().get());
        }
      }
      Step();
    }
    // Shutdown: nothing more runs.
    std::deque<std::unique_ptr<Active>> rest;
    {
      std::lock_guard<std::mutex> lock(mu_);
      rest.swap(queue_);
    }
    for (auto& a : active_) rest.push_back(std::move(a));
    for (auto& a : rest) {
      a->result.status = Unavailable("the server is shutting down");
      a->result.finish_reason = "cancelled";
      Notify(a.get());
    }
  }

  // Starts a sequence for `a`, forking the longest cached prefix when there is one.
  void Admit(Active* a) {
    a->started = Clock::now();
    a->result.queue_ms =
        std::chrono::duration<double, std::milli>(a->started - a->submitted).count();
    a->tokens = a->req.prompt;
    // At least the last prompt token is computed: its logits start the generation.
    size_t limit = a->req.prompt.empty() ? 0 : a->req.prompt.size() - 1;
    size_t best = 0;
    engine::SeqId best_seq = -1;
    if (options_.prefix_reuse && limit > 0) {
      for (const Cached& c : cache_) {
        size_t n = CommonPrefix(c.tokens, a->tokens, limit);
        if (n > best) best = n, best_seq = c.seq;
      }
      for (const auto& other : active_) {
        if (other.get() == a) continue;
        size_t n = CommonPrefix(other->tokens, a->tokens, std::min(limit, other->fed));
        if (n > best) best = n, best_seq = other->seq;
      }
    }
    if (best > 0) {
      Result<engine::SeqId> forked = engine_->ForkSequence(best_seq, static_cast<int64_t>(best));
      if (forked.ok()) {
        a->seq = *forked;
        a->fed = best;
        a->result.reused_prompt_tokens = static_cast<int64_t>(best);
        std::lock_guard<std::mutex> lock(stats_mu_);
        stats_.reused_prompt_tokens += static_cast<int64_t>(best);
        return;
      }
    }
    a->seq = engine_->NewSequence();
    a->fed = 0;
  }

  void Step() {
    // Drop cancelled sequences before building the batch.
    for (auto& a : active_) {
      if (a->gen->cancelled_) {
        a->result.finish_reason = "cancelled";
        Retire(a, /*keep_cache=*/false);
      }
    }
    std::erase(active_, nullptr);
    if (active_.empty()) return;

    // Decode steps first (one token each), then prefill chunks within the token budget.
    std::vector<engine::BatchItem> items;
    std::vector<Active*> owners;
    int budget = options_.max_batch_tokens;
    for (auto& a : active_) {
      if (a->fed < a->req.prompt.size()) continue;
      engine::BatchItem item;
      item.seq = a->seq;
      item.tokens = std::span<const int32_t>(a->tokens.data() + a->fed, 1);
      item.logits_at = {0};
      items.push_back(std::move(item));
      owners.push_back(a.get());
      --budget;
    }
    for (auto& a : active_) {
      if (a->fed >= a->req.prompt.size() || budget <= 0) continue;
      size_t remaining = a->req.prompt.size() - a->fed;
      size_t chunk = std::min<size_t>(
          {remaining, static_cast<size_t>(options_.prefill_chunk), static_cast<size_t>(budget)});
      engine::BatchItem item;
      item.seq = a->seq;
      item.tokens = std::span<const int32_t>(a->tokens.data() + a->fed, chunk);
      if (chunk == remaining) item.logits_at = {static_cast<int32_t>(chunk - 1)};
      items.push_back(std::move(item));
      owners.push_back(a.get());
      budget -= static_cast<int>(chunk);
    }
    if (items.empty()) return;

    engine::ForwardOutput out;
    // Per item: the layer digests of its (only) logits row, [layer].
    std::vector<std::vector<uint64_t>> layer_digests;
    // Per item: the route of that row, MoE layers in order (the probe is called layer by
    // layer, so appending keeps the order).
    std::vector<std::vector<int32_t>> routes;
    engine::LayerProbe probe;
    engine::RouteProbe route_probe;
    auto asked = [&](size_t item, int32_t token_index) {
      return item < items.size() && !items[item].logits_at.empty() &&
             items[item].logits_at.back() == token_index;
    };
    if (options_.layer_digests) {
      layer_digests.resize(items.size());
      routes.resize(items.size());
      probe = [&](size_t item, int32_t token_index, int layer, std::span<const float> hidden) {
        if (layer < 0 || !asked(item, token_index)) return;
        auto& v = layer_digests[item];
        if (static_cast<int>(v.size()) <= layer) v.resize(layer + 1);
        v[layer] = Digest64(hidden.data(), hidden.size_bytes());
      };
      route_probe = [&](size_t item, int32_t token_index, int, std::span<const int32_t> ids) {
        if (asked(item, token_index))
          routes[item].insert(routes[item].end(), ids.begin(), ids.end());
      };
    }
    Status st = options_.layer_digests ? engine_->Forward(items, &out, &probe, &route_probe)
                                       : engine_->Forward(items, &out);
    {
      std::lock_guard<std::mutex> lock(stats_mu_);
      ++stats_.forward_calls;
    }
    if (!st.ok()) {
      for (auto& a : active_) {
        a->result.status = st.WithContext("engine forward");
        a->result.finish_reason = "error";
        Retire(a, /*keep_cache=*/false);
      }
      std::erase(active_, nullptr);
      return;
    }

    int32_t batch = static_cast<int32_t>(items.size());
    size_t row = 0;
    std::vector<uint8_t> mask;
    for (size_t i = 0; i < items.size(); ++i) {
      Active* a = owners[i];
      a->fed += items[i].tokens.size();
      a->result.max_batch_size = std::max(a->result.max_batch_size, batch);
      if (items[i].logits_at.empty()) continue;
      if (!a->prefilled) {
        a->prefilled = true;
        a->prefill_done = Clock::now();
        a->result.prefill_ms =
            std::chrono::duration<double, std::milli>(a->prefill_done - a->started).count();
        std::lock_guard<std::mutex> lock(stats_mu_);
        stats_.computed_prompt_tokens +=
            static_cast<int64_t>(a->req.prompt.size()) - a->result.reused_prompt_tokens;
      }
      std::span<const float> logits = out.row(row++);
      SampleOne(a, logits, &mask,
                options_.layer_digests ? std::move(layer_digests[i]) : std::vector<uint64_t>{},
                options_.layer_digests ? std::move(routes[i]) : std::vector<int32_t>{});
    }
    for (auto& a : active_) {
      if (a && !a->result.finish_reason.empty()) Retire(a, /*keep_cache=*/true);
    }
    std::erase(active_, nullptr);
  }

  void SampleOne(Active* a, std::span<const float> logits, std::vector<uint8_t>* mask,
                 std::vector<uint64_t> layer_digests, std::vector<int32_t> route) {
    uint64_t step_index = a->result.steps.size();
    std::span<const uint8_t> allowed;
    if (a->req.constraint) {
      a->req.constraint->AllowedMask(mask);
      allowed = *mask;
    }
    // The tokens this request has sampled so far (after its prompt), which the penalties
    // count; the replayer passes the recorded ones (replayer/verifier.cc).
    std::span<const int32_t> generated =
        std::span<const int32_t>(a->tokens).subspan(a->req.prompt.size());
    engine::SampleResult s =
        engine::Sample(logits, a->req.sampling, a->req.seed, step_index, allowed, generated);
    TokenStep step;
    step.token = s.token;
    step.logits_digest = LogitsDigest(logits);
    step.logit = s.logit;
    step.logprob = s.logprob;
    step.runner_up = s.runner_up;
    step.runner_up_logit = s.runner_up_logit;
    step.layer_digests = std::move(layer_digests);
    step.route = std::move(route);
    if (a->req.want_logprobs && s.token >= 0) {
      ModelLogprobs(logits, s.token, a->req.top_logprobs, &step);
    }
    if (s.token < 0) {
      a->result.status = Internal("sampler returned no token (every token masked)");
      a->result.finish_reason = "error";
      return;
    }
    bool constraint_done = false;
    if (a->req.constraint) {
      Status adv = a->req.constraint->Advance(s.token);
      if (!adv.ok()) {
        a->result.status = adv;
        a->result.finish_reason = "error";
        return;
      }
      constraint_done = a->req.constraint->Done();
    }
    a->result.steps.push_back(step);
    a->tokens.push_back(s.token);
    {
      std::lock_guard<std::mutex> lock(stats_mu_);
      ++stats_.sampled_tokens;
    }
    bool stop_hit = a->req.observer ? a->req.observer->OnToken(a->result.steps.back()) : false;
    bool is_end = std::find(a->req.end_tokens.begin(), a->req.end_tokens.end(), s.token) !=
                  a->req.end_tokens.end();
    if (stop_hit || is_end || constraint_done) {
      a->result.finish_reason = "stop";
    } else if (static_cast<int32_t>(a->result.steps.size()) >= a->req.sampling.max_tokens) {
      a->result.finish_reason = "length";
    }
  }

  // Completes `a` (nulling the slot); its sequence goes to the prefix cache.
  void Retire(std::unique_ptr<Active>& a, bool keep_cache) {
    if (a->prefilled) {
      a->result.decode_ms = MsSince(a->prefill_done);
    }
    if (keep_cache && options_.prefix_reuse && options_.max_cached_sequences > 0 && a->fed > 0) {
      a->tokens.resize(a->fed);
      cache_.push_back({a->seq, std::move(a->tokens)});
      while (static_cast<int>(cache_.size()) > options_.max_cached_sequences) {
        engine_->FreeSequence(cache_.front().seq);
        cache_.pop_front();
      }
    } else {
      engine_->FreeSequence(a->seq);
    }
    Notify(a.get());
    a.reset();
  }

  // Finishes the Generation, then tells the observer; the Active (and with it the
  // scheduler's reference to the observer) goes after.
  static void Notify(Active* a) {
    a->gen->Finish(a->result);
    if (a->req.observer) a->req.observer->OnFinish(a->result);
  }

  std::unique_ptr<engine::Engine> engine_;
  SchedulerOptions options_;
  std::mutex mu_;               // guards: stopping_, queue_
  std::condition_variable cv_;  // stopping_ set or a request queued
  bool stopping_ = false;
  std::deque<std::unique_ptr<Active>> queue_;
  // Scheduler-thread state (no lock).
  std::vector<std::unique_ptr<Active>> active_;
  std::deque<Cached> cache_;
  mutable std::mutex stats_mu_;  // guards: stats_
  SchedulerStats stats_;
  std::thread thread_;
};

Result<std::unique_ptr<Scheduler>> Scheduler::Create(std::unique_ptr<engine::Engine> engine,
                                                     const SchedulerOptions& options) {
  if (!engine) return InvalidArgument("scheduler: no engine");
  if (options.max_active_sequences < 1 || options.max_batch_tokens < 1 ||
      options.prefill_chunk < 1) {
    return InvalidArgument(
        "scheduler: max_active_sequences, max_batch_tokens and "
        "prefill_chunk must be positive");
  }
  return std::unique_ptr<Scheduler>(new SchedulerImpl(std::move(engine), options));
}

}  // namespace trace::recorder
