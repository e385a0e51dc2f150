#include "recorder/server/frontend.h"

#include <algorithm>
#include <chrono>
#include <optional>

#include <nlohmann/json.hpp>

#include "recorder/api/anthropic_messages.h"
#include "recorder/api/json_body.h"
#include "recorder/api/openai_embeddings.h"
#include "recorder/server/http_util.h"
#include "recorder/server/request_guard.h"

namespace trace::recorder {

using json = nlohmann::json;

namespace {

// An error the frontend raises itself (auth, admission, routing, handler exceptions) in the
// shape of the API the route serves: Anthropic's on the Messages routes, so the Anthropic
// SDKs read its type and message; OpenAI's everywhere else. Made here, before httplib
// compresses the body (a post-routing rewrite would see gzip bytes when the client accepts
// them, as SDKs do).
void SendRouteError(const httplib::Request& req, httplib::Response& res, const ApiError& e) {
  if (!IsAnthropicRoute(req.path)) return SendError(res, e);
  res.status = e.http_status;
  res.set_content(AnthropicErrorBody(e), "application/json");
}

ConnectionLimits LimitsFrom(const ServerOptions& o) {
  ConnectionLimits limits;
  limits.max_connections = std::max(1, o.limits.max_connections);
  limits.header_timeout = std::chrono::milliseconds(std::max(1, o.limits.header_timeout_ms));
  limits.read_timeout = std::chrono::milliseconds(std::max(1, o.limits.read_timeout_ms));
  limits.keep_alive_timeout =
      std::chrono::milliseconds(std::max(1, o.limits.keep_alive_timeout_ms));
  return limits;
}

// Why a request body could not be read (Connection::ReadBody).
ApiError BodyReadError(Connection::BodyResult result) {
  ApiError e;
  switch (result) {
    case Connection::BodyResult::kTooLarge:
      e.http_status = 413;
      e.code = "body_too_large";
      e.message = "the request body exceeds the limit";
      break;
    case Connection::BodyResult::kTimedOut:
      e.http_status = 408;
      e.code = "read_timeout";
      e.message = "the request body did not arrive within the read timeout";
      break;
    case Connection::BodyResult::kMalformed:
      e.code = "invalid_framing";
      e.message = "malformed chunked request body";
      break;
    default:
      e.message = "the client closed the connection before its request body arrived";
  }
  return e;
}

// A connection closed at the cap just as its request head completed.
ApiError ConnectionEvicted() {
  ApiError e;
  e.http_status = 503;
  e.type = "server_error";
  e.code = "server_busy";
  e.message = "the connection was closed to make room for another (--max-connections)";
  return e;
}

}  // namespace

HttpFrontend::HttpFrontend(const ServerOptions& options)
    : options_(options), request_id_prefix_(RandomHex(4)), http_(LimitsFrom(options)) {
  http_.set_exception_handler(
      [](const httplib::Request& req, httplib::Response& res, std::exception_ptr ep) {
        ApiError e;
        e.http_status = 500;
        e.type = "server_error";
        try {
          if (ep) std::rethrow_exception(ep);
        } catch (const std::exception& ex) {
          e.message = std::string("internal error: ") + ex.what();
        } catch (...) {
          e.message = "internal error";
        }
        SendRouteError(req, res, e);
      });
  http_.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    ApiError e;
    e.http_status = res.status;
    if (res.status == 404) {
      e.code = "not_found";
      e.message = "no route " + req.method + " " + req.path;
    } else {
      e.message = "HTTP " + std::to_string(res.status);
    }
    Reject(req, e);
    SendRouteError(req, res, e);
  });
  // Admission before any route: on the head first, then the body (frontend.h).
  http_.set_pre_routing_handler(
      [this](const httplib::Request& req, httplib::Response& res) { return PreRoute(req, res); });
  // "Expect: 100-continue": refused heads are answered before the client sends the body.
  http_.set_expect_100_continue_handler(
      [this](const httplib::Request& req, httplib::Response& res) {
        Connection* conn = CurrentConnection();
        if (conn != nullptr && !conn->BeginRequest()) {
          Refuse(req, res, ConnectionEvicted());
          return res.status;
        }
        return AdmitHead(req, res) ? 100 : res.status;
      });
  // A backstop only: the pre-routing handler refuses larger bodies before httplib reads.
  http_.set_payload_max_length(options_.limits.max_body_bytes);
  http_.set_post_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    // Every reply carries an id, as OpenAI's do (clients log it with errors).
    if (!res.has_header("x-request-id")) {
      res.set_header("x-request-id", "req_" + request_id_prefix_ + std::to_string(next_request_++));
    }
    const std::string web_origin = req.get_header_value("Origin");
    if (!web_origin.empty() && OriginAllowed(web_origin, options_.limits.allowed_origins)) {
      res.set_header("Access-Control-Allow-Origin", web_origin);
      res.set_header("Vary", "Origin");
    }
    // httplib announces keep-alive unless it closes itself; a refused request's connection
    // closes (its body was not read). httplib adds its own "Connection: close" beside the
    // refusal's when the request asked to close, so the header is set once here.
    if (Connection* conn = CurrentConnection(); conn != nullptr && conn->close_after_response()) {
      res.headers.erase("Keep-Alive");
      res.headers.erase("Connection");
      res.set_header("Connection", "close");
    }
  });
  // Small replies and SSE events go out at once instead of waiting for the client's delayed
  // ACK (Nagle): without it a keep-alive client saw ~40 ms stalls on most small requests.
  // Set on the listening socket, it is inherited by every accepted one (Linux).
  http_.set_tcp_nodelay(options_.tcp_nodelay);
  http_.Get("/health", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("{\"status\":\"ok\"}", "application/json");
  });
}

