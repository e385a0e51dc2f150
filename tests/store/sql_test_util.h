// Runs raw SQL against a store file, as damage or another tool would (store tests only).
//
// Ownership: opens and closes its own connection. Thread safety: reentrant. Errors: a
// failing statement is a gtest failure naming the SQL.
#pragma once

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <string>

namespace trace::store::testing {

inline void Sql(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  char* err = nullptr;
  int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err);
  EXPECT_EQ(rc, SQLITE_OK) << (err ? err : "") << " in " << sql;
  sqlite3_free(err);
  sqlite3_close(db);
}

}  // namespace trace::store::testing
