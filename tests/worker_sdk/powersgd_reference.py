"""PowerSGD reference for toolbox_test.cc: PyTorch's own DDP and powerSGD_hook (1.13 or 2.x,
whichever torch runs it) on the initial weights and batches the test wrote (argv[1]); rank 0
saves the final weights (argv[2]). Run as one process per rank with the launcher's
environment (Gloo)."""
import os
import sys

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as powersgd
from torch.nn.parallel import DistributedDataParallel as DDP


def main():
    data_path, out_path = sys.argv[1], sys.argv[2]
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    data = torch.load(data_path, weights_only=False)  # written by the test (torch 2.6+: True)
    net = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.ReLU(), torch.nn.Linear(32, 16),
                              torch.nn.ReLU(), torch.nn.Linear(16, 4))
    with torch.no_grad():
        for p, value in zip(net.parameters(), data["init"]):
            p.copy_(value)
    model = DDP(net)
    state = powersgd.PowerSGDState(process_group=None, matrix_approximation_rank=1,
                                   start_powerSGD_iter=2)
    model.register_comm_hook(state, powersgd.powerSGD_hook)
    opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    xs, ys = data["x"], data["y"]
    per_rank = xs.shape[1] // world
    for step in range(xs.shape[0]):
        opt.zero_grad()
        x = xs[step][rank * per_rank:(rank + 1) * per_rank]
        y = ys[step][rank * per_rank:(rank + 1) * per_rank]
        F.cross_entropy(model(x), y).backward()
        opt.step()
    if rank == 0:
        torch.save([p.detach().clone() for p in net.parameters()], out_path)
    dist.barrier()
    dist.destroy_process_group()
    # Every rank is done and the weights are saved: leave without tearing down DDP. In torch
    # 1.13, dropping the model destroys its Reducer and with it ProcessGroupGloo, whose
    # destructor joins the Gloo worker threads while holding the GIL; a worker still releasing
    # a tensor that has a Python object waits for the GIL: a deadlock (gdb: ~Reducer ->
    # ~ProcessGroupGloo -> thread::join, against runLoop -> ~TensorImpl ->
    # PyEval_AcquireThread), about 1 run in 25, and the rank hangs until the test's deadline.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
