// The SQLite backend of RowConn (store/row_conn.h): the store's rows in one SQLite file,
// through a Db (sqlite_db.h). Opening, layout and migrations: schema.h.
//
// Ownership: a SqliteRowConn owns its Db. Thread safety: as RowConn. Errors: as Db
// (the file path in every message); a lock held by another connection is Retry::kStatement.
#pragma once

#include <memory>

#include "store/row_conn.h"
#include "store/sqlite_db.h"

namespace trace::store {

// `db`: an open connection to a store of `schema_version`; `sync_full` for the
// connections NewConnection opens.
std::unique_ptr<RowConn> NewSqliteRowConn(std::unique_ptr<Db> db, int schema_version,
                                          bool sync_full);

// The Db behind a RowConn made by NewSqliteRowConn (fsck's raw queries); null otherwise.
Db* SqliteDbOf(RowConn* conn);

}  // namespace trace::store
