"""A job stuck at step 1234 on every attempt (--max_no_progress_restarts). Every rank reports
step 1234; then the rank <fail_rank> exits 1 once every other rank has reported it (so that
each node has seen its ranks reach the step), and the others wait for their agent to stop them.

The hand-off is event-driven: the test creates ready_<restart>_<rank>.fifo for every other rank
and attempt; each of those opens its FIFO for writing after its heartbeat (which blocks until
the failing rank opens it for reading).

usage: stuck_at_step.py <fail_rank>
"""
import os
import sys

import ddprun
import mn_util

fail_rank = int(sys.argv[1])
restart = mn_util.env_int("TORCHELASTIC_RESTART_COUNT")
mn_util.write_marker("attempt_{}_{}".format(restart, mn_util.env_int("RANK")), mn_util.placement())
mn_util.arm_wait_limit()
ddprun.heartbeat(1234)
rank, world = mn_util.env_int("RANK"), mn_util.env_int("WORLD_SIZE")
if rank == fail_rank:
    for other in range(world):
        if other != fail_rank:
            with open(os.path.join(mn_util.OUT, "ready_{}_{}.fifo".format(restart, other)), "rb") as f:
                f.read(1)
    sys.exit(1)
with open(os.path.join(mn_util.OUT, "ready_{}_{}.fifo".format(restart, rank)), "wb") as f:
    f.write(b"x")
mn_util.wait_for_agent()
