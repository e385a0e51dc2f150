#include "store/pg_rows.h"

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <thread>

#include "store/pg_conn.h"
#include "store/schema.h"
#include "store/verify_rows.h"

namespace trace::store {
namespace {

// The PostgreSQL layout: the SQLite layout of schema version 2 (schema.cc) in PostgreSQL
// types. Identifiers compare bytewise (COLLATE "C") as in SQLite, so prefixes and the
// newest-first order of `ls` are the same. Payloads and blob data are compressed
// already: stored out of line without PostgreSQL's own compression (STORAGE EXTERNAL).
constexpr const char* kPgSchemaV2 = R"sql(
CREATE TABLE IF NOT EXISTS meta(key TEXT COLLATE "C" PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS runs(
  run_id TEXT COLLATE "C" PRIMARY KEY,
  start_time_ns BIGINT NOT NULL,
  header_encoding BIGINT NOT NULL,
  header BYTEA NOT NULL,
  command TEXT NOT NULL,
  label TEXT NOT NULL,
  events BIGINT NOT NULL DEFAULT 0,
  model_calls BIGINT NOT NULL DEFAULT 0,
  sampled_tokens BIGINT NOT NULL DEFAULT 0,
  stored_bytes BIGINT NOT NULL DEFAULT 0,
  last_event_ns BIGINT NOT NULL,
  end_time_ns BIGINT,
  end_how BIGINT,
  exit_code BIGINT,
  signal BIGINT,
  checksum BIGINT
);
CREATE INDEX IF NOT EXISTS runs_by_start ON runs(start_time_ns);
CREATE TABLE IF NOT EXISTS events(
  run_id TEXT COLLATE "C" NOT NULL,
  seq BIGINT NOT NULL,
  kind BIGINT NOT NULL,
  wall_time_ns BIGINT NOT NULL,
  encoding BIGINT NOT NULL,
  payload BYTEA NOT NULL,
  checksum BIGINT,
  PRIMARY KEY(run_id, seq)
);
ALTER TABLE events ALTER COLUMN payload SET STORAGE EXTERNAL;
CREATE TABLE IF NOT EXISTS blobs(
  sha256 TEXT COLLATE "C" PRIMARY KEY,
  size BIGINT NOT NULL,
  base_sha256 TEXT COLLATE "C",
  prefix_len BIGINT NOT NULL,
  dict_sha256 TEXT COLLATE "C",
  depth BIGINT NOT NULL,
  encoding BIGINT NOT NULL,
  data BYTEA NOT NULL
);
ALTER TABLE blobs ALTER COLUMN data SET STORAGE EXTERNAL;
CREATE TABLE IF NOT EXISTS blob_refs(
  run_id TEXT COLLATE "C" NOT NULL,
  sha256 TEXT COLLATE "C" NOT NULL,
  PRIMARY KEY(run_id, sha256)
);
)sql";

// Version 3 (schema.cc kSchemaV2ToV3 in PostgreSQL types): the verdicts and job queue of
// `trace verify`. The open jobs' index serves the claim's scan (state, model, job order).
constexpr const char* kPgSchemaV3 = R"sql(
CREATE TABLE IF NOT EXISTS verifications(
  id BIGSERIAL PRIMARY KEY,
  run_id TEXT COLLATE "C" NOT NULL,
  batch_id TEXT COLLATE "C" NOT NULL,
  verdict TEXT NOT NULL,
  first_divergence TEXT NOT NULL,
  report_json TEXT NOT NULL,
  machine TEXT COLLATE "C" NOT NULL,
  fingerprint_json TEXT NOT NULL,
  build TEXT NOT NULL,
  worker TEXT NOT NULL,
  time_ns BIGINT NOT NULL,
  seconds_us BIGINT NOT NULL
);
CREATE INDEX IF NOT EXISTS verifications_by_run ON verifications(run_id, machine, id);
CREATE TABLE IF NOT EXISTS verify_batches(
  batch_id TEXT COLLATE "C" PRIMARY KEY,
  created_ns BIGINT NOT NULL,
  description TEXT NOT NULL,
  total BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS verify_jobs(
  job_id BIGSERIAL PRIMARY KEY,
  batch_id TEXT COLLATE "C" NOT NULL,
  run_id TEXT COLLATE "C" NOT NULL,
  model TEXT COLLATE "C" NOT NULL,
  state BIGINT NOT NULL DEFAULT 0,
  worker TEXT NOT NULL DEFAULT '',
  claim TEXT COLLATE "C" NOT NULL DEFAULT '',
  lease_until_ns BIGINT NOT NULL DEFAULT 0,
  attempts BIGINT NOT NULL DEFAULT 0,
  verification_id BIGINT
);
CREATE INDEX IF NOT EXISTS verify_jobs_open ON verify_jobs(state, model, job_id);
CREATE INDEX IF NOT EXISTS verify_jobs_by_batch ON verify_jobs(batch_id, job_id);
)sql";

// pg_advisory_xact_lock key of the store: shared by writers, exclusive for creating the
// tables and for deleting runs ("trace" in ASCII).
constexpr const char* kLockKey = "500135191397";

// Every blob a run references, directly or as another live blob's base or dictionary
// (schema.h kLiveBlobsCte; PostgreSQL allows one recursive term).
constexpr const char* kPgLiveBlobsCte =
    "WITH RECURSIVE live(sha256) AS ("
    "  SELECT sha256 FROM blob_refs"
    "  UNION SELECT d.sha256 FROM blobs b JOIN live l ON b.sha256 = l.sha256"
    "  CROSS JOIN LATERAL (VALUES (b.base_sha256), (b.dict_sha256)) AS d(sha256)"
    "  WHERE d.sha256 IS NOT NULL) ";

constexpr const char* kPgRunColumns =
    "run_id, start_time_ns, header_encoding, header, command, label, events, model_calls, "
    "sampled_tokens, stored_bytes, last_event_ns, end_time_ns, end_how, exit_code, signal, "
    "checksum";

StoredRunRow RunRowFrom(const PgResult& q, int i) {
  StoredRunRow s;
  RunRow& r = s.row;
  r.run_id = std::string(q.Bytes(i, 0));
  r.start_time_ns = q.Int(i, 1);
  r.header_encoding = q.Int(i, 2);
  r.header = std::string(q.Bytes(i, 3));
  r.command = std::string(q.Bytes(i, 4));
  r.label = std::string(q.Bytes(i, 5));
  r.events = q.Int(i, 6);
  r.model_calls = q.Int(i, 7);
  r.sampled_tokens = q.Int(i, 8);
  r.stored_bytes = q.Int(i, 9);
  r.last_event_ns = q.Int(i, 10);
  r.ended = !q.IsNull(i, 11);
  r.end_time_ns = q.Int(i, 11);
  r.end_how = q.Int(i, 12);
  r.exit_code = q.Int(i, 13);
  r.signal = q.Int(i, 14);
  if (!q.IsNull(i, 15)) s.checksum = ChecksumFromSql(q.Int(i, 15));
  return s;
}

// The run's columns from header_encoding on, its checksum last.
void AddRunColumns(PgParams* p, const RunRow& row) {
  p->Int(row.header_encoding).Bytes(row.header).Text(row.command).Text(row.label);
  p->Int(row.events).Int(row.model_calls).Int(row.sampled_tokens).Int(row.stored_bytes);
  p->Int(row.last_event_ns);
  if (row.ended) {
    p->Int(row.end_time_ns).Int(row.end_how).Int(row.exit_code).Int(row.signal);
  } else {
    p->NullInt().NullInt().NullInt().NullInt();
  }
  p->Int(ChecksumToSql(RunRowChecksum(row)));
}

EventRow EventRowFrom(const PgResult& q, int i) {
  EventRow e;
  e.seq = q.Int(i, 0);
  e.kind = q.Int(i, 1);
  e.wall_time_ns = q.Int(i, 2);
  e.encoding = q.Int(i, 3);
  e.payload = std::string(q.Bytes(i, 4));
  if (!q.IsNull(i, 5)) e.checksum = ChecksumFromSql(q.Int(i, 5));
  return e;
}

constexpr const char* kEventSelect =
    "SELECT seq, kind, wall_time_ns, encoding, payload, checksum FROM events ";

struct PgConfig {
  StoreLocation where;
  bool read_only = false;
  int timeout_s = 10;
  int schema_version = 0;
};

// Connects with the store's session settings: read-only sessions for reading commands;
// every commit waits for the server's WAL flush (acknowledged means stored), whatever the
// server's default.
Result<std::unique_ptr<PgConn>> ConnectPg(const PgConfig& config) {
  TRACE_ASSIGN_OR_RETURN(
      auto conn, PgConn::Connect(config.where.target, config.where.display, config.timeout_s));
  TRACE_RETURN_IF_ERROR(conn->Exec(config.read_only
                                       ? "SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY"
                                       : "SET synchronous_commit = on"));
  return conn;
}

// Reads events in batches through a server-side cursor (inside the read transaction).
class PgCursor final : public EventCursor {
 public:
  PgCursor(PgConn* conn, std::string name) : conn_(conn), name_(std::move(name)) {}
  Result<bool> Next(EventRow* row) override {
    if (next_ >= batch_.rows()) {
      if (done_) return false;
      TRACE_ASSIGN_OR_RETURN(batch_, conn_->Query("FETCH 256 FROM " + name_));
      next_ = 0;
      if (batch_.rows() < 256) done_ = true;
      if (batch_.rows() == 0) return false;
    }
    *row = EventRowFrom(batch_, next_++);
    return true;
  }

