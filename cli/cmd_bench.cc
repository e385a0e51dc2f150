// `trace bench`: the two experiments that show what the numerics contract buys and costs.
//
//   trace bench determinism  the same prompt completed N times at temperature 0, each time
//                            continuously batched with a random number of random other
//                            requests; counts the distinct completions, shows where the
//                            first ones diverged, and how far batching moved the logits.
//   trace bench throughput   prefill and decode tokens/s at given batch sizes, canonical and
//                            fast numerics in the same run, with the ratio canonical/fast.
//
// Everything random here (the other requests, their lengths, contents, arrival times and
// prefill chunking, the order of items in a batch) comes from a SplitMix64 stream keyed by
// --seed and the run index, so a bench run is itself reproducible.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench/common/machine_peak.h"
#include "bench/common/throughput.h"
#include "cli/command.h"
#include "engine/engine.h"
#include "engine/model_init.h"
#include "engine/sampler.h"
#include "engine/tokenizer/tokenizer.h"

namespace trace::cli {
namespace {

using bench::Argmax;
using bench::Measure;
using bench::Rng;
using bench::Timing;

using Clock = std::chrono::steady_clock;

// ---- small helpers ----------------------------------------------------------------------

// Progress on stderr, only when stderr is a terminal (and not --quiet).
class Progress {
 public:
  Progress() : on_(isatty(STDERR_FILENO) == 1 && !Globals().quiet) {}
  ~Progress() { Done(); }
  void Update(const char* fmt, ...) __attribute__((format(printf, 2, 3))) {
    if (!on_) return;
    char buf[256];
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    std::fprintf(stderr, "\r%s\x1b[K", buf);
    std::fflush(stderr);
    shown_ = true;
  }
  void Done() {
    if (on_ && shown_) std::fprintf(stderr, "\r\x1b[K");
    shown_ = false;
  }

