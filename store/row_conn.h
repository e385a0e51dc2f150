// One connection to a store's database as the backend-neutral store code sees it: the
// rows of the five tables (runs, events, blobs, blob_refs, meta; docs/trace-format.md) and
// transactions. The writer (run_writer.cc), the reader (run_reader.cc) and the Store
// (store.cc) are written against this interface once; sqlite_rows.cc and pg_rows.cc are
// its two backends (SQLite file, PostgreSQL server), each holding its own SQL.
//
// Ownership: the caller owns a RowConn; an EventCursor borrows the RowConn that made it
// and must be destroyed first. Thread safety: one thread at a time per RowConn; separate
// connections (NewConnection) may be used concurrently. Errors: Status with the store's
// name (file path, or URL without password) and what failed; retry() tells whether the
// last failure can be cured by waiting.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "store/checksum.h"
#include "store/store.h"
#include "store/verify_queue.h"

namespace trace::store {

// A blobs row. Empty base_sha256 / dict_sha256 stand for NULL.
struct BlobRow {
  std::string sha256;
  int64_t size = 0;
  std::string base_sha256;
  int64_t prefix_len = 0;
  std::string dict_sha256;
  int64_t depth = 0;
  int64_t encoding = 0;
  std::string data;
};

// An events row of one run.
struct EventRow {
  int64_t seq = 0;
  int64_t kind = 0;
  int64_t wall_time_ns = 0;
  int64_t encoding = 0;
  std::string payload;
  std::optional<uint64_t> checksum;  // absent: NULL (schema version 1)
};

// A runs row with its checksum.
struct StoredRunRow {
  RunRow row;
  std::optional<uint64_t> checksum;  // absent: NULL (schema version 1)
};

// What RowConn::ListRuns selects, in SQL on both backends (store.h RunQuery is this plus
// the filters only a decoded row can answer).
struct RunRowFilter {
  size_t limit = 0;  // 0: all
  bool oldest_first = false;
  // Keyset pagination: only rows after (after_start_ns, after_run_id) in the listing's
  // order; none when after_run_id is empty.
  int64_t after_start_ns = 0;
  std::string after_run_id;
  std::string label;              // the exact label; empty: any
  std::string text;               // a substring of the command or the label, any case
  int64_t started_from_ns = 0;    // start_time_ns >= this; 0: no bound
  int64_t started_before_ns = 0;  // start_time_ns < this; 0: no bound
};

// Events of one run in seq order (RowConn::ScanEvents).
class EventCursor {
 public:
  virtual ~EventCursor() = default;
  // The next row into *row: true, or false at the end.
  virtual Result<bool> Next(EventRow* row) = 0;
};

// How a failed call may be retried (RowConn::retry()).
enum class Retry {
  kNo,           // waiting will not help (disk full, server gone, bad data)
  kStatement,    // another connection holds a lock: the same call may be retried
  kTransaction,  // the transaction was aborted (deadlock, serialization, lock timeout):
                 // roll back and redo the whole transaction
};

class RowConn {
 public:
  virtual ~RowConn() = default;

  // The store as messages name it: a file path, or a URL without its password.
  virtual const std::string& name() const = 0;
  // The rows carry checksums (schema version 2 on).
  virtual bool checksums() const = 0;
  // How the last failed call may be retried.
  virtual Retry retry() const = 0;
  // Whether a transaction may fail with Retry::kTransaction (then the writer keeps a copy
  // of a batch to redo it).
  virtual bool aborts_transactions() const = 0;

  // Another connection to the same store with the same settings.
  virtual Result<std::unique_ptr<RowConn>> NewConnection() const = 0;
  // A lock held by another connection makes a call fail (retry() != kNo) after this long.
  virtual void SetLockWait(int ms) = 0;

  // A transaction that writes (holding what keeps deletions of blobs out, see DeleteRun),
  // one that only reads (a consistent snapshot), and their end.
  virtual Status BeginWrite() = 0;
  virtual Status BeginRead() = 0;
  virtual Status Commit() = 0;
  virtual void Rollback() = 0;

  // Writing (inside BeginWrite).
  virtual Result<std::optional<int64_t>> BlobDepth(const std::string& sha256) = 0;
  virtual Status InsertBlob(const BlobRow& blob) = 0;  // an existing sha256 is kept
  virtual Status InsertBlobRef(const std::string& run_id, const std::string& sha256) = 0;
  virtual Status InsertEvent(const std::string& run_id, const EventRow& row) = 0;
  // AlreadyExists when the run id is taken.
  virtual Status InsertRun(const RunRow& row) = 0;
  // Replaces the run's row (checksum computed from `row`); false when it is gone.
  virtual Result<bool> UpdateRun(const RunRow& row) = 0;
  // Deletes the run's rows and the blobs no remaining run needs, in a transaction of its
  // own (outside any other); NotFound without it.
  virtual Status DeleteRun(const std::string& run_id) = 0;

  // Reading.
  virtual Result<std::optional<BlobRow>> ReadBlob(const std::string& sha256) = 0;
  virtual Result<std::optional<EventRow>> ReadEvent(const std::string& run_id, int64_t seq) = 0;
  // Rows with seq >= from_seq in seq order (inside BeginRead for a consistent run).
  virtual Result<std::unique_ptr<EventCursor>> ScanEvents(const std::string& run_id,
                                                          int64_t from_seq) = 0;
  virtual Result<std::optional<StoredRunRow>> ReadRun(const std::string& run_id) = 0;
  // The run rows `filter` selects, in its order (start time, then run id); at most
  // filter.limit of them (0: all).
  virtual Result<std::vector<StoredRunRow>> ListRuns(const RunRowFilter& filter) = 0;
  // Up to `limit` run ids that start with `prefix` (upper case), in order.
  virtual Result<std::vector<std::string>> RunIdsWithPrefix(const std::string& prefix,
                                                            size_t limit) = 0;
  virtual Result<StoreStats> Stats() = 0;

  // A connection of its own to the verify tables (verify_queue.h), with the same settings.
  virtual Result<std::unique_ptr<VerifyQueue>> NewVerifyQueue() const = 0;
};

}  // namespace trace::store
