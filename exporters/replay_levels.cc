#include "exporters/replay_levels.h"

#include <nlohmann/json.hpp>

namespace trace::exporters {

Result<ReplayLevels> ParseReplayReport(const std::string& json_text, const std::string& run_id,
                                       const std::string& source) {
  using nlohmann::json;
  json j = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  const std::string what =
      source + ": not a replay report (write one with trace replay RUN --json)";
  if (j.is_discarded() || !j.is_object() || !j.contains("run_id") || !j["run_id"].is_string() ||
      !j.contains("level") || !j["level"].is_string() || !j.contains("calls") ||
      !j["calls"].is_array()) {
    return InvalidArgument(what);
  }
  if (j["run_id"] != run_id) {
    return InvalidArgument(source + ": the replay report is for run " +
                           j["run_id"].get<std::string>() + ", not " + run_id);
  }
  ReplayLevels out;
  out.run_level = j["level"];
  out.numerics = j.value("numerics", "");
  out.device = j.value("device", "");
  for (const json& c : j["calls"]) {
    if (!c.is_object() || !c.contains("call") || !c["call"].is_number_integer() ||
        !c.contains("level") || !c["level"].is_string()) {
      return InvalidArgument(what + ": a call without 'call' and 'level'");
    }
    out.call_levels[c["call"].get<int>()] = c["level"].get<std::string>();
  }
  if (j.contains("skipped") && j["skipped"].is_array()) {
    for (const json& s : j["skipped"]) {
      if (s.is_object() && s.contains("call") && s["call"].is_number_integer()) {
        out.skipped[s["call"].get<int>()] = s.value("reason", "");
      }
    }
  }
  return out;
}

}  // namespace trace::exporters
