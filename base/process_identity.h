// Who a process is, in a form that survives it: pid, host, boot and start time, so that
// another process can later tell whether that process still runs (the store marks a run
// whose recorder died as crashed; `trace rm` refuses a run whose recorder is alive).
//
// Ownership: plain values. Thread safety: reentrant. Errors: none; what cannot be read
// (no /proc, another host) makes the answer kUnknown rather than a guess.
#pragma once

#include <cstdint>
#include <string>

namespace trace {

struct ProcessIdentity {
  int32_t pid = 0;
  std::string host;          // gethostname()
  std::string boot_id;       // /proc/sys/kernel/random/boot_id
  uint64_t start_ticks = 0;  // /proc/PID/stat field 22 (clock ticks after boot)
};

// The calling process (recomputed on every call, so a forked child gets its own).
ProcessIdentity CurrentProcess();

enum class Liveness {
  kAlive,    // same host and boot, the pid runs and started at the recorded time
  kGone,     // same host: the machine rebooted, the pid is gone, a zombie, or reused
  kUnknown,  // another host, or not enough recorded to tell
};

Liveness CheckLiveness(const ProcessIdentity& process);

}  // namespace trace
