#include "recorder/server/local_engine.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "recorder/server/call_recording.h"

namespace trace::recorder {

using json = nlohmann::json;

LocalEngineApi::LocalEngineApi(LocalBackend backend, HttpFrontend* frontend,
                               const std::string& id_prefix)
    : backend_(std::move(backend)), frontend_(frontend), id_prefix_(id_prefix) {
  classes_ = std::make_unique<TokenClasses>(*backend_.tokenizer);
  const engine::Tokenizer& tok = *backend_.tokenizer;
  if (auto id = tok.TokenId("<|im_end|>")) end_tokens_.push_back(*id);
  if (auto id = tok.eos_token_id()) end_tokens_.push_back(*id);
  for (int32_t id : backend_.model->config().eos_token_ids) end_tokens_.push_back(id);
  std::sort(end_tokens_.begin(), end_tokens_.end());
  end_tokens_.erase(std::unique(end_tokens_.begin(), end_tokens_.end()), end_tokens_.end());
  turn_end_token_ =
      tok.TokenId("<|im_end|>").value_or(end_tokens_.empty() ? 0 : end_tokens_.front());
  const auto& eo = backend_.scheduler->engine().options();
  max_context_ =
      eo.max_context > 0 ? eo.max_context : backend_.model->config().max_position_embeddings;
  numerics_ = eo.numerics == kernels::Numerics::kCanonical ? kernels::kNumericsVersion : "fast";
}

void LocalEngineApi::Register() {
  httplib::Server& http = frontend_->http();
  http.Get("/v1/models",
           [this](const httplib::Request& req, httplib::Response& res) { HandleModels(req, res); });
  http.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
    HandleCompletion(req, res, /*chat=*/true);
  });
  http.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
    HandleCompletion(req, res, /*chat=*/false);
  });
}

void LocalEngineApi::HandleModels(const httplib::Request& req, httplib::Response& res) {
  if (!frontend_->Authorized(req, res)) return;
  json body = {{"object", "list"},
               {"data", json::array({{{"id", backend_.model_name},
                                      {"object", "model"},
                                      {"created", 0},
                                      {"owned_by", "trace"}}})}};
  res.set_content(body.dump(), "application/json");
}

void LocalEngineApi::HandleCompletion(const httplib::Request& http_req, httplib::Response& res,
                                      bool chat) {
  if (!frontend_->Authorized(http_req, res)) return;
  auto call = std::make_shared<Call>();
  call->start = SteadyClock::now();
  call->start_ns = NowNs();
  call->body = http_req.body;
  call->endpoint = chat ? "/v1/chat/completions" : "/v1/completions";
  auto parsed = ParseCompletionRequest(http_req.body, chat);
  if (auto* err = std::get_if<ApiError>(&parsed)) {
    frontend_->Reject(http_req, *err);
    return SendError(res, *err);
  }
  call->req = std::move(std::get<CompletionRequest>(parsed));
  CompletionRequest& req = call->req;
  if (req.model != backend_.model_name) {
    ApiError e;
    e.http_status = 404;
    e.code = "model_not_found";
    e.param = "model";
    e.message = "model \"" + req.model + "\" is not served here; this server serves \"" +
                backend_.model_name + "\"";
    frontend_->Reject(http_req, e);
    return SendError(res, e);
  }
  if (std::optional<ApiError> err = Prepare(call.get())) {
    frontend_->Reject(http_req, *err);
    return SendError(res, *err);
  }

  GenerationRequest gen_req;
  gen_req.prompt = call->prompt_ids;
  gen_req.sampling = req.sampling;
  gen_req.seed = call->seed;
  gen_req.end_tokens = end_tokens_;
  gen_req.want_logprobs = req.logprobs;
  gen_req.top_logprobs = req.top_logprobs;
  if (!call->constraint_json.empty()) {
    auto c = Constraint::Create(json::parse(call->constraint_json), *backend_.tokenizer, *classes_,
                                turn_end_token_);
    if (!c.ok()) {
      ApiError e = BadRequest("tool_choice", c.status().message());
      frontend_->Reject(http_req, e);
      return SendError(res, e);
    }
    gen_req.constraint = std::move(c).value();
  }
  call->decoder = std::make_unique<engine::IncrementalDecoder>(*backend_.tokenizer, true);
  if (req.stream) call->stream = std::make_shared<StreamQueue>();
  Call* raw = call.get();
  gen_req.on_token = [raw](const TokenStep& step) { return OnToken(raw, step); };
  if (call->stream) {
    gen_req.on_finish = [q = call->stream] {
      {
        std::lock_guard<std::mutex> lock(q->mu);
        q->finished = true;
      }
      q->cv.notify_all();
    };
  }
  call->gen = backend_.scheduler->Submit(std::move(gen_req));

  if (!req.stream) {
    const GenerationResult& result = call->gen->Wait();
    auto [status, body] = Finalize(call.get(), result);
    res.status = status;
    res.set_content(body, "application/json");
    return;
  }
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream",
      [this, call](size_t, httplib::DataSink& sink) { return StreamResponse(call.get(), sink); });
}

