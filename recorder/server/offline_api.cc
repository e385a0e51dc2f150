#include "recorder/server/offline_api.h"

#include <nlohmann/json.hpp>

#include "recorder/api/openai_embeddings.h"
#include "recorder/openai_api.h"
#include "recorder/server/http_util.h"

namespace trace::recorder {

namespace {

ApiError NoLiveModel() {
  ApiError e;
  e.http_status = 503;
  e.type = "server_error";
  e.code = "no_live_model";
  e.message =
      "this call is not in the recording and the re-run has no live model: pass "
      "--upstream URL or --model DIR to `trace rerun` to serve it";
  return e;
}

}  // namespace

void OfflineModelApi::Register() {
  httplib::Server& http = frontend_->http();
  http.Get("/v1/models", [this](const httplib::Request& req, httplib::Response& res) {
    if (!frontend_->Authorized(req, res)) return;
    nlohmann::json model{
        {"id", model_name_}, {"object", "model"}, {"created", 0}, {"owned_by", "trace-cassette"}};
    res.set_content(nlohmann::json{{"object", "list"}, {"data", {model}}}.dump(),
                    "application/json");
  });
  http.Post(kEmbeddingsRoute, [this](const httplib::Request& req, httplib::Response& res) {
    if (!frontend_->Authorized(req, res) || !frontend_->Recordable(req, res)) return;
    CallGate* gate = frontend_->gate();
    if (gate != nullptr && gate->AdmitEmbeddingsCall(req, res).answered) return;
    ApiError e = NoLiveModel();
    frontend_->Reject(req, e);
    SendError(res, e);
  });
  for (const WireFormat* format : {&OpenAiChatFormat(), &OpenAiCompletionsFormat(),
                                   &OpenAiResponsesFormat(), &AnthropicMessagesFormat()}) {
    for (const std::string& route : format->routes()) {
      http.Post(route, [this, format](const httplib::Request& req, httplib::Response& res) {
        if (!frontend_->Authorized(req, res) || !frontend_->Recordable(req, res)) return;
        CallGate* gate = frontend_->gate();
        if (gate != nullptr && gate->AdmitModelCall(*format, req, res).answered) return;
        ApiError e = NoLiveModel();
        frontend_->Reject(req, e);
        res.status = e.http_status;
        res.set_content(format->ErrorBody(e), "application/json");
      });
    }
  }
}

}  // namespace trace::recorder
