"""Worker failure on the test's signal. In the first attempt (TORCHELASTIC_RESTART_COUNT 0) the
worker with global RANK <rank> waits for one byte on the FIFO <fail_fifo> and then exits <code>;
the others wait for their agent to stop them. From the first restart on, every worker waits for
one byte on <done_fifo> and exits 0. So the test decides when the failure happens and when the
restarted job ends, with observers (Prometheus) watching in between.

usage: fail_on_release.py <rank> <code> <fail_fifo> <done_fifo>
"""
import sys

import mn_util

fail_rank, code, fail_fifo, done_fifo = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
restarted = mn_util.env_int("TORCHELASTIC_RESTART_COUNT") > 0
failing = not restarted and mn_util.env_int("RANK") == fail_rank
release_fd = mn_util.open_release(done_fifo if restarted else fail_fifo) if (restarted or failing) else None
mn_util.write_marker(mn_util.marker_name("run"), mn_util.placement())
if restarted:
    mn_util.wait_for_release(release_fd)
    sys.exit(0)
if failing:
    mn_util.wait_for_release(release_fd)
    sys.exit(code)
mn_util.wait_for_agent()
