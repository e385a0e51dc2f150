#include "replayer/verify_batch.h"

#include <algorithm>
#include <set>

#include <nlohmann/json.hpp>

namespace trace::replayer {
namespace {

bool ModelMatches(const std::string& recorded_dir, const std::string& wanted) {
  if (wanted.empty()) return true;
  if (recorded_dir == wanted) return true;
  std::string dir = recorded_dir;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  const size_t slash = dir.rfind('/');
  return (slash == std::string::npos ? dir : dir.substr(slash + 1)) == wanted;
}

int VerdictRank(const std::string& verdict) {
  static const std::map<std::string, int> kRank = {
      {"bitwise", 0}, {"tokens", 1}, {"recorded_only", 2}, {"diverged", 3}};
  auto it = kRank.find(verdict);
  return it == kRank.end() ? 4 : it->second;  // "error" meets no requirement
}

}  // namespace

Result<SelectedRuns> SelectRunsToVerify(store::Store& store, const RunSelection& selection) {
  std::vector<store::RunSummary> candidates;
  if (!selection.runs.empty()) {
    std::set<std::string> seen;
    for (const std::string& id : selection.runs) {
      TRACE_ASSIGN_OR_RETURN(std::string full, store.ResolveRunId(id));
      if (!seen.insert(full).second) continue;
      TRACE_ASSIGN_OR_RETURN(store::RunSummary s, store.GetRunSummary(full));
      candidates.push_back(std::move(s));
    }
  } else {
    TRACE_ASSIGN_OR_RETURN(candidates, store.ListRuns(0));  // newest first
  }
  SelectedRuns out;
  for (const store::RunSummary& s : candidates) {
    if (!selection.label.empty() && s.label != selection.label) continue;
    if (s.start_time_ns < selection.since_ns) continue;
    if (!s.problem.empty()) return Corruption("run " + s.run_id + ": " + s.problem);
    if (s.status == store::RunStatus::kRecording) {
      out.recording.push_back(s.run_id);
      continue;
    }
    TRACE_ASSIGN_OR_RETURN(proto::RunHeader header, store.LoadHeader(s.run_id));
    const std::string& dir = header.model().model_dir();
    if (!ModelMatches(dir, selection.model)) continue;
    out.jobs.push_back({s.run_id, dir});
    if (selection.limit > 0 && out.jobs.size() >= selection.limit) break;
  }
  if (selection.runs.empty()) std::reverse(out.jobs.begin(), out.jobs.end());
  return out;
}

VerifySummary Summarize(const std::vector<store::Verification>& verdicts,
                        const std::map<std::string, std::string>& model_of) {
  VerifySummary s;
  std::set<std::string> machines;
  for (const store::Verification& v : verdicts) {
    ++s.runs;
    ++s.by_verdict[v.verdict];
    auto m = model_of.find(v.run_id);
    ++s.by_model[m == model_of.end() ? std::string() : m->second][v.verdict];
    if (v.verdict == "diverged") s.diverged.push_back(&v);
    if (v.verdict == "error") s.errors.push_back(&v);
    if (!v.machine.empty()) machines.insert(v.machine);
    if (v.report_json.empty()) continue;
    const nlohmann::json report = nlohmann::json::parse(v.report_json, nullptr, false);
    if (!report.is_object()) continue;
    std::set<std::string> fields;  // each field once per run
    for (const char* key : {"fingerprint_differences", "model_differences"}) {
      if (!report.contains(key) || !report[key].is_array()) continue;
      for (const auto& d : report[key]) {
        if (d.is_object() && d.contains("field") && d["field"].is_string()) {
          fields.insert(d["field"].get<std::string>());
        }
      }
    }
    for (const std::string& f : fields) ++s.by_fingerprint_difference[f];
  }
  s.machines.assign(machines.begin(), machines.end());
  return s;
}

bool MeetsRequirement(const std::string& verdict, const std::string& require) {
  return VerdictRank(verdict) <= (require == "tokens" ? 1 : 0);
}

}  // namespace trace::replayer
