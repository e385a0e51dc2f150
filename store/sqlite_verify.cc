// The SQLite side of store/verify_queue.h: verdicts and jobs in the store file. A claim
// is a write transaction (BEGIN IMMEDIATE), so SQLite's one writer serialises the workers
// of this machine; leases are read on this machine's clock.
#include <sqlite3.h>

#include <chrono>
#include <memory>

#include "base/wall_clock.h"
#include "store/sqlite_db.h"
#include "store/store.h"
#include "store/verify_queue.h"
#include "store/verify_rows.h"

namespace trace::store {
namespace {

Verification VerificationFrom(const Stmt& q) {
  Verification v;
  v.id = q.Int(0);
  v.run_id = q.Text(1);
  v.batch_id = q.Text(2);
  v.verdict = q.Text(3);
  v.first_divergence = q.Text(4);
  v.report_json = q.Text(5);
  v.machine = q.Text(6);
  v.fingerprint_json = q.Text(7);
  v.build = q.Text(8);
  v.worker = q.Text(9);
  v.time_ns = q.Int(10);
  v.seconds = static_cast<double>(q.Int(11)) / 1e6;
  return v;
}

class SqliteVerifyQueue final : public VerifyQueue {
 public:
  SqliteVerifyQueue(std::unique_ptr<Db> db, int schema_version, bool read_only)
      : db_(std::move(db)),
        has_tables_(schema_version >= kVerifySchemaVersion),
        read_only_(read_only) {}

  Result<std::string> Enqueue(const std::vector<JobSpec>& jobs,
                              const std::string& description) override {
    TRACE_RETURN_IF_ERROR(Writable());
    const std::string batch = NewRunId();
    TRACE_RETURN_IF_ERROR(InWrite([&]() -> Status {
      TRACE_ASSIGN_OR_RETURN(Stmt b, db_->Prepare("INSERT INTO verify_batches(batch_id, "
                                                  "created_ns, description, total) "
                                                  "VALUES(?,?,?,?)"));
      b.Bind(1, batch).Bind(2, WallClockNs()).Bind(3, description).Bind(4, int64_t(jobs.size()));
      TRACE_RETURN_IF_ERROR(db_->Run(b));
      TRACE_ASSIGN_OR_RETURN(
          Stmt j, db_->Prepare("INSERT INTO verify_jobs(batch_id, run_id, model) VALUES(?,?,?)"));
      for (const JobSpec& spec : jobs) {
        j.Reset();
        j.Bind(1, batch).Bind(2, spec.run_id).Bind(3, spec.model);
        TRACE_RETURN_IF_ERROR(db_->Run(j));
      }
      return Status::Ok();
    }));
    return batch;
  }

  Result<std::optional<VerifyJob>> Claim(const ClaimOptions& o) override {
    TRACE_RETURN_IF_ERROR(Writable());
    std::optional<VerifyJob> job;
    TRACE_RETURN_IF_ERROR(InWrite([&]() -> Status {
      const int64_t now = WallClockNs();
      TRACE_ASSIGN_OR_RETURN(
          Stmt q, db_->Prepare("SELECT job_id, batch_id, run_id, model, attempts FROM verify_jobs "
                               "WHERE (state=0 OR (state=1 AND lease_until_ns<?1)) "
                               "AND (?2='' OR batch_id=?2) AND (?3='' OR model=?3) "
                               "ORDER BY model=?4 DESC, model, job_id LIMIT 1"));
      q.Bind(1, now).Bind(2, o.batch_id).Bind(3, o.model).Bind(4, o.prefer_model);
      TRACE_ASSIGN_OR_RETURN(bool row, db_->Step(q));
      if (!row) return Status::Ok();
      VerifyJob& j = job.emplace();
      j.job_id = q.Int(0);
      j.batch_id = q.Text(1);
      j.run_id = q.Text(2);
      j.model = q.Text(3);
      j.attempts = static_cast<int>(q.Int(4)) + 1;
      j.claim = NewRunId();
      TRACE_ASSIGN_OR_RETURN(Stmt u, db_->Prepare("UPDATE verify_jobs SET state=1, worker=?, "
                                                  "claim=?, lease_until_ns=?, "
                                                  "attempts=attempts+1 WHERE job_id=?"));
      u.Bind(1, o.worker).Bind(2, j.claim).Bind(3, now + o.lease_ms * 1000000).Bind(4, j.job_id);
      return db_->Run(u);
    }));
    return job;
  }

