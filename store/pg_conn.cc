#include "store/pg_conn.h"

#include <algorithm>
#include <cctype>
#include <cstring>

namespace trace::store {
namespace {

// PostgreSQL type oids (pg_type.h) of the parameters we send.
constexpr unsigned int kInt8Oid = 20;
constexpr unsigned int kTextOid = 25;
constexpr unsigned int kByteaOid = 17;

// libpq prints server notices (e.g. "relation already exists, skipping") on stderr by
// default; the store's messages are its own.
void IgnoreNotice(void*, const char*) {}

}  // namespace

std::string OneLine(std::string_view message) {
  // Lines joined by "; ", runs of blanks as one space.
  std::string out;
  bool blank = false, line_break = false;
  for (char c : message) {
    if (c == '\n' || c == '\r') {
      line_break = true;
    } else if (c == ' ' || c == '\t') {
      blank = true;
    } else {
      if (!out.empty() && line_break) {
        out += "; ";
      } else if (!out.empty() && blank) {
        out += ' ';
      }
      blank = line_break = false;
      out += c;
    }
  }
  return out;
}

PgParams& PgParams::Int(int64_t v) {
  std::string b(8, '\0');
  const uint64_t u = static_cast<uint64_t>(v);
  for (int i = 0; i < 8; ++i) b[i] = static_cast<char>(u >> (56 - 8 * i));
  values_.push_back(std::move(b));
  null_.push_back(false);
  types_.push_back(kInt8Oid);
  return *this;
}

PgParams& PgParams::Text(std::string_view v) {
  values_.emplace_back(v);
  null_.push_back(false);
  types_.push_back(kTextOid);
  return *this;
}

PgParams& PgParams::Bytes(std::string_view v) {
  values_.emplace_back(v);
  null_.push_back(false);
  types_.push_back(kByteaOid);
  return *this;
}

PgParams& PgParams::NullText() {
  values_.emplace_back();
  null_.push_back(true);
  types_.push_back(kTextOid);
  return *this;
}

PgParams& PgParams::NullInt() {
  values_.emplace_back();
  null_.push_back(true);
  types_.push_back(kInt8Oid);
  return *this;
}

void PgParams::Arrays(std::vector<const char*>* values, std::vector<int>* lengths,
                      std::vector<int>* formats) const {
  for (size_t i = 0; i < values_.size(); ++i) {
    values->push_back(null_[i] ? nullptr : values_[i].data());
    lengths->push_back(static_cast<int>(values_[i].size()));
    formats->push_back(1);
  }
}

int64_t PgResult::Int(int row, int col) const {
  if (PQgetisnull(r_, row, col)) return 0;
  const auto* p = reinterpret_cast<const unsigned char*>(PQgetvalue(r_, row, col));
  const int n = PQgetlength(r_, row, col);
  uint64_t u = 0;
  for (int i = 0; i < n; ++i) u = (u << 8) | p[i];
  // Sign-extend the narrower integer types.
  if (n > 0 && n < 8 && (p[0] & 0x80)) u |= ~uint64_t{0} << (8 * n);
  return static_cast<int64_t>(u);
}

int64_t PgResult::affected() const {
  const char* n = PQcmdTuples(r_);
  return n && *n ? std::strtoll(n, nullptr, 10) : 0;
}

PgConn::~PgConn() {
  PQfinish(conn_);
}

Result<std::unique_ptr<PgConn>> PgConn::Connect(const std::string& url, const std::string& display,
                                                int timeout_s) {
  auto c = std::unique_ptr<PgConn>(new PgConn);
  c->display_ = display;
  // Defaults first: what the URL says wins (later keywords override earlier ones).
  const std::string timeout = std::to_string(std::max(1, timeout_s));
  const char* keys[] = {"connect_timeout", "application_name", "dbname", nullptr};
  const char* values[] = {timeout.c_str(), "trace", url.c_str(), nullptr};
  c->conn_ = PQconnectdbParams(keys, values, /*expand_dbname=*/1);
  if (!c->conn_) return Unavailable(display + ": cannot connect: out of memory");
  if (PQstatus(c->conn_) != CONNECTION_OK) {
    return Unavailable(display + ": cannot connect: " + OneLine(PQerrorMessage(c->conn_)));
  }
  PQsetNoticeProcessor(c->conn_, IgnoreNotice, nullptr);
  return c;
}

Status PgConn::Error(std::string_view what, const PGresult* r) {
  const char* state = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : nullptr;
  sqlstate_ = state ? state : "";
  if (broken()) {
    sqlstate_.clear();
    return Unavailable(display_ + ": lost the connection to the server (" +
                       OneLine(PQerrorMessage(conn_)) + ")");
  }
  const char* primary = r ? PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY) : nullptr;
  std::string msg = display_ + ": " + std::string(what) + ": " +
                    (primary ? std::string(primary) : OneLine(PQerrorMessage(conn_)));
  if (sqlstate_ == "23505") return AlreadyExists(msg);
  if (sqlstate_.rfind("28", 0) == 0 || sqlstate_ == "42501") return FailedPrecondition(msg);
  return IOError(msg);
}

