// The Server: one HttpFrontend with either the local engine's model API or the upstream
// proxy, and the trace event API. The parts live in recorder/server/: frontend (sockets,
// auth, rejected requests), local_engine + local_stream (every wire format on the engine),
// response_store (Responses' conversation state), call_recording (what a model call
// appends to the run), upstream_proxy + upstream_relay + upstream_pool, event_api,
// fingerprint (run header facts), http_util; offline_api (a re-run with no live model).
#include "recorder/server.h"
#include "engine/model_files.h"

#include "recorder/api/anthropic_messages.h"
#include "recorder/api/openai_chat.h"
#include "recorder/api/openai_completions.h"
#include "recorder/api/openai_responses.h"
#include "recorder/server/event_api.h"
#include "recorder/server/frontend.h"
#include "recorder/server/http_util.h"
#include "recorder/server/local_engine.h"
#include "recorder/server/offline_api.h"
#include "recorder/server/upstream_proxy.h"

namespace trace::recorder {
namespace {

class ServerImpl : public Server {
 public:
  // Local mode: `backend` set, `upstream` empty. Proxy mode: the reverse.
  ServerImpl(LocalBackend backend, const ServerOptions& options, std::string upstream)
      : frontend_(options), events_(&frontend_) {
    std::string id_prefix = RandomHex(4);
    if (upstream.empty() && backend.model == nullptr) {
      offline_ = std::make_unique<OfflineModelApi>(&frontend_, backend.model_name);
      offline_->Register();
    } else if (upstream.empty()) {
      local_ = std::make_unique<LocalEngineApi>(std::move(backend), &frontend_, id_prefix);
      local_->Register();
      // A body whose text cannot fit the model's context is refused as soon as it is read,
      // before it is copied and parsed (docs/recorder.md, "Limits").
      std::vector<HttpFrontend::PromptRoute> routes;
      for (const WireFormat* format : {&OpenAiChatFormat(), &OpenAiCompletionsFormat(),
                                       &OpenAiResponsesFormat(), &AnthropicMessagesFormat()}) {
        const std::string param = format->api() == kApiCompletions ? "prompt"
                                  : format->api() == kApiResponses ? "input"
                                                                   : "messages";
        for (const std::string& route : format->routes()) routes.push_back({route, param});
      }
      frontend_.LimitPromptText(local_->max_prompt_bytes(), local_->max_context(),
                                std::move(routes));
    } else {
      proxy_ = std::make_unique<UpstreamProxy>(&frontend_, std::move(upstream));
      proxy_->Register();
    }
    events_.Register();
  }

  ~ServerImpl() override { Stop(); }

  void SetRunLog(RunLog* log) override { frontend_.SetRunLog(log); }
  void SetCallGate(CallGate* gate) override { frontend_.SetCallGate(gate); }
  Status Start() override { return frontend_.Start(); }
  void Stop() override { frontend_.Stop(); }
  int port() const override { return frontend_.port(); }
  std::string origin() const override { return frontend_.origin(); }
  const std::string& model_name() const override {
    static const std::string kNone;
    if (offline_) return offline_->model_name();
    return local_ ? local_->model_name() : kNone;
  }
  const Scheduler* scheduler() const override { return local_ ? local_->scheduler() : nullptr; }
  HttpStats http_stats() const override { return frontend_.stats(); }

 private:
  // Declared first, destroyed last: the APIs' handlers run on its threads.
  HttpFrontend frontend_;
  EventApi events_;
  std::unique_ptr<LocalEngineApi> local_;
  std::unique_ptr<UpstreamProxy> proxy_;
  std::unique_ptr<OfflineModelApi> offline_;
};

}  // namespace

Result<LocalBackend> LoadLocalBackend(const std::string& model_dir,
                                      const engine::EngineOptions& engine_options,
                                      const SchedulerOptions& scheduler_options,
                                      bool hash_weights) {
  LocalBackend b;
  TRACE_ASSIGN_OR_RETURN(b.model, engine::Model::Load(model_dir, hash_weights));
  TRACE_ASSIGN_OR_RETURN(b.tokenizer, engine::LoadModelTokenizer(model_dir));
  std::string dir = model_dir;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  size_t slash = dir.find_last_of('/');
  b.model_name = slash == std::string::npos ? dir : dir.substr(slash + 1);
  // A template error reaches the client (a 422): it names the model, not the server's path.
  // A model without any chat template (a base model) serves completions; chat requests are
  // answered with an error saying so (local_engine.cc).
  TRACE_ASSIGN_OR_RETURN(b.chat_template, engine::LoadModelChatTemplate(model_dir, b.model_name));
  TRACE_ASSIGN_OR_RETURN(auto engine, engine::Engine::Create(b.model, engine_options));
  TRACE_ASSIGN_OR_RETURN(b.scheduler, Scheduler::Create(std::move(engine), scheduler_options));
  return b;
}

Result<std::unique_ptr<Server>> Server::CreateProxy(const std::string& upstream_base_url,
                                                    const ServerOptions& options) {
  if (upstream_base_url.rfind("http://", 0) != 0 && upstream_base_url.rfind("https://", 0) != 0) {
    return InvalidArgument("--upstream must be an http:// or https:// URL, got '" +
                           upstream_base_url + "'");
  }
  return std::unique_ptr<Server>(new ServerImpl(LocalBackend{}, options, upstream_base_url));
}

std::unique_ptr<Server> Server::CreateOffline(const std::string& model_name,
                                              const ServerOptions& options) {
  LocalBackend none;
  none.model_name = model_name;
  return std::make_unique<ServerImpl>(std::move(none), options, "");
}

std::unique_ptr<Server> Server::CreateLocal(LocalBackend backend, const ServerOptions& options) {
  return std::make_unique<ServerImpl>(std::move(backend), options, "");
}

}  // namespace trace::recorder
