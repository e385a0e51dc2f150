// The SQLite trace store (store/store.h): the Store object. Layout and semantics:
// docs/trace-format.md. Opening: schema.cc; writing: run_writer.cc; reading events:
// run_reader.cc.
#include "store/store.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <mutex>

#include "base/process_identity.h"
#include "store/checksum.h"
#include "store/codec.h"
#include "store/run_reader.h"
#include "store/run_writer.h"
#include "store/schema.h"
#include "store/sqlite_db.h"

namespace trace::store {
namespace {

ProcessIdentity IdentityOf(const proto::RecorderProcess& p) {
  ProcessIdentity id;
  id.pid = p.pid();
  id.host = p.host();
  id.boot_id = p.boot_id();
  id.start_ticks = p.start_ticks();
  return id;
}

// Every column of the runs row, the checksum last (NULL in a version 1 store).
constexpr const char* kRunColumns =
    "run_id, start_time_ns, header_encoding, header, command, label, events, model_calls, "
    "sampled_tokens, stored_bytes, last_event_ns, end_time_ns, end_how, exit_code, signal";

RunRow RunRowFrom(const Stmt& q) {
  RunRow r;
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
  return r;
}

class StoreImpl final : public Store {
 public:
  StoreImpl(StoreOptions options, OpenedStore opened)
      : path_(opened.config.path),
        options_(options),
        config_(opened.config),
        schema_version_(opened.schema_version),
        db_(std::move(opened.db)) {}

  const std::string& path() const override { return path_; }
  int schema_version() const override { return schema_version_; }

  Result<std::unique_ptr<RunWriter>> BeginRun(proto::RunHeader header,
                                              const WriterOptions& options) override {
    if (options_.read_only) return FailedPrecondition(path_ + ": store is open read-only");
    if (header.run_id().empty()) {
      header.set_run_id(NewRunId());
    } else if (!IsValidRunId(header.run_id())) {
      return InvalidArgument("run id '" + header.run_id() + "' is not a ULID");
    }
    if (header.format_version() == 0) header.set_format_version(proto::CURRENT_FORMAT_VERSION);
    if (header.start_time_ns() == 0) header.set_start_time_ns(WallClockNs());
    if (!header.has_recorder()) {
      ProcessIdentity self = CurrentProcess();
      proto::RecorderProcess* r = header.mutable_recorder();
      r->set_pid(self.pid);
      r->set_host(self.host);
      r->set_boot_id(self.boot_id);
      r->set_start_ticks(self.start_ticks);
    }
    TRACE_ASSIGN_OR_RETURN(auto db, OpenConnection(config_, options_.sync_full));
    RunRow row = NewRunRow(header, options.zstd_level);
    TRACE_ASSIGN_OR_RETURN(
        Stmt ins,
        db->Prepare("INSERT INTO runs(run_id, start_time_ns, header_encoding, header, command, "
                    "label, stored_bytes, last_event_ns, checksum) VALUES(?,?,?,?,?,?,?,?,?)"));
    ins.Bind(1, row.run_id).Bind(2, row.start_time_ns).Bind(3, row.header_encoding);
    ins.BindBlob(4, row.header).Bind(5, row.command).Bind(6, row.label);
    ins.Bind(7, row.stored_bytes).Bind(8, row.last_event_ns);
    ins.Bind(9, ChecksumToSql(RunRowChecksum(row)));
    if (sqlite3_step(ins.get()) != SQLITE_DONE) {
      if (sqlite3_extended_errcode(db->get()) == SQLITE_CONSTRAINT_PRIMARYKEY) {
        return AlreadyExists("run " + header.run_id() + " already exists in " + path_);
      }
      return db->Error("creating run " + header.run_id());
    }
    ins = Stmt();
    return NewRunWriter(std::move(db), std::move(header), std::move(row), options);
  }

  Result<std::vector<RunSummary>> ListRuns(size_t limit) override {
    std::lock_guard<std::mutex> lock(mu_);
    std::string sql = SummarySelect() + " ORDER BY start_time_ns DESC, run_id DESC";
    if (limit > 0) sql += " LIMIT " + std::to_string(limit);
    TRACE_ASSIGN_OR_RETURN(Stmt q, db_->Prepare(sql.c_str()));
    std::vector<RunSummary> out;
    while (true) {
      TRACE_ASSIGN_OR_RETURN(bool row, db_->Step(q));
      if (!row) break;
      out.push_back(SummaryFromRow(q));
    }
    return out;
  }

  Result<RunSummary> GetRunSummary(const std::string& run_id) override {
    std::lock_guard<std::mutex> lock(mu_);
    TRACE_ASSIGN_OR_RETURN(RunSummary s, SummaryLocked(run_id));
    if (!s.problem.empty()) return Corruption(RunContext(run_id) + ": " + s.problem);
    return s;
  }

