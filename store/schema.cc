#include "store/schema.h"
#include "base/escape.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <thread>

#include "store/checksum.h"

namespace trace::store {
namespace {

// Version 1: the first layout. Kept verbatim: a new store is created as version 1 and
// migrated, so the migration path runs every time a store is created.
constexpr const char* kSchemaV1 = R"sql(
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS runs(
  run_id TEXT PRIMARY KEY,
  start_time_ns INTEGER NOT NULL,
  header_encoding INTEGER NOT NULL,
  header BLOB NOT NULL,
  command TEXT NOT NULL,
  label TEXT NOT NULL,
  events INTEGER NOT NULL DEFAULT 0,
  model_calls INTEGER NOT NULL DEFAULT 0,
  sampled_tokens INTEGER NOT NULL DEFAULT 0,
  stored_bytes INTEGER NOT NULL DEFAULT 0,
  last_event_ns INTEGER NOT NULL,
  end_time_ns INTEGER,
  end_how INTEGER,
  exit_code INTEGER,
  signal INTEGER
);
CREATE INDEX IF NOT EXISTS runs_by_start ON runs(start_time_ns);
CREATE TABLE IF NOT EXISTS events(
  run_id TEXT NOT NULL,
  seq INTEGER NOT NULL,
  kind INTEGER NOT NULL,
  wall_time_ns INTEGER NOT NULL,
  encoding INTEGER NOT NULL,
  payload BLOB NOT NULL,
  PRIMARY KEY(run_id, seq)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS blobs(
  sha256 TEXT PRIMARY KEY,
  size INTEGER NOT NULL,
  base_sha256 TEXT,
  prefix_len INTEGER NOT NULL,
  dict_sha256 TEXT,
  depth INTEGER NOT NULL,
  encoding INTEGER NOT NULL,
  data BLOB NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS blob_refs(
  run_id TEXT NOT NULL,
  sha256 TEXT NOT NULL,
  PRIMARY KEY(run_id, sha256)
) WITHOUT ROWID;
)sql";

// Version 2: a checksum on every events and runs row (store/checksum.h), computed here
// for the rows an older trace wrote.
constexpr const char* kSchemaV1ToV2 = R"sql(
ALTER TABLE events ADD COLUMN checksum INTEGER;
ALTER TABLE runs ADD COLUMN checksum INTEGER;
UPDATE events SET checksum = trace_event_checksum(run_id, seq, kind, wall_time_ns, encoding,
                                                  payload);
UPDATE runs SET checksum = trace_run_checksum(run_id, start_time_ns, header_encoding, header,
    command, label, events, model_calls, sampled_tokens, stored_bytes, last_event_ns,
    end_time_ns, end_how, exit_code, signal);
)sql";

// Version 3: what `trace verify` keeps (store/verify_queue.h): the verdicts of replays,
// and the batches and jobs of its queue.
constexpr const char* kSchemaV2ToV3 = R"sql(
CREATE TABLE IF NOT EXISTS verifications(
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  run_id TEXT NOT NULL,
  batch_id TEXT NOT NULL,
  verdict TEXT NOT NULL,
  first_divergence TEXT NOT NULL,
  report_json TEXT NOT NULL,
  machine TEXT NOT NULL,
  fingerprint_json TEXT NOT NULL,
  build TEXT NOT NULL,
  worker TEXT NOT NULL,
  time_ns INTEGER NOT NULL,
  seconds_us INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS verifications_by_run ON verifications(run_id, machine, id);
CREATE TABLE IF NOT EXISTS verify_batches(
  batch_id TEXT PRIMARY KEY,
  created_ns INTEGER NOT NULL,
  description TEXT NOT NULL,
  total INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS verify_jobs(
  job_id INTEGER PRIMARY KEY AUTOINCREMENT,
  batch_id TEXT NOT NULL,
  run_id TEXT NOT NULL,
  model TEXT NOT NULL,
  state INTEGER NOT NULL DEFAULT 0,
  worker TEXT NOT NULL DEFAULT '',
  claim TEXT NOT NULL DEFAULT '',
  lease_until_ns INTEGER NOT NULL DEFAULT 0,
  attempts INTEGER NOT NULL DEFAULT 0,
  verification_id INTEGER
);
CREATE INDEX IF NOT EXISTS verify_jobs_open ON verify_jobs(state, model, job_id);
CREATE INDEX IF NOT EXISTS verify_jobs_by_batch ON verify_jobs(batch_id, job_id);
)sql";

std::string_view ArgBytes(sqlite3_value* v) {
  const void* p = sqlite3_value_blob(v);
  int n = sqlite3_value_bytes(v);
  return p ? std::string_view(static_cast<const char*>(p), static_cast<size_t>(n))
           : std::string_view();
}

void EventChecksumFn(sqlite3_context* ctx, int, sqlite3_value** a) {
  uint64_t c =
      EventRowChecksum(ArgBytes(a[0]), sqlite3_value_int64(a[1]), sqlite3_value_int64(a[2]),
                       sqlite3_value_int64(a[3]), sqlite3_value_int64(a[4]), ArgBytes(a[5]));
  sqlite3_result_int64(ctx, ChecksumToSql(c));
}

void RunChecksumFn(sqlite3_context* ctx, int, sqlite3_value** a) {
  RunRow r;
  r.run_id = std::string(ArgBytes(a[0]));
  r.start_time_ns = sqlite3_value_int64(a[1]);
  r.header_encoding = sqlite3_value_int64(a[2]);
  r.header = std::string(ArgBytes(a[3]));
  r.command = std::string(ArgBytes(a[4]));
  r.label = std::string(ArgBytes(a[5]));
  r.events = sqlite3_value_int64(a[6]);
  r.model_calls = sqlite3_value_int64(a[7]);
  r.sampled_tokens = sqlite3_value_int64(a[8]);
  r.stored_bytes = sqlite3_value_int64(a[9]);
  r.last_event_ns = sqlite3_value_int64(a[10]);
  r.ended = sqlite3_value_type(a[11]) != SQLITE_NULL;
  r.end_time_ns = sqlite3_value_int64(a[11]);
  r.end_how = sqlite3_value_int64(a[12]);
  r.exit_code = sqlite3_value_int64(a[13]);
  r.signal = sqlite3_value_int64(a[14]);
  sqlite3_result_int64(ctx, ChecksumToSql(RunRowChecksum(r)));
}

Status RegisterChecksumFunctions(Db& db) {
  const int flags = SQLITE_UTF8 | SQLITE_DETERMINISTIC;
  if (sqlite3_create_function_v2(db.get(), "trace_event_checksum", 6, flags, nullptr,
                                 EventChecksumFn, nullptr, nullptr, nullptr) != SQLITE_OK ||
      sqlite3_create_function_v2(db.get(), "trace_run_checksum", 15, flags, nullptr, RunChecksumFn,
                                 nullptr, nullptr, nullptr) != SQLITE_OK) {
    return db.Error("registering checksum functions");
  }
  return Status::Ok();
}

// Migrations from version v to v+1, indexed by v. Version 0 is a file without tables.
Status MigrateFrom(Db& db, int version) {
  switch (version) {
    case 0:
      return db.Exec(kSchemaV1);
    case 1:
      TRACE_RETURN_IF_ERROR(RegisterChecksumFunctions(db));
      return db.Exec(kSchemaV1ToV2);
    case 2:
      return db.Exec(kSchemaV2ToV3);
    default:
      return Internal(db.path() + ": no migration from schema version " + std::to_string(version));
  }
}

// One try at opening writable. `transient` is set when the failure was a lock held by
// another connection (the caller retries).
Result<OpenedStore> TryOpenWritable(const DbConfig& config, const StoreOptions& options,
                                    bool* transient) {
  *transient = false;
  OpenedStore out;
  out.config = config;
  TRACE_ASSIGN_OR_RETURN(out.db, Db::Open(config));
  Db& db = *out.db;
  auto failed = [&](Status st) {
    *transient = db.LastErrorIsTransient();
    return st;
  };
  // The version first, in whatever journal mode the file is: a newer store is refused
  // before anything (the WAL switch included) changes it.
  auto version = ReadSchemaVersion(db);
  if (!version.ok()) return failed(version.status());
  if (*version > kSchemaVersion) return NewerSchemaError(config.path, *version);
  {
    TRACE_ASSIGN_OR_RETURN(Stmt mode, db.Prepare("PRAGMA journal_mode"));
    auto row = db.Step(mode);
    if (!row.ok()) return failed(row.status());
    if (!*row || mode.Text(0) != "wal") {
      mode = Stmt();
      TRACE_ASSIGN_OR_RETURN(Stmt wal, db.Prepare("PRAGMA journal_mode=WAL"));
      auto set = db.Step(wal);
      if (!set.ok()) return failed(set.status());
      if (!*set || wal.Text(0) != "wal") {
        // Another connection kept it from switching; try again.
        *transient = true;
        return IOError(config.path + ": cannot switch the store to WAL mode (" +
                       (*set ? wal.Text(0) : std::string("no answer")) + ")");
      }
    }
  }
  if (*version < kSchemaVersion) {
    Status st = db.Exec("BEGIN IMMEDIATE");
    if (!st.ok()) return failed(st);
    // Another process may have created or migrated it meanwhile.
    auto again = ReadSchemaVersion(db);
    st = again.status();
    if (st.ok() && *again > kSchemaVersion) st = NewerSchemaError(config.path, *again);
    for (int v = st.ok() ? *again : kSchemaVersion; st.ok() && v < kSchemaVersion; ++v) {
      st = MigrateFrom(db, v);
      if (st.ok()) {
        std::string sql = "INSERT OR REPLACE INTO meta(key, value) VALUES('schema_version', '" +
                          std::to_string(v + 1) + "')";
        st = db.Exec(sql.c_str());
      }
    }
    if (st.ok()) st = db.Exec("COMMIT");
    if (!st.ok()) {
      bool was_transient = db.LastErrorIsTransient();
      (void)db.Exec("ROLLBACK");
      *transient = was_transient;
      return st;
    }
  }
  TRACE_RETURN_IF_ERROR(
      db.Exec(options.sync_full ? "PRAGMA synchronous=FULL" : "PRAGMA synchronous=NORMAL"));
  out.schema_version = kSchemaVersion;
  return out;
}

Result<OpenedStore> TryOpenReadOnly(const DbConfig& config, bool* transient) {
  *transient = false;
  OpenedStore out;
  out.config = config;
  TRACE_ASSIGN_OR_RETURN(out.db, Db::Open(config));
  auto version = ReadSchemaVersion(*out.db);
  if (!version.ok()) {
    *transient = out.db->LastErrorIsTransient();
    return version.status();
  }
  if (*version > kSchemaVersion) return NewerSchemaError(config.path, *version);
  if (*version == 0) return FailedPrecondition(config.path + ": not a trace store (no tables)");
  out.schema_version = *version;
  return out;
}

// Retries `attempt` while it fails on a lock another connection holds, with growing
// pauses, for at most `budget_ms`.
template <typename Attempt>
Result<OpenedStore> Retrying(int budget_ms, const std::string& path, Attempt attempt) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(budget_ms);
  int pause_ms = 1;
  for (;;) {
    bool transient = false;
    auto r = attempt(&transient);
    if (r.ok() || !transient) return r;
    if (std::chrono::steady_clock::now() >= deadline) {
      return r.status().WithContext("gave up after " + std::to_string(budget_ms / 1000) +
                                    " s waiting for another process (" + path + ")");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(pause_ms));
    pause_ms = std::min(pause_ms * 2, 100);
  }
}

bool DirectoryWritable(const std::string& path) {
  const std::string dir = std::filesystem::path(path).parent_path().string();
  return ::access(dir.empty() ? "." : dir.c_str(), W_OK) == 0;
}

}  // namespace

const char* const kLiveBlobsCte =
    "WITH RECURSIVE live(sha256) AS ("
    "  SELECT sha256 FROM blob_refs"
    "  UNION SELECT b.base_sha256 FROM blobs b JOIN live l ON b.sha256 = l.sha256"
    "  WHERE b.base_sha256 IS NOT NULL"
    "  UNION SELECT b.dict_sha256 FROM blobs b JOIN live l ON b.sha256 = l.sha256"
    "  WHERE b.dict_sha256 IS NOT NULL) ";

Result<int> ReadSchemaVersion(Db& db) {
  TRACE_ASSIGN_OR_RETURN(
      Stmt has_meta,
      db.Prepare("SELECT count(*) FROM sqlite_master WHERE type='table' AND name='meta'"));
  TRACE_ASSIGN_OR_RETURN(bool row, db.Step(has_meta));
  if (!row || has_meta.Int(0) == 0) {
    TRACE_ASSIGN_OR_RETURN(Stmt any, db.Prepare("SELECT count(*) FROM sqlite_master"));
    TRACE_ASSIGN_OR_RETURN(bool r2, db.Step(any));
    if (r2 && any.Int(0) != 0) {
      return Corruption(db.path() + ": not a trace store (a SQLite file with other tables)");
    }
    return 0;
  }
  TRACE_ASSIGN_OR_RETURN(Stmt q, db.Prepare("SELECT value FROM meta WHERE key='schema_version'"));
  TRACE_ASSIGN_OR_RETURN(bool has, db.Step(q));
  if (!has) return Corruption(db.path() + ": meta table has no schema_version");
  std::string v = q.Text(0);
  char* end = nullptr;
  errno = 0;
  long n = std::strtol(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || errno != 0 || n < 0 || n > 1'000'000) {
    return Corruption(db.path() + ": schema_version '" + EscapeForDisplay(v) + "' is not a number");
  }
  return static_cast<int>(n);
}

Result<std::unique_ptr<Db>> OpenConnection(const DbConfig& config, bool sync_full) {
  TRACE_ASSIGN_OR_RETURN(auto db, Db::Open(config));
  if (!config.read_only) {
    TRACE_RETURN_IF_ERROR(
        db->Exec(sync_full ? "PRAGMA synchronous=FULL" : "PRAGMA synchronous=NORMAL"));
  }
  return db;
}

Result<OpenedStore> OpenStoreDb(const std::string& path, const StoreOptions& options) {
  if (path.empty()) return InvalidArgument("empty store path");
  struct stat st {};
  bool exists = ::stat(path.c_str(), &st) == 0;
  if (!exists && errno != ENOENT) {
    return IOError(path + ": cannot open: " + std::strerror(errno));
  }
  if (exists && S_ISDIR(st.st_mode)) {
    return InvalidArgument(path + ": is a directory, not a store file");
  }
  if (exists && !S_ISREG(st.st_mode)) {
    return InvalidArgument(path +
                           ": is not a regular file (a device, pipe or socket), not a "
                           "store file");
  }
  if (exists && ::access(path.c_str(), R_OK) != 0) {
    const int err = errno;
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return IOError(path + ": cannot read the store: " + std::strerror(err) + " (mode " + mode +
                   ", owner uid " + std::to_string(st.st_uid) + ")");
  }
  if (exists && !options.read_only) {
    // Writing needs the store, its -wal and its -shm writable; SQLite would only say
    // "attempt to write a readonly database", and only at the first write.
    const std::string cause = ReadOnlyCause(path);
    if (!cause.empty()) return FailedPrecondition(path + ": cannot write the store: " + cause);
  }
  DbConfig config;
  config.path = path;
  config.read_only = options.read_only;
  config.busy_timeout_ms = options.busy_timeout_ms;
  // Opening waits at most this long for other processes, whatever busy_timeout says.
  const int budget_ms = std::max(options.busy_timeout_ms, 1000);

  if (options.read_only) {
    if (!exists) return NotFound(path + ": no such store file");
    // Nothing to read in an empty file; and opening it could create -wal/-shm files.
    if (st.st_size == 0) return FailedPrecondition(path + ": empty file, not a trace store");
    // In a directory we cannot write, SQLite cannot create the -shm file it needs to read
    // a WAL store; when no -wal exists either, nobody can be writing (a writer would need
    // that directory too), so the file is read as immutable, without locks.
    // The same for a store file nobody may write (no write bit: 0400, 0444): SQLite would
    // otherwise leave -wal and -shm files with the store's read-only mode beside it, and a
    // later writer (once the store is made writable again) could not use them.
    config.immutable = (!DirectoryWritable(path) || (st.st_mode & 0222) == 0) &&
                       ::access((path + "-wal").c_str(), F_OK) != 0;
    return Retrying(budget_ms, path,
                    [&](bool* transient) { return TryOpenReadOnly(config, transient); });
  }

  if (!exists) {
    if (!options.create_if_missing) return NotFound(path + ": no such store file");
    auto parent = std::filesystem::path(path).parent_path();
    if (!parent.empty()) {
      std::error_code ec;
      std::filesystem::create_directories(parent, ec);
      if (ec) return IOError(path + ": cannot create directory: " + ec.message());
    }
    // O_CREAT without O_EXCL: several processes may create the same store at once.
    int fd = ::open(path.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
    if (fd < 0) return IOError(path + ": cannot create: " + std::strerror(errno));
    ::close(fd);
  } else if (st.st_size == 0 && !options.create_if_missing) {
    return FailedPrecondition(path + ": empty file, not a trace store");
  }
  TRACE_ASSIGN_OR_RETURN(OpenedStore out, Retrying(budget_ms, path, [&](bool* transient) {
                           return TryOpenWritable(config, options, transient);
                         }));
  if (!exists) ::chmod(path.c_str(), 0600);
  return out;
}

Status NewerSchemaError(const std::string& where, int version) {
  return FailedPrecondition(where + ": store schema version " + std::to_string(version) +
                            " is newer than this trace build supports (" +
                            std::to_string(kSchemaVersion) + "); upgrade trace");
}

}  // namespace trace::store
