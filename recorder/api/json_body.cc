#include "recorder/api/json_body.h"

#include <string>

namespace trace::recorder {

std::optional<size_t> FindJsonDepthExcess(std::string_view text, int max_depth) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;  // the escaped character cannot end the string
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    switch (c) {
      case '"':
        in_string = true;
        break;
      case '[':
      case '{':
        if (++depth > max_depth) return i;
        break;
      case ']':
      case '}':
        // Unbalanced closers are the parser's to report; never let them buy depth back.
        if (depth > 0) --depth;
        break;
      default:
        break;
    }
  }
  return std::nullopt;
}

ApiError JsonTooDeep(std::string_view what, size_t offset) {
  ApiError e = BadRequest("", std::string(what) + " nests JSON deeper than " +
                                  std::to_string(kMaxJsonDepth) + " levels (at byte " +
                                  std::to_string(offset) + ")");
  e.code = "json_too_deep";
  return e;
}

namespace {

template <typename Json>
std::variant<Json, ApiError> ParseBody(std::string_view body) {
  if (std::optional<size_t> at = FindJsonDepthExcess(body)) return JsonTooDeep("request body", *at);
  Json parsed = Json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) {
    ApiError e = BadRequest("", "request body is not valid JSON");
    e.code = "invalid_json";
    return e;
  }
  return parsed;
}

template <typename Json>
Json ParseOrDiscarded(std::string_view text) {
  if (FindJsonDepthExcess(text)) return Json(Json::value_t::discarded);
  return Json::parse(text, nullptr, /*allow_exceptions=*/false);
}

}  // namespace

std::variant<nlohmann::ordered_json, ApiError> ParseJsonBodyOrdered(std::string_view body) {
  return ParseBody<nlohmann::ordered_json>(body);
}

std::variant<nlohmann::json, ApiError> ParseJsonBody(std::string_view body) {
  return ParseBody<nlohmann::json>(body);
}

nlohmann::json ParseJsonOrDiscarded(std::string_view text) {
  return ParseOrDiscarded<nlohmann::json>(text);
}

nlohmann::ordered_json ParseOrderedJsonOrDiscarded(std::string_view text) {
  return ParseOrDiscarded<nlohmann::ordered_json>(text);
}

}  // namespace trace::recorder
