#include "store/sqlite_rows.h"
#include "store/verify_rows.h"

#include <filesystem>

#include "store/schema.h"

namespace trace::store {
namespace {

// Every column of the runs row, the checksum last (NULL in a version 1 store).
constexpr const char* kSqliteRunColumns =
    "run_id, start_time_ns, header_encoding, header, command, label, events, model_calls, "
    "sampled_tokens, stored_bytes, last_event_ns, end_time_ns, end_how, exit_code, signal";

StoredRunRow RunRowFrom(const Stmt& q) {
  StoredRunRow s;
  RunRow& r = s.row;
  r.run_id = q.Text(0);
  r.start_time_ns = q.Int(1);
  r.header_encoding = q.Int(2);
  r.header = std::string(q.Blob(3));
  r.command = q.Text(4);
  r.label = q.Text(5);
  r.events = q.Int(6);
  r.model_calls = q.Int(7);
  r.sampled_tokens = q.Int(8);
  r.stored_bytes = q.Int(9);
  r.last_event_ns = q.Int(10);
  r.ended = !q.IsNull(11);
  r.end_time_ns = q.Int(11);
  r.end_how = q.Int(12);
  r.exit_code = q.Int(13);
  r.signal = q.Int(14);
  if (q.IsInt(15)) s.checksum = ChecksumFromSql(q.Int(15));
  return s;
}

// Binds the run's columns 2..15 (header .. checksum) as UPDATE/INSERT use them.
void BindRunColumns(Stmt& s, const RunRow& row, int first) {
  s.Bind(first, row.header_encoding).BindBlob(first + 1, row.header);
  s.Bind(first + 2, row.command).Bind(first + 3, row.label).Bind(first + 4, row.events);
  s.Bind(first + 5, row.model_calls).Bind(first + 6, row.sampled_tokens);
  s.Bind(first + 7, row.stored_bytes).Bind(first + 8, row.last_event_ns);
  if (row.ended) {
    s.Bind(first + 9, row.end_time_ns).Bind(first + 10, row.end_how);
    s.Bind(first + 11, row.exit_code).Bind(first + 12, row.signal);
  } else {
    s.BindNull(first + 9).BindNull(first + 10).BindNull(first + 11).BindNull(first + 12);
  }
  s.Bind(first + 13, ChecksumToSql(RunRowChecksum(row)));
}

EventRow EventRowFrom(const Stmt& q, int first) {
  EventRow e;
  e.seq = q.Int(first);
  e.kind = q.Int(first + 1);
  e.wall_time_ns = q.Int(first + 2);
  e.encoding = q.Int(first + 3);
  e.payload = std::string(q.Blob(first + 4));
  if (q.IsInt(first + 5)) e.checksum = ChecksumFromSql(q.Int(first + 5));
  return e;
}

class SqliteCursor final : public EventCursor {
 public:
  SqliteCursor(Db* db, Stmt stmt) : db_(db), stmt_(std::move(stmt)) {}
  Result<bool> Next(EventRow* row) override {
    TRACE_ASSIGN_OR_RETURN(bool has, db_->Step(stmt_));
    if (has) *row = EventRowFrom(stmt_, 0);
    return has;
  }

 private:
  Db* db_;
  Stmt stmt_;
};

class SqliteRowConn final : public RowConn {
 public:
  SqliteRowConn(std::unique_ptr<Db> db, int schema_version, bool sync_full)
      : db_(std::move(db)), schema_version_(schema_version), sync_full_(sync_full) {}
  ~SqliteRowConn() override {
    // Statements before the connection.
    stmts_.clear();
  }

  Db* db() { return db_.get(); }

  const std::string& name() const override { return db_->path(); }
  bool checksums() const override { return schema_version_ >= 2; }
  Retry retry() const override {
    return db_->LastErrorIsTransient() ? Retry::kStatement : Retry::kNo;
  }

  bool aborts_transactions() const override { return false; }

  Result<std::unique_ptr<RowConn>> NewConnection() const override {
    TRACE_ASSIGN_OR_RETURN(auto db, OpenConnection(db_->config(), sync_full_));
    return NewSqliteRowConn(std::move(db), schema_version_, sync_full_);
  }
  Result<std::unique_ptr<VerifyQueue>> NewVerifyQueue() const override {
    TRACE_ASSIGN_OR_RETURN(auto db, OpenConnection(db_->config(), sync_full_));
    return NewSqliteVerifyQueue(std::move(db), schema_version_, db_->config().read_only);
  }
  void SetLockWait(int ms) override { sqlite3_busy_timeout(db_->get(), std::max(1, ms)); }

