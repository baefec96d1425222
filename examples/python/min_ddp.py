"""The minimum DDP program in Python: the twin of examples/min_ddp.

    ddprun --standalone --nproc_per_node 2 examples/python/min_ddp.py
"""
import gc
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP


def main():
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(rank)
    x = torch.randn(512, 16)
    y = x[:, :4].argmax(1)
    net = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 4))
    model = DDP(net)
    opt = torch.optim.AdamW(net.parameters(), lr=1e-2)
    for epoch in range(5):
        for start in range(0, len(x), 32):
            loss = F.cross_entropy(model(x[start:start + 32]), y[start:start + 32])
            opt.zero_grad()
            loss.backward()
            opt.step()
        with torch.no_grad():
            logits = net(x)
            loss = F.cross_entropy(logits, y)
            dist.all_reduce(loss)
            loss /= world
            correct = [torch.zeros(1, dtype=torch.long) for _ in range(world)]
            dist.all_gather(correct, logits.argmax(1).eq(y).sum().reshape(1))
        if rank == 0:
            acc = 100.0 * sum(c.item() for c in correct) / (len(x) * world)
            print(f"epoch {epoch}  loss {loss.item():.6g}  accuracy {acc:.4f}% over {world} ranks")
    dist.barrier()
    # torch 2.x: DDP's reducer sits in reference cycles; freed only by the interpreter's final
    # collection, its gloo threads can abort the process at exit. Free it while Python runs.
    del model
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
