"""--preload (issue 24) against fresh workers and torchrun, in one run, per torch.

usage: /usr/bin/python3 bench/preload/run_bench.py <build dir> [--reps N] [--ranks R]
                                                   [--torch 1|2|both] [--pss-ranks K]

launch: R local ranks (default 24) each run worker.py (import torch, init_process_group
        "gloo", one all_reduce); from just before the launcher starts until the last rank's
        result is in. Launchers alternate between repetitions: ddprun (fresh workers), ddprun
        --preload torch, torchrun of the same torch (--monitor_interval 0.1). Medians.
pss:    K ranks (default 8) hold after their all_reduce; the sum of their PSS
        (/proc/<pid>/smaps_rollup) with and without --preload, and the template's own.
The restart and whole-job figures come from bench/realjob/run_bench.py (its ddprun_preload
column). Workers get OMP_NUM_THREADS=1 (as every launcher sets for several local ranks).
"""
import argparse
import json
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
VENV_PYTHON = os.path.join(REPO, ".venv", "torch2", "bin", "python")
TORCHES = {
    "1": ("/usr/bin/python3",
          ["/usr/bin/python3", os.path.join(REPO, "scripts", "torchrun-1.13")]),
    "2": (VENV_PYTHON, [VENV_PYTHON, "-m", "torch.distributed.run"]),
}
TIMEOUT = 300


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def command(name, ddprun, torchrun, ranks):
    if name == "ddprun":
        return [ddprun, "--nproc_per_node", str(ranks)]
    if name == "ddprun --preload":
        return [ddprun, "--preload", "torch", "--nproc_per_node", str(ranks)]
    return torchrun + ["--nproc_per_node", str(ranks), "--master_addr", "127.0.0.1",
                       "--master_port", str(free_port()), "--monitor_interval", "0.1"]


def start(name, ddprun, torchrun, python, ranks, out, hold=False):
    cmd = command(name, ddprun, torchrun, ranks) + [os.path.join(HERE, "worker.py"), "--out", out]
    if hold:
        cmd.append("--hold")
    env = dict(os.environ, PYTHON_EXEC=python, OMP_NUM_THREADS="1", TMPDIR=out)
    return subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)


def finish(proc, name):
    try:
        _, err = proc.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise
    if proc.returncode != 0:
        raise RuntimeError(f"{name} exited {proc.returncode}: {err[-2000:]}")
    return err


def launch_once(name, ddprun, torchrun, python, ranks):
    with tempfile.TemporaryDirectory(prefix="ddprun_preload_bench_") as out:
        begin = time.time()
        err = finish(start(name, ddprun, torchrun, python, ranks, out), name)
        if name == "ddprun --preload" and "workers are forked from the template" not in err:
            raise RuntimeError(f"the template did not serve the workers:\n{err[-2000:]}")
        done = [json.load(open(os.path.join(out, f"done_{r}"))) for r in range(ranks)]
        assert all(d["sum"] == ranks * (ranks + 1) / 2 for d in done), "a wrong sum"
        return max(d["at"] for d in done) - begin


def pss_kib(pid):
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            if line.startswith("Pss:"):
                return int(line.split()[1])
    return 0


def template_pid(launcher_pid):
    """The preload template: the launcher's child that runs the template's program, oldest."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = open(f"/proc/{entry}/stat").read().rsplit(")", 1)[1].split()
            cmdline = open(f"/proc/{entry}/cmdline", "rb").read()
        except OSError:
            continue
        if int(stat[1]) == launcher_pid and b"template.py" in cmdline:
            found.append((int(stat[19]), int(entry)))
    return min(found)[1] if found else None


def pss_once(name, ddprun, torchrun, python, ranks):
    with tempfile.TemporaryDirectory(prefix="ddprun_preload_pss_") as out:
        proc = start(name, ddprun, torchrun, python, ranks, out, hold=True)
        deadline = time.monotonic() + TIMEOUT
        paths = [os.path.join(out, f"ready_{r}") for r in range(ranks)]
        while not all(os.path.exists(p) for p in paths):
            if time.monotonic() > deadline or proc.poll() is not None:
                os.killpg(proc.pid, signal.SIGKILL)
                raise RuntimeError(f"{name}: the ranks never got ready")
            time.sleep(0.05)
        time.sleep(0.2)  # the last writes of the ranks' own files settle
        pids = [int(open(p).read()) for p in paths]
        workers = sum(pss_kib(pid) for pid in pids)
        template = template_pid(proc.pid)
        extra = pss_kib(template) if template else 0
        open(os.path.join(out, "go"), "w").close()
        finish(proc, name)
        return workers / 1024, extra / 1024


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("build")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--ranks", type=int, default=24)
    parser.add_argument("--pss-ranks", type=int, default=8)
    parser.add_argument("--torch", choices=["1", "2", "both"], default="both")
    args = parser.parse_args()
    ddprun = os.path.join(os.path.abspath(args.build), "launcher", "ddprun")
    for version in (["1", "2"] if args.torch == "both" else [args.torch]):
        python, torchrun = TORCHES[version]
        torch_version = subprocess.run([python, "-c", "import torch; print(torch.__version__)"],
                                       capture_output=True, text=True,
                                       check=True).stdout.strip()
        names = ["ddprun", "ddprun --preload", "torchrun"]
        times = {n: [] for n in names}
        for rep in range(args.reps):
            for name in (names if rep % 2 == 0 else list(reversed(names))):
                t = launch_once(name, ddprun, torchrun, python, args.ranks)
                times[name].append(t)
                print(f"torch {torch_version} rep {rep} {name}: {t:.2f} s", file=sys.stderr)
        pss = {n: pss_once(n, ddprun, torchrun, python, args.pss_ranks)
               for n in ["ddprun", "ddprun --preload"]}
        print(f"\ntorch {torch_version} (workers: {python})\n")
        print(f"| {args.ranks} local ranks, launch → last rank's first all_reduce "
              f"(median of {args.reps}) | s |")
        print("|---|---:|")
        for name in names:
            label = name if name != "torchrun" else f"torchrun {torch_version}"
            print(f"| {label} | {statistics.median(times[name]):.2f} |")
        print(f"\n| {args.pss_ranks} ranks after import and one all_reduce | workers' summed PSS "
              "(MiB) | template's PSS (MiB) |")
        print("|---|---:|---:|")
        for name, (workers, template) in pss.items():
            print(f"| {name} | {workers:.0f} | {template:.0f} |")


if __name__ == "__main__":
    main()