std::optional<ApiError> LocalEngineApi::Prepare(Call* call) {
  CompletionRequest& req = call->req;
  if (req.chat) {
    // Everything the template sees keeps the client's key order (RenderOrdered), as
    // Hugging Face's apply_chat_template does with Python dicts: a tool schema's
    // properties print in the order sent, not sorted.
    nlohmann::ordered_json kwargs = nullptr;
    if (auto k = req.raw_ordered.find("chat_template_kwargs");
        k != req.raw_ordered.end() && k->is_object()) {
      kwargs = *k;
    }
    nlohmann::ordered_json ordered_tools = ToolsForTemplateOrdered(req.tools);
    if (req.tool_choice == ToolChoice::kNone) ordered_tools = nullptr;
    json tools = ordered_tools;
    Result<std::string> prompt = backend_.chat_template->RenderOrdered(
        MessagesForTemplateOrdered(req.messages), ordered_tools,
        /*add_generation_prompt=*/true, kwargs);
    if (!prompt.ok()) {
      ApiError e = BadRequest("messages", "chat template: " + prompt.status().message());
      e.http_status = 422;
      return e;
    }
    call->rendered_prompt = std::move(prompt).value();
    call->tools_active = tools.is_array();
    if (req.tool_choice == ToolChoice::kRequired || req.tool_choice == ToolChoice::kNamed) {
      call->constraint_json =
          ToolCallConstraintSpec(
              tools, req.tool_choice == ToolChoice::kNamed ? req.tool_choice_name : std::string())
              .dump();
    }
  } else {
    call->rendered_prompt = req.prompt;
  }
  if (!req.guided_choice.empty()) {
    call->constraint_json = GuidedChoiceSpec(req.guided_choice).dump();
    call->tools_active = false;
  }
  call->prompt_ids = backend_.tokenizer->Encode(call->rendered_prompt);
  if (call->prompt_ids.empty())
    return BadRequest(req.chat ? "messages" : "prompt", "the prompt is empty");
  int64_t n = static_cast<int64_t>(call->prompt_ids.size());
  if (max_context_ > 0 && n >= max_context_) {
    ApiError e = BadRequest(req.chat ? "messages" : "prompt",
                            "the prompt has " + std::to_string(n) +
                                " tokens; the model's context is " + std::to_string(max_context_));
    e.code = "context_length_exceeded";
    return e;
  }
  if (max_context_ > 0 && n + req.sampling.max_tokens > max_context_) {
    req.sampling.max_tokens = static_cast<int32_t>(max_context_ - n);
  }
  for (const std::string& s : req.sampling.stop)
    call->max_stop_len = std::max(call->max_stop_len, s.size());
  call->call_index = next_call_index_++;
  call->seed =
      req.seed ? *req.seed : DeriveCallSeed(frontend_->options().run_seed, call->call_index);
  call->created = call->start_ns / 1000000000;
  call->request_id = std::string(req.chat ? "chatcmpl-" : "cmpl-") + id_prefix_ + "-" +
                     std::to_string(call->call_index);
  if (RunLog* log = frontend_->log()) RecordToolResultsFromMessages(log, req);
  return std::nullopt;
}

