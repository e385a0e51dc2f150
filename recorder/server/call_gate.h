// The hook through which `trace rerun` answers an agent from a recording (a cassette,
// recorder/cassette/) instead of the live model, tool or clock. The server asks its gate,
// when one is set, before it serves a model call (any wire format, or embeddings; local
// engine, upstream proxy, or the offline server that has no live model), a clock read or a
// tool lookup; without a gate every request is served live as under `trace record`.
//
// Ownership: the gate is borrowed by the frontend (HttpFrontend::SetCallGate) and must
// outlive Stop(). Thread safety: every method is called concurrently from the frontend's
// handler threads. Errors: a gate answers refusals itself, in the route's API shape.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>

#include <httplib.h>

#include <nlohmann/json.hpp>

#include "proto/trace.pb.h"
#include "recorder/api/model_call.h"

namespace trace::recorder {

class HttpFrontend;

class CallGate {
 public:
  virtual ~CallGate() = default;

  // Called by HttpFrontend::SetCallGate: the frontend whose run the gate records into and
  // whose commits it waits for.
  virtual void Attach(HttpFrontend* frontend) = 0;

  // What to do with one model call.
  struct Decision {
    bool answered = false;  // the gate answered (from the recording, or with an error)
    // Serve live with this request body instead of the one received (--edit-call).
    std::optional<std::string> live_body;
    // The call's 0-based place among the run's model calls, which seeds a live call without
    // a request seed (the place it would have had in the recording).
    std::optional<int64_t> run_position;
  };
  // A model call in `format`, authorized and with its headers checked: answers it into
  // `res` (and records it) or lets it through to the live backend.
  virtual Decision AdmitModelCall(const WireFormat& format, const httplib::Request& req,
                                  httplib::Response& res) = 0;
  // The same for POST /v1/embeddings (recorder/api/openai_embeddings.h), which has no
  // WireFormat: a recorded one is answered with its recorded status and body.
  virtual Decision AdmitEmbeddingsCall(const httplib::Request& req, httplib::Response& res) = 0;

  // The recorded clock read to return for a read of `clock` ("wall" | "monotonic"); none:
  // read the clock live.
  virtual std::optional<proto::ClockRead> RecordedClock(const std::string& clock) = 0;

  // POST /trace/v1/tool {name, arguments, call_id}: the recorded result of that tool call,
  // to return instead of running the tool; none: the agent runs it live. A call id (the
  // model's, from a recorded answer) finds the result recorded for it; else the name and
  // arguments do. An ApiError refuses the call
  // (`--tools recorded-only` and no recording of it).
  struct ToolAnswer {
    bool recorded = false;
    proto::ToolResult result;  // when recorded
    uint64_t seq = 0;          // the recorded ToolResult's seq in the parent run
  };
  virtual std::variant<ToolAnswer, ApiError> LookupTool(const std::string& name,
                                                        const nlohmann::json& arguments,
                                                        const std::string& call_id) = 0;
};

}  // namespace trace::recorder
