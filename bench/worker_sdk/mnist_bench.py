"""Benchmark twin of mnist_bench.cc: the same CNN, data and batch with Python DDP (Gloo).
Prints "BENCH {json}" per rank with the same fields (comm_wait_ms is not observable from
Python DDP and is reported as null; backward_ms - backward_nosync_ms compares both).
comm_bytes_per_step counts what DDP hands to Gloo per step: gradients (PowerSGD's compressed
numbers when --comm_hook powersgd) and the broadcast buffers, as the SDK's counters do."""
import argparse
import gc
import json
import os
import resource
import sys
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as powersgd
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DistributedSampler

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "examples", "python"))
from fashion_mnist import DEBIAN_DIR, Net, load_split  # noqa: E402


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--batch_size", type=int, default=64)
    p.add_argument("--no_sync", action="store_true",
                   help="run the timed steps without gradient sync (compute-only ceiling)")
    p.add_argument("--data", default=DEBIAN_DIR)
    p.add_argument("--gradient_as_bucket_view", action="store_true")
    p.add_argument("--comm_hook", default="allreduce", choices=["allreduce", "powersgd"])
    p.add_argument("--powersgd_rank", type=int, default=1)
    p.add_argument("--powersgd_start", type=int, default=10)
    args = p.parse_args()
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(rank)
    images, labels = load_split(args.data, True)
    net = Net()
    model = DDP(net, gradient_as_bucket_view=args.gradient_as_bucket_view)
    psgd_state = None
    if args.comm_hook == "powersgd":
        psgd_state = powersgd.PowerSGDState(process_group=None,
                                            matrix_approximation_rank=args.powersgd_rank,
                                            start_powerSGD_iter=args.powersgd_start)
        model.register_comm_hook(psgd_state, powersgd.powerSGD_hook)
    grad_numel = sum(p.numel() for p in net.parameters())
    buffer_bytes = sum(b.numel() * b.element_size() for b in net.buffers())
    opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
    sampler = DistributedSampler(range(len(images)), shuffle=True)
    state = {"epoch": 0, "order": iter(())}

    def next_batch():
        idx = [i for _, i in zip(range(args.batch_size), state["order"])]
        if len(idx) < args.batch_size:
            state["epoch"] += 1
            sampler.set_epoch(state["epoch"])
            state["order"] = iter(list(iter(sampler)))
            idx = [i for _, i in zip(range(args.batch_size), state["order"])]
        return torch.tensor(idx)

    def step(sync):
        idx = next_batch()
        loss = F.cross_entropy(model(images[idx]), labels[idx])
        opt.zero_grad()
        t = time.perf_counter()
        if sync:
            loss.backward()
        else:
            with model.no_sync():
                loss.backward()
        backward_ms = (time.perf_counter() - t) * 1000
        opt.step()
        return backward_ms

    for _ in range(args.warmup):
        step(True)
    dist.barrier()
    numel_after = psgd_state.total_numel_after_compression if psgd_state else 0
    cpu_start = time.process_time()  # user + system, all threads
    start = time.perf_counter()
    backward_total = sum(step(not args.no_sync) for _ in range(args.steps))
    seconds = time.perf_counter() - start
    cpu_ms_per_step = (time.process_time() - cpu_start) * 1000 / args.steps
    if args.no_sync:
        grad_bytes = 0
    elif psgd_state:
        grad_bytes = (psgd_state.total_numel_after_compression - numel_after) * 4 / args.steps
    else:
        grad_bytes = grad_numel * 4
    dist.barrier()
    nosync_steps = max(1, args.steps // 4)
    nosync_total = sum(step(False) for _ in range(nosync_steps))
    line = {
        "impl": "python_ddp", "synced": not args.no_sync, "comm_hook": args.comm_hook,
        "gradient_as_bucket_view": args.gradient_as_bucket_view,
        "comm_bytes_per_step": grad_bytes + buffer_bytes, "rank": rank, "world_size": dist.get_world_size(),
        "steps": args.steps, "batch_size": args.batch_size,
        "steps_per_s": args.steps / seconds,
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
        "comm_wait_ms": None,
        "backward_ms": backward_total / args.steps,
        "backward_nosync_ms": nosync_total / nosync_steps,
        "cpu_ms_per_step": cpu_ms_per_step,
    }
    print("BENCH " + json.dumps(line), flush=True)
    dist.barrier()
    # torch 2.x: DDP's reducer sits in reference cycles; freed only by the interpreter's final
    # collection, its gloo threads can abort the process at exit. Free it while Python runs.
    del model
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
