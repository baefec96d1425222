"""Worker failure on one node. In the first attempt (TORCHELASTIC_RESTART_COUNT 0) the worker
with global RANK <rank> exits <code> once every other rank of the round runs; the others wait
for their agent to stop them. From the first restart on, every worker exits 0.

The hand-off is event-driven: the test creates ready_<rank>.fifo for every other rank; each of
those opens its FIFO for writing (which blocks until the failing rank opens it for reading).

usage: fail_once.py <rank> <code>
"""
import os
import sys

import mn_util

fail_rank, code = int(sys.argv[1]), int(sys.argv[2])
mn_util.write_marker(mn_util.marker_name("run"), mn_util.placement())
if mn_util.env_int("TORCHELASTIC_RESTART_COUNT") > 0:
    sys.exit(0)
mn_util.arm_wait_limit()
rank, world = mn_util.env_int("RANK"), mn_util.env_int("WORLD_SIZE")
if rank == fail_rank:
    for other in range(world):
        if other != fail_rank:
            with open(os.path.join(mn_util.OUT, "ready_{}.fifo".format(other)), "rb") as f:
                f.read(1)
    sys.exit(code)
with open(os.path.join(mn_util.OUT, "ready_{}.fifo".format(rank)), "wb") as f:
    f.write(b"x")
mn_util.wait_for_agent()