  Status BeginWrite() override { return db_->Exec("BEGIN IMMEDIATE"); }
  Status BeginRead() override { return db_->Exec("BEGIN"); }
  Status Commit() override { return db_->Exec("COMMIT"); }
  void Rollback() override { (void)db_->Exec("ROLLBACK"); }

  Result<std::optional<int64_t>> BlobDepth(const std::string& sha256) override {
    TRACE_ASSIGN_OR_RETURN(Stmt * s, Get(kBlobDepth, "SELECT depth FROM blobs WHERE sha256=?"));
    s->Bind(1, sha256);
    TRACE_ASSIGN_OR_RETURN(bool row, db_->Step(*s));
    std::optional<int64_t> depth;
    if (row) depth = s->Int(0);
    s->Reset();
    return depth;
  }

  Status InsertBlob(const BlobRow& b) override {
    TRACE_ASSIGN_OR_RETURN(Stmt * s, Get(kInsertBlob,
                                         "INSERT OR IGNORE INTO blobs(sha256, size, base_sha256, "
                                         "prefix_len, dict_sha256, depth, encoding, data) "
                                         "VALUES(?,?,?,?,?,?,?,?)"));
    s->Bind(1, b.sha256).Bind(2, b.size);
    b.base_sha256.empty() ? s->BindNull(3) : s->Bind(3, b.base_sha256);
    s->Bind(4, b.prefix_len);
    b.dict_sha256.empty() ? s->BindNull(5) : s->Bind(5, b.dict_sha256);
    s->Bind(6, b.depth).Bind(7, b.encoding).BindBlob(8, b.data);
    return db_->Run(*s);
  }

  Status InsertBlobRef(const std::string& run_id, const std::string& sha256) override {
    TRACE_ASSIGN_OR_RETURN(
        Stmt * s, Get(kInsertRef, "INSERT OR IGNORE INTO blob_refs(run_id, sha256) VALUES(?,?)"));
    s->Bind(1, run_id).Bind(2, sha256);
    return db_->Run(*s);
  }

  Status InsertEvent(const std::string& run_id, const EventRow& e) override {
    TRACE_ASSIGN_OR_RETURN(Stmt * s, Get(kInsertEvent,
                                         "INSERT INTO events(run_id, seq, kind, wall_time_ns, "
                                         "encoding, payload, checksum) VALUES(?,?,?,?,?,?,?)"));
    s->Bind(1, run_id).Bind(2, e.seq).Bind(3, e.kind).Bind(4, e.wall_time_ns);
    s->Bind(5, e.encoding).BindBlob(6, e.payload);
    s->Bind(7, ChecksumToSql(e.checksum.value_or(EventRowChecksum(
                   run_id, e.seq, e.kind, e.wall_time_ns, e.encoding, e.payload))));
    return db_->Run(*s);
  }

  Status InsertRun(const RunRow& row) override {
    const std::string sql = std::string("INSERT INTO runs(") + kSqliteRunColumns +
                            ", checksum) VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)";
    TRACE_ASSIGN_OR_RETURN(Stmt s, db_->Prepare(sql.c_str()));
    s.Bind(1, row.run_id).Bind(2, row.start_time_ns);
    BindRunColumns(s, row, 3);
    if (sqlite3_step(s.get()) != SQLITE_DONE) {
      if (sqlite3_extended_errcode(db_->get()) == SQLITE_CONSTRAINT_PRIMARYKEY) {
        return AlreadyExists("run " + row.run_id + " already exists in " + name());
      }
      return db_->Error("creating run " + row.run_id);
    }
    return Status::Ok();
  }

  Result<bool> UpdateRun(const RunRow& row) override {
    TRACE_ASSIGN_OR_RETURN(
        Stmt * s,
        Get(kUpdateRun,
            "UPDATE runs SET header_encoding=?, header=?, command=?, label=?, events=?, "
            "model_calls=?, sampled_tokens=?, stored_bytes=?, last_event_ns=?, "
            "end_time_ns=?, end_how=?, exit_code=?, signal=?, checksum=? WHERE run_id=?"));
    BindRunColumns(*s, row, 1);
    s->Bind(15, row.run_id);
    TRACE_RETURN_IF_ERROR(db_->Run(*s));
    return sqlite3_changes(db_->get()) != 0;
  }

  Status DeleteRun(const std::string& run_id) override {
    TRACE_RETURN_IF_ERROR(db_->Exec("BEGIN IMMEDIATE"));
    Status st = DeleteInTransaction(run_id);
    if (st.ok()) st = db_->Exec("COMMIT");
    if (!st.ok()) Rollback();
    return st;
  }

