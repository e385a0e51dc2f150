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
    bool same_contract = false;
    for (const auto& d : r.fingerprint_differences) {
      o << "  " << d.field << ": " << (d.recorded.empty() ? "(none)" : EscapeForDisplay(d.recorded))
        << " -> " << (d.current.empty() ? "(none)" : EscapeForDisplay(d.current))
        << (d.same_contract ? " (same contract)" : "") << "\n";
      same_contract = same_contract || d.same_contract;
    }
    if (same_contract) {
      o << "  same contract (" << r.numerics << "), different path: where the arithmetic ran "
        << "changed, not its definition; the bits must still match\n";
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
      a.push_back({{"field", d.field},
                   {"recorded", d.recorded},
                   {"current", d.current},
                   {"same_contract", d.same_contract}});
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

}  // namespace trace::replayer
