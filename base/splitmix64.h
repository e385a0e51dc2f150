// SplitMix64 (Steele, Lea and Flood; the constants of Vigna's reference): the one portable,
// seedable 64-bit generator of trace. The standard library's distributions differ between
// implementations, so everything that must draw the same numbers on every machine from a
// seed uses this: the weights of `trace model init`, the kernels' self-test inputs, the seed
// of a call whose request had none (recorder/run_log.h DeriveCallSeed, which defines that
// part of the trace format on top of Mix), and the tests' and fuzz targets' inputs.
//
// Ownership: a plain value (64 bits of state). Thread safety: a generator belongs to one
// thread; Mix is a pure function. Errors: none.
#pragma once

#include <cstddef>
#include <cstdint>

namespace trace {

class SplitMix64 {
 public:
  // The increment of the state: 2^64 / the golden ratio, odd.
  static constexpr uint64_t kGamma = 0x9E3779B97F4A7C15ull;

  // The output function: a bijection of 64-bit values that spreads every input bit.
  static constexpr uint64_t Mix(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }

  constexpr explicit SplitMix64(uint64_t seed) : state_(seed) {}

  // The next value: the state moves on by kGamma and is mixed.
  constexpr uint64_t Next() { return Mix(state_ += kGamma); }

  // A value in [0, n) (Next() % n: biased by at most n / 2^64); 0 when n is 0.
  constexpr size_t Below(size_t n) { return n == 0 ? 0 : static_cast<size_t>(Next() % n); }

 private:
  uint64_t state_;
};

}  // namespace trace
