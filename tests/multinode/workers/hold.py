"""A worker whose life the test controls. Writes run_<...> (see mn_util.marker_name) with its
placement, then:
  --exit-when-world W   exits 0 at once when WORLD_SIZE == W; otherwise waits for its agent to
                        stop it (a restart into another round);
  --release FIFO        (instead) waits for one byte on FIFO, then exits 0.
  --beat STEP           first sends one heartbeat ($DDPRUN_HEARTBEAT_FILE) naming step
                        STEP + RANK, before the run_ marker.
Every wait is bounded (mn_util.WAIT_LIMIT_S, then exit 9).
"""
import argparse
import os

import mn_util

parser = argparse.ArgumentParser()
parser.add_argument("--exit-when-world", type=int)
parser.add_argument("--release")
parser.add_argument("--beat", type=int)
args = parser.parse_args()

if args.beat is not None:
    with open(os.environ["DDPRUN_HEARTBEAT_FILE"], "w") as f:
        f.write(f"{args.beat + mn_util.env_int('RANK')}\n")

release_fd = mn_util.open_release(args.release) if args.release else None
mn_util.write_marker(mn_util.marker_name("run"), mn_util.placement())
if release_fd is not None:
    mn_util.wait_for_release(release_fd)
elif args.exit_when_world is not None and mn_util.env_int("WORLD_SIZE") == args.exit_when_world:
    pass
else:
    mn_util.wait_for_agent()