HttpFrontend::~HttpFrontend() {
  Stop();
}

Status HttpFrontend::Start() {
  http_.ResetStop();
  int port = options_.port == 0
                 ? http_.bind_to_any_port(options_.host)
                 : (http_.bind_to_port(options_.host, options_.port) ? options_.port : -1);
  if (port <= 0) {
    return IOError("cannot listen on " + options_.host + ":" + std::to_string(options_.port));
  }
  port_ = port;
  WidenListenBacklog(port);
  listen_returned_ = false;
  thread_ = std::thread([this] {
    http_.listen_after_bind();
    listen_returned_ = true;
  });
  // httplib's stop() does nothing until the listening loop runs: a Stop() right after
  // Start() (an agent that fails at once) would otherwise leave the thread in accept().
  while (!http_.is_running() && !listen_returned_) std::this_thread::yield();
  return Status::Ok();
}

void HttpFrontend::Stop() {
  if (thread_.joinable()) {
    // Idle connections and slow heads end now; requests being answered finish first.
    http_.BeginStop();
    http_.stop();
    thread_.join();
    RecordRefusalSummary();
  }
}

HttpStats HttpFrontend::stats() const {
  ConnectionStats c = http_.stats();
  HttpStats s;
  s.connections_accepted = c.accepted;
  s.connections_refused = c.refused;
  s.connections_evicted = c.evicted;
  s.timeouts = c.timed_out;
  s.bytes_read = c.bytes_read;
  s.unauthenticated = unauthenticated_;
  s.foreign_host = foreign_host_;
  s.foreign_origin = foreign_origin_;
  return s;
}

std::string HttpFrontend::origin() const {
  return "http://" + options_.host + ":" + std::to_string(port_);
}

bool HttpFrontend::Authorized(const httplib::Request& req, httplib::Response& res) {
  std::optional<ApiError> e = CheckApiKey(req, options_.api_key);
  if (!e) return true;
  CountRefusal(req, *e, &unauthenticated_);
  SendRouteError(req, res, *e);
  return false;
}

void HttpFrontend::Refuse(const httplib::Request& req, httplib::Response& res, const ApiError& e) {
  SendRouteError(req, res, e);
  res.set_header("Connection", "close");
  if (Connection* conn = CurrentConnection()) conn->CloseAfterResponse();
}