  Result<bool> Renew(const VerifyJob& job, int64_t lease_ms) override {
    TRACE_RETURN_IF_ERROR(Writable());
    TRACE_ASSIGN_OR_RETURN(Stmt u, db_->Prepare("UPDATE verify_jobs SET lease_until_ns=? "
                                                "WHERE job_id=? AND claim=? AND state=1"));
    u.Bind(1, WallClockNs() + lease_ms * 1000000).Bind(2, job.job_id).Bind(3, job.claim);
    TRACE_RETURN_IF_ERROR(db_->Run(u));
    return sqlite3_changes(db_->get()) == 1;
  }

  Result<bool> Finish(const VerifyJob& job, const Verification& v) override {
    TRACE_RETURN_IF_ERROR(Writable());
    bool held = false;
    TRACE_RETURN_IF_ERROR(InWrite([&]() -> Status {
      TRACE_ASSIGN_OR_RETURN(Stmt u, db_->Prepare("UPDATE verify_jobs SET state=2 "
                                                  "WHERE job_id=? AND claim=? AND state=1"));
      u.Bind(1, job.job_id).Bind(2, job.claim);
      TRACE_RETURN_IF_ERROR(db_->Run(u));
      held = sqlite3_changes(db_->get()) == 1;
      if (!held) return Status::Ok();
      TRACE_ASSIGN_OR_RETURN(
          Stmt ins,
          db_->Prepare("INSERT INTO verifications(run_id, batch_id, verdict, first_divergence, "
                       "report_json, machine, fingerprint_json, build, worker, time_ns, "
                       "seconds_us) VALUES(?,?,?,?,?,?,?,?,?,?,?)"));
      ins.Bind(1, v.run_id).Bind(2, job.batch_id).Bind(3, v.verdict).Bind(4, v.first_divergence);
      ins.Bind(5, v.report_json).Bind(6, v.machine).Bind(7, v.fingerprint_json).Bind(8, v.build);
      ins.Bind(9, v.worker).Bind(10, v.time_ns).Bind(11, SecondsToUs(v.seconds));
      TRACE_RETURN_IF_ERROR(db_->Run(ins));
      TRACE_ASSIGN_OR_RETURN(
          Stmt link, db_->Prepare("UPDATE verify_jobs SET verification_id=? WHERE job_id=?"));
      link.Bind(1, sqlite3_last_insert_rowid(db_->get())).Bind(2, job.job_id);
      return db_->Run(link);
    }));
    return held;
  }

  Status Release(const VerifyJob& job) override {
    TRACE_RETURN_IF_ERROR(Writable());
    TRACE_ASSIGN_OR_RETURN(Stmt u, db_->Prepare("UPDATE verify_jobs SET state=0, claim='', "
                                                "lease_until_ns=0 WHERE job_id=? AND claim=? "
                                                "AND state=1"));
    u.Bind(1, job.job_id).Bind(2, job.claim);
    return db_->Run(u);
  }

