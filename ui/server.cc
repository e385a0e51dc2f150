#include "ui/server.h"

#include <httplib.h>

#include <chrono>

#include "recorder/server/frontend.h"
#include "ui/assets.h"
#include "ui/replay_jobs.h"

namespace trace::ui {
namespace {

// The app loads nothing from anywhere else, runs no inline script and may not be framed.
constexpr const char* kContentSecurityPolicy =
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'";

void SetCommonHeaders(httplib::Response& res) {
  res.set_header("Content-Security-Policy", kContentSecurityPolicy);
  res.set_header("X-Content-Type-Options", "nosniff");
  res.set_header("Referrer-Policy", "no-referrer");
  res.set_header("Cache-Control", "no-store");
}

std::string JsonText(const nlohmann::json& j) {
  // A damaged or hand-made store may hold invalid UTF-8: shown as U+FFFD, never a failure.
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

ApiRequest ToApiRequest(const httplib::Request& req) {
  ApiRequest r;
  r.method = req.method;
  r.path = req.path;
  for (const auto& [name, value] : req.params) r.params[name] = value;
  return r;
}

}  // namespace

UiServer::UiServer(store::Store* store, UiApiOptions api_options,
                   const recorder::ServerOptions& http)
    : api_(std::make_unique<UiApi>(store, std::move(api_options))),
      front_(std::make_unique<recorder::HttpFrontend>(http)) {
  front_->AllowSameOrigin();
  std::vector<std::string> public_paths;
  for (const Asset& a : Assets()) public_paths.emplace_back(a.path);
  front_->SetPublicPaths(std::move(public_paths));
  AddRoutes();
}

UiServer::~UiServer() {
  Stop();
}

void UiServer::AddRoutes() {
  httplib::Server& http = front_->http();
  for (const Asset& a : Assets()) {
    http.Get(std::string(a.path), [a](const httplib::Request&, httplib::Response& res) {
      SetCommonHeaders(res);
      res.set_content(a.content.data(), a.content.size(), std::string(a.content_type).c_str());
    });
  }
  // The replay's progress stream: one event per change until it is done.
  http.Get(R"(/ui/api/replays/([A-Za-z0-9]+)/events)", [this](const httplib::Request& req,
                                                              httplib::Response& res) {
    const std::string id = req.matches[1];
    if (!api_->replays().Get(id)) {
      SetCommonHeaders(res);
      res.status = 404;
      res.set_content(JsonText(ErrorReply(NotFound("no replay " + id)).body), "application/json");
      return;
    }
    SetCommonHeaders(res);
    auto seen = std::make_shared<uint64_t>(0);
    auto first = std::make_shared<bool>(true);
    res.set_chunked_content_provider(
        "text/event-stream", [this, id, seen, first](size_t, httplib::DataSink& sink) {
          std::optional<ReplayJobState> job =
              *first ? api_->replays().Get(id)
                     : api_->replays().WaitChange(id, *seen, std::chrono::seconds(15));
          *first = false;
          if (!job) return false;
          if (job->version == *seen && !job->done) {
            // Nothing changed for a while: a comment keeps the connection alive.
            static constexpr char kKeepAlive[] = ": keep-alive\n\n";
            return sink.write(kKeepAlive, sizeof kKeepAlive - 1);
          }
          *seen = job->version;
          const std::string event = "data: " + JsonText(ReplayStateJson(*job)) + "\n\n";
          if (!sink.write(event.data(), event.size())) return false;
          if (job->done) sink.done();
          return true;
        });
  });
  auto api = [this](const httplib::Request& req, httplib::Response& res) {
    ApiReply reply = api_->Handle(ToApiRequest(req));
    SetCommonHeaders(res);
    res.status = reply.status;
    res.set_content(JsonText(reply.body), "application/json");
  };
  http.Get(R"(/ui/api/.*)", api);
  http.Post(R"(/ui/api/.*)", api);
}

Status UiServer::Start() {
  return front_->Start();
}
void UiServer::Stop() {
  front_->Stop();
}
int UiServer::port() const {
  return front_->port();
}
std::string UiServer::url() const {
  return front_->origin() + "/";
}

}  // namespace trace::ui
