"""Rank 0 leaves the job first while rank 1 still uses the job's store: both init over env://
and all_reduce; rank 0 records its pid and exits; rank 1 waits (bounded) until rank 0's process
is gone, then uses the store (set, get, add) and writes store_after_rank0 = "ok <value>".
Under a store hosted by rank 0's worker, rank 1's calls would fail: the agent's store outlives
every worker."""
import datetime
import os
import time

import torch
import torch.distributed as dist

from worker_util import out_path, write_marker

dist.init_process_group("gloo", init_method="env://", timeout=datetime.timedelta(seconds=30))
rank = dist.get_rank()
dist.all_reduce(torch.ones(1))
if rank == 0:
    write_marker("rank0_pid", str(os.getpid()))
    os._exit(0)  # at once: no destroy_process_group, no barrier

deadline = time.monotonic() + 30
while not os.path.exists(out_path("rank0_pid")) and time.monotonic() < deadline:
    time.sleep(0.01)  # nothing signals another process's marker; bounded by the deadline
pid = int(open(out_path("rank0_pid")).read())
while time.monotonic() < deadline:
    try:
        with open(f"/proc/{pid}/stat") as f:
            if f.read().split(")")[-1].split()[0] in ("Z", "X"):
                break
    except FileNotFoundError:
        break
    time.sleep(0.01)  # bounded poll: a pidfd needs Python 3.9's os.pidfd_open, fine too
store = dist.distributed_c10d._get_default_store()
store.set("after_rank0", "still here")
value = store.get("after_rank0").decode()
count = store.add("after_rank0_count", 5)
write_marker("store_after_rank0", f"ok {value} {count}")
# Torch 2.x can abort at interpreter exit ("terminate called without an active exception")
# while it tears down a process group left alive; ended here, as every other worker does.
dist.destroy_process_group()
