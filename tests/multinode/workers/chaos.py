"""The chaos test's worker (tests/multinode/chaos_test.cc). Every start writes run_<...> (its
placement; see mn_util.marker_name) and start_<pid> (one per process ever started, so the test
can check afterwards that none of them is left). Then:

  first attempt (TORCHELASTIC_RESTART_COUNT 0): the worker with global RANK <rank> exits <code>
    once every other rank of the round runs (the ready_<rank>.fifo hand-off of fail_once.py);
    the others wait for their agent to stop them;
  later attempts: wait for one byte on <release fifo> (the test writes one per worker, and
    more), then exit 0.

Every wait is bounded (mn_util.WAIT_LIMIT_S, then exit 9).

usage: chaos.py <rank> <code> <release fifo>
"""
import os
import sys

import mn_util

fail_rank, code, release = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
mn_util.write_marker(mn_util.marker_name("run"), mn_util.placement())
mn_util.write_marker("start_{}".format(os.getpid()), mn_util.placement())
if mn_util.env_int("TORCHELASTIC_RESTART_COUNT") > 0:
    mn_util.wait_for_release(mn_util.open_release(release))
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
