#include "base/json_print.h"

#include "base/utf8.h"

namespace trace {
namespace {

// True when every string in `value` (object keys included) is well-formed UTF-8.
template <typename Json>
bool AllValidUtf8(const Json& value) {
  if (value.is_string()) return IsValidUtf8(value.template get_ref<const std::string&>());
  if (value.is_object()) {
    for (auto it = value.begin(); it != value.end(); ++it) {
      if (!IsValidUtf8(it.key()) || !AllValidUtf8(it.value())) return false;
    }
  } else if (value.is_array()) {
    for (const Json& v : value) {
      if (!AllValidUtf8(v)) return false;
    }
  }
  return true;
}

// A copy of `value` with every string sanitised. Sanitising may make two keys of one object
// equal ("a\xFF" and "a\xFE" both become "a\uFFFD"); the later one then replaces the earlier,
// as a repeated key does when JSON is parsed.
template <typename Json>
Json Sanitized(const Json& value) {
  if (value.is_string()) return SanitizeUtf8(value.template get_ref<const std::string&>());
  if (value.is_object()) {
    Json out = Json::object();
    for (auto it = value.begin(); it != value.end(); ++it) {
      out[SanitizeUtf8(it.key())] = Sanitized(it.value());
    }
    return out;
  }
  if (value.is_array()) {
    Json out = Json::array();
    for (const Json& v : value) out.push_back(Sanitized(v));
    return out;
  }
  return value;
}

template <typename Json>
std::string Dump(const Json& value, int indent) {
  // After sanitising, dump() has nothing left to throw on; the replace handler is only a net
  // (it would catch a string nlohmann judged otherwise than base/utf8.h, which it does not).
  constexpr auto kReplace = Json::error_handler_t::replace;
  if (AllValidUtf8(value)) return value.dump(indent, ' ', false, kReplace);
  return Sanitized(value).dump(indent, ' ', false, kReplace);
}

}  // namespace

std::string JsonText(const nlohmann::json& value, int indent) {
  return Dump(value, indent);
}

std::string JsonText(const nlohmann::ordered_json& value, int indent) {
  return Dump(value, indent);
}

void PrintJson(std::ostream& out, const nlohmann::json& value, int indent) {
  out << JsonText(value, indent) << "\n";
}

void PrintJson(std::ostream& out, const nlohmann::ordered_json& value, int indent) {
  out << JsonText(value, indent) << "\n";
}

}  // namespace trace
