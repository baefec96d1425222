"""One rank of tests/python/snapshot_test.py's jobs: joins a gloo group through a FileStore
(no ports), calls ddprun.load_latest_snapshot on its "node's" directory and writes what it got
to <out>/rank_<r>.json: the step and a digest of the state, or the error's message.

    snapshot_worker.py <store file> <rank> <world> <directory> <out dir> [chunk bytes]
"""
import datetime
import hashlib
import json
import os
import sys

import torch
import torch.distributed as dist

import ddprun

store, directory, out = sys.argv[1], sys.argv[4], sys.argv[5]
rank, world = int(sys.argv[2]), int(sys.argv[3])
chunk = int(sys.argv[6]) if len(sys.argv) > 6 else ddprun.snapshot.DEFAULT_CHUNK_BYTES
dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world,
                        timeout=datetime.timedelta(seconds=60))
result = {"rank": rank}
try:
    got = ddprun.load_latest_snapshot(directory, with_step=True, chunk_bytes=chunk)
    if got is None:
        result["step"] = None
    else:
        step, state = got
        result["step"] = step
        result["digest"] = hashlib.sha256(repr(state["w"].tolist()).encode()).hexdigest()
        result["epoch"] = state["EPOCH"]
except ddprun.SnapshotError as e:
    result["error"] = str(e)
temp = os.path.join(out, f"rank_{rank}.json.tmp")
with open(temp, "w") as f:
    json.dump(result, f)
os.rename(temp, os.path.join(out, f"rank_{rank}.json"))
dist.barrier()
dist.destroy_process_group()
