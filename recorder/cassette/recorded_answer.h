// A recorded model call turned back into the reply an agent asked for: in the wire format
// and streaming shape of the request now (which need not be those of the recording), from
// the recorded answer, without running a model.
//
// The recorded bytes are sent unchanged when they fit: a non-streamed request of the
// recorded API gets the recorded body, a streamed one of a streamed recording the recorded
// event stream. Otherwise the recorded answer is read back (WireFormat::ReadResponse: text,
// tool calls, finish reason, usage, ids) and rendered by the asked format, whole or as a
// stream (a recording made non-streamed answers a streaming client). A recorded error is
// answered with its status and body.
//
// Ownership: values. Thread safety: reentrant. Errors: none (a recorded answer that does
// not parse renders as an empty answer with the recorded finish reason).
#pragma once

#include <string>

#include "recorder/api/model_call.h"
#include "recorder/cassette/cassette.h"

namespace trace::recorder {

struct RecordedReply {
  int status = 200;
  std::string body;           // what to send: a JSON body, or the whole event stream
  bool stream = false;        // body is an event stream (text/event-stream)
  std::string response_json;  // the non-streamed body of the same answer, for the recording
  std::string output_text;
  std::string finish_reason;
  std::vector<ToolCall> tool_calls;
};

RecordedReply RenderRecordedAnswer(const RecordedCall& recorded, const WireFormat& asked,
                                   const CompletionRequest& request);

}  // namespace trace::recorder