 private:
  PgConn* conn_;
  std::string name_;
  PgResult batch_;
  int next_ = 0;
  bool done_ = false;
};

class PgRowConn final : public RowConn {
 public:
  PgRowConn(std::unique_ptr<PgConn> conn, PgConfig config)
      : conn_(std::move(conn)), config_(std::move(config)) {}

  const std::string& name() const override { return config_.where.display; }
  bool checksums() const override { return true; }
  Retry retry() const override {
    const std::string& s = conn_->sqlstate();
    // serialization_failure, deadlock_detected, lock_not_available (lock_timeout).
    if (s == "40001" || s == "40P01" || s == "55P03") return Retry::kTransaction;
    return Retry::kNo;
  }
  bool aborts_transactions() const override { return true; }

  Result<std::unique_ptr<RowConn>> NewConnection() const override {
    TRACE_ASSIGN_OR_RETURN(auto conn, ConnectPg(config_));
    return std::unique_ptr<RowConn>(new PgRowConn(std::move(conn), config_));
  }
  Result<std::unique_ptr<VerifyQueue>> NewVerifyQueue() const override {
    TRACE_ASSIGN_OR_RETURN(auto conn, ConnectPg(config_));
    return NewPgVerifyQueue(std::move(conn), config_.schema_version, config_.read_only);
  }
  void SetLockWait(int ms) override {
    (void)conn_->Exec("SET lock_timeout = " + std::to_string(std::max(1, ms)));
  }

