"""A torch.distributed job in which one rank hangs inside a step (issue 22).

usage: torch_hang.py HUNG_RANK STEPS WHEN WAIT
Every rank trains STEPS steps of a tiny DistributedDataParallel model over gloo, writing the step
to $DDPRUN_HEARTBEAT_FILE at the start of each. In the last step global rank HUNG_RANK stops in
stuck_in_step() (a time.sleep, the frame its stack must show):
  WHEN=after   after that step's heartbeat: every rank reports the same step, so only what the
               ranks were doing tells the hung rank from those waiting for it;
  WHEN=before  before it: the hung rank is a step behind.
The other ranks wait for it in the step's synchronisation:
  WAIT=barrier   in dist.barrier();
  WAIT=backward  in DDP's gradient all_reduce inside loss.backward().
On a restart (TORCHELASTIC_RESTART_COUNT > 0) every rank finishes and writes
$DDPRUN_TEST_OUT/finished_<rank>. Bounded: SIGALRM ends a rank that waits longer than 60 s.
Self-contained (the multi-node tests run it too).
"""
import datetime
import os
import signal
import sys
import time

import torch
import torch.distributed as dist

HUNG, STEPS, WHEN, WAIT = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
BEAT = os.environ["DDPRUN_HEARTBEAT_FILE"]
signal.alarm(60)


def beat(step):
    with open(BEAT, "w") as f:
        f.write(f"{step}\n")


def stuck_in_step():
    time.sleep(120)


def main():
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
    rank = dist.get_rank()
    restarted = int(os.environ["TORCHELASTIC_RESTART_COUNT"]) > 0
    torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 1))
    for step in range(1, STEPS + 1):
        hang_here = not restarted and rank == HUNG and step == STEPS
        if hang_here and WHEN == "before":
            stuck_in_step()
        beat(step)
        if hang_here:
            stuck_in_step()
        loss = model(torch.ones(2, 4)).sum()
        if WAIT == "barrier":
            dist.barrier()
        loss.backward()
    if restarted:
        out = os.environ.get("DDPRUN_TEST_OUT")
        if out:
            with open(os.path.join(out, f"finished_{rank}"), "w") as f:
                f.write("ok")
    dist.destroy_process_group()


main()
