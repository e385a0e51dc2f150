// PieceCache: pre-token -> ids, the BPE result of each short piece Encode has seen
// (internal to engine/tokenizer).
//
// Header-only on purpose: Get and Put run for every pre-token in
// BpeTokenizer::EncodePiece and should inline there.
//
// Ownership: owns copies of the pieces and their ids. Thread safety: Get and Put are const
// and safe from many threads at once: the map is sharded by the piece's hash, each shard
// behind its own mutex, so concurrent Encode calls rarely contend. Memory is bounded: a
// shard that reaches kMaxPerShard entries is cleared. Errors: none (Get returns false on a
// miss).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace trace::engine::internal {

class PieceCache {
 public:
  bool Get(std::string_view piece, size_t hash, std::vector<int32_t>* ids) const {
    Shard& shard = shards_[hash % kShards];
    std::lock_guard<std::mutex> lock(shard.mu);
    auto it = shard.map.find(piece);
    if (it == shard.map.end()) return false;
    ids->insert(ids->end(), it->second.begin(), it->second.end());
    return true;
  }

  void Put(std::string_view piece, size_t hash, std::span<const int32_t> ids) const {
    Shard& shard = shards_[hash % kShards];
    std::lock_guard<std::mutex> lock(shard.mu);
    // Bounded memory: a full shard starts over (cheap, and hot pieces come back at once).
    if (shard.map.size() >= kMaxPerShard) shard.map.clear();
    shard.map.emplace(std::string(piece), std::vector<int32_t>(ids.begin(), ids.end()));
  }

  static constexpr size_t kMaxPieceBytes = 96;

 private:
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
  };
  struct Shard {
    std::mutex mu;
    std::unordered_map<std::string, std::vector<int32_t>, Hash, std::equal_to<>> map;
  };
  static constexpr size_t kShards = 16;
  static constexpr size_t kMaxPerShard = 16384;
  mutable std::array<Shard, kShards> shards_;
};

}  // namespace trace::engine::internal
