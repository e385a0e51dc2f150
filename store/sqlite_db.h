// Thin SQLite wrappers used inside store/: a prepared statement (Stmt) and one
// connection (Db) that turns SQLite errors into Status with the store path in the message,
// and tells transient lock errors (retry) from errors that will not go away by waiting.
//
// Ownership: a Db owns its sqlite3 connection, a Stmt its statement (finalize before the
// Db closes: declare Stmts after the Db they use, or in objects the Db outlives). Thread
// safety: one thread at a time per Db (SQLITE_OPEN_NOMUTEX); different Dbs may be used
// concurrently, also on the same file. Errors: Status naming the file and what failed;
// SQLITE_NOTADB / SQLITE_CORRUPT become Corruption; SQLITE_READONLY names the file of the
// store (the store, its -wal or -shm) that is read-only and what to do.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "base/status.h"

namespace trace::store {

class Stmt {
 public:
  Stmt() = default;
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;
  Stmt(Stmt&& o) noexcept : s_(o.s_) { o.s_ = nullptr; }
  Stmt& operator=(Stmt&& o) noexcept {
    std::swap(s_, o.s_);
    return *this;
  }
  ~Stmt() { sqlite3_finalize(s_); }
  sqlite3_stmt* get() const { return s_; }
  sqlite3_stmt** out() { return &s_; }

  Stmt& Reset() {
    sqlite3_reset(s_);
    sqlite3_clear_bindings(s_);
    return *this;
  }
  Stmt& Bind(int i, int64_t v) {
    sqlite3_bind_int64(s_, i, v);
    return *this;
  }
  Stmt& Bind(int i, std::string_view v) {
    sqlite3_bind_text(s_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Stmt& BindBlob(int i, std::string_view v) {
    sqlite3_bind_blob(s_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Stmt& BindNull(int i) {
    sqlite3_bind_null(s_, i);
    return *this;
  }
  int64_t Int(int col) const { return sqlite3_column_int64(s_, col); }
  bool IsNull(int col) const { return sqlite3_column_type(s_, col) == SQLITE_NULL; }
  bool IsInt(int col) const { return sqlite3_column_type(s_, col) == SQLITE_INTEGER; }
  std::string Text(int col) const {
    const unsigned char* p = sqlite3_column_text(s_, col);
    return p ? std::string(reinterpret_cast<const char*>(p), sqlite3_column_bytes(s_, col))
             : std::string();
  }
  std::string_view Blob(int col) const {
    const void* p = sqlite3_column_blob(s_, col);
    int n = sqlite3_column_bytes(s_, col);
    return p ? std::string_view(static_cast<const char*>(p), n) : std::string_view();
  }

 private:
  sqlite3_stmt* s_ = nullptr;
};

// How to open the store file. Every connection of one Store uses the same settings.
struct DbConfig {
  std::string path;
  bool read_only = false;
  // Read-only from a directory nobody can write (so no -shm can be made and no writer can
  // appear): SQLite's immutable=1, which takes no locks.
  bool immutable = false;
  int busy_timeout_ms = 10000;
};

// True for the SQLite result codes that waiting can cure: another connection holds a
// lock (BUSY, LOCKED) or a WAL-index race (PROTOCOL).
bool IsTransient(int sqlite_code);

// Why this process cannot write the store at `path`, when a file of it is read-only to it:
// "PATH-wal is read-only to this process (PATH-wal mode 0400; ...): make it writable:
// chmod u+w PATH-wal", naming each of the store file, its -wal and its -shm that is (a
// reader of a read-only store leaves those with the store's mode), or else the folder, when
// SQLite must create a -wal or -shm there and cannot. Empty when nothing is in the way.
std::string ReadOnlyCause(const std::string& path);

// The advice a Corruption from opening or reading a store ends with. `trace fsck` itself
// replaces it with what to do instead.
inline constexpr std::string_view kRunFsckAdvice = "; run `trace fsck`";

// One connection to the store file.
class Db {
 public:
  ~Db() { sqlite3_close_v2(db_); }
  sqlite3* get() const { return db_; }
  const std::string& path() const { return config_.path; }
  const DbConfig& config() const { return config_; }

  static Result<std::unique_ptr<Db>> Open(const DbConfig& config);

  // The extended result code of the last failed call on this connection.
  int last_code() const { return sqlite3_extended_errcode(db_); }
  bool LastErrorIsTransient() const { return IsTransient(last_code()); }

  // Status for the last error: "PATH: WHAT: sqlite message (OS error)".
  Status Error(std::string_view what) const;

  Status Exec(const char* sql);
  Result<Stmt> Prepare(const char* sql);
  // Steps a statement: true for a row, false when done.
  Result<bool> Step(Stmt& s);
  // Steps a statement that returns no rows (or whose rows are ignored).
  Status Run(Stmt& s);

 private:
  Db() = default;
  sqlite3* db_ = nullptr;
  DbConfig config_;
};

}  // namespace trace::store
