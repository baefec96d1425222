"""What a snapshot costs the training loop (issue 37): ddprun.save_snapshot in the background
against background=False, and torch.save of one file for reference, for a state of --mb MiB
(a model's parameters and as much optimizer state), saved every step of a CPU "step" (matmuls of
about --step-ms milliseconds). One process, one torch: run it with each interpreter.

usage: <python> bench/realjob/snapshot_cost.py [--mb 64] [--steps 10] [--step-ms 200] [--dir D]

Prints a markdown row per mode: the median time of the save call on the training thread, and
the loop's wall time per step (compute + save + the wait for the previous write), beside the
loop without snapshots. Writes to --dir (default: a temp dir; put it on the disk to measure).
"""
import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../python"))

import torch  # noqa: E402

import ddprun  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("--mb", type=int, default=64)
parser.add_argument("--steps", type=int, default=10)
parser.add_argument("--step-ms", type=float, default=200)
parser.add_argument("--dir")
args = parser.parse_args()
torch.set_num_threads(1)

half = args.mb * (1 << 20) // 8  # float32 elements in each half
state = {"MODEL_STATE": {"w": torch.randn(half)}, "OPTIMIZER_STATE": {"m": torch.randn(half)}}
a = torch.randn(256, 256)


def compute_for(seconds):
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        a @ a


def run(mode, root):
    directory = os.path.join(root, mode)
    calls = []
    begin = time.perf_counter()
    for step in range(1, args.steps + 1):
        compute_for(args.step_ms / 1000)
        t = time.perf_counter()
        if mode == "background":
            ddprun.save_snapshot(state, directory, step)
        elif mode == "synchronous":
            ddprun.save_snapshot(state, directory, step, background=False)
        elif mode == "torch.save":
            os.makedirs(directory, exist_ok=True)
            torch.save(state, os.path.join(directory, "snapshot.pt"))
        calls.append(time.perf_counter() - t)
    ddprun.wait_for_snapshots()
    per_step = (time.perf_counter() - begin) / args.steps
    return statistics.median(calls), per_step


root = args.dir or tempfile.mkdtemp(prefix="ddprun-snapshot-bench-")
try:
    print(f"torch {torch.__version__}, state {args.mb} MiB, step {args.step_ms:.0f} ms of compute, "
          f"{args.steps} steps, in {root}")
    print("| mode | save call (median) | loop per step |")
    print("|---|---|---|")
    for mode in ("none", "torch.save", "synchronous", "background"):
        call, per_step = run(mode, root)
        print(f"| {mode} | {call * 1000:.1f} ms | {per_step * 1000:.1f} ms |")
finally:
    if not args.dir:
        shutil.rmtree(root)
