#include "recorder/server/local_engine.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "recorder/api/anthropic_messages.h"
#include "recorder/api/openai_chat.h"
#include "recorder/api/openai_completions.h"
#include "recorder/api/openai_embeddings.h"
#include "recorder/api/openai_responses.h"
#include "recorder/api/qwen_tool_calls.h"
#include "recorder/api/template_input.h"
#include "recorder/api/tool_fields.h"
#include "recorder/server/call_recording.h"

namespace trace::recorder {

using json = nlohmann::json;

LocalEngineApi::LocalEngineApi(LocalBackend backend, HttpFrontend* frontend,
                               const std::string& id_prefix)
    : backend_(std::move(backend)), frontend_(frontend), id_prefix_(id_prefix) {
  const engine::Tokenizer& tok = *backend_.tokenizer;
  if (auto id = tok.TokenId("<|im_end|>")) end_tokens_.push_back(*id);
  if (auto id = tok.eos_token_id()) end_tokens_.push_back(*id);
  for (int32_t id : backend_.model->config().eos_token_ids) end_tokens_.push_back(id);
  std::sort(end_tokens_.begin(), end_tokens_.end());
  end_tokens_.erase(std::unique(end_tokens_.begin(), end_tokens_.end()), end_tokens_.end());
  // The end of a turn: ChatML's <|im_end|>, else the tokenizer's eos token (Llama 3's
  // <|eot_id|>), else the model's first end token.
  turn_end_token_ =
      tok.TokenId("<|im_end|>")
          .value_or(tok.eos_token_id().value_or(end_tokens_.empty() ? 0 : end_tokens_.front()));
  const auto& eo = backend_.scheduler->engine().options();
  max_context_ = eo.max_context;  // the engine's, already clamped to the model's maximum
  numerics_ = kernels::VersionedNumericsName(eo.numerics);
  // Every token stands for at most `longest` bytes of normalized text, and NFC shrinks text
  // at most 3x (three conjoining jamo compose into one syllable), so a prompt of more than
  // 3 * longest * max_context bytes has more than max_context tokens.
  size_t longest = 1;
  for (int32_t id = 0; id < tok.vocab_size(); ++id) {
    longest = std::max(longest, tok.TokenBytes(id).size());
  }
  if (max_context_ > 0) max_prompt_bytes_ = 3 * longest * static_cast<size_t>(max_context_);
  constraints_ = std::make_unique<ConstraintFactory>(tok, turn_end_token_);
}

void LocalEngineApi::Register() {
  httplib::Server& http = frontend_->http();
  http.Get("/v1/models",
           [this](const httplib::Request& req, httplib::Response& res) { HandleModels(req, res); });
  http.Get(R"(/v1/models/(.+))",
           [this](const httplib::Request& req, httplib::Response& res) { HandleModel(req, res); });
  http.Get(R"(/v1/responses/([^/]+))", [this](const httplib::Request& req, httplib::Response& res) {
    HandleStoredResponse(req, res);
  });
  http.Delete(R"(/v1/responses/([^/]+))",
              [this](const httplib::Request& req, httplib::Response& res) {
                HandleStoredResponse(req, res);
              });
  for (const WireFormat* format : {&OpenAiChatFormat(), &OpenAiCompletionsFormat(),
                                   &OpenAiResponsesFormat(), &AnthropicMessagesFormat()}) {
    for (const std::string& route : format->routes()) {
      http.Post(route, [this, format](const httplib::Request& req, httplib::Response& res) {
        HandleCompletion(*format, req, res);
      });
    }
  }
  // No embeddings here (docs/recorder.md, Limits): a clear refusal instead of "no route",
  // recorded as a rejected request like the other refusals. A re-run still answers the
  // embeddings calls its recording holds.
  http.Post(kEmbeddingsRoute, [this](const httplib::Request& req, httplib::Response& res) {
    if (!frontend_->Authorized(req, res) || !frontend_->Recordable(req, res)) return;
    if (CallGate* gate = frontend_->gate();
        gate != nullptr && gate->AdmitEmbeddingsCall(req, res).answered) {
      return;
    }
    const ApiError e = UnsupportedEmbeddings();
    frontend_->Reject(req, e);
    SendError(res, e);
  });
}

namespace {

json ModelObject(const std::string& id) {
  return {{"id", id}, {"object", "model"}, {"created", 0}, {"owned_by", "trace"}};
}

// Anthropic's model object (a client of the Messages API sends anthropic-version).
json AnthropicModelObject(const std::string& id) {
  return {
      {"type", "model"}, {"id", id}, {"display_name", id}, {"created_at", "1970-01-01T00:00:00Z"}};
}

}  // namespace

void LocalEngineApi::HandleModels(const httplib::Request& req, httplib::Response& res) {
  if (!frontend_->Authorized(req, res)) return;
  const bool anthropic = req.has_header("anthropic-version");
  std::vector<std::string> names = frontend_->options().served_model_names;
  if (names.empty()) names.push_back(backend_.model_name);
  json data = json::array();
  for (const std::string& n : names) {
    data.push_back(anthropic ? AnthropicModelObject(n) : ModelObject(n));
  }
  json body = anthropic ? json{{"data", data},
                               {"has_more", false},
                               {"first_id", names.front()},
                               {"last_id", names.back()}}
                        : json{{"object", "list"}, {"data", data}};
  res.set_content(body.dump(), "application/json");
}

void LocalEngineApi::HandleStoredResponse(const httplib::Request& req, httplib::Response& res) {
  if (!frontend_->Authorized(req, res)) return;
  const std::string id = req.matches[1];
  std::optional<std::string> body = responses_.Body(id);
  if (body && req.method == "DELETE") {
    responses_.Delete(id);
    body = json{{"id", id}, {"object", "response.deleted"}, {"deleted", true}}.dump();
  }
  if (!body) {
    ApiError e;
    e.http_status = 404;
    e.param = "response_id";
    e.code = "not_found";
    e.message = "Response with id '" + id +
                "' not found: this server keeps the responses it produced in this run with "
                "store: true";
    frontend_->Reject(req, e);
    return SendError(res, e);
  }
  res.set_content(*body, "application/json");
}

void LocalEngineApi::HandleModel(const httplib::Request& req, httplib::Response& res) {
  if (!frontend_->Authorized(req, res)) return;
  std::string id = req.matches[1];
  if (std::optional<ApiError> e = CheckModelName(id)) {
    frontend_->Reject(req, *e);
    return SendError(res, *e);
  }
  json model = req.has_header("anthropic-version") ? AnthropicModelObject(id) : ModelObject(id);
  res.set_content(model.dump(), "application/json");
}

std::optional<ApiError> LocalEngineApi::CheckModelName(const std::string& name) const {
  const auto& names = frontend_->options().served_model_names;
  if (names.empty() || std::find(names.begin(), names.end(), name) != names.end()) {
    return std::nullopt;
  }
  ApiError e;
  e.http_status = 404;
  e.code = "model_not_found";
  e.param = "model";
  std::string list;
  for (const std::string& n : names) list += (list.empty() ? "\"" : ", \"") + n + "\"";
  e.message = "The model \"" + name + "\" does not exist or is not served here; served: " + list;
  return e;
}

void LocalEngineApi::Reject(const WireFormat& format, const httplib::Request& http_req,
                            httplib::Response& res, const ApiError& e) {
  frontend_->Reject(http_req, e);
  res.status = e.http_status;
  res.set_content(format.ErrorBody(e), "application/json");
}

void LocalEngineApi::HandleCompletion(const WireFormat& format, const httplib::Request& http_req,
                                      httplib::Response& res) {
  if (!frontend_->Authorized(http_req, res)) return;
  if (!frontend_->Recordable(http_req, res)) return;
  if (std::optional<ApiError> e = format.CheckHeaders(
          [&](const std::string& name) { return http_req.get_header_value(name.c_str()); })) {
    return Reject(format, http_req, res, *e);
  }
  // `trace rerun`: the recording answers first; --edit-call replaces the body served live.
  CallGate::Decision gate;
  if (CallGate* g = frontend_->gate()) gate = g->AdmitModelCall(format, http_req, res);
  if (gate.answered) return;
  auto call = std::make_shared<Call>(backend_.tokenizer.get());
  call->format = &format;
  call->start = SteadyClock::now();
  call->start_ns = WallClockNs();
  call->body = gate.live_body ? *gate.live_body : http_req.body;
  if (gate.run_position) call->run_position = *gate.run_position;
  call->endpoint = http_req.path;
  auto parsed = format.Parse(call->body);
  if (auto* err = std::get_if<ApiError>(&parsed)) return Reject(format, http_req, res, *err);
  call->req = std::move(std::get<CompletionRequest>(parsed));
  CompletionRequest& req = call->req;
  if (std::optional<ApiError> e = CheckModelName(req.model)) {
    return Reject(format, http_req, res, *e);
  }
  if (format.api() == kApiResponses) {
    // previous_response_id and item references, from the responses served in this run.
    auto resolved = responses_.Resolve(&req);
    if (auto* err = std::get_if<ApiError>(&resolved)) return Reject(format, http_req, res, *err);
    call->conversation = std::move(std::get<ResponseStore::Resolved>(resolved));
    // Each function_call_output answers a call of the conversation, as OpenAI requires.
    if (auto i = FindToolResultWithoutCall(req.messages, /*same_turn=*/false)) {
      return Reject(
          format, http_req, res,
          BadRequest("input", "No tool call found for function call output with call_id '" +
                                  req.messages[*i].tool_call_id + "'"));
    }
  }
  if (std::optional<ApiError> err = Prepare(call.get())) {
    return Reject(format, http_req, res, *err);
  }

  GenerationRequest gen_req;
  gen_req.prompt = call->prompt_ids;
  gen_req.sampling = req.sampling;
  gen_req.seed = call->seed;
  gen_req.end_tokens = end_tokens_;
  gen_req.want_logprobs = req.logprobs;
  gen_req.top_logprobs = req.top_logprobs;
  if (!call->constraint_json.empty()) {
    // Compiled once per distinct schema (the factory caches by the spec's hash).
    auto c = constraints_->Create(call->constraint_json);
    if (!c.ok()) {
      const bool forced =
          req.tool_choice == ToolChoice::kRequired || req.tool_choice == ToolChoice::kNamed;
      ApiError e = BadRequest(!req.guided_choice.empty() ? "guided_choice"
                              : forced                   ? "tools"
                                                         : "response_format",
                              c.status().message());
      e.code = "invalid_schema";
      return Reject(format, http_req, res, e);
    }
    gen_req.constraint = std::move(c).value();
  }
  if (req.stream) call->stream = std::make_shared<StreamQueue>();
  gen_req.observer = call;
  call->gen = backend_.scheduler->Submit(std::move(gen_req));

  if (!req.stream) {
    // A client that leaves meanwhile is not noticed here: the call runs to its end and is
    // recorded as generated; only the write of the answer fails.
    const GenerationResult& result = call->gen->Wait();
    call->TryClaimFinalize();
    Answer answer = Conclude(call.get(), result);
    Commit(call.get(), result, &answer);
    res.status = answer.http_status();
    res.set_content(answer.body, "application/json");
    return;
  }
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream",
      [this, call](size_t, httplib::DataSink& sink) { return StreamResponse(call, sink); },
      [this, call](bool) { ReleaseStream(call); });
}