  Status BeginWrite() override {
    // One round trip for both.
    return conn_->Exec(std::string("BEGIN; SELECT pg_advisory_xact_lock_shared(") + kLockKey + ")");
  }
  Status BeginRead() override {
    return conn_->Exec("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY");
  }
  Status Commit() override { return conn_->Exec("COMMIT"); }
  void Rollback() override {
    (void)conn_->Send();  // a failed pipeline leaves nothing queued
    (void)conn_->Exec("ROLLBACK");
  }

  Result<std::optional<int64_t>> BlobDepth(const std::string& sha256) override {
    TRACE_ASSIGN_OR_RETURN(PgResult r, conn_->Query("SELECT depth FROM blobs WHERE sha256=$1",
                                                    PgParams().Text(sha256)));
    std::optional<int64_t> depth;
    if (r.rows() > 0) depth = r.Int(0, 0);
    return depth;
  }

  Status InsertBlob(const BlobRow& b) override {
    PgParams p;
    p.Text(b.sha256).Int(b.size);
    b.base_sha256.empty() ? p.NullText() : p.Text(b.base_sha256);
    p.Int(b.prefix_len);
    b.dict_sha256.empty() ? p.NullText() : p.Text(b.dict_sha256);
    p.Int(b.depth).Int(b.encoding).Bytes(b.data);
    return conn_->Queue(
        "INSERT INTO blobs(sha256, size, base_sha256, prefix_len, dict_sha256, depth, "
        "encoding, data) VALUES($1,$2,$3,$4,$5,$6,$7,$8) ON CONFLICT DO NOTHING",
        std::move(p));
  }

