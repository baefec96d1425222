"""An unmodified DistributedDataParallel training script, as in PyTorch's tutorials (issue 34):
ddprun must report its steps and busy times by itself (automatic progress), without the script
knowing ddprun (no ddprun import here).

usage: ddp_train.py [--steps N] [--work-s S]
                    [--slow-rank R --slow-in data|forward|backward --slow-s S]
                    [--hang-rank R --hang-at-step K] [--raise-rank R --raise-at-step K]
                    [--two-optimizers] [--accumulate K] [--validate-every N]
                    [--explicit-heartbeat] [--out NAME]
A tiny model over gloo, fed by a DataLoader over a TensorDataset with a DistributedSampler,
trained with SGD for N optimizer steps (a step is --accumulate micro-batches, all but the last
under no_sync()). Every rank works --work-s seconds per step in its forward; the --slow-rank
works --slow-s more per step in its data loading (the collate function), its forward (a
submodule) or its backward (a tensor hook). The --hang-rank blocks silently in its data loading
at step K; the --raise-rank raises RuntimeError there. --validate-every N: an epoch is N steps,
followed by an evaluation loop under torch.no_grad(). --two-optimizers: the first layer and the
rest have an optimizer each, both stepped every step. --explicit-heartbeat: the script writes
$DDPRUN_HEARTBEAT_FILE itself every step, numbering its steps from 1001 (so that a test can tell
its own steps from the automatic ones). --out NAME: $DDPRUN_TEST_OUT/NAME_<rank>.json says
what was done. Bounded: SIGALRM ends a rank that runs longer than 120 s.
"""
import argparse
import contextlib
import datetime
import json
import os
import signal
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.dataloader import default_collate
from torch.utils.data.distributed import DistributedSampler

signal.alarm(120)
BATCH = 4


def parse_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--work-s", type=float, default=0.0)
    parser.add_argument("--slow-rank", type=int, default=-1)
    parser.add_argument("--slow-in", choices=("data", "forward", "backward"), default="forward")
    parser.add_argument("--slow-s", type=float, default=0.0)
    parser.add_argument("--hang-rank", type=int, default=-1)
    parser.add_argument("--hang-at-step", type=int, default=-1)
    parser.add_argument("--raise-rank", type=int, default=-1)
    parser.add_argument("--raise-at-step", type=int, default=-1)
    parser.add_argument("--two-optimizers", action="store_true")
    parser.add_argument("--accumulate", type=int, default=1)
    parser.add_argument("--validate-every", type=int, default=0)
    parser.add_argument("--explicit-heartbeat", action="store_true")
    parser.add_argument("--out", default="")
    return parser.parse_args()


args = parse_args()
state = {"step": 1}  # the optimizer step being worked on


def delay(phase):
    """This rank's extra work per micro-batch in `phase`."""
    extra = args.slow_s if dist.get_rank() == args.slow_rank and args.slow_in == phase else 0.0
    if phase == "forward":
        extra += args.work_s
    return extra / args.accumulate


def collate(samples):
    rank = dist.get_rank()
    if rank == args.hang_rank and state["step"] == args.hang_at_step:
        while True:  # silent, until the agent (or SIGALRM) ends it
            time.sleep(3600)
    if rank == args.raise_rank and state["step"] == args.raise_at_step:
        raise RuntimeError(f"ddp_train: failure injected at step {state['step']} on rank {rank}")
    time.sleep(delay("data"))
    return default_collate(samples)


class Work(torch.nn.Module):
    """Where the forward and backward take their time."""

    def forward(self, x):
        time.sleep(delay("forward"))
        if x.requires_grad and delay("backward") > 0:
            x.register_hook(lambda grad: time.sleep(delay("backward")))
        return x


def make_loader(micro_batches, seed):
    g = torch.Generator().manual_seed(seed)
    n = micro_batches * BATCH * dist.get_world_size()
    data = TensorDataset(torch.randn(n, 8, generator=g), torch.randn(n, 1, generator=g))
    sampler = DistributedSampler(data, shuffle=True, seed=seed)
    return sampler, DataLoader(data, batch_size=BATCH, sampler=sampler, collate_fn=collate)


def heartbeat(step):
    with open(os.environ["DDPRUN_HEARTBEAT_FILE"], "w") as f:
        f.write(f"{step}\n")


def main():
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
    rank = dist.get_rank()
    model = DDP(torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), Work(),
                                    torch.nn.Linear(16, 1)))
    layers = list(model.module.children())
    if args.two_optimizers:
        optimizers = [torch.optim.SGD(layers[0].parameters(), lr=0.01),
                      torch.optim.SGD(layers[3].parameters(), lr=0.01)]
    else:
        optimizers = [torch.optim.SGD(model.parameters(), lr=0.01)]
    loss_fn = torch.nn.MSELoss()
    steps_per_epoch = args.validate_every or args.steps
    sampler, loader = make_loader(steps_per_epoch * args.accumulate, seed=1)
    _, val_loader = make_loader(2, seed=2)
    done = {"rank": rank, "steps": 0, "micro_batches": 0, "validations": 0}
    epoch = 0
    while done["steps"] < args.steps:
        sampler.set_epoch(epoch)
        for i, (x, y) in enumerate(loader):
            sync = (i + 1) % args.accumulate == 0
            with contextlib.nullcontext() if sync else model.no_sync():
                loss = loss_fn(model(x), y) / args.accumulate
                loss.backward()
            done["micro_batches"] += 1
            if not sync:
                continue
            for optimizer in optimizers:
                optimizer.step()
                optimizer.zero_grad()
            done["steps"] += 1
            if args.explicit_heartbeat:
                heartbeat(1000 + done["steps"])
            state["step"] = done["steps"] + 1
            if done["steps"] == args.steps:
                break
        if args.validate_every and done["steps"] < args.steps:
            model.eval()
            with torch.no_grad():
                for x, y in val_loader:
                    loss_fn(model(x), y)
            model.train()
            done["validations"] += 1
        epoch += 1
    if args.out:
        path = os.path.join(os.environ["DDPRUN_TEST_OUT"], f"{args.out}_{rank}.json")
        with open(path, "w") as f:
            json.dump(done, f)
    # Nobody leaves before every rank is done (torch_straggler.py says why).
    dist.barrier()
    del model
    dist.destroy_process_group()


main()