  Result<std::string> ResolveRunId(std::string_view id_or_prefix) override {
    std::string prefix(id_or_prefix);
    for (char& c : prefix) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    if (prefix.empty()) return InvalidArgument("empty run id");
    std::lock_guard<std::mutex> lock(mu_);
    TRACE_ASSIGN_OR_RETURN(Stmt q,
                           db_->Prepare("SELECT run_id FROM runs WHERE run_id >= ? AND run_id < ? "
                                        "ORDER BY run_id LIMIT 11"));
    q.Bind(1, prefix).Bind(2, prefix + "\x7f");
    std::vector<std::string> matches;
    while (true) {
      TRACE_ASSIGN_OR_RETURN(bool row, db_->Step(q));
      if (!row) break;
      matches.push_back(q.Text(0));
    }
    if (matches.empty()) return NoSuchRun(std::string(id_or_prefix));
    if (matches.size() == 1 || matches[0] == prefix) return matches[0];
    std::string list;
    for (size_t i = 0; i < matches.size() && i < 10; ++i) list += (i ? ", " : "") + matches[i];
    if (matches.size() > 10) list += ", ...";
    return InvalidArgument("run id prefix '" + std::string(id_or_prefix) + "' is ambiguous in " +
                           path_ + ": " + list);
  }

  Result<proto::RunHeader> LoadHeader(const std::string& run_id) override {
    std::lock_guard<std::mutex> lock(mu_);
    TRACE_ASSIGN_OR_RETURN(Stmt q, SelectRun(run_id));
    TRACE_ASSIGN_OR_RETURN(bool row, db_->Step(q));
    if (!row) return NoSuchRun(run_id);
    if (std::string problem = CheckRow(q); !problem.empty()) {
      return Corruption(RunContext(run_id) + ": " + problem);
    }
    return DecodeHeader(run_id, q);
  }

  Result<std::unique_ptr<EventIterator>> ReadEvents(const std::string& run_id,
                                                    uint64_t from_seq) override {
    TRACE_RETURN_IF_ERROR(GetRunSummary(run_id).status());
    TRACE_ASSIGN_OR_RETURN(auto db, OpenConnection(config_, options_.sync_full));
    return ReadRunEvents(std::move(db), run_id, from_seq, checksums());
  }

  Result<proto::Event> ReadEvent(const std::string& run_id, uint64_t seq) override {
    TRACE_RETURN_IF_ERROR(GetRunSummary(run_id).status());
    std::lock_guard<std::mutex> lock(mu_);
    RowDecoder decoder(db_.get(), run_id, checksums());
    return decoder.Event(seq);
  }

  Result<std::vector<proto::Event>> LoadEvents(const std::string& run_id) override {
    TRACE_ASSIGN_OR_RETURN(auto it, ReadEvents(run_id, 1));
    std::vector<proto::Event> out;
    EventRecord rec;
    while (it->Next(&rec)) {
      TRACE_RETURN_IF_ERROR(rec.status);
      out.push_back(std::move(rec.event));
    }
    TRACE_RETURN_IF_ERROR(it->status());
    return out;
  }

  Status DeleteRun(const std::string& run_id, const DeleteOptions& options) override {
    if (options_.read_only) return FailedPrecondition(path_ + ": store is open read-only");
    std::lock_guard<std::mutex> lock(mu_);
    if (!options.force) {
      TRACE_ASSIGN_OR_RETURN(RunSummary s, SummaryLocked(run_id));
      if (s.status == RunStatus::kRecording) {
        return FailedPrecondition(RunContext(run_id) + " is still being recorded (pid " +
                                  std::to_string(s.recorder_pid) + " on " + s.recorder_host +
                                  "); stop the recording first, or pass --force");
      }
      if (s.status == RunStatus::kIncomplete) {
        return FailedPrecondition(RunContext(run_id) + " has no RunEnd and its recorder" +
                                  (s.recorder_host.empty()
                                       ? std::string(" is unknown")
                                       : " (pid " + std::to_string(s.recorder_pid) + " on " +
                                             s.recorder_host + ") cannot be checked from here") +
                                  ": it may still be recording; pass --force if it is not");
      }
    }
    if (options.dry_run) return SummaryLocked(run_id).status();
    TRACE_RETURN_IF_ERROR(db_->Exec("BEGIN IMMEDIATE"));
    Status st = DeleteInTransaction(run_id);
    if (st.ok()) st = db_->Exec("COMMIT");
    if (!st.ok()) (void)db_->Exec("ROLLBACK");
    return st;
  }

  Result<StoreStats> Stats() override {
    std::lock_guard<std::mutex> lock(mu_);
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
      auto n = std::filesystem::file_size(path_ + suffix, ec);
      if (!ec) s.file_bytes += static_cast<int64_t>(n);
    }
    return s;
  }

 private:
  bool checksums() const { return schema_version_ >= 2; }

  std::string SummarySelect() const {
    return std::string("SELECT ") + kRunColumns + (checksums() ? ", checksum" : ", NULL") +
           " FROM runs";
  }

  Result<Stmt> SelectRun(const std::string& run_id) {
    std::string sql = SummarySelect() + " WHERE run_id=?";
    TRACE_ASSIGN_OR_RETURN(Stmt q, db_->Prepare(sql.c_str()));
    q.Bind(1, run_id);
    return q;
  }

