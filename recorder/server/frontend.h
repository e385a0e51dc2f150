// The HTTP front of the recorder's server, shared by every API served on it (the local
// engine or the upstream proxy, and the trace event API): the listening socket and its
// thread pool (TCP_NODELAY on every accepted socket), token checks (bearer or x-api-key),
// OpenAI-style replies for unknown routes and handler exceptions (Anthropic-style on the
// Anthropic routes), an x-request-id header on every reply,
// GET /health, and the note that records every rejected request.
//
// Ownership: owns the httplib::Server and its listening thread; the RunLog is borrowed
// (SetRunLog before Start) and must outlive Stop(). Thread safety: Start, Stop and
// SetRunLog are for the owning thread; Authorized, Reject, Recordable, Commit and log()
// are called from the handler threads. Errors: Start fails with IOError naming host:port.
#pragma once

#include <httplib.h>

#include <atomic>
#include <string>
#include <thread>

#include "base/status.h"
#include "recorder/api/model_call.h"
#include "recorder/run_log.h"
#include "recorder/server.h"

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

  Status Start();
  void Stop();
  int port() const { return port_; }
  std::string origin() const;

  // True when the request carries the token as a bearer token or in x-api-key (or none is
  // required); otherwise answers 401 and records the rejection.
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
  ServerOptions options_;
  std::string request_id_prefix_;
  std::atomic<uint64_t> next_request_{0};
  RunLog* log_ = nullptr;
  httplib::Server http_;
  int port_ = 0;
  std::thread thread_;
  std::atomic<bool> listen_returned_{false};
};

}  // namespace trace::recorder
