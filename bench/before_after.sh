#!/usr/bin/env bash
# The code before and after a change, side by side in one run: the launcher benchmark with the
# old build in the torchrun slot (so the two alternate within the run), then the rendezvous load
# and the multi-node benchmark on both builds in turn, each repeated. Both builds need the
# benchmark targets:
#   cmake --build <dir> --target ddprun ddp-rendezvous fork_floor supervise_floor stamp_worker \
#     bench_run rendezvous_load mn_stamp_worker mn_floor
#
# usage: bench/before_after.sh <old build dir> <new build dir> [reps, default 9]
# Prints the three tables (markdown) on stdout; progress on stderr.
set -euo pipefail
if [[ $# -lt 2 ]]; then
  sed -n '2,9p' "$0" >&2
  exit 2
fi
OLD=$(realpath "$1")
NEW=$(realpath "$2")
REPS=${3:-9}
cd "$(dirname "$0")/.."

echo "### Launcher: new = ddprun column, old = torchrun 1.13 column"
TORCHRUN_IS_DDPRUN=1 TORCHRUN=$OLD/launcher/ddprun TORCHRUN2=/nonexistent/python \
  bench/launcher/run_bench.sh "$NEW" "$REPS"

echo
echo "### Rendezvous: one round of N nodes against ddp-rendezvous (old and new in turn)"
echo
echo "| build | run | nodes | output |"
echo "|---|---|---|---|"
for nodes in 1000 5000; do
  for run in 1 2 3; do
    for build in old new; do
      dir=$OLD
      [ "$build" = new ] && dir=$NEW
      line=$("$dir/bench/rendezvous/rendezvous_load" "$nodes" 2>/dev/null | tr '\n' ' ')
      echo "| $build | $run | $nodes | $line |"
    done
  done
done

echo
for build in old new; do
  dir=$OLD
  [ "$build" = new ] && dir=$NEW
  echo "### Multi-node rendezvous, $build build"
  bench/multinode/run_bench.sh "$dir" --reps 5 --ks 2,4,8 --no-torchrun
  echo
done
