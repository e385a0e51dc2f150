#include "exporters/run_data.h"

#include <map>

namespace trace::exporters {

Result<RunData> LoadRun(store::Store& store, const std::string& run_id,
                        const redact::RuleSet* rules, std::vector<BadRow>* bad_rows) {
  RunData run;
  TRACE_ASSIGN_OR_RETURN(run.summary, store.GetRunSummary(run_id));
  TRACE_ASSIGN_OR_RETURN(run.header, store.LoadHeader(run_id));
  if (bad_rows == nullptr) {
    TRACE_ASSIGN_OR_RETURN(run.events, store.LoadEvents(run_id));
  } else {
    TRACE_ASSIGN_OR_RETURN(std::unique_ptr<store::EventIterator> it, store.ReadEvents(run_id));
    store::EventRecord rec;
    while (it->Next(&rec)) {
      if (rec.status.ok()) {
        run.events.push_back(std::move(rec.event));
      } else {
        bad_rows->push_back({rec.seq, rec.status});
      }
    }
    TRACE_RETURN_IF_ERROR(it->status());
  }
  if (rules != nullptr) {
    redact::RuleSet with_run = *rules;
    // By name, so that the rules (and which name a shared value is reported under) are the
    // same in every process: a protobuf map's order is not.
    for (const auto& [name, value] :
         std::map<std::string, std::string>(run.header.env().begin(), run.header.env().end())) {
      if (redact::RuleSet::NameLooksSecret(name)) with_run.AddLiteral("env:" + name, value);
    }
    TRACE_ASSIGN_OR_RETURN(redact::Redactor redactor, redact::Redactor::Create(with_run));
    redact::RedactRun(redactor, &run.header, &run.events, &run.redaction);
    run.redacted = true;
    run.redaction_rules = redactor.RuleNames();
  }
  return run;
}

std::vector<std::string> RedactedFieldLines(const redact::RedactionReport& report) {
  std::vector<std::string> lines;
  for (const auto& f : report.fields) {
    std::string line = f.where + " " + f.field + " (";
    bool first = true;
    for (const auto& [rule, count] : f.rules) {
      line += (first ? "" : ", ") + rule + " x" + std::to_string(count);
      first = false;
    }
    lines.push_back(line + ")");
  }
  return lines;
}

}  // namespace trace::exporters
