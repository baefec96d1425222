"""A worker for a rank's request to take its node out of the job (issue 36): records
attempt_<restart>_<rank> (its pid) first; global rank <rank> (default 0) then calls
ddprun.exclude_node(<reason>); the others wait to be stopped.

usage: exclude_node.py <reason> [<rank>]
"""
import os
import signal
import sys

import ddprun
from worker_util import restart_count, write_marker

write_marker(f"attempt_{restart_count()}_{os.environ['RANK']}", str(os.getpid()))
if int(os.environ["RANK"]) == (int(sys.argv[2]) if len(sys.argv) > 2 else 0):
    ddprun.exclude_node(sys.argv[1])
while True:  # until the agent stops it
    signal.pause()
