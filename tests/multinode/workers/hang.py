"""Progress on several nodes, then one global rank stops first.

usage: hang.py HUNG_RANK STEPS
Every rank writes its step to $DDPRUN_HEARTBEAT_FILE STEPS times; then global rank HUNG_RANK
stops (stuck_here, the frame its stack shows) while the others go on to step STEPS + 1 (the
next collective, which never completes) and wait there without heartbeats. On a restart every
rank runs STEPS steps and exits 0 (marker finished_n<node>_r<rank>). Bounded: SIGALRM at 60 s.
"""
import os
import signal
import sys
import time

import mn_util

HUNG, STEPS = int(sys.argv[1]), int(sys.argv[2])
BEAT = os.environ["DDPRUN_HEARTBEAT_FILE"]
RANK = mn_util.env_int("RANK")
signal.alarm(60)


def beat(step):
    with open(BEAT, "w") as f:
        f.write(f"{step}\n")


def stuck_here():
    while True:
        signal.pause()


for step in range(1, STEPS + 1):
    beat(step)
    time.sleep(0.02)
if mn_util.env_int("TORCHELASTIC_RESTART_COUNT") > 0:
    mn_util.write_marker(f"finished_n{mn_util.NODE}_r{RANK}", {"ok": True})
    sys.exit(0)
if RANK == HUNG:
    stuck_here()
beat(STEPS + 1)
signal.pause()
