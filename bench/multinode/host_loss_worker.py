"""host_loss_bench.py's worker: gloo all_reduce in a loop, each step's wall time and world size
appended to the file named on the command line (one line per step, flushed). A lost peer fails
the collective (the agent restarts the worker) or the agent stops it for a new round.
"""
import datetime
import sys
import time

import torch
import torch.distributed as dist

dist.init_process_group("gloo", init_method="env://", timeout=datetime.timedelta(seconds=60))
world = dist.get_world_size()
step = torch.ones(1)
with open(sys.argv[1], "a", buffering=1) as out:
    while True:
        dist.all_reduce(step)
        out.write(f"{time.time():.6f} {world}\n")
        time.sleep(0.02)  # the step's "compute": paces the loop
