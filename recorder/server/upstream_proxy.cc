#include "recorder/server/upstream_proxy.h"

#include <cstdlib>

#include <nlohmann/json.hpp>

#include "engine/tokenizer/tokenizer.h"
#include "recorder/api/anthropic_messages.h"
#include "recorder/api/json_body.h"
#include "recorder/api/openai_chat.h"
#include "recorder/api/openai_common.h"
#include "recorder/api/openai_completions.h"
#include "recorder/api/openai_embeddings.h"
#include "recorder/api/openai_responses.h"
#include "recorder/secrets.h"
#include "recorder/server/call_recording.h"

namespace trace::recorder {

using json = nlohmann::json;

namespace {

// The key for the upstream from this process's environment, read when the proxy is made:
// getenv on a connection thread would race with any setenv in the process.
std::string UpstreamKey(bool anthropic) {
  for (const char* name :
       {"TRACE_UPSTREAM_API_KEY", anthropic ? "ANTHROPIC_API_KEY" : "OPENAI_API_KEY"}) {
    if (const char* v = getenv(name); v && *v) return v;
  }
  return "";
}

}  // namespace

UpstreamProxy::UpstreamProxy(HttpFrontend* frontend, const std::string& upstream_base_url)
    : UpstreamProxy(frontend, SplitUrlCredentials(upstream_base_url)) {}

UpstreamProxy::UpstreamProxy(HttpFrontend* frontend, UrlWithoutCredentials upstream)
    : frontend_(frontend),
      upstream_(std::move(upstream.url)),
      user_(std::move(upstream.user)),
      password_(std::move(upstream.password)),
      origin_(SplitUrl(upstream_).first),
      prefix_(SplitUrl(upstream_).second),
      pool_(origin_),
      openai_key_(UpstreamKey(false)),
      anthropic_key_(UpstreamKey(true)) {}

std::pair<std::string, std::string> UpstreamProxy::SplitUrl(const std::string& url) {
  size_t scheme = url.find("://");
  size_t path = url.find('/', scheme == std::string::npos ? 0 : scheme + 3);
  if (path == std::string::npos) return {url, ""};
  std::string prefix = url.substr(path);
  while (!prefix.empty() && prefix.back() == '/') prefix.pop_back();
  return {url.substr(0, path), prefix};
}

void UpstreamProxy::Register() {
  httplib::Server& http = frontend_->http();
  auto relay = [this](const httplib::Request& req, httplib::Response& res) {
    if (!frontend_->Authorized(req, res)) return;
    Relay(req, res, UpstreamPath(req.path));
  };
  http.Get("/v1/models", relay);
  http.Get(R"(/v1/models/(.+))", relay);
  http.Get(R"(/v1/responses/(.+))", relay);
  http.Delete(R"(/v1/responses/(.+))", relay);
  http.Post("/v1/messages/count_tokens", relay);
  http.Post("/messages/count_tokens", relay);
  http.Post(kEmbeddingsRoute, [this](const httplib::Request& req, httplib::Response& res) {
    if (!frontend_->Authorized(req, res) || !frontend_->Recordable(req, res)) return;
    ForwardEmbeddings(req, res);
  });
  for (const WireFormat* format : {&OpenAiChatFormat(), &OpenAiCompletionsFormat(),
                                   &OpenAiResponsesFormat(), &AnthropicMessagesFormat()}) {
    for (const std::string& route : format->routes()) {
      http.Post(route, [this, format](const httplib::Request& req, httplib::Response& res) {
        if (!frontend_->Authorized(req, res) || !frontend_->Recordable(req, res)) return;
        ForwardCall(*format, req, res);
      });
    }
  }
}

std::string UpstreamProxy::UpstreamPath(const std::string& route) const {
  // The upstream base URL ends where our /v1 does: "https://api.anthropic.com/v1" + "/messages".
  return prefix_ + (route.rfind("/v1/", 0) == 0 ? route.substr(3) : route);
}

httplib::Headers UpstreamProxy::UpstreamHeaders(const httplib::Request& req, bool anthropic) const {
  httplib::Headers headers;
  const std::string& key = anthropic ? anthropic_key_ : openai_key_;
  if (!key.empty()) {
    if (anthropic) {
      headers.emplace("x-api-key", key);
    } else {
      headers.emplace("Authorization", "Bearer " + key);
    }
  } else if (!user_.empty()) {
    // https://user:pass@host/v1: the credentials go as basic auth, never into the recording.
    headers.insert(httplib::make_basic_authentication_header(user_, password_));
  }
  for (const char* name : {"anthropic-version", "anthropic-beta", "openai-beta"}) {
    if (req.has_header(name)) headers.emplace(name, req.get_header_value(name));
  }
  return headers;
}

ApiError UpstreamProxy::Unreachable(httplib::Error error) const {
  ApiError e;
  e.http_status = 502;
  e.type = "server_error";
  e.code = "upstream_unavailable";
  e.message = "upstream " + upstream_ + " did not answer: " + httplib::to_string(error);
  return e;
}

void UpstreamProxy::Relay(const httplib::Request& req, httplib::Response& res,
                          const std::string& path) {
  UpstreamPool::Lease lease = pool_.Acquire();
  httplib::Headers headers = UpstreamHeaders(req, req.has_header("anthropic-version"));
  httplib::Result r = req.method == "GET"      ? lease.client().Get(path.c_str(), headers)
                      : req.method == "DELETE" ? lease.client().Delete(path.c_str(), headers)
                                               : lease.client().Post(path.c_str(), headers,
                                                                     req.body, "application/json");
  if (!r) {
    lease.Discard();
    return SendError(res, Unreachable(r.error()));
  }
  res.status = r->status;
  std::string type = r->get_header_value("Content-Type");
  res.set_content(r->body, type.empty() ? "application/json" : type);
}

void UpstreamProxy::ForwardCall(const WireFormat& format, const httplib::Request& req,
                                httplib::Response& res) {
  // `trace rerun`: the recording answers first; --edit-call replaces the body sent upstream.
  CallGate::Decision gate;
  if (CallGate* g = frontend_->gate()) gate = g->AdmitModelCall(format, req, res);
  if (gate.answered) return;
  auto x = std::make_shared<Exchange>();
  x->format = &format;
  x->endpoint = req.path;
  x->request_body = gate.live_body ? *gate.live_body : req.body;
  x->start = SteadyClock::now();
  x->start_ns = WallClockNs();
  json body = ParseJsonOrDiscarded(x->request_body);
  x->stream = body.is_object() && body.contains("stream") && body["stream"].is_boolean() &&
              body["stream"].get<bool>();
  if (RunLog* log = frontend_->log()) {
    auto parsed = format.Parse(x->request_body);
    if (auto* p = std::get_if<CompletionRequest>(&parsed)) RecordToolResultsFromMessages(log, *p);
  }
  const std::string path = UpstreamPath(req.path);
  httplib::Headers headers = UpstreamHeaders(req, format.api() == kApiAnthropicMessages);
  if (x->stream) return RelayStream(format, req, res, path, headers, std::move(x));

  UpstreamPool::Lease lease = pool_.Acquire();
  httplib::Result r =
      lease.client().Post(path.c_str(), headers, x->request_body, "application/json");
  if (!r) {
    lease.Discard();
    ApiError e = Unreachable(r.error());
    x->status = e.http_status;
    x->body = format.ErrorBody(e);
    x->error = e.message;
    Answer(format, res, *x, RecordProxiedCall(*x), "application/json");
    return;
  }
  x->status = r->status;
  x->body = r->body;
  x->request_id = r->has_header("x-request-id") ? r->get_header_value("x-request-id")
                                                : r->get_header_value("request-id");
  if (x->status >= 400 && format.api() == kApiAnthropicMessages) {
    // What the agent gets on this route is Anthropic's shape (the frontend converts
    // OpenAI-shaped errors there): recorded as it is sent.
    std::string converted = AnthropicErrorFromOpenAi(x->status, x->body);
    if (!converted.empty()) x->body = std::move(converted);
  }
  std::string type = r->get_header_value("Content-Type");
  Answer(format, res, *x, RecordProxiedCall(*x), type.empty() ? "application/json" : type);
}

void UpstreamProxy::Answer(const WireFormat& format, httplib::Response& res, const Exchange& x,
                           const Result<uint64_t>& last_seq, const std::string& content_type) {
  // Acknowledged means stored: the agent gets the answer once the call is committed.
  if (Status st = frontend_->Commit(last_seq); !st.ok()) {
    ApiError e = ErrorFromStatus(st);
    res.status = e.http_status;
    res.set_content(format.ErrorBody(e), "application/json");
    return;
  }
  res.status = x.status;
  res.set_content(x.body, content_type);
}

Result<uint64_t> UpstreamProxy::RecordProxiedCall(const Exchange& x) {
  RunLog* log = frontend_->log();
  if (!log) return uint64_t{0};
  const WireFormat& format = *x.format;
  proto::LlmCall c;
  c.set_api(std::string(format.api()));
  c.set_endpoint(x.endpoint);
  // Text fields must be UTF-8 for the store; a client or upstream could send anything.
  c.set_request_json(engine::SanitizeUtf8(x.request_body));
  c.set_http_status(x.status);
  c.set_stream(x.stream);
  c.set_upstream(upstream_);
  c.set_upstream_request_id(engine::SanitizeUtf8(x.request_id));
  auto parsed = format.Parse(x.request_body);
  if (auto* req = std::get_if<CompletionRequest>(&parsed)) {
    c.set_model(req->model);
    SamplingParamsToProto(*req, /*max_tokens_as_run=*/false, c.mutable_params());
    if (req->seed) c.set_seed_used(static_cast<uint64_t>(*req->seed));
  } else {
    json body = ParseJsonOrDiscarded(x.request_body);
    if (body.is_object() && body.contains("model") && body["model"].is_string()) {
      c.set_model(body["model"].get<std::string>());
    }
  }
  // The answer as a response object: the body, or what the stream's events amount to.
  json object;
  if (x.stream && !x.sent.empty()) {
    object = format.FoldStream(x.sent);
    if (!object.is_null()) c.set_response_json(DumpJson(object));
    c.set_response_stream(x.sent);
  } else {
    object = ParseJsonOrDiscarded(x.body);
    c.set_response_json(engine::SanitizeUtf8(x.body));
  }
  ResponseSummary s;
  if (object.is_object()) s = format.ReadResponse(object);
  c.set_output_text(s.text);
  c.set_request_id(s.id);
  c.set_finish_reason(x.status != 200 ? "error" : x.cancelled ? "cancelled" : s.finish_reason);
  if (!x.error.empty()) {
    c.set_error(x.error);
  } else if (x.status != 200) {
    c.set_error(engine::SanitizeUtf8(x.body));
  }
  if (s.has_usage) {
    proto::Usage* u = c.mutable_usage();
    u->set_input_tokens(s.input_tokens);
    u->set_output_tokens(s.output_tokens);
    u->set_cached_input_tokens(s.cached_input_tokens);
  }
  proto::Timings* t = c.mutable_timings();
  t->set_total_ms(std::chrono::duration<double, std::milli>(SteadyClock::now() - x.start).count());
  t->set_start_ns(x.start_ns);
  t->set_end_ns(WallClockNs());
  TRACE_ASSIGN_OR_RETURN(uint64_t seq, log->RecordLlmCall(std::move(c)));
  return RecordModelToolCalls(log, seq, s.tool_calls);
}

}  // namespace trace::recorder
