// The RunWriter behind Store::BeginRun (store/store.h): a queue, a committer thread that
// writes what is queued in one transaction (group commit), encodes events into rows
// (codec.h: blobs, prompt prefixes, token columns) and keeps the run's summary row and its
// checksum (checksum.h) in step with the rows.
//
// Commit failures: a lock held by another connection is waited out and retried for as
// long as it takes (WriterHealth::kWaitingForLock; the batch stays whole; a transaction
// the database aborted, e.g. a PostgreSQL deadlock, is redone whole); anything else
// (disk full, file size limit, read-only file, server gone, the run deleted) fails the writer for
// good (kFailed): its waiters and later Appends get Unavailable naming the cause.
//
// Ownership: the writer owns its connection and thread. Thread safety: as RunWriter.
// Errors: as above.
#pragma once

#include "base/wall_clock.h"  // WallClockNs: what Append stamps, BeginRun starts a run at

#include <memory>

#include "store/checksum.h"
#include "store/row_conn.h"
#include "store/store.h"

namespace trace::store {

// The runs row BeginRun inserts for `header`: its columns from the header (stored zstd
// when smaller, argv joined as the command, the label), no events yet.
RunRow NewRunRow(const proto::RunHeader& header, int zstd_level);

// `conn`: a connection of its own; `row`: the runs row as BeginRun inserted it.
std::unique_ptr<RunWriter> NewRunWriter(std::unique_ptr<RowConn> conn, proto::RunHeader header,
                                        RunRow row, const WriterOptions& options);

}  // namespace trace::store
