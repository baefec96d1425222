"""A job that one node keeps failing (issue 36, "bad nodes kept out"). Every worker writes
run_<...> (see mn_util.marker_name) with its placement; on nodes other than --bad it then exits
0 at once. On node --bad:
  --mode fail      every attempt fails (exit 3): at once in the first attempt; in later ones
                   after one byte on $DDPRUN_TEST_OUT/release.fifo per worker, so that the test
                   starts its spare meanwhile;
  --mode exclude   local rank 1 asks to take the node out (ddprun.exclude_node) after one byte on
                   release.fifo; local rank 0 waits for its agent to stop it.
Every wait is bounded (mn_util.WAIT_LIMIT_S, then exit 9).
"""
import argparse
import os
import sys

import ddprun
import mn_util

parser = argparse.ArgumentParser()
parser.add_argument("--bad", required=True)
parser.add_argument("--mode", choices=("fail", "exclude"), required=True)
args = parser.parse_args()

if mn_util.NODE != args.bad:
    mn_util.write_marker(mn_util.marker_name("run"), mn_util.placement())
    sys.exit(0)

release = os.path.join(mn_util.OUT, "release.fifo")
restart = mn_util.env_int("TORCHELASTIC_RESTART_COUNT")
local_rank = mn_util.env_int("LOCAL_RANK")
if args.mode == "fail":
    fd = mn_util.open_release(release) if restart > 0 else None
    mn_util.write_marker(mn_util.marker_name("run"), mn_util.placement())
    if fd is not None:
        mn_util.wait_for_release(fd)
    sys.exit(3)
if local_rank != 1:
    mn_util.write_marker(mn_util.marker_name("run"), mn_util.placement())
    mn_util.wait_for_agent()
fd = mn_util.open_release(release)
mn_util.write_marker(mn_util.marker_name("run"), mn_util.placement())
mn_util.wait_for_release(fd)
ddprun.exclude_node("ECC errors on GPU 1")