  Status InsertBlobRef(const std::string& run_id, const std::string& sha256) override {
    return conn_->Queue(
        "INSERT INTO blob_refs(run_id, sha256) VALUES($1,$2) ON CONFLICT DO NOTHING",
        PgParams().Text(run_id).Text(sha256));
  }

  Status InsertEvent(const std::string& run_id, const EventRow& e) override {
    PgParams p;
    p.Text(run_id).Int(e.seq).Int(e.kind).Int(e.wall_time_ns).Int(e.encoding).Bytes(e.payload);
    p.Int(ChecksumToSql(e.checksum.value_or(
        EventRowChecksum(run_id, e.seq, e.kind, e.wall_time_ns, e.encoding, e.payload))));
    return conn_->Queue(
        "INSERT INTO events(run_id, seq, kind, wall_time_ns, encoding, payload, checksum) "
        "VALUES($1,$2,$3,$4,$5,$6,$7)",
        std::move(p));
  }

  Status InsertRun(const RunRow& row) override {
    PgParams p;
    p.Text(row.run_id).Int(row.start_time_ns);
    AddRunColumns(&p, row);
    auto r = conn_->Query(std::string("INSERT INTO runs(") + kPgRunColumns +
                              ") VALUES($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$14,$15,$16)",
                          p);
    if (!r.ok() && r.status().code() == StatusCode::kAlreadyExists) {
      return AlreadyExists("run " + row.run_id + " already exists in " + name());
    }
    return r.status();
  }

  Result<bool> UpdateRun(const RunRow& row) override {
    PgParams p;
    AddRunColumns(&p, row);
    p.Text(row.run_id);
    // Sent together with the batch's queued inserts: one round trip.
    TRACE_RETURN_IF_ERROR(
        conn_->Queue("UPDATE runs SET header_encoding=$1, header=$2, command=$3, label=$4, "
                     "events=$5, model_calls=$6, sampled_tokens=$7, stored_bytes=$8, "
                     "last_event_ns=$9, end_time_ns=$10, end_how=$11, exit_code=$12, "
                     "signal=$13, checksum=$14 WHERE run_id=$15",
                     std::move(p)));
    TRACE_ASSIGN_OR_RETURN(int64_t affected, conn_->Send());
    return affected != 0;
  }

  Status DeleteRun(const std::string& run_id) override {
    // Exclusive: waits for writers in flight, whose blob references must be seen.
    TRACE_RETURN_IF_ERROR(conn_->Exec("BEGIN"));
    Status st = conn_->Exec(std::string("SELECT pg_advisory_xact_lock(") + kLockKey + ")");
    if (st.ok()) st = DeleteInTransaction(run_id);
    if (st.ok()) st = conn_->Exec("COMMIT");
    if (!st.ok()) Rollback();
    return st;
  }

