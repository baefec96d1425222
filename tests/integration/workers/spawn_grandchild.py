"""Starts a long-running child (/bin/sleep) and records its pid in grandchild_<local_rank>.

usage: spawn_grandchild.py [--setsid] [--wait]
--setsid: the child leaves the worker's process group and session (start_new_session).
--wait: the worker then waits for a signal instead of exiting 0 at once.
"""
import signal
import subprocess
import sys

from worker_util import local_rank, write_marker

child = subprocess.Popen(["/bin/sleep", "300"], start_new_session="--setsid" in sys.argv,
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
write_marker(f"grandchild_{local_rank()}", str(child.pid))
if "--wait" in sys.argv:
    while True:
        signal.pause()
