"""torch's own error files: main() under torch.distributed.elastic.multiprocessing.errors.record,
which writes the exception to TORCHELASTIC_ERROR_FILE. Rank 1 raises after a gloo all_reduce;
rank 0 waits on a store key that never comes (not in a collective: a gloo collective would
fail on its own when rank 1 leaves, a second failure racing the first) and is stopped by the
agent."""
import datetime

import torch
import torch.distributed as dist
from torch.distributed.elastic.multiprocessing.errors import record


@record
def main():
    dist.init_process_group("gloo", init_method="env://", timeout=datetime.timedelta(seconds=60))
    value = torch.tensor([1.0])
    dist.all_reduce(value)
    if dist.get_rank() == 1:
        # The group goes first: torch 2.15 aborts at interpreter exit with a live gloo group
        # ("terminate called without an active exception"), which would turn exit 1 into 134.
        dist.destroy_process_group()
        raise ValueError("rank 1 found a bad batch")
    dist.distributed_c10d._get_default_store().wait(["never"])


if __name__ == "__main__":
    main()