  Result<std::optional<BlobRow>> ReadBlob(const std::string& sha256) override {
    TRACE_ASSIGN_OR_RETURN(PgResult r,
                           conn_->Query("SELECT size, base_sha256, prefix_len, dict_sha256, depth, "
                                        "encoding, data FROM blobs WHERE sha256=$1",
                                        PgParams().Text(sha256)));
    std::optional<BlobRow> out;
    if (r.rows() > 0) {
      BlobRow& b = out.emplace();
      b.sha256 = sha256;
      b.size = r.Int(0, 0);
      if (!r.IsNull(0, 1)) b.base_sha256 = std::string(r.Bytes(0, 1));
      b.prefix_len = r.Int(0, 2);
      if (!r.IsNull(0, 3)) b.dict_sha256 = std::string(r.Bytes(0, 3));
      b.depth = r.Int(0, 4);
      b.encoding = r.Int(0, 5);
      b.data = std::string(r.Bytes(0, 6));
    }
    return out;
  }

  Result<std::optional<EventRow>> ReadEvent(const std::string& run_id, int64_t seq) override {
    TRACE_ASSIGN_OR_RETURN(PgResult r,
                           conn_->Query(std::string(kEventSelect) + "WHERE run_id=$1 AND seq=$2",
                                        PgParams().Text(run_id).Int(seq)));
    std::optional<EventRow> out;
    if (r.rows() > 0) out = EventRowFrom(r, 0);
    return out;
  }

  Result<std::unique_ptr<EventCursor>> ScanEvents(const std::string& run_id,
                                                  int64_t from_seq) override {
    std::string cursor = "trace_events_" + std::to_string(++cursors_);
    TRACE_RETURN_IF_ERROR(conn_
                              ->Query("DECLARE " + cursor + " NO SCROLL CURSOR FOR " +
                                          kEventSelect + "WHERE run_id=$1 AND seq>=$2 ORDER BY seq",
                                      PgParams().Text(run_id).Int(from_seq))
                              .status());
    return std::unique_ptr<EventCursor>(new PgCursor(conn_.get(), std::move(cursor)));
  }

  Result<std::optional<StoredRunRow>> ReadRun(const std::string& run_id) override {
    TRACE_ASSIGN_OR_RETURN(PgResult r, conn_->Query(std::string("SELECT ") + kPgRunColumns +
                                                        " FROM runs WHERE run_id=$1",
                                                    PgParams().Text(run_id)));
    std::optional<StoredRunRow> out;
    if (r.rows() > 0) out = RunRowFrom(r, 0);
    return out;
  }

  Result<std::vector<StoredRunRow>> ListRuns(const RunRowFilter& f) override {
    PgParams p;
    int n = 0;  // parameters added so far: $n names the latest
    std::string where;
    auto clause = [&where](const std::string& c) {
      where += (where.empty() ? " WHERE " : " AND ") + c;
    };
    auto next = [&n] { return "$" + std::to_string(++n); };
    const char* cmp = f.oldest_first ? ">" : "<";
    if (!f.after_run_id.empty()) {
      const std::string start = next(), id = next();
      // The first term is a range on runs_by_start, so a later page starts where the
      // cursor points instead of scanning the pages before it.
      clause("start_time_ns " + std::string(cmp) + "= " + start + " AND (start_time_ns " + cmp +
             " " + start + " OR run_id " + cmp + " " + id + ")");
      p.Int(f.after_start_ns).Text(f.after_run_id);
    }
    if (!f.label.empty()) {
      clause("label = " + next());
      p.Text(f.label);
    }
    if (!f.text.empty()) {
      // Under COLLATE "C" lower() folds ASCII only, as SQLite's does.
      const std::string t = next();
      clause("(strpos(lower(command COLLATE \"C\"), lower(" + t +
             " COLLATE \"C\")) > 0 OR strpos(lower(label COLLATE \"C\"), lower(" + t +
             " COLLATE \"C\")) > 0)");
      p.Text(f.text);
    }
    if (f.started_from_ns != 0) {
      clause("start_time_ns >= " + next());
      p.Int(f.started_from_ns);
    }
    if (f.started_before_ns != 0) {
      clause("start_time_ns < " + next());
      p.Int(f.started_before_ns);
    }
    const char* dir = f.oldest_first ? "ASC" : "DESC";
    std::string sql = std::string("SELECT ") + kPgRunColumns + " FROM runs" + where +
                      " ORDER BY start_time_ns " + dir + ", run_id " + dir + " LIMIT " + next();
    p.Int(f.limit == 0 ? INT64_MAX : static_cast<int64_t>(f.limit));
    TRACE_ASSIGN_OR_RETURN(PgResult r, conn_->Query(sql, p));
    std::vector<StoredRunRow> out;
    for (int i = 0; i < r.rows(); ++i) out.push_back(RunRowFrom(r, i));
    return out;
  }

