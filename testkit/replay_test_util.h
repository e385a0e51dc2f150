// Helpers for the replayer tests and benchmark: seeded model folders, a one-element weight
// edit, independent step-by-step generation (the engine + sampler, as the recorder does it)
// producing recorded LlmCall events, and a small scripted "agent" whose runs can be made to
// differ in exactly one source of variation.
//
// Ownership: values and temporary folders the caller owns. Thread safety: single-threaded.
// Errors: helpers return Status/Result; tests assert on them.
#pragma once

#include <stdlib.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/build_info.h"
#include "base/hash.h"
#include "engine/engine.h"
#include "engine/model_init.h"
#include "engine/sampler.h"
#include "engine/tokenizer/tokenizer.h"
#include "proto/trace.pb.h"
#include "recorder/server/fingerprint.h"
#include "store/store.h"
#include "testkit/temp_dir.h"

namespace trace::replayer::testing {

using ::trace::testing::TempDir;

inline std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline void WriteAll(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

// Copies model folder `from` to `to` and adds `delta` to element `index` of bf16 tensor
// `tensor` in model.safetensors (parsing the safetensors header to find it).
inline Status CopyModelWithChangedWeight(const std::string& from, const std::string& to,
                                         const std::string& tensor, size_t index, float delta) {
  std::error_code ec;
  std::filesystem::create_directories(to, ec);
  for (const auto& entry : std::filesystem::directory_iterator(from)) {
    std::filesystem::copy_file(entry.path(), to + "/" + entry.path().filename().string(),
                               std::filesystem::copy_options::overwrite_existing, ec);
    if (ec) return IOError("copying " + entry.path().string() + ": " + ec.message());
  }
  std::string path = to + "/model.safetensors";
  std::string bytes = ReadAll(path);
  if (bytes.size() < 8) return Corruption(path + ": too short");
  uint64_t header_len = 0;
  std::memcpy(&header_len, bytes.data(), 8);
  auto header = nlohmann::json::parse(bytes.substr(8, header_len), nullptr, false);
  if (header.is_discarded() || !header.contains(tensor)) {
    return NotFound(path + ": no tensor " + tensor);
  }
  if (header[tensor]["dtype"] != "BF16") return Unsupported(tensor + " is not BF16");
  size_t begin = header[tensor]["data_offsets"][0].get<size_t>();
  size_t at = 8 + header_len + begin + index * 2;
  uint16_t bits = 0;
  std::memcpy(&bits, bytes.data() + at, 2);
  uint32_t f32bits = static_cast<uint32_t>(bits) << 16;
  float value = 0.0f;
  std::memcpy(&value, &f32bits, 4);
  bits = kernels::F32ToBf16RoundNearestEven(value + delta);
  std::memcpy(bytes.data() + at, &bits, 2);
  WriteAll(path, bytes);
  return Status::Ok();
}

// The model fingerprint the recorder writes (recorder/server/fingerprint.h).
inline proto::ModelFingerprint ModelFingerprintProto(const engine::Model& model) {
  proto::ModelFingerprint m;
  recorder::FillModelFingerprint(model, &m);
  return m;
}

inline proto::RunHeader HeaderFor(const engine::Engine& engine) {
  proto::RunHeader h;
  h.mutable_engine()->set_version(TRACE_VERSION);
  h.mutable_engine()->set_git_revision(TRACE_GIT_REVISION);
  h.mutable_engine()->set_compiler(TRACE_COMPILER);
  h.mutable_engine()->set_build_type(TRACE_BUILD_TYPE);
  h.mutable_engine()->set_numerics(kernels::VersionedNumericsName(engine.options().numerics));
  h.mutable_device()->set_device(engine.options().device);
  h.mutable_device()->set_description(engine.DeviceDescription());
  *h.mutable_model() = ModelFingerprintProto(engine.model());
  h.add_argv("scripted-agent");
  return h;
}

// Generates a completion the way the recorder does: one prefill, then one decode step per
// token, sampling with (seed, step); records every column of an LlmCall.
inline Result<proto::LlmCall> GenerateCall(engine::Engine& engine,
                                           const std::vector<int32_t>& prompt,
                                           const engine::SamplingParams& params, uint64_t seed,
                                           bool layer_digests) {
  proto::LlmCall call;
  call.set_endpoint("/v1/completions");
  for (int32_t id : prompt) call.add_prompt_token_ids(id);
  auto* p = call.mutable_params();
  p->set_temperature(params.temperature);
  p->set_top_p(params.top_p);
  p->set_top_k(params.top_k);
  p->set_max_tokens(params.max_tokens);
  p->set_frequency_penalty(params.frequency_penalty);
  p->set_presence_penalty(params.presence_penalty);
  for (const auto& [id, bias] : params.logit_bias) {
    proto::LogitBias* b = p->add_logit_bias();
    b->set_id(id);
    b->set_bias(bias);
  }
  p->set_seed(seed);
  call.set_seed_used(seed);
  call.set_http_status(200);
  call.set_numerics(kernels::VersionedNumericsName(engine.options().numerics));
  const int layers = static_cast<int>(engine.model().config().num_layers);
  if (layer_digests) call.set_num_layers(layers);
  const auto& eos = engine.model().config().eos_token_ids;

  engine::SeqId seq = engine.NewSequence();
  std::vector<int32_t> feed = prompt;
  std::vector<uint64_t> step_layers(layers);
  engine::LayerProbe probe = [&](size_t, int32_t, int layer, std::span<const float> hidden) {
    step_layers[layer] = Digest64(hidden.data(), hidden.size_bytes());
  };
  std::vector<int32_t> step_route;  // MoE models: the route, layer by layer
  engine::RouteProbe route_probe = [&](size_t, int32_t, int, std::span<const int32_t> ids) {
    step_route.insert(step_route.end(), ids.begin(), ids.end());
  };
  engine::ForwardOutput out;
  for (int step = 0; step < params.max_tokens; ++step) {
    engine::BatchItem item;
    item.seq = seq;
    item.tokens = feed;
    item.logits_at = {static_cast<int32_t>(feed.size() - 1)};
    step_route.clear();
    Status st = layer_digests ? engine.Forward({&item, 1}, &out, &probe, &route_probe)
                              : engine.Forward({&item, 1}, &out);
    if (!st.ok()) {
      engine.FreeSequence(seq);
      return st;
    }
    auto logits = out.row(0);
    std::vector<int32_t> generated(call.token_ids().begin(), call.token_ids().end());
    engine::SampleResult s = engine::Sample(logits, params, seed, step, {}, generated);
    call.add_token_ids(s.token);
    call.add_logits_digests(LogitsDigest(logits));
    call.add_logits(s.logit);
    call.add_logprobs(s.logprob);
    call.add_runner_up_ids(s.runner_up);
    call.add_runner_up_logits(s.runner_up_logit);
    if (layer_digests) {
      for (uint64_t d : step_layers) call.add_layer_digests(d);
      call.set_route_width(static_cast<int32_t>(step_route.size()));
      for (int32_t id : step_route) call.add_route_ids(id);
    }
    feed = {s.token};
    if (std::find(eos.begin(), eos.end(), s.token) != eos.end()) break;
  }
  engine.FreeSequence(seq);
  call.set_finish_reason(call.token_ids_size() == params.max_tokens ? "length" : "stop");
  return call;
}

// A scripted agent run whose every input can be varied: it reads a clock, sets a template
// variable, retrieves a context chunk, asks the model, calls a tool, asks again.
struct AgentInputs {
  std::string user_name = "Ada";
  std::string clock_text = "2026-11-29T10:00:00Z";
  std::string chunk = "Invoices are kept for seven years.";
  std::string tool_result = "{\"balance\": 120}";
  uint64_t seed = 7;
  float temperature = 0.8f;
  int max_tokens = 12;
  bool layer_digests = false;
};

struct AgentRun {
  proto::RunHeader header;
  std::vector<proto::Event> events;
};

inline proto::Event LlmEvent(proto::LlmCall call, const std::string& rendered) {
  call.set_rendered_prompt(rendered);
  proto::Event e;
  *e.mutable_llm_call() = std::move(call);
  return e;
}

inline Result<AgentRun> RunScriptedAgent(engine::Engine& engine, const engine::Tokenizer& tokenizer,
                                         const AgentInputs& in) {
  AgentRun run;
  run.header = HeaderFor(engine);
  auto add = [&](proto::Event e) { run.events.push_back(std::move(e)); };
  proto::Event clock;
  clock.mutable_clock_read()->set_clock("wall");
  clock.mutable_clock_read()->set_text(in.clock_text);
  add(clock);
  proto::Event var;
  var.mutable_template_var()->set_name("user_name");
  var.mutable_template_var()->set_value(in.user_name);
  var.mutable_template_var()->set_template_name("system");
  add(var);
  proto::Event chunk;
  chunk.mutable_context_chunk()->set_source("docs/policy.md");
  chunk.mutable_context_chunk()->set_chunk_id("policy-3");
  chunk.mutable_context_chunk()->set_query("how long are invoices kept");
  chunk.mutable_context_chunk()->set_content(in.chunk);
  add(chunk);

  engine::SamplingParams params;
  params.temperature = in.temperature;
  params.max_tokens = in.max_tokens;
  std::string prompt1 = "System: you help " + in.user_name + ". Today is " + in.clock_text +
                        ".\nContext: " + in.chunk + "\nUser: what is my balance?\nAssistant:";
  TRACE_ASSIGN_OR_RETURN(proto::LlmCall c1, GenerateCall(engine, tokenizer.Encode(prompt1), params,
                                                         in.seed, in.layer_digests));
  std::vector<int32_t> out1(c1.token_ids().begin(), c1.token_ids().end());
  std::string answer1 = tokenizer.Decode(out1);
  add(LlmEvent(std::move(c1), prompt1));

  proto::Event tool_call;
  tool_call.mutable_tool_call()->set_call_id("call_1");
  tool_call.mutable_tool_call()->set_name("get_balance");
  tool_call.mutable_tool_call()->set_arguments_json("{\"account\": \"ada\"}");
  tool_call.mutable_tool_call()->set_source("model");
  add(tool_call);
  proto::Event result;
  result.mutable_tool_result()->set_call_id("call_1");
  result.mutable_tool_result()->set_name("get_balance");
  result.mutable_tool_result()->set_content(in.tool_result);
  add(result);

  std::string prompt2 =
      prompt1 + answer1 + "\nTool get_balance: " + in.tool_result + "\nAssistant:";
  TRACE_ASSIGN_OR_RETURN(proto::LlmCall c2, GenerateCall(engine, tokenizer.Encode(prompt2), params,
                                                         in.seed + 1, in.layer_digests));
  add(LlmEvent(std::move(c2), prompt2));
  return run;
}

// Writes `run` to `store` as a new run; `end` false leaves it incomplete (as a crash would).
inline Result<std::string> WriteRun(store::Store& store, const AgentRun& run, bool end = true) {
  TRACE_ASSIGN_OR_RETURN(auto writer, store.BeginRun(run.header));
  for (const auto& e : run.events) {
    TRACE_ASSIGN_OR_RETURN(uint64_t seq, writer->Append(e));
    (void)seq;
  }
  if (end) {
    proto::RunEnd how;
    how.set_how(proto::RunEnd::EXITED);
    TRACE_ASSIGN_OR_RETURN(uint64_t seq, writer->End(how));
    (void)seq;
  } else {
    TRACE_RETURN_IF_ERROR(writer->Flush());
  }
  return writer->run_id();
}

}  // namespace trace::replayer::testing
