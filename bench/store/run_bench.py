"""The job's store at scale (issues 25 and 39): ddprun's store against torch 2.x's own TCPStore
server (libuv) and torch 1.13's, under the same load, in one run.

usage: /usr/bin/python3 bench/store/run_bench.py <build dir> [--clients 1024,4096,16384]
                                                 [--reps 3] [--servers ddprun,torch2,torch1.13]
                                                 [--limit SECONDS] [--system-resolver]
                                                 [--clients-per-process 1024]
                                                 [--somaxconn 65535]

For each number of clients N and each server: the server starts on a free loopback port (ddprun's
as bench/store/store_server, torch's as TCPStore(is_master=True) in its own interpreter), then N
clients (build/bench/store/store_load, 1,024 per process by default, all started at once) each
play one rank's init_process_group traffic (store_load.cc). Measured: from just before the client
processes start until the last client is released; the server's CPU (utime + stime) and peak
RSS (VmHWM) from /proc, read once the server has closed every client's connection after the
clients hung up (so that each server's CPU includes its share of the teardown: a server that
handles hang-ups late would otherwise look cheaper). A run not done within --limit seconds
(default 300) is ended and reported as such. torch 2.x and ddprun are spoken to in the 2.x
dialect (VALIDATE, PING), torch 1.13 in its own. Medians of the repetitions.

No resolver is involved. torch 2.x's libuv server looks up the name of every peer it accepts
(getnameinfo on the client's address, for its logs), and the clients come from 127.0.0.1-250
(one address has too few ports for 98,304 clients), which /etc/hosts does not name (nor the
IPv4-mapped form of 127.0.0.1 that its dual-stack socket sees): each accept then waits for the
machine's name server, and where that one is slow or unreachable
(5 s per dropped query here) the figure measures the resolver, not the server. So the script
runs itself in a private mount namespace (`unshare --mount`, which needs root) in which
/etc/resolv.conf names 127.0.0.1, where nothing listens on port 53: every lookup fails at once
(the ICMP port-unreachable answers the query), as it does on a host whose resolver answers
"no such name" promptly. It checks that this holds before measuring. --system-resolver keeps
the machine's resolver (and its delays) instead.

No accept queue of this machine's either. The kernel caps every listening socket's queue at
net.core.somaxconn (4,096 by default); torch's libuv server asks for at least 65,535 on its one
socket, ddprun's store for 4,096 on each of its four. With the default cap, 16,384 clients
connecting at once overflow libuv's one queue and the dropped ones retry a second later: a
lead for ddprun that comes from the machine's setting, not from the server. So the script also
runs in a private network namespace (`unshare --net`: its own loopback, 127.0.0.0/8, brought
up by the script) whose somaxconn is --somaxconn (65,535 by default: each server gets the queue
it asks for, as on a host tuned for large jobs). --system-resolver skips both namespaces.
"""
import argparse
import json
import os
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
VENV_PYTHON = os.path.join(REPO, ".venv", "torch2", "bin", "python")
# Clients per load generator process (--clients-per-process). One process is one thread on one
# core; with 4,096 clients in it, that core is saturated (its CPU equals the wall time) and both
# servers finish when the generator does, so the figure measures the generator, not the server
# (docs/benchmarks.md). 1,024 a process leaves the server as the part that sets the pace, as
# in a job, whose ranks are processes of their own on other machines. At most ~19,000: a
# process's descriptors here.
PER_PROCESS = 1024
# Set in the copy of this script that runs in the private mount namespace.
ISOLATED_ENV = "DDPRUN_STORE_BENCH_ISOLATED_RESOLVER"
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


def open_sockets(pid):
    count = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:"):
                count += 1
        except OSError:
            pass  # closed while we looked
    return count


def wait_for_hangups(pid, sockets_before, deadline):
    """Polls (there is no event to wait on in another process) until the server holds no more
    sockets than before the clients came, or the deadline passes; returns whether it did."""
    while time.monotonic() < deadline:
        if open_sockets(pid) <= sockets_before:
            return True
        time.sleep(0.02)
    return False


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


def run_once(kind, build, clients, limit, per_process):
    proc, port = start_server(kind, build)
    try:
        cpu0, _ = usage(proc.pid)
        sockets_before = open_sockets(proc.pid)
        dialect = "legacy" if kind == "torch1.13" else "validated"
        load = os.path.join(build, "bench", "store", "store_load")
        # The load generators' CPU: RUSAGE_CHILDREN counts the children waited for, and the
        # server is waited for only after they are.
        load0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        begin = time.time()
        gens = []
        for first in range(0, clients, per_process):
            count = min(per_process, clients - first)
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
        load1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        load_cpu = (load1.ru_utime + load1.ru_stime) - (load0.ru_utime + load0.ru_stime)
        if not wait_for_hangups(proc.pid, sockets_before, time.monotonic() + 30):
            print(f"{clients} {kind}: the server still held {open_sockets(proc.pid)} sockets 30 s "
                  "after the clients hung up; CPU read anyway", file=sys.stderr)
        cpu1, hwm = usage(proc.pid)
        released = sum(r["released"] for r in results)
        errors = [r["first_error"] for r in results if r["errors"]]
        if released != clients or errors:
            raise RuntimeError(f"{kind} {clients}: {released} released; errors: {errors}")
        return max(r["last_release"] for r in results) - begin, cpu1 - cpu0, hwm, load_cpu
    finally:
        proc.stdin.close()
        proc.wait(timeout=60)


