// Row checksums of the trace store (docs/trace-format.md, "Integrity"): every events row
// and every runs row carries an XXH3-64 of all its other columns, written in the same
// statement as the row and checked whenever the row is read. A byte flipped anywhere in a
// row (key, counters, payload) is then an error naming the run and seq, never a changed
// or shortened run read back as fine.
//
// Ownership: pure functions over caller-owned values. Thread safety: reentrant. Errors:
// none (a mismatch is the caller's to report).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace trace::store {

// An events row: (run_id, seq, kind, wall_time_ns, encoding, payload).
uint64_t EventRowChecksum(std::string_view run_id, int64_t seq, int64_t kind, int64_t wall_time_ns,
                          int64_t encoding, std::string_view payload);

// Every column of a runs row but the checksum itself.
struct RunRow {
  std::string run_id;
  int64_t start_time_ns = 0;
  int64_t header_encoding = 0;
  std::string header;  // stored bytes (compressed when header_encoding says so)
  std::string command;
  std::string label;
  int64_t events = 0;
  int64_t model_calls = 0;
  int64_t sampled_tokens = 0;
  int64_t stored_bytes = 0;
  int64_t last_event_ns = 0;
  bool ended = false;  // end_time_ns .. signal are NULL when false
  int64_t end_time_ns = 0;
  int64_t end_how = 0;
  int64_t exit_code = 0;
  int64_t signal = 0;
};
uint64_t RunRowChecksum(const RunRow& row);

// SQLite stores 64-bit integers signed; a checksum keeps its bits.
inline int64_t ChecksumToSql(uint64_t c) {
  return static_cast<int64_t>(c);
}
inline uint64_t ChecksumFromSql(int64_t c) {
  return static_cast<uint64_t>(c);
}

}  // namespace trace::store
