#include "recorder/api/json_body.h"

#include <cstring>

#include <string>
#include <type_traits>

#include "base/ordered_json.h"

namespace trace::recorder {

std::optional<size_t> FindJsonDepthExcess(std::string_view text, int max_depth) {
  int depth = 0;
  bool in_string = false;
  const char* const data = text.data();
  // The next '"' at or after i inside a string, kept across escapes so that a string of
  // many escapes is scanned once, not once per escape.
  size_t quote_at = 0;
  bool quote_known = false;
  for (size_t i = 0; i < text.size(); ++i) {
    if (in_string) {
      // Strings are most of a request body's bytes (prompts): skip to the closing quote
      // with memchr rather than byte by byte, then look for an escape before it.
      if (!quote_known || quote_at < i) {
        const void* quote = std::memchr(data + i, '"', text.size() - i);
        if (quote == nullptr) return std::nullopt;  // unterminated: the parser's to report
        quote_at = static_cast<size_t>(static_cast<const char*>(quote) - data);
        quote_known = true;
      }
      const void* escape = std::memchr(data + i, '\\', quote_at - i);
      if (escape == nullptr) {
        i = quote_at;
        in_string = false;
      } else {
        // The escaped character cannot end the string.
        i = static_cast<size_t>(static_cast<const char*>(escape) - data) + 1;
      }
      continue;
    }
    const char c = data[i];
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

// nlohmann's own parse for json (a std::map per object), ours for ordered_json, whose
// objects nlohmann's parse fills in quadratic time (base/ordered_json.h).
template <typename Json>
Json Parse(std::string_view text) {
  if constexpr (std::is_same_v<Json, nlohmann::ordered_json>) {
    return ParseOrderedJson(text);
  } else {
    return Json::parse(text, nullptr, /*allow_exceptions=*/false);
  }
}

template <typename Json>
std::variant<Json, ApiError> ParseBody(std::string_view body) {
  if (std::optional<size_t> at = FindJsonDepthExcess(body)) return JsonTooDeep("request body", *at);
  Json parsed = Parse<Json>(body);
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
  return Parse<Json>(text);
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