 private:
  bool on_;
  bool shown_ = false;
};

// A token's (or a text's) bytes for people: control characters escaped, valid UTF-8.
std::string Printable(const std::string& bytes) {
  std::string text = engine::SanitizeUtf8(bytes);
  std::string out;
  for (unsigned char ch : text) {
    if (ch == '\n') {
      out += "\\n";
    } else if (ch == '\t') {
      out += "\\t";
    } else if (ch == '\r') {
      out += "\\r";
    } else if (ch == '"') {
      out += "\\\"";
    } else if (ch < 0x20 || ch == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", ch);
      out += buf;
    } else {
      out.push_back(static_cast<char>(ch));
    }
  }
  return out;
}

Status ValidateDevice(const std::string& device) {
  if (device == "cpu" || device == "cuda") return Status::Ok();
  if (device.rfind("cuda:", 0) == 0 && device.size() > 5 &&
      std::all_of(device.begin() + 5, device.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return Status::Ok();
  }
  return InvalidArgument("--device: '" + device + "' is not cpu, cuda or cuda:N");
}

// The model folder to use: --model, else the demo model (written first if missing).
Result<std::string> ResolveModelDir(const std::string& given, const std::string& what) {
  if (!given.empty()) {
    std::error_code ec;
    if (!std::filesystem::is_directory(given, ec)) {
      return NotFound(what + ": --model: '" + given + "' is not a folder");
    }
    if (!std::filesystem::exists(given + "/config.json", ec)) {
      return NotFound(what + ": --model: '" + given + "' has no config.json");
    }
    return given;
  }
  const std::string demo = engine::DefaultDemoModelDir();
  std::error_code ec;
  if (!std::filesystem::exists(demo + "/config.json", ec)) {
    std::fprintf(stderr,
                 "trace: no --model given; writing the demo model (preset %s, seed %llu) to %s\n",
                 engine::kDemoModelPreset, static_cast<unsigned long long>(engine::kDemoModelSeed),
                 demo.c_str());
  }
  return engine::EnsureDemoModel();
}

// A greedy pick over a logits row plus the few best candidates, for divergence reports.
struct Candidate {
  int32_t id = -1;
  float logit = 0.0f;
};
struct StepRecord {
  int32_t token = -1;
  std::vector<Candidate> top;  // best first (logit desc, id asc)
};

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

// nlohmann writes NaN/inf as null; keep finite values exact.
nlohmann::ordered_json Num(double v) {
  if (!std::isfinite(v)) return nullptr;
  return v;
}

// ---- trace bench determinism ------------------------------------------------------------

struct DeterminismArgs {
  std::string model_dir;
  std::string device = "cpu";
  std::string numerics = "canonical";
  int threads = 0;
  int runs = 100;
  std::string prompt = "Once upon a time, in a small village by the sea, there lived";
  int max_tokens = 32;
  uint64_t seed = 0;
  int max_others = 15;
  int other_max_len = 48;
  bool json = false;
  // Hidden, for the tests of the divergence report: at every main-request step computed in
  // a batch of B > 1 sequences, lift the runner-up's logit above the best by this * B.
  float test_perturb = 0;
};

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

// Per batch size (sequences in the Forward call that computed one of the main request's
// steps): how far its logits moved from the same step computed alone (batch size 1).
struct BatchStat {
  int64_t forwards = 0;             // main-request steps computed at this batch size
  int64_t compared = 0;             // ... of which on the reference path (comparable)
  int64_t first_step_forwards = 0;  // first steps (prefill) at this batch size
  double max_diff = 0;              // over every compared step
  double max_diff_first = 0;        // over first steps only
  bool bitwise = true;              // every compared row bitwise equal
};

struct RunResult {
  std::vector<int32_t> tokens;    // the main request's completion
  std::vector<StepRecord> steps;  // one per main step
  int64_t first_step_batch = 0;   // sequences in the Forward of the first step
  int64_t others = 0;             // other requests in this run
  int64_t max_batch = 0;
};

class DeterminismBench {
 public:
  DeterminismBench(engine::Engine* engine, const DeterminismArgs& args, std::vector<int32_t> prompt,
                   std::vector<int32_t> eos, int32_t token_upper,
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
  const DeterminismArgs& args_;
  std::vector<int32_t> prompt_;
  std::vector<int32_t> eos_;
  int32_t token_upper_;
  const engine::Tokenizer* tokenizer_;
  std::vector<std::vector<float>> reference_;  // per step, the batch-1 logits
  std::vector<int32_t> reference_tokens_;
  std::map<int64_t, BatchStat> stats_;
  std::vector<float> perturbed_;
};

struct Loaded {
  std::string dir;
  std::shared_ptr<const engine::Model> model;
  std::unique_ptr<engine::Tokenizer> tokenizer;  // null when the folder has none
};

Result<Loaded> LoadModel(const std::string& given, const std::string& what) {
  Loaded l;
  TRACE_ASSIGN_OR_RETURN(l.dir, ResolveModelDir(given, what));
  TRACE_ASSIGN_OR_RETURN(l.model, engine::Model::Load(l.dir, /*hash_weights=*/false));
  const std::string tok = l.dir + "/tokenizer.json";
  std::error_code ec;
  if (std::filesystem::exists(tok, ec)) {
    TRACE_ASSIGN_OR_RETURN(l.tokenizer, engine::Tokenizer::Load(tok));
  }
  return l;
}

std::string TokenPiece(const engine::Tokenizer* tokenizer, int32_t id) {
  if (tokenizer == nullptr || id < 0) return "";
  return tokenizer->Decode(std::span<const int32_t>(&id, 1));
}

std::string Text(const engine::Tokenizer* tokenizer, const std::vector<int32_t>& ids) {
  if (tokenizer == nullptr) return "";
  return tokenizer->Decode(ids, /*skip_special=*/true);
}

int RunDeterminism(const DeterminismArgs& args) {
  const std::string what = "bench determinism";
  if (Status st = ValidateDevice(args.device); !st.ok()) return ReportError(st.WithContext(what));
  auto loaded = LoadModel(args.model_dir, what);
  if (!loaded.ok()) return ReportError(loaded.status());
  const engine::ModelConfig& config = loaded->model->config();
  const engine::Tokenizer* tokenizer = loaded->tokenizer.get();
  if (tokenizer == nullptr) {
    return ReportError(NotFound(what + ": no tokenizer.json in '" + loaded->dir +
                                "' (needed to encode --prompt)"));
  }
  std::vector<int32_t> prompt = tokenizer->Encode(args.prompt);
  if (prompt.empty()) return ReportError(InvalidArgument(what + ": --prompt encodes to no tokens"));
  std::vector<int32_t> eos = config.eos_token_ids;
  if (auto id = tokenizer->eos_token_id()) eos.push_back(*id);
  const int32_t token_upper = static_cast<int32_t>(
      std::min<int64_t>(config.vocab_size, std::max<int32_t>(tokenizer->vocab_size(), 1)));

  engine::EngineOptions options;
  if (!kernels::ParseNumerics(args.numerics, &options.numerics)) {
    return ReportError(
        InvalidArgument("--numerics must be canonical or fast, got '" + args.numerics + "'"));
  }
  options.threads = args.threads;
  options.device = args.device;
  options.max_context =
      std::min<int64_t>(config.max_position_embeddings,
                        std::max<int64_t>(static_cast<int64_t>(prompt.size()), args.other_max_len) +
                            2 * args.max_tokens + 2);
  auto engine = engine::Engine::Create(loaded->model, options);
  if (!engine.ok()) return ReportError(engine.status().WithContext(what));

  const auto start = Clock::now();
  DeterminismBench bench(engine->get(), args, prompt, eos, token_upper, tokenizer);
  Progress progress;
  progress.Update("reference run (batch size 1)...");
  RunResult reference;
  if (Status st = bench.RunReference(&reference); !st.ok()) {
    return ReportError(st.WithContext(what + ": reference run"));
  }
  std::vector<RunResult> runs(static_cast<size_t>(args.runs));
  for (int i = 0; i < args.runs; ++i) {
    progress.Update("run %d/%d (%.1fs)", i + 1, args.runs,
                    std::chrono::duration<double>(Clock::now() - start).count());
    if (Status st = bench.RunBatched(i, &runs[static_cast<size_t>(i)]); !st.ok()) {
      return ReportError(st.WithContext(what + ": run " + std::to_string(i)));
    }
  }
  progress.Done();
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();

  // Distinct completions in order of first appearance.
  struct Variant {
    std::vector<int32_t> tokens;
    std::vector<int> runs;
  };
  std::vector<Variant> variants;
  for (int i = 0; i < args.runs; ++i) {
    const auto& t = runs[static_cast<size_t>(i)].tokens;
    auto it = std::find_if(variants.begin(), variants.end(),
                           [&](const Variant& v) { return v.tokens == t; });
    if (it == variants.end()) {
      variants.push_back({t, {i}});
    } else {
      it->runs.push_back(i);
    }
  }

  // Where each later variant left the first one: the first step whose token differs.
  struct Divergence {
    size_t variant;
    int base_run, run;
    size_t step;
  };
  std::vector<Divergence> divergences;
  for (size_t v = 1; v < variants.size(); ++v) {
    const int a = variants[0].runs[0], b = variants[v].runs[0];
    const auto& sa = runs[static_cast<size_t>(a)].steps;
    const auto& sb = runs[static_cast<size_t>(b)].steps;
    size_t step = 0;
    while (step < sa.size() && step < sb.size() && sa[step].token == sb[step].token) ++step;
    divergences.push_back({v, a, b, step});
  }

  int64_t batch_lo = 1 << 30, batch_hi = 0;
  for (const auto& r : runs) {
    batch_lo = std::min(batch_lo, r.max_batch);
    batch_hi = std::max(batch_hi, r.max_batch);
  }
  double max_first = 0, max_all = 0;
  bool all_bitwise = true;
  for (const auto& [b, s] : bench.stats()) {
    max_first = std::max(max_first, s.max_diff_first);
    max_all = std::max(max_all, s.max_diff);
    all_bitwise = all_bitwise && s.bitwise;
  }
  const std::string device_desc = (*engine)->DeviceDescription();
  const char* numerics_name = kernels::NumericsName(options.numerics);

  // A step's view from one run: the token it chose, its logit and the runner-up.
  auto step_view = [&](int run, size_t step, int32_t other_token) {
    nlohmann::ordered_json j;
    j["run"] = run;
    const auto& steps = runs[static_cast<size_t>(run)].steps;
    if (step >= steps.size()) {
      j["id"] = nullptr;  // this run had already stopped (eos or max tokens)
      j["text"] = "";
      return j;
    }
    const StepRecord& rec = steps[step];
    j["id"] = rec.token;
    j["text"] = engine::SanitizeUtf8(TokenPiece(tokenizer, rec.token));
    j["eos"] = std::find(eos.begin(), eos.end(), rec.token) != eos.end();
    if (!rec.top.empty()) j["logit"] = Num(rec.top[0].logit);
    if (rec.top.size() > 1) {
      j["runner_up"] = rec.top[1].id;
      j["runner_up_logit"] = Num(rec.top[1].logit);
      j["margin"] = Num(static_cast<double>(rec.top[0].logit) - rec.top[1].logit);
    }
    for (const auto& c : rec.top) {
      if (c.id == other_token && other_token != rec.token) {
        j["other_variant_logit"] = Num(c.logit);
        j["margin_to_other_variant"] = Num(static_cast<double>(rec.top[0].logit) - c.logit);
      }
    }
    nlohmann::ordered_json top = nlohmann::ordered_json::array();
    for (const auto& c : rec.top) top.push_back({{"id", c.id}, {"logit", Num(c.logit)}});
    j["top"] = top;
    return j;
  };
  auto token_at = [&](int run, size_t step) {
    const auto& steps = runs[static_cast<size_t>(run)].steps;
    return step < steps.size() ? steps[step].token : -1;
  };

  if (args.json) {
    nlohmann::ordered_json j;
    j["command"] = "bench determinism";
    j["model"] = loaded->dir;
    j["architecture"] = config.architecture;
    j["device"] = device_desc;
    j["numerics"] = numerics_name;
    if (options.numerics == kernels::Numerics::kCanonical) {
      j["numerics_version"] = kernels::kNumericsVersion;
    }
    j["runs"] = args.runs;
    j["max_tokens"] = args.max_tokens;
    j["max_others"] = args.max_others;
    j["seed"] = args.seed;
    j["prompt"] = args.prompt;
    j["prompt_tokens"] = prompt.size();
    j["largest_batch"] = {{"min", batch_lo}, {"max", batch_hi}};
    j["distinct_completions"] = variants.size();
    nlohmann::ordered_json completions = nlohmann::ordered_json::array();
    for (const auto& v : variants) {
      nlohmann::ordered_json c;
      c["count"] = v.runs.size();
      c["first_run"] = v.runs[0];
      c["runs"] = v.runs;
      c["matches_reference"] = v.tokens == reference.tokens;
      c["tokens"] = v.tokens;
      c["text"] = engine::SanitizeUtf8(Text(tokenizer, v.tokens));
      completions.push_back(c);
    }
    j["completions"] = completions;
    nlohmann::ordered_json divs = nlohmann::ordered_json::array();
    for (const auto& d : divergences) {
      nlohmann::ordered_json e;
      e["variant"] = d.variant;
      e["run"] = d.run;
      e["base_run"] = d.base_run;
      e["step"] = d.step;
      e["base"] = step_view(d.base_run, d.step, token_at(d.run, d.step));
      e["variant_step"] = step_view(d.run, d.step, token_at(d.base_run, d.step));
      e["text_before"] = engine::SanitizeUtf8(Text(
          tokenizer,
          std::vector<int32_t>(runs[static_cast<size_t>(d.run)].tokens.begin(),
                               runs[static_cast<size_t>(d.run)].tokens.begin() +
                                   static_cast<ptrdiff_t>(std::min(
                                       d.step, runs[static_cast<size_t>(d.run)].tokens.size())))));
      divs.push_back(e);
    }
    j["divergences"] = divs;
    j["reference"] = {{"tokens", reference.tokens},
                      {"text", engine::SanitizeUtf8(Text(tokenizer, reference.tokens))}};
    nlohmann::ordered_json by_batch = nlohmann::ordered_json::array();
    for (const auto& [b, s] : bench.stats()) {
      nlohmann::ordered_json e;
      e["batch_size"] = b;
      e["steps"] = s.forwards;
      e["compared_steps"] = s.compared;
      e["first_steps"] = s.first_step_forwards;
      e["max_abs_diff_first_step"] = s.first_step_forwards > 0 ? Num(s.max_diff_first) : nullptr;
      e["max_abs_diff"] = Num(s.max_diff);
      e["bitwise_equal"] = s.bitwise;
      by_batch.push_back(e);
    }
    j["logits_vs_batch1"] = by_batch;
    j["max_abs_diff_first_step"] = Num(max_first);
    j["max_abs_diff"] = Num(max_all);
    j["bitwise_equal"] = all_bitwise;
    j["seconds"] = seconds;
    std::cout << j.dump() << "\n";
    return kExitOk;
  }

  std::printf("model     %s (%s), %s, %s numerics%s\n", loaded->dir.c_str(),
              config.architecture.c_str(), device_desc.c_str(), numerics_name,
              options.numerics == kernels::Numerics::kCanonical
                  ? (std::string(" (") + kernels::kNumericsVersion + ")").c_str()
                  : "");
  std::printf("prompt    \"%s\" (%zu tokens), greedy, up to %d tokens\n",
              Printable(args.prompt).c_str(), prompt.size(), args.max_tokens);
  std::printf(
      "batching  each run with 0..%d random other requests (largest batch per run %lld..%lld), "
      "seed %llu, %.1fs\n\n",
      args.max_others, static_cast<long long>(batch_lo), static_cast<long long>(batch_hi),
      static_cast<unsigned long long>(args.seed), seconds);
  std::printf("%zu distinct completions out of %d runs\n", variants.size(), args.runs);
  for (size_t v = 0; v < variants.size() && v < 10; ++v) {
    std::string text = Printable(Text(tokenizer, variants[v].tokens));
    if (text.size() > 70) text = text.substr(0, 67) + "...";
    std::printf("  #%zu  %4zu runs (first: run %d)%s  \"%s\"\n", v + 1, variants[v].runs.size(),
                variants[v].runs[0],
                variants[v].tokens == reference.tokens ? ", = batch-1 reference" : "",
                text.c_str());
  }
  if (variants.size() > 10) std::printf("  ... and %zu more\n", variants.size() - 10);
  for (size_t i = 0; i < divergences.size() && i < 5; ++i) {
    const auto& d = divergences[i];
    std::printf("\n#%zu diverged from #1 at step %zu (run %d vs run %d):\n", d.variant + 1, d.step,
                d.run, d.base_run);
    for (int side = 0; side < 2; ++side) {
      const int run = side == 0 ? d.base_run : d.run;
      const int other = side == 0 ? d.run : d.base_run;
      const auto& steps = runs[static_cast<size_t>(run)].steps;
      if (d.step >= steps.size()) {
        std::printf("  run %-4d stopped before this step\n", run);
        continue;
      }
      const StepRecord& rec = steps[d.step];
      std::printf("  run %-4d chose %6d \"%s\"", run, rec.token,
                  Printable(TokenPiece(tokenizer, rec.token)).c_str());
      if (!rec.top.empty()) std::printf(" logit %.9g", static_cast<double>(rec.top[0].logit));
      const int32_t other_token = token_at(other, d.step);
      bool shown = false;
      for (const auto& c : rec.top) {
        if (c.id == other_token && other_token != rec.token) {
          std::printf(", %d at %.9g: margin %.3g", c.id, static_cast<double>(c.logit),
                      static_cast<double>(rec.top[0].logit) - c.logit);
          shown = true;
        }
      }
      if (!shown && rec.top.size() > 1) {
        std::printf(", runner-up %d at %.9g: margin %.3g", rec.top[1].id,
                    static_cast<double>(rec.top[1].logit),
                    static_cast<double>(rec.top[0].logit) - rec.top[1].logit);
      }
      std::printf("\n");
    }
  }
  std::printf("\nlogits vs the same step computed alone (batch size 1), max |difference|:\n");
  std::printf("  %5s %8s %12s %12s  %s\n", "batch", "steps", "first step", "all steps", "bitwise");
  for (const auto& [b, s] : bench.stats()) {
    char first[32] = "-";
    if (s.first_step_forwards > 0) std::snprintf(first, sizeof(first), "%.3g", s.max_diff_first);
    std::printf("  %5lld %8lld %12s %12.3g  %s\n", static_cast<long long>(b),
                static_cast<long long>(s.forwards), first, s.max_diff,
                s.compared == 0 ? "-" : (s.bitwise ? "yes" : "no"));
  }
  std::printf("  overall: first step %.3g, all steps %.3g (%s)\n", max_first, max_all,
              all_bitwise ? "bitwise equal" : "batching moved the logits");
  return kExitOk;
}

// ---- trace bench throughput -------------------------------------------------------------

struct ThroughputArgs {
  std::string model_dir;
  std::string device = "cpu";
  std::string batches = "1,8,64";
  int prompt_len = 128;
  int decode_tokens = 32;
  int repeat = 1;
  int threads = 0;
  uint64_t seed = 0;
  bool json = false;
};

Result<std::vector<int64_t>> ParseBatches(const std::string& text) {
  std::vector<int64_t> out;
  std::stringstream ss(text);
  std::string part;
  while (std::getline(ss, part, ',')) {
    char* end = nullptr;
    long long v = std::strtoll(part.c_str(), &end, 10);
    if (part.empty() || *end != '\0' || v < 1 || v > 65536) {
      return InvalidArgument("bench throughput: --batch: '" + part +
                             "' is not a batch size (1..65536)");
    }
    out.push_back(v);
  }
  if (out.empty()) return InvalidArgument("bench throughput: --batch: no batch sizes");
  return out;
}

int RunThroughput(const ThroughputArgs& args) {
  const std::string what = "bench throughput";
  if (Status st = ValidateDevice(args.device); !st.ok()) return ReportError(st.WithContext(what));
  auto batches = ParseBatches(args.batches);
  if (!batches.ok()) return ReportError(batches.status());
  auto loaded = LoadModel(args.model_dir, what);
  if (!loaded.ok()) return ReportError(loaded.status());
  const engine::ModelConfig& config = loaded->model->config();
  if (args.prompt_len + args.decode_tokens + 1 > config.max_position_embeddings) {
    return ReportError(
        InvalidArgument(what + ": --prompt-len + --decode-tokens exceeds the model's " +
                        std::to_string(config.max_position_embeddings) + " positions"));
  }
  const kernels::Numerics modes[2] = {kernels::Numerics::kCanonical, kernels::Numerics::kFast};
  std::unique_ptr<engine::Engine> engines[2];
  for (int m = 0; m < 2; ++m) {
    engine::EngineOptions options;
    options.numerics = modes[m];
    options.threads = args.threads;
    options.device = args.device;
    options.max_context = std::min<int64_t>(
        config.max_position_embeddings,
        std::max(args.prompt_len + args.decode_tokens + 1, 16));  // 16: the warm-up
    auto e = engine::Engine::Create(loaded->model, options);
    if (!e.ok()) return ReportError(e.status().WithContext(what));
    engines[m] = std::move(e).value();
  }
  // Random prompts (the same for both modes), avoiding special tokens.
  Rng rng(args.seed ^ 0x7468726f75676870ull);
  const int64_t upper = std::min<int64_t>(
      config.vocab_size, loaded->tokenizer ? loaded->tokenizer->vocab_size() : config.vocab_size);
  auto random_token = [&] {
    for (int tries = 0; tries < 64; ++tries) {
      int32_t id = static_cast<int32_t>(rng.Uniform(0, std::max<int64_t>(upper, 1) - 1));
      if (!loaded->tokenizer || !loaded->tokenizer->IsSpecial(id)) return id;
    }
    return int32_t{0};
  };
  Progress progress;
  // Warm-up: first-touch of the weights, thread pool start, device init.
  for (int m = 0; m < 2; ++m) {
    progress.Update("warming up (%s)...", kernels::NumericsName(modes[m]));
    std::vector<std::vector<int32_t>> warm(1, std::vector<int32_t>(8));
    for (auto& t : warm[0]) t = random_token();
    Timing ignored;
    if (Status st = Measure(engines[m].get(), warm, 2, &ignored); !st.ok()) {
      return ReportError(st.WithContext(what));
    }
  }
  struct Row {
    int64_t batch;
    Timing t[2];
  };
  std::vector<Row> rows;
  for (int64_t b : *batches) {
    std::vector<std::vector<int32_t>> prompts(static_cast<size_t>(b),
                                              std::vector<int32_t>(args.prompt_len));
    for (auto& p : prompts) {
      for (auto& t : p) t = random_token();
    }
    Row row{b, {}};
    // Modes alternate within a batch size so that load drifting on the machine hits both.
    for (int rep = 0; rep < args.repeat; ++rep) {
      for (int m = 0; m < 2; ++m) {
        progress.Update("batch %lld: %s, repeat %d/%d...", static_cast<long long>(b),
                        kernels::NumericsName(modes[m]), rep + 1, args.repeat);
        Timing t;
        if (Status st = Measure(engines[m].get(), prompts, args.decode_tokens, &t); !st.ok()) {
          return ReportError(st.WithContext(what + " (batch " + std::to_string(b) + ", " +
                                            kernels::NumericsName(modes[m]) + ")"));
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
  progress.Done();
  const std::string device_desc = engines[0]->DeviceDescription();
  auto ratio = [](double a, double b) { return b > 0 ? a / b : 0.0; };
  // On the CPU: the instruction set that ran and its fp32 FMA peak on the same threads,
  // measured now, so that prefill reads as a fraction of what the machine can do.
  const bool cpu = args.device == "cpu";
  const int peak_threads = args.threads > 0
                               ? args.threads
                               : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  const kernels::Impl isa = bench::ActiveCpuIsa();
  double peak_gflops = 0;
  if (cpu) {
    progress.Update("measuring the fp32 FMA peak (%s)...", kernels::CpuIsaPathName(isa));
    peak_gflops = bench::MeasureFmaPeakGflops(isa, peak_threads);
    progress.Done();
  }
  const double flops_per_token = bench::CostOf(*loaded->model).flops_per_prefill_token;
  auto prefill_gflops = [&](const Timing& t) { return t.prefill_tps * flops_per_token / 1e9; };

  if (args.json) {
    nlohmann::ordered_json j;
    j["command"] = "bench throughput";
    j["model"] = loaded->dir;
    j["architecture"] = config.architecture;
    j["device"] = device_desc;
    j["numerics_version"] = kernels::kNumericsVersion;
    j["prompt_len"] = args.prompt_len;
    j["decode_tokens"] = args.decode_tokens;
    j["repeat"] = args.repeat;
    if (cpu) {
      j["cpu_isa"] = kernels::CpuIsaPathName(isa);
      j["threads"] = peak_threads;
      j["fma_peak_gflops"] = peak_gflops;
    }
    nlohmann::ordered_json list = nlohmann::ordered_json::array();
    for (const auto& r : rows) {
      nlohmann::ordered_json e;
      e["batch"] = r.batch;
      for (int m = 0; m < 2; ++m) {
        e[kernels::NumericsName(modes[m])] = {{"prefill_tokens_per_s", r.t[m].prefill_tps},
                                              {"decode_tokens_per_s", r.t[m].decode_tps},
                                              {"prefill_seconds", r.t[m].prefill_seconds},
                                              {"decode_seconds", r.t[m].decode_seconds}};
      }
      e["prefill_ratio"] = ratio(r.t[0].prefill_tps, r.t[1].prefill_tps);
      e["canonical_prefill_gflops"] = prefill_gflops(r.t[0]);
      if (cpu) e["canonical_prefill_fraction_of_peak"] = ratio(prefill_gflops(r.t[0]), peak_gflops);
      e["decode_ratio"] = ratio(r.t[0].decode_tps, r.t[1].decode_tps);
      list.push_back(e);
    }
    j["rows"] = list;
    std::cout << j.dump() << "\n";
    return kExitOk;
  }
  std::printf("model   %s (%s), %s\n", loaded->dir.c_str(), config.architecture.c_str(),
              device_desc.c_str());
  std::printf(
      "shape   prefill %d tokens per sequence in one forward; decode %d steps; "
      "best of %d; tokens/s of the forward pass\n\n",
      args.prompt_len, args.decode_tokens, args.repeat);
  std::printf("%6s | %-35s | %-35s\n", "", "prefill tokens/s", "decode tokens/s");
  std::printf("%6s | %13s %13s %7s | %13s %13s %7s\n", "batch", "canonical", "fast", "c/f",
              "canonical", "fast", "c/f");
  for (const auto& r : rows) {
    std::printf("%6lld | %13.1f %13.1f %7.3f | %13.1f %13.1f %7.3f\n",
                static_cast<long long>(r.batch), r.t[0].prefill_tps, r.t[1].prefill_tps,
                ratio(r.t[0].prefill_tps, r.t[1].prefill_tps), r.t[0].decode_tps, r.t[1].decode_tps,
                ratio(r.t[0].decode_tps, r.t[1].decode_tps));
  }
  if (cpu) {
    std::printf("\nisa     %s, fp32 FMA peak %.1f GFLOP/s on %d thread(s), measured in this run\n",
                kernels::CpuIsaPathName(isa), peak_gflops, peak_threads);
    for (const auto& r : rows) {
      std::printf(
          "        batch %lld: canonical prefill %.1f GFLOP/s of layer matmuls = %.1f%% of "
          "the peak\n",
          static_cast<long long>(r.batch), prefill_gflops(r.t[0]),
          100 * ratio(prefill_gflops(r.t[0]), peak_gflops));
    }
  }
  return kExitOk;
}

// ---- registration -----------------------------------------------------------------------

void Setup(CLI::App& app, int* exit_code) {
  auto* bench = app.add_subcommand(
      "bench", "Measure determinism under batching, and the throughput cost of canonical numerics");
  bench->require_subcommand(1);
  bench->footer(
      "Examples:\n"
      "  trace bench determinism --numerics canonical      # expect: 1 distinct completion\n"
      "  trace bench determinism --numerics fast --runs 50 # the baseline\n"
      "  trace bench throughput --batch 1,8 --json\n"
      "See docs/cli-bench.md.");

  auto d = std::make_shared<DeterminismArgs>();
  auto* det = bench->add_subcommand(
      "determinism",
      "Complete one prompt --runs times at temperature 0, each run continuously batched with\n"
      "a random number of random other requests; count the distinct completions");
  det->footer(
      "Each run is a small server simulation: the other requests arrive before or after the\n"
      "measured prompt, prefill in random chunks and decode a random number of tokens, all in\n"
      "shared Engine::Forward batches (prefill and decode mixed), the items in random order.\n"
      "It prints 'N distinct completions out of M runs', where later completions first left\n"
      "the first one (run, step, tokens, logits and margin), and, per batch size, the largest\n"
      "|logit difference| against the same step computed alone (batch size 1).\n"
      "Canonical numerics must give 1 completion and a difference of exactly 0.\n\n"
      "Examples:\n"
      "  trace bench determinism --runs 20 --max-tokens 16\n"
      "  trace bench determinism --model ./qwen --numerics fast --device cuda --json");
  det->add_option("--model", d->model_dir, "Model folder (default: the built-in demo model)");
  det->add_option("--device", d->device, "cpu | cuda | cuda:N")->capture_default_str();
  det->add_option("--numerics", d->numerics, "canonical | fast")
      ->check(CLI::IsMember({"canonical", "fast"}))
      ->capture_default_str();
  det->add_option("--runs", d->runs, "Completions of the prompt")
      ->check(CLI::Range(1, 1000000))
      ->capture_default_str();
  det->add_option("--prompt", d->prompt, "The prompt (plain text, tokenized)")
      ->capture_default_str();
  det->add_option("--max-tokens", d->max_tokens, "Tokens per completion")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  det->add_option("--max-others", d->max_others,
                  "Each run adds 0..N random other requests (batch sizes up to N+1)")
      ->check(CLI::Range(0, 4096))
      ->capture_default_str();
  det->add_option("--other-max-len", d->other_max_len, "Longest prompt of another request")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  det->add_option("--seed", d->seed, "Seed of the random other requests")->capture_default_str();
  det->add_option("--threads", d->threads, "CPU threads (0: all)")->check(CLI::Range(0, 1024));
  det->add_flag("--json", d->json, "Print one JSON object");
  det->add_option("--test-perturb", d->test_perturb, "")->group("");
  det->callback([d, exit_code] { *exit_code = RunDeterminism(*d); });

  auto t = std::make_shared<ThroughputArgs>();
  auto* thr = bench->add_subcommand(
      "throughput", "Prefill and decode tokens/s at given batch sizes, canonical vs fast numerics");
  thr->footer(
      "For each batch size B: B sequences of --prompt-len random tokens prefilled in one\n"
      "forward (prefill tokens/s), then --decode-tokens greedy decode steps of all B together\n"
      "(decode tokens/s). Canonical and fast engines run alternately in the same process;\n"
      "c/f is canonical / fast (1.0: determinism is free). Only the forward pass is timed.\n"
      "On the CPU it also names the instruction-set path that ran (avx512, avx2, reference;\n"
      "TRACE_CPU_ISA=scalar|avx2|avx512 caps it) and measures that path's fp32 FMA peak on\n"
      "the same threads, reporting canonical prefill GFLOP/s as a fraction of it.\n\n"
      "Examples:\n"
      "  trace bench throughput --batch 1,8 --prompt-len 64 --decode-tokens 16\n"
      "  trace bench throughput --model ./qwen --device cuda --batch 1,8,64 --json");
  thr->add_option("--model", t->model_dir, "Model folder (default: the built-in demo model)");
  thr->add_option("--device", t->device, "cpu | cuda | cuda:N")->capture_default_str();
  thr->add_option("--batch", t->batches, "Batch sizes, comma-separated")->capture_default_str();
  thr->add_option("--prompt-len", t->prompt_len, "Prompt tokens per sequence (prefill)")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  thr->add_option("--decode-tokens", t->decode_tokens, "Decode steps")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  thr->add_option("--repeat", t->repeat, "Measure each point N times, keep the best")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  thr->add_option("--seed", t->seed, "Seed of the random prompts")->capture_default_str();
  thr->add_option("--threads", t->threads, "CPU threads (0: all)")->check(CLI::Range(0, 1024));
  thr->add_flag("--json", t->json, "Print one JSON object");
  thr->callback([t, exit_code] { *exit_code = RunThroughput(*t); });
}

TRACE_REGISTER_COMMAND(560, Setup);

}  // namespace
}  // namespace trace::cli
