// The trace store: runs (a RunHeader and a stream of Events) in a SQLite file or a
// PostgreSQL database (docs/trace-format.md), the same rows on both, chosen by the location
// Store::Open is given (store_location.h: a path or sqlite:// URL, or a postgresql:// URL).
//
// Ownership: Store::Open returns a Store the caller owns; BeginRun returns a RunWriter and
// ReadEvents an EventIterator, each with its own database connection, so either may outlive
// the Store that made it. Thread safety: Store methods may be called from any thread; a
// RunWriter's methods are safe to call from several threads at once (the recorder's HTTP
// handlers append concurrently); an EventIterator is for one thread. Several processes
// (on PostgreSQL, several hosts) may open the same store, also while it is being created
// (SQLite's WAL: readers never block the writer). Errors: every call returns Status/Result
// with a one-line message naming the store (file path, or URL without its password), run id
// or sequence number concerned; nothing throws. A row that was changed after it was written
// (checksums), or a run whose rows do not add up to its count, is a Corruption error naming
// the run and seq, never a shortened or altered run.
//
// Implementation: store.cc (Store), run_writer.cc (RunWriter), run_reader.cc
// (EventIterator, row checks), all three over row_conn.h, whose two backends are
// sqlite_rows.cc (with schema.cc: opening, layout, migrations; sqlite_db.h: SQLite wrappers)
// and pg_rows.cc (with pg_conn.h: libpq wrappers); checksum.cc, codec.cc (row encoding),
// fsck.h (checking a whole SQLite store), copy.h (runs between stores).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "proto/trace.pb.h"

namespace trace::store {

class VerifyQueue;  // store/verify_queue.h

// Version of the SQLite table layout (meta table, key 'schema_version'). Bump when a
// table or column changes; add a migration from the previous version in schema.cc.
// A store with a newer version is refused before anything in it is changed; an older one
// is migrated when opened writable and read as it is when opened read-only.
// 1: the first layout. 2: a checksum column on events and runs rows. 3: the verdicts and
// job queue of `trace verify` (verifications, verify_batches, verify_jobs; verify_queue.h).
inline constexpr int kSchemaVersion = 3;

struct StoreOptions {
  bool create_if_missing = true;  // else a missing (or empty) file is an error
  // Open without creating, migrating or writing anything: every reading command. A store
  // in a directory nobody can write is read without locks (SQLite immutable).
  bool read_only = false;
  // Opening waits at most this long for other processes (e.g. one creating the store);
  // Store calls other than a RunWriter's wait this long for the write lock. A RunWriter
  // never gives up on a lock (see WriterOptions::lock_report_ms).
  int busy_timeout_ms = 10000;
  // synchronous=FULL: commits survive power loss, not only a process crash (slower).
  bool sync_full = false;
};

// How a RunWriter is doing, for the terminal (WriterOptions::on_health).
struct WriterHealth {
  enum class State {
    kOk,              // committing normally
    kWaitingForLock,  // another connection holds the write lock; retrying, nothing lost
    kFailed,          // the store cannot take writes (disk full, read-only, deleted run);
                      // final: later Appends fail with `status`
  };
  State state = State::kOk;
  Status status;              // kWaitingForLock: what blocks; kFailed: the failure
  int64_t waited_ms = 0;      // kWaitingForLock: for how long so far
  uint64_t durable_seq = 0;   // everything up to here is committed
  size_t pending_events = 0;  // appended but not committed
};

struct WriterOptions {
  // Events nobody waits for (WaitDurable) are committed at least this often; a waiter
  // has its event committed at once, together with everything else queued by then (group
  // commit: one transaction for whatever arrived while the previous one was written).
  int commit_interval_ms = 100;
  // Commit early when this many events are waiting.
  size_t max_batch_events = 8192;
  // Append blocks (backpressure) while this many events wait for the committer.
  size_t max_queued_events = 1 << 16;
  // Strings/bytes fields at least this long go to the content-addressed blob table.
  size_t blob_min_bytes = 256;
  // How many earlier LlmCall prompts (and large strings) of the run are searched for a
  // shared prefix.
  size_t history = 64;
  int zstd_level = 3;
  // A commit that finds the write lock held by another connection waits, retrying for as
  // long as it takes (a batch is never dropped); after this long it reports
  // kWaitingForLock, and kOk again once it got through.
  int lock_report_ms = 1000;
  // Called from the writer's committer thread whenever health() changes state. Must not
  // call back into the writer.
  std::function<void(const WriterHealth&)> on_health;
};

// Writes one run. Obtained from Store::BeginRun; the run row is committed before
// BeginRun returns, so the run is visible (as incomplete) from then on.
class RunWriter {
 public:
  virtual ~RunWriter() = default;  // commits what is queued; without End() the run stays
                                   // incomplete

