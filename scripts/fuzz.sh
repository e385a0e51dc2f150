#!/usr/bin/env bash
# Coverage-guided fuzzing of trace's parsers with libFuzzer (docs/fuzzing.md).
#
#   scripts/fuzz.sh [--minutes N | --runs N | --to-goal [--minutes N]] [--parallel J]
#                   [--keep-going] [--timeout S] [--build-dir DIR] [--build-only | --no-build]
#                   [--no-ledger] [TARGET...]
#   scripts/fuzz.sh --tally [--build-dir DIR] [TARGET...]
#
# Builds every fuzz target of tests/fuzz/ with clang, libFuzzer and ASan+UBSan into its own
# build folder (default build-fuzz/), then fuzzes each TARGET (default: all) in turn for N
# minutes (default 10) or for exactly N inputs (--runs: the same work on any machine), J
# targets at once (--parallel, default 1: one libFuzzer process and one core per target),
# starting from its seeds (tests/fuzz/corpus/TARGET/ and the seeds
# the target computes) and the corpus earlier runs grew (DIR/fuzz-corpus/TARGET/), with its
# dictionary (tests/fuzz/dict/TARGET.dict) and its own flags (tests/fuzz/flags/TARGET.flags,
# one libFuzzer flag a line, named in the ledger's note) where it has them. Prints
# executions, speed, corpus size and findings per target; a finding is saved in
# DIR/fuzz-findings/TARGET/ (replay it: DIR/tests/fuzz/TARGET FILE). Exit 1 when any target
# found something; --keep-going goes on after a finding (libFuzzer's fork mode), to fuzz
# past a known bug not fixed yet. --timeout S: an input running longer than S seconds of
# wall time is a finding (default 30; libFuzzer measures wall time, so on a machine busy
# with other work at a higher priority, raise it rather than report slow inputs as hangs).
# Each run is added to the ledger, tests/fuzz/ledger.tsv (commit it), under the hash of the
# target's code as built (scripts/fuzz-ledger.py); --no-ledger leaves it out. --tally: for
# each target, the executions the ledger counts on its code as built, and what is left of
# the 10 M goal (docs/fuzzing.md, "The ledger"). --to-goal: each target runs exactly what
# the ledger says is left of its 10 M on its code as built, and a target already there is
# skipped (with --minutes N too, each run also stops after N minutes; a stopped run counts).
# Two fuzz.sh may fuzz the same target at once (two cores on one target): they share its
# corpus folder, and the second writes its own log (TARGET.PID.log).
# Needs Debian's clang-14 and libclang-rt-14-dev (CI does not: it replays the same
# targets' seeds and corpora as ctests built with g++).
set -euo pipefail
cd "$(dirname "$0")/.."

minutes=10
runs=0
build_dir="build-fuzz"
build=1
run=1
keep_going=0
timeout=30
parallel=1
ledger=1
tally=0
to_goal=0
minutes_given=0
targets=()
while (($#)); do
  case "$1" in
    --minutes) minutes="$2"; minutes_given=1; shift 2 ;;
    --runs) runs="$2"; shift 2 ;;
    --build-dir) build_dir="$2"; shift 2 ;;
    --no-build) build=0; shift ;;
    --build-only) run=0; shift ;;
    --keep-going) keep_going=1; shift ;;
    --timeout) timeout="$2"; shift 2 ;;
    --parallel) parallel="$2"; shift 2 ;;
    --no-ledger) ledger=0; shift ;;
    --tally) tally=1; shift ;;
    --to-goal) to_goal=1; shift ;;
    -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
    -*) echo "fuzz.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done
if ! [[ "$timeout" =~ ^[1-9][0-9]*$ ]]; then
  echo "fuzz.sh: --timeout takes a whole number of seconds (at least 1), got '$timeout'" >&2
  exit 2