  Result<BatchProgress> Progress(const std::string& batch_id) override {
    if (!has_tables_) return NoSuchBatch(db_->path(), batch_id);
    TRACE_ASSIGN_OR_RETURN(Stmt b, db_->Prepare("SELECT created_ns, description, total FROM "
                                                "verify_batches WHERE batch_id=?"));
    b.Bind(1, batch_id);
    TRACE_ASSIGN_OR_RETURN(bool row, db_->Step(b));
    if (!row) return NoSuchBatch(db_->path(), batch_id);
    BatchProgress p;
    p.batch_id = batch_id;
    p.created_ns = b.Int(0);
    p.description = b.Text(1);
    p.total = b.Int(2);
    TRACE_ASSIGN_OR_RETURN(
        Stmt c,
        db_->Prepare("SELECT count(*) FILTER (WHERE state=0 OR (state=1 AND "
                     "lease_until_ns<?1)), count(*) FILTER (WHERE state=1 AND "
                     "lease_until_ns>=?1), count(*) FILTER (WHERE state=2), count(*) "
                     "FILTER (WHERE attempts>1), count(*) FROM verify_jobs WHERE batch_id=?2"));
    c.Bind(1, WallClockNs()).Bind(2, batch_id);
    TRACE_ASSIGN_OR_RETURN(row, db_->Step(c));
    p.queued = c.Int(0);
    p.claimed = c.Int(1);
    p.done = c.Int(2);
    p.reclaimed = c.Int(3);
    p.total = c.Int(4);  // the jobs left (a deleted run takes its job with it)
    return p;
  }

  Result<std::vector<Verification>> BatchResults(const std::string& batch_id) override {
    return Select(std::string("SELECT ") + kVerificationColumnsOfV +
                      " FROM verify_jobs j JOIN verifications v ON v.id=j.verification_id "
                      "WHERE j.batch_id=? ORDER BY j.job_id",
                  batch_id);
  }

  Result<std::vector<Verification>> RunVerifications(const std::string& run_id) override {
    return Select(std::string("SELECT ") + kVerificationColumns +
                      " FROM verifications WHERE run_id=? ORDER BY id DESC",
                  run_id);
  }

  Result<std::map<std::string, std::vector<Verification>>> LatestVerdicts() override {
    std::map<std::string, std::vector<Verification>> out;
    TRACE_ASSIGN_OR_RETURN(
        std::vector<Verification> rows,
        Select(std::string("SELECT ") + kVerificationColumns +
                   " FROM verifications WHERE id IN (SELECT max(id) FROM verifications GROUP "
                   "BY run_id, machine) ORDER BY run_id, machine",
               std::nullopt));
    for (Verification& v : rows) out[v.run_id].push_back(std::move(v));
    return out;
  }

 private:
  Status Writable() const {
    if (read_only_) return FailedPrecondition(db_->path() + ": store is open read-only");
    return Status::Ok();
  }

  // Runs `body` in a write transaction: committed when it succeeds, rolled back when not.
  template <class Body>
  Status InWrite(Body body) {
    TRACE_RETURN_IF_ERROR(db_->Exec("BEGIN IMMEDIATE"));
    Status st = body();
    if (st.ok()) st = db_->Exec("COMMIT");
    if (!st.ok()) (void)db_->Exec("ROLLBACK");
    return st;
  }

  Result<std::vector<Verification>> Select(const std::string& sql,
                                           const std::optional<std::string>& key) {
    std::vector<Verification> out;
    if (!has_tables_) return out;
    TRACE_ASSIGN_OR_RETURN(Stmt q, db_->Prepare(sql.c_str()));
    if (key) q.Bind(1, *key);
    while (true) {
      TRACE_ASSIGN_OR_RETURN(bool row, db_->Step(q));
      if (!row) break;
      out.push_back(VerificationFrom(q));
    }
    return out;
  }

  std::unique_ptr<Db> db_;
  bool has_tables_;
  bool read_only_;
};

}  // namespace

std::unique_ptr<VerifyQueue> NewSqliteVerifyQueue(std::unique_ptr<Db> db, int schema_version,
                                                  bool read_only) {
  return std::make_unique<SqliteVerifyQueue>(std::move(db), schema_version, read_only);
}

}  // namespace trace::store
