// The CUDA engine's mixture-of-experts kernels (kernels/cuda/schedule/moe.h) run on the CPU:
// a whole MoE layer through the very block bodies the device executes (route, fast numerics'
// capacity, grouping by expert, the experts' GEMVs, SiluMul, combine, the shared expert's
// term) over simulated grids, every bit compared with the CPU reference kernels
// (kernels::MoeRoute, kernels::MatMul, kernels::MoeCombine, kernels::MoeAddShared). The
// grids cover one row (decode), batches, Qwen3-30B-A3B's 128 experts top 8, qwen2_moe's
// unnormalised top 4 with a shared expert, widths that are not multiples of the 32-element
// block (the GEMV's short-block path), and fast numerics' capacity drops.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/canonical.h"
#include "kernels/cuda/schedule/elementwise.h"
#include "kernels/cuda/schedule/host_block.h"
#include "kernels/cuda/schedule/moe.h"
#include "kernels/kernels.h"
#include "kernels/thread_pool.h"
#include "tests/kernels/test_util.h"

namespace trace::kernels {
namespace {

namespace sc = cuda::schedule;
using testing::Bits;
using testing::RandomVector;
using testing::RandomWeights;
using testing::TestWeights;

struct MoeShape {
  const char* name;
  int64_t M, E, k, H, W, shared;  // shared: the shared expert's width (0: none)
  bool normalize;
  Numerics numerics;
};

// The first index where a and b differ bitwise, or -1.
int64_t FirstDifference(const float* a, const float* b, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    if (Bits(a[i]) != Bits(b[i])) return i;
  }
  return -1;
}

struct Expert {
  TestWeights gate, up, down;
};

// Runs one MoE layer of `s` both ways and compares every intermediate bit for bit.
void CheckLayer(const MoeShape& s, uint64_t seed) {
  SCOPED_TRACE(s.name);
  std::mt19937_64 rng(seed);
  const int64_t M = s.M, E = s.E, k = s.k, H = s.H, W = s.W, S = M * k;
  const std::vector<float> h = RandomVector(rng, M * H);
  const TestWeights router = RandomWeights(rng, DType::kBF16, E, H, 0.5f);
  std::vector<Expert> experts;
  for (int64_t e = 0; e < E; ++e) {
    experts.push_back({RandomWeights(rng, DType::kBF16, W, H),
                       RandomWeights(rng, DType::kBF16, W, H),
                       RandomWeights(rng, DType::kBF16, H, W)});
  }
  auto pool = ThreadPool::Create(2);
  // The shape's numerics decide the routing; the experts' matrices are canonical in both
  // (the CUDA engine runs its canonical GEMV for them in fast mode too).
  KernelContext ctx;
  ctx.pool = pool.get();
  KernelContext route_ctx = ctx;
  route_ctx.numerics = s.numerics;

  // The router logits: the canonical MatMul (its CUDA kernels are checked elsewhere).
  std::vector<float> logits(M * E);
  MatMul(ctx, h.data(), M, router.view(), nullptr, logits.data());

  // ---- the CPU reference -----------------------------------------------------------------
  std::vector<int32_t> ids(S);
  std::vector<float> weights(S);
  MoeRoute(route_ctx, logits.data(), M, E, k, s.normalize, ids.data(), weights.data());
  std::vector<float> expert_out(S * H, 0.0f), gate(W), up(W);
  for (int64_t slot = 0; slot < S; ++slot) {
    if (ids[slot] < 0) continue;
    const Expert& x = experts[static_cast<size_t>(ids[slot])];
    const float* row = h.data() + (slot / k) * H;
    MatMul(ctx, row, 1, x.gate.view(), nullptr, gate.data());
    MatMul(ctx, row, 1, x.up.view(), nullptr, up.data());
    SiluMul(ctx, gate.data(), up.data(), W, gate.data());
    MatMul(ctx, gate.data(), 1, x.down.view(), nullptr, expert_out.data() + slot * H);
  }
  std::vector<float> out(M * H);
  MoeCombine(ctx, expert_out.data(), ids.data(), weights.data(), M, k, H, out.data());
  std::vector<float> shared_out, shared_gate;
  if (s.shared > 0) {
    shared_out = RandomVector(rng, M * H);
    shared_gate = RandomVector(rng, M, 3.0f);
    MoeAddShared(ctx, shared_out.data(), shared_gate.data(), M, H, out.data());
  }

  // ---- the CUDA schedules on the host -----------------------------------------------------
  std::vector<int32_t> d_ids(S, -7), rank(S), load(E), offsets(E + 1), order(S, -7);
  std::vector<float> d_weights(S), probs(M * E);
  const sc::MoeRouteArgs route{logits.data(),   M, E, k, s.normalize, probs.data(), d_ids.data(),
                               d_weights.data()};
  sc::SimulateGrid(sc::ElementwiseLaunch(M), [&](sc::HostBlock& b, uint32_t bx, uint32_t) {
    sc::MoeRouteBlock(b, bx, route);
  });
  if (s.numerics == Numerics::kFast) {
    const sc::MoeCapacityArgs cap{d_ids.data(), d_weights.data(), M, E, k,
                                  rank.data(),  load.data()};
    sc::SimulateGrid(sc::ElementwiseLaunch(S), [&](sc::HostBlock& b, uint32_t bx, uint32_t) {
      sc::MoeRankBlock(b, bx, cap);
    });
    sc::HostBlock one(1);
    sc::MoeCapacityBlock(one, cap);
  }
  ASSERT_EQ(d_ids, ids) << "route ids";
  ASSERT_EQ(FirstDifference(d_weights.data(), weights.data(), S), -1) << "route weights";

  sc::SimulateGrid(sc::MoeGroupLaunch(), [&](sc::HostBlock& b, uint32_t, uint32_t) {
    sc::MoeGroupBlock(b, sc::MoeGroupArgs{d_ids.data(), S, E, offsets.data(), order.data()});
  });
  // The grouping: every kept slot once, by expert then slot; the tail unused.
  std::vector<int32_t> want_order;
  for (int64_t e = 0; e < E; ++e) {
    EXPECT_EQ(offsets[e], static_cast<int32_t>(want_order.size())) << "offset of expert " << e;
    for (int64_t slot = 0; slot < S; ++slot) {
      if (ids[slot] == e) want_order.push_back(static_cast<int32_t>(slot));
    }
  }
  EXPECT_EQ(offsets[E], static_cast<int32_t>(want_order.size()));
  want_order.resize(S, -1);
  ASSERT_EQ(order, want_order);

  std::vector<const void*> gate_w(E), up_w(E), down_w(E);
  bool aligned = true;
  for (int64_t e = 0; e < E; ++e) {
    gate_w[e] = experts[e].gate.bytes.data();
    up_w[e] = experts[e].up.bytes.data();
    down_w[e] = experts[e].down.bytes.data();
    for (const void* p : {gate_w[e], up_w[e], down_w[e]}) {
      aligned = aligned && reinterpret_cast<uintptr_t>(p) % 16 == 0;
    }
  }
  std::vector<float> d_gate(S * W, 0.0f), d_up(S * W, 0.0f), d_out(S * H, 0.0f);
  auto gemv = [&](const float* x, int64_t x_per_row, const std::vector<const void*>& w, int64_t N,
                  int64_t K, float* y) {
    const bool ok = aligned && sc::GemvVectorOk(x, w[0], K, DType::kBF16);
    const sc::MoeExpertGemvArgs a{x, x_per_row, order.data(), d_ids.data(), w.data(), N, K, y, ok};
    sc::SimulateGrid(sc::MoeExpertGemvLaunch(S, N),
                     [&](sc::HostBlock& b, uint32_t bx, uint32_t by) {
                       sc::MoeExpertGemvBlock<DType::kBF16>(b, bx, by, a);
                     });
  };
  gemv(h.data(), k, gate_w, W, H, d_gate.data());
  gemv(h.data(), k, up_w, W, H, d_up.data());
  const sc::BinaryArgs silu{d_gate.data(), d_up.data(), S * W, d_gate.data()};
  sc::SimulateGrid(sc::ElementwiseLaunch(S * W),
                   [&](sc::HostBlock& b, uint32_t bx, uint32_t) { sc::SiluMulBlock(b, bx, silu); });
  gemv(d_gate.data(), 1, down_w, H, W, d_out.data());
  for (int64_t slot = 0; slot < S; ++slot) {
    if (ids[slot] < 0) continue;
    ASSERT_EQ(FirstDifference(d_out.data() + slot * H, expert_out.data() + slot * H, H), -1)
        << "expert output of slot " << slot << " (expert " << ids[slot] << ")";
  }

  std::vector<float> d_final(M * H, 0.0f);
  const sc::MoeCombineArgs combine{d_out.data(),  d_ids.data(), d_weights.data(), M, k, H,
                                   d_final.data()};
  sc::SimulateGrid(sc::ElementwiseLaunch(M * H), [&](sc::HostBlock& b, uint32_t bx, uint32_t) {
    sc::MoeCombineBlock(b, bx, combine);
  });
  if (s.shared > 0) {
    const sc::MoeAddSharedArgs add{shared_out.data(), shared_gate.data(), M, H, d_final.data()};
    sc::SimulateGrid(sc::ElementwiseLaunch(M * H), [&](sc::HostBlock& b, uint32_t bx, uint32_t) {
      sc::MoeAddSharedBlock(b, bx, add);
    });
  }
  EXPECT_EQ(FirstDifference(d_final.data(), out.data(), M * H), -1) << "layer output";
}

TEST(CudaMoeSchedule, LayerEqualsCpuReferenceOnEveryGrid) {
  const MoeShape shapes[] = {
      {"decode, qwen3-moe-tiny", 1, 8, 2, 64, 32, 0, true, Numerics::kCanonical},
      {"batch 13, qwen3-moe-tiny", 13, 8, 2, 64, 32, 0, true, Numerics::kCanonical},
      {"batch 5, a3b-narrow (128 experts, top 8)", 5, 128, 8, 128, 64, 0, true,
       Numerics::kCanonical},
      {"batch 9, qwen2-moe-tiny (top 4 unnormalised, shared expert)", 9, 8, 4, 64, 32, 128, false,
       Numerics::kCanonical},
      {"batch 4, widths off the 32-block (70, 33)", 4, 6, 3, 70, 33, 0, true, Numerics::kCanonical},
      {"batch 37, fast capacity drops", 37, 8, 2, 64, 32, 0, true, Numerics::kFast},
      {"batch 11, fast, shared expert", 11, 8, 4, 64, 32, 64, false, Numerics::kFast},
  };
  uint64_t seed = 1;
  for (const MoeShape& s : shapes) CheckLayer(s, seed++);
}

// Fast numerics really drop slots on the busy grid (the capacity path above is exercised).
TEST(CudaMoeSchedule, FastCapacityDropsSlotsInABusyBatch) {
  std::mt19937_64 rng(5);
  const int64_t M = 37, E = 8, k = 2;
  std::vector<float> logits = RandomVector(rng, M * E, 3.0f);
  for (int64_t m = 0; m < M; ++m) logits[m * E] += 4.0f;  // everyone wants expert 0
  std::vector<int32_t> ids(M * k), rank(M * k), load(E);
  std::vector<float> weights(M * k), probs(M * E);
  const sc::MoeRouteArgs route{logits.data(), M, E, k, true, probs.data(), ids.data(),
                               weights.data()};
  sc::SimulateGrid(sc::ElementwiseLaunch(M), [&](sc::HostBlock& b, uint32_t bx, uint32_t) {
    sc::MoeRouteBlock(b, bx, route);
  });
  const sc::MoeCapacityArgs cap{ids.data(), weights.data(), M, E, k, rank.data(), load.data()};
  sc::SimulateGrid(sc::ElementwiseLaunch(M * k),
                   [&](sc::HostBlock& b, uint32_t bx, uint32_t) { sc::MoeRankBlock(b, bx, cap); });
  sc::HostBlock one(1);
  sc::MoeCapacityBlock(one, cap);
  const int64_t capacity = (M * k + E - 1) / E;
  int64_t on_zero = 0, dropped = 0;
  for (int32_t id : ids) {
    on_zero += id == 0;
    dropped += id < 0;
  }
  EXPECT_EQ(on_zero, capacity);
  EXPECT_GT(dropped, 0);
}

}  // namespace
}  // namespace trace::kernels
