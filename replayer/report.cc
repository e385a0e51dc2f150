#include "replayer/report.h"

#include <cmath>
#include <cstdio>
#include <sstream>

#include "base/escape.h"

namespace trace::replayer {
namespace {

std::string Candidates(const std::vector<Candidate>& cands) {
  std::string out;
  for (const auto& c : cands) {
    if (!out.empty()) out += ", ";
    out += std::to_string(c.id) + " " + FormatFloat(c.logit);
    if (c.probability > 0.0) {
      char p[32];
      std::snprintf(p, sizeof(p), " (p=%.4f)", c.probability);
      out += p;
    }
  }
  return out.empty() ? "(none recorded)" : out;
}

nlohmann::json CandidatesJson(const std::vector<Candidate>& cands) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& c : cands) {
    out.push_back({{"id", c.id}, {"logit", c.logit}, {"probability", c.probability}});
  }
  return out;
}

nlohmann::json DivergenceJson(const Divergence& d) {
  nlohmann::json j = {
      {"call", d.call},
      {"event", d.event_id},
      {"step", d.step},
      {"recorded_token", {{"id", d.recorded_token}, {"text", d.recorded_text}}},
      {"replayed_token", {{"id", d.replayed_token}, {"text", d.replayed_text}}},
      {"replayed_logit", d.replayed_logit},
      {"recorded_token_replayed_logit", d.recorded_token_replayed_logit},
      {"replayed_margin", d.replayed_margin},
      {"recorded_candidates", CandidatesJson(d.recorded_top)},
      {"replayed_top5", CandidatesJson(d.replayed_top)},
      {"text_before", d.text_before},
      {"layer_digests_recorded", d.layer_digests_recorded},
      {"replay_continuation", d.replay_continuation},
      {"replay_continuation_text", d.replay_continuation_text},
  };
  j["recorded_logit"] = d.recorded_logit ? nlohmann::json(*d.recorded_logit) : nullptr;
  j["recorded_margin"] = d.recorded_margin ? nlohmann::json(*d.recorded_margin) : nullptr;
  j["first_differing_layer"] =
      d.first_differing_layer >= 0 ? nlohmann::json(d.first_differing_layer) : nullptr;
  return j;
}

nlohmann::json RouteDifferenceJson(const RouteDifference& d) {
  return {{"step", d.step},
          {"layer", d.layer >= 0 ? nlohmann::json(d.layer) : nlohmann::json(nullptr)},
          {"recorded", d.recorded},
          {"replayed", d.replayed}};
}

// "[1, 5]": a layer's experts (-1: a slot dropped by fast numerics' capacity).
std::string RouteText(const std::vector<int32_t>& ids) {
  std::string out = "[";
  for (size_t i = 0; i < ids.size(); ++i) out += (i ? ", " : "") + std::to_string(ids[i]);
  return out + "]";
}

// Background colour for a margin: fragile tokens (small margin) red, then orange, yellow;
// comfortable margins stay uncoloured.
const char* MarginClass(float margin) {
  if (margin < 0.5f) return "m0";
  if (margin < 1.5f) return "m1";
  if (margin < 3.0f) return "m2";
  return "m3";
}

// A recorded string (a run id, a path, a URL, a field of the recorded fingerprint) on a
// terminal line: escaped, whole (base/escape.h).
std::string ReportShown(const std::string& s) {
  return EscapeForDisplay(s, kNoLimit);
}

}  // namespace

std::string FormatFloat(double v) {
  char buf[48];
  std::snprintf(buf, sizeof(buf), "%.9g", v);
  return buf;
}

