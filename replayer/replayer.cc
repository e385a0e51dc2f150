#include "replayer/replayer.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "base/build_info.h"
#include "base/files.h"
#include "engine/engine.h"
#include "engine/fingerprint.h"
#include "engine/model_files.h"
#include "engine/tokenizer/tokenizer.h"

namespace trace::replayer {
namespace {

void Compare(const std::string& field, const std::string& recorded, const std::string& current,
             std::vector<FieldDifference>* out) {
  // A field the recording left empty was not known then; nothing to compare.
  if (recorded.empty() || recorded == current) return;
  out->push_back({field, recorded, current});
}

// The safetensors files of a model folder, in name order (what weights_sha256 covers).
std::string WeightFiles(const std::string& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::string name = it->path().filename().string();
    if (name.size() > 12 && name.ends_with(".safetensors")) names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  std::string joined;
  for (const auto& n : names) joined += (joined.empty() ? "" : ", ") + n;
  return joined.empty() ? "*.safetensors" : joined;
}

std::vector<FieldDifference> ModelDifferences(const proto::ModelFingerprint& recorded,
                                              const engine::ModelFingerprint& current,
                                              const std::string& dir) {
  std::vector<FieldDifference> out;
  Compare("model.weights_sha256 (" + WeightFiles(dir) + ")", recorded.weights_sha256(),
          current.weights_sha256, &out);
  Compare("model.config_sha256 (config.json)", recorded.config_sha256(), current.config_sha256,
          &out);
  Compare("model.tokenizer_sha256 (tokenizer.json)", recorded.tokenizer_sha256(),
          current.tokenizer_sha256, &out);
  Compare("model.chat_template_sha256 (tokenizer_config.json chat_template)",
          recorded.chat_template_sha256(), current.chat_template_sha256, &out);
  Compare("model.architecture", recorded.architecture(), current.architecture, &out);
  Compare("model.dtype", recorded.dtype(), current.dtype, &out);
  return out;
}

// Every fingerprint field that differs between the recording and this machine and engine,
// named: the build, the numerics, the kernel path (AVX2 / reference / CUDA), the CPU, and the
// GPU stack (device, compute capability, driver, runtime, cuBLAS). A field the recording left
// empty was not known then and is not compared.
std::vector<FieldDifference> FingerprintDifferences(const proto::RunHeader& header,
                                                    const engine::Engine& engine,
                                                    const std::string& numerics) {
  std::vector<FieldDifference> out;
  const engine::EngineDeviceFingerprint now = engine::DescribeEngineDevice(engine);
  const auto& e = header.engine();
  Compare("engine.version", e.version(), TRACE_VERSION, &out);
  Compare("engine.git_revision", e.git_revision(), TRACE_GIT_REVISION, &out);
  Compare("engine.compiler", e.compiler(), TRACE_COMPILER, &out);
  Compare("engine.build_type", e.build_type(), TRACE_BUILD_TYPE, &out);
  Compare("engine.numerics", e.numerics(), numerics, &out);
  // Runs recorded before the kernel path was named say "auto": not comparable.
  if (e.kernel_impl() != "auto")
    Compare("engine.kernel_impl", e.kernel_impl(), now.kernel_path, &out);
  const auto& d = header.device();
  Compare("device.device", d.device(), now.device, &out);
  Compare("device.description", d.description(), now.description, &out);
  Compare("device.cpu_model", d.cpu_model(), now.cpu_model, &out);
  Compare("device.os", d.os(), now.os, &out);
  Compare("device.gpu_name", d.gpu_name(), now.gpu_name, &out);
  Compare("device.gpu_compute_capability", d.gpu_compute_capability(), now.gpu_compute_capability,
          &out);
  Compare("device.gpu_driver_version", d.gpu_driver_version(), now.gpu_driver_version, &out);
  Compare("device.cuda_runtime_version", d.cuda_runtime_version(), now.cuda_runtime_version, &out);
  Compare("device.cublas_version", d.cublas_version(), now.cublas_version, &out);
  // Under one canonical contract on both sides every other field is only where and with
  // what the same arithmetic ran (docs/numerics.md).
  const bool one_contract = e.numerics() == numerics && numerics.rfind("canonical", 0) == 0;
  for (FieldDifference& f : out) f.same_contract = one_contract && f.field != "engine.numerics";
  return out;
}

}  // namespace

const Divergence* RunReport::first_divergence() const {
  for (const auto& c : calls) {
    if (c.divergence) return &*c.divergence;
  }
  return nullptr;
}

Result<kernels::Numerics> ParseNumerics(const std::string& text) {
  kernels::Numerics numerics;
  if (kernels::ParseNumerics(text, &numerics)) return numerics;
  return InvalidArgument("numerics '" + text + "' is not one of canonical, fast");
}

Result<std::vector<int>> ParseCallList(const std::string& text) {
  std::set<int> calls;
  std::stringstream in(text);
  std::string part;
  while (std::getline(in, part, ',')) {
    if (part.empty()) continue;
    size_t dash = part.find('-');
    try {
      size_t used = 0;
      if (dash == std::string::npos) {
        int v = std::stoi(part, &used);
        if (used != part.size() || v < 1) throw std::invalid_argument(part);
        calls.insert(v);
      } else {
        std::string a = part.substr(0, dash), b = part.substr(dash + 1);
        size_t ua = 0, ub = 0;
        int lo = std::stoi(a, &ua), hi = std::stoi(b, &ub);
        if (ua != a.size() || ub != b.size() || lo < 1 || hi < lo || hi - lo > 1000000) {
          throw std::invalid_argument(part);
        }
        for (int v = lo; v <= hi; ++v) calls.insert(v);
      }
    } catch (const std::exception&) {
      return InvalidArgument("--calls: '" + part +
                             "' is not a call number or range (1-based, e.g. 1,3,5-7)");
    }
  }
  if (calls.empty()) return InvalidArgument("--calls: '" + text + "' names no call");
  return std::vector<int>(calls.begin(), calls.end());
}

Result<RecordedCall> ToRecordedCall(const proto::LlmCall& call, int call_number, uint64_t seq) {
  RecordedCall out;
  out.index = call_number;
  out.event_id = "seq " + std::to_string(seq);
  out.prompt_tokens.assign(call.prompt_token_ids().begin(), call.prompt_token_ids().end());
  const auto& p = call.params();
  out.params.temperature = p.temperature();
  out.params.top_p = p.top_p();
  out.params.top_k = p.top_k();
  out.params.max_tokens = p.max_tokens();
  out.params.stop.assign(p.stop().begin(), p.stop().end());
  out.params.frequency_penalty = p.frequency_penalty();
  out.params.presence_penalty = p.presence_penalty();
  for (const proto::LogitBias& b : p.logit_bias())
    out.params.logit_bias.emplace_back(b.id(), b.bias());
  // The recorder writes them ascending and unique; a hand-edited trace may not.
  std::sort(out.params.logit_bias.begin(), out.params.logit_bias.end());
  engine::SamplingParams adjustments;  // the new fields alone: old traces may lack top_p
  adjustments.frequency_penalty = out.params.frequency_penalty;
  adjustments.presence_penalty = out.params.presence_penalty;
  adjustments.logit_bias = out.params.logit_bias;
  if (Status st = engine::ValidateSamplingParams(adjustments); !st.ok()) {
    return Corruption("call " + std::to_string(call_number) + " (event seq " + std::to_string(seq) +
                      "): " + st.message());
  }
  out.seed = call.seed_used();
  out.constraint_json = call.constraint_json();
  out.numerics = call.numerics();
  const int n = call.token_ids_size();
  auto where = [&](const char* field, int size) {
    return Corruption("call " + std::to_string(call_number) + " (event seq " + std::to_string(seq) +
                      "): " + field + " has " + std::to_string(size) + " entries for " +
                      std::to_string(n) + " sampled tokens");
  };
  // Optional columns are either absent or one entry per sampled token.
  if (call.logits_digests_size() != 0 && call.logits_digests_size() != n) {
    return where("logits_digests", call.logits_digests_size());
  }
  if (call.logits_size() != 0 && call.logits_size() != n)
    return where("logits", call.logits_size());
  if (call.runner_up_ids_size() != 0 && call.runner_up_ids_size() != n) {
    return where("runner_up_ids", call.runner_up_ids_size());
  }
  if (call.runner_up_logits_size() != call.runner_up_ids_size()) {
    return where("runner_up_logits", call.runner_up_logits_size());
  }
  const int layers = call.num_layers();
  if (call.layer_digests_size() != 0 &&
      (layers <= 0 || call.layer_digests_size() != static_cast<int64_t>(n) * layers)) {
    return where("layer_digests (num_layers x tokens)", call.layer_digests_size());
  }
  const int route_width = call.route_width();
  if (call.route_ids_size() != 0 &&
      (route_width <= 0 || call.route_ids_size() != static_cast<int64_t>(n) * route_width)) {
    return where("route_ids (route_width x tokens)", call.route_ids_size());
  }
  for (int i = 0; i < n; ++i) {
    RecordedToken t;
    t.id = call.token_ids(i);
    if (call.logits_digests_size() == n) t.logits_digest = call.logits_digests(i);
    if (call.logits_size() == n) t.logit = call.logits(i);
    if (call.runner_up_ids_size() == n) {
      t.runner_up = call.runner_up_ids(i);
      t.runner_up_logit = call.runner_up_logits(i);
    }
    if (call.layer_digests_size() != 0) {
      t.layer_digests.assign(call.layer_digests().begin() + static_cast<int64_t>(i) * layers,
                             call.layer_digests().begin() + static_cast<int64_t>(i + 1) * layers);
    }
    if (call.route_ids_size() != 0) {
      t.route.assign(call.route_ids().begin() + static_cast<int64_t>(i) * route_width,
                     call.route_ids().begin() + static_cast<int64_t>(i + 1) * route_width);
    }
    out.output.push_back(std::move(t));
  }
  return out;
}

EngineCache::EngineCache() = default;
EngineCache::~EngineCache() = default;

// What EngineCache's key is made of: the folder's files, or the GGUF file (name, size,
// modification time: a model file replaced or edited in place changes it) and the engine's
// options.
struct EngineCacheAccess {
  static const engine::Model* ModelOf(EngineCache& c) { return c.model_.get(); }
  static engine::Engine* EngineOf(EngineCache& c) { return c.engine_.get(); }
  static const engine::Tokenizer* TokenizerOf(EngineCache& c) { return c.tokenizer_.get(); }
  static Result<std::string> Key(const std::string& dir, const engine::EngineOptions& o) {
    std::string key = dir + "\n" + o.device + "\n" + std::to_string(static_cast<int>(o.numerics)) +
                      "\n" + std::to_string(o.threads) + "\n" + std::to_string(o.max_context);
    std::error_code ec;
    std::vector<std::string> files;
    auto add = [&files](const std::filesystem::directory_entry& e) {
      std::error_code fec;
      const auto size = e.file_size(fec);
      const auto mtime = e.last_write_time(fec);
      files.push_back(e.path().filename().string() + " " + std::to_string(fec ? 0 : size) + " " +
                      std::to_string(mtime.time_since_epoch().count()));
    };
    if (std::filesystem::is_regular_file(dir, ec)) {  // a GGUF file: the model is that file
      add(std::filesystem::directory_entry(dir, ec));
    } else {
      std::filesystem::directory_iterator it(dir, ec), end;
      for (; !ec && it != end; it.increment(ec)) add(*it);
    }
    if (ec) return IOError("model " + dir + ": " + ec.message());
    std::sort(files.begin(), files.end());
    for (const std::string& f : files) key += "\n" + f;
    return key;
  }