bool HttpFrontend::AdmitHead(const httplib::Request& req, httplib::Response& res) {
  if (std::optional<ApiError> e = CheckHost(req, options_.host)) {
    CountRefusal(req, *e, &foreign_host_);
    Refuse(req, res, *e);
    return false;
  }
  const bool same_origin =
      allow_same_origin_ && req.has_header("Origin") &&
      req.get_header_value("Origin") == "http://" + req.get_header_value("Host");
  if (std::optional<ApiError> e = CheckOrigin(req, options_.limits.allowed_origins);
      e && !same_origin) {
    CountRefusal(req, *e, &foreign_origin_);
    Refuse(req, res, *e);
    return false;
  }
  // A CORS preflight of an allowed origin carries no credentials; /health needs none.
  const bool preflight = req.method == "OPTIONS" && req.has_header("Origin");
  const bool public_path =
      req.path == "/health" ||
      std::find(public_paths_.begin(), public_paths_.end(), req.path) != public_paths_.end();
  if (!preflight && !public_path) {
    if (std::optional<ApiError> e = CheckApiKey(req, options_.api_key)) {
      CountRefusal(req, *e, &unauthenticated_);
      Refuse(req, res, *e);
      return false;
    }
  }
  if (std::optional<ApiError> e = CheckBodyFraming(req, options_.limits.max_body_bytes)) {
    Reject(req, *e);
    Refuse(req, res, *e);
    return false;
  }
  return true;
}

httplib::Server::HandlerResponse HttpFrontend::PreRoute(const httplib::Request& req,
                                                        httplib::Response& res) {
  using HR = httplib::Server::HandlerResponse;
  Connection* conn = CurrentConnection();
  if (conn != nullptr && !conn->BeginRequest()) {
    Refuse(req, res, ConnectionEvicted());
    return HR::Handled;
  }
  if (!AdmitHead(req, res)) return HR::Handled;
  if (req.method == "OPTIONS" && req.has_header("Origin")) {
    // CORS preflight of an allowed origin (AdmitHead refused the others).
    res.status = 204;
    res.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
    const std::string asked = req.get_header_value("Access-Control-Request-Headers");
    res.set_header("Access-Control-Allow-Headers",
                   asked.empty() ? "authorization, content-type, x-api-key" : asked);
    res.set_header("Access-Control-Max-Age", "600");
    return HR::Handled;
  }
  if (conn == nullptr || !AnnouncesBody(req)) return HR::Unhandled;
  // The body, read here (capped and timed) so that every route gets it checked; httplib
  // then reads the same bytes from the connection's buffer.
  std::string_view body;
  const Connection::BodyResult read = conn->ReadBody(req, options_.limits.max_body_bytes, &body);
  std::optional<ApiError> refusal;
  if (read == Connection::BodyResult::kOk) {
    // One pass, nothing built: nesting, the count of values and the text a model route
    // could be asked to fit, before any copy of the body is made (docs/recorder.md, Limits).
    const JsonScan scan =
        ScanJson(body, kMaxJsonDepth,
                 req.path == kEmbeddingsRoute ? kMaxEmbeddingsJsonValues : kMaxJsonValues);
    refusal = JsonScanError("request body", scan);
    if (!refusal) refusal = PromptTextTooLong(req, scan.string_bytes);
    if (!refusal) {
      // httplib appends the body to req.body 4 KiB at a time, a string that doubles: at the
      // last doubling the old and new buffers (1.5x the body) stood beside the connection's
      // (1x). One allocation of the right size instead. The request is httplib's own
      // non-const object, handed to this handler as const.
      const_cast<httplib::Request&>(req).body.reserve(body.size());
      conn->ReleaseDecodedBody();
      return HR::Unhandled;
    }
  } else {
    refusal = BodyReadError(read);
    if (read == Connection::BodyResult::kTooLarge) {
      refusal->message +=
          " of " + std::to_string(options_.limits.max_body_bytes) + " bytes (--max-body-bytes)";
    } else if (read == Connection::BodyResult::kTimedOut) {
      refusal->message += " (" + std::to_string(options_.limits.read_timeout_ms) + " ms)";
    }
  }
  conn->ReleaseDecodedBody();
  Reject(req, *refusal);
  Refuse(req, res, *refusal);
  return HR::Handled;
}

