"""The real-job benchmark: ddprun against torchrun on the same 2-rank gloo DDP job
(ddp_job.py), in one run, alternating launchers between repetitions; with each torch in turn
(--torch both, the default): Debian's 1.13 and PyTorch 2.x from the project's .venv/torch2.

usage: /usr/bin/python3 bench/realjob/run_bench.py <build dir> [--reps N] [--steps S]
                                                   [--torch 1|2|both]

Measured per repetition and launcher (medians over the repetitions are printed as a markdown
table):
  init        init_process_group duration: per rank (median of the two), and from the moment
              the last rank calls it until every rank has returned
  wall        whole job: from just before the launcher is started until it has exited
  restart     failure to recovery: rank 1 exits 1 at step 20 of the first attempt; from the
              moment it exits until the restarted group's first all_reduce has completed on
              every rank
torch 1.13: torchrun is Debian's through scripts/torchrun-1.13, workers run
/usr/bin/python3. torch 2.x: torchrun is `.venv/torch2/bin/python -m torch.distributed.run`,
workers run .venv/torch2/bin/python. torchrun: static rendezvous on a free loopback port,
--monitor_interval 0.1 (and the launch alone also with its default, 5 in 1.13, 0.1 in 2.x).
ddprun runs with its defaults and the same interpreter for its workers (PYTHON_EXEC).
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
RUN_TIMEOUT = 120  # seconds for one job
VENV_PYTHON = os.path.join(REPO, ".venv", "torch2", "bin", "python")
# Per torch: the workers' interpreter and torchrun's command line.
TORCHES = {
    "1": ("/usr/bin/python3",
          ["/usr/bin/python3", os.path.join(REPO, "scripts", "torchrun-1.13")]),
    "2": (VENV_PYTHON, [VENV_PYTHON, "-m", "torch.distributed.run"]),
}
PYTHON, TORCHRUN = TORCHES["1"]


def use_torch(version):
    global PYTHON, TORCHRUN
    PYTHON, TORCHRUN = TORCHES[version]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launcher_cmd(name, ddprun):
    if name == "ddprun":
        return [ddprun, "--nproc_per_node", "2"]
    if name == "ddprun_preload":  # issue 24: workers forked from a template that imported torch
        return [ddprun, "--preload", "torch", "--nproc_per_node", "2"]
    if name == "ddprun_noauto":  # issue 34: without the workers' automatic progress
        return [ddprun, "--no_auto_progress", "--nproc_per_node", "2"]
    interval = "5" if name == "torchrun_default" else "0.1"
    return TORCHRUN + ["--nproc_per_node", "2", "--master_addr", "127.0.0.1", "--master_port",
                       str(free_port()), "--monitor_interval", interval]


def job_workers(out):
    """The pids of this run's workers: processes whose command line names its directory."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                if out.encode() in f.read():
                    pids.append(int(entry))
        except OSError:
            continue
    return pids


def run_once(name, ddprun, steps, fail):
    with tempfile.TemporaryDirectory(prefix="ddprun_realjob_") as out:
        return run_in(out, name, ddprun, steps, fail)


