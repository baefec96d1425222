#!/usr/bin/python3
"""Multi-node rendezvous benchmark: ddprun (c10d, server hosted by node 1) against torchrun 1.13
(c10d) and a floor, K agents on loopback, each on its own 127.0.0.<N>. Run by run_bench.sh.

torchrun 1.13 has no --local_addr, so its agents all use 127.0.0.1.

launch: from just before the first agent is started to the last worker's start stamp
        (CLOCK_REALTIME, written by mn_stamp_worker). Floor: mn_floor (K forked processes,
        a TCP barrier, one fork+exec each).
node loss: K=4 agents running, kill -9 of one agent (not the rendezvous host) → the survivors'
        workers started again in a world of the survivors (their stamps), bounded by a timeout.
node loss with a spare (ddprun, --spare): K agents of a job of exactly K nodes running and one
        more agent waiting as a spare; kill -9 of agent K → the last worker of the new round
        (the survivors' and the spare's, a world of K again) started.
Repetitions alternate between launchers; medians are printed as a markdown table.
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
# The project's torchrun 1.13 wrapper, scripts/torchrun-1.13 (override with $TORCHRUN_WRAPPER).
TORCHRUN = os.environ.get(
    "TORCHRUN_WRAPPER", os.path.join(HERE, "..", "..", "scripts", "torchrun-1.13"))
PYTHON = "/usr/bin/python3"
DDPRUN_CONF = "join_timeout=60,last_call_timeout=30,heartbeat_timeout=2,keep_alive_interval=0.5"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stamps(out_dir, world):
    """{node: [start ns...]} for stamps of workers that ran in a world of `world`."""
    found = {}
    for name in os.listdir(out_dir):
        if name.endswith(".tmp") or not name.startswith("start_n"):
            continue
        node, w = name.split("_")[1:3]
        if w != "w%d" % world:
            continue
        with open(os.path.join(out_dir, name)) as f:
            found.setdefault(node, []).append(int(f.read()))
    return found


def wait_for_stamps(out_dir, world, count, deadline):
    # The bench has no file-event library in plain Python; 10 ms polling only adds to the
    # bench's own wall time, never to the measured timestamps (workers stamp themselves).
    while time.monotonic() < deadline:
        if sum(len(v) for v in stamps(out_dir, world).values()) >= count:
            return True
        time.sleep(0.01)
    return False


def last_error(job, out_dir):
    """The last line naming an error in the first survivor's log (why the agents ended)."""
    for log in job.logs:
        log.flush()
    with open(os.path.join(out_dir, "agent_1.log")) as f:
        lines = [l.strip() for l in f if "Error" in l or "error" in l]
    return repr(lines[-1][:160]) if lines else "no error logged"


