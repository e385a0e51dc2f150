// MergeTable: the BPE merge ranks, an open-addressing hash map from a merge pair (left id,
// right id) to its rank and the id of the merged token (internal to engine/tokenizer).
//
// Header-only on purpose: Find runs for every adjacent symbol pair in BpeTokenizer::Bpe,
// the innermost loop of Encode, and must inline there.
//
// Ownership: owns its slots (values, no pointers). Thread safety: Reserve and Insert while
// building (single-threaded); afterwards Find and ForEach are const and safe from many
// threads at once. Errors: none (Find returns nullptr for an unknown pair; Insert requires
// Reserve for at least as many entries first, or it never finds a free slot).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace trace::engine::internal {

class MergeTable {
 public:
  struct Entry {
    uint64_t key = kEmpty;
    int32_t rank = 0;
    int32_t merged_id = 0;
  };

  void Reserve(size_t n) {
    size_t cap = 16;
    while (cap < n * 2) cap <<= 1;
    slots_.assign(cap, Entry{});
    mask_ = cap - 1;
  }

  // Keeps the first (lowest-rank) entry for a duplicate pair.
  void Insert(int32_t left, int32_t right, int32_t rank, int32_t merged_id) {
    const uint64_t key = Key(left, right);
    for (size_t i = Hash(key) & mask_;; i = (i + 1) & mask_) {
      if (slots_[i].key == kEmpty) {
        slots_[i] = Entry{key, rank, merged_id};
        return;
      }
      if (slots_[i].key == key) return;
    }
  }

  // Calls fn(left, right, rank, merged_id) for every entry, in slot order.
  template <typename Fn>
  void ForEach(Fn&& fn) const {
    for (const Entry& e : slots_) {
      if (e.key == kEmpty) continue;
      fn(static_cast<int32_t>(e.key >> 32), static_cast<int32_t>(e.key & 0xFFFFFFFFu), e.rank,
         e.merged_id);
    }
  }

  const Entry* Find(int32_t left, int32_t right) const {
    const uint64_t key = Key(left, right);
    for (size_t i = Hash(key) & mask_;; i = (i + 1) & mask_) {
      const Entry& e = slots_[i];
      if (e.key == key) return &e;
      if (e.key == kEmpty) return nullptr;
    }
  }

 private:
  static constexpr uint64_t kEmpty = ~uint64_t{0};
  static uint64_t Key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
  static size_t Hash(uint64_t key) {
    key ^= key >> 29;
    key *= 0xBF58476D1CE4E5B9ull;
    key ^= key >> 32;
    return static_cast<size_t>(key);
  }

  std::vector<Entry> slots_;
  size_t mask_ = 0;
};

}  // namespace trace::engine::internal
