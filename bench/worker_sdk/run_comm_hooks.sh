#!/usr/bin/env bash
# The SDK's communication hooks on the Fashion-MNIST CNN: bytes handed to Gloo per step, time
# waiting for communication, throughput and CPU time, for the default all-reduce, bf16
# compression and PowerSGD at two ranks (2 ranks under ddprun --standalone).
#
#   bench/worker_sdk/run_comm_hooks.sh [build dir] [steps]
#
# Environment: ROUNDS (default 3; medians over rounds), BATCH_SIZES (default "64 16").
# PowerSGD starts compressing at step 10, inside the 20 warm-up steps.
set -euo pipefail
build=${1:-build}
steps=${2:-100}
rounds=${ROUNDS:-3}
batch_sizes=${BATCH_SIZES:-64 16}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
configs=("allreduce" "bf16" "powersgd 1" "powersgd 4")

for batch in $batch_sizes; do
  for round in $(seq "$rounds"); do
    echo "batch $batch, round $round/$rounds" >&2
    for config in "${configs[@]}"; do
      read -r hook rank <<<"$config"
      log="$out/$batch-$round-$hook-${rank:-0}.log"
      if ! "$build/launcher/ddprun" --standalone --nproc_per_node 2 --no_python \
        "$build/bench/worker_sdk/mnist_bench" --steps "$steps" --batch_size "$batch" \
        --comm_hook "$hook" --powersgd_rank "${rank:-1}" >"$log" 2>&1; then
        echo "benchmark job failed: $config" >&2
        tail -n 30 "$log" >&2
        exit 1
      fi
      grep -h 'BENCH {' "$log" | sed "s/^.*BENCH //; s/}\$/, \"config\": \"$config\"}/" >>"$out/all.jsonl"
    done
  done
done

python3 - "$out/all.jsonl" "$rounds" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
rounds = int(sys.argv[2])
for batch in sorted({r["batch_size"] for r in rows}):
    print(f"\nbatch {batch} per rank, 2 ranks, {rows[0]['steps']} timed steps, median of {rounds} rounds\n")
    print("| hook | steps/s | bytes into collectives per step and rank | comm wait, ms/step | backward, ms/step | CPU ms/step |")
    print("|---|---|---|---|---|---|")
    for config in dict.fromkeys(r["config"] for r in rows):
        rs = [r for r in rows if r["batch_size"] == batch and r["config"] == config]
        jobs = [rs[i:i + 2] for i in range(0, len(rs), 2)]
        steps = statistics.median(min(r["steps_per_s"] for r in job) for job in jobs)
        mean = lambda k: statistics.mean(r[k] for r in rs)
        label = config.replace("powersgd ", "PowerSGD rank ")
        print(f"| {label} | {steps:.2f} | {mean('comm_bytes_per_step'):,.0f} | {mean('comm_wait_ms'):.2f} "
              f"| {mean('backward_ms'):.1f} | {mean('cpu_ms_per_step'):.1f} |")
PY
