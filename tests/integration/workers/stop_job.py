"""Workers for ddprun's failures that must not be restarted (issue 36). Each records
attempt_<restart>_<rank> (its pid) first (the global rank: unique across nodes).

usage: stop_job.py stop <reason> [<rank>]   global rank <rank> (default 0) calls
                                   ddprun.stop_job(<reason>); the others wait to be stopped
       stop_job.py same            reports step 1234, then exits 1 (every attempt fails there)
       stop_job.py progress        reports step 100 * (restart + 1), then exits 1
"""
import os
import signal
import sys

import ddprun
from worker_util import restart_count, write_marker

mode = sys.argv[1]
write_marker(f"attempt_{restart_count()}_{os.environ['RANK']}", str(os.getpid()))
if mode == "stop":
    if int(os.environ["RANK"]) == (int(sys.argv[3]) if len(sys.argv) > 3 else 0):
        ddprun.stop_job(sys.argv[2])
    while True:  # until the agent stops it
        signal.pause()
step = 1234 if mode == "same" else 100 * (restart_count() + 1)
ddprun.heartbeat(step)
sys.exit(1)