bool LocalEngineApi::OnToken(Call* call, const TokenStep& step) {
  if (call->stop_hit) return true;
  call->text += call->decoder->Push(step.token);
  for (const std::string& s : call->req.sampling.stop) {
    size_t from = call->text.size() > s.size() + 64 ? call->text.size() - s.size() - 64 : 0;
    size_t pos = call->text.find(s, from);
    if (pos != std::string::npos) {
      call->text.resize(pos);
      call->stop_hit = true;
    }
  }
  if (call->stream && !call->tools_active) {
    size_t hold = call->max_stop_len > 0 ? call->max_stop_len - 1 : 0;
    size_t safe = call->stop_hit ? call->text.size()
                                 : (call->text.size() > hold ? call->text.size() - hold : 0);
    while (safe > call->emitted && safe < call->text.size() &&
           (static_cast<unsigned char>(call->text[safe]) & 0xC0) == 0x80) {
      --safe;
    }
    if (safe > call->emitted) {
      {
        std::lock_guard<std::mutex> lock(call->stream->mu);
        call->stream->deltas.push_back(call->text.substr(call->emitted, safe - call->emitted));
      }
      call->emitted = safe;
      call->stream->cv.notify_all();
    }
  }
  return call->stop_hit;
}

CompletionResult LocalEngineApi::BuildResult(Call* call, const GenerationResult& g) {
  CompletionResult r;
  r.id = call->request_id;
  r.created = call->created;
  r.model = backend_.model_name;
  r.system_fingerprint = std::string("trace-") + numerics_;
  if (!call->stop_hit) call->text += call->decoder->Flush();
  r.text = call->text;
  r.finish_reason = g.finish_reason == "cancelled" ? "stop" : g.finish_reason;
  r.prompt_tokens = static_cast<int64_t>(call->prompt_ids.size());
  r.completion_tokens = static_cast<int64_t>(g.steps.size());
  r.cached_prompt_tokens = g.reused_prompt_tokens;
  r.call_index = call->call_index;
  r.seed = call->seed;
  for (const TokenStep& s : g.steps) {
    r.token_ids.push_back(s.token);
    r.logits_digests.push_back(s.logits_digest);
    if (call->req.logprobs) {
      TokenLogprob lp;
      lp.token = engine::SanitizeUtf8(backend_.tokenizer->TokenBytes(s.token));
      lp.logprob = s.model_logprob;
      for (const auto& [id, v] : s.top) {
        lp.top.emplace_back(engine::SanitizeUtf8(backend_.tokenizer->TokenBytes(id)), v);
      }
      r.logprobs.push_back(std::move(lp));
    }
  }
  if (call->tools_active) {
    ExtractedToolCalls ex = ExtractToolCalls(r.text, id_prefix_ + std::to_string(call->call_index));
    if (!ex.calls.empty()) {
      r.tool_calls = std::move(ex.calls);
      r.text = std::move(ex.content);
      r.finish_reason = "tool_calls";
    }
  }
  return r;
}

std::pair<int, std::string> LocalEngineApi::Finalize(Call* call, const GenerationResult& g,
                                                     CompletionResult* out) {
  CompletionResult r = BuildResult(call, g);
  int status = 200;
  std::string body;
  std::string error;
  if (!g.status.ok()) {
    ApiError e = ErrorFromStatus(g.status);
    status = e.http_status;
    body = e.Body();
    error = g.status.message();
  } else {
    body = call->req.chat ? ChatCompletionBody(r, call->req.logprobs)
                          : CompletionBody(r, call->req.logprobs);
  }
  if (RunLog* log = frontend_->log())
    RecordLocalCall(log, *call, g, r, status, body, error, numerics_);
  if (out) *out = std::move(r);
  return {status, body};
}

}  // namespace trace::recorder
