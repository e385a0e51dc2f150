#include "base/process_identity.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

namespace trace {
namespace {

std::string HostName() {
  char host[256] = {0};
  if (gethostname(host, sizeof host - 1) != 0) return "";
  return host;
}

std::string BootId() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(in, id);
  return id;
}

struct ProcStat {
  bool exists = false;
  bool readable = false;
  char state = '?';
  uint64_t start_ticks = 0;
};

// /proc/PID/stat: "pid (comm) state ppid ... starttime(22) ...". comm may hold spaces
// and parentheses, so the fields are counted from the last ')'.
ProcStat ReadProcStat(int32_t pid) {
  ProcStat st;
  std::string path = "/proc/" + std::to_string(pid) + "/stat";
  FILE* f = std::fopen(path.c_str(), "re");
  if (!f) {
    st.exists = errno != ENOENT && errno != ESRCH;
    return st;
  }
  char buf[4096];
  size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  buf[n] = 0;
  st.exists = true;
  const char* close = std::strrchr(buf, ')');
  if (!close) return st;
  std::istringstream fields(close + 1);
  std::string field;
  // Field 3 is the state; starttime is field 22.
  for (int index = 3; fields >> field; ++index) {
    if (index == 3) st.state = field.empty() ? '?' : field[0];
    if (index == 22) {
      st.start_ticks = std::strtoull(field.c_str(), nullptr, 10);
      st.readable = true;
      break;
    }
  }
  return st;
}

}  // namespace

ProcessIdentity CurrentProcess() {
  ProcessIdentity p;
  p.pid = static_cast<int32_t>(getpid());
  p.host = HostName();
  p.boot_id = BootId();
  p.start_ticks = ReadProcStat(p.pid).start_ticks;
  return p;
}

Liveness CheckLiveness(const ProcessIdentity& process) {
  if (process.pid <= 0 || process.host.empty() || process.boot_id.empty() ||
      process.start_ticks == 0) {
    return Liveness::kUnknown;
  }
  if (process.host != HostName()) return Liveness::kUnknown;
  const std::string boot = BootId();
  if (boot.empty()) return Liveness::kUnknown;
  if (boot != process.boot_id) return Liveness::kGone;  // the machine rebooted since
  ProcStat st = ReadProcStat(process.pid);
  if (!st.exists) return Liveness::kGone;
  if (!st.readable) return Liveness::kUnknown;  // e.g. /proc mounted with hidepid
  if (st.start_ticks != process.start_ticks) return Liveness::kGone;  // pid reused
  if (st.state == 'Z' || st.state == 'X' || st.state == 'x') return Liveness::kGone;
  return Liveness::kAlive;
}

}  // namespace trace
