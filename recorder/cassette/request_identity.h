// What determines a model call's answer, whatever wire format and streaming shape carried
// it: the identity `trace rerun` matches an agent's request against the recording with.
//
// The identity holds the model name, the conversation (system text, every message's role,
// content, name, tool calls and tool-call id), a raw prompt or its token ids, the tools and
// tool_choice, the response format and guided choices, and the sampling parameters
// (temperature, top_p, top_k, max_tokens, stop, seed; frequency_penalty, presence_penalty
// and logit_bias when set). It leaves out what does not change
// the answer: `stream` and its options, logprobs, the API's framing. So a call recorded
// non-streamed through Chat Completions matches the same request sent streamed, or sent
// through the Responses API with the same conversation.
//
// An embeddings call (api openai.embeddings) has an identity of its own, which never equals
// a completion's.
//
// Ownership: values. Thread safety: reentrant. Errors: a recorded request that no longer
// parses is a Status naming the call's seq and the parse error.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "proto/trace.pb.h"
#include "recorder/api/model_call.h"

namespace trace::recorder {

struct RequestIdentity {
  nlohmann::ordered_json fields;  // the canonical fields (above), in a fixed order
  std::string key;                // fields.dump(): equal keys, equal requests
  // The conversation as readable text ("[system]\n...\n[user]\n..."), for the diff of a
  // divergence; the local engine's rendered prompt differs only by the template's markup.
  std::string prompt_text;
};

RequestIdentity IdentityOf(const CompletionRequest& req);
// An embeddings request's identity (openai_embeddings.h: model, input, encoding_format,
// dimensions); none when the body is not a JSON object.
std::optional<RequestIdentity> EmbeddingsIdentityOf(std::string_view body);

// The WireFormat an LlmCall came through (its `api`, or for v1 runs its endpoint); null
// when neither names one.
const WireFormat* FormatOfRecordedCall(const proto::LlmCall& call);

// The identity of a recorded call, from its request body parsed the way it was served.
Result<RequestIdentity> IdentityOfRecorded(const proto::LlmCall& call, uint64_t seq);

// One field where two identities differ.
struct FieldChange {
  std::string path;      // "messages[2].content", "sampling.temperature", "tools[0]"
  int message = -1;      // the message index for a messages[...] path, else -1
  std::string role;      // that message's role (recorded side, else the new one)
  std::string field;     // the last path component: "content", "temperature", ...
  std::string recorded;  // the value in the recording (JSON text; "(absent)" if none)
  std::string now;       // the value the agent sent now
};

// The differences between `recorded` and `now`, in field order (at most `max` of them).
std::vector<FieldChange> CompareIdentities(const RequestIdentity& recorded,
                                           const RequestIdentity& now, size_t max = 8);

}  // namespace trace::recorder