  virtual const std::string& run_id() const = 0;

  // Queues `event`, assigning its seq (1, 2, 3, ... in call order across threads) and its
  // wall_time_ns when 0. Returns the seq. The event is durable once durable_seq() >= seq.
  // Fails after End(), and with Unavailable once the store cannot take writes
  // (WriterHealth::kFailed; the message names the store, the run and the cause).
  virtual Result<uint64_t> Append(proto::Event event) = 0;

  // Highest seq committed to the database (every event with a lower seq is committed too).
  // Committed means it survives the writing process being killed (SIGKILL); with
  // StoreOptions::sync_full also power loss.
  virtual uint64_t durable_seq() const = 0;
  // Commits now (group commit) and blocks until durable_seq() >= seq, or fails with
  // Unavailable when the store cannot take writes. Waits while another process holds
  // the write lock. "Acknowledge after WaitDurable" is how nothing acknowledged is lost.
  virtual Status WaitDurable(uint64_t seq) = 0;
  // Commits everything queued so far and waits for it.
  virtual Status Flush() = 0;

  virtual WriterHealth health() const = 0;

  // Replaces the header (run_id and start time are kept), e.g. once the agent's pid is
  // known. Committed with the next batch.
  virtual Status UpdateHeader(const proto::RunHeader& header) = 0;

  // Appends `end` as the final RunEnd event, commits and waits. Later Appends fail.
  virtual Result<uint64_t> End(proto::RunEnd end) = 0;
};

enum class RunStatus {
  kComplete,    // has a RunEnd: the agent exited (whatever its exit code)
  kRecording,   // no RunEnd, and the process writing it still runs (checked on this host)
  kIncomplete,  // no RunEnd, and whether its writer still runs cannot be told from here
                // (another host, or written before trace recorded its writer)
  kCrashed,     // a RunEnd saying the agent died of a signal or was killed, or no RunEnd
                // and the process that was writing it is gone
};
// "complete" | "recording" | "incomplete" | "crashed"
std::string_view RunStatusName(RunStatus status);
// The inverse of RunStatusName; nothing for another word.
std::optional<RunStatus> ParseRunStatus(std::string_view name);

// One row of `trace ls`.
struct RunSummary {
  std::string run_id;
  int64_t start_time_ns = 0;
  int64_t last_event_ns = 0;  // wall time of the last committed event (start if none)
  int64_t end_time_ns = 0;    // RunEnd's wall time; 0 without RunEnd
  std::string command;        // header argv joined by spaces
  std::string label;
  int64_t events = 0;
  int64_t model_calls = 0;
  int64_t sampled_tokens = 0;
  RunStatus status = RunStatus::kIncomplete;
  int32_t exit_code = 0;  // valid when a RunEnd says EXITED
  int32_t signal = 0;
  int64_t stored_bytes = 0;  // header + event payload bytes (blobs shared between runs
                             // are counted in every run that references them)
  // The process that wrote (or writes) the run, from its header; 0 / empty if unknown.
  int32_t recorder_pid = 0;
  std::string recorder_host;
  // A run made by `trace rerun`: the run it re-ran, "cassette" | "fork", and the first model
  // call whose request differed (0: none). Empty / 0 for other runs.
  std::string parent_run_id;
  std::string rerun_mode;
  uint64_t diverged_at_call = 0;
  // The model the run recorded (its header: the served name, else the architecture);
  // empty when it named none (a proxy run, an event-API-only run).
  std::string model;
  // Empty, or why this summary cannot be trusted (its row checksum does not match):
  // the other fields are then as stored, possibly damaged.
  std::string problem;
};

// A page of runs, filtered in the store (`trace ui`'s run list): what `trace ls` lists,
// a page at a time, so that a store of 100,000 runs answers its first page as fast as its
// tenth.
struct RunQuery {
  size_t limit = 50;  // runs on the page, 1 to kMaxRunPage
  bool oldest_first = false;
  // RunPage::next of the previous page; empty: the first page. InvalidArgument when it is
  // not one.
  std::string cursor;
  std::string label;              // the exact label; empty: any
  std::string text;               // a substring of the command or label (ASCII case folded)
  std::string model;              // a substring of RunSummary::model; empty: any
  std::vector<RunStatus> status;  // any of these; empty: any
  std::string parent_run_id;      // reruns and forks of this run; empty: any run
  int64_t started_from_ns = 0;    // runs that started at or after; 0: no bound
  int64_t started_before_ns = 0;  // runs that started before; 0: no bound
};
inline constexpr size_t kMaxRunPage = 1000;
// Filters that need each row decoded (model, status) look at no more than this many rows
// per page: a page that stops there is short, with `next` set, and scan_limited says so.
inline constexpr size_t kMaxRunPageScan = 20000;

// The cursor of the page that follows `run` (RunPage::next has this form).
std::string RunCursor(const RunSummary& run);

struct RunPage {
  std::vector<RunSummary> runs;
  std::string next;  // the cursor of the following page; empty: this is the last
  bool scan_limited = false;
};

struct DeleteOptions {
  // Delete a run even when it has no RunEnd and its recorder may still be writing it
  // (RunStatus kRecording or kIncomplete).
  bool force = false;
  // Only check: return what DeleteRun would (refusal or NotFound), deleting nothing.
  bool dry_run = false;
};

// One event read back, or the error that stopped it from decoding. A bad row does not
// end iteration: `status` names the run id and seq, and the next call moves on.
struct EventRecord {
  uint64_t seq = 0;
  Status status;
  proto::Event event;  // valid when status.ok()
  size_t stored_bytes = 0;
};

class EventIterator {
 public:
  virtual ~EventIterator() = default;
  // Reads the next event in seq order into *record; false at the end or on a database
  // error (then status() says why).
  virtual bool Next(EventRecord* record) = 0;
  virtual Status status() const = 0;
};

struct StoreStats {
  int64_t runs = 0;
  int64_t events = 0;
  int64_t blobs = 0;
  int64_t event_payload_bytes = 0;  // sum of stored event payload sizes
  int64_t blob_bytes = 0;           // sum of stored blob data sizes
  int64_t file_bytes = 0;           // the database file plus its WAL
};

class Store {
 public:
  virtual ~Store() = default;

