#!/usr/bin/env bash
# Issue 34 on a real GPU: the Python workers' bootstrap (agent/python/) under an unmodified
# CUDA DistributedDataParallel loop over NCCL, without ddprun itself (the machine may lack its
# libraries): the agent's part is played here (the environment ddprun gives a worker, a
# progress file per rank, the worker channel). Checks that steps are counted where the script
# steps, that a rank slower in its forward shows the larger busy time (host-side figures, as
# docs/progress.md says), and how long the quick exit takes. One GPU: 1 rank, then 2 ranks
# sharing it when NCCL allows (NCCL_MULTI_RANK_GPU_ENABLE=1). Prints each result; writes
# $OUT/auto-progress-gpu.txt when OUT is set.
#   scripts/device-auto-progress-check.sh [python]   (default python3: the one holding torch)
set -uo pipefail
cd "$(dirname "$0")/.."
python=${1:-python3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat >"$work/train.py" <<'PY'
import datetime, os, sys, time
import torch, torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
dist.init_process_group("nccl", timeout=datetime.timedelta(seconds=60))
rank = dist.get_rank()
torch.cuda.set_device(0)
model = DDP(torch.nn.Sequential(torch.nn.Linear(4096, 4096), torch.nn.ReLU(),
                                torch.nn.Linear(4096, 4096)).cuda(), device_ids=[0])
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
x = torch.randn(256, 4096, device="cuda")
slow = float(os.environ.get("SLOW_S", "0")) if rank == 1 else 0.0
for step in range(int(os.environ.get("STEPS", "30"))):
    if slow:
        time.sleep(slow)  # this rank's host is slower before its forward
    opt.zero_grad()
    model(x).square().mean().backward()
    opt.step()
torch.cuda.synchronize()
dist.barrier()
dist.destroy_process_group()
with open(os.environ["RETURN_MARK"], "w") as f:
    f.write(repr(time.time()))
PY
run_ranks() {  # run_ranks N [env...]: N ranks through the bootstrap; prints each progress line
  local n=$1; shift
  local port
  port=$("$python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  local pids=()
  for ((r = 0; r < n; ++r)); do
    : >"$work/auto_$r"
    env "$@" RANK=$r LOCAL_RANK=$r WORLD_SIZE=$n LOCAL_WORLD_SIZE=$n MASTER_ADDR=127.0.0.1 \
      MASTER_PORT=$port DDPRUN_AUTO_PROGRESS_FILE="$work/auto_$r" RETURN_MARK="$work/ret_$r" \
      timeout 180 "$python" -u agent/python/_ddprun_bootstrap.py "$work/train.py" \
      >"$work/log_$r" 2>&1 &
    pids+=($!)
  done
  local status=0
  for ((r = 0; r < n; ++r)); do
    wait "${pids[$r]}" || status=$?
    local now ret
    now=$("$python" -c 'import time; print(time.time())')
    ret=$(cat "$work/ret_$r" 2>/dev/null || echo "$now")
    echo "  rank $r: progress line '$(head -1 "$work/auto_$r")', script return -> reaped" \
      "$("$python" -c "print(round(($now - $ret) * 1000))") ms (upper bound: waited in order)"
  done
  [ $status -eq 0 ] || { echo "  failed (exit $status):"; for f in "$work"/log_*; do tail -n 5 "$f"; done; }
  return $status
}
{
  "$python" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "nccl", torch.cuda.nccl.version(), torch.cuda.get_device_name(0))'
  echo "1 rank, 30 steps (expect step 30 and a busy time):"
  run_ranks 1 STEPS=30
  echo "2 ranks on one GPU, rank 1 0.05 s slower per step (expect rank 1's busy time larger):"
  run_ranks 2 STEPS=30 SLOW_S=0.05 NCCL_MULTI_RANK_GPU_ENABLE=1 ||
    echo "  (NCCL refused two ranks on one GPU: checked with one rank only)"
} 2>&1 | tee "${OUT:-$work}/auto-progress-gpu.txt"
