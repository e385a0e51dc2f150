// How two runs given to `trace diff` are related by `trace rerun`: B re-ran A (or A re-ran
// B) as a cassette re-run or as a fork at call K (RunHeader.rerun). The diff says so first,
// and for a fork that the aligned calls are meant to agree before call K.
//
// Ownership: values. Thread safety: reentrant. Errors: none (unrelated runs have no link).
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "proto/trace.pb.h"

namespace trace::replayer {

struct RunLink {
  enum Relation { kNone, kBRerunsA, kARerunsB };
  Relation relation = kNone;
  std::string mode;               // "cassette" | "fork"
  uint64_t live_from_call = 0;    // fork: the first call served live
  uint64_t diverged_at_call = 0;  // the first call whose request differed; 0: none
  std::string divergence;         // its one-line description

  bool linked() const { return relation != kNone; }
  // "B is a fork of A at call 3: calls 1..2 were answered from A's recording" ...
  std::string Describe() const;
  nlohmann::json Json() const;
};

RunLink LinkOf(const proto::RunHeader& a, const proto::RunHeader& b);

}  // namespace trace::replayer
