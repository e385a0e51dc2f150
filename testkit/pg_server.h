// PgServer: a throwaway PostgreSQL server for tests — initdb + pg_ctl on a temporary
// directory and a free loopback port, stopped and removed on destruction. Server binaries
// from $TRACE_PG_BIN, else /usr/lib/postgresql/<newest>/bin (Debian's postgresql package).
// PostgreSQL refuses to run as root: as root, the server runs as `nobody` (setpriv).
//
// Ownership: owns the server process and its directory. Thread safety: one instance per
// test binary (a gtest Environment). Errors: Start() returns "" and sets error() (missing
// binaries: skipped() is true, so tests skip with that message).
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>

#include "testkit/temp_dir.h"

namespace trace::testing {

class PgServer {
 public:
  ~PgServer() { Stop(); }

  // Starts the server; returns its base URL "postgresql://trace@127.0.0.1:PORT".
  std::string Start() {
    bin_ = FindBinaries();
    if (bin_.empty()) {
      skipped_ = true;
      error_ =
          "PostgreSQL server binaries not found (install Debian's postgresql package, or "
          "set TRACE_PG_BIN to the folder holding initdb and pg_ctl)";
      return "";
    }
    data_ = dir_.file("data");
    const bool root = ::geteuid() == 0;
    if (root) {
      // nobody must own the data folder and reach it.
      ::chmod(dir_.path().c_str(), 0755);
    }
    port_ = FreePort();
    const std::string as = root ? "setpriv --reuid=65534 --regid=65534 --clear-groups " : "";
    std::string cmd = as + bin_ + "/initdb -D " + data_ +
                      " -U trace --auth=trust --no-locale -E UTF8 --no-sync > " +
                      dir_.file("initdb.log") + " 2>&1";
    if (root) {
      std::string mk = "mkdir -p " + data_ + " && chown 65534:65534 " + data_ + " " + dir_.path();
      if (std::system(mk.c_str()) != 0) return Fail("cannot prepare " + data_);
    }
    if (std::system(cmd.c_str()) != 0) return Fail("initdb failed: " + Log("initdb.log"));
    // Small and quick: no fsync of the data folder at exit is needed for tests, but commits
    // stay synchronous (the durability the store relies on is the server's default).
    cmd = as + bin_ + "/pg_ctl -D " + data_ + " -l " + dir_.file("server.log") +
          " -w -t 60 -o \"-p " + std::to_string(port_) +
          " -c listen_addresses=127.0.0.1 -c unix_socket_directories=" + data_ +
          " -c max_connections=200 -c shared_buffers=32MB\" start > " + dir_.file("pg_ctl.log") +
          " 2>&1";
    if (std::system(cmd.c_str()) != 0) {
      return Fail("pg_ctl start failed: " + Log("pg_ctl.log") + " " + Log("server.log"));
    }
    started_ = true;
    as_ = as;
    url_ = "postgresql://trace@127.0.0.1:" + std::to_string(port_);
    return url_;
  }

  void Stop() {
    if (!started_) return;
    started_ = false;
    std::string cmd = as_ + bin_ + "/pg_ctl -D " + data_ + " -m immediate -w stop > /dev/null 2>&1";
    (void)std::system(cmd.c_str());
  }

  // A new empty database "NAME" on the server; its URL.
  std::string NewDatabase(const std::string& name) {
    std::string cmd = bin_ + "/psql -q -h 127.0.0.1 -p " + std::to_string(port_) +
                      " -U trace -d postgres -c 'CREATE DATABASE \"" + name + "\"' > /dev/null";
    if (std::system(cmd.c_str()) != 0) return "";
    return url_ + "/" + name;
  }

  // Runs SQL on database `db` with psql; its exit status.
  int Psql(const std::string& db, const std::string& sql) const {
    std::string cmd = bin_ + "/psql -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p " +
                      std::to_string(port_) + " -U trace -d " + db + " -c \"" + sql +
                      "\" > /dev/null 2>&1";
    return std::system(cmd.c_str());
  }

  const std::string& url() const { return url_; }
  int port() const { return port_; }
  bool skipped() const { return skipped_; }
  const std::string& error() const { return error_; }

 private:
  static std::string FindBinaries() {
    if (const char* env = std::getenv("TRACE_PG_BIN"); env && *env) return env;
    std::string best;
    std::error_code ec;
    for (int v = 30; v >= 12; --v) {
      std::string dir = "/usr/lib/postgresql/" + std::to_string(v) + "/bin";
      if (std::filesystem::exists(dir + "/initdb", ec) &&
          std::filesystem::exists(dir + "/pg_ctl", ec)) {
        return dir;
      }
    }
    return best;
  }

  // A port the kernel says is free now (bound, read, released).
  static int FreePort() {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    int port = 0;
    if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
      port = ntohs(a.sin_port);
    }
    ::close(fd);
    return port;
  }

  std::string Log(const std::string& name) const {
    std::string out;
    if (FILE* f = std::fopen(dir_.file(name).c_str(), "r")) {
      char buf[512];
      size_t n;
      while ((n = std::fread(buf, 1, sizeof buf, f)) > 0 && out.size() < 4000) out.append(buf, n);
      std::fclose(f);
    }
    return out;
  }

  std::string Fail(const std::string& why) {
    error_ = why;
    return "";
  }

  TempDir dir_;
  std::string bin_, data_, url_, as_, error_;
  int port_ = 0;
  bool started_ = false;
  bool skipped_ = false;
};

}  // namespace trace::testing
