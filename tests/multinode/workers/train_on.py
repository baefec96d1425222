"""Training that must outlive a lost node: gloo all_reduce of (RANK + 1) over init_method="env://",
then writes allreduce_<...> (see mn_util.marker_name) with the sum and the group's size. With
--exit-when-world W it leaves once WORLD_SIZE == W; otherwise it goes on with one all_reduce per
step until the world changes under it (a lost peer fails the collective, or the agent stops it
for a new round). Every wait is bounded (mn_util.WAIT_LIMIT_S, then exit 9).
"""
import argparse
import datetime
import gc
import time

import torch
import torch.distributed as dist

import mn_util

parser = argparse.ArgumentParser()
parser.add_argument("--exit-when-world", type=int, required=True)
args = parser.parse_args()

dist.init_process_group("gloo", init_method="env://", timeout=datetime.timedelta(seconds=30))
value = torch.tensor([float(dist.get_rank() + 1)])
dist.all_reduce(value)
info = mn_util.placement()
info["sum"] = value.item()
info["dist_world_size"] = dist.get_world_size()
mn_util.write_marker(mn_util.marker_name("allreduce"), info)

if mn_util.env_int("WORLD_SIZE") != args.exit_when_world:
    mn_util.arm_wait_limit()
    step = torch.ones(1)
    while True:
        dist.all_reduce(step)
        time.sleep(0.05)  # the step's "compute": paces the loop, synchronises nothing

gc.collect()
dist.destroy_process_group()
