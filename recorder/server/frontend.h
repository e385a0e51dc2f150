// The HTTP front of the recorder's server, shared by every API served on it (the local
// engine or the upstream proxy, and the trace event API): the listening socket and its
// connections (http_connections.h: connection cap, header/read timeouts, TCP_NODELAY on
// every accepted socket), OpenAI-style replies for unknown routes, refusals and handler
// exceptions (Anthropic-style on the Anthropic routes), an x-request-id header on every
// reply, GET /health, and the note that records every rejected request.
//
// Every request passes the admission checks of httplib's pre-routing handler before any
// route runs, so a route added later is covered without doing anything (request_guard.h):
// Host and Origin, the API key (constant time), body framing and the body limit — all on
// the head, before the body is read — then the body is read (capped, timed) and scanned
// once (api/json_body.h: its JSON nesting depth, its count of values and keys, and on the
// local engine's model routes the text it holds against what the model's context can
// take, LimitPromptText). Requests refused before authentication are
// counted, recorded as one note (the first) and one summary at Stop, never one event each;
// authenticated requests that are rejected are recorded as "rejected_request" notes.
//
// Ownership: owns the httplib server and its listening thread; the RunLog is borrowed
// (SetRunLog before Start) and must outlive Stop(). Thread safety: Start, Stop and
// SetRunLog are for the owning thread; Authorized, Reject, Recordable, Commit and log()
// are called from the handler threads, stats() from any thread. Errors: Start fails with
// IOError naming host:port.
#pragma once

#include <httplib.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/status.h"
#include "recorder/api/model_call.h"
#include "recorder/run_log.h"
#include "recorder/server.h"
#include "recorder/server/call_gate.h"
#include "recorder/server/http_connections.h"

namespace trace::recorder {

class HttpFrontend {
 public:
  explicit HttpFrontend(const ServerOptions& options);
  ~HttpFrontend();  // stops if running

  httplib::Server& http() { return http_; }
  const ServerOptions& options() const { return options_; }

  void SetRunLog(RunLog* log) { log_ = log; }
  // The run being recorded, null when not recording.
  RunLog* log() const { return log_; }
  // `trace rerun`: model calls, clock reads and tool lookups ask `gate` first (null: none).
  // Set before Start.
  void SetCallGate(CallGate* gate) {
    gate_ = gate;
    if (gate != nullptr) gate->Attach(this);
  }
  CallGate* gate() const { return gate_; }

  // A model route of the local engine: its path and the request field that carries the
  // prompt ("messages", "prompt", "input"), named in a refusal.
  struct PromptRoute {
    std::string path;
    std::string param;
  };
  // Strings a request holds besides the prompt's text (ids, types, names, stop sequences,
  // a response_format schema): what a body's strings may exceed the prompt's bound by.
  static constexpr size_t kOtherTextBytes = size_t{1} << 20;
  // A body on one of `routes` whose strings hold more than max_prompt_bytes +
  // kOtherTextBytes bytes (at least, once unescaped) cannot fit the model's context of
  // `max_context` tokens: it is refused with 400 context_length_exceeded as soon as it is
  // read, before any route copies or parses it. Set before Start; none by default.
  void LimitPromptText(size_t max_prompt_bytes, int64_t max_context,
                       std::vector<PromptRoute> routes);

  // A browser page this server serves itself (`trace ui`) calls it from its own origin:
  // a request whose Origin is "http://" + its Host header passes the Origin check (the Host
  // check has passed already). Off by default. Set before Start.
  void AllowSameOrigin() { allow_same_origin_ = true; }
  // Paths served without the API key besides /health (`trace ui`'s page and scripts, which
  // hold no data; the page then sends the key with every API call). Set before Start.
  void SetPublicPaths(std::vector<std::string> paths) { public_paths_ = std::move(paths); }

  Status Start();
  void Stop();
  int port() const { return port_; }
  std::string origin() const;
  HttpStats stats() const;

  // True when the request carries the API key as a bearer token or in x-api-key (or none
  // is required); otherwise answers 401 in the route's API shape. Every route but /health
  // is already checked before routing; handlers may call this again (it is cheap).
  bool Authorized(const httplib::Request& req, httplib::Response& res);
  // A rejected request is recorded as a note, so the run shows it and keeps going.
  void Reject(const httplib::Request& req, const ApiError& e);

  // Acknowledged means stored (docs/recorder.md, "Durability"). True while the run's store
  // takes writes (or nothing is recorded); otherwise answers 503 with the reason, so a
  // request the run could not record is refused before any work is done.
  // The 503 takes the route's API shape (Anthropic's on the Messages routes).
  bool Recordable(const httplib::Request& req, httplib::Response& res);
  // Waits until `last_seq` (the last event a request appended) and everything before it
  // is committed; the request is answered only then. Ok when nothing is recorded; else
  // Unavailable (503) "not recorded, so not answered: ..." (RunLog::Commit).
  Status Commit(const Result<uint64_t>& last_seq);

 private:
  // The admission checks on a request head (Host, Origin, key, framing). False: `res` holds
  // the refusal and the connection closes after it (the body is never read).
  bool AdmitHead(const httplib::Request& req, httplib::Response& res);
  httplib::Server::HandlerResponse PreRoute(const httplib::Request& req, httplib::Response& res);
  // The 400 for a body on a model route whose strings hold `string_bytes` (LimitPromptText),
  // or nothing.
  std::optional<ApiError> PromptTextTooLong(const httplib::Request& req, size_t string_bytes) const;
  // Answers `e` in the route's API shape and closes the connection after the response.
  void Refuse(const httplib::Request& req, httplib::Response& res, const ApiError& e);
  // A refusal before authentication: counted; only the first is recorded.
  void CountRefusal(const httplib::Request& req, const ApiError& e, std::atomic<uint64_t>* counter);
  void RecordRefusalSummary();

  ServerOptions options_;
  std::string request_id_prefix_;
  std::atomic<uint64_t> next_request_{0};
  RunLog* log_ = nullptr;
  CallGate* gate_ = nullptr;
  size_t max_prompt_bytes_ = SIZE_MAX;  // LimitPromptText
  int64_t max_context_ = 0;
  std::vector<PromptRoute> prompt_routes_;
  bool allow_same_origin_ = false;
  std::vector<std::string> public_paths_;
  GuardedHttpServer http_;
  int port_ = 0;
  std::thread thread_;
  std::atomic<bool> listen_returned_{false};
  std::atomic<uint64_t> unauthenticated_{0};
  std::atomic<uint64_t> foreign_host_{0};
  std::atomic<uint64_t> foreign_origin_{0};
  std::atomic<uint64_t> refusals_{0};
};

}  // namespace trace::recorder
