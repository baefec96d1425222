#!/usr/bin/env bash
# Trains the Fashion-MNIST CNN with the C++ worker SDK and with Python DDP (Debian torch 1.13,
# Gloo), one after the other under the same launcher, and prints a comparison table.
#
#   bench/worker_sdk/run_side_by_side.sh [build dir] [steps] [nproc]
#
# Python runs as `--no_python /usr/bin/python3 -u ...` because Debian's torch belongs to that
# interpreter only.
set -euo pipefail
build=${1:-build-sdk}
steps=${2:-200}
nproc=${3:-2}
root=$(cd "$(dirname "$0")/../.." && pwd)
python=${DDPRUN_TEST_PYTHON:-/usr/bin/python3}
launcher=("$build/launcher/ddprun" --standalone --nproc_per_node "$nproc" --no_python)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

"${launcher[@]}" "$build/bench/worker_sdk/mnist_bench" --steps "$steps" >"$out/cpp.log" 2>&1
"${launcher[@]}" "$python" -u "$root/bench/worker_sdk/mnist_bench.py" --steps "$steps" \
  >"$out/py.log" 2>&1
grep -h '^BENCH\|BENCH {' "$out/cpp.log" "$out/py.log" | sed 's/^.*BENCH //' >"$out/all.jsonl"

"$python" - "$out/all.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
def agg(impl):
    rs = [r for r in rows if r["impl"] == impl]
    mean = lambda k: sum(r[k] for r in rs) / len(rs)
    return {
        "steps_per_s": min(r["steps_per_s"] for r in rs),  # the job runs at the slowest rank's pace
        "peak_rss_mib": max(r["peak_rss_mib"] for r in rs),
        "comm_wait_ms": None if rs[0]["comm_wait_ms"] is None else mean("comm_wait_ms"),
        "backward_ms": mean("backward_ms"),
        "overhead_ms": mean("backward_ms") - mean("backward_nosync_ms"),
        "ranks": len(rs), "steps": rs[0]["steps"], "batch": rs[0]["batch_size"],
    }
cpp, py = agg("cpp_sdk"), agg("python_ddp")
fmt = lambda v: "n/a" if v is None else f"{v:.2f}"
print(f"ranks {cpp['ranks']}, batch {cpp['batch']} per rank, {cpp['steps']} timed steps\n")
print("| | C++ SDK | Python DDP |")
print("|---|---|---|")
for key, label in [("steps_per_s", "steps/s (slowest rank)"),
                   ("peak_rss_mib", "peak RSS per rank, MiB (max)"),
                   ("comm_wait_ms", "comm wait after backward, ms/step"),
                   ("backward_ms", "backward() with sync, ms/step"),
                   ("overhead_ms", "backward sync overhead vs no_sync, ms/step")]:
    print(f"| {label} | {fmt(cpp[key])} | {fmt(py[key])} |")
print(f"\nC++ SDK / Python DDP throughput: {cpp['steps_per_s'] / py['steps_per_s']:.2f}x")
PY
