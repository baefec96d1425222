#!/usr/bin/env bash
# Trains the Fashion-MNIST CNN with the C++ worker SDK and with Python DDP (Debian torch 1.13,
# Gloo) under the same launcher and prints a comparison table per batch size.
#
#   bench/worker_sdk/run_side_by_side.sh [build dir] [steps] [nproc]
#
# Environment:
#   ROUNDS       rounds per batch size (default 3). Each round runs four jobs back to back:
#                SDK, Python, and each again with --no_sync (no gradient communication at all:
#                the compute-only ceiling that no DDP implementation can beat). Medians over
#                rounds are reported, so a noisy neighbour slowing one job moves no number much.
#   BATCH_SIZES  per-rank batch sizes to measure (default "64", the examples' batch).
#   EXTRA_FLAGS  passed to both implementations, e.g. "--gradient_as_bucket_view" or
#                "--comm_hook powersgd --powersgd_rank 1" (PyTorch's own powerSGD_hook on the
#                Python side).
#
# Python runs as `--no_python /usr/bin/python3 -u ...` because Debian's torch belongs to that
# interpreter only.
set -euo pipefail
build=${1:-build-sdk}
steps=${2:-200}
nproc=${3:-2}
rounds=${ROUNDS:-3}
# shellcheck disable=SC2206  # EXTRA_FLAGS is a list of flags
extra=(${EXTRA_FLAGS:-})
batch_sizes=${BATCH_SIZES:-64}
root=$(cd "$(dirname "$0")/../.." && pwd)
python=${DDPRUN_TEST_PYTHON:-/usr/bin/python3}
launcher=("$build/launcher/ddprun" --standalone --nproc_per_node "$nproc" --no_python)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

run_job() {  # run_job <log name> <worker command...>
  local log="$out/$1"
  shift
  if ! "${launcher[@]}" "$@" >"$log" 2>&1; then
    echo "benchmark job failed: $*" >&2
    tail -n 30 "$log" >&2
    exit 1
  fi
  grep -h 'BENCH {' "$log" | sed 's/^.*BENCH //' >>"$out/all.jsonl"
}

for batch in $batch_sizes; do
  for round in $(seq "$rounds"); do
    echo "batch $batch, round $round/$rounds" >&2
    for sync_flag in "" "--no_sync"; do
      run_job "cpp-$batch-$round$sync_flag.log" "$build/bench/worker_sdk/mnist_bench" \
        --steps "$steps" --batch_size "$batch" $sync_flag "${extra[@]}"
      run_job "py-$batch-$round$sync_flag.log" "$python" -u "$root/bench/worker_sdk/mnist_bench.py" \
        --steps "$steps" --batch_size "$batch" $sync_flag "${extra[@]}"
    done
  done
done

"$python" - "$out/all.jsonl" "$rounds" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
rounds = int(sys.argv[2])

def jobs(impl, batch, synced):
    """Per job (one launcher run): the ranks' rows, in run order."""
    rs = [r for r in rows if r["impl"] == impl and r["batch_size"] == batch and r["synced"] == synced]
    ranks = rs[0]["world_size"]
    return [rs[i:i + ranks] for i in range(0, len(rs), ranks)]

def throughput(impl, batch, synced):
    # A job runs at its slowest rank's pace; the median over rounds resists noise.
    return statistics.median(min(r["steps_per_s"] for r in job) for job in jobs(impl, batch, synced))

def mean_over_ranks(impl, batch, key, synced=True):
    values = [r[key] for job in jobs(impl, batch, synced) for r in job if r[key] is not None]
    return statistics.mean(values) if values else None

fmt = lambda v: "n/a" if v is None else f"{v:.2f}"
for batch in sorted({r["batch_size"] for r in rows}):
    cpp, py = throughput("cpp_sdk", batch, True), throughput("python_ddp", batch, True)
    ceiling = max(throughput("cpp_sdk", batch, False), throughput("python_ddp", batch, False))
    sample = jobs("cpp_sdk", batch, True)[0][0]
    print(f"\nbatch {batch} per rank, {sample['world_size']} ranks, {sample['steps']} timed steps, "
          f"median of {rounds} rounds\n")
    print("| | C++ SDK | Python DDP |")
    print("|---|---|---|")
    print(f"| steps/s (slowest rank) | {cpp:.2f} | {py:.2f} |")
    print(f"| steps/s without gradient sync (no_sync) | {throughput('cpp_sdk', batch, False):.2f} "
          f"| {throughput('python_ddp', batch, False):.2f} |")
    for key, label in [("cpu_ms_per_step", "CPU time per step and rank, ms (all threads)"),
                       ("comm_bytes_per_step", "bytes into collectives per step and rank"),
                       ("peak_rss_mib", "peak RSS per rank, MiB (mean)"),
                       ("comm_wait_ms", "comm wait after backward, ms/step"),
                       ("backward_ms", "backward() with sync, ms/step"),
                       ("backward_nosync_ms", "backward() inside no_sync(), ms/step")]:
        print(f"| {label} | {fmt(mean_over_ranks('cpp_sdk', batch, key))} "
              f"| {fmt(mean_over_ranks('python_ddp', batch, key))} |")
    print(f"| CPU time per step and rank without gradient sync, ms "
          f"| {fmt(mean_over_ranks('cpp_sdk', batch, 'cpu_ms_per_step', False))} "
          f"| {fmt(mean_over_ranks('python_ddp', batch, 'cpu_ms_per_step', False))} |")
    print(f"\nC++ SDK / Python DDP throughput: {cpp / py:.2f}x")
    print(f"Ceiling (best no-sync throughput) / Python DDP: {ceiling / py:.2f}x "
          f"(the most any DDP could gain here)")
PY