std::string HtmlEscape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string RenderReplayText(const RunReport& r) {
  std::ostringstream o;
  o << "run " << ReportShown(r.run_id) << " (" << ReportShown(r.run_status)
    << "): " << r.calls_in_run << " model calls, replayed " << r.calls.size();
  if (!r.device.empty()) {
    o << " on " << ReportShown(r.device) << ", numerics " << ReportShown(r.numerics)
      << (r.batch > 1 ? ", batch " + std::to_string(r.batch) : "");
  }
  o << "\n";
  if (r.run_status == "recording") {
    o << "note: the run is still being recorded; replayed the model calls committed so far\n";
  } else if (r.run_status != "complete") {
    o << "note: the run is " << ReportShown(r.run_status)
      << " (it did not end cleanly); replayed the model calls it holds\n";
  }
  if (!r.upstream.empty()) {
    o << "upstream: the run was recorded against " << ReportShown(r.upstream)
      << "; a hosted model's calls are recorded only: they cannot be re-executed bit for bit "
         "here (`trace diff` compares such runs)\n";
  }
  if (r.model_dir.empty()) {
    // No model loaded: nothing was re-executed.
  } else if (r.model_override) {
    o << "model: replaying against " << EscapePathForDisplay(r.model_dir)
      << " ON PURPOSE (--model); it differs:\n";
    for (const auto& d : r.model_differences) {
      o << "  " << d.field << ": recorded " << EscapeForDisplay(d.recorded) << ", now "
        << EscapeForDisplay(d.current) << "\n";
    }
  } else {
    o << "model: " << EscapePathForDisplay(r.model_dir) << " (hashes equal to the recording)\n";
  }
  if (r.model_dir.empty()) {
    // No engine ran: no fingerprint to compare.
  } else if (r.fingerprint_differences.empty()) {
    o << "fingerprint: no differences from the recording\n";
  } else {
    o << "fingerprint differences (recorded -> now):\n";
    for (const auto& d : r.fingerprint_differences) {
      o << "  " << d.field << ": " << (d.recorded.empty() ? "(none)" : EscapeForDisplay(d.recorded))
        << " -> " << (d.current.empty() ? "(none)" : EscapeForDisplay(d.current)) << "\n";
    }
  }
  for (const auto& s : r.skipped) {
    o << "call " << s.call << " (seq " << s.seq << "): skipped, " << ReportShown(s.reason) << "\n";
  }
  for (const auto& s : r.recorded_only) {
    o << "call " << s.call << " (seq " << s.seq << "): recorded only, " << ReportShown(s.reason)
      << "\n";
  }
  for (const auto& c : r.calls) {
    char secs[32];
    std::snprintf(secs, sizeof(secs), "%.3f s", c.seconds);
    o << "call " << c.call << " (" << ReportShown(c.event_id) << "): ";
    if (c.level == Level::kDiverged) {
      o << "DIVERGED at step " << c.divergence->step << " of " << c.tokens_recorded;
    } else {
      o << LevelName(c.level) << ", " << c.tokens_recorded << " tokens";
      if (!c.digests_recorded) o << " (no logits digests recorded)";
      if (c.digests_differ > 0) {
        o << ", logits differ at " << c.digests_differ << " tokens";
        if (c.max_logit_diff_step >= 0) {
          o << ", largest chosen-token logit difference " << FormatFloat(c.max_logit_diff)
            << " at step " << c.max_logit_diff_step;
        }
      }
    }
    if (c.routes_checked > 0) {
      if (c.routes_differ == 0) {
        o << ", expert routes identical at " << c.routes_checked << " tokens";
      } else {
        o << ", expert routes differ at " << c.routes_differ << " of " << c.routes_checked
          << " tokens";
      }
    }
    o << ", " << secs << "\n";
  }
  o << "result: " << LevelName(r.level);
  if (const Divergence* d = r.first_divergence()) {
    o << " (first at call " << d->call << ", step " << d->step << ")";
  }
  o << "; " << r.tokens_verified << " tokens verified";
  if (!r.recorded_only.empty()) {
    o << "; " << r.recorded_only.size() << " model call" << (r.recorded_only.size() == 1 ? "" : "s")
      << " recorded only (answered by an upstream model, not re-executable)";
  }
  o << "\n";
  if (const Divergence* d = r.first_divergence()) {
    o << "\nfirst divergence: call " << d->call << " (" << ReportShown(d->event_id) << "), step "
      << d->step << "\n";
    o << "  recorded: token " << d->recorded_token << " " << QuoteForDisplay(d->recorded_text);
    if (d->recorded_logit) o << "  logit " << FormatFloat(*d->recorded_logit);
    if (d->recorded_margin) o << "  margin to runner-up " << FormatFloat(*d->recorded_margin);
    o << "\n";
    o << "  replayed: token " << d->replayed_token << " " << QuoteForDisplay(d->replayed_text)
      << "  logit " << FormatFloat(d->replayed_logit) << "  margin to runner-up "
      << FormatFloat(d->replayed_margin) << "\n";
    o << "  the recorded token's logit on replay: " << FormatFloat(d->recorded_token_replayed_logit)
      << "\n";
    o << "  recorded candidates (runner-up first): " << Candidates(d->recorded_top) << "\n";
    o << "  replayed top 5: " << Candidates(d->replayed_top) << "\n";
    o << "  output before it: " << QuoteForDisplay(d->text_before) << "\n";
    if (d->layer_digests_recorded) {
      if (d->first_differing_layer >= 0) {
        o << "  first layer whose output differs at this token: layer " << d->first_differing_layer
          << " (0-based)\n";
      } else {
        o << "  every layer's output matches at this token: the difference is after the last "
             "layer (final norm or output head)\n";
      }
    } else {
      o << "  layer digests not recorded (trace record --layer-digests names the layer)\n";
    }
    o << "  the replay continues: " << QuoteForDisplay(d->replay_continuation_text) << "\n";
  }
  for (const auto& c : r.calls) {
    if (!c.first_route_difference) continue;
    const RouteDifference& rd = *c.first_route_difference;
    o << "\nfirst route difference: call " << c.call << ", step " << rd.step << ", ";
    if (rd.layer >= 0) {
      o << "layer " << rd.layer << " (0-based): recorded experts " << RouteText(rd.recorded)
        << ", replayed " << RouteText(rd.replayed) << "\n";
    } else {
      o << "the replayed model routes fewer layers (recorded experts " << RouteText(rd.recorded)
        << " left over)\n";
    }
    break;
  }
  return o.str();
}

