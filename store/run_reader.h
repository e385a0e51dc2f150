// Reading a run's events back (store/store.h ReadEvents, ReadEvent): each row's checksum
// is checked before it is decoded, blobs and prompt prefixes are resolved, and the rows
// are checked to add up: seqs dense from 1, as many as the run's summary counts, the
// RunEnd last. A row that fails any check becomes an EventRecord with a Corruption status
// naming the run and seq (docs/trace-format.md, "Integrity"), so a damaged run is
// reported, never read back shortened or changed.
//
// Ownership: a RowDecoder borrows its RowConn; an iterator from ReadRunEvents owns its own.
// Thread safety: one thread at a time. Errors: as above; database errors end iteration
// with EventIterator::status().
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "proto/trace.pb.h"
#include "store/row_conn.h"
#include "store/store.h"

namespace trace::store {

// Decodes rows of one run through `conn`, caching blobs and prompts.
class RowDecoder {
 public:
  RowDecoder(RowConn* conn, std::string run_id)
      : conn_(conn), run_id_(std::move(run_id)), checksums_(conn->checksums()) {}

  // A blob's full content, base and dictionary resolved, size and SHA-256 checked.
  Result<std::shared_ptr<const std::string>> Blob(const std::string& sha, int depth = 0);
  // Reads, checks and decodes the row with this seq.
  Result<proto::Event> Event(uint64_t seq);
  // Checks a row read elsewhere (same columns) and decodes it.
  Result<proto::Event> CheckAndDecode(const EventRow& row);

 private:
  Result<proto::Event> Decode(uint64_t seq, std::string_view payload, int encoding);
  Result<std::shared_ptr<const std::vector<int32_t>>> Prompt(uint64_t seq);
  void Remember(const std::string& sha, std::shared_ptr<const std::string> content);

  static constexpr int kMaxBlobDepth = 1024;

  RowConn* conn_;
  std::string run_id_;
  bool checksums_;
  std::unordered_map<std::string, std::shared_ptr<const std::string>> blob_cache_;
  size_t cached_bytes_ = 0;
  std::unordered_map<uint64_t, std::shared_ptr<const std::vector<int32_t>>> prompt_cache_;
};

// The iterator behind Store::ReadEvents. `conn` is a connection of its own; the run's
// summary and its rows are read in one read transaction, so a run being recorded reads
// as a consistent prefix.
Result<std::unique_ptr<EventIterator>> ReadRunEvents(std::unique_ptr<RowConn> conn,
                                                     const std::string& run_id, uint64_t from_seq);

}  // namespace trace::store
