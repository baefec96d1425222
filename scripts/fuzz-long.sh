#!/usr/bin/env bash
# The long fuzzing campaign (docs/reliability.md): each libFuzzer target, one after the other,
# under ASan + UBSan, until it has run RUNS inputs or SECONDS have passed, whichever is first.
# Prints each target's execution count, speed and result, then a summary table.
#
#   scripts/fuzz-long.sh [target...]        (default: every target in fuzz/CMakeLists.txt)
#
#   RUNS=10000000      executions per target (the issue asks for at least 10 million)
#   SECONDS_PER=3600   time bound per target
#   BUILD_DIR=build-fuzz   configured with -DDDPRUN_FUZZ=ON and clang++-14 if it is not yet
#   FUZZ_LOCK=/path    run each target under `flock FUZZ_LOCK` (a shared machine's CPU lock)
#   JOBS=1             libFuzzer workers per target (-fork); 1 keeps to one core
#
# The corpus each run grows is kept in $BUILD_DIR/fuzz/long/<target>/corpus and reused by the
# next run; crashes land in $BUILD_DIR/fuzz/long/<target>/crashes. Exits non-zero if any target
# found something: turn each input into a regression test (docs/reliability.md says how).
set -euo pipefail
cd "$(dirname "$0")/.."

RUNS=${RUNS:-10000000}
SECONDS_PER=${SECONDS_PER:-3600}
BUILD_DIR=${BUILD_DIR:-build-fuzz}
JOBS=${JOBS:-1}
locked=()
[ -n "${FUZZ_LOCK:-}" ] && locked=(flock "$FUZZ_LOCK")

if [ ! -f "$BUILD_DIR/CMakeCache.txt" ]; then
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DDDPRUN_FUZZ=ON \
    -DCMAKE_CXX_COMPILER=clang++-14 >/dev/null
fi
"${locked[@]}" cmake --build "$BUILD_DIR" -j2

targets=("$@")
if ((${#targets[@]} == 0)); then
  # The list fuzz/CMakeLists.txt keeps (DDPRUN_FUZZERS in the cache).
  list=$(sed -n 's/^DDPRUN_FUZZERS:INTERNAL=//p' "$BUILD_DIR/CMakeCache.txt")
  IFS=';' read -r -a targets <<<"$list"
fi

summary=()
failed=0
for name in "${targets[@]}"; do
  binary="$BUILD_DIR/fuzz/${name}_fuzzer"
  work="$BUILD_DIR/fuzz/long/$name"
  [ -x "$binary" ] || { echo "no fuzz target $binary" >&2; exit 2; }
  echo "== $name: up to $RUNS executions or $SECONDS_PER s =="
  status=0
  fork=()
  ((JOBS > 1)) && fork=(-fork="$JOBS")
  "${locked[@]}" fuzz/run_fuzzer.sh "$binary" "fuzz/corpus/$name" "$work" -runs="$RUNS" \
    -max_total_time="$SECONDS_PER" "${fork[@]}" || status=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/log" | tail -1)
  speed=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$work/log" | tail -1)
  secs=$(sed -n 's/^Done [0-9]* runs in \([0-9]*\) second.*/\1/p' "$work/log" | tail -1)
  [ -n "$secs" ] || secs=$(( ${execs:-0} / (${speed:-1} > 0 ? ${speed:-1} : 1) ))
  units=$(find "$work/corpus" -type f | wc -l)
  result=ok
  if ((status != 0)); then
    result="FOUND (status $status): $(ls "$work/crashes" | tr '\n' ' ')"
    failed=1
  fi
  line=$(printf '%-20s %12s execs %7s s %8s/s %6s corpus  %s' "$name" "${execs:-?}" \
    "${secs:-?}" "${speed:-?}" "$units" "$result")
  echo "$line"
  summary+=("$line")
done

echo
echo "== summary ($(date -u +%Y-%m-%dT%H:%MZ), runs<=$RUNS, <=$SECONDS_PER s per target) =="
printf '%s\n' "${summary[@]}"
exit "$failed"
