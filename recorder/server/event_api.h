// The trace event API, served beside the model API on the same port and token: what the
// model API cannot see, reported by the agent. POST /trace/v1/events (one event or a batch,
// validated as a whole), GET /trace/v1/clock (a recorded clock read), POST /trace/v1/tool
// (a tool's recorded result under `trace rerun`) and POST /trace/v1/flush (waits until everything
// so far is durable). docs/recorder.md.
//
// Ownership: borrows the frontend, which must outlive it. Thread safety: handlers run on
// the frontend's threads; RunLog is thread-safe. Errors: a bad event is a 400 (422 for an
// unknown type) naming the field. Events and clock reads are acknowledged once committed;
// a store that cannot take them is a 503 with the store's message.
#pragma once

#include <string>
#include <variant>

#include <nlohmann/json.hpp>

#include "proto/trace.pb.h"
#include "recorder/api/model_call.h"
#include "recorder/server/frontend.h"

namespace trace::recorder {

class EventApi {
 public:
  explicit EventApi(HttpFrontend* frontend) : frontend_(frontend) {}
  // Adds the /trace/v1/* routes to the frontend.
  void Register();

  // One agent event object as a proto event; `where` prefixes field names in errors
  // ("events[3]"), empty for a single event.
  static std::variant<proto::Event, ApiError> ParseAgentEvent(const nlohmann::json& j,
                                                              const std::string& where);

 private:
  void HandleEvents(const httplib::Request& req, httplib::Response& res);
  void HandleClock(const httplib::Request& req, httplib::Response& res);
  // POST /trace/v1/tool {name, arguments, call_id?}: under `trace rerun`, the recorded
  // result of that tool call ({"recorded": true, content, is_error}, recorded in the new
  // run); otherwise {"recorded": false} and the agent runs the tool itself.
  void HandleTool(const httplib::Request& req, httplib::Response& res);
  void HandleFlush(const httplib::Request& req, httplib::Response& res);

  HttpFrontend* frontend_;
};

}  // namespace trace::recorder
