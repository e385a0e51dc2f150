// The JSON API of `trace ui` (docs/ui.md), apart from HTTP: a request is a method, a path
// under /ui/api/ and its query parameters; a reply is a status and a JSON body. The server
// (ui/server.h) maps HTTP onto it; tests call it directly.
//
//   GET  /ui/api/store                      the store: location, schema, read-only
//   GET  /ui/api/runs?limit&cursor&label&q&model&status&from&before&order&parent&content
//                                           a page of runs, newest first (store.h RunQuery;
//                                           content: text in what the model saw or said)
//   GET  /ui/api/runs/RUN?from_seq&limit    one run: header, summary, verdicts, children
//                                           (reruns and forks) and a page of its timeline
//   GET  /ui/api/runs/RUN/events/SEQ        one event whole; a model call with its tokens
//                                           (ids, text, logit, logprob, runner-up, margin)
//   GET  /ui/api/diff?a=RUN&b=RUN           `trace diff --json` of two runs
//   POST /ui/api/replays?run=RUN&calls=LIST starts a replay in the background: {"replay": ID}
//   GET  /ui/api/replays/ID                 its progress, then its report (`replay --json`)
//
// Every run and event is redacted before it leaves (as `trace export` redacts, unless the
// server was started with --no-redact). Every list is bounded (a page); an unreadable row
// is reported in the reply, never a failed page.
//
// Ownership: UiApi borrows the Store (must outlive it) and owns its replay jobs. Thread
// safety: Handle may be called from many threads at once. Errors: a reply with status 400
// (bad parameter), 404 (no such run, event or route), 405, 409, 500 or 503 and
// {"error":{"code","message"}}, the message one line naming what and where.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "redact/rules.h"
#include "replayer/replayer.h"
#include "store/store.h"

namespace trace::ui {

struct ApiRequest {
  std::string method = "GET";
  std::string path;                           // "/ui/api/runs/01J.../events/3"
  std::map<std::string, std::string> params;  // query parameters
};

struct ApiReply {
  int status = 200;
  nlohmann::json body;
};

struct UiApiOptions {
  // Redact runs before they are shown: the built-in rules plus these (nullopt: show runs as
  // stored, `trace ui --no-redact`).
  std::optional<redact::RuleSet> redaction = redact::RuleSet::Defaults();
  // How replays started from the UI run (device, threads, constraint factory); `calls` and
  // `progress` are set per replay.
  replayer::ReplayOptions replay;
  // Replays that may run at once; more are refused with 503.
  int max_replays = 1;
};

class ReplayJobs;   // ui/replay_jobs.h
class UiApiRoutes;  // ui/api.cc

class UiApi {
 public:
  UiApi(store::Store* store, UiApiOptions options);
  ~UiApi();

  ApiReply Handle(const ApiRequest& request);

  // The replay jobs, for the server's progress stream.
  ReplayJobs& replays() { return *replays_; }

 private:
  store::Store* store_;
  UiApiOptions options_;
  std::unique_ptr<ReplayJobs> replays_;
  std::unique_ptr<UiApiRoutes> routes_;
};

// {"error":{"code":CODE,"message":MESSAGE}} with the HTTP status a Status code maps to.
ApiReply ErrorReply(const Status& status);

}  // namespace trace::ui
