#include "exporters/run_json.h"

#include "base/json_print.h"
#include "store/export.h"

namespace trace::exporters {

nlohmann::json RedactionJson(const RunData& run) {
  nlohmann::json j = {{"applied", run.redacted}};
  if (!run.redacted) return j;
  j["rules"] = run.redaction_rules;
  j["replacements"] = run.redaction.replacements();
  j["by_rule"] = run.redaction.RuleTotals();
  nlohmann::json fields = nlohmann::json::array();
  for (const auto& f : run.redaction.fields) {
    fields.push_back({{"where", f.where}, {"field", f.field}, {"rules", f.rules}});
  }
  j["fields"] = std::move(fields);
  j["prompt_token_ids_removed"] = run.redaction.prompt_tokens_removed;
  j["sampled_token_ids_removed"] = run.redaction.sampled_tokens_removed;
  j["note"] = std::string(redact::kRedactedImportNote);
  return j;
}

Status WriteRunJson(const RunData& run, std::ostream& out) {
  TRACE_ASSIGN_OR_RETURN(std::string header_json, store::MessageToJson(run.header));
  // Encode everything before writing, so a failure leaves no partial document.
  std::string events_json;
  bool first = true;
  for (const proto::Event& e : run.events) {
    TRACE_ASSIGN_OR_RETURN(std::string j, store::MessageToJson(e));
    events_json += first ? "\n  " : ",\n  ";
    events_json += j;
    first = false;
  }
  const store::RunSummary& s = run.summary;
  nlohmann::json summary = {{"run_id", s.run_id},
                            {"status", store::RunStatusName(s.status)},
                            {"events", s.events},
                            {"model_calls", s.model_calls},
                            {"sampled_tokens", s.sampled_tokens},
                            {"stored_bytes", s.stored_bytes}};
  out << "{\"format\":\"trace-run\",\"format_version\":" << proto::CURRENT_FORMAT_VERSION
      << ",\"summary\":" << JsonText(summary) << ",\n\"redaction\":" << JsonText(RedactionJson(run))
      << ",\n\"header\":" << header_json << ",\n\"events\":[" << events_json << "\n]}\n";
  if (!out) return IOError("writing the export of run " + s.run_id + " failed");
  return Status::Ok();
}

}  // namespace trace::exporters
