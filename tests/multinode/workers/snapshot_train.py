"""Training that resumes from snapshots on node-local disks (issue 37): a DDP model trained for
--steps steps on data that depends only on (step, RANK), a snapshot of the model and optimizer
after every step in $DDPRUN_TEST_OUT/snap_<run>/node<N> (this node's own directory), through
ddprun.save_snapshot / ddprun.load_latest_snapshot, the tutorial's two calls.

Every worker writes start_<run>_<...> (mn_util.marker_name) with its RANK and the step it starts
at. With --pause-at K, a run that started from scratch waits after step K's snapshot is on disk:
each worker writes paused_<run>_<...> and reads one byte from release.fifo (the test kills a node
meanwhile). Rank 0 writes final_<run> with the weights when the last step is done.
"""
import argparse
import datetime
import gc
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

import ddprun
import mn_util

parser = argparse.ArgumentParser()
parser.add_argument("--run", required=True)
parser.add_argument("--steps", type=int, required=True)
parser.add_argument("--pause-at", type=int, default=0)
args = parser.parse_args()

mn_util.arm_wait_limit()
directory = os.path.join(mn_util.OUT, f"snap_{args.run}", f"node{mn_util.NODE}")
dist.init_process_group("gloo", init_method="env://", timeout=datetime.timedelta(seconds=30))
rank = dist.get_rank()
torch.manual_seed(0)
# One parameter: one gradient bucket laid out the same way in every process, so that the
# all-reduce adds the ranks' gradients in the same order before and after the resume.
model = torch.nn.Linear(8, 4, bias=False).double()
ddp = DistributedDataParallel(model)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)

start = 0
snapshot = ddprun.load_latest_snapshot(directory)
if snapshot is not None:
    model.load_state_dict(snapshot["MODEL_STATE"])
    optimizer.load_state_dict(snapshot["OPTIMIZER_STATE"])
    start = snapshot["STEPS_RUN"]
info = mn_util.placement()
info["start"] = start
mn_util.write_marker(mn_util.marker_name(f"start_{args.run}"), info)

for step in range(start, args.steps):
    data = torch.Generator().manual_seed(1000 * step + rank)
    x = torch.randn(16, 8, generator=data, dtype=torch.float64)
    y = torch.sin(x.sum(dim=1, keepdim=True))
    loss = torch.nn.functional.mse_loss(torch.tanh(ddp(x)).sum(dim=1, keepdim=True), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    ddprun.save_snapshot({"MODEL_STATE": model.state_dict(),
                          "OPTIMIZER_STATE": optimizer.state_dict(),
                          "STEPS_RUN": step + 1}, directory, step + 1, keep_last=2)
    if step + 1 == args.pause_at and start == 0:
        ddprun.wait_for_snapshots()
        fd = mn_util.open_release(os.path.join(mn_util.OUT, "release.fifo"))
        mn_util.write_marker(mn_util.marker_name(f"paused_{args.run}"), info)
        mn_util.wait_for_release(fd)

ddprun.wait_for_snapshots()
if rank == 0:
    weights = {name: [float.hex(v) for v in t.flatten().tolist()]
               for name, t in model.state_dict().items()}
    mn_util.write_marker(f"final_{args.run}", {"weights": weights, "start": start,
                                               "node": mn_util.NODE})
dist.barrier()
gc.collect()
dist.destroy_process_group()