std::optional<ApiError> LocalEngineApi::Prepare(Call* call) {
  CompletionRequest& req = call->req;
  const engine::Tokenizer& tok = *backend_.tokenizer;
  json tools;  // the tools as the template saw them (null: none)
  if (req.chat && backend_.chat_template == nullptr) {
    ApiError e = BadRequest("messages", "model '" + backend_.model_name +
                                            "' has no chat template (its tokenizer_config.json "
                                            "has none and there is no chat_template.jinja): "
                                            "send a prompt to /v1/completions");
    e.http_status = 422;
    return e;
  }
  if (req.chat) {
    // Everything the template sees keeps the client's key order (RenderOrdered), as
    // Hugging Face's apply_chat_template does with Python dicts: a tool schema's
    // properties print in the order sent, not sorted.
    nlohmann::ordered_json kwargs = nullptr;
    if (auto k = req.raw_ordered.find("chat_template_kwargs");
        k != req.raw_ordered.end() && k->is_object()) {
      kwargs = *k;
    }
    // Offered tools are shown with tool_choice "none" too (vLLM's default, and what
    // Anthropic counts): "none" only means the answer is not parsed for calls.
    nlohmann::ordered_json ordered_tools = ToolsForTemplateOrdered(req.tools);
    tools = ordered_tools;
    nlohmann::ordered_json messages = MessagesForTemplateOrdered(req.messages);
    if (req.system) {
      // Responses' instructions, Anthropic's system: the first message.
      // An object built key by key: a braced list here would pick insert's
      // initializer-list overload and insert two arrays, which the template skips.
      nlohmann::ordered_json system = nlohmann::ordered_json::object();
      system["role"] = "system";
      system["content"] = *req.system;
      messages.insert(messages.begin(), std::move(system));
    }
    if (messages.empty()) return BadRequest("input", "the conversation has no messages");
    Result<std::string> prompt = backend_.chat_template->RenderOrdered(
        messages, ordered_tools, /*add_generation_prompt=*/true, kwargs);
    if (!prompt.ok()) {
      ApiError e = BadRequest("messages", "chat template: " + prompt.status().message());
      e.http_status = 422;
      return e;
    }
    // Anthropic's prefill: the answer continues the text the final assistant turn began.
    call->rendered_prompt = std::move(prompt).value() + req.assistant_prefill;
    if (auto e = PromptCannotFit(req, call->rendered_prompt.size())) return e;
    call->prompt_ids = tok.Encode(call->rendered_prompt, TokenCap());
  } else if (req.prompt_is_tokens) {
    if (max_context_ > 0 && static_cast<int64_t>(req.prompt_token_ids.size()) >= max_context_) {
      ApiError e = BadRequest(
          "prompt", "the prompt has " + std::to_string(req.prompt_token_ids.size()) +
                        " tokens; the model's context is " + std::to_string(max_context_));
      e.code = "context_length_exceeded";
      return e;
    }
    for (size_t i = 0; i < req.prompt_token_ids.size(); ++i) {
      int32_t id = req.prompt_token_ids[i];
      if (id >= tok.vocab_size()) {
        return OutOfRange("prompt", "prompt[" + std::to_string(i) + "]: token id " +
                                        std::to_string(id) + " is outside the vocabulary (" +
                                        std::to_string(tok.vocab_size()) + " tokens)");
      }
    }
    call->prompt_ids = req.prompt_token_ids;
    call->rendered_prompt = tok.Decode(call->prompt_ids);
  } else {
    if (auto e = PromptCannotFit(req, req.prompt.size())) return e;
    call->rendered_prompt = req.prompt;
    call->prompt_ids = tok.Encode(call->rendered_prompt, TokenCap());
  }
  call->constraint_json = ConstraintSpecFor(req, tools.is_array());
  call->tools_active = MayCallTools(req);
  if (call->prompt_ids.empty())
    return BadRequest(req.chat ? "messages" : "prompt", "the prompt is empty");
  int64_t n = static_cast<int64_t>(call->prompt_ids.size());
  if (max_context_ > 0 && n >= max_context_) {
    // Encoding stopped at the context's length (TokenCap): there may be more.
    ApiError e = BadRequest(req.chat ? "messages" : "prompt",
                            "the prompt has at least " + std::to_string(n) +
                                " tokens; the model's context is " + std::to_string(max_context_));
    e.code = "context_length_exceeded";
    return e;
  }
  // max_tokens is clamped to what the context leaves (as documented), not refused.
  if (max_context_ > 0 && n + req.sampling.max_tokens > max_context_) {
    req.sampling.max_tokens = static_cast<int32_t>(max_context_ - n);
  }
  for (const std::string& s : req.sampling.stop)
    call->max_stop_len = std::max(call->max_stop_len, s.size());
  call->call_index = next_call_index_++;
  // A re-run's live call takes the seed of its place in the run, as recorded calls did, so
  // a fork at call K with the recording's run seed samples what call K sampled.
  const int64_t seed_index = call->run_position >= 0 ? call->run_position : call->call_index;
  call->seed = req.seed ? static_cast<uint64_t>(*req.seed)
                        : DeriveCallSeed(frontend_->options().run_seed, seed_index);
  call->created = call->start_ns / 1000000000;
  call->request_id =
      call->format->id_prefix() + id_prefix_ + "-" + std::to_string(call->call_index);
  if (call->format->api() == kApiResponses) {
    call->message_item_id = "msg_" + id_prefix_ + "-" + std::to_string(call->call_index);
  }
  if (RunLog* log = frontend_->log()) RecordToolResultsFromMessages(log, req);
  return std::nullopt;
}

