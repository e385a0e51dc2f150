#include "exporters/replay_levels.h"

#include <cstdint>
#include <limits>

#include <nlohmann/json.hpp>

#include "base/escape.h"

namespace trace::exporters {

Result<ReplayLevels> ParseReplayReport(const std::string& json_text, const std::string& run_id,
                                       const std::string& source) {
  using nlohmann::json;
  json j = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  const std::string shown_source = EscapePathForDisplay(source);
  const std::string what =
      shown_source + ": not a replay report (write one with trace replay RUN --json)";
  if (j.is_discarded() || !j.is_object() || !j.contains("run_id") || !j["run_id"].is_string() ||
      !j.contains("level") || !j["level"].is_string() || !j.contains("calls") ||
      !j["calls"].is_array()) {
    return InvalidArgument(what);
  }
  if (j["run_id"] != run_id) {
    return InvalidArgument(shown_source + ": the replay report is for run " +
                           EscapeForDisplay(j["run_id"].get<std::string>()) + ", not " + run_id);
  }
  // An optional string member: absent or null reads as "", any other type is an error.
  auto text = [&](const json& obj, const char* key, std::string* out) {
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return true;
    if (!it->is_string()) return false;
    *out = it->get<std::string>();
    return true;
  };
  // A 1-based model call number.
  auto call_number = [](const json& c, int* out) {
    if (!c.is_object() || !c.contains("call") || !c["call"].is_number_integer()) return false;
    const int64_t n = c["call"].get<int64_t>();
    if (n < 1 || n > std::numeric_limits<int>::max()) return false;
    *out = static_cast<int>(n);
    return true;
  };
  ReplayLevels out;
  out.run_level = j["level"];
  if (!text(j, "numerics", &out.numerics) || !text(j, "device", &out.device)) {
    return InvalidArgument(what + ": 'numerics' and 'device' must be strings");
  }
  for (const json& c : j["calls"]) {
    int call = 0;
    if (!call_number(c, &call) || !c.contains("level") || !c["level"].is_string()) {
      return InvalidArgument(what + ": a call without 'call' (a number from 1) and 'level'");
    }
    out.call_levels[call] = c["level"].get<std::string>();
  }
  if (j.contains("skipped") && j["skipped"].is_array()) {
    for (const json& s : j["skipped"]) {
      int call = 0;
      if (!call_number(s, &call)) continue;
      if (!text(s, "reason", &out.skipped[call])) {
        return InvalidArgument(what + ": a skipped call's 'reason' must be a string");
      }
    }
  }
  return out;
}

}  // namespace trace::exporters
