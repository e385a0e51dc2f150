#!/usr/bin/env bash
# The numerics contract on aarch64, checked on x86 under emulation (docs/numerics.md,
# "Machines"): cross-compiles the CPU kernels (the NEON paths and the scalar references), their
# self-test and their unit tests (tests/kernels) with Debian's g++-aarch64-linux-gnu
# (tests/arm64/standalone), runs them under qemu-aarch64 (qemu-user) and requires every pinned
# canonical-v2 digest, pinned on x86, on both paths, single-threaded and on 4 threads, and every
# kernel test (each SIMD path bit for bit against the scalar reference). scripts/setup.sh
# installs both packages. Whole models: tests/arm64/whole_model.sh.
#
#   tests/arm64/check.sh [--build-dir DIR] [--contract-fma]
#
# --contract-fma builds with GCC's default -ffp-contract=fast instead of the contract's flags:
# the digests must then differ (exit 0 when they do, 1 when they all match): it shows that
# the check catches the one mistake aarch64 invites. Exit 2: the tools are missing or the
# build failed.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
BUILD="$ROOT/build/arm64"
FLAGS="-ffp-contract=off;-fno-fast-math"
EXPECT_MISMATCH=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build-dir) BUILD="${2:?--build-dir needs a folder}"; shift 2 ;;
    --contract-fma) FLAGS="-ffp-contract=fast"; EXPECT_MISMATCH=1; shift ;;
    -h|--help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "arm64/check.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
for tool in aarch64-linux-gnu-g++ qemu-aarch64; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "arm64/check.sh: $tool is not installed (scripts/setup.sh installs g++-aarch64-linux-gnu and qemu-user)" >&2
    exit 2
  fi
done
[[ $EXPECT_MISMATCH == 1 ]] && BUILD="$BUILD-fma"
start=$SECONDS
cmake -S "$ROOT/tests/arm64/standalone" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_SYSTEM_NAME=Linux -DCMAKE_SYSTEM_PROCESSOR=aarch64 \
  -DCMAKE_CXX_COMPILER=aarch64-linux-gnu-g++ "-DTRACE_CONTRACT_FLAGS=$FLAGS" >/dev/null || exit 2
targets=(arm64_kernels_selftest)
[[ $EXPECT_MISMATCH == 1 ]] || targets+=(arm64_kernels_test)
cmake --build "$BUILD" -j"$(nproc)" --target "${targets[@]}" >/dev/null || exit 2
echo "arm64/check.sh: built for aarch64 in $((SECONDS - start)) s ($FLAGS)"
start=$SECONDS
status=0
qemu-aarch64 "$BUILD/arm64_kernels_selftest" || status=$?
echo "arm64/check.sh: self-test ran under qemu-aarch64 in $((SECONDS - start)) s"
if [[ $EXPECT_MISMATCH == 0 && $status == 0 ]]; then
  start=$SECONDS
  qemu-aarch64 "$BUILD/arm64_kernels_test" --gtest_brief=1 || status=$?
  echo "arm64/check.sh: kernel tests ran under qemu-aarch64 in $((SECONDS - start)) s"
fi
if [[ $EXPECT_MISMATCH == 1 ]]; then
  [[ $status == 1 ]] && { echo "arm64/check.sh: FMA contraction changed the bits, as it must"; exit 0; }
  echo "arm64/check.sh: FMA contraction left every digest as pinned: the check would miss it" >&2
  exit 1
fi
exit $status