size_t LocalEngineApi::TokenCap() const {
  return max_context_ > 0 ? static_cast<size_t>(max_context_) : SIZE_MAX;
}

std::optional<ApiError> LocalEngineApi::PromptCannotFit(const CompletionRequest& req,
                                                        size_t bytes) const {
  if (bytes <= max_prompt_bytes_) return std::nullopt;
  ApiError e =
      BadRequest(req.chat ? "messages" : "prompt",
                 "the prompt is " + std::to_string(bytes) + " bytes; the model's context of " +
                     std::to_string(max_context_) + " tokens holds at most " +
                     std::to_string(max_prompt_bytes_) + " bytes of text");
  e.code = "context_length_exceeded";
  return e;
}

CompletionResult LocalEngineApi::BuildResult(Call* call, const GenerationResult& g) {
  CompletionResult r;
  r.id = call->request_id;
  r.message_item_id = call->message_item_id;
  r.created = call->created;
  r.model = call->req.model;  // the name the client asked for
  r.system_fingerprint = std::string("trace-") + numerics_;
  r.text = call->FinalText();
  r.finish_reason = g.finish_reason;
  r.stop_sequence = call->matched_stop();
  r.prompt_tokens = static_cast<int64_t>(call->prompt_ids.size());
  r.completion_tokens = static_cast<int64_t>(g.steps.size());
  r.cached_prompt_tokens = g.reused_prompt_tokens;
  r.call_index = call->call_index;
  r.seed = static_cast<int64_t>(call->seed);
  for (const TokenStep& s : g.steps) {
    r.token_ids.push_back(s.token);
    r.logits_digests.push_back(s.logits_digest);
  }
  if (call->req.logprobs) r.logprobs = call->LogprobsOf(g.steps);
  if (call->tools_active) {
    // A call cut by max_tokens comes back as OpenAI returns it: the tool call with the
    // arguments written so far, finish_reason "length"; not as raw <tool_call> text.
    const std::string ids = id_prefix_ + std::to_string(call->call_index) + "_";
    ExtractedToolCalls ex = ExtractToolCalls(r.text, call->format->tool_call_id_prefix() + ids,
                                             /*allow_truncated=*/g.finish_reason == "length");
    if (!ex.calls.empty() || ex.truncated) {
      r.tool_calls = std::move(ex.calls);
      if (call->format->api() == kApiResponses) {
        for (size_t k = 0; k < r.tool_calls.size(); ++k) {
          r.tool_calls[k].item_id = "fc_" + ids + std::to_string(k);
        }
      }
      r.text = std::move(ex.content);
      r.cut_in_tool_call = ex.truncated;
      if (!ex.truncated && g.finish_reason == "stop") r.finish_reason = "tool_calls";
    }
  }
  return r;
}

LocalEngineApi::Answer LocalEngineApi::Conclude(Call* call, const GenerationResult& g) {
  Answer a;
  a.result = BuildResult(call, g);
  if (!g.status.ok()) a.error = ErrorFromStatus(g.status);
  a.body = a.error ? call->format->ErrorBody(*a.error) : call->format->Body(call->req, a.result);
  return a;
}

void LocalEngineApi::Commit(Call* call, const GenerationResult& g, Answer* a) {
  if (RunLog* log = frontend_->log()) {
    Result<uint64_t> last = RecordLocalCall(log, *call, g, a->result, a->http_status(), a->body,
                                            g.status.ok() ? "" : g.status.message(), numerics_);
    // Acknowledged means stored: the answer goes out once the call is committed, else 503.
    if (Status st = frontend_->Commit(last); !st.ok()) {
      a->error = ErrorFromStatus(st);
      a->body = call->format->ErrorBody(*a->error);
      return;
    }
  }
  // Kept before the client hears of it, so its next request can already refer to it.
  if (!a->error && call->conversation && call->req.store && g.finish_reason != "cancelled") {
    responses_.Put(std::move(*call->conversation), a->result, a->body);
    call->conversation.reset();
  }
}

}  // namespace trace::recorder
