// The wall clock as the trace format stores it: nanoseconds since the Unix epoch (event
// times, run starts, verdict times), written once for every part that stamps a time, and
// such a time as text.
//
// Ownership: none. Thread safety: reentrant. Errors: none.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <string>

namespace trace {

inline int64_t WallClockNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// "2026-12-07 13:43:28Z", or with `millis` "2026-12-07 13:43:28.123Z": a stored time as
// `trace ls`, `trace show` and `trace ui` print it (UTC).
inline std::string UtcTimeText(int64_t ns, bool millis = false) {
  std::time_t secs = static_cast<std::time_t>(ns / 1'000'000'000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[48];
  size_t n = std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
  if (millis) {
    std::snprintf(buf + n, sizeof buf - n, ".%03dZ", static_cast<int>((ns / 1'000'000) % 1000));
  } else {
    std::snprintf(buf + n, sizeof buf - n, "Z");
  }
  return buf;
}

}  // namespace trace
