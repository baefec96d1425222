"""A worker that makes progress, then one rank stops making it.

usage: hang_worker.py HUNG_RANK STEPS
Every rank writes its step to $DDPRUN_HEARTBEAT_FILE (the one-line heartbeat) STEPS times,
meeting the other ranks at a FIFO barrier after each step as a collective would. Then local
rank HUNG_RANK stops: it records when it sent its last heartbeat (last_beat_<rank>, CLOCK_REALTIME
seconds) and blocks in stuck_here(), the frame its stack must show; the others go on into the
next step's "collective" and wait there forever, sending no heartbeat either. Waits are bounded
(SIGALRM after 60 s) so that a test that goes wrong does not hang.
On a restart (TORCHELASTIC_RESTART_COUNT > 0) every rank runs STEPS steps and exits 0.
"""
import os
import signal
import sys
import time

from worker_util import local_rank, restart_count, write_marker

HUNG_RANK, STEPS = int(sys.argv[1]), int(sys.argv[2])
BEAT = os.environ["DDPRUN_HEARTBEAT_FILE"]
signal.alarm(60)


def beat(step):
    with open(BEAT, "w") as f:
        f.write(f"{step}\n")
    return time.time()  # once the heartbeat is written (closed)


def stuck_here():
    while True:
        signal.pause()


rank = local_rank()
for step in range(1, STEPS + 1):
    last_beat = beat(step)
    time.sleep(0.02)  # the step's work
if restart_count() > 0:
    write_marker(f"finished_{rank}", "ok")
    sys.exit(0)
if rank == HUNG_RANK:
    write_marker(f"last_beat_{rank}", repr(last_beat))
    stuck_here()
beat(STEPS + 1)  # entered the next step's collective; it never completes
signal.pause()
