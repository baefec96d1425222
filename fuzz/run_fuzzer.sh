#!/usr/bin/env bash
# Runs one libFuzzer target over its checked-in seeds, keeping what it learns and finds apart
# from them:
#
#   fuzz/run_fuzzer.sh <fuzzer binary> <seed dir> <work dir> [libFuzzer flags...]
#
# <work dir>/corpus   inputs the run found interesting (libFuzzer writes only to the first dir)
# <work dir>/crashes  crash-*, leak-*, timeout-*, oom-* inputs, if any
# <work dir>/log      the run's output
# Exits with the fuzzer's status: non-zero on a crash, a leak, a sanitizer report, a broken
# property (abort), an input slower than -timeout, or an input above -rss_limit_mb.
set -euo pipefail
if (($# < 3)); then
  echo "usage: $0 <fuzzer binary> <seed dir> <work dir> [libFuzzer flags...]" >&2
  exit 2
fi
binary=$1 seeds=$2 work=$3
shift 3
mkdir -p "$work/corpus" "$work/crashes"
# fuzz/dict/<target>.dict, when there is one: tokens of the format, so mutations reach deeper.
name=$(basename "$binary")
dict="$(dirname "$0")/dict/${name%_fuzzer}.dict"
dict_flag=()
[ -f "$dict" ] && dict_flag=(-dict="$dict")
# Leak checks and UBSan reports are fatal; libFuzzer's own options come last so they can be
# overridden from the command line.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:symbolize=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
status=0
"$binary" -artifact_prefix="$work/crashes/" -print_final_stats=1 -timeout=10 \
  -rss_limit_mb=2048 "${dict_flag[@]}" "$@" "$work/corpus" "$seeds" >"$work/log" 2>&1 || status=$?
# The summary lines: what ran, how fast, how much code it reached, and any crash.
grep -E '^(#[0-9]+[[:space:]]+DONE|Done [0-9]+ runs|stat::|==[0-9]+==ERROR|SUMMARY|fuzz property failed)' \
  "$work/log" || true
if ((status != 0)); then
  echo "$(basename "$binary"): FAILED (status $status); input(s) in $work/crashes, log in $work/log"
  tail -n 60 "$work/log"
fi
exit "$status"
