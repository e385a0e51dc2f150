// The canonical-v2 self-test (kernels/selftest.h) on a CUDA device: the same seeded cases
// through the CUDA kernels, each output's digest compared with the pinned one.
//
// Ownership: allocates and frees its own device memory. Thread safety: uses the calling
// thread's current device (it sets `ordinal`). Errors: a Status when the device cannot be
// used or a CUDA call fails; a wrong digest is a result, not an error.
#pragma once

#include <vector>

#include "base/status.h"
#include "kernels/selftest.h"

namespace trace::kernels::cuda {

Result<std::vector<SelfTestResult>> RunCudaSelfTest(int ordinal);

}  // namespace trace::kernels::cuda
