#!/usr/bin/env bash
# The cost of Python workers' automatic progress (issue 34, docs/progress.md: torch's optimizer
# and DDP hooks, one pwrite per step, the agent's reads) on a real training job: the Fashion-MNIST
# CNN under Python DDP (bench/worker_sdk/mnist_bench.py, 2 ranks, gloo), with and without
# --no_auto_progress, alternating, on each torch in turn; medians of the slowest rank's steps per
# second over ROUNDS rounds.
#
#   bench/hang/auto_progress_overhead.sh <build dir> [steps] [batch size]
#   ROUNDS (default 5); TORCHES (default "1 2": Debian's 1.13, then .venv/torch2's)
set -euo pipefail
build=$1
steps=${2:-200}
batch=${3:-64}
rounds=${ROUNDS:-5}
here=$(cd "$(dirname "$0")/../.." && pwd)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
slowest() {  # the slowest rank's throughput, from the bench's "BENCH {json}" lines
  grep -o '"steps_per_s": [0-9.e+-]*' "$1" | awk '{print $2}' | sort -g | head -1
}
median() { sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
for torch in ${TORCHES:-1 2}; do
  python=/usr/bin/python3
  [[ $torch == 2 ]] && python=$here/.venv/torch2/bin/python
  version=$("$python" -c 'import torch; print(torch.__version__)')
  : >"$out/on" && : >"$out/off"
  for ((r = 0; r < rounds; ++r)); do
    for mode in on off; do
      flags=(--standalone --nproc_per_node 2)
      [[ $mode == off ]] && flags+=(--no_auto_progress)
      PYTHON_EXEC=$python "$build/launcher/ddprun" "${flags[@]}" \
        "$here/bench/worker_sdk/mnist_bench.py" --steps "$steps" --batch_size "$batch" \
        >"$out/run" 2>&1 || { cat "$out/run"; exit 1; }
      v=$(slowest "$out/run")
      echo "$v" >>"$out/$mode"
      echo "torch $version round $r auto progress $mode: $v steps/s" >&2
    done
  done
  on=$(median <"$out/on") off=$(median <"$out/off")
  echo "torch $version: auto progress on $on steps/s, off $off steps/s (median of $rounds)," \
    "difference $(awk -v a="$on" -v b="$off" 'BEGIN {printf "%+.1f %%", (a - b) / b * 100}')"
done
