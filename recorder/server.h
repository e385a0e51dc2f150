// The recorder's HTTP server: the model API in three wire formats (OpenAI: POST
// /v1/chat/completions, /v1/completions, /v1/responses and GET|DELETE /v1/responses/{id};
// Anthropic: POST /v1/messages and /messages; GET /v1/models[/{id}], GET /health) served by
// the local engine through the continuous-batching scheduler, or forwarded to an upstream
// (OpenAI, Anthropic or a compatible server); and the trace event API (POST
// /trace/v1/events, GET /trace/v1/clock, POST /trace/v1/flush). With a RunLog attached,
// everything it serves is recorded.
//
// Ownership: a Server owns its backend (model, tokenizer, template, scheduler) and its
// listening thread; the RunLog is borrowed and must outlive Stop(). Thread safety: Start,
// Stop and the accessors are for the owning thread; requests are handled concurrently
// on an internal thread pool. Errors: Start fails with IOError naming host:port; request
// errors are answered with error bodies in the API's shape and never stop the server.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "engine/engine.h"
#include "engine/template/chat_template.h"
#include "engine/tokenizer/tokenizer.h"
#include "proto/trace.pb.h"
#include "recorder/run_log.h"
#include "recorder/scheduler.h"
#include "recorder/server/call_gate.h"

namespace trace::recorder {

// Limits against hostile or careless clients (docs/recorder.md, "Security").
struct HttpLimits {
  // The largest request body: checked against Content-Length before reading, and while
  // reading a chunked body.
  size_t max_body_bytes = size_t{32} << 20;
  // The most open connections (one thread each); at the cap the one that has waited
  // longest without a complete request is closed to make room.
  int max_connections = 256;
  // How long a request head may take from its first byte, and its body after the head.
  int header_timeout_ms = 10'000;
  int read_timeout_ms = 30'000;
  // How long an idle keep-alive connection is kept open between requests.
  int keep_alive_timeout_ms = 5'000;
  // Web origins whose browser requests are served ("*": any); others get a 403. Requests
  // whose Host is neither a loopback name nor the server's --host get a 403 too (DNS
  // rebinding).
  std::vector<std::string> allowed_origins;
};

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 0;  // 0: any free port
  // Required as "Authorization: Bearer KEY" (or "x-api-key: KEY") on every route but
  // /health, checked before the body is read; empty: no check.
  std::string api_key;
  HttpLimits limits;
  uint64_t run_seed = 0;  // seeds calls without a request seed (also when not recording)
  // The model names served (vLLM's --served-model-name); empty: any name a client asks
  // for is served by the loaded model (and recorded as asked).
  std::vector<std::string> served_model_names;
  // TCP_NODELAY on accepted sockets (off only to measure what Nagle costs, bench/recorder).
  bool tcp_nodelay = true;
};

// What the HTTP layer refused or cut off, for tests and the end-of-run summary.
struct HttpStats {
  uint64_t connections_accepted = 0;
  uint64_t connections_refused = 0;  // 503 at the connection cap
  uint64_t connections_evicted = 0;  // closed at the cap without a complete request
  uint64_t timeouts = 0;             // 408: head or body too slow
  uint64_t bytes_read = 0;           // from client sockets
  // Refused before authentication (counted, recorded as one note and a summary, never
  // one event each): no or a wrong API key, a foreign Host, a foreign browser Origin.
  uint64_t unauthenticated = 0;
  uint64_t foreign_host = 0;
  uint64_t foreign_origin = 0;
};

// The local model and everything needed to serve it.
struct LocalBackend {
  std::shared_ptr<const engine::Model> model;
  std::unique_ptr<engine::Tokenizer> tokenizer;
  std::unique_ptr<engine::ChatTemplate> chat_template;
  std::unique_ptr<Scheduler> scheduler;
  std::string model_name;  // the model folder's name: /v1/models lists it by default
};

// Loads DIR (config.json, safetensors, tokenizer.json, tokenizer_config.json) and starts
// a scheduler over a new engine.
Result<LocalBackend> LoadLocalBackend(const std::string& model_dir,
                                      const engine::EngineOptions& engine_options,
                                      const SchedulerOptions& scheduler_options,
                                      bool hash_weights = true);

// Fills the model, engine and device fingerprints of a run header.
void FillFingerprints(const LocalBackend& backend, proto::RunHeader* header);

class Server {
 public:
  virtual ~Server() = default;  // stops if running
  static std::unique_ptr<Server> CreateLocal(LocalBackend backend, const ServerOptions& options);
  // Forwards the model API to `upstream_base_url` (e.g. "https://api.openai.com/v1",
  // "https://api.anthropic.com/v1"), recording requests and responses as given, streaming
  // included (recorder/server/upstream_proxy.h).
  static Result<std::unique_ptr<Server>> CreateProxy(const std::string& upstream_base_url,
                                                     const ServerOptions& options);

  // `trace rerun` with no live model: every model call is answered by the CallGate (the
  // recording) or refused with 503 (recorder/server/offline_api.h); /v1/models lists
  // `model_name`.
  static std::unique_ptr<Server> CreateOffline(const std::string& model_name,
                                               const ServerOptions& options);

  // Events of everything served go to `log` (null: not recorded). Set before Start.
  virtual void SetRunLog(RunLog* log) = 0;
  // `trace rerun`: model calls, clock reads and tool lookups ask `gate` first (borrowed;
  // must outlive Stop). Set before Start.
  virtual void SetCallGate(CallGate* gate) = 0;
  // Binds and serves on a background thread.
  virtual Status Start() = 0;
  virtual void Stop() = 0;
  virtual int port() const = 0;
  // "http://127.0.0.1:PORT"
  virtual std::string origin() const = 0;
  virtual const std::string& model_name() const = 0;
  // The local scheduler, null in proxy mode.
  virtual const Scheduler* scheduler() const = 0;
  virtual HttpStats http_stats() const = 0;
};

}  // namespace trace::recorder
