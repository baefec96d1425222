"""One rank of a 2-rank gloo job whose store is the one under test (the launcher's setting:
TORCHELASTIC_USE_AGENT_STORE=True, so every rank, rank 0 included, is a store client).

After the all_reduce, rank 0 exits at once. Rank 1 waits on the store until the test has seen
rank 0 gone (the test sets "rank0_gone"), then keeps using the store: its process group's store
and a fresh client. Prints "rank R all_reduce V" and, for rank 1, "rank 1 store ok".
"""
import datetime
import os
import signal
import sys

signal.alarm(90)  # bound the whole script, whatever hangs

import torch
import torch.distributed as dist

rank = int(os.environ["RANK"])
dist.init_process_group("gloo", init_method="env://", timeout=datetime.timedelta(seconds=60))
value = torch.tensor([float(rank + 1)])
dist.all_reduce(value)
print(f"rank {rank} all_reduce {value.item()}", flush=True)
if value.item() != 3.0:
    sys.exit(3)
if rank == 0:
    # Leaves first, with the store still in use by rank 1. The group is destroyed first: torch
    # 2.15 aborts at interpreter exit with a live gloo group ("terminate called without an
    # active exception", 1 run in a few).
    dist.destroy_process_group()
    sys.exit(0)

fresh = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), None, False,
                      datetime.timedelta(seconds=60))
fresh.wait(["rank0_gone"])
group_store = dist.distributed_c10d._get_default_store()
group_store.set("after_rank0", "still here")
assert group_store.get("after_rank0") == b"still here"
assert group_store.add("counter", 2) == 2
fresh.set("fresh_key", "v")
assert fresh.get("fresh_key") == b"v"
print("rank 1 store ok", flush=True)
dist.destroy_process_group()  # as rank 0: no live gloo group at interpreter exit
