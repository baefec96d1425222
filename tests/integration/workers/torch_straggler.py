"""A torch.distributed job in which one rank is slower than the others (issue 23).

usage: torch_straggler.py SLOW_RANK STEPS
Every rank trains STEPS steps of a tiny DistributedDataParallel model over gloo. Each step it
"works" 50 ms (global rank SLOW_RANK: 500 ms, ten times as long; -1: no rank is slow), then writes
"<step> <busy seconds>" to $DDPRUN_HEARTBEAT_FILE, where busy is the time since its previous
step's synchronisation ended (the contract of heartbeat_watcher.h), then synchronises in DDP's
backward. Every rank steps at the slow rank's pace; only the busy times tell them apart.
Bounded: SIGALRM ends a rank that runs longer than 90 s. Self-contained (the multi-node tests
run it).
"""
import datetime
import os
import signal
import sys
import time

import torch
import torch.distributed as dist

SLOW, STEPS = int(sys.argv[1]), int(sys.argv[2])
BEAT = os.environ["DDPRUN_HEARTBEAT_FILE"]
signal.alarm(90)


def main():
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
    rank = dist.get_rank()
    work = 0.5 if rank == SLOW else 0.05
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 1))
    synced = None  # when the previous step's synchronisation ended
    for step in range(1, STEPS + 1):
        time.sleep(work)
        with open(BEAT, "w") as f:
            f.write(f"{step}\n" if synced is None else f"{step} {time.monotonic() - synced:.6f}\n")
        model(torch.ones(2, 4)).sum().backward()
        synced = time.monotonic()
    # Nobody leaves before every rank is done. Without this barrier, torch 2.x's gloo killed the
    # slow rank with SIGABRT at exit in 2 of about 20 runs under load: it finishes the last
    # all-reduce after its peers, which were already tearing their connections down.
    dist.barrier()
    del model
    dist.destroy_process_group()


main()