  static Status Load(EngineCache& cache, const std::string& dir, const engine::EngineOptions& o,
                     const std::string& run_id) {
    TRACE_ASSIGN_OR_RETURN(std::string key, Key(dir, o));
    if (cache.engine_ && key == cache.key_) return Status::Ok();
    cache.key_.clear();
    cache.engine_.reset();
    cache.tokenizer_.reset();
    cache.model_.reset();
    auto model = engine::Model::Load(dir, /*hash_weights=*/true);
    if (!model.ok()) return model.status().WithContext("loading model for run " + run_id);
    TRACE_ASSIGN_OR_RETURN(std::unique_ptr<engine::Engine> eng, engine::Engine::Create(*model, o));
    std::unique_ptr<engine::Tokenizer> tokenizer;
    TRACE_ASSIGN_OR_RETURN(bool has_tokenizer, engine::HasModelTokenizer(dir));
    if (has_tokenizer) {
      auto tok = engine::LoadModelTokenizer(dir);
      if (!tok.ok()) return tok.status().WithContext("run " + run_id);
      tokenizer = std::move(*tok);
    }
    cache.model_ = std::move(*model);
    cache.engine_ = std::move(eng);
    cache.tokenizer_ = std::move(tokenizer);
    cache.key_ = std::move(key);
    ++cache.loads_;
    return Status::Ok();
  }
};

Result<RunReport> ReplayRun(store::Store& store, const std::string& run_id_or_prefix,
                            const ReplayOptions& options) {
  auto started = std::chrono::steady_clock::now();
  TRACE_ASSIGN_OR_RETURN(std::string run_id, store.ResolveRunId(run_id_or_prefix));
  TRACE_ASSIGN_OR_RETURN(proto::RunHeader header, store.LoadHeader(run_id));
  // A newer format may carry sampling inputs this build ignores (format 3 added the
  // penalties and logit_bias): replaying without them would report a false divergence.
  if (header.format_version() > static_cast<uint32_t>(proto::CURRENT_FORMAT_VERSION)) {
    return FailedPrecondition("run " + run_id + " is trace format " +
                              std::to_string(header.format_version()) +
                              ", newer than this build replays (" +
                              std::to_string(proto::CURRENT_FORMAT_VERSION) + "); upgrade trace");
  }
  TRACE_ASSIGN_OR_RETURN(store::RunSummary summary, store.GetRunSummary(run_id));
  TRACE_ASSIGN_OR_RETURN(std::vector<proto::Event> events, store.LoadEvents(run_id));

  RunReport report;
  report.run_id = run_id;
  report.run_status = std::string(store::RunStatusName(summary.status));
  report.batch = std::max(options.batch, 1);

  // The calls: those the engine can re-execute, those an upstream model answered (recorded
  // only), and those that failed.
  const auto& attributes = header.attributes();
  if (auto it = attributes.find("upstream"); it != attributes.end()) report.upstream = it->second;
  std::vector<std::pair<int, const proto::Event*>> to_verify;  // (call number, event)
  int number = 0;
  for (const auto& event : events) {
    if (!event.has_llm_call()) continue;
    ++number;
    const proto::LlmCall& call = event.llm_call();
    if (!options.calls.empty() &&
        !std::binary_search(options.calls.begin(), options.calls.end(), number)) {
      continue;
    }
    if (call.http_status() != 0 && call.http_status() != 200) {
      report.skipped.push_back({number, event.seq(),
                                "the request failed (HTTP " + std::to_string(call.http_status()) +
                                    "): " + call.error()});
      continue;
    }
    if (!call.upstream().empty() ||
        (!report.upstream.empty() && call.prompt_token_ids_size() == 0)) {
      const std::string& url = call.upstream().empty() ? report.upstream : call.upstream();
      report.recorded_only.push_back({number, event.seq(),
                                      "answered by the upstream " + url +
                                          (call.api().empty() ? "" : " (" + call.api() + ")") +
                                          ", which gives no token ids to re-execute"});
      continue;
    }
    if (call.prompt_token_ids_size() == 0) {
      report.skipped.push_back({number, event.seq(), "no prompt tokens recorded"});
      continue;
    }
    to_verify.emplace_back(number, &event);
  }
  report.calls_in_run = number;
  for (int c : options.calls) {
    if (c > number) {
      return InvalidArgument("--calls: run " + run_id + " has " + std::to_string(number) +
                             " model calls, no call " + std::to_string(c));
    }
  }
  if (!report.recorded_only.empty() || !report.upstream.empty()) {
    report.level = Level::kRecordedOnly;
  }
  if (to_verify.empty() && !report.upstream.empty()) {
    // A run against a hosted model: there is no model here to load, nothing to re-execute.
    report.seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    return report;
  }

  // The model: the recorded folder, which must hash as recorded, or --model on purpose.
  const std::string recorded_dir = header.model().model_dir();
  report.model_dir = options.model_dir.empty() ? recorded_dir : options.model_dir;
  if (report.model_dir.empty()) {
    return InvalidArgument("run " + run_id + " does not name its model folder; pass --model DIR");
  }
  auto has_config = engine::IsModelPath(report.model_dir);
  if (!has_config.ok()) {
    return has_config.status().WithContext(
        "the model folder run " + run_id + " recorded" +
        (options.model_dir.empty() ? " (pass --model DIR to replay against another)" : ""));
  }
  if (!*has_config) {
    return NotFound(
        "model " + report.model_dir + " (run " + run_id +
        ") is not a model: no config.json in it, and not a GGUF file" +
        (options.model_dir.empty() ? "; pass --model DIR to replay against another" : ""));
  }
  // The engine, in the recorded numerics unless told otherwise.
  engine::EngineOptions eopts;
  std::string numerics_text =
      options.numerics.empty() ? header.engine().numerics() : options.numerics;
  if (numerics_text.empty()) numerics_text = "canonical";
  TRACE_ASSIGN_OR_RETURN(eopts.numerics, ParseNumerics(numerics_text));
  eopts.device = options.device;
  eopts.threads = options.threads;
  if (header.engine().max_context() > 0) eopts.max_context = header.engine().max_context();
  EngineCache own;  // without a cache: this call's alone
  EngineCache& cache = options.cache ? *options.cache : own;
  TRACE_RETURN_IF_ERROR(EngineCacheAccess::Load(cache, report.model_dir, eopts, run_id));
  const engine::Model* model = EngineCacheAccess::ModelOf(cache);
  engine::Engine* eng = EngineCacheAccess::EngineOf(cache);
  const engine::Tokenizer* tokenizer = EngineCacheAccess::TokenizerOf(cache);
  report.model_differences =
      ModelDifferences(header.model(), model->fingerprint(), report.model_dir);
  if (!report.model_differences.empty()) {
    if (options.model_dir.empty()) {
      const auto& d = report.model_differences.front();
      return FailedPrecondition("model at " + report.model_dir + " differs from the one run " +
                                run_id + " recorded: " + d.field + " is " + d.current +
                                ", recorded " + d.recorded +
                                "; pass --model DIR to replay against it on purpose");
    }
    report.model_override = true;
  }
  report.numerics = kernels::VersionedNumericsName(eopts.numerics);
  report.device = eng->DeviceDescription();
  report.device_fingerprint = engine::DescribeEngineDevice(*eng);
  report.fingerprint_differences = FingerprintDifferences(header, *eng, report.numerics);

  std::vector<RecordedCall> calls;
  for (const auto& [call_number, event] : to_verify) {
    TRACE_ASSIGN_OR_RETURN(RecordedCall rc,
                           ToRecordedCall(event->llm_call(), call_number, event->seq()));
    if (rc.numerics.empty()) rc.numerics = header.engine().numerics();
    calls.push_back(std::move(rc));
  }
  VerifyOptions vopts;
  vopts.batch = report.batch;
  // The recorder's end tokens: the model's eos ids, the tokenizer's eos and <|im_end|>.
  vopts.eos_token_ids = model->config().eos_token_ids;
  if (tokenizer) {
    if (auto id = tokenizer->TokenId("<|im_end|>")) vopts.eos_token_ids.push_back(*id);
    if (auto id = tokenizer->eos_token_id()) vopts.eos_token_ids.push_back(*id);
  }
  vopts.constraints = options.constraints;
  ReplayProgress progress;
  progress.calls_total = static_cast<int>(calls.size());
  for (const auto& c : calls) progress.tokens_total += static_cast<int64_t>(c.output.size());
  for (const auto& c : calls) {
    auto call_report = VerifyCall(*eng, tokenizer, c, vopts);
    if (!call_report.ok()) return call_report.status().WithContext("run " + run_id);
    report.tokens_verified += call_report->tokens_verified;
    report.routes_checked += call_report->routes_checked;
    report.routes_differ += call_report->routes_differ;
    report.level = std::max(report.level, call_report->level);
    report.calls.push_back(std::move(*call_report));
    ++progress.calls_done;
    progress.tokens_done += static_cast<int64_t>(c.output.size());
    progress.seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    if (options.progress) options.progress(progress);
  }
  report.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return report;
}

}  // namespace trace::replayer
