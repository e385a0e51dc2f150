// The run diff for people and tools: RenderDiffText, DiffJson, RenderDiffHtml (diff.h).
// The text is for a terminal: every recorded string in it (field values, params, prompt and
// request diff lines, answers, token texts, descriptions, evidence) goes through
// base/escape.h, so what an agent, a tool or a model produced cannot move the cursor,
// recolour, retitle or reorder the user's terminal. JSON keeps the raw values.
#include <sstream>

#include "base/escape.h"
#include "replayer/diff.h"
#include "replayer/report.h"

namespace trace::replayer {
namespace {

// A recorded string on a terminal line, whole. The descriptions and evidence are escaped
// where diff.cc builds them; escaping is idempotent, so this costs them nothing and catches
// any part that was not (a header's divergence note, a field of a hand-made store).
std::string DiffShown(const std::string& s) {
  return EscapeForDisplay(s, kNoLimit);
}

// A line diff (base/line_diff.h) line by line: the diff's own lines and "-"/"+" markers kept,
// each line's content escaped.
void DiffLines(const std::string& diff, std::ostringstream& o) {
  std::istringstream lines(diff);
  std::string line;
  while (std::getline(lines, line)) o << "    " << DiffShown(line) << "\n";
}

std::string EventRef(const EventDifference& d) {
  return d.kind + " (A seq " + (d.seq_a ? std::to_string(d.seq_a) : "-") + ", B seq " +
         (d.seq_b ? std::to_string(d.seq_b) : "-") + ")";
}

nlohmann::json EventJson(const EventDifference& d) {
  return {{"kind", d.kind}, {"seq_a", d.seq_a}, {"seq_b", d.seq_b}, {"description", d.description}};
}

nlohmann::json FieldsJson(const std::vector<FieldDifference>& v) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& d : v) a.push_back({{"field", d.field}, {"a", d.recorded}, {"b", d.current}});
  return a;
}

}  // namespace

std::string RenderDiffText(const RunDiff& d) {
  std::ostringstream o;
  o << "diff A " << DiffShown(d.run_a) << "  B " << DiffShown(d.run_b) << "\n";
  if (d.link.linked()) {
    std::istringstream lines(d.link.Describe());
    std::string line;
    while (std::getline(lines, line)) o << DiffShown(line) << "\n";
  }
  auto fields = [&](const char* title, const std::vector<FieldDifference>& v) {
    if (v.empty()) return;
    o << title << ":\n";
    for (const auto& f : v) {
      o << "  " << DiffShown(f.field) << ": " << EscapeForDisplay(f.recorded, 80) << " | "
        << EscapeForDisplay(f.current, 80) << "\n";
    }
  };
  fields("fingerprint differences (A | B)", d.fingerprint_differences);
  fields("model differences (A | B)", d.model_differences);
  fields("run header differences (A | B)", d.header_differences);
  if (d.first_difference) {
    o << "first differing event: " << EventRef(*d.first_difference) << ": "
      << DiffShown(d.first_difference->description) << "\n";
  } else {
    o << "no differing event\n";
  }
  for (const auto& c : d.calls) {
    o << "model call " << c.call << " (A seq " << c.seq_a << ", B seq " << c.seq_b << "):\n";
    for (const auto& p : c.params) {
      o << "  " << p.field << ": " << EscapeForDisplay(p.recorded) << " | "
        << EscapeForDisplay(p.current) << "\n";
    }
    if (c.first_prompt_token >= 0) {
      o << "  prompts differ from token " << c.first_prompt_token << " (A " << c.prompt_token_a
        << ", B " << c.prompt_token_b << "); rendered prompt diff (- A, + B):\n";
      DiffLines(c.prompt_text_diff, o);
    }
    if (!c.request_diff.empty()) {
      o << "  requests differ (upstream ids compared by place); request diff (- A, + B):\n";
      DiffLines(c.request_diff, o);
    }
    if (c.answers_differ) {
      o << "  answers differ: A " << QuoteForDisplay(c.output_text_a, 200) << " | B "
        << QuoteForDisplay(c.output_text_b, 200) << "\n";
    }
    if (c.first_logits_difference >= 0) {
      o << "  logits first differ at step " << c.first_logits_difference << "\n";
    }
    if (c.first_output_token >= 0) {
      o << "  sampled tokens first differ at step " << c.first_output_token << ": A "
        << c.output_token_a << " " << QuoteForDisplay(c.output_text_a) << " | B "
        << c.output_token_b << " " << QuoteForDisplay(c.output_text_b) << "\n";
    }
  }
  auto events = [&](const char* title, const std::vector<EventDifference>& v) {
    if (v.empty()) return;
    o << title << ":\n";
    for (const auto& e : v) o << "  " << EventRef(e) << ": " << DiffShown(e.description) << "\n";
  };
  events("tool results", d.tool_differences);
  events("context chunks", d.context_differences);
  events("template variables", d.template_differences);
  events("clock reads", d.clock_differences);
  events("other events", d.other_differences);
  o << "sources of variation:\n";
  for (const auto& v : d.sources) {
    o << "  " << (v.changed ? "CHANGED " : "same    ") << SourceName(v.source);
    if (v.changed) o << ": " << DiffShown(v.evidence);
    o << "\n";
  }
  if (d.side_by_side_call > 0) {
    o << "model call " << d.side_by_side_call << " token by token (step | A | B):\n";
    for (const auto& r : d.side_by_side) {
      bool same = r.id_a == r.id_b;
      char head[32];
      std::snprintf(head, sizeof(head), "%s %4d  ", same ? (r.logits_differ ? "~" : " ") : "*",
                    r.step);
      std::string a = r.id_a >= 0 ? std::to_string(r.id_a) + " " + QuoteForDisplay(r.text_a) : "-";
      std::string b = r.id_b >= 0 ? std::to_string(r.id_b) + " " + QuoteForDisplay(r.text_b) : "-";
      if (a.size() < 32) a.resize(32, ' ');
      o << head << a << " | " << b << "\n";
    }
    o << "  (* token differs, ~ same token with different logits)\n";
  }
  if (d.identical()) o << "the runs are the same in everything compared\n";
  return o.str();
}