def process_running(pid):
    """True when /proc/<pid> exists and is not a zombie."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


class Job:
    """K agents started as process groups; killed (group-wide) on close."""

    def __init__(self, argvs, out_dir, extra_env, first_node=1):
        self.procs = []
        self.logs = []
        for node, argv in enumerate(argvs, start=first_node):
            env = dict(os.environ, BENCH_OUT=out_dir, BENCH_NODE=str(node), **extra_env)
            log = open(os.path.join(out_dir, "agent_%d.log" % node), "w")
            self.logs.append(log)
            self.procs.append(subprocess.Popen(argv, env=env, stdout=log, stderr=log,
                                               stdin=subprocess.DEVNULL,
                                               start_new_session=True))

    def wait(self, timeout):
        deadline = time.monotonic() + timeout
        codes = []
        for p in self.procs:
            try:
                codes.append(p.wait(max(0.0, deadline - time.monotonic())))
            except subprocess.TimeoutExpired:
                codes.append(None)
        return codes

    def close(self):
        for p in self.procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        for log in self.logs:
            log.close()


def agent_argvs(kind, build, k, nnodes, worker_args):
    port = free_port()
    worker = os.path.join(build, "bench", "multinode", "mn_stamp_worker")
    argvs = []
    for node in range(1, k + 1):
        common = ["--nnodes", nnodes, "--nproc_per_node", "1", "--rdzv_backend", "c10d",
                  "--rdzv_endpoint", "127.0.0.1:%d" % port, "--rdzv_id", "bench"]
        if kind == "ddprun":
            argvs.append([os.path.join(build, "launcher", "ddprun")] + common +
                         ["--local_addr", "127.0.0.%d" % node, "--rdzv_conf", DDPRUN_CONF,
                          "--no_python", worker] + worker_args)
        else:
            # torch 1.13's torchrun has no --local_addr: every agent advertises the host name
            # (which resolves to 127.0.0.1 here) and connects from 127.0.0.1.
            argvs.append([PYTHON, TORCHRUN] + common +
                         ["--monitor_interval", "0.1", "--no_python", worker] + worker_args)
    return argvs


def run_launch(kind, build, k):
    with tempfile.TemporaryDirectory(prefix="mn_bench_") as out:
        env = {"TMPDIR": out, "PYTHON_EXEC": PYTHON}
        if kind == "floor":
            argvs = None
            t0 = time.time_ns()
            code = subprocess.run([os.path.join(build, "bench", "multinode", "mn_floor"), str(k),
                                   os.path.join(build, "bench", "multinode", "mn_stamp_worker")],
                                  env=dict(os.environ, BENCH_OUT=out), timeout=60).returncode
            codes = [code]
        else:
            argvs = agent_argvs(kind, build, k, str(k), [str(k)])
            t0 = time.time_ns()
            job = Job(argvs, out, env)
            try:
                codes = job.wait(180)
            finally:
                job.close()
        found = stamps(out, k)
        times = [t for v in found.values() for t in v]
        if len(times) != k or any(c != 0 for c in codes):
            print("%s K=%d failed: exit codes %s, %d stamps" % (kind, k, codes, len(times)),
                  file=sys.stderr)
            return None
        return (max(times) - t0) / 1e6


def run_node_loss(kind, build, k, timeout):
    """ms from kill -9 of node k's agent to the last survivor's worker running in a world of
    k-1 (None: not within `timeout`), and a note on what happened."""
    with tempfile.TemporaryDirectory(prefix="mn_bench_") as out:
        env = {"TMPDIR": out, "PYTHON_EXEC": PYTHON}
        argvs = agent_argvs(kind, build, k, "1:%d" % k, [str(k - 1), "120"])
        job = Job(argvs, out, env)
        try:
            if not wait_for_stamps(out, k, k, time.monotonic() + 120):
                return None, "the first round never ran"
            victim = job.procs[-1]
            t_kill = time.time_ns()
            os.kill(victim.pid, signal.SIGKILL)
            ok = wait_for_stamps(out, k - 1, k - 1, time.monotonic() + timeout)
            if not ok:
                alive = sum(1 for p in job.procs[:-1] if p.poll() is None)
                old = [int(name.rsplit("_", 1)[1]) for name in os.listdir(out)
                       if name.startswith("start_n") and "_w%d_" % k in name and
                       not name.startswith("start_n%d_" % k) and not name.endswith(".tmp")]
                running = sum(1 for pid in old if process_running(pid))
                note = ("no restart within %d s: %d of %d survivor agents still running, "
                        "%d of their workers still in the old world of %d"
                        % (timeout, alive, k - 1, running, k))
                if alive < k - 1:
                    note += "; survivors exited %s, %s" % (
                        [p.poll() for p in job.procs[:-1]], last_error(job, out))
                return None, note
            times = [t for v in stamps(out, k - 1).values() for t in v]
            codes = job.wait(60)[:-1]
            return (max(times) - t_kill) / 1e6, "survivors exited %s" % codes
        finally:
            job.close()


def run_node_loss_with_spare(build, k, timeout):
    """ms from kill -9 of node k's agent to the last worker of the round that replaced it with
    a waiting spare (node k+1) started, in a world of k again."""
    with tempfile.TemporaryDirectory(prefix="mn_bench_") as out:
        env = {"TMPDIR": out, "PYTHON_EXEC": PYTHON}
        argvs = agent_argvs("ddprun", build, k + 1, str(k), ["0", "120"])  # never exit alone
        job = Job(argvs[:k], out, env)
        spare = None
        try:
            if not wait_for_stamps(out, k, k, time.monotonic() + 120):
                return None, "the first round never ran"
            spare = Job(argvs[k:], out, env, first_node=k + 1)
            # The spare waits once its agent has joined; nothing announces that to the bench,
            # so give it a generous moment (outside the measured interval).
            time.sleep(1.0)
            t_kill = time.time_ns()
            os.kill(job.procs[-1].pid, signal.SIGKILL)
            # The new round: the spare's worker, and k-1 survivors' second workers.
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                found = stamps(out, k)
                spare_started = found.get("n%d" % (k + 1), [])
                again = [max(v) for n, v in found.items() if len(v) >= 2]
                if spare_started and len(again) >= k - 1:
                    return (max(spare_started + again) - t_kill) / 1e6, "spare took the place"
                time.sleep(0.01)
            return None, "no new round within %d s" % timeout
        finally:
            job.close()
            if spare:
                spare.close()


def median(values):
    good = [v for v in values if v is not None]
    if not good:
        return None, len(values)
    return statistics.median(good), len(values) - len(good)


def fmt(value):
    med, failed = value
    if med is None:
        return "failed"
    text = "%.0f ms" % med if med >= 10 else "%.1f ms" % med
    return text + (" (%d failed)" % failed if failed else "")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("build")
    parser.add_argument("--ks", default="2,4,8,16")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--loss-k", type=int, default=4)
    parser.add_argument("--loss-timeout", type=int, default=20)
    parser.add_argument("--no-torchrun", action="store_true")
    parser.add_argument("--loss-only", action="store_true", help="skip the launch benchmark")
    parser.add_argument("--spare", action="store_true",
                        help="also the node loss with a spare waiting (ddprun)")
    args = parser.parse_args()
    build = os.path.abspath(args.build)
    kinds = ["floor", "ddprun"] + ([] if args.no_torchrun else ["torchrun"])
    ks = [int(k) for k in args.ks.split(",")]

    launch = {(kind, k): [] for kind in kinds for k in ks}
    for rep in range(0 if args.loss_only else args.reps):
        order = kinds[rep % len(kinds):] + kinds[:rep % len(kinds)]  # alternate who goes first
        for k in ks:
            for kind in order:
                launch[(kind, k)].append(run_launch(kind, build, k))
                print("rep %d K=%d %s: %s" % (rep, k, kind, launch[(kind, k)][-1]),
                      file=sys.stderr)

    loss = {kind: [] for kind in kinds if kind != "floor"}
    if args.spare:
        loss["ddprun with a spare"] = []
    notes = {kind: set() for kind in loss}
    for rep in range(args.reps):
        for kind in loss:
            if kind == "ddprun with a spare":
                ms, note = run_node_loss_with_spare(build, args.loss_k, args.loss_timeout)
            else:
                ms, note = run_node_loss(kind, build, args.loss_k, args.loss_timeout)
            loss[kind].append(ms)
            notes[kind].add(note)
            print("loss rep %d %s: %s (%s)" % (rep, kind, ms, note), file=sys.stderr)

    commit = subprocess.run(["git", "-C", HERE, "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    print("Commit %s." % commit)
    print()
    if not args.loss_only:
        print_launch_table(args, kinds, ks, launch)
    print_loss_table(args, loss, notes)


def print_launch_table(args, kinds, ks, launch):
    print("Launch of K agents on loopback until the last worker runs (median of %d)" % args.reps)
    print()
    header = "| K | floor | ddprun | ddprun / floor |" + (
        "" if args.no_torchrun else " torchrun 1.13 |")
    print(header)
    print("|" + "---|" * (header.count("|") - 1))
    for k in ks:
        floor, ddp = median(launch[("floor", k)]), median(launch[("ddprun", k)])
        ratio = "%.1f×" % (ddp[0] / floor[0]) if floor[0] and ddp[0] else "-"
        row = "| %d | %s | %s | %s |" % (k, fmt(floor), fmt(ddp), ratio)
        if not args.no_torchrun:
            row += " %s |" % fmt(median(launch[("torchrun", k)]))
        print(row)
    print()


def print_loss_table(args, loss, notes):
    print("Node loss: %d agents, kill -9 of one (not the host) → survivors' workers running "
          "again in a world of %d; with a spare, in a world of %d with the spare (median of %d)"
          % (args.loss_k, args.loss_k - 1, args.loss_k, args.reps))
    print()
    print("| launcher | kill → survivors running | what happened |")
    print("|---|---|---|")
    for kind in loss:
        med = median(loss[kind])
        shown = fmt(med) if med[0] is not None else "none within %d s" % args.loss_timeout
        print("| %s | %s | %s |" % (kind, shown, "; ".join(sorted(notes[kind]))))


if __name__ == "__main__":
    main()
