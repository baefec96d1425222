"""A worker that raises while its sibling still runs (issue 34: failure known at the exception).

usage: raise_early.py
Rank 0 waits (bounded, 60 s) and records SIGTERM as a marker "sigterm_0" when ddprun stops it.
Rank 1 registers an atexit handler, then raises. Its handler runs during the interpreter's
shutdown, after the exception was reported: it waits (bounded, 30 s) for "sigterm_0", and
writes "sibling_stopped_first" when it appears, that is when the agent stopped rank 0 while the
failing interpreter was still shutting down. Plain Python (no torch).
"""
import atexit
import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from worker_util import local_rank, out_path, write_marker  # noqa: E402

if local_rank() == 0:
    def on_sigterm(signo, frame):
        write_marker("sigterm_0")
        os._exit(128 + signo)

    signal.signal(signal.SIGTERM, on_sigterm)
    write_marker("ready_0")
    signal.sigtimedwait([signal.SIGUSR2], 60)  # never sent: a bounded wait for SIGTERM
    sys.exit(0)


def wait_for_sibling():
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # poll with a deadline: no event tells this process
        if os.path.exists(out_path("sigterm_0")):
            write_marker("sibling_stopped_first")
            return
        time.sleep(0.01)


atexit.register(wait_for_sibling)
while not os.path.exists(out_path("ready_0")):  # rank 0's handler is in place
    time.sleep(0.01)
raise RuntimeError("raise_early: this script failed on purpose")