  Status DeleteInTransaction(const std::string& run_id) {
    TRACE_ASSIGN_OR_RETURN(Stmt del_run, db_->Prepare("DELETE FROM runs WHERE run_id=?"));
    del_run.Bind(1, run_id);
    TRACE_RETURN_IF_ERROR(db_->Run(del_run));
    if (sqlite3_changes(db_->get()) == 0) {
      return NotFound("no run matches '" + run_id + "' in " + name());
    }
    for (const char* sql :
         {"DELETE FROM events WHERE run_id=?", "DELETE FROM blob_refs WHERE run_id=?",
          "DELETE FROM verifications WHERE run_id=?", "DELETE FROM verify_jobs WHERE run_id=?"}) {
      TRACE_ASSIGN_OR_RETURN(Stmt d, db_->Prepare(sql));
      d.Bind(1, run_id);
      TRACE_RETURN_IF_ERROR(db_->Run(d));
    }
    // Blobs live while a run references them or a live blob depends on them.
    const std::string sql = std::string(kLiveBlobsCte) +
                            "DELETE FROM blobs WHERE sha256 NOT IN (SELECT sha256 FROM live)";
    return db_->Exec(sql.c_str());
  }

  Result<std::optional<BlobRow>> ReadBlob(const std::string& sha256) override {
    TRACE_ASSIGN_OR_RETURN(Stmt * s, Get(kReadBlob,
                                         "SELECT size, base_sha256, prefix_len, dict_sha256, "
                                         "depth, encoding, data FROM blobs WHERE sha256=?"));
    s->Bind(1, sha256);
    TRACE_ASSIGN_OR_RETURN(bool row, db_->Step(*s));
    std::optional<BlobRow> out;
    if (row) {
      BlobRow& b = out.emplace();
      b.sha256 = sha256;
      b.size = s->Int(0);
      if (!s->IsNull(1)) b.base_sha256 = s->Text(1);
      b.prefix_len = s->Int(2);
      if (!s->IsNull(3)) b.dict_sha256 = s->Text(3);
      b.depth = s->Int(4);
      b.encoding = s->Int(5);
      b.data = std::string(s->Blob(6));
    }
    s->Reset();
    return out;
  }

  Result<std::optional<EventRow>> ReadEvent(const std::string& run_id, int64_t seq) override {
    TRACE_ASSIGN_OR_RETURN(Stmt * s, Get(kReadEvent, (EventSelect() + " AND seq=?").c_str()));
    s->Bind(1, run_id).Bind(2, seq);
    TRACE_ASSIGN_OR_RETURN(bool row, db_->Step(*s));
    std::optional<EventRow> out;
    if (row) out = EventRowFrom(*s, 0);
    s->Reset();
    return out;
  }

  Result<std::unique_ptr<EventCursor>> ScanEvents(const std::string& run_id,
                                                  int64_t from_seq) override {
    TRACE_ASSIGN_OR_RETURN(Stmt s,
                           db_->Prepare((EventSelect() + " AND seq>=? ORDER BY seq").c_str()));
    s.Bind(1, run_id).Bind(2, from_seq);
    return std::unique_ptr<EventCursor>(new SqliteCursor(db_.get(), std::move(s)));
  }

  Result<std::optional<StoredRunRow>> ReadRun(const std::string& run_id) override {
    TRACE_ASSIGN_OR_RETURN(Stmt q, db_->Prepare((RunSelect() + " WHERE run_id=?").c_str()));
    q.Bind(1, run_id);
    TRACE_ASSIGN_OR_RETURN(bool row, db_->Step(q));
    std::optional<StoredRunRow> out;
    if (row) out = RunRowFrom(q);
    return out;
  }