Status PgConn::Exec(const std::string& sql) {
  TRACE_RETURN_IF_ERROR(Send().status());
  // PQexec returns the last statement's result (or the first failure's).
  PgResult r(PQexec(conn_, sql.c_str()));
  const PGresult* raw = r.get();
  const ExecStatusType st = raw ? PQresultStatus(raw) : PGRES_FATAL_ERROR;
  if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
    return Error(sql.size() > 60 ? sql.substr(0, 57) + "..." : sql, raw);
  }
  sqlstate_.clear();
  return Status::Ok();
}

Result<std::string> PgConn::Prepared(const std::string& sql, const PgParams& params) {
  auto it = prepared_.find(sql);
  if (it == prepared_.end()) {
    std::string name = "s" + std::to_string(prepared_.size() + 1);
    PgResult r(PQprepare(conn_, name.c_str(), sql.c_str(), params.size(),
                         params.types().empty() ? nullptr : params.types().data()));
    if (!r.get() || PQresultStatus(r.get()) != PGRES_COMMAND_OK) {
      return Error("preparing statement", r.get());
    }
    it = prepared_.emplace(sql, std::move(name)).first;
  }
  return it->second;
}

namespace {
std::string Verb(const std::string& sql) {
  return sql.substr(0, sql.find(' ', sql.find(' ') + 1));
}
}  // namespace

Result<PgResult> PgConn::Query(const std::string& sql, const PgParams& params) {
  TRACE_RETURN_IF_ERROR(Send().status());
  TRACE_ASSIGN_OR_RETURN(std::string name, Prepared(sql, params));
  std::vector<const char*> values;
  std::vector<int> lengths, formats;
  params.Arrays(&values, &lengths, &formats);
  PgResult r(PQexecPrepared(conn_, name.c_str(), params.size(), values.data(), lengths.data(),
                            formats.data(), /*resultFormat=*/1));
  const PGresult* raw = r.get();
  const ExecStatusType st = raw ? PQresultStatus(raw) : PGRES_FATAL_ERROR;
  if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) return Error(Verb(sql), raw);
  sqlstate_.clear();
  return r;
}

Status PgConn::Queue(const std::string& sql, PgParams params) {
  TRACE_ASSIGN_OR_RETURN(std::string name, Prepared(sql, params));
  queued_.push_back({std::move(name), sql, std::move(params)});
  return Status::Ok();
}

Result<int64_t> PgConn::Send() {
  if (queued_.empty()) return int64_t{0};
  std::vector<Queued> batch;
  batch.swap(queued_);
  if (PQenterPipelineMode(conn_) != 1) {
    return Unavailable(display_ + ": cannot enter pipeline mode (" +
                       OneLine(PQerrorMessage(conn_)) + ")");
  }
  Status failure = Status::Ok();
  for (const Queued& q : batch) {
    std::vector<const char*> values;
    std::vector<int> lengths, formats;
    q.params.Arrays(&values, &lengths, &formats);
    if (PQsendQueryPrepared(conn_, q.name.c_str(), q.params.size(), values.data(), lengths.data(),
                            formats.data(), 1) != 1) {
      failure = Error(Verb(q.sql), nullptr);
      break;
    }
  }
  if (PQpipelineSync(conn_) != 1 && failure.ok()) failure = Error("pipeline sync", nullptr);
  // One result (then a null) per statement sent, then the sync's.
  int64_t affected = 0;
  for (size_t i = 0;; ++i) {
    PgResult r(PQgetResult(conn_));
    if (!r.get()) {
      if (broken()) {
        if (failure.ok()) failure = Error("pipeline", nullptr);
        break;
      }
      continue;  // the end of one statement's results
    }
    const ExecStatusType st = PQresultStatus(r.get());
    if (st == PGRES_PIPELINE_SYNC) break;
    if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) {
      affected = r.affected();
    } else if (st != PGRES_PIPELINE_ABORTED && failure.ok()) {
      failure = Error(Verb(i < batch.size() ? batch[i].sql : batch.back().sql), r.get());
    }
  }
  PQexitPipelineMode(conn_);
  TRACE_RETURN_IF_ERROR(failure);
  sqlstate_.clear();
  return affected;
}

}  // namespace trace::store
