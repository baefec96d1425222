"""A 2-rank gloo job for the packaging tests: all_reduce, then each rank writes which
interpreter and which torch ran it to <out_dir>/rank<RANK>.json."""

import json
import os
import sys

import torch
import torch.distributed as dist


def main() -> None:
    out_dir = sys.argv[1]
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    value = torch.tensor([float(rank + 1)])
    dist.all_reduce(value)
    dist.destroy_process_group()
    report = {
        "rank": rank,
        "world_size": world,
        "sum": value.item(),
        "expected": world * (world + 1) / 2,
        "torch": torch.__version__,
        "executable": sys.executable,
        "prefix": sys.prefix,
        "python_exec": os.environ.get("PYTHON_EXEC"),
    }
    path = os.path.join(out_dir, f"rank{rank}.json")
    with open(path + ".tmp", "w") as f:
        json.dump(report, f)
    os.replace(path + ".tmp", path)  # whole or absent, never half-written


if __name__ == "__main__":
    main()
