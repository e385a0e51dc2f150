// What this machine can do at best, measured in the same run as a benchmark so that a
// benchmark reports ratios rather than absolute figures (the machine is shared and noisy):
// the fp32 FMA peak of each SIMD instruction set the CPU has, and the memory bandwidth of a
// large copy and of a large read. Used by `trace bench throughput` and bench/engine.
//
// Ownership: none; the measurements allocate and free their own buffers. Thread safety: each
// call is independent (it starts its own pool of `threads`). Errors: none; an instruction set
// the CPU lacks measures 0.
#pragma once

#include <cstdint>
#include <string>

#include "kernels/kernels.h"

namespace trace::perf {

// fp32 GFLOP/s of independent fused multiply-adds (2 flops each) on `threads` threads, with
// the registers of `isa` (kernels::Impl::kAvx2: 8 floats, kAvx512: 16, kNeon: 4; kReference: scalar
// fma). The best of `repeats` timed rounds of a fixed instruction count.
double MeasureFmaPeakGflops(kernels::Impl isa, int threads, int repeats = 3);

// The same loop on the calling thread, as GFLOP per second of that thread's CPU time: the
// per-core peak, unaffected by time slices lost to other processes (a loaded machine). Divide
// a kernel's flops per process-CPU-second by it for its per-core efficiency.
double MeasureFmaPeakGflopsPerCpuSecond(kernels::Impl isa, int repeats = 3);

// CPU seconds this process has used so far (all threads).
double ProcessCpuSeconds();

struct Bandwidth {
  double copy_gbps = 0;  // bytes read + bytes written per second (the STREAM convention)
  double read_gbps = 0;  // bytes read per second by a summing pass
};
// Over buffers of `bytes` each (well past the last-level cache), split over `threads`.
Bandwidth MeasureBandwidth(int threads, int64_t bytes = int64_t{512} << 20, int repeats = 3);

// The best SIMD path of this CPU (what kernels::Impl::kAuto can run without TRACE_CPU_ISA).
kernels::Impl BestCpuIsa();
// The path kernels::Impl::kAuto runs now (TRACE_CPU_ISA applied), as the Impl forcing it.
kernels::Impl ActiveCpuIsa();

}  // namespace trace::perf