  Result<std::vector<StoredRunRow>> ListRuns(const RunRowFilter& f) override {
    // Parameters are bound in the order the clauses are added.
    std::string where;
    std::vector<std::variant<int64_t, std::string>> args;
    auto clause = [&where](const std::string& c) {
      where += (where.empty() ? " WHERE " : " AND ") + c;
    };
    const char* cmp = f.oldest_first ? ">" : "<";
    if (!f.after_run_id.empty()) {
      // The first term is a range on runs_by_start, so a later page starts where the
      // cursor points instead of scanning the pages before it.
      clause(std::string("start_time_ns ") + cmp + "= ? AND (start_time_ns " + cmp +
             " ? OR run_id " + cmp + " ?)");
      args.insert(args.end(), {f.after_start_ns, f.after_start_ns, f.after_run_id});
    }
    if (!f.label.empty()) {
      clause("label = ?");
      args.emplace_back(f.label);
    }
    if (!f.text.empty()) {
      // SQLite's lower() folds ASCII only, as PostgreSQL's does under COLLATE "C".
      clause("(instr(lower(command), lower(?)) > 0 OR instr(lower(label), lower(?)) > 0)");
      args.insert(args.end(), {f.text, f.text});
    }
    if (f.started_from_ns != 0) {
      clause("start_time_ns >= ?");
      args.emplace_back(f.started_from_ns);
    }
    if (f.started_before_ns != 0) {
      clause("start_time_ns < ?");
      args.emplace_back(f.started_before_ns);
    }
    const char* dir = f.oldest_first ? "ASC" : "DESC";
    std::string sql = RunSelect() + where + " ORDER BY start_time_ns " + dir + ", run_id " + dir;
    if (f.limit > 0) sql += " LIMIT " + std::to_string(f.limit);
    TRACE_ASSIGN_OR_RETURN(Stmt q, db_->Prepare(sql.c_str()));
    for (size_t i = 0; i < args.size(); ++i) {
      std::visit([&q, i](const auto& v) { q.Bind(static_cast<int>(i + 1), v); }, args[i]);
    }
    std::vector<StoredRunRow> out;
    while (true) {
      TRACE_ASSIGN_OR_RETURN(bool row, db_->Step(q));
      if (!row) break;
      out.push_back(RunRowFrom(q));
    }
    return out;
  }

  Result<std::vector<std::string>> RunIdsWithPrefix(const std::string& prefix,
                                                    size_t limit) override {
    TRACE_ASSIGN_OR_RETURN(Stmt q,
                           db_->Prepare("SELECT run_id FROM runs WHERE run_id >= ? AND run_id < ? "
                                        "ORDER BY run_id LIMIT ?"));
    q.Bind(1, prefix).Bind(2, prefix + "\x7f").Bind(3, static_cast<int64_t>(limit));
    std::vector<std::string> out;
    while (true) {
      TRACE_ASSIGN_OR_RETURN(bool row, db_->Step(q));
      if (!row) break;
      out.push_back(q.Text(0));
    }
    return out;
  }

  Result<StoreStats> Stats() override {
    StoreStats s;
    TRACE_ASSIGN_OR_RETURN(
        Stmt q, db_->Prepare("SELECT (SELECT count(*) FROM runs), (SELECT count(*) FROM events), "
                             "(SELECT count(*) FROM blobs), "
                             "(SELECT coalesce(sum(length(payload)),0) FROM events), "
                             "(SELECT coalesce(sum(length(data)),0) FROM blobs)"));
    TRACE_ASSIGN_OR_RETURN(bool row, db_->Step(q));
    if (row) {
      s.runs = q.Int(0);
      s.events = q.Int(1);
      s.blobs = q.Int(2);
      s.event_payload_bytes = q.Int(3);
      s.blob_bytes = q.Int(4);
    }
    std::error_code ec;
    for (const char* suffix : {"", "-wal"}) {
      auto n = std::filesystem::file_size(name() + suffix, ec);
      if (!ec) s.file_bytes += static_cast<int64_t>(n);
    }
    return s;
  }

 private:
  enum StmtId {
    kBlobDepth,
    kInsertBlob,
    kInsertRef,
    kInsertEvent,
    kUpdateRun,
    kReadBlob,
    kReadEvent,
    kNumStmts
  };

  std::string EventSelect() const {
    return std::string("SELECT seq, kind, wall_time_ns, encoding, payload, ") +
           (checksums() ? "checksum" : "NULL") + " FROM events WHERE run_id=?";
  }
  std::string RunSelect() const {
    return std::string("SELECT ") + kSqliteRunColumns + (checksums() ? ", checksum" : ", NULL") +
           " FROM runs";
  }

  // A cached statement, reset and ready to bind.
  Result<Stmt*> Get(StmtId id, const char* sql) {
    if (stmts_.empty()) stmts_.resize(kNumStmts);
    Stmt& s = stmts_[id];
    if (!s.get()) {
      TRACE_ASSIGN_OR_RETURN(s, db_->Prepare(sql));
    } else {
      s.Reset();
    }
    return &s;
  }

  std::unique_ptr<Db> db_;
  int schema_version_;
  bool sync_full_;
  std::vector<Stmt> stmts_;
};

}  // namespace

std::unique_ptr<RowConn> NewSqliteRowConn(std::unique_ptr<Db> db, int schema_version,
                                          bool sync_full) {
  return std::make_unique<SqliteRowConn>(std::move(db), schema_version, sync_full);
}

Db* SqliteDbOf(RowConn* conn) {
  auto* s = dynamic_cast<SqliteRowConn*>(conn);
  return s ? s->db() : nullptr;
}

}  // namespace trace::store
