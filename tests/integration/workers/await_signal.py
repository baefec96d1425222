"""Waits for a signal: writes ready_<local_rank> (its pid) once its handlers are installed; on
SIGTERM, SIGINT or SIGHUP writes signal_<local_rank> (the signal number) and exits 128+signal.

--keep-running: record the signal but go on running (only SIGKILL ends it).
"""
import os
import signal
import sys

from worker_util import local_rank, write_marker

rank = local_rank()


def on_signal(signo, frame):
    write_marker(f"signal_{rank}", str(signo))
    if "--keep-running" not in sys.argv:
        os._exit(128 + signo)


for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    signal.signal(s, on_signal)
write_marker(f"ready_{rank}", str(os.getpid()))
while True:
    signal.pause()
