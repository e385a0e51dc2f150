// What the server appends to the run for a model call: the LlmCall event of a call the
// local engine served, the ToolCall events of the calls the model made, and the tool
// results an agent sends back as `role: tool` messages. Every RunLog append of the model
// API goes through here (the proxy's RecordProxiedCall, which takes the request's params from
// here too, and the event API aside).
//
// Ownership: borrows everything. Thread safety: RunLog is thread-safe; a Call is read
// only after its generation finished. Errors: a failing append is returned (the store's
// Status naming the run); the caller answers the model call only once the seq it gets back
// is committed (RunLog::Commit), else with 503.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "recorder/api/model_call.h"
#include "recorder/run_log.h"
#include "recorder/scheduler.h"
#include "recorder/server/local_call.h"

namespace trace::recorder {

// LlmCall.params of a model call: the request's sampling parameters, seed (when it had one),
// logprobs and n = 1. max_tokens: the limit the call ran with when `max_tokens_as_run` (the
// local engine: the request's or the default), else only a limit the client set (the proxy:
// an upstream applies its own default).
void SamplingParamsToProto(const CompletionRequest& req, bool max_tokens_as_run,
                           proto::SamplingParams* out);

// Records an LlmCall for `call` (served with HTTP `status` and response `body`; `error`
// set when the generation failed; finish_reason "cancelled" when its client went away),
// then the tool calls in `r` pointing at it. Every token sampled is recorded, so a replay
// verifies a cancelled call as far as it went. Returns the last seq appended.
Result<uint64_t> RecordLocalCall(RunLog* log, Call& call, const GenerationResult& g,
                                 const CompletionResult& r, int status, const std::string& body,
                                 const std::string& error, const std::string& numerics);

// ToolCall events (source "model") for calls the model made in the LlmCall at `seq`.
// Returns the last seq appended (llm_call_seq when there is none), or the first failure.
Result<uint64_t> RecordModelToolCalls(RunLog* log, uint64_t llm_call_seq,
                                      const std::vector<ToolCall>& calls);

// A ToolResult for every `role: tool` message (once per tool_call_id, see RunLog).
void RecordToolResultsFromMessages(RunLog* log, const CompletionRequest& req);

}  // namespace trace::recorder
