// What the two backends of store/verify_queue.h share: the columns of a verifications row
// in the order both read them, the conversions, the messages, and their factories
// (sqlite_verify.cc, pg_verify.cc), which the RowConn backends call.
//
// Ownership: the factories take the connection they are given. Thread safety: as
// VerifyQueue. Errors: as VerifyQueue.
#pragma once

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>

#include "base/escape.h"
#include "base/status.h"
#include "store/verify_queue.h"

namespace trace::store {

class Db;
class PgConn;

// The first schema version with the verify tables (store.h kSchemaVersion).
inline constexpr int kVerifySchemaVersion = 3;

inline constexpr const char* kVerificationColumns =
    "id, run_id, batch_id, verdict, first_divergence, report_json, machine, fingerprint_json, "
    "build, worker, time_ns, seconds_us";
inline constexpr const char* kVerificationColumnsOfV =
    "v.id, v.run_id, v.batch_id, v.verdict, v.first_divergence, v.report_json, v.machine, "
    "v.fingerprint_json, v.build, v.worker, v.time_ns, v.seconds_us";

// Durations are stored as whole microseconds (the same integer on both backends).
inline int64_t SecondsToUs(double seconds) {
  return std::isfinite(seconds) && seconds > 0 ? static_cast<int64_t>(std::llround(seconds * 1e6))
                                               : 0;
}

inline Status NoSuchBatch(const std::string& store, const std::string& batch_id) {
  return NotFound("no verify batch '" + EscapeForDisplay(batch_id) + "' in " + store);
}

std::unique_ptr<VerifyQueue> NewSqliteVerifyQueue(std::unique_ptr<Db> db, int schema_version,
                                                  bool read_only);
std::unique_ptr<VerifyQueue> NewPgVerifyQueue(std::unique_ptr<PgConn> conn, int schema_version,
                                              bool read_only);

}  // namespace trace::store
