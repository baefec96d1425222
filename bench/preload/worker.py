"""The worker of bench/preload/run_bench.py: import torch, init_process_group("gloo") on the
launcher's store, one all_reduce; writes <out>/done_<rank> with the time its result was in.
With --hold, it then writes <out>/ready_<rank> (its pid) and waits for <out>/go before it
leaves (the benchmark reads its memory meanwhile)."""
import argparse
import datetime
import json
import os
import time

import torch
import torch.distributed as dist

parser = argparse.ArgumentParser()
parser.add_argument("--out", required=True)
parser.add_argument("--hold", action="store_true")
args = parser.parse_args()
dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=300))
rank = dist.get_rank()
value = torch.tensor([float(rank + 1)])
dist.all_reduce(value)
with open(os.path.join(args.out, f"done_{rank}"), "w") as f:
    json.dump({"at": time.time(), "sum": value.item()}, f)
if args.hold:
    with open(os.path.join(args.out, f"ready_{rank}"), "w") as f:
        f.write(str(os.getpid()))
    deadline = time.monotonic() + 300
    while not os.path.exists(os.path.join(args.out, "go")) and time.monotonic() < deadline:
        time.sleep(0.05)
dist.barrier()
dist.destroy_process_group()