  // Opens the store at `path`: a SQLite file (creating the parent directories and the file,
  // mode 0600) or, for a postgresql:// URL, a PostgreSQL database (creating its tables);
  // both as `options` allow.
  static Result<std::unique_ptr<Store>> Open(const std::string& path,
                                             const StoreOptions& options = {});

  virtual const std::string& path() const = 0;
  // kSchemaVersion, or an older version for a store opened read-only (read as it is;
  // rows of version 1 stores carry no checksums).
  virtual int schema_version() const = 0;

  // Starts a run. header.run_id empty: the store assigns a new ULID; else it must be a
  // valid ULID not in the store. format_version and start_time_ns are filled when 0,
  // header.recorder (this process: pid, host, boot id, start time) when unset.
  virtual Result<std::unique_ptr<RunWriter>> BeginRun(proto::RunHeader header,
                                                      const WriterOptions& options = {}) = 0;

  // Newest first; limit 0: all. A run whose summary row fails its checksum is listed with
  // RunSummary::problem set.
  virtual Result<std::vector<RunSummary>> ListRuns(size_t limit = 0) = 0;
  // One page of the runs `query` selects. InvalidArgument for a bad cursor or limit.
  virtual Result<RunPage> QueryRuns(const RunQuery& query) = 0;
  // Corruption when the run's summary row fails its checksum.
  virtual Result<RunSummary> GetRunSummary(const std::string& run_id) = 0;

  // A full id or a unique prefix (case-insensitive) -> the full id. Unknown: NotFound
  // "no run matches 'X' in STORE"; ambiguous: InvalidArgument listing the candidates.
  virtual Result<std::string> ResolveRunId(std::string_view id_or_prefix) = 0;

  virtual Result<proto::RunHeader> LoadHeader(const std::string& run_id) = 0;
  // Events of a run in seq order, starting at from_seq, with full prompt token ids. Every
  // row's checksum is checked, and the rows must add up: dense seqs, as many as the run
  // counts, the RunEnd last. A row that fails, or a gap, is an EventRecord with a
  // Corruption status (run id, seq, what), and iteration goes on.
  virtual Result<std::unique_ptr<EventIterator>> ReadEvents(const std::string& run_id,
                                                            uint64_t from_seq = 1) = 0;
  // One event; resolves its prompt-prefix reference through earlier events.
  virtual Result<proto::Event> ReadEvent(const std::string& run_id, uint64_t seq) = 0;
  // All events; fails at the first bad row or gap (naming it): never a shortened run.
  virtual Result<std::vector<proto::Event>> LoadEvents(const std::string& run_id) = 0;

  // Deletes the run, its events and the blobs no remaining run references. Refuses
  // (FailedPrecondition) a run without RunEnd whose recorder may still run, unless
  // options.force.
  virtual Status DeleteRun(const std::string& run_id, const DeleteOptions& options = {}) = 0;

  virtual Result<StoreStats> Stats() = 0;

  // The verdicts of `trace verify` and its job queue (store/verify_queue.h), on a
  // connection of their own.
  virtual Result<std::unique_ptr<VerifyQueue>> OpenVerifyQueue() = 0;
};

// A new time-ordered ULID: 48-bit Unix ms + 80 random bits, monotonic within a process.
std::string NewRunId();
// 26 Crockford base32 characters, upper case.
bool IsValidRunId(std::string_view id);

}  // namespace trace::store
