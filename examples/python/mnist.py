"""Fashion-MNIST CNN with DDP: the Python twin of examples/mnist (runs under ddprun/torchrun).

    ddprun --standalone --nproc_per_node 2 examples/python/mnist.py --epochs 3
"""
import argparse
import gc
import json
import os
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DistributedSampler

from fashion_mnist import DEBIAN_DIR, Net, load_split


def evaluate(net, images, labels):
    net.eval()
    rank, world = dist.get_rank(), dist.get_world_size()
    idx = torch.arange(rank, len(images), world)  # a sequential shard per rank
    totals = torch.zeros(4, dtype=torch.float64)
    with torch.no_grad():
        for chunk in idx.split(500):
            logits = net(images[chunk])
            hits = logits.topk(5, 1).indices.eq(labels[chunk].unsqueeze(1))
            totals += torch.tensor([hits[:, 0].sum().item(), hits.any(1).sum().item(),
                                    F.cross_entropy(logits, labels[chunk], reduction="sum").item(),
                                    len(chunk)], dtype=torch.float64)
    dist.all_reduce(totals)
    net.train()
    return (totals[:3] / totals[3]).tolist()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch_size", type=int, default=64)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--data", default=DEBIAN_DIR)
    p.add_argument("--out_dir", default="mnist_py_out")
    p.add_argument("--train_limit", type=int, default=0)
    args = p.parse_args()

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(rank)
    train_x, train_y = load_split(args.data, True, args.train_limit)
    test_x, test_y = load_split(args.data, False)
    net = Net()
    model = DDP(net)
    opt = torch.optim.SGD(net.parameters(), lr=args.lr, momentum=0.9)
    sampler = DistributedSampler(range(len(train_x)), shuffle=True)
    history = []
    for epoch in range(args.epochs):
        start = time.time()
        sampler.set_epoch(epoch)
        order = torch.tensor(list(iter(sampler)))
        losses = []
        for idx in order.split(args.batch_size):
            loss = F.cross_entropy(model(train_x[idx]), train_y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        mean_loss = torch.tensor(sum(losses) / len(losses))
        dist.all_reduce(mean_loss)
        mean_loss /= dist.get_world_size()
        top1, top5, test_loss = evaluate(net, test_x, test_y)
        history.append({"epoch": epoch, "train_loss": mean_loss.item(), "test_loss": test_loss,
                        "top1": top1, "top5": top5, "seconds": time.time() - start})
        if rank == 0:
            print(f"epoch {epoch + 1}/{args.epochs}  train loss {mean_loss.item():.4f}  "
                  f"test top-1 {top1 * 100:.2f}%  top-5 {top5 * 100:.2f}%  "
                  f"({time.time() - start:.1f} s)", flush=True)
    if rank == 0:
        os.makedirs(args.out_dir, exist_ok=True)
        torch.save(net.state_dict(), os.path.join(args.out_dir, "model.pt"))
        with open(os.path.join(args.out_dir, "accuracy.json"), "w") as f:
            json.dump(history, f, indent=2)
    dist.barrier()
    # torch 2.x: DDP's reducer sits in reference cycles; freed only by the interpreter's final
    # collection, its gloo threads can abort the process at exit. Free it while Python runs.
    del model
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
