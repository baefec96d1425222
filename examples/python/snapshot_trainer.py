"""The torchrun tutorial trainer with snapshots: the twin of examples/snapshot_trainer.

    ddprun --standalone --nproc_per_node 2 --max_restarts 3 \\
        examples/python/snapshot_trainer.py 50 10 --snapshot_dir /tmp/snapshots

The tutorial's torch.save/torch.load of one file on a shared file system became
ddprun.save_snapshot/ddprun.load_latest_snapshot of a directory on each node's own disk
(docs/snapshots.md): a node that lacks the newest snapshot gets it from a peer at load.
"""
import argparse
import gc
import os

import ddprun
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


class Trainer:
    def __init__(self, save_every, batch_size, snapshot_dir):
        self.rank = dist.get_rank()
        x = torch.rand(2048, 20, generator=torch.Generator().manual_seed(0))
        y = torch.rand(2048, 1, generator=torch.Generator().manual_seed(1))
        self.sampler = DistributedSampler(TensorDataset(x, y))
        self.data = DataLoader(TensorDataset(x, y), batch_size=batch_size, sampler=self.sampler)
        self.net = torch.nn.Linear(20, 1)
        self.optimizer = torch.optim.SGD(self.net.parameters(), lr=1e-3)
        self.save_every, self.snapshot_dir, self.epochs_run = save_every, snapshot_dir, 0
        snapshot = ddprun.load_latest_snapshot(snapshot_dir)  # was: torch.load(snapshot_path)
        if snapshot is not None:
            self.net.load_state_dict(snapshot["MODEL_STATE"])
            self.epochs_run = snapshot["EPOCHS_RUN"]
            print(f"rank {self.rank}: resuming training from snapshot at epoch {self.epochs_run}")
        self.model = DDP(self.net)

    def _run_epoch(self, epoch):
        self.sampler.set_epoch(epoch)
        steps = 0
        for x, y in self.data:
            self.optimizer.zero_grad()
            F.mse_loss(self.model(x), y).backward()
            self.optimizer.step()
            steps += 1
        print(f"[rank {self.rank}] epoch {epoch} | batch size {self.data.batch_size} | steps {steps}")

    def train(self, max_epochs):
        for epoch in range(self.epochs_run, max_epochs):
            self._run_epoch(epoch)
            # Every node keeps its own copy: local rank 0 writes (was: rank 0, torch.save).
            if int(os.environ["LOCAL_RANK"]) == 0 and (epoch + 1) % self.save_every == 0:
                ddprun.save_snapshot({"MODEL_STATE": self.net.state_dict(),
                                      "EPOCHS_RUN": epoch + 1}, self.snapshot_dir, epoch + 1)
                print(f"epoch {epoch} | snapshot {epoch + 1} saving in {self.snapshot_dir}")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("total_epochs", type=int)
    p.add_argument("save_every", type=int)
    p.add_argument("--batch_size", type=int, default=32)
    p.add_argument("--snapshot_dir", default="snapshots", help="this node's own directory")
    args = p.parse_args()
    dist.init_process_group("gloo")
    Trainer(args.save_every, args.batch_size, args.snapshot_dir).train(args.total_epochs)
    ddprun.wait_for_snapshots()
    dist.barrier()
    # torch 2.x: DDP's reducer sits in reference cycles; freed only by the interpreter's final
    # collection, its gloo threads can abort the process at exit. Free it while Python runs.
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
