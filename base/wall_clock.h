// The wall clock as the trace format stores it: nanoseconds since the Unix epoch (event
// times, run starts, verdict times), written once for every part that stamps a time.
//
// Ownership: none. Thread safety: reentrant. Errors: none.
#pragma once

#include <chrono>
#include <cstdint>

namespace trace {

inline int64_t WallClockNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace trace
