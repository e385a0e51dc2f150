#include "exporters/otlp_json.h"

#include <google/protobuf/util/json_util.h>

#include <nlohmann/json.hpp>

#include "base/json_print.h"
#include "store/export.h"

namespace trace::exporters {
namespace {

using nlohmann::json;

int Base64Value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+' || c == '-') return 62;
  if (c == '/' || c == '_') return 63;
  return -1;
}

// protobuf prints bytes as base64; OTLP/JSON wants trace and span ids as hex.
std::string Base64ToHex(const std::string& b64) {
  static const char kHex[] = "0123456789abcdef";
  std::string hex;
  uint32_t acc = 0;
  int bits = 0;
  for (char c : b64) {
    int v = Base64Value(c);
    if (v < 0) continue;  // padding
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      uint8_t byte = static_cast<uint8_t>((acc >> bits) & 0xff);
      hex.push_back(kHex[byte >> 4]);
      hex.push_back(kHex[byte & 15]);
    }
  }
  return hex;
}

void IdsToHex(json* object) {
  for (const char* key : {"traceId", "spanId", "parentSpanId"}) {
    auto it = object->find(key);
    if (it != object->end() && it->is_string()) *it = Base64ToHex(it->get<std::string>());
  }
}

}  // namespace

Result<std::string> OtlpToJson(const OtlpRequest& request) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = false;  // lowerCamelCase, as OTLP/JSON requires
  options.always_print_enums_as_ints = true;
  auto text = store::MessageToJson(request, options);
  if (!text.ok()) return Internal("OTLP JSON encoding failed: " + text.status().message());
  json doc = json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return Internal("OTLP JSON encoding produced invalid JSON");
  if (doc.contains("resourceSpans")) {
    for (json& rs : doc["resourceSpans"]) {
      if (!rs.contains("scopeSpans")) continue;
      for (json& ss : rs["scopeSpans"]) {
        if (!ss.contains("spans")) continue;
        for (json& span : ss["spans"]) {
          IdsToHex(&span);
          if (span.contains("links")) {
            for (json& link : span["links"]) IdsToHex(&link);
          }
        }
      }
    }
  }
  return JsonText(doc) + "\n";
}

}  // namespace trace::exporters
