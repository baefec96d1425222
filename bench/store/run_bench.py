"""The job's store at scale (issue 25): ddprun's store against torch 2.x's own TCPStore server
(libuv) and torch 1.13's, under the same load, in one run.

usage: /usr/bin/python3 bench/store/run_bench.py <build dir> [--clients 1024,4096,16384]
                                                 [--reps 3] [--servers ddprun,torch2,torch1.13]
                                                 [--limit SECONDS]

For each number of clients N and each server: the server starts on a free loopback port (ddprun's
as bench/store/store_server, torch's as TCPStore(is_master=True) in its own interpreter), then N
clients (build/bench/store/store_load, at most 4,096 per process, all started at once) each play
one rank's init_process_group traffic (store_load.cc). Measured: from just before the client
processes start until the last client is released; the server's CPU (utime + stime) and peak
RSS (VmHWM) from /proc. A run not done within --limit seconds (default 300) is ended and
reported as such. torch 2.x and ddprun are spoken to in the 2.x dialect (VALIDATE, PING),
torch 1.13 in its own. Medians of the repetitions.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
VENV_PYTHON = os.path.join(REPO, ".venv", "torch2", "bin", "python")
PER_PROCESS = 4096
TORCH_SERVER = """
import resource, sys
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
import torch.distributed as dist
kwargs = {"use_libuv": True} if sys.argv[1] == "libuv" else {}
store = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False, **kwargs)
print(store.port, flush=True)
sys.stdin.read()
"""


def start_server(kind, build):
    if kind == "ddprun":
        cmd = [os.path.join(build, "bench", "store", "store_server")]
    elif kind == "torch2":
        cmd = [VENV_PYTHON, "-c", TORCH_SERVER, "libuv"]
    else:
        cmd = ["/usr/bin/python3", "-c", TORCH_SERVER, "classic"]
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    port = int(proc.stdout.readline())
    return proc, port


def usage(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    hwm = 0
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmHWM:"):
            hwm = int(line.split()[1]) / 1024
    return cpu, hwm


class NotReleased(Exception):
    pass


def run_once(kind, build, clients, limit):
    proc, port = start_server(kind, build)
    try:
        cpu0, _ = usage(proc.pid)
        dialect = "legacy" if kind == "torch1.13" else "validated"
        load = os.path.join(build, "bench", "store", "store_load")
        begin = time.time()
        gens = []
        for first in range(0, clients, PER_PROCESS):
            count = min(PER_PROCESS, clients - first)
            gens.append(subprocess.Popen([load, str(port), dialect, str(clients), str(first),
                                          str(count)], stdout=subprocess.PIPE, text=True))
        results = []
        for g in gens:
            try:
                out, _ = g.communicate(timeout=max(1.0, begin + limit - time.time()))
            except subprocess.TimeoutExpired:
                for other in gens:
                    other.kill()
                    other.wait()
                raise NotReleased(f"not every client released within {limit:.0f} s")
            results.append(json.loads(out))
        cpu1, hwm = usage(proc.pid)
        released = sum(r["released"] for r in results)
        errors = [r["first_error"] for r in results if r["errors"]]
        if released != clients or errors:
            raise RuntimeError(f"{kind} {clients}: {released} released; errors: {errors}")
        return max(r["last_release"] for r in results) - begin, cpu1 - cpu0, hwm
    finally:
        proc.stdin.close()
        proc.wait(timeout=60)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("build")
    parser.add_argument("--clients", default="1024,4096,16384")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--servers", default="ddprun,torch2,torch1.13")
    parser.add_argument("--limit", type=float, default=300)
    args = parser.parse_args()
    build = os.path.abspath(args.build)
    kinds = args.servers.split(",")
    rows = []
    for clients in [int(c) for c in args.clients.split(",")]:
        got = {k: [] for k in kinds}
        for rep in range(args.reps):
            for kind in (kinds if rep % 2 == 0 else list(reversed(kinds))):
                try:
                    r = run_once(kind, build, clients, args.limit)
                except NotReleased as e:
                    print(f"{clients} {kind} rep {rep}: {e}", file=sys.stderr)
                    continue
                got[kind].append(r)
                print(f"{clients} {kind} rep {rep}: released all in {r[0]:.3f} s, server CPU "
                      f"{r[1]:.2f} s, peak RSS {r[2]:.0f} MiB", file=sys.stderr)
        for kind in kinds:
            if not got[kind]:
                rows.append((clients, kind, None, None, None))
                continue
            med = [statistics.median(x[i] for x in got[kind]) for i in range(3)]
            rows.append((clients, kind, *med))
    print(f"\n| clients | server | all released (median of {args.reps}) | server CPU | "
          "server peak RSS |")
    print("|---:|---|---:|---:|---:|")
    for clients, kind, t, cpu, hwm in rows:
        if t is None:
            print(f"| {clients:,} | {kind} | not all within {args.limit:.0f} s | | |")
        else:
            print(f"| {clients:,} | {kind} | {t:.3f} s | {cpu:.2f} s | {hwm:.0f} MiB |")


if __name__ == "__main__":
    main()
