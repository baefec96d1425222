#!/usr/bin/env bash
# The SDK's snapshots (2 ranks under ddprun --standalone, each rank with its own directory as
# two nodes would have): training steps/s with a snapshot every N steps, synchronous vs
# background writes; time of load_latest() from the local disk vs from a peer (loopback), for
# a 100 MiB and a 1 GiB state. Prints the ranks' "BENCH {json}" lines.
#
#   bench/worker_sdk/run_snapshot_bench.sh [build dir]
#
# Environment: STEPS (default 40), EVERY (default 5), TRAIN_MB (default 100),
# RESUME_MB (default "100 1024"), REPS (default 3), SCRATCH (default: a temp dir in $TMPDIR;
# put it on the disk you care about).
set -euo pipefail
build=${1:-build}
scratch=$(mktemp -d "${SCRATCH:-${TMPDIR:-/tmp}}/snapshot-bench.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
run() {
  local log="$scratch/run.log"
  if ! "$build/launcher/ddprun" --standalone --nproc_per_node 2 --no_python \
    "$build/bench/worker_sdk/snapshot_bench" --dir "$scratch/data" "$@" >"$log" 2>&1; then
    echo "benchmark job failed: $*" >&2
    tail -n 30 "$log" >&2
    exit 1
  fi
  grep -o 'BENCH .*' "$log"
  rm -rf "$scratch/data"
}
run --mode train --state_mb "${TRAIN_MB:-100}" --steps "${STEPS:-40}" --every "${EVERY:-5}"
for mb in ${RESUME_MB:-100 1024}; do
  run --mode resume --state_mb "$mb" --reps "${REPS:-3}"
done