def run_in(out, name, ddprun, steps, fail):
    cmd = launcher_cmd(name, ddprun)
    if fail:
        cmd += ["--max_restarts", "1"]
    cmd += [os.path.join(HERE, "ddp_job.py"), "--out", out, "--steps", str(steps)]
    if fail:
        cmd += ["--fail-at-step", "20"]
    env = dict(os.environ, PYTHON_EXEC=PYTHON, OMP_NUM_THREADS="1")
    env.pop("TORCHELASTIC_USE_AGENT_STORE", None)
    if not name.startswith("ddprun"):
        env["TMPDIR"] = out  # torchrun leaves its log directory behind; ddprun removes its own
    start = time.time()
    # Its own session, so that a launcher that hangs is ended with every worker it started.
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        _, stderr = proc.communicate(timeout=RUN_TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        # torch 2.x's torchrun starts each worker in a session of its own: those outlive the
        # killed launcher (re-parented to init) and hold its stderr pipe. They are ours by the
        # run's own directory on their command line; ended by pid.
        for pid in job_workers(out):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        proc.communicate()
        raise
    wall = time.time() - start
    if proc.returncode != 0:
        raise RuntimeError(f"{name} exited {proc.returncode}:\n{stderr[-2000:]}")
    marks = {}
    for f in os.listdir(out):
        if f.endswith(".json"):
            with open(os.path.join(out, f)) as fh:
                marks[f[:-5]] = json.load(fh)
    result = {"wall": wall}
    last = max(int(k.split("_")[0]) for k in marks)
    ends = [marks[f"{last}_{r}"]["init_end"] for r in range(2)]
    begins = [marks[f"{last}_{r}"]["init_begin"] for r in range(2)]
    # Per rank, a rank that enters first also waits for the other to arrive (import skew, and
    # torch 1.13's store barrier polls every 10 ms); from the last rank in to all done is what
    # init_process_group itself costs once both ranks call it.
    result["init"] = statistics.median(e - b for e, b in zip(ends, begins))
    result["init_joint"] = max(ends) - max(begins)
    ranks = [marks[f"{last}_{r}"] for r in range(2)]
    if not fail:
        result["to_worker"] = max(m["started"] for m in ranks) - start
        result["import"] = max(m["init_begin"] - m["started"] for m in ranks)
        result["train"] = max(m["end"] for m in ranks) - min(m["first_reduce"] for m in ranks)
        result["after_end"] = start + wall - max(m["end"] for m in ranks)
        if all("returned" in m for m in ranks):
            result["after_return"] = start + wall - max(m["returned"] for m in ranks)
    if fail:
        failed = marks["0_1"]["failed"]
        result["restart"] = max(marks[f"1_{r}"]["first_reduce"] for r in range(2)) - failed
    return result


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("build")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--torch", choices=["1", "2", "both"], default="both")
    args = parser.parse_args()
    ddprun = os.path.join(os.path.abspath(args.build), "launcher", "ddprun")
    for version in (["1", "2"] if args.torch == "both" else [args.torch]):
        use_torch(version)
        measure(ddprun, args, version)


def measure(ddprun, args, version):
    torch_version = subprocess.run([PYTHON, "-c", "import torch; print(torch.__version__)"],
                                   capture_output=True, text=True, check=True).stdout.strip()
    launchers = ["ddprun", "ddprun_noauto", "ddprun_preload", "torchrun_fast"]
    results = {(n, s): [] for n in launchers + ["torchrun_default"] for s in ("plain", "fail")}
    hung = {}  # (launcher, scenario) -> why each failed run failed
    for rep in range(args.reps):
        order = launchers if rep % 2 == 0 else list(reversed(launchers))
        for name in order:
            for scenario in ("plain", "fail"):
                try:
                    r = run_once(name, ddprun, args.steps, scenario == "fail")
                except (subprocess.TimeoutExpired, RuntimeError) as e:
                    # Reported, not hidden (torchrun 2.15 did not restart this job here).
                    why = (f"did not finish within {RUN_TIMEOUT} s"
                           if isinstance(e, subprocess.TimeoutExpired) else str(e).splitlines()[0])
                    print(f"torch {torch_version} rep {rep} {name} {scenario}: {why}\n{e}",
                          file=sys.stderr)
                    hung.setdefault((name, scenario), []).append(why)
                    continue
                results[(name, scenario)].append(r)
                print(f"torch {torch_version} rep {rep} {name} {scenario}: " +
                      ", ".join(f"{k}={v * 1000:.0f}ms" for k, v in r.items()), file=sys.stderr)
        if version == "1":  # torchrun 2.x's default interval is already 0.1
            r = run_once("torchrun_default", ddprun, args.steps, False)
            results[("torchrun_default", "plain")].append(r)
            print(f"rep {rep} torchrun_default plain: wall={r['wall'] * 1000:.0f}ms",
                  file=sys.stderr)

    def med(name, scenario, key):
        values = [r[key] for r in results[(name, scenario)]]
        return statistics.median(values) * 1000 if values else float("nan")

    print(f"\ntorch {torch_version} (workers: {PYTHON})\n")
    print(f"| metric (median of {args.reps}, ms) | ddprun | ddprun --no_auto_progress | "
          f"ddprun --preload torch | torchrun {torch_version} --monitor_interval 0.1 | "
          "torchrun 1.13 (its default 5) | torchrun 0.1 / ddprun | torchrun 0.1 / ddprun --preload |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    rows = [("init_process_group, median rank", "plain", "init"),
            ("init_process_group, last rank in → every rank done", "plain", "init_joint"),
            (f"whole job, {args.steps} steps (wall)", "plain", "wall"),
            ("worker failure → restarted group's first all_reduce", "fail", "restart"),
            ("whole job with one restart (wall)", "fail", "wall")]
    rows += [("  launcher start → last worker's first line", "plain", "to_worker"),
             ("  worker: python + import torch", "plain", "import"),
             ("  training: first all_reduce → last step", "plain", "train"),
             ("  last step → launcher exited", "plain", "after_end"),
             ("  the script's return → launcher exited", "plain", "after_return")]
    for label, scenario, key in rows:
        d, t = med("ddprun", scenario, key), med("torchrun_fast", scenario, key)
        p, n = med("ddprun_preload", scenario, key), med("ddprun_noauto", scenario, key)
        td = med("torchrun_default", scenario, key) if scenario == "plain" and key == "wall" \
            else float("nan")
        print(f"| {label} | {d:.0f} | {n:.0f} | {p:.0f} | {t:.0f} | {td:.0f} | {t / d:.2f}× | "
              f"{t / p:.2f}× |")
    # Steps per second of the training loop (first all_reduce to last step), per launcher.
    rates = {name: args.steps / med(name, "plain", "train") * 1000
             for name in ("ddprun", "ddprun_noauto", "ddprun_preload", "torchrun_fast")}
    print(f"| training steps per second (not ms) | {rates['ddprun']:.1f} | "
          f"{rates['ddprun_noauto']:.1f} | {rates['ddprun_preload']:.1f} | "
          f"{rates['torchrun_fast']:.1f} | | | |")
    for (name, scenario), whys in hung.items():
        print(f"\n{name} {scenario}: {len(whys)} of {args.reps} runs failed, left out of the "
              f"medians: {'; '.join(whys)}")


if __name__ == "__main__":
    main()
