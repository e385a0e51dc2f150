#!/usr/bin/env bash
# A compiler (and linker) launcher that measures what a build costs: each compile or link
# it runs adds one line "USER_S SYS_S OUTPUT" (CPU seconds) to $TRACE_COMPILE_LOG.
# docs/testing.md (Build cost) measured with it, on a clean build and without ccache:
#   cmake -S . -B /tmp/b -DCMAKE_CXX_COMPILER_LAUNCHER=$PWD/scripts/time-compile.sh \
#     -DCMAKE_C_COMPILER_LAUNCHER=$PWD/scripts/time-compile.sh \
#     -DCMAKE_CXX_LINKER_LAUNCHER=$PWD/scripts/time-compile.sh
#   TRACE_COMPILE_LOG=/tmp/cost.txt cmake --build /tmp/b -j2
#   awk '{s += $1 + $2} END {print NR, s}' /tmp/cost.txt
# A launcher turns TRACE_PCH=AUTO off: measure precompiled headers with -DTRACE_PCH=ON.
set -euo pipefail
out=-
args=("$@")
for ((i = 0; i < ${#args[@]} - 1; i++)); do
  [[ ${args[i]} == -o ]] && out=${args[i + 1]}
done
exec /usr/bin/time -a -o "${TRACE_COMPILE_LOG:?set TRACE_COMPILE_LOG to a file}" \
  -f "%U %S $out" "$@"
