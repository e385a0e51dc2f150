// Running the store tests on either backend: a fixture whose Location(name) is a fresh
// store for the test — a file in a temporary folder (SQLite), or a new database on the
// test binary's one PostgreSQL server (tests/common/pg_server.h, started once per binary
// by the environment below). A test binary is built per backend from the same sources:
// TRACE_STORE_TEST_POSTGRES selects PostgreSQL (see tests/store/CMakeLists.txt).
//
// Ownership: the fixture owns its folder; the environment owns the server. Thread safety:
// gtest's. Errors: a server that cannot start fails every PostgreSQL test with the reason;
// missing server binaries skip them with a message saying what to install.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <cctype>
#include <map>
#include <string>

#include "testkit/pg_server.h"
#include "testkit/temp_dir.h"

namespace trace::store::testing {

enum class Backend { kSqlite, kPostgres };

inline ::trace::testing::PgServer*& SharedPgServer() {
  static ::trace::testing::PgServer* server = nullptr;
  return server;
}

class PgEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    SharedPgServer() = new ::trace::testing::PgServer;
    SharedPgServer()->Start();
  }
  void TearDown() override {
    delete SharedPgServer();
    SharedPgServer() = nullptr;
  }
};

class BackendTest : public ::testing::TestWithParam<Backend> {
 protected:
  void SetUp() override {
    if (GetParam() != Backend::kPostgres) return;
    auto* server = SharedPgServer();
    if (!server) GTEST_FAIL() << "no PostgreSQL environment in this test binary";
    if (server->skipped()) GTEST_SKIP() << server->error();
    if (server->url().empty()) GTEST_FAIL() << "PostgreSQL did not start: " << server->error();
  }

  bool postgres() const { return GetParam() == Backend::kPostgres; }

  // A new store: dir_/name, or a new database on the shared server (the same one for
  // the same name within a test).
  std::string Location(const std::string& name) {
    if (!postgres()) return dir_.file(name);
    if (auto it = databases_.find(name); it != databases_.end()) return it->second;
    static std::atomic<int> counter{0};
    std::string db = "t" + std::to_string(++counter);
    for (char c : name) {
      if (std::isalnum(static_cast<unsigned char>(c))) db += static_cast<char>(std::tolower(c));
    }
    std::string url = SharedPgServer()->NewDatabase(db);
    EXPECT_FALSE(url.empty()) << "CREATE DATABASE " << db << " failed";
    databases_[name] = url;
    return url;
  }

  ::trace::testing::TempDir dir_;
  std::map<std::string, std::string> databases_;
};

inline std::string BackendName(const ::testing::TestParamInfo<Backend>& info) {
  return info.param == Backend::kPostgres ? "Postgres" : "Sqlite";
}

}  // namespace trace::store::testing

// Declares fixture SUITE (a BackendTest) instantiated for this binary's backend.
#ifdef TRACE_STORE_TEST_POSTGRES
#define TRACE_BACKEND_SUITE(SUITE)                                                         \
  class SUITE : public ::trace::store::testing::BackendTest {};                            \
  INSTANTIATE_TEST_SUITE_P(Postgres, SUITE,                                                \
                           ::testing::Values(::trace::store::testing::Backend::kPostgres), \
                           ::trace::store::testing::BackendName)
#define TRACE_PG_ENVIRONMENT()                                                 \
  [[maybe_unused]] static ::testing::Environment* const trace_pg_environment = \
      ::testing::AddGlobalTestEnvironment(new ::trace::store::testing::PgEnvironment)
#else
#define TRACE_BACKEND_SUITE(SUITE)                                                       \
  class SUITE : public ::trace::store::testing::BackendTest {};                          \
  INSTANTIATE_TEST_SUITE_P(Sqlite, SUITE,                                                \
                           ::testing::Values(::trace::store::testing::Backend::kSqlite), \
                           ::trace::store::testing::BackendName)
#define TRACE_PG_ENVIRONMENT() static_assert(true)
#endif
