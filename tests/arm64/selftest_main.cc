// The numerics contract's self-test (kernels/selftest.h) on whatever machine runs this: every
// canonical op's pinned canonical-v2 digest on every CPU path the machine has (aarch64: NEON
// and the scalar reference), single-threaded and on a pool of 4 threads. tests/arm64/check.sh
// cross-compiles it for aarch64 and runs it under qemu: the digests were pinned on x86, so a
// match is the same bits on both.
//
//   arm64_kernels_selftest        prints one line per case; exit 0 when every digest matches
#include <cinttypes>
#include <cstdio>
#include <memory>

#include "kernels/kernels.h"
#include "kernels/selftest.h"
#include "kernels/thread_pool.h"

int main() {
  using namespace trace::kernels;
  std::unique_ptr<ThreadPool> pool = ThreadPool::Create(4);
  int failed = 0, cases = 0;
  for (Impl impl : AvailableCpuIsaPaths()) {
    for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), pool.get()}) {
      KernelContext ctx;
      ctx.numerics = Numerics::kCanonical;
      ctx.impl = impl;
      ctx.pool = p;
      for (const SelfTestResult& r : RunCpuSelfTest(ctx)) {
        ++cases;
        if (!r.ok()) ++failed;
        std::printf("%-9s %-28s %-7s %016" PRIx64 " %s %016" PRIx64 "\n", CpuIsaPathName(impl),
                    r.name.c_str(), p ? "4 thr" : "1 thr", r.digest,
                    r.ok() ? "==" : "!=", r.pinned);
      }
    }
  }
  std::printf("paths %s: %d of %d digests match the pinned canonical-v2 digests (%s)\n",
              failed ? "FAILED" : "ok", cases - failed, cases, CpuIsaPathName(Impl::kAuto));
  return failed ? 1 : 0;
}
