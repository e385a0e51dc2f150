// The PostgreSQL backend of RowConn (store/row_conn.h): the store's rows in a PostgreSQL
// database (libpq), with the same tables, columns, checksums and semantics as the SQLite
// file (docs/trace-format.md, "PostgreSQL"): acknowledged events are committed
// (synchronous_commit on), blobs and prompt prefixes are shared, many writers on many
// hosts write at once, and a schema version in the meta table is checked when opening.
//
// Opening creates the tables when the database has none (unless read-only), under an
// advisory lock so that several processes creating them at once all succeed; a newer
// schema is refused before anything is changed. Writers hold a shared advisory lock per
// transaction, deleting a run an exclusive one, so that a blob a writer is about to
// reference cannot be freed under it.
//
// Ownership: OpenPgStore returns a connection the caller owns. Thread safety: as RowConn.
// Errors: one line naming the URL (without password): Unavailable "cannot connect: ..."
// (server unreachable, authentication refused), FailedPrecondition (newer schema, not a
// trace store, read-only and empty), NotFound (no store and create_if_missing false).
// Deadlocks, serialization failures and lock timeouts are Retry::kTransaction.
#pragma once

#include <memory>

#include "store/row_conn.h"
#include "store/store.h"
#include "store/store_location.h"

namespace trace::store {

struct PgOpened {
  std::unique_ptr<RowConn> conn;
  int schema_version = 0;
};

Result<PgOpened> OpenPgStore(const StoreLocation& where, const StoreOptions& options);

}  // namespace trace::store
