"""A real torch.distributed job: gloo all_reduce of (RANK + 1) over init_method="env://"; writes
allreduce_n<node>_l<local_rank> with the sum, the group's world size and the placement."""
import datetime

import torch
import torch.distributed as dist

import mn_util

dist.init_process_group("gloo", init_method="env://", timeout=datetime.timedelta(seconds=30))
value = torch.tensor([float(dist.get_rank() + 1)])
dist.all_reduce(value)
info = mn_util.placement()
info["sum"] = value.item()
info["dist_rank"] = dist.get_rank()
info["dist_world_size"] = dist.get_world_size()
mn_util.write_marker("allreduce_n{}_l{}".format(mn_util.NODE, info["LOCAL_RANK"]), info)
dist.destroy_process_group()
