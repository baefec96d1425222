"""Shared helpers for the integration tests' Python workers (plain Python, no torch).

Workers report to the test through files in $DDPRUN_TEST_OUT: markers are written atomically
(temp file, then rename), so a marker that exists is complete. Hand-offs between workers use
FIFOs that the test creates: opening one blocks until the other side opens it, so nothing
sleeps or polls.
"""
import os

OUT = os.environ["DDPRUN_TEST_OUT"]


def out_path(name):
    return os.path.join(OUT, name)


def write_marker(name, text=""):
    path = out_path(name)
    temp = path + ".tmp"
    with open(temp, "w") as f:
        f.write(text)
    os.rename(temp, path)


def local_rank():
    return int(os.environ["LOCAL_RANK"])


def restart_count():
    return int(os.environ["TORCHELASTIC_RESTART_COUNT"])


def signal_ready(fifo_name):
    """Tells the worker blocked in wait_ready(fifo_name) to go on (blocks until it listens)."""
    with open(out_path(fifo_name), "wb") as f:
        f.write(b"x")


def wait_ready(fifo_name):
    """Blocks until some worker calls signal_ready(fifo_name)."""
    with open(out_path(fifo_name), "rb") as f:
        f.read(1)


def last_rank_fails_after_the_others(exit_code):
    """The last local rank waits until every other rank has called this (through done_<rank>.fifo,
    which the test creates), then exits with `exit_code`; the others return at once after
    telling it. So every rank finishes its work before the failure stops the group."""
    world = int(os.environ["LOCAL_WORLD_SIZE"])
    rank = local_rank()
    if rank != world - 1:
        signal_ready(f"done_{rank}.fifo")
        return
    for other in range(world - 1):
        wait_ready(f"done_{other}.fifo")
    raise SystemExit(exit_code)


def started_as():
    """"forked" when this process is a fork of ddprun's --preload template, "fresh" when it was
    exec'd for this worker. A fork keeps its parent's command line (docs/preload.md), the
    template's `python3 -u /tmp/ddprun-preload-XXXX/template.py`; os.environ and sys.argv are the
    worker's own either way."""
    with open("/proc/self/cmdline", "rb") as f:
        argv = f.read().split(b"\0")
    forked = any(arg.endswith(b"/template.py") and b"ddprun-preload-" in arg for arg in argv)
    return "forked" if forked else "fresh"