fi
# libFuzzer reads -max_total_time=0 as "no limit": refuse 0 rather than run forever.
if ! [[ "$minutes" =~ ^[0-9]+([.][0-9]+)?$ ]] || awk -v m="$minutes" 'BEGIN { exit !(m * 60 < 1) }'; then
  echo "fuzz.sh: --minutes takes a positive number (at least 1 s), got '$minutes'" >&2
  exit 2
fi

if ! [[ "$parallel" =~ ^[1-9][0-9]*$ ]]; then
  echo "fuzz.sh: --parallel takes a positive whole number, got '$parallel'" >&2
  exit 2
fi
if ! [[ "$runs" =~ ^[0-9]+$ ]]; then
  echo "fuzz.sh: --runs takes a whole number, got '$runs'" >&2
  exit 2
fi
if ((to_goal && runs > 0)); then
  echo "fuzz.sh: --to-goal sets each target's runs from the ledger; leave out --runs" >&2
  exit 2
fi
if ((to_goal && !ledger)); then
  echo "fuzz.sh: --to-goal counts on the ledger; leave out --no-ledger" >&2
  exit 2
fi
if ((runs > 0)); then
  budget=(-runs="$runs")
  what="$runs runs"
else
  budget=(-max_total_time="$(awk -v m="$minutes" 'BEGIN { printf "%d", m * 60 }')")
  what="$minutes min"
fi

