"""Losing the rendezvous host against losing an ordinary member (issue 36), in one run.

usage: /usr/bin/python3 bench/multinode/host_loss_bench.py <build dir> [--reps N]
                                                            [--python PY] [--preload]

Two ddprun agents as a new user starts them: c10d without ddp-rendezvous (node 1 hosts the
server, node 2 runs the standby), `--nnodes 1:2`, the default --rdzv_conf (heartbeat_timeout
15 s, last_call_timeout 30 s), one torch gloo worker each (host_loss_worker.py: all_reduce in a
loop, each step's wall time and world size appended to a file). Nodes are 127.0.0.1 and
127.0.0.2. Once both train in a world of 2, one agent is SIGKILLed: node 1 (the host) or node 2
(an ordinary member), alternating per repetition. Measured: from the SIGKILL until the
survivor's first step in a world of 1. Medians (and min/max) over the repetitions, as a
markdown table on stdout; progress on stderr. Workers run .venv/torch2's python by default.
Most of what remains is the survivor's new worker importing torch: --preload runs every node
with `--preload torch` as well (workers forked from a template that imported it), one table
each.
"""
import argparse
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
WORKER = os.path.join(HERE, "host_loss_worker.py")
WAIT_S = 120  # the most one phase of a repetition may take


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_node(ddprun, node, endpoint, out, python, preload):
    cmd = [ddprun, "--nnodes", "1:2", "--nproc_per_node", "1", "--rdzv_backend", "c10d",
           "--rdzv_endpoint", endpoint, "--rdzv_id", "bench", "--local_addr",
           f"127.0.0.{node}", "--max_restarts", "3"]
    if preload:
        cmd += ["--preload", "torch"]
    cmd += [WORKER, os.path.join(out, f"steps_{node}")]
    env = dict(os.environ, PYTHON_EXEC=python, OMP_NUM_THREADS="1")
    log = open(os.path.join(out, f"node_{node}.log"), "w")
    return subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)


def steps(path):
    """(wall time, world size) of every step written so far."""
    try:
        with open(path) as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        return []
    out = []
    for line in lines:
        parts = line.split()
        if len(parts) == 2:  # a line still being written is skipped
            out.append((float(parts[0]), int(parts[1])))
    return out


def wait_until(condition, what):
    deadline = time.monotonic() + WAIT_S
    while not condition():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.02)  # polls files the workers write: nothing to wait on


def one_rep(ddprun, victim, python, preload):
    """Seconds from SIGKILLing node `victim` until the survivor trains in a world of 1."""
    with tempfile.TemporaryDirectory(prefix="ddprun_host_loss_") as out:
        endpoint = f"127.0.0.1:{free_port()}"
        nodes = {n: start_node(ddprun, n, endpoint, out, python, preload) for n in (1, 2)}
        survivor = 3 - victim
        try:
            wait_until(lambda: all(any(w == 2 for _, w in steps(os.path.join(out, f"steps_{n}")))
                                   for n in (1, 2)), "both nodes training in a world of 2")
            killed_at = time.time()
            os.kill(nodes[victim].pid, signal.SIGKILL)
            path = os.path.join(out, f"steps_{survivor}")
            wait_until(lambda: any(w == 1 and t > killed_at for t, w in steps(path)),
                       f"node {survivor} training alone")
            return min(t for t, w in steps(path) if w == 1 and t > killed_at) - killed_at
        except RuntimeError:
            for n in (1, 2):
                sys.stderr.write(open(os.path.join(out, f"node_{n}.log")).read()[-3000:])
            raise
        finally:
            for p in nodes.values():
                if p.poll() is None:
                    os.killpg(p.pid, signal.SIGTERM)
            for p in nodes.values():
                try:
                    p.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    os.killpg(p.pid, signal.SIGKILL)
                    p.wait()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("build")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--python", default=os.path.join(REPO, ".venv", "torch2", "bin", "python"))
    parser.add_argument("--preload", action="store_true")
    args = parser.parse_args()
    ddprun = os.path.join(os.path.abspath(args.build), "launcher", "ddprun")
    for preload in ([False, True] if args.preload else [False]):
        measure(ddprun, args, preload)


def measure(ddprun, args, preload):
    mode = "--preload torch" if preload else "fresh workers"
    results = {"host (node 1)": [], "ordinary member (node 2)": []}
    for rep in range(args.reps):
        for victim, name in ((1, "host (node 1)"), (2, "ordinary member (node 2)")):
            seconds = one_rep(ddprun, victim, args.python, preload)
            results[name].append(seconds)
            print(f"{mode}, rep {rep + 1}: {name} SIGKILLed -> survivor training again in "
                  f"{seconds:.2f} s", file=sys.stderr)
    print(f"\n{mode}:\n")
    print("| node SIGKILLed | survivor training again: median | min | max | reps |")
    print("|---|---|---|---|---|")
    for name, values in results.items():
        print(f"| {name} | {statistics.median(values):.2f} s | {min(values):.2f} s | "
              f"{max(values):.2f} s | {len(values)} |")


if __name__ == "__main__":
    main()
