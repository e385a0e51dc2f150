// The PostgreSQL side of store/verify_queue.h: verdicts and jobs in the shared database.
// Workers on any number of machines claim jobs with `SELECT ... FOR UPDATE SKIP LOCKED`
// (a job another worker is claiming is skipped, never waited for), and leases are read on
// the server's clock, so the workers' clocks need not agree.
#include <memory>

#include "store/pg_conn.h"
#include "store/store.h"
#include "store/verify_queue.h"
#include "store/verify_rows.h"

namespace trace::store {
namespace {

// The server's wall clock in ns since the epoch.
constexpr const char* kNowNs = "(extract(epoch from clock_timestamp()) * 1000000000)::bigint";

Verification VerificationFrom(const PgResult& q, int i) {
  Verification v;
  v.id = q.Int(i, 0);
  v.run_id = std::string(q.Bytes(i, 1));
  v.batch_id = std::string(q.Bytes(i, 2));
  v.verdict = std::string(q.Bytes(i, 3));
  v.first_divergence = std::string(q.Bytes(i, 4));
  v.report_json = std::string(q.Bytes(i, 5));
  v.machine = std::string(q.Bytes(i, 6));
  v.fingerprint_json = std::string(q.Bytes(i, 7));
  v.build = std::string(q.Bytes(i, 8));
  v.worker = std::string(q.Bytes(i, 9));
  v.time_ns = q.Int(i, 10);
  v.seconds = static_cast<double>(q.Int(i, 11)) / 1e6;
  return v;
}

class PgVerifyQueue final : public VerifyQueue {
 public:
  PgVerifyQueue(std::unique_ptr<PgConn> conn, int schema_version, bool read_only)
      : conn_(std::move(conn)),
        has_tables_(schema_version >= kVerifySchemaVersion),
        read_only_(read_only) {}

  Result<std::string> Enqueue(const std::vector<JobSpec>& jobs,
                              const std::string& description) override {
    TRACE_RETURN_IF_ERROR(Writable());
    const std::string batch = NewRunId();
    TRACE_RETURN_IF_ERROR(InTransaction([&]() -> Status {
      TRACE_RETURN_IF_ERROR(
          conn_
              ->Query(std::string("INSERT INTO verify_batches(batch_id, created_ns, description, "
                                  "total) VALUES($1, ") +
                          kNowNs + ", $2, $3)",
                      PgParams().Text(batch).Text(description).Int(int64_t(jobs.size())))
              .status());
      for (const JobSpec& spec : jobs) {
        TRACE_RETURN_IF_ERROR(
            conn_->Queue("INSERT INTO verify_jobs(batch_id, run_id, model) VALUES($1,$2,$3)",
                         PgParams().Text(batch).Text(spec.run_id).Text(spec.model)));
      }
      return conn_->Send().status();
    }));
    return batch;
  }

  Result<std::optional<VerifyJob>> Claim(const ClaimOptions& o) override {
    TRACE_RETURN_IF_ERROR(Writable());
    const std::string claim = NewRunId();
    TRACE_ASSIGN_OR_RETURN(
        PgResult r,
        conn_->Query(std::string("UPDATE verify_jobs SET state=1, worker=$1, claim=$2, "
                                 "lease_until_ns=") +
                         kNowNs +
                         " + $3, attempts=attempts+1 WHERE job_id = (SELECT job_id FROM "
                         "verify_jobs WHERE (state=0 OR (state=1 AND lease_until_ns<" +
                         kNowNs +
                         ")) AND ($4='' OR batch_id=$4) AND ($5='' OR model=$5) ORDER BY "
                         "model=$6 DESC, model, job_id LIMIT 1 FOR UPDATE SKIP LOCKED) "
                         "RETURNING job_id, batch_id, run_id, model, attempts",
                     PgParams()
                         .Text(o.worker)
                         .Text(claim)
                         .Int(o.lease_ms * 1000000)
                         .Text(o.batch_id)
                         .Text(o.model)
                         .Text(o.prefer_model)));
    std::optional<VerifyJob> job;
    if (r.rows() == 0) return job;
    VerifyJob& j = job.emplace();
    j.job_id = r.Int(0, 0);
    j.batch_id = std::string(r.Bytes(0, 1));
    j.run_id = std::string(r.Bytes(0, 2));
    j.model = std::string(r.Bytes(0, 3));
    j.attempts = static_cast<int>(r.Int(0, 4));
    j.claim = claim;
    return job;
  }

  Result<bool> Renew(const VerifyJob& job, int64_t lease_ms) override {
    TRACE_RETURN_IF_ERROR(Writable());
    TRACE_ASSIGN_OR_RETURN(
        PgResult r,
        conn_->Query(std::string("UPDATE verify_jobs SET lease_until_ns=") + kNowNs +
                         " + $1 WHERE job_id=$2 AND claim=$3 AND state=1",
                     PgParams().Int(lease_ms * 1000000).Int(job.job_id).Text(job.claim)));
    return r.affected() == 1;
  }

