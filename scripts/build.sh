#!/usr/bin/env bash
# Configures and builds trace into ./build (Release). Extra arguments go to cmake's
# configure step, e.g. scripts/build.sh -DTRACE_CUDA=OFF.
# A new build/ uses Ninja where there is one (scripts/setup.sh installs it): it compiles a
# target's files while the libraries it links are still being built, where Makefiles wait
# for each library, so a clean build keeps both of CI's cores busier. An existing build/
# keeps the generator it was made with.
set -euo pipefail
cd "$(dirname "$0")/.."
gen=()
[[ ! -f build/CMakeCache.txt ]] && command -v ninja >/dev/null && gen=(-G Ninja)
cmake -S . -B build "${gen[@]}" -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
cmake --build build -j"$(nproc)"
