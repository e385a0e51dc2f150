// OpenAI's Embeddings API (POST /v1/embeddings), as far as the recorder needs it: proxy
// mode forwards it to the upstream and records it (api kApiEmbeddings), `trace rerun`
// matches it against the recording and answers the recorded body. Nothing here computes an
// embedding: the local engine does not serve this API (docs/recorder.md, Limits), it only
// refuses it with UnsupportedEmbeddings().
//
// The identity a re-run matches an embeddings call by is the model, the input as sent (a
// string, strings, or token arrays), encoding_format (absent means "float", OpenAI's
// default) and dimensions; `user` is left out, it does not change the answer. The encoding
// is part of it because the recorded body is sent back unchanged: base64 text answering a
// client that asked for floats would not decode.
//
// Ownership: values. Thread safety: reentrant. Errors: none thrown; a body that is not a
// JSON object reads as empty fields.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "recorder/api/model_call.h"

namespace trace::recorder {

// Our route; the upstream's path is its base URL + "/embeddings".
inline constexpr char kEmbeddingsRoute[] = "/v1/embeddings";

// What a request body of this API says.
struct EmbeddingsRequest {
  std::string model;
  // The canonical fields (above) in a fixed order; null when the body is not a JSON object.
  nlohmann::ordered_json identity;
  // Each input as text (a string as is, a token array as its JSON).
  std::vector<std::string> inputs;
  // The inputs as readable text, one "[input]" block per input, for a divergence's diff.
  std::string input_text;
};
EmbeddingsRequest ReadEmbeddingsRequest(std::string_view body);

// What a response body says: the model, how many vectors of which size, the usage
// (prompt_tokens; OpenAI reports no output tokens for embeddings).
struct EmbeddingsSummary {
  std::string model;
  int64_t vectors = 0;
  // Floats per vector: the first one's array length, or its base64 bytes / 4; 0 if unknown.
  int64_t dimensions = 0;
  bool has_usage = false;
  int64_t input_tokens = 0;  // usage.prompt_tokens
};
EmbeddingsSummary ReadEmbeddingsResponse(const nlohmann::json& body);

// The local engine's answer to POST /v1/embeddings: 404 invalid_request_error, code
// "unsupported_endpoint", saying embeddings are served only in proxy mode. 404, not 501:
// clients retry 5xx statuses (the openai SDKs twice, with backoff) and would hide the
// message behind seconds of retries; a 404 surfaces at once as the SDK's NotFoundError.
ApiError UnsupportedEmbeddings();

}  // namespace trace::recorder
