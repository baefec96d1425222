#!/bin/sh
# Multi-node rendezvous benchmark: ddprun vs torchrun 1.13 (c10d) vs a floor, on loopback.
# usage: bench/multinode/run_bench.sh <build dir> [--reps N] [--ks 2,4,8,16] [--no-torchrun]
# Needs the build's ddprun, mn_stamp_worker and mn_floor (cmake --build <dir> --target ddprun
# mn_stamp_worker mn_floor). Prints a markdown table on stdout, progress on stderr.
set -eu
if [ $# -lt 1 ]; then
  echo "usage: $0 <build dir> [options]" >&2
  exit 2
fi
here=$(dirname "$0")
exec /usr/bin/python3 "$here/mn_bench.py" "$@"