  Result<std::vector<std::string>> RunIdsWithPrefix(const std::string& prefix,
                                                    size_t limit) override {
    TRACE_ASSIGN_OR_RETURN(
        PgResult r,
        conn_->Query(
            "SELECT run_id FROM runs WHERE run_id >= $1 AND run_id < $2 ORDER BY run_id "
            "LIMIT $3",
            PgParams().Text(prefix).Text(prefix + "\x7f").Int(static_cast<int64_t>(limit))));
    std::vector<std::string> out;
    for (int i = 0; i < r.rows(); ++i) out.emplace_back(r.Bytes(i, 0));
    return out;
  }

  Result<StoreStats> Stats() override {
    TRACE_ASSIGN_OR_RETURN(
        PgResult r,
        conn_->Query("SELECT (SELECT count(*) FROM runs), (SELECT count(*) FROM events), "
                     "(SELECT count(*) FROM blobs), "
                     "(SELECT coalesce(sum(length(payload)),0)::bigint FROM events), "
                     "(SELECT coalesce(sum(length(data)),0)::bigint FROM blobs), "
                     "(SELECT (pg_total_relation_size('runs') + pg_total_relation_size('events') "
                     "+ pg_total_relation_size('blobs') + pg_total_relation_size('blob_refs') "
                     "+ pg_total_relation_size('meta'))::bigint)"));
    StoreStats s;
    if (r.rows() > 0) {
      s.runs = r.Int(0, 0);
      s.events = r.Int(0, 1);
      s.blobs = r.Int(0, 2);
      s.event_payload_bytes = r.Int(0, 3);
      s.blob_bytes = r.Int(0, 4);
      s.file_bytes = r.Int(0, 5);
    }
    return s;
  }

 private:
  Status DeleteInTransaction(const std::string& run_id) {
    TRACE_ASSIGN_OR_RETURN(
        PgResult del, conn_->Query("DELETE FROM runs WHERE run_id=$1", PgParams().Text(run_id)));
    if (del.affected() == 0) return NotFound("no run matches '" + run_id + "' in " + name());
    for (const char* sql :
         {"DELETE FROM events WHERE run_id=$1", "DELETE FROM blob_refs WHERE run_id=$1",
          "DELETE FROM verifications WHERE run_id=$1", "DELETE FROM verify_jobs WHERE run_id=$1"}) {
      TRACE_RETURN_IF_ERROR(conn_->Query(sql, PgParams().Text(run_id)).status());
    }
    return conn_->Exec(std::string(kPgLiveBlobsCte) +
                       "DELETE FROM blobs WHERE sha256 NOT IN (SELECT sha256 FROM live)");
  }

