// The SQLite trace store: one file holding runs (a RunHeader and a stream of Events).
//
// Ownership: Store::Open returns a Store the caller owns; BeginRun returns a RunWriter and
// ReadEvents an EventIterator, each with its own SQLite connection, so either may outlive
// the Store that made it. Thread safety: Store methods may be called from any thread; a
// RunWriter's methods are safe to call from several threads at once (the recorder's HTTP
// handlers append concurrently); an EventIterator is for one thread. Several processes
// may open the same file (WAL: readers never block the writer). Errors: every call
// returns Status/Result with a one-line message naming the store file, run id or
// sequence number concerned; nothing throws.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "proto/trace.pb.h"

namespace trace::store {

// Version of the SQLite table layout (meta table, key 'schema_version'). Bump when a
// table or column changes; add a migration from the previous version in store.cc.
// A store with a newer version is refused; an older one is migrated on open.
inline constexpr int kSchemaVersion = 1;

struct StoreOptions {
  bool create_if_missing = true;  // else a missing file is NotFound
  bool read_only = false;         // open without creating, migrating or writing
  int busy_timeout_ms = 10000;    // wait this long for another writer's lock
  // synchronous=FULL: commits survive power loss, not only a process crash (slower).
  bool sync_full = false;
};

struct WriterOptions {
  // A batch of appended events is committed at least this often, and at once on RunEnd.
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
  // Fails after End() or after a commit error (the error names the run id).
  virtual Result<uint64_t> Append(proto::Event event) = 0;

  // Highest seq committed to the database (every event with a lower seq is committed too).
  // Committed means it survives the writing process being killed (SIGKILL); with
  // StoreOptions::sync_full also power loss.
  virtual uint64_t durable_seq() const = 0;
  // Blocks until durable_seq() >= seq or a commit fails.
  virtual Status WaitDurable(uint64_t seq) = 0;
  // Commits everything queued so far and waits for it.
  virtual Status Flush() = 0;

  // Replaces the header (run_id and start time are kept), e.g. once the agent's pid is
  // known. Committed with the next batch.
  virtual Status UpdateHeader(const proto::RunHeader& header) = 0;

  // Appends `end` as the final RunEnd event, commits and waits. Later Appends fail.
  virtual Result<uint64_t> End(proto::RunEnd end) = 0;
};

enum class RunStatus {
  kComplete,    // has a RunEnd: the agent exited (whatever its exit code)
  kIncomplete,  // no RunEnd: still being recorded, or the recorder died
  kCrashed,     // has a RunEnd saying the agent died of a signal or was killed
};
std::string_view RunStatusName(RunStatus status);  // "complete" | "incomplete" | "crashed"

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

  // Opens (creating the parent directories and the file, mode 0600) the store at `path`.
  static Result<std::unique_ptr<Store>> Open(const std::string& path,
                                             const StoreOptions& options = {});

  virtual const std::string& path() const = 0;

  // Starts a run. header.run_id empty: the store assigns a new ULID; else it must be a
  // valid ULID not in the store. format_version and start_time_ns are filled when 0.
  virtual Result<std::unique_ptr<RunWriter>> BeginRun(proto::RunHeader header,
                                                      const WriterOptions& options = {}) = 0;

  // Newest first; limit 0: all.
  virtual Result<std::vector<RunSummary>> ListRuns(size_t limit = 0) = 0;
  virtual Result<RunSummary> GetRunSummary(const std::string& run_id) = 0;

  // A full id or a unique prefix (case-insensitive) -> the full id. Unknown: NotFound
  // "no run matches 'X' in STORE"; ambiguous: InvalidArgument listing the candidates.
  virtual Result<std::string> ResolveRunId(std::string_view id_or_prefix) = 0;

  virtual Result<proto::RunHeader> LoadHeader(const std::string& run_id) = 0;
  // Events of a run in seq order, starting at from_seq, with full prompt token ids.
  virtual Result<std::unique_ptr<EventIterator>> ReadEvents(const std::string& run_id,
                                                            uint64_t from_seq = 1) = 0;
  // One event; resolves its prompt-prefix reference through earlier events.
  virtual Result<proto::Event> ReadEvent(const std::string& run_id, uint64_t seq) = 0;
  // All events; fails at the first bad row (naming it).
  virtual Result<std::vector<proto::Event>> LoadEvents(const std::string& run_id) = 0;

  // Deletes the run, its events and the blobs no remaining run references.
  virtual Status DeleteRun(const std::string& run_id) = 0;

  virtual Result<StoreStats> Stats() = 0;
};

// A new time-ordered ULID: 48-bit Unix ms + 80 random bits, monotonic within a process.
std::string NewRunId();
// 26 Crockford base32 characters, upper case.
bool IsValidRunId(std::string_view id);

}  // namespace trace::store
