#include "recorder/api/json_body.h"

#include <cstring>

#include <string>
#include <type_traits>

#include "base/ordered_json.h"

namespace trace::recorder {

namespace {

bool IsSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

// A byte that continues a number or a literal (true, false, null), or garbage the parser
// will refuse: what is not structure, whitespace or a quote.
bool IsScalarByte(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-' ||
         c == '+' || c == '.';
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The content of a JSON string (between its quotes), unescaped well enough to be scanned as
// JSON text: escapes of ASCII characters give the character, of any other code point a
// letter (it can only stand inside a string of the inner text, or make it invalid).
std::string UnescapeForScan(std::string_view raw) {
  std::string out;
  out.reserve(raw.size());
  for (size_t i = 0; i < raw.size(); ++i) {
    if (raw[i] != '\\' || i + 1 >= raw.size()) {
      out += raw[i];
      continue;
    }
    const char e = raw[++i];
    if (e == 'u') {
      int code = 0;
      size_t k = 0;
      for (; k < 4 && i + 1 + k < raw.size(); ++k) {
        const int h = HexValue(raw[i + 1 + k]);
        if (h < 0) break;
        code = code * 16 + h;
      }
      i += k;
      out += k == 4 && code < 0x80 ? static_cast<char>(code) : 'x';
    } else if (e == 'n' || e == 'r' || e == 't') {
      out += ' ';
    } else if (e == 'b' || e == 'f') {
      out += 'x';
    } else {
      out += e;  // " \ / (or an invalid escape: the parser's to report)
    }
  }
  return out;
}

// Whether a key (raw, as in the text) is "arguments": tool-call arguments sent as JSON text
// (OpenAI's function.arguments, Responses' function_call items, the event API's tool
// calls), which the chat template and the event API parse on their own.
bool IsArgumentsKey(std::string_view raw_key, bool escaped) {
  constexpr std::string_view kArguments = "arguments";
  if (!escaped) return raw_key == kArguments;
  // "argument\u0073" is the same key once parsed; the longest spelling is 9 escapes.
  return raw_key.size() <= 6 * kArguments.size() && UnescapeForScan(raw_key) == kArguments;
}

JsonScan Scan(std::string_view text, int max_depth, size_t max_values, bool inner) {
  JsonScan scan;
  scan.max_values = max_values;
  const char* const data = text.data();
  const size_t size = text.size();
  int depth = 0;
  bool top_is_object = false;  // the outermost value is an object (its keys name fields)
  bool in_scalar = false;      // inside a number or literal, counted at its first byte
  bool after_colon = false;    // the next value is a member's (the last key's)
  std::string_view member;     // the top-level key whose value is being read
  std::string_view key;        // the last key read (raw), and whether it held escapes
  bool key_escaped = false;
  auto exceed = [&](JsonScan::Excess what, size_t at) {
    scan.excess = what;
    scan.offset = at;
    if (depth >= 1 && top_is_object) scan.field = member;
    return scan;
  };
  for (size_t i = 0; i < size; ++i) {
    const char c = data[i];
    if (c == '"') {
      in_scalar = false;
      if (++scan.values > max_values) return exceed(JsonScan::Excess::kValues, i);
      // Strings are most of a request body's bytes (prompts): skip to the closing quote
      // with memchr rather than byte by byte. The next '"' is kept across escapes, so a
      // string of many escapes is scanned once, not once per escape.
      const size_t start = i + 1;
      size_t from = start;
      size_t quote_at = 0;
      bool quote_known = false;
      size_t saved = 0;  // bytes the escapes save once decoded (at least)
      for (;;) {
        if (!quote_known || quote_at < from) {
          const void* quote = from < size ? std::memchr(data + from, '"', size - from) : nullptr;
          if (quote == nullptr) return scan;  // unterminated: the parser's to report
          quote_at = static_cast<size_t>(static_cast<const char*>(quote) - data);
          quote_known = true;
        }
        const void* escape = std::memchr(data + from, '\\', quote_at - from);
        if (escape == nullptr) break;
        // The escaped character cannot end the string; \uXXXX is six bytes for at least
        // one, any other escape two for one.
        const size_t at = static_cast<size_t>(static_cast<const char*>(escape) - data);
        saved += data[at + 1] == 'u' ? 5 : 1;
        from = at + 2;
      }
      const size_t raw = quote_at - start;
      const std::string_view content(data + start, raw);
      scan.string_bytes += raw > saved ? raw - saved : 0;
      i = quote_at;
      size_t next = quote_at + 1;
      while (next < size && IsSpace(data[next])) ++next;
      if (next < size && data[next] == ':') {
        key = content;
        key_escaped = saved > 0;
        if (depth == 1 && top_is_object) member = content;  // a key of the outermost object
      } else if (!inner && after_colon && IsArgumentsKey(key, key_escaped)) {
        // JSON text that will be parsed on its own: its values count as the body's.
        const JsonScan args =
            Scan(UnescapeForScan(content), max_depth, max_values - scan.values, /*inner=*/true);
        if (args.excess == JsonScan::Excess::kValues) {
          return exceed(JsonScan::Excess::kValues, start - 1);
        }
        // Nested too deep, it stays text (json_body's *OrDiscarded refuse it unbuilt).
        if (args.excess == JsonScan::Excess::kNone) scan.values += args.values;
      }
      after_colon = false;
      continue;
    }
    if (c == ':') {
      in_scalar = false;
      after_colon = true;
      continue;
    }
    if (!IsSpace(c)) after_colon = false;
    switch (c) {
      case '[':
      case '{':
        in_scalar = false;
        if (++scan.values > max_values) return exceed(JsonScan::Excess::kValues, i);
        if (depth == 0 && scan.values == 1) top_is_object = c == '{';
        if (++depth > max_depth) return exceed(JsonScan::Excess::kDepth, i);
        break;
      case ']':
      case '}':
        in_scalar = false;
        // Unbalanced closers are the parser's to report; never let them buy depth back.
        if (depth > 0) --depth;
        break;
      default:
        if (IsScalarByte(c)) {
          if (!in_scalar) {
            in_scalar = true;
            if (++scan.values > max_values) return exceed(JsonScan::Excess::kValues, i);
          }
        } else {
          in_scalar = false;
        }
        break;
    }
  }
  return scan;
}

}  // namespace

JsonScan ScanJson(std::string_view text, int max_depth, size_t max_values) {
  return Scan(text, max_depth, max_values, /*inner=*/false);
}

std::optional<size_t> FindJsonDepthExcess(std::string_view text, int max_depth) {
  // Depth only: JSON text in "arguments" strings is parsed (and depth-checked) on its own.
  const JsonScan scan = Scan(text, max_depth, SIZE_MAX, /*inner=*/true);
  if (scan.excess != JsonScan::Excess::kDepth) return std::nullopt;
  return scan.offset;
}

ApiError JsonTooDeep(std::string_view what, size_t offset) {
  ApiError e = BadRequest("", std::string(what) + " nests JSON deeper than " +
                                  std::to_string(kMaxJsonDepth) + " levels (at byte " +
                                  std::to_string(offset) + ")");
  e.code = "json_too_deep";
  return e;
}

ApiError JsonTooManyValues(std::string_view what, const JsonScan& scan) {
  std::string where = "at byte " + std::to_string(scan.offset);
  if (!scan.field.empty()) where += ", in '" + std::string(scan.field) + "'";
  ApiError e =
      BadRequest(std::string(scan.field),
                 std::string(what) + " holds more than " + std::to_string(scan.max_values) +
                     " JSON values and object keys (" + where + "), the most one request may hold");
  e.http_status = 413;
  e.code = "too_many_json_values";
  return e;
}

std::optional<ApiError> JsonScanError(std::string_view what, const JsonScan& scan) {
  switch (scan.excess) {
    case JsonScan::Excess::kDepth:
      return JsonTooDeep(what, scan.offset);
    case JsonScan::Excess::kValues:
      return JsonTooManyValues(what, scan);
    default:
      return std::nullopt;
  }
}

namespace {

// nlohmann's own parse for json (a std::map per object), ours for ordered_json, whose
// objects nlohmann's parse fills in quadratic time (base/ordered_json.h). Either way a NUL
// byte makes the text invalid (ParseOrderedJson refuses it itself).
template <typename Json>
Json Parse(std::string_view text) {
  if constexpr (std::is_same_v<Json, nlohmann::ordered_json>) {
    return ParseOrderedJson(text);
  } else {
    if (!text.empty() && std::memchr(text.data(), '\0', text.size()) != nullptr) {
      return Json(Json::value_t::discarded);
    }
    return Json::parse(text, nullptr, /*allow_exceptions=*/false);
  }
}

template <typename Json>
std::variant<Json, ApiError> ParseBody(std::string_view body) {
  if (std::optional<ApiError> e = JsonScanError("request body", ScanJson(body))) return *e;
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