  std::unique_ptr<PgConn> conn_;
  PgConfig config_;
  int cursors_ = 0;
};

// The schema version in the meta table; 0 when the database has no trace tables.
Result<int> ReadPgSchemaVersion(PgConn& conn) {
  // runs/events first, meta second, in separate statements: each name lookup may see a
  // later catalog than the one before, and the tables are created in one transaction,
  // so runs seen here means meta is seen below, even while another process creates them.
  TRACE_ASSIGN_OR_RETURN(
      PgResult other,
      conn.Query("SELECT to_regclass('runs') IS NOT NULL OR to_regclass('events') IS NOT NULL"));
  TRACE_ASSIGN_OR_RETURN(PgResult meta, conn.Query("SELECT to_regclass('meta') IS NOT NULL"));
  if (meta.Int(0, 0) == 0) {
    if (other.Int(0, 0) != 0) {
      return Corruption(conn.display() +
                        ": not a trace store (tables runs/events without a meta table)");
    }
    return 0;
  }
  TRACE_ASSIGN_OR_RETURN(PgResult q,
                         conn.Query("SELECT value FROM meta WHERE key='schema_version'"));
  if (q.rows() == 0) return Corruption(conn.display() + ": meta table has no schema_version");
  const std::string v(q.Bytes(0, 0));
  char* end = nullptr;
  errno = 0;
  const long n = std::strtol(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || errno != 0 || n < 0 || n > 1'000'000) {
    return Corruption(conn.display() + ": schema_version '" + v + "' is not a number");
  }
  return static_cast<int>(n);
}

// Migrations from version v: a PostgreSQL store starts at version 2 (the first layout
// with checksums); 0 is a database without trace tables; 2 gains the verify tables (3).
Status MigratePg(PgConn& conn, int version) {
  if (version != 0 && version != 2) {
    return Internal(conn.display() + ": no migration from schema version " +
                    std::to_string(version));
  }
  if (version == 0) TRACE_RETURN_IF_ERROR(conn.Exec(kPgSchemaV2));
  TRACE_RETURN_IF_ERROR(conn.Exec(kPgSchemaV3));
  return conn.Exec("INSERT INTO meta(key, value) VALUES('schema_version', '" +
                   std::to_string(kSchemaVersion) +
                   "') ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value");
}

}  // namespace

Result<PgOpened> OpenPgStore(const StoreLocation& where, const StoreOptions& options) {
  PgConfig config;
  config.where = where;
  config.read_only = options.read_only;
  config.timeout_s = std::max(1, options.busy_timeout_ms / 1000);
  TRACE_ASSIGN_OR_RETURN(auto conn, ConnectPg(config));
  TRACE_ASSIGN_OR_RETURN(int version, ReadPgSchemaVersion(*conn));
  if (version > kSchemaVersion) return NewerSchemaError(where.display, version);
  if (version < kSchemaVersion) {
    if (options.read_only) {
      if (version == 0) {
        return FailedPrecondition(where.display +
                                  ": not a trace store (no trace tables in this database; "
                                  "`trace record` creates them)");
      }
    } else {
      if (version == 0 && !options.create_if_missing) {
        return NotFound(where.display + ": no trace store in this database");
      }
      // One creator at a time; the others find the tables made.
      TRACE_RETURN_IF_ERROR(conn->Exec("BEGIN"));
      Status st = conn->Exec(std::string("SELECT pg_advisory_xact_lock(") + kLockKey + ")");
      auto again = st.ok() ? ReadPgSchemaVersion(*conn) : Result<int>(st);
      st = again.status();
      if (st.ok() && *again > kSchemaVersion) st = NewerSchemaError(where.display, *again);
      if (st.ok() && *again < kSchemaVersion) st = MigratePg(*conn, *again);
      if (st.ok()) st = conn->Exec("COMMIT");
      if (!st.ok()) {
        (void)conn->Exec("ROLLBACK");
        return st;
      }
      version = kSchemaVersion;
    }
  }
  config.schema_version = version;
  PgOpened out;
  out.schema_version = version;
  out.conn = std::unique_ptr<RowConn>(new PgRowConn(std::move(conn), config));
  return out;
}

}  // namespace trace::store