void HttpFrontend::LimitPromptText(size_t max_prompt_bytes, int64_t max_context,
                                   std::vector<PromptRoute> routes) {
  max_prompt_bytes_ = max_prompt_bytes;
  max_context_ = max_context;
  prompt_routes_ = std::move(routes);
}

std::optional<ApiError> HttpFrontend::PromptTextTooLong(const httplib::Request& req,
                                                        size_t string_bytes) const {
  if (max_prompt_bytes_ > SIZE_MAX - kOtherTextBytes ||
      string_bytes <= max_prompt_bytes_ + kOtherTextBytes) {
    return std::nullopt;
  }
  for (const PromptRoute& route : prompt_routes_) {
    if (req.path != route.path) continue;
    ApiError e = BadRequest(route.param,
                            "the request's strings hold at least " + std::to_string(string_bytes) +
                                " bytes; the model's context of " + std::to_string(max_context_) +
                                " tokens holds at most " + std::to_string(max_prompt_bytes_) +
                                " bytes of prompt text, and a request at most " +
                                std::to_string(kOtherTextBytes) + " bytes of other strings");
    e.code = "context_length_exceeded";
    return e;
  }
  return std::nullopt;
}

void HttpFrontend::CountRefusal(const httplib::Request& req, const ApiError& e,
                                std::atomic<uint64_t>* counter) {
  ++*counter;
  if (++refusals_ != 1 || log_ == nullptr) return;
  // The first one is recorded as it happened; the rest only in the summary (Stop), so a
  // flood of unauthenticated requests cannot fill the run.
  proto::Note note;
  note.set_topic("refused_requests");
  note.set_text(req.method + " " + req.path + " -> " + std::to_string(e.http_status) + ": " +
                e.message + " (further requests refused before authentication are counted)");
  note.set_data_json(json{{"status", e.http_status}, {"code", e.code}}.dump());
  (void)log_->RecordNote(std::move(note));
}

void HttpFrontend::RecordRefusalSummary() {
  const uint64_t total = refusals_;
  if (total <= 1 || log_ == nullptr) return;
  proto::Note note;
  note.set_topic("refused_requests");
  note.set_text(std::to_string(total) + " requests were refused before authentication: " +
                std::to_string(unauthenticated_.load()) + " without a valid API key, " +
                std::to_string(foreign_host_.load()) + " with a foreign Host, " +
                std::to_string(foreign_origin_.load()) + " from a foreign web origin");
  note.set_data_json(json{{"refused", total},
                          {"unauthenticated", unauthenticated_.load()},
                          {"foreign_host", foreign_host_.load()},
                          {"foreign_origin", foreign_origin_.load()}}
                         .dump());
  (void)log_->RecordNote(std::move(note));
}

void HttpFrontend::Reject(const httplib::Request& req, const ApiError& e) {
  if (!log_) return;
  proto::Note note;
  note.set_topic("rejected_request");
  note.set_text(req.method + " " + req.path + " -> " + std::to_string(e.http_status) + ": " +
                e.message);
  note.set_data_json(
      json{{"status", e.http_status}, {"param", e.param}, {"body_bytes", req.body.size()}}.dump());
  (void)log_->RecordNote(std::move(note));
}

bool HttpFrontend::Recordable(const httplib::Request& req, httplib::Response& res) {
  if (!log_) return true;
  Status st = log_->Writable();
  if (st.ok()) return true;
  SendRouteError(req, res, ErrorFromStatus(st));
  return false;
}

Status HttpFrontend::Commit(const Result<uint64_t>& last_seq) {
  return log_ ? log_->Commit(last_seq) : Status::Ok();
}

}  // namespace trace::recorder
