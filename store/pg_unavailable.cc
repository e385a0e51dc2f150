// The PostgreSQL backend in a build without libpq (TRACE_POSTGRES=OFF, store/CMakeLists.txt):
// a postgres:// store is refused with one line; SQLite stores work as in every build.
#include "store/pg_rows.h"

namespace trace::store {

Result<PgOpened> OpenPgStore(const StoreLocation& where, const StoreOptions& /*options*/) {
  return Unsupported(where.display +
                     ": this trace was built without PostgreSQL (TRACE_POSTGRES=OFF); use a "
                     "SQLite store file, or a build with libpq");
}

}  // namespace trace::store