  // Empty, or what is wrong with the runs row `q` is on (its checksum is column 15).
  std::string CheckRow(const Stmt& q) const {
    if (!checksums()) return "";
    if (!q.IsInt(15) || ChecksumFromSql(q.Int(15)) != RunRowChecksum(RunRowFrom(q))) {
      return "summary row checksum mismatch (the row was changed after it was written); run "
             "`trace fsck`";
    }
    return "";
  }

  Result<proto::RunHeader> DecodeHeader(const std::string& run_id, const Stmt& q) const {
    auto bytes = Decompress(q.Blob(3), static_cast<int>(q.Int(2)));
    proto::RunHeader header;
    if (!bytes.ok() || !header.ParseFromString(*bytes)) {
      return Corruption(RunContext(run_id) + ": header row does not decode" +
                        (bytes.ok() ? "" : " (" + bytes.status().message() + ")"));
    }
    return header;
  }

  Result<RunSummary> SummaryLocked(const std::string& run_id) {
    TRACE_ASSIGN_OR_RETURN(Stmt q, SelectRun(run_id));
    TRACE_ASSIGN_OR_RETURN(bool row, db_->Step(q));
    if (!row) return NoSuchRun(run_id);
    return SummaryFromRow(q);
  }

  RunSummary SummaryFromRow(const Stmt& q) const {
    const RunRow row = RunRowFrom(q);
    RunSummary s;
    s.run_id = row.run_id;
    s.start_time_ns = row.start_time_ns;
    s.command = row.command;
    s.label = row.label;
    s.events = row.events;
    s.model_calls = row.model_calls;
    s.sampled_tokens = row.sampled_tokens;
    s.stored_bytes = row.stored_bytes;
    s.last_event_ns = row.last_event_ns;
    s.end_time_ns = row.ended ? row.end_time_ns : 0;
    s.exit_code = static_cast<int32_t>(row.exit_code);
    s.signal = static_cast<int32_t>(row.signal);
    s.problem = CheckRow(q);
    auto header = DecodeHeader(s.run_id, q);
    if (header.ok() && header->has_recorder()) {
      s.recorder_pid = header->recorder().pid();
      s.recorder_host = header->recorder().host();
    }
    if (row.ended) {
      const int how = static_cast<int>(row.end_how);
      s.status = how == proto::RunEnd::SIGNALLED || how == proto::RunEnd::RECORDER_KILLED ||
                         how == proto::RunEnd::RECORDER_ERROR
                     ? RunStatus::kCrashed
                     : RunStatus::kComplete;
    } else if (!header.ok() || !header->has_recorder()) {
      s.status = RunStatus::kIncomplete;
    } else {
      switch (CheckLiveness(IdentityOf(header->recorder()))) {
        case Liveness::kAlive:
          s.status = RunStatus::kRecording;
          break;
        case Liveness::kGone:
          s.status = RunStatus::kCrashed;
          break;
        case Liveness::kUnknown:
          s.status = RunStatus::kIncomplete;
          break;
      }
    }
    return s;
  }

  std::string RunContext(const std::string& run_id) const {
    return "run " + run_id + " in " + path_;
  }

  Status NoSuchRun(const std::string& id) const {
    return NotFound("no run matches '" + id + "' in " + path_);
  }

  Status DeleteInTransaction(const std::string& run_id) {
    TRACE_ASSIGN_OR_RETURN(Stmt del_run, db_->Prepare("DELETE FROM runs WHERE run_id=?"));
    del_run.Bind(1, run_id);
    TRACE_RETURN_IF_ERROR(db_->Run(del_run));
    if (sqlite3_changes(db_->get()) == 0) return NoSuchRun(run_id);
    for (const char* sql :
         {"DELETE FROM events WHERE run_id=?", "DELETE FROM blob_refs WHERE run_id=?"}) {
      TRACE_ASSIGN_OR_RETURN(Stmt d, db_->Prepare(sql));
      d.Bind(1, run_id);
      TRACE_RETURN_IF_ERROR(db_->Run(d));
    }
    // Blobs live while a run references them or a live blob depends on them.
    const std::string sql = std::string(kLiveBlobsCte) +
                            "DELETE FROM blobs WHERE sha256 NOT IN (SELECT sha256 FROM live)";
    return db_->Exec(sql.c_str());
  }

  std::string path_;
  StoreOptions options_;
  DbConfig config_;
  int schema_version_;
  std::mutex mu_;  // guards db_
  std::unique_ptr<Db> db_;
};

}  // namespace

std::string_view RunStatusName(RunStatus status) {
  switch (status) {
    case RunStatus::kComplete:
      return "complete";
    case RunStatus::kRecording:
      return "recording";
    case RunStatus::kIncomplete:
      return "incomplete";
    case RunStatus::kCrashed:
      return "crashed";
  }
  return "unknown";
}

Result<std::unique_ptr<Store>> Store::Open(const std::string& path, const StoreOptions& options) {
  TRACE_ASSIGN_OR_RETURN(OpenedStore opened, OpenStoreDb(path, options));
  return std::unique_ptr<Store>(new StoreImpl(options, std::move(opened)));
}

}  // namespace trace::store
