#include "recorder/server/frontend.h"

#include <nlohmann/json.hpp>

#include "recorder/api/anthropic_messages.h"
#include "recorder/server/http_util.h"

namespace trace::recorder {

using json = nlohmann::json;

namespace {

// An error the frontend raises itself (auth, routing, handler exceptions) in the shape of the
// API the route serves: Anthropic's on the Messages routes, so the Anthropic SDKs read its
// type and message; OpenAI's everywhere else. Made here, before httplib compresses the body
// (a post-routing rewrite would see gzip bytes when the client accepts them, as SDKs do).
void SendRouteError(const httplib::Request& req, httplib::Response& res, const ApiError& e) {
  if (!IsAnthropicRoute(req.path)) return SendError(res, e);
  res.status = e.http_status;
  res.set_content(AnthropicErrorBody(e), "application/json");
}

}  // namespace

HttpFrontend::HttpFrontend(const ServerOptions& options)
    : options_(options), request_id_prefix_(RandomHex(4)) {
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
  // Every reply carries an id, as OpenAI's do (clients log it with errors).
  http_.set_post_routing_handler([this](const httplib::Request&, httplib::Response& res) {
    if (!res.has_header("x-request-id")) {
      res.set_header("x-request-id", "req_" + request_id_prefix_ + std::to_string(next_request_++));
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
  http_.new_task_queue = [n = options_.http_threads] { return new httplib::ThreadPool(n); };
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
    http_.stop();
    thread_.join();
  }
}

std::string HttpFrontend::origin() const {
  return "http://" + options_.host + ":" + std::to_string(port_);
}

bool HttpFrontend::Authorized(const httplib::Request& req, httplib::Response& res) {
  if (options_.api_key.empty()) return true;
  // OpenAI's clients send a bearer token, Anthropic's the x-api-key header.
  std::string auth = req.get_header_value("Authorization");
  std::string x_api_key = req.get_header_value("x-api-key");
  if (auth == "Bearer " + options_.api_key || x_api_key == options_.api_key) return true;
  ApiError e;
  e.http_status = 401;
  e.code = "invalid_api_key";
  e.message = auth.empty() && x_api_key.empty()
                  ? "missing API key: send 'Authorization: Bearer $OPENAI_API_KEY' or "
                    "'x-api-key: $ANTHROPIC_API_KEY'"
                  : "invalid API key in the " +
                        std::string(x_api_key.empty() ? "Authorization" : "x-api-key") + " header";
  Reject(req, e);
  SendRouteError(req, res, e);
  return false;
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
