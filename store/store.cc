// The SQLite trace store (store/store.h): the Store object. Layout and semantics:
// docs/trace-format.md. Opening: schema.cc; writing: run_writer.cc; reading events:
// run_reader.cc.
#include "store/store.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <mutex>

#include "base/escape.h"
#include "base/process_identity.h"
#include "store/checksum.h"
#include "store/codec.h"
#include "store/pg_rows.h"
#include "store/run_reader.h"
#include "store/run_writer.h"
#include "store/schema.h"
#include "store/sqlite_rows.h"
#include "store/store_location.h"

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

// A page cursor: the last run's start time and id, "START_NS.RUN_ID".
std::string CursorOf(int64_t start_time_ns, const std::string& run_id) {
  return std::to_string(start_time_ns) + "." + run_id;
}
std::string CursorOf(const RunSummary& run) {
  return CursorOf(run.start_time_ns, run.run_id);
}

Status ParseCursor(const std::string& cursor, int64_t* start_ns, std::string* run_id) {
  const size_t dot = cursor.find('.');
  const auto bad = [&cursor] {
    return InvalidArgument("page cursor '" + EscapeForDisplay(cursor, 60) +
                           "' is not one a page of runs returned (START_NS.RUN_ID)");
  };
  if (dot == std::string::npos || dot == 0 || dot > 19) return bad();
  int64_t ns = 0;
  for (size_t i = 0; i < dot; ++i) {
    if (cursor[i] < '0' || cursor[i] > '9') return bad();
    ns = ns * 10 + (cursor[i] - '0');
  }
  std::string id = cursor.substr(dot + 1);
  if (!IsValidRunId(id)) return bad();
  *start_ns = ns;
  *run_id = std::move(id);
  return Status::Ok();
}

class StoreImpl final : public Store {
 public:
  StoreImpl(StoreOptions options, std::unique_ptr<RowConn> conn, int schema_version)
      : path_(conn->name()),
        options_(options),
        schema_version_(schema_version),
        db_(std::move(conn)) {}

  const std::string& path() const override { return path_; }
  int schema_version() const override { return schema_version_; }

