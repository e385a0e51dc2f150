#include "store/checksum.h"

#include <xxhash.h>

#include <cstring>

namespace trace::store {
namespace {

// Streams length-prefixed fields into one XXH3-64 state, so that no two different rows
// serialise to the same bytes.
class Hasher {
 public:
  Hasher() : state_(XXH3_createState()) { XXH3_64bits_reset(state_); }
  ~Hasher() { XXH3_freeState(state_); }
  Hasher(const Hasher&) = delete;
  Hasher& operator=(const Hasher&) = delete;

  Hasher& Int(int64_t v) {
    unsigned char b[8];
    for (int i = 0; i < 8; ++i)
      b[i] = static_cast<unsigned char>(static_cast<uint64_t>(v) >> (8 * i));
    XXH3_64bits_update(state_, b, 8);
    return *this;
  }
  Hasher& Bytes(std::string_view s) {
    Int(static_cast<int64_t>(s.size()));
    XXH3_64bits_update(state_, s.data(), s.size());
    return *this;
  }
  uint64_t Digest() const { return XXH3_64bits_digest(state_); }

 private:
  XXH3_state_t* state_;
};

}  // namespace

uint64_t EventRowChecksum(std::string_view run_id, int64_t seq, int64_t kind, int64_t wall_time_ns,
                          int64_t encoding, std::string_view payload) {
  Hasher h;
  h.Bytes("trace-event-row-v1").Bytes(run_id).Int(seq).Int(kind).Int(wall_time_ns);
  h.Int(encoding).Bytes(payload);
  return h.Digest();
}

uint64_t RunRowChecksum(const RunRow& r) {
  Hasher h;
  h.Bytes("trace-run-row-v1").Bytes(r.run_id).Int(r.start_time_ns).Int(r.header_encoding);
  h.Bytes(r.header).Bytes(r.command).Bytes(r.label).Int(r.events).Int(r.model_calls);
  h.Int(r.sampled_tokens).Int(r.stored_bytes).Int(r.last_event_ns).Int(r.ended ? 1 : 0);
  if (r.ended) h.Int(r.end_time_ns).Int(r.end_how).Int(r.exit_code).Int(r.signal);
  return h.Digest();
}

}  // namespace trace::store
