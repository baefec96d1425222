"""torch's own error files: main() under torch.distributed.elastic.multiprocessing.errors.record,
which writes the exception to TORCHELASTIC_ERROR_FILE. Rank 1 raises after a gloo all_reduce;
rank 0 waits in a barrier that never completes and is stopped by the agent."""
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
        raise ValueError("rank 1 found a bad batch")
    dist.barrier()


if __name__ == "__main__":
    main()