nlohmann::json ReplayJson(const RunReport& r) {
  nlohmann::json j;
  j["run_id"] = r.run_id;
  j["run_status"] = r.run_status;
  j["level"] = LevelKey(r.level);
  j["model_dir"] = r.model_dir;
  j["upstream"] = r.upstream;
  j["model_override"] = r.model_override;
  auto diffs = [](const std::vector<FieldDifference>& v) {
    nlohmann::json a = nlohmann::json::array();
    for (const auto& d : v) {
      a.push_back({{"field", d.field}, {"recorded", d.recorded}, {"current", d.current}});
    }
    return a;
  };
  j["model_differences"] = diffs(r.model_differences);
  j["fingerprint_differences"] = diffs(r.fingerprint_differences);
  j["numerics"] = r.numerics;
  j["device"] = r.device;
  j["batch"] = r.batch;
  j["calls_in_run"] = r.calls_in_run;
  j["tokens_verified"] = r.tokens_verified;
  j["routes_checked"] = r.routes_checked;
  j["routes_differ"] = r.routes_differ;
  j["seconds"] = r.seconds;
  nlohmann::json skipped = nlohmann::json::array();
  for (const auto& s : r.skipped) {
    skipped.push_back({{"call", s.call}, {"seq", s.seq}, {"reason", s.reason}});
  }
  j["skipped"] = skipped;
  nlohmann::json recorded_only = nlohmann::json::array();
  for (const auto& s : r.recorded_only) {
    recorded_only.push_back({{"call", s.call}, {"seq", s.seq}, {"reason", s.reason}});
  }
  j["recorded_only"] = recorded_only;
  nlohmann::json calls = nlohmann::json::array();
  for (const auto& c : r.calls) {
    nlohmann::json cj = {{"call", c.call},
                         {"event", c.event_id},
                         {"level", LevelKey(c.level)},
                         {"tokens_recorded", c.tokens_recorded},
                         {"tokens_verified", c.tokens_verified},
                         {"digests_recorded", c.digests_recorded},
                         {"digests_differ", c.digests_differ},
                         {"max_logit_diff", c.max_logit_diff},
                         {"max_logit_diff_step", c.max_logit_diff_step},
                         {"routes_checked", c.routes_checked},
                         {"routes_differ", c.routes_differ},
                         {"seconds", c.seconds}};
    cj["divergence"] = c.divergence ? DivergenceJson(*c.divergence) : nullptr;
    cj["first_route_difference"] = c.first_route_difference
                                       ? RouteDifferenceJson(*c.first_route_difference)
                                       : nlohmann::json(nullptr);
    calls.push_back(cj);
  }
  j["calls"] = calls;
  const Divergence* d = r.first_divergence();
  j["first_divergence"] = d ? DivergenceJson(*d) : nullptr;
  return j;
}