  Result<std::unique_ptr<RunWriter>> BeginRun(proto::RunHeader header,
                                              const WriterOptions& options) override {
    if (options_.read_only) return FailedPrecondition(path_ + ": store is open read-only");
    if (header.run_id().empty()) {
      header.set_run_id(NewRunId());
    } else if (!IsValidRunId(header.run_id())) {
      return InvalidArgument("run id '" + EscapeForDisplay(header.run_id()) + "' is not a ULID");
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
    TRACE_ASSIGN_OR_RETURN(auto conn, db_->NewConnection());
    RunRow row = NewRunRow(header, options.zstd_level);
    TRACE_RETURN_IF_ERROR(conn->InsertRun(row));
    return NewRunWriter(std::move(conn), std::move(header), std::move(row), options);
  }

  Result<std::vector<RunSummary>> ListRuns(size_t limit) override {
    std::lock_guard<std::mutex> lock(mu_);
    RunRowFilter all;
    all.limit = limit;
    TRACE_ASSIGN_OR_RETURN(std::vector<StoredRunRow> rows, db_->ListRuns(all));
    std::vector<RunSummary> out;
    out.reserve(rows.size());
    for (const StoredRunRow& row : rows) out.push_back(SummaryFromRow(row));
    return out;
  }

  Result<RunPage> QueryRuns(const RunQuery& q) override {
    if (q.limit == 0 || q.limit > kMaxRunPage) {
      return InvalidArgument("a page of runs holds 1 to " + std::to_string(kMaxRunPage) +
                             " runs, not " + std::to_string(q.limit));
    }
    RunRowFilter f;
    f.oldest_first = q.oldest_first;
    f.label = q.label;
    f.text = q.text;
    f.started_from_ns = q.started_from_ns;
    f.started_before_ns = q.started_before_ns;
    if (!q.cursor.empty()) {
      TRACE_RETURN_IF_ERROR(ParseCursor(q.cursor, &f.after_start_ns, &f.after_run_id));
    }
    const bool decoded_filters = !q.model.empty() || !q.status.empty() || !q.parent_run_id.empty();
    // One row more than the page shows whether another page follows; rows that decoded
    // filters may drop are read in larger steps.
    f.limit = decoded_filters ? std::max<size_t>(4 * q.limit, 256) : q.limit + 1;
    RunPage page;
    size_t scanned = 0;
    std::lock_guard<std::mutex> lock(mu_);
    while (true) {
      TRACE_ASSIGN_OR_RETURN(std::vector<StoredRunRow> rows, db_->ListRuns(f));
      for (const StoredRunRow& row : rows) {
        ++scanned;
        RunSummary s = SummaryFromRow(row);
        const bool wanted = (q.model.empty() || s.model.find(q.model) != std::string::npos) &&
                            (q.parent_run_id.empty() || s.parent_run_id == q.parent_run_id) &&
                            (q.status.empty() || std::find(q.status.begin(), q.status.end(),
                                                           s.status) != q.status.end());
        if (wanted) {
          if (page.runs.size() == q.limit) {  // one more exists: the page is full
            page.next = CursorOf(page.runs.back());
            return page;
          }
          page.runs.push_back(std::move(s));
        }
        if (scanned >= kMaxRunPageScan && decoded_filters) {
          page.scan_limited = true;
          page.next = CursorOf(row.row.start_time_ns, row.row.run_id);
          return page;
        }
      }
      if (rows.size() < f.limit) return page;  // the end of the store
      f.after_start_ns = rows.back().row.start_time_ns;
      f.after_run_id = rows.back().row.run_id;
    }
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
    TRACE_ASSIGN_OR_RETURN(std::vector<std::string> matches, db_->RunIdsWithPrefix(prefix, 11));
    if (matches.empty()) return NoSuchRun(std::string(id_or_prefix));
    if (matches.size() == 1 || matches[0] == prefix) return matches[0];
    std::string list;
    for (size_t i = 0; i < matches.size() && i < 10; ++i) {
      list += (i ? ", " : "") + EscapeForDisplay(matches[i]);
    }
    if (matches.size() > 10) list += ", ...";
    return InvalidArgument("run id prefix '" + EscapeForDisplay(id_or_prefix) +
                           "' is ambiguous in " + path_ + ": " + list);
  }

  Result<proto::RunHeader> LoadHeader(const std::string& run_id) override {
    std::lock_guard<std::mutex> lock(mu_);
    TRACE_ASSIGN_OR_RETURN(std::optional<StoredRunRow> row, db_->ReadRun(run_id));
    if (!row) return NoSuchRun(run_id);
    if (std::string problem = CheckRow(*row); !problem.empty()) {
      return Corruption(RunContext(run_id) + ": " + problem);
    }
    return DecodeHeader(run_id, row->row);
  }

  Result<std::unique_ptr<EventIterator>> ReadEvents(const std::string& run_id,
                                                    uint64_t from_seq) override {
    TRACE_RETURN_IF_ERROR(GetRunSummary(run_id).status());
    TRACE_ASSIGN_OR_RETURN(auto conn, db_->NewConnection());
    return ReadRunEvents(std::move(conn), run_id, from_seq);
  }

  Result<proto::Event> ReadEvent(const std::string& run_id, uint64_t seq) override {
    TRACE_RETURN_IF_ERROR(GetRunSummary(run_id).status());
    std::lock_guard<std::mutex> lock(mu_);
    RowDecoder decoder(db_.get(), run_id);
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
    return db_->DeleteRun(run_id);
  }

  Result<std::unique_ptr<VerifyQueue>> OpenVerifyQueue() override { return db_->NewVerifyQueue(); }

  Result<StoreStats> Stats() override {
    std::lock_guard<std::mutex> lock(mu_);
    return db_->Stats();
  }

 private:
  bool checksums() const { return schema_version_ >= 2; }

  // Empty, or what is wrong with the runs row (its checksum).
  std::string CheckRow(const StoredRunRow& r) const {
    if (!checksums()) return "";
    if (r.checksum != RunRowChecksum(r.row)) {
      return "summary row checksum mismatch (the row was changed after it was written); run "
             "`trace fsck`";
    }
    return "";
  }

  Result<proto::RunHeader> DecodeHeader(const std::string& run_id, const RunRow& row) const {
    auto bytes = Decompress(row.header, static_cast<int>(row.header_encoding));
    proto::RunHeader header;
    if (!bytes.ok() || !header.ParseFromString(*bytes)) {
      return Corruption(RunContext(run_id) + ": header row does not decode" +
                        (bytes.ok() ? "" : " (" + bytes.status().message() + ")"));
    }
    return header;
  }

  Result<RunSummary> SummaryLocked(const std::string& run_id) {
    TRACE_ASSIGN_OR_RETURN(std::optional<StoredRunRow> row, db_->ReadRun(run_id));
    if (!row) return NoSuchRun(run_id);
    return SummaryFromRow(*row);
  }

  RunSummary SummaryFromRow(const StoredRunRow& stored) const {
    const RunRow& row = stored.row;
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
    s.problem = CheckRow(stored);
    auto header = DecodeHeader(s.run_id, row);
    if (header.ok() && header->has_recorder()) {
      s.recorder_pid = header->recorder().pid();
      s.recorder_host = header->recorder().host();
    }
    if (header.ok()) {
      s.model = !header->model().model_name().empty() ? header->model().model_name()
                                                      : header->model().architecture();
    }
    if (header.ok() && header->has_rerun()) {
      s.parent_run_id = header->rerun().parent_run_id();
      s.rerun_mode = header->rerun().mode();
      s.diverged_at_call = header->rerun().diverged_at_call();
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
    return "run " + EscapeForDisplay(run_id) + " in " + path_;
  }

  Status NoSuchRun(const std::string& id) const {
    return NotFound("no run matches '" + EscapeForDisplay(id) + "' in " + path_);
  }

  std::string path_;
  StoreOptions options_;
  int schema_version_;
  std::mutex mu_;  // guards: db_
  std::unique_ptr<RowConn> db_;
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

std::string RunCursor(const RunSummary& run) {
  return CursorOf(run);
}

std::optional<RunStatus> ParseRunStatus(std::string_view name) {
  for (RunStatus s :
       {RunStatus::kComplete, RunStatus::kRecording, RunStatus::kIncomplete, RunStatus::kCrashed}) {
    if (RunStatusName(s) == name) return s;
  }
  return std::nullopt;
}

Result<std::unique_ptr<Store>> Store::Open(const std::string& location,
                                           const StoreOptions& options) {
  TRACE_ASSIGN_OR_RETURN(StoreLocation where, ParseStoreLocation(location));
  std::unique_ptr<RowConn> conn;
  int version = 0;
  if (where.backend == StoreBackend::kPostgres) {
    TRACE_ASSIGN_OR_RETURN(PgOpened opened, OpenPgStore(where, options));
    conn = std::move(opened.conn);
    version = opened.schema_version;
  } else {
    TRACE_ASSIGN_OR_RETURN(OpenedStore opened, OpenStoreDb(where.target, options));
    version = opened.schema_version;
    conn = NewSqliteRowConn(std::move(opened.db), version, options.sync_full);
  }
  return std::unique_ptr<Store>(new StoreImpl(options, std::move(conn), version));
}

}  // namespace trace::store
