// Fuzz target for the Embeddings API's readers (recorder/api/openai_embeddings.h): the
// request reader, whose identity `trace rerun` matches a call by (the body comes from the
// agent), and the response reader that `trace show` and the proxy's recording apply to an
// upstream's answer. Promises: no crash or exception; an identity is a JSON object with
// exactly its five fields in order, whose text (the cassette's key) dumps; reading a
// request rebuilt from an identity gives the same identity (a recorded call and its
// re-run match however the agent spelled defaults); one input text per input; a
// response's counts are never negative and its usage is what the body says.
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "recorder/api/json_body.h"
#include "recorder/api/openai_embeddings.h"
#include "tests/fuzz/fuzz_checks.h"
#include "tests/fuzz/fuzz_target.h"

namespace {

using namespace trace::recorder;  // NOLINT: a fuzz target
using trace::fuzz::Fail;

void CheckRequest(std::string_view body) {
  const EmbeddingsRequest r = ReadEmbeddingsRequest(body);
  const nlohmann::ordered_json parsed = ParseOrderedJsonOrDiscarded(body);
  if (!parsed.is_object()) {
    if (!r.identity.is_null()) Fail("an identity for a body that is not a JSON object");
    return;
  }
  const nlohmann::ordered_json& id = r.identity;
  if (!id.is_object() || id.size() != 5) Fail("identity is not an object of five fields");
  const char* const kFields[] = {"api", "model", "input", "encoding_format", "dimensions"};
  size_t i = 0;
  for (auto it = id.begin(); it != id.end(); ++it, ++i) {
    if (it.key() != kFields[i]) Fail("identity field " + std::to_string(i) + " is " + it.key());
  }
  if (id["api"] != std::string(kApiEmbeddings)) Fail("identity api is not openai.embeddings");
  const bool model_given = parsed.contains("model") && parsed["model"].is_string();
  if (r.model != (model_given ? parsed["model"].get<std::string>() : std::string())) {
    Fail("model read as '" + r.model + "'");
  }
  if (r.inputs.empty()) Fail("no input text");
  std::string expected_text;
  for (const std::string& text : r.inputs) expected_text += "[input]\n" + text + "\n";
  if (r.input_text != expected_text) Fail("input_text is not the inputs' blocks");
  const std::string key = id.dump();  // what the cassette compares; throws on bad UTF-8

  // The identity as a request body (less its api) reads back as itself.
  nlohmann::ordered_json rebuilt = id;
  rebuilt.erase("api");
  const EmbeddingsRequest again = ReadEmbeddingsRequest(rebuilt.dump());
  if (again.identity.dump() != key) {
    Fail("identity not stable: " + key.substr(0, 200) + " then " +
         again.identity.dump().substr(0, 200));
  }
  if (again.inputs != r.inputs) Fail("inputs differ when read again");
}

void CheckResponse(std::string_view body) {
  const nlohmann::json parsed = ParseJsonOrDiscarded(body);
  const EmbeddingsSummary s = ReadEmbeddingsResponse(parsed);
  if (s.vectors < 0 || s.dimensions < 0) {
    Fail("negative count: vectors " + std::to_string(s.vectors) + ", dimensions " +
         std::to_string(s.dimensions));
  }
  if (!parsed.is_object()) {
    if (s.vectors != 0 || s.has_usage || !s.model.empty()) Fail("read a non-object body");
    return;
  }
  if (parsed.contains("data") && parsed["data"].is_array() &&
      s.vectors != static_cast<int64_t>(parsed["data"].size())) {
    Fail("vector count is not data's size");
  }
  if (s.has_usage && s.input_tokens != parsed.at("usage").at("prompt_tokens").get<int64_t>()) {
    Fail("usage is not prompt_tokens");
  }
}

}  // namespace

std::vector<std::string> TraceFuzzSeeds() {
  return {
      R"({"model": "text-embedding-3-small", "input": "The food was delicious"})",
      R"({"model": "m", "input": ["a", "b", ""], "encoding_format": "base64", "dimensions": 8,
          "user": "u"})",
      R"({"model": "m", "input": [1, 2, 3], "encoding_format": null})",
      R"({"model": "m", "input": [[1, 2], [3]], "encoding_format": "float"})",
      R"({"object": "list", "data": [{"object": "embedding", "index": 0, "embedding":
          [0.5, -0.25]}], "model": "m", "usage": {"prompt_tokens": 4, "total_tokens": 4}})",
      R"({"object": "list", "data": [{"object": "embedding", "index": 0, "embedding":
          "AAAAPwAAgL4="}], "model": "m", "usage": {"prompt_tokens": 1}})",
      R"({"error": {"message": "bad", "type": "invalid_request_error"}})",
  };
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  CheckRequest(input);
  CheckResponse(input);
  return 0;
}
