#include "replayer/run_link.h"

namespace trace::replayer {

RunLink LinkOf(const proto::RunHeader& a, const proto::RunHeader& b) {
  RunLink link;
  const proto::RunHeader* child = nullptr;
  if (b.has_rerun() && b.rerun().parent_run_id() == a.run_id()) {
    link.relation = RunLink::kBRerunsA;
    child = &b;
  } else if (a.has_rerun() && a.rerun().parent_run_id() == b.run_id()) {
    link.relation = RunLink::kARerunsB;
    child = &a;
  }
  if (child == nullptr) return link;
  link.mode = child->rerun().mode();
  link.live_from_call = child->rerun().live_from_call();
  link.diverged_at_call = child->rerun().diverged_at_call();
  link.divergence = child->rerun().divergence();
  return link;
}

std::string RunLink::Describe() const {
  if (!linked()) return "";
  const std::string child = relation == kBRerunsA ? "B" : "A";
  const std::string parent = relation == kBRerunsA ? "A" : "B";
  std::string s;
  if (mode == "fork") {
    s = child + " is a fork of " + parent + " at call " + std::to_string(live_from_call) +
        ": calls before it were answered from " + parent + "'s recording, call " +
        std::to_string(live_from_call) + " and later ran live; the aligned calls start to " +
        "differ at call " + std::to_string(live_from_call) + " at the earliest";
  } else {
    s = child + " re-ran " + parent + "'s recording (trace rerun)";
    s += diverged_at_call ? ": it followed the recording up to call " +
                                std::to_string(diverged_at_call) + ", then ran live"
                          : ": it followed the recording";
  }
  if (!divergence.empty()) s += "\n  divergence: " + divergence;
  return s;
}

nlohmann::json RunLink::Json() const {
  if (!linked()) return nullptr;
  return {{"relation", relation == kBRerunsA ? "b_reruns_a" : "a_reruns_b"},
          {"mode", mode},
          {"live_from_call", live_from_call},
          {"diverged_at_call", diverged_at_call},
          {"divergence", divergence}};
}

}  // namespace trace::replayer
