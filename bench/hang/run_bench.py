"""Hang detection latency: how long after a rank's last heartbeat ddprun names it hung, against
the configured --hang_timeout.

usage: /usr/bin/python3 bench/hang/run_bench.py <build dir> [--reps N] [--timeouts 0.5,1,2,5]

Each repetition runs 2 workers (tests/integration/workers/hang_worker.py: 5 steps, then local
rank 1 stops while rank 0 waits in the next step) under
`ddprun --nproc_per_node 2 --hang_timeout T`, records the CLOCK_REALTIME time of the hung rank's
last heartbeat (written by the worker) and the time ddprun's "hung:" line reaches the driver.
Prints a markdown table of the latency over the timeout (median, max).
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
WORKERS = os.path.join(HERE, "..", "..", "tests", "integration", "workers")


def run_once(ddprun, timeout):
    out = tempfile.mkdtemp(prefix="ddprun_hang_")
    env = dict(os.environ, PYTHON_EXEC="/usr/bin/python3", DDPRUN_TEST_OUT=out,
               PYTHONDONTWRITEBYTECODE="1")
    proc = subprocess.Popen([ddprun, "--nproc_per_node", "2", "--hang_timeout", str(timeout),
                             os.path.join(WORKERS, "hang_worker.py"), "1", "5"],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    detected = None
    for line in proc.stderr:
        if "hung:" in line and detected is None:
            detected = time.time()
    proc.wait(timeout=120)
    with open(os.path.join(out, "last_beat_1")) as f:
        last_beat = float(f.read())
    return detected - last_beat


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("build")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--timeouts", default="0.5,1,2,5")
    args = parser.parse_args()
    ddprun = os.path.join(os.path.abspath(args.build), "launcher", "ddprun")
    print("| --hang_timeout (s) | detected after last heartbeat: median (s) | max (s) | "
          "median − timeout (ms) |")
    print("|---:|---:|---:|---:|")
    for t in [float(x) for x in args.timeouts.split(",")]:
        lat = [run_once(ddprun, t) for _ in range(args.reps)]
        print(f"| {t:g} | {statistics.median(lat):.3f} | {max(lat):.3f} | "
              f"{(statistics.median(lat) - t) * 1000:.0f} |")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
