#include "store/sqlite_db.h"

#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <cstring>
#include <filesystem>

namespace trace::store {
namespace {

// "file:" URI for a path (RFC 3986 percent-encoding of everything but unreserved
// characters and '/'), with SQLite query parameters.
std::string FileUri(const std::string& path, const char* query) {
  static const char* kHex = "0123456789ABCDEF";
  std::string uri = "file:";
  for (unsigned char c : path) {
    if (std::isalnum(c) || c == '/' || c == '-' || c == '_' || c == '.' || c == '~') {
      uri += static_cast<char>(c);
    } else {
      uri += '%';
      uri += kHex[c >> 4];
      uri += kHex[c & 15];
    }
  }
  return *query ? uri + "?" + query : uri;
}

// Why writes to `path` may fail when SQLite cannot say (it often reports only "disk I/O
// error" or "database or disk is full"): a full file system, or the process's file size
// limit (ulimit -f). Empty when neither applies.
std::string WriteFailureCause(const std::string& path) {
  constexpr uint64_t kSlack = 64 << 10;  // a WAL frame or two
  struct rlimit limit {};
  if (::getrlimit(RLIMIT_FSIZE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) {
    for (const char* suffix : {"", "-wal", "-journal"}) {
      struct stat st {};
      if (::stat((path + suffix).c_str(), &st) == 0 &&
          static_cast<uint64_t>(st.st_size) + kSlack >= limit.rlim_cur) {
        return "the file size limit (ulimit -f) of " + std::to_string(limit.rlim_cur >> 10) +
               " KiB is reached";
      }
    }
  }
  std::string dir = std::filesystem::path(path).parent_path().string();
  struct statvfs fs {};
  if (::statvfs(dir.empty() ? "." : dir.c_str(), &fs) == 0) {
    const uint64_t free_bytes = static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize;
    if (free_bytes < 4 * kSlack) {
      return "the file system is full (" + std::to_string(free_bytes >> 10) + " KiB free)";
    }
  }
  return "";
}

}  // namespace

std::string ReadOnlyCause(const std::string& path) {
  std::string files, modes;
  int count = 0;
  bool side_file = false;  // a -wal or -shm among them
  for (const char* suffix : {"", "-wal", "-shm"}) {
    const std::string file = path + suffix;
    struct stat st {};
    if (::stat(file.c_str(), &st) != 0 || ::access(file.c_str(), W_OK) == 0) continue;
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    files += (count ? " " : "") + file;
    modes += (count ? ", " : "") + file + " mode " + mode;
    side_file |= *suffix != '\0';
    ++count;
  }
  if (count > 0) {
    return files + (count == 1 ? " is" : " are") + " read-only to this process (" + modes +
           (side_file ? "; a reader of a read-only store leaves its -wal and -shm with the "
                        "store's mode"
                      : "") +
           "): make " + (count == 1 ? "it" : "them") + " writable: chmod u+w " + files;
  }
  // Without a -wal or -shm file, SQLite must create it beside the store.
  const bool must_create =
      ::access((path + "-wal").c_str(), F_OK) != 0 || ::access((path + "-shm").c_str(), F_OK) != 0;
  std::string dir = std::filesystem::path(path).parent_path().string();
  if (dir.empty()) dir = ".";
  if (must_create && ::access(dir.c_str(), W_OK) != 0) {
    return "the folder " + dir + " is read-only to this process (SQLite creates " + path +
           "-wal and -shm in it): make it writable or move the store";
  }
  return "";
}

bool IsTransient(int sqlite_code) {
  const int primary = sqlite_code & 0xff;
  return primary == SQLITE_BUSY || primary == SQLITE_LOCKED || primary == SQLITE_PROTOCOL;
}

Result<std::unique_ptr<Db>> Db::Open(const DbConfig& config) {
  auto db = std::unique_ptr<Db>(new Db);
  db->config_ = config;
  int flags = (config.read_only ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE) |
              SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_URI;
  // A plain path is given as a URI too, so that a '?' or '%' in it means nothing special.
  std::string uri = FileUri(config.path, config.immutable ? "immutable=1" : "");
  if (sqlite3_open_v2(uri.c_str(), &db->db_, flags, nullptr) != SQLITE_OK) {
    return IOError(config.path +
                   ": cannot open: " + (db->db_ ? sqlite3_errmsg(db->db_) : "out of memory"));
  }
  sqlite3_busy_timeout(db->db_, config.busy_timeout_ms);
  sqlite3_extended_result_codes(db->db_, 1);
  return db;
}

Status Db::Error(std::string_view what) const {
  const int code = sqlite3_extended_errcode(db_);
  const int primary = code & 0xff;
  if (primary == SQLITE_NOTADB) {
    // Not an SQLite file at all (or its header is destroyed): nothing `trace fsck` could
    // check or salvage.
    return Corruption(path() + ": not a trace store (not an SQLite database file)");
  }
  if (primary == SQLITE_CORRUPT) {
    return Corruption(path() + ": not a trace store or damaged (" + sqlite3_errmsg(db_) + ")" +
                      std::string(kRunFsckAdvice));
  }
  std::string msg = path() + ": " + std::string(what) + ": " + sqlite3_errmsg(db_);
  if (primary == SQLITE_READONLY) {
    // SQLite says only "attempt to write a readonly database": say which file and what to do.
    const std::string cause = ReadOnlyCause(path());
    if (!cause.empty()) return IOError(msg + ": " + cause);
  }
  const int os_error = sqlite3_system_errno(db_);
  const bool write_failed = primary == SQLITE_IOERR || primary == SQLITE_FULL;
  std::string cause = write_failed ? WriteFailureCause(path()) : "";
  if (!cause.empty()) {
    msg += ": " + cause;
  } else if (os_error != 0 &&
             (write_failed || primary == SQLITE_CANTOPEN || primary == SQLITE_READONLY)) {
    msg += std::string(" (") + std::strerror(os_error) + ")";
  }
  return IOError(msg);
}

Status Db::Exec(const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    sqlite3_free(err);
    return Error(sql);
  }
  return Status::Ok();
}

Result<Stmt> Db::Prepare(const char* sql) {
  Stmt s;
  if (sqlite3_prepare_v2(db_, sql, -1, s.out(), nullptr) != SQLITE_OK) return Error("prepare");
  return s;
}

Result<bool> Db::Step(Stmt& s) {
  int rc = sqlite3_step(s.get());
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return Error("query");
}

Status Db::Run(Stmt& s) {
  TRACE_ASSIGN_OR_RETURN(bool row, Step(s));
  (void)row;
  return Status::Ok();
}

}  // namespace trace::store
