"""A real 2-rank data-parallel training job for the launcher benchmark: imports torch, calls
init_process_group("gloo", "env://"), trains a small MLP with DistributedDataParallel for
--steps steps, and writes its milestones (CLOCK_REALTIME seconds, comparable across processes)
to <out>/<attempt>_<rank>.json:

  started       first line of the script (before importing torch)
  init_begin    just before init_process_group
  init_end      just after it
  first_reduce  once the first all_reduce of the attempt completed
  end           after the last step

--fail-at-step S: on the first attempt, rank 1 records "failed" and exits 1 at step S, so the
launcher restarts the group; the restarted attempt runs normally.
"""
import time

STARTED = time.time()

import argparse  # noqa: E402
import gc  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("--out", required=True)
parser.add_argument("--steps", type=int, default=200)
parser.add_argument("--fail-at-step", type=int, default=-1)
args = parser.parse_args()

rank = int(os.environ["RANK"])
attempt = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
marks = {"started": STARTED, "pid": os.getpid()}


def record():
    path = os.path.join(args.out, f"{attempt}_{rank}.json")
    with open(path + ".tmp", "w") as f:
        json.dump(marks, f)
    os.rename(path + ".tmp", path)


torch.manual_seed(0)
marks["init_begin"] = time.time()
dist.init_process_group("gloo", init_method="env://")
marks["init_end"] = time.time()
probe = torch.ones(1)
dist.all_reduce(probe)
marks["first_reduce"] = time.time()

model = DDP(torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10)))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
data = torch.randn(32, 64)
target = torch.randint(0, 10, (32,))
for step in range(args.steps):
    if attempt == 0 and rank == 1 and step == args.fail_at_step:
        marks["failed"] = time.time()
        record()
        sys.exit(1)
    opt.zero_grad()
    torch.nn.functional.cross_entropy(model(data), target).backward()
    opt.step()
marks["end"] = time.time()
record()
# torch 2.x: DDP's reducer (kept alive by reference cycles) holds the process group and its last
# async all_reduce work. Left to the interpreter's final garbage collection, that work is freed on
# a gloo thread that then needs the GIL of a finalizing interpreter: the thread is unwound and the
# process aborts ("terminate called without an active exception", SIGABRT, seen with gdb in 2.15).
# Free the model while Python is alive, then the group.
del model, opt
gc.collect()
dist.destroy_process_group()
marks["returned"] = time.time()  # the script's last line: what follows is the interpreter's exit
record()
