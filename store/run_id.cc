// ULID run ids (store/store.h NewRunId).
#include <chrono>
#include <cstdint>
#include <mutex>
#include <random>
#include <string>
#include <string_view>

#include "store/store.h"

namespace trace::store {
namespace {
constexpr char kCrockford[] = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";
}  // namespace

std::string NewRunId() {
  static std::mutex mu;  // guards: last_ms, rand_hi, rand_lo, device
  static uint64_t last_ms = 0;
  static uint16_t rand_hi = 0;  // 16 high random bits
  static uint64_t rand_lo = 0;  // 64 low random bits
  static std::random_device device;
  std::lock_guard<std::mutex> lock(mu);
  uint64_t ms = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                          std::chrono::system_clock::now().time_since_epoch())
                                          .count());
  if (ms > last_ms) {
    last_ms = ms;
    rand_hi = static_cast<uint16_t>(device());
    rand_lo = (uint64_t{device()} << 32) | device();
  } else {
    // Same millisecond (or the clock went back): keep the order by incrementing.
    ms = last_ms;
    if (++rand_lo == 0) ++rand_hi;
  }
  // 128 bits: 48 ms | 16 rand_hi | 64 rand_lo, written as 26 base32 digits (130 bits).
  unsigned __int128 v = (static_cast<unsigned __int128>(ms) << 80) |
                        (static_cast<unsigned __int128>(rand_hi) << 64) | rand_lo;
  std::string id(26, '0');
  for (int i = 25; i >= 0; --i) {
    id[i] = kCrockford[static_cast<int>(v & 31)];
    v >>= 5;
  }
  return id;
}

bool IsValidRunId(std::string_view id) {
  if (id.size() != 26) return false;
  if (id[0] > '7') return false;  // 130 bits of digits hold 128 bits of value
  for (char c : id) {
    if (std::string_view(kCrockford).find(c) == std::string_view::npos) return false;
  }
  return true;
}

}  // namespace trace::store
