#include "recorder/api/openai_embeddings.h"

#include "recorder/api/json_body.h"

namespace trace::recorder {

using ojson = nlohmann::ordered_json;

namespace {

// One input as text: a string as is, a token array as its JSON.
std::string EmbeddingInputText(const ojson& v) {
  return v.is_string() ? v.get<std::string>() : v.dump();
}

// The base64 text's decoded length (padding excluded).
int64_t Base64DecodedBytes(const std::string& s) {
  size_t n = s.size();
  size_t pad = 0;
  while (pad < 2 && n > pad && s[n - 1 - pad] == '=') ++pad;
  return static_cast<int64_t>(n / 4 * 3) - static_cast<int64_t>(pad);
}

}  // namespace

EmbeddingsRequest ReadEmbeddingsRequest(std::string_view body) {
  EmbeddingsRequest r;
  ojson b = ParseOrderedJsonOrDiscarded(body);
  if (!b.is_object()) return r;
  if (b.contains("model") && b["model"].is_string()) r.model = b["model"].get<std::string>();
  ojson& id = r.identity;
  // "api" keeps an embeddings identity apart from every completion one (which has no such
  // field), so the two never match each other in a re-run.
  id["api"] = std::string(kApiEmbeddings);
  id["model"] = r.model;
  id["input"] = b.contains("input") ? b["input"] : ojson(nullptr);
  id["encoding_format"] = b.contains("encoding_format") && !b["encoding_format"].is_null()
                              ? b["encoding_format"]
                              : ojson("float");
  id["dimensions"] = b.contains("dimensions") ? b["dimensions"] : ojson(nullptr);
  const ojson& input = id["input"];
  // A token array ([1, 2, 3]) is one input; an array of strings or of token arrays is many.
  const bool many = input.is_array() && !input.empty() && !input[0].is_number();
  if (many) {
    for (const ojson& v : input) r.inputs.push_back(EmbeddingInputText(v));
  } else {
    r.inputs.push_back(EmbeddingInputText(input));
  }
  for (const std::string& text : r.inputs) r.input_text += "[input]\n" + text + "\n";
  return r;
}

EmbeddingsSummary ReadEmbeddingsResponse(const nlohmann::json& body) {
  EmbeddingsSummary s;
  if (!body.is_object()) return s;
  if (body.contains("model") && body["model"].is_string())
    s.model = body["model"].get<std::string>();
  if (body.contains("data") && body["data"].is_array()) {
    const nlohmann::json& data = body["data"];
    s.vectors = static_cast<int64_t>(data.size());
    if (!data.empty() && data[0].is_object() && data[0].contains("embedding")) {
      const nlohmann::json& e = data[0]["embedding"];
      if (e.is_array()) {
        s.dimensions = static_cast<int64_t>(e.size());
      } else if (e.is_string()) {
        s.dimensions = Base64DecodedBytes(e.get<std::string>()) / 4;  // little-endian float32s
      }
    }
  }
  if (body.contains("usage") && body["usage"].is_object()) {
    const nlohmann::json& u = body["usage"];
    if (u.contains("prompt_tokens") && u["prompt_tokens"].is_number_integer()) {
      s.has_usage = true;
      s.input_tokens = u["prompt_tokens"].get<int64_t>();
    }
  }
  return s;
}

ApiError UnsupportedEmbeddings() {
  ApiError e;
  e.http_status = 404;
  e.type = "invalid_request_error";
  e.code = "unsupported_endpoint";
  e.message =
      "POST /v1/embeddings is served only in proxy mode (trace record --upstream URL): the "
      "local engine does not compute embeddings";
  return e;
}

}  // namespace trace::recorder
