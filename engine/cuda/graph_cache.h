// CUDA graphs of the decoder's passes, one per pass shape: the ~17 kernel launches per layer
// of a decode step are captured once and replayed as one launch, so at small batch sizes the
// GPU is not left waiting for the host. The graph holds the very kernels the direct path
// launches with the same arguments, so a replay gives the same bits.
//
// A graph is valid while every pointer and size captured in it is: the caller keys it by the
// pass shape (rows, attention scratch stride) and by a generation number it bumps whenever
// any captured buffer is reallocated (which also drops every graph).
//
// Ownership: the cache owns its graphs and executable graphs. Thread safety: one thread (the
// engine's). Errors: a failed capture is reported once and turns graphs off for the cache's
// life; the pass then runs directly (same kernels), so a graph problem costs speed only.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <tuple>

#include "base/status.h"

namespace trace::engine::cuda {

struct GraphKey {
  int64_t rows = 0;
  int64_t scratch_stride = 0;
  int64_t generation = 0;
  bool operator<(const GraphKey& o) const {
    return std::tie(rows, scratch_stride, generation) <
           std::tie(o.rows, o.scratch_stride, o.generation);
  }
};

struct GraphStats {
  bool enabled = true;
  int64_t captures = 0;           // graphs captured and instantiated
  int64_t replays = 0;            // passes run by replaying a graph (captures included)
  int64_t direct_passes = 0;      // passes run by launching each kernel
  int64_t kernels_per_graph = 0;  // kernel nodes of the last graph captured
  std::string disabled_because;   // the capture error that turned graphs off
};

class GraphCache {
 public:
  explicit GraphCache(bool enabled) { stats_.enabled = enabled; }
  ~GraphCache() { Clear(); }
  GraphCache(const GraphCache&) = delete;
  GraphCache& operator=(const GraphCache&) = delete;

  // Runs `enqueue` (kernel launches on `stream`, nothing synchronous) for `key`: through the
  // cached graph, or captured into a new one and launched, or (graphs off) directly.
  Status Run(cudaStream_t stream, const GraphKey& key, const std::function<Status()>& enqueue);
  // Drops every graph (a captured buffer moved).
  void Clear();
  const GraphStats& stats() const { return stats_; }

 private:
  static constexpr size_t kMaxGraphs = 64;
  std::map<GraphKey, cudaGraphExec_t> graphs_;
  GraphStats stats_;
};

}  // namespace trace::engine::cuda
