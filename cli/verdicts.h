// How `trace ls`, `trace show` and `trace verify` print the verdicts `trace verify` keeps
// (store/verify_queue.h): one JSON shape for a verdict, and the newest verdict per machine.
//
// Ownership: values. Thread safety: reentrant. Errors: none.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "store/verify_queue.h"

namespace trace::cli {

inline nlohmann::json VerificationJson(const store::Verification& v) {
  return {{"verification_id", v.id},
          {"run_id", v.run_id},
          {"batch", v.batch_id},
          {"verdict", v.verdict},
          {"first_divergence", v.first_divergence},
          {"machine", v.machine},
          {"build", v.build},
          {"worker", v.worker},
          {"time_ns", v.time_ns},
          {"seconds", v.seconds}};
}

// The newest of `rows` per machine kind, in machine order (rows: any order).
inline std::vector<store::Verification> NewestPerMachine(
    const std::vector<store::Verification>& rows) {
  std::map<std::string, store::Verification> newest;
  for (const store::Verification& v : rows) {
    auto it = newest.find(v.machine);
    if (it == newest.end() || v.id > it->second.id) newest[v.machine] = v;
  }
  std::vector<store::Verification> out;
  for (auto& [machine, v] : newest) out.push_back(std::move(v));
  return out;
}

}  // namespace trace::cli