def isolate(somaxconn):
    """Runs this script again in private mount and network namespaces: /etc/resolv.conf names
    127.0.0.1, and the loopback's accept queues hold up to `somaxconn` (see the docstring);
    does not return."""
    fd, conf = tempfile.mkstemp(prefix="ddprun-bench-resolv-", suffix=".conf")
    with os.fdopen(fd, "w") as f:
        f.write("# bench/store/run_bench.py: no name server; every lookup fails at once\n"
                "nameserver 127.0.0.1\noptions timeout:1 attempts:1\n")
    os.chmod(conf, 0o644)
    # The bind mount holds the file's inode: its name can go at once.
    inner = ('mount --bind "$0" /etc/resolv.conf && rm -f "$0" && ip link set lo up && '
             f'sysctl -qw net.core.somaxconn={somaxconn} && exec "$@"')
    env = dict(os.environ, **{ISOLATED_ENV: "1"})
    argv = ["unshare", "--mount", "--net", "--propagation", "private", "sh", "-c", inner, conf,
            sys.executable, os.path.abspath(__file__), *sys.argv[1:]]
    try:
        os.execvpe("unshare", argv, env)
    except OSError as e:
        os.unlink(conf)
        sys.exit(f"run_bench.py: cannot start unshare(1) for private namespaces: {e} "
                 "(needs util-linux, iproute2 and root; or pass --system-resolver)")


def check_resolver_fails_fast():
    """The reverse lookup torch's server makes for a client at 127.0.0.5 must fail at once."""
    begin = time.monotonic()
    try:
        socket.getnameinfo(("127.0.0.5", 1), socket.NI_NAMEREQD)
        found = True
    except OSError:
        found = False
    took = time.monotonic() - begin
    if took > 0.1:
        sys.exit(f"run_bench.py: a reverse lookup of 127.0.0.5 took {took:.2f} s inside the "
                 "private namespace; the resolver is still involved (/etc/resolv.conf: "
                 f"{open('/etc/resolv.conf').read()!r})")
    print(f"resolver: isolated (reverse lookup of 127.0.0.5 "
          f"{'answered' if found else 'failed'} in {took * 1000:.1f} ms)", file=sys.stderr)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("build")
    parser.add_argument("--clients", default="1024,4096,16384")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--servers", default="ddprun,torch2,torch1.13")
    parser.add_argument("--limit", type=float, default=300)
    parser.add_argument("--clients-per-process", type=int, default=PER_PROCESS,
                        help="clients per load generator process")
    parser.add_argument("--somaxconn", type=int, default=65535,
                        help="the accept queue limit in the private network namespace")
    parser.add_argument("--system-resolver", action="store_true",
                        help="keep the machine's resolver (torch's server then waits on it)")
    args = parser.parse_args()
    if not args.system_resolver:
        if os.environ.get(ISOLATED_ENV) != "1":
            isolate(args.somaxconn)
        check_resolver_fails_fast()
    build = os.path.abspath(args.build)
    kinds = args.servers.split(",")
    rows = []
    for clients in [int(c) for c in args.clients.split(",")]:
        got = {k: [] for k in kinds}
        for rep in range(args.reps):
            for kind in (kinds if rep % 2 == 0 else list(reversed(kinds))):
                try:
                    r = run_once(kind, build, clients, args.limit, args.clients_per_process)
                except NotReleased as e:
                    print(f"{clients} {kind} rep {rep}: {e}", file=sys.stderr)
                    continue
                got[kind].append(r)
                print(f"{clients} {kind} rep {rep}: released all in {r[0]:.3f} s, server CPU "
                      f"{r[1]:.2f} s, peak RSS {r[2]:.0f} MiB, load generators' CPU {r[3]:.2f} s",
                      file=sys.stderr)
        for kind in kinds:
            if not got[kind]:
                rows.append((clients, kind, None, None, None, None))
                continue
            med = [statistics.median(x[i] for x in got[kind]) for i in range(4)]
            rows.append((clients, kind, *med))
    with open("/proc/sys/net/core/somaxconn") as f:
        somaxconn = int(f.read())
    print(f"\n{args.clients_per_process:,} clients per load generator process, "
          f"net.core.somaxconn {somaxconn:,}")
    print(f"\n| clients | server | all released (median of {args.reps}) | server CPU | "
          "server peak RSS | load generators' CPU |")
    print("|---:|---|---:|---:|---:|---:|")
    for clients, kind, t, cpu, hwm, load_cpu in rows:
        if t is None:
            print(f"| {clients:,} | {kind} | not all within {args.limit:.0f} s | | | |")
        else:
            print(f"| {clients:,} | {kind} | {t:.3f} s | {cpu:.2f} s | {hwm:.0f} MiB | "
                  f"{load_cpu:.2f} s |")


if __name__ == "__main__":
    main()
