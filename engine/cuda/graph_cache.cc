#include "engine/cuda/graph_cache.h"

#include "kernels/cuda/cuda_check.h"

namespace trace::engine::cuda {

void GraphCache::Clear() {
  for (auto& [key, exec] : graphs_) cudaGraphExecDestroy(exec);
  graphs_.clear();
}

Status GraphCache::Run(cudaStream_t stream, const GraphKey& key,
                       const std::function<Status()>& enqueue) {
  if (!stats_.enabled) {
    ++stats_.direct_passes;
    return enqueue();
  }
  if (auto it = graphs_.find(key); it != graphs_.end()) {
    ++stats_.replays;
    CUDA_CHECK(cudaGraphLaunch(it->second, stream));
    return Status::Ok();
  }
  if (graphs_.size() >= kMaxGraphs) Clear();
  CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  const Status enqueued = enqueue();
  cudaGraph_t graph = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(stream, &graph);
  cudaGraphExec_t exec = nullptr;
  cudaError_t made = ended;
  if (ended == cudaSuccess && enqueued.ok()) made = cudaGraphInstantiate(&exec, graph, 0);
  size_t nodes = 0;
  if (graph != nullptr) {
    cudaGraphGetNodes(graph, nullptr, &nodes);
    cudaGraphDestroy(graph);
  }
  if (!enqueued.ok() || made != cudaSuccess) {
    // Graphs off from here on; this pass runs directly (capture launched nothing).
    cudaGetLastError();
    stats_.enabled = false;
    stats_.disabled_because =
        !enqueued.ok() ? enqueued.ToString()
                       : std::string("CUDA graph capture failed: ") + cudaGetErrorString(made);
    ++stats_.direct_passes;
    return enqueue();
  }
  graphs_.emplace(key, exec);
  ++stats_.captures;
  ++stats_.replays;
  stats_.kernels_per_graph = static_cast<int64_t>(nodes);
  CUDA_CHECK(cudaGraphLaunch(exec, stream));
  return Status::Ok();
}

}  // namespace trace::engine::cuda