std::string RenderReplayHtml(const RunReport& r) {
  std::ostringstream o;
  o << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
    << "<title>trace replay " << HtmlEscape(r.run_id) << "</title>\n<style>\n"
    << "body{font-family:sans-serif;margin:1.5em;color:#222}\n"
    << ".tokens{font-family:monospace;white-space:pre-wrap;line-height:1.7;border:1px solid "
       "#ccc;padding:.6em}\n"
    << ".tok{border-radius:2px}\n"
    << ".m0{background:#f4a3a3}.m1{background:#f8c98f}.m2{background:#f6ec9a}.m3{}\n"
    << "#divergence{outline:3px solid #c00;background:#fff;font-weight:bold}\n"
    << ".rec{text-decoration:line-through;color:#a00}.rep{color:#060}\n"
    << ".cont{color:#666;font-style:italic}\n"
    << "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px 6px}\n"
    << "</style></head><body>\n";
  o << "<h1>trace replay <code>" << HtmlEscape(r.run_id) << "</code></h1>\n";
  o << "<p id=\"summary\" data-level=\"" << LevelKey(r.level) << "\">Result: <b>"
    << LevelName(r.level) << "</b>. Run " << HtmlEscape(r.run_status) << ", " << r.calls_in_run
    << " model calls, " << r.tokens_verified << " tokens verified on " << HtmlEscape(r.device)
    << ", numerics " << HtmlEscape(r.numerics)
    << (r.model_override ? ", <b>against another model (--model)</b>" : "") << ".</p>\n";
  o << "<p>Token background: margin between the chosen token's logit and the runner-up's "
       "on replay: <span class=\"m0\">&lt; 0.5</span> <span class=\"m1\">&lt; 1.5</span> "
       "<span class=\"m2\">&lt; 3</span> larger: none. Hover a token for its numbers.</p>\n";
  if (!r.fingerprint_differences.empty() || !r.model_differences.empty()) {
    o << "<h2>Differences from the recording</h2><table><tr><th>field</th><th>recorded</th>"
         "<th>now</th></tr>\n";
    for (const auto* v : {&r.model_differences, &r.fingerprint_differences}) {
      for (const auto& d : *v) {
        o << "<tr><td>" << HtmlEscape(d.field) << "</td><td>" << HtmlEscape(d.recorded)
          << "</td><td>" << HtmlEscape(d.current) << "</td></tr>\n";
      }
    }
    o << "</table>\n";
  }
  const Divergence* first = r.first_divergence();
  for (const auto& c : r.calls) {
    o << "<h2>Call " << c.call << " <small>(" << HtmlEscape(c.event_id)
      << ")</small>: " << LevelName(c.level) << "</h2>\n<div class=\"tokens\">";
    for (size_t i = 0; i < c.tokens.size(); ++i) {
      const TokenOutcome& t = c.tokens[i];
      bool is_div = c.divergence && static_cast<int>(i) == c.divergence->step;
      if (is_div) {
        const Divergence& d = *c.divergence;
        bool first_one = &d == first;
        o << "<span " << (first_one ? "id=\"divergence\" " : "")
          << "class=\"divergence\" title=\"step " << d.step << ": recorded " << d.recorded_token
          << ", replayed " << d.replayed_token << "\"><span class=\"rec\">"
          << HtmlEscape(d.recorded_text) << "</span><span class=\"rep\">"
          << HtmlEscape(d.replayed_text) << "</span></span>";
        if (d.replay_continuation.size() > 1) {
          std::string cont = d.replay_continuation_text;
          // The continuation text starts with the replayed token, already shown.
          if (cont.rfind(d.replayed_text, 0) == 0) cont = cont.substr(d.replayed_text.size());
          o << "<span class=\"cont\" title=\"what the replay produced from here\">"
            << HtmlEscape(cont) << "</span>";
        }
        break;
      }
      o << "<span class=\"tok " << MarginClass(t.margin) << "\" title=\"step " << i << " id "
        << t.id << " margin " << FormatFloat(t.margin)
        << (t.digest_checked && !t.digest_equal ? " (logits differ)" : "") << "\">"
        << HtmlEscape(t.text) << "</span>";
    }
    o << "</div>\n";
  }
  if (first) {
    o << "<h2>First divergence</h2><p>Call " << first->call << ", step " << first->step
      << ": recorded <code>" << HtmlEscape(QuoteForDisplay(first->recorded_text)) << "</code> ("
      << first->recorded_token << "), replayed <code>"
      << HtmlEscape(QuoteForDisplay(first->replayed_text)) << "</code> (" << first->replayed_token
      << "), replayed margin " << FormatFloat(first->replayed_margin);
    if (first->first_differing_layer >= 0) {
      o << "; first differing layer " << first->first_differing_layer;
    }
    o << ".</p>\n";
  }
  o << "</body></html>\n";
  return o.str();
}

}  // namespace trace::replayer