  Result<bool> Finish(const VerifyJob& job, const Verification& v) override {
    TRACE_RETURN_IF_ERROR(Writable());
    bool held = false;
    TRACE_RETURN_IF_ERROR(InTransaction([&]() -> Status {
      TRACE_ASSIGN_OR_RETURN(
          PgResult u, conn_->Query("UPDATE verify_jobs SET state=2 WHERE job_id=$1 AND claim=$2 "
                                   "AND state=1",
                                   PgParams().Int(job.job_id).Text(job.claim)));
      held = u.affected() == 1;
      if (!held) return Status::Ok();
      PgParams p;
      p.Text(v.run_id).Text(job.batch_id).Text(v.verdict).Text(v.first_divergence);
      p.Text(v.report_json).Text(v.machine).Text(v.fingerprint_json).Text(v.build);
      p.Text(v.worker).Int(v.time_ns).Int(SecondsToUs(v.seconds));
      TRACE_ASSIGN_OR_RETURN(
          PgResult ins,
          conn_->Query("INSERT INTO verifications(run_id, batch_id, verdict, first_divergence, "
                       "report_json, machine, fingerprint_json, build, worker, time_ns, "
                       "seconds_us) VALUES($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11) RETURNING id",
                       p));
      return conn_
          ->Query("UPDATE verify_jobs SET verification_id=$1 WHERE job_id=$2",
                  PgParams().Int(ins.Int(0, 0)).Int(job.job_id))
          .status();
    }));
    return held;
  }

  Status Release(const VerifyJob& job) override {
    TRACE_RETURN_IF_ERROR(Writable());
    return conn_
        ->Query(
            "UPDATE verify_jobs SET state=0, claim='', lease_until_ns=0 WHERE job_id=$1 "
            "AND claim=$2 AND state=1",
            PgParams().Int(job.job_id).Text(job.claim))
        .status();
  }

  Result<BatchProgress> Progress(const std::string& batch_id) override {
    if (!has_tables_) return NoSuchBatch(conn_->display(), batch_id);
    TRACE_ASSIGN_OR_RETURN(PgResult b, conn_->Query("SELECT created_ns, description, total FROM "
                                                    "verify_batches WHERE batch_id=$1",
                                                    PgParams().Text(batch_id)));
    if (b.rows() == 0) return NoSuchBatch(conn_->display(), batch_id);
    BatchProgress p;
    p.batch_id = batch_id;
    p.created_ns = b.Int(0, 0);
    p.description = std::string(b.Bytes(0, 1));
    p.total = b.Int(0, 2);
    TRACE_ASSIGN_OR_RETURN(
        PgResult c,
        conn_->Query(
            std::string("SELECT count(*) FILTER (WHERE state=0 OR (state=1 AND "
                        "lease_until_ns<now_ns)), count(*) FILTER (WHERE state=1 AND "
                        "lease_until_ns>=now_ns), count(*) FILTER (WHERE state=2), "
                        "count(*) FILTER (WHERE attempts>1), count(*) FROM verify_jobs, (SELECT ") +
                kNowNs + " AS now_ns) t WHERE batch_id=$1",
            PgParams().Text(batch_id)));
    p.queued = c.Int(0, 0);
    p.claimed = c.Int(0, 1);
    p.done = c.Int(0, 2);
    p.reclaimed = c.Int(0, 3);
    p.total = c.Int(0, 4);  // the jobs left (a deleted run takes its job with it)
    return p;
  }

  Result<std::vector<Verification>> BatchResults(const std::string& batch_id) override {
    return Select(std::string("SELECT ") + kVerificationColumnsOfV +
                      " FROM verify_jobs j JOIN verifications v ON v.id=j.verification_id "
                      "WHERE j.batch_id=$1 ORDER BY j.job_id",
                  batch_id);
  }

  Result<std::vector<Verification>> RunVerifications(const std::string& run_id) override {
    return Select(std::string("SELECT ") + kVerificationColumns +
                      " FROM verifications WHERE run_id=$1 ORDER BY id DESC",
                  run_id);
  }

  Result<std::map<std::string, std::vector<Verification>>> LatestVerdicts() override {
    std::map<std::string, std::vector<Verification>> out;
    TRACE_ASSIGN_OR_RETURN(
        std::vector<Verification> rows,
        Select(std::string("SELECT DISTINCT ON (run_id, machine) ") + kVerificationColumns +
                   " FROM verifications ORDER BY run_id, machine, id DESC",
               std::nullopt));
    for (Verification& v : rows) out[v.run_id].push_back(std::move(v));
    return out;
  }

 private:
  Status Writable() const {
    if (read_only_) return FailedPrecondition(conn_->display() + ": store is open read-only");
    return Status::Ok();
  }

  template <class Body>
  Status InTransaction(Body body) {
    TRACE_RETURN_IF_ERROR(conn_->Exec("BEGIN"));
    Status st = body();
    if (st.ok()) st = conn_->Exec("COMMIT");
    if (!st.ok()) {
      (void)conn_->Send();  // a failed pipeline leaves nothing queued
      (void)conn_->Exec("ROLLBACK");
    }
    return st;
  }

  Result<std::vector<Verification>> Select(const std::string& sql,
                                           const std::optional<std::string>& key) {
    std::vector<Verification> out;
    if (!has_tables_) return out;
    PgParams params;
    if (key) params.Text(*key);
    TRACE_ASSIGN_OR_RETURN(PgResult r, conn_->Query(sql, params));
    for (int i = 0; i < r.rows(); ++i) out.push_back(VerificationFrom(r, i));
    return out;
  }

  std::unique_ptr<PgConn> conn_;
  bool has_tables_;
  bool read_only_;
};

}  // namespace

std::unique_ptr<VerifyQueue> NewPgVerifyQueue(std::unique_ptr<PgConn> conn, int schema_version,
                                              bool read_only) {
  return std::make_unique<PgVerifyQueue>(std::move(conn), schema_version, read_only);
}

}  // namespace trace::store