all=()
for f in tests/fuzz/*_fuzz.cc; do all+=("$(basename "$f" .cc)"); done
if ((${#targets[@]} == 0)); then targets=("${all[@]}"); fi
for t in "${targets[@]}"; do
  if [[ ! -f tests/fuzz/$t.cc ]]; then
    echo "fuzz.sh: no fuzz target '$t' (targets: ${all[*]})" >&2
    exit 2
  fi
done

if ((tally)); then
  exec python3 scripts/fuzz-ledger.py --build-dir "$build_dir" tally "${targets[@]}"
fi

cc=$(command -v clang-14 || command -v clang || true)
cxx=$(command -v clang++-14 || command -v clang++ || true)
if [[ -z "$cxx" || -z "$cc" ]] ||
  ! echo 'extern "C" int LLVMFuzzerTestOneInput(const char*, unsigned long) { return 0; }' |
    "$cxx" -x c++ -fsanitize=fuzzer,address,undefined - -o /dev/null 2>/dev/null; then
  echo "fuzz.sh: needs clang with libFuzzer: sudo apt-get install clang-14 libclang-rt-14-dev" >&2
  exit 2
fi

if ((build)); then
  launcher=()
  if command -v ccache >/dev/null; then
    launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  fi
  echo "fuzz.sh: building the fuzz targets in $build_dir (clang, libFuzzer, ASan+UBSan)"
  CC="$cc" CXX="$cxx" cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DTRACE_LIBFUZZER=ON -DTRACE_SANITIZE=address,undefined -DTRACE_CUDA=OFF \
    -DTRACE_BUILD_BENCH=OFF "${launcher[@]}" >/dev/null
  cmake --build "$build_dir" -j"$(nproc)" --target "${targets[@]}"
fi

((run)) || exit 0

# --to-goal: what is left of each target's goal (fuzz-ledger.py left: a stale binary is an
# error there). Targets already at the goal are left out; each other one gets its own -runs.
declare -A goal_left=()
if ((to_goal)); then
  left_lines=$(python3 scripts/fuzz-ledger.py --build-dir "$build_dir" left "${targets[@]}") ||
    exit 2
  todo=()
  while read -r t left counted hash; do
    if ((left == 0)); then
      echo "fuzz.sh: $t has reached the goal on its code ($counted executions, code $hash): skipped"
    else
      goal_left[$t]=$left
      todo+=("$t")
    fi
  done <<<"$left_lines"
  if ((${#todo[@]} == 0)); then
    echo "fuzz.sh: every target given has reached the goal on its code as built"
    exit 0
  fi
  targets=("${todo[@]}")
  # (Not `$( ((minutes_given)) && echo ...)`: under set -e an assignment whose command
  # substitution fails ends the script, silently, when no --minutes was given.)
  cap=""
  ((minutes_given)) && cap=", at most $minutes min"
  what="what is left of the goal$cap"
fi

# CPU seconds (user + system) used so far by this shell's finished children, from bash's
# `times`. Each target is fuzzed in a subshell of its own (below), so the figure is that
# target's alone, also when several run at once. On a shared machine the wall-clock exec/s
# libFuzzer prints follows the load; executions per CPU second are the target's own cost.
# The scratch files carry the pid of the shell that writes them, so targets fuzzed at once,
# and two fuzz.sh sharing one build folder, keep their own.
mkdir -p "$build_dir/fuzz-logs"
scratch="$build_dir/fuzz-logs/.fuzz.$$"
trap 'rm -f "$scratch".*' EXIT
# Called as `children_cpu >FILE`, never in $(...): a command substitution is a new process,
# whose `times` would count only its own children (none).
children_cpu() {
  local file="$scratch.times.$BASHPID"
  times >"$file"
  awk 'NR == 2 { split($0, f, /[ ms]+/); print f[1] * 60 + f[2] + f[3] * 60 + f[4] }' "$file"
}

# fuzz_one TARGET: fuzzes it, prints its summary line (also into $scratch.line.TARGET);
# exit 1 when it found something or libFuzzer failed.
fuzz_one() {
  local t=$1 me=$BASHPID  # this target's subshell ($BASHPID differs inside $(...))
  local work="$build_dir/fuzz-corpus/$t" findings="$build_dir/fuzz-findings/$t"
  local log="$build_dir/fuzz-logs/$t.log"
  mkdir -p "$work" "$findings" "$(dirname "$log")"
  # A second fuzz.sh on the same target at once (two cores on one target; they share its
  # corpus folder, as libFuzzer's own -jobs workers do) writes a log of its own, so that
  # neither reads its figures from the other's log. The lock is held by this subshell and
  # the libFuzzer process it starts, and goes with them.
  local lock_fd
  exec {lock_fd}>>"$build_dir/fuzz-logs/$t.lock"
  flock -n "$lock_fd" || log="$build_dir/fuzz-logs/$t.$me.log"
  local args=("$work")
  [[ -d tests/fuzz/corpus/$t ]] && args+=("tests/fuzz/corpus/$t")
  [[ -f tests/fuzz/dict/$t.dict ]] && args+=("-dict=tests/fuzz/dict/$t.dict")
  ((keep_going)) && args+=(-fork=1 -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1)
  # The target's own libFuzzer flags, one per line ('#' starts a comment), after fuzz.sh's.
  local flags=()
  if [[ -f tests/fuzz/flags/$t.flags ]]; then
    mapfile -t flags < <(sed -e 's/#.*//' -e 's/[[:space:]]*$//' -e '/^$/d' "tests/fuzz/flags/$t.flags")
  fi
  local corpus execs rate cpu per_cpu line rc=0 cpu_before
  local what=$what budget=("${budget[@]}")
  if [[ -n ${goal_left[$t]:-} ]]; then
    what="${goal_left[$t]} runs (what is left of the goal$cap)"
    budget=(-runs="${goal_left[$t]}")
    ((minutes_given)) && budget+=(-max_total_time="$(awk -v m="$minutes" 'BEGIN { printf "%d", m * 60 }')")
  fi
  # The code as it is when the run begins: a rebuild during the run must not take it along.
  local started_as=""
  if ((ledger)); then
    started_as=$(python3 scripts/fuzz-ledger.py --build-dir "$build_dir" hash "$t" |
      awk '{ print ($4 == "STALE" ? "stale" : $2) }')
  fi
  echo "fuzz.sh: $t for $what (log: $log)"
  children_cpu >"$scratch.before.$me"
  cpu_before=$(<"$scratch.before.$me")
  # New inputs go into the first corpus folder ($work); the checked-in seeds stay as they are.
  TRACE_FUZZ_SEED_DIR="$work" "$build_dir/tests/fuzz/$t" "${args[@]}" \
    "${budget[@]}" -timeout="$timeout" -rss_limit_mb=4096 -print_final_stats=1 \
    -artifact_prefix="$findings/" "${flags[@]}" >"$log" 2>&1 || rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  if [[ -z "$execs" ]]; then  # fork mode: "#EXECS: cov: ... exec/s: RATE ..." lines
    execs=$(sed -n 's/^#\([0-9]*\): cov:.*/\1/p' "$log" | tail -1)
    rate=$(sed -n 's/^#[0-9]*: cov:.* exec\/s: \([0-9]*\).*/\1/p' "$log" | tail -1)
  fi
  children_cpu >"$scratch.after.$me"
  cpu=$(awk -v a="$cpu_before" -v b="$(<"$scratch.after.$me")" 'BEGIN { printf "%.1f", b - a }')
  per_cpu=$(awk -v e="${execs:-0}" -v c="$cpu" 'BEGIN { if (c > 0) printf "%.0f", e / c; else print "?" }')
  corpus=$(find "$work" -type f | wc -l)
  # Findings: crashes, timeouts, OOMs and leaks, not libFuzzer's slow-unit reports; an exit
  # other than 0 or 72 (stopped by SIGINT) without one counts as one too.
  local found slow
  found=$(find "$findings" -type f -newer "$scratch.before.$me" ! -name 'slow-unit-*' | wc -l)
  slow=$(find "$findings" -type f -newer "$scratch.before.$me" -name 'slow-unit-*' | wc -l)
  ((found == 0 && rc != 0 && rc != 72)) && found=1
  line=$(printf '%-24s %12s execs %8s/s %8s/cpu-s %7s cpu-s  corpus %6s  findings %s' "$t" \
    "${execs:-?}" "${rate:-?}" "$per_cpu" "$cpu" "$corpus" "$found")
  if ((ledger)) && [[ -n "$execs" ]]; then
    local note="fuzz.sh $what, exit $rc"
    ((${#flags[@]})) && note+=", ${flags[*]}"
    ((slow > 0)) && note+=", $slow slow-unit report(s)"
    local added
    if added=$(python3 scripts/fuzz-ledger.py --build-dir "$build_dir" add \
      ${started_as:+--started-as "$started_as"} "$t" "$execs" "$found" "$note"); then
      line+="  code $(awk '{ print $2 }' <<<"$added")"
    else
      line+="  (not added to the ledger)"
    fi
  fi
  local failed=0
  if ((found > 0)); then
    failed=1
    line+="  FAILED (exit $rc): $(grep -m1 -E '^SUMMARY|^fuzz target:|==ERROR' "$log" || true)"
  elif ((rc == 72)); then
    line+="  stopped (SIGINT; the executions so far count)"
  fi
  ((slow > 0)) && line+="  ($slow slow-unit report(s): not findings)"
  echo "$line"
  echo "$line" >"$scratch.line.$t"
  return "$failed"
}

# Up to $parallel targets at once, each in its own subshell (one libFuzzer process, one
# core each); the summary lists them in the order given, and a target whose subshell
# left no line (killed) counts as failed.
for t in "${targets[@]}"; do
  while (($(jobs -rp | wc -l) >= parallel)); do
    wait -n || true
  done
  (fuzz_one "$t") &
done
wait
status=0
echo
echo "fuzz.sh: summary ($what per target$( ((parallel > 1)) && echo ", up to $parallel at once"))"
for t in "${targets[@]}"; do
  if [[ -f $scratch.line.$t ]]; then
    cat "$scratch.line.$t"
    grep -q '  FAILED (exit' "$scratch.line.$t" && status=1
  else
    printf '%-24s no result (the fuzzing subshell ended early)\n' "$t"
    status=1
  fi
done
exit "$status"
