"""A real torch.distributed job: gloo all_reduce of (rank + 1) over env:// rendezvous; writes
the result to allreduce_<rank>."""
import datetime

import torch
import torch.distributed as dist

from worker_util import write_marker

dist.init_process_group("gloo", init_method="env://", timeout=datetime.timedelta(seconds=30))
rank = dist.get_rank()
value = torch.tensor([float(rank + 1)])
dist.all_reduce(value)
write_marker(f"allreduce_{rank}", f"{value.item()} {dist.get_world_size()}")
dist.destroy_process_group()
