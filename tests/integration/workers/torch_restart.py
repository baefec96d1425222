"""A torch job that fails once: every attempt runs init_process_group("gloo") on the agent's
store and all_reduces (rank + 1); in the first attempt rank 1 then exits 3. Writes
allreduce_<rank>_<restart> with the result and the world size, and started_<rank>_<restart>
with how the worker was started ("forked" from --preload's template, or "fresh")."""
import datetime
import sys

import torch
import torch.distributed as dist

from worker_util import restart_count, started_as, write_marker

dist.init_process_group("gloo", init_method="env://", timeout=datetime.timedelta(seconds=30))
rank = dist.get_rank()
value = torch.tensor([float(rank + 1)])
dist.all_reduce(value)
write_marker(f"allreduce_{rank}_{restart_count()}", f"{value.item()} {dist.get_world_size()}")
write_marker(f"started_{rank}_{restart_count()}", started_as())
dist.barrier()  # nobody leaves before every rank has its result
dist.destroy_process_group()
if restart_count() == 0 and rank == 1:
    sys.exit(3)
