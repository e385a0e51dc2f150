// Where a store lives, from what the user gave (--store, $TRACE_STORE): a file path or a
// sqlite:// URL (a SQLite file), or a postgresql:// (postgres://) URL (a PostgreSQL
// database, libpq's URL syntax: postgresql://user[:password]@host[:port]/db[?param=v]).
//
// Ownership: values only. Thread safety: reentrant. Errors: InvalidArgument naming the
// location (an empty one, an unknown scheme, a sqlite:// URL without a path).
#pragma once

#include <string>
#include <string_view>

#include "base/status.h"

namespace trace::store {

enum class StoreBackend { kSqlite, kPostgres };

struct StoreLocation {
  StoreBackend backend = StoreBackend::kSqlite;
  std::string target;   // the file path, or the URL as libpq takes it
  std::string display;  // for messages: the path, or the URL without its password
};

Result<StoreLocation> ParseStoreLocation(std::string_view location);

// True for postgresql:// and postgres:// URLs.
bool IsPostgresUrl(std::string_view location);

}  // namespace trace::store
