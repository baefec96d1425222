"""Workers for the preload tests (issue 24).

usage: preload_helpers.py hello            prints "hello from <RANK> (<how>)" and exits 0, where
                                           <how> is "forked" (from the template) or "fresh"
       preload_helpers.py kill_template    attempt 0: rank 0 SIGKILLs the node's preload
                                           template, waits until it is gone, and every rank
                                           exits 3 (the others once rank 0 is done); later attempts write
                                           $DDPRUN_TEST_OUT/after_<RANK>_<restart> and exit 0;
                                           started_<RANK> and after_<RANK>_<restart> hold <how>
       preload_helpers.py sleep            writes $DDPRUN_TEST_OUT/running_<RANK> (its pid, whole),
                                           then sleeps
"""
import os
import signal
import sys
import time

from worker_util import started_as

what = sys.argv[1]
rank = os.environ["RANK"]
restart = int(os.environ["TORCHELASTIC_RESTART_COUNT"])
out = os.environ.get("DDPRUN_TEST_OUT", "")


def start_time(pid):
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[19])


def template_pids():
    """The node's preload template: the oldest of the agent's children that run its program
    (forked workers show the template's command line too, so the oldest is the template)."""
    agent = os.getppid()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read()
            started = start_time(entry)
        except OSError:
            continue
        if ppid == agent and b"ddprun-preload-" in cmdline and b"template.py" in cmdline:
            found.append((started, int(entry)))
    return [min(found)[1]] if found and min(found)[0] < start_time(os.getpid()) else []


if what == "hello":
    print(f"hello from {rank} ({started_as()})")
elif what == "kill_template":
    if restart == 0:
        with open(os.path.join(out, f"started_{rank}"), "w") as f:
            f.write(started_as())
        if rank == "0":
            # Once both ranks run: the template is idle, not in the middle of a fork.
            deadline = time.monotonic() + 30
            while not os.path.exists(os.path.join(out, "started_1")):
                assert time.monotonic() < deadline, "rank 1 never started"
                time.sleep(0.01)
            pids = template_pids()
            assert pids, "no template found"
            for pid in pids:
                os.kill(pid, signal.SIGKILL)
            deadline = time.monotonic() + 30
            while template_pids() and time.monotonic() < deadline:
                time.sleep(0.01)
            with open(os.path.join(out, "template_killed"), "w") as f:
                f.write("ok")
        else:
            # Not before rank 0 is done: a failure of this rank stops rank 0 at once.
            deadline = time.monotonic() + 30
            while not os.path.exists(os.path.join(out, "template_killed")):
                assert time.monotonic() < deadline, "rank 0 never killed the template"
                time.sleep(0.01)
        sys.exit(3)
    with open(os.path.join(out, f"after_{rank}_{restart}"), "w") as f:
        f.write(started_as())
elif what == "sleep":
    # Written whole, then renamed into place: whoever sees the file reads the whole pid.
    path = os.path.join(out, f"running_{rank}")
    with open(path + ".tmp", "w") as f:
        f.write(str(os.getpid()))
    os.replace(path + ".tmp", path)
    time.sleep(300)
