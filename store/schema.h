// Opening the store file: the SQLite table layout, its version (kSchemaVersion in
// store/store.h), migrations from older layouts, and the rules that keep opening safe:
// a newer store is refused before anything is changed in it, readers never create or
// convert anything, and several processes creating the same new store at once all
// succeed (docs/trace-format.md, "Versioning" and "Opening").
//
// Ownership: OpenStoreDb returns a connection the caller owns and the settings to open
// further connections to the same file. Thread safety: reentrant; the returned Db is for
// one thread at a time. Errors: Status naming the file: NotFound (missing, not created),
// FailedPrecondition (empty or newer store, read-only and needing creation), Corruption
// (not a trace store), IOError (SQLite or the OS refused).
#pragma once

#include <memory>

#include "base/status.h"
#include "store/row_conn.h"
#include "store/sqlite_db.h"
#include "store/store.h"

namespace trace::store {

struct OpenedStore {
  std::unique_ptr<Db> db;
  DbConfig config;         // for further connections (iterators, writers)
  int schema_version = 0;  // kSchemaVersion, or older when opened read-only
};

// SQL: "WITH RECURSIVE live(sha256) AS (...)": every blob a run references, directly or
// as another live blob's base or dictionary. Append the statement that uses `live`.
extern const char* const kLiveBlobsCte;

Result<OpenedStore> OpenStoreDb(const std::string& path, const StoreOptions& options);

// Opens another connection with `config` (same settings as the first).
Result<std::unique_ptr<Db>> OpenConnection(const DbConfig& config, bool sync_full);

// The schema version in the meta table (0: a SQLite file without tables). Corruption
// when the file is not a trace store.
Result<int> ReadSchemaVersion(Db& db);

// FailedPrecondition: the store at `where` has schema `version`, newer than kSchemaVersion
// (both backends refuse it with this message before changing anything).
Status NewerSchemaError(const std::string& where, int version);

}  // namespace trace::store