nlohmann::json DiffJson(const RunDiff& d) {
  nlohmann::json j;
  j["run_a"] = d.run_a;
  j["run_b"] = d.run_b;
  j["identical"] = d.identical();
  j["rerun_link"] = d.link.Json();
  j["fingerprint_differences"] = FieldsJson(d.fingerprint_differences);
  j["model_differences"] = FieldsJson(d.model_differences);
  j["header_differences"] = FieldsJson(d.header_differences);
  j["first_difference"] = d.first_difference ? EventJson(*d.first_difference) : nullptr;
  nlohmann::json calls = nlohmann::json::array();
  for (const auto& c : d.calls) {
    calls.push_back({{"call", c.call},
                     {"seq_a", c.seq_a},
                     {"seq_b", c.seq_b},
                     {"params", FieldsJson(c.params)},
                     {"first_prompt_token", c.first_prompt_token},
                     {"prompt_token_a", c.prompt_token_a},
                     {"prompt_token_b", c.prompt_token_b},
                     {"prompt_text_diff", c.prompt_text_diff},
                     {"first_logits_difference", c.first_logits_difference},
                     {"first_output_token", c.first_output_token},
                     {"output_token_a", {{"id", c.output_token_a}, {"text", c.output_text_a}}},
                     {"output_token_b", {{"id", c.output_token_b}, {"text", c.output_text_b}}},
                     {"request_diff", c.request_diff},
                     {"answers_differ", c.answers_differ}});
  }
  j["calls"] = calls;
  auto events = [](const std::vector<EventDifference>& v) {
    nlohmann::json a = nlohmann::json::array();
    for (const auto& e : v) a.push_back(EventJson(e));
    return a;
  };
  j["tool_results"] = events(d.tool_differences);
  j["context_chunks"] = events(d.context_differences);
  j["template_variables"] = events(d.template_differences);
  j["clock_reads"] = events(d.clock_differences);
  j["other_events"] = events(d.other_differences);
  nlohmann::json changed = nlohmann::json::array(), same = nlohmann::json::array();
  nlohmann::json sources = nlohmann::json::array();
  for (const auto& v : d.sources) {
    (v.changed ? changed : same).push_back(SourceName(v.source));
    sources.push_back(
        {{"source", SourceName(v.source)}, {"changed", v.changed}, {"evidence", v.evidence}});
  }
  j["sources"] = sources;
  j["changed"] = changed;
  j["unchanged"] = same;
  if (d.side_by_side_call > 0) {
    nlohmann::json rows = nlohmann::json::array();
    for (const auto& r : d.side_by_side) {
      rows.push_back({{"step", r.step},
                      {"a", {{"id", r.id_a}, {"text", r.text_a}}},
                      {"b", {{"id", r.id_b}, {"text", r.text_b}}},
                      {"logits_differ", r.logits_differ}});
    }
    j["side_by_side"] = {{"call", d.side_by_side_call}, {"rows", rows}};
  }
  return j;
}

}  // namespace trace::replayer
