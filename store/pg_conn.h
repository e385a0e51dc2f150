// Thin libpq wrappers used by the PostgreSQL backend (pg_rows.cc): one connection
// (PgConn) with prepared statements, binary parameters and results, and errors turned
// into one-line Status naming the store URL (without its password) and the SQLSTATE's
// meaning: cannot connect (server unreachable, authentication refused), gone, or a
// statement that failed.
//
// Ownership: a PgConn owns its PGconn, a PgResult its PGresult. Thread safety: one thread
// at a time per PgConn. Errors: as above; sqlstate() holds the last failure's SQLSTATE.
#pragma once

#include <libpq-fe.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace trace::store {

// Parameters of one statement, sent in binary.
class PgParams {
 public:
  PgParams& Int(int64_t v);
  PgParams& Text(std::string_view v);
  PgParams& Bytes(std::string_view v);
  PgParams& NullText();  // a NULL text
  PgParams& NullInt();   // a NULL bigint

  int size() const { return static_cast<int>(values_.size()); }
  const std::vector<unsigned int>& types() const { return types_; }
  // Pointers into this object: valid while it lives unchanged.
  void Arrays(std::vector<const char*>* values, std::vector<int>* lengths,
              std::vector<int>* formats) const;

 private:
  std::vector<std::string> values_;
  std::vector<bool> null_;
  std::vector<unsigned int> types_;
};

// A result with binary columns.
class PgResult {
 public:
  explicit PgResult(PGresult* r = nullptr) : r_(r) {}
  PgResult(PgResult&& o) noexcept : r_(o.r_) { o.r_ = nullptr; }
  PgResult& operator=(PgResult&& o) noexcept {
    std::swap(r_, o.r_);
    return *this;
  }
  PgResult(const PgResult&) = delete;
  PgResult& operator=(const PgResult&) = delete;
  ~PgResult() { PQclear(r_); }

  const PGresult* get() const { return r_; }
  int rows() const { return PQntuples(r_); }
  bool IsNull(int row, int col) const { return PQgetisnull(r_, row, col) != 0; }
  // A bigint/int/smallint/bool column (binary, big-endian); 0 when NULL.
  int64_t Int(int row, int col) const;
  // A text or bytea column's bytes.
  std::string_view Bytes(int row, int col) const {
    return std::string_view(PQgetvalue(r_, row, col), PQgetlength(r_, row, col));
  }
  // Affected rows of an INSERT/UPDATE/DELETE.
  int64_t affected() const;

 private:
  PGresult* r_;
};

class PgConn {
 public:
  ~PgConn();

  // Connects to `url` (libpq's URL); `display` names it in messages. Fails with
  // Unavailable "DISPLAY: cannot connect: ..." (server unreachable, authentication).
  static Result<std::unique_ptr<PgConn>> Connect(const std::string& url, const std::string& display,
                                                 int timeout_s);

  const std::string& display() const { return display_; }
  // The SQLSTATE of the last failure ("" when none or when the connection broke).
  const std::string& sqlstate() const { return sqlstate_; }
  bool broken() const { return PQstatus(conn_) != CONNECTION_OK; }

  // One or more statements without parameters or results (schema, SET, BEGIN/COMMIT).
  Status Exec(const std::string& sql);
  // A statement with parameters, prepared once per connection (by its text) and returning
  // binary columns. Sends what Queue holds first.
  Result<PgResult> Query(const std::string& sql, const PgParams& params = {});

  // Queues a statement whose result only matters as success or failure (inserts): queued
  // statements go to the server together, in one round trip (libpq pipeline mode), at
  // the next Query, Exec or Send. A failure of any of them is the failure of that call.
  Status Queue(const std::string& sql, PgParams params);
  // Sends the queued statements; the affected rows of the last one.
  Result<int64_t> Send();

 private:
  PgConn() = default;
  Status Error(std::string_view what, const PGresult* r);
  // The prepared statement's name for `sql` (preparing it on first use).
  Result<std::string> Prepared(const std::string& sql, const PgParams& params);

  PGconn* conn_ = nullptr;
  std::string display_;
  std::string sqlstate_;
  std::map<std::string, std::string> prepared_;  // SQL text -> statement name
  struct Queued {
    std::string name;  // prepared statement
    std::string sql;   // for messages
    PgParams params;
  };
  std::vector<Queued> queued_;
};

// libpq's multi-line message on one line.
std::string OneLine(std::string_view message);

}  // namespace trace::store
