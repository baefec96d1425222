#!/usr/bin/env bash
# The worker SDK's NCCL path on a machine with an NVIDIA GPU (CI machines have none): builds
# the SDK with NCCL against LibTorch 2.x (scripts/sdk-torch2.sh, incremental when build-torch2
# is already there) and runs the SDK's NCCL tests:
#   1. worker_sdk_test --gtest_filter='NcclTest.*': the "nccl" scenario of sdk_test_worker
#      (collectives, DDP with three hooks/modes, SyncBatchNorm, snapshots, all on CUDA
#      tensors) with 1 and 2 ranks under the test harness (store hosted by the test). With
#      one GPU both ranks share it with NCCL_MULTI_RANK_GPU_ENABLE=1 (NCCL 2.30+; an older
#      NCCL refuses, "Duplicate GPU detected": then that test skips and is not counted).
#   2. the same scenario under the Python torch's own torchrun (agent-hosted store), 1 and 2
#      ranks; 2 ranks again with NCCL_P2P_DISABLE=1 when the first try fails (a diagnosis).
#   3. ddprun itself (issue 38): `--health_check builtin:gpu=<GPUs>` against the real NVML;
#      `--nproc_per_node gpu` with torch 2.x CUDA workers (an NCCL all_reduce); the SDK's NCCL
#      scenario on one rank under ddprun; a restart whose first attempt dies holding 1 GiB of
#      GPU memory, with `--gpu_memory_wait 30` (the summary shows whether the wait ran out).
#   4. time permitting, the rest of the SDK suite (Gloo) with the GPU hidden (informative:
#      its result does not decide the exit status).
# Writes a summary to $OUT/nccl-summary.txt (OUT defaults to build-torch2/nccl-check) and
# every log beside it. Bounded by CHECK_BUDGET_S (450 s) in all. Exit status: 0 when every
# NCCL check ran and passed, 1 when one failed or nothing could be built, 77 when there is no
# CUDA device (nothing checked; NCCL_CHECK_WITHOUT_GPU=1 builds anyway, then tests skip).
#
#   DDPRUN_TORCH2_PYTHON   the Python whose torch (a CUDA build) is used; default the
#                          project's .venv/torch2, else python3
#   DEPS_DEBS=.device-deps .deb files unpacked into a private prefix when the machine lacks
#                          Abseil's CMake package, libsystemd's pkg-config file, SQLite's
#                          or Gloo's headers (Debian's libabsl-dev, libabsl20220623,
#                          libsystemd-dev, libsqlite3-dev, libgloo-dev; PyTorch wheels ship
#                          no Gloo headers). Made on a Debian machine with `cd .device-deps &&
#                          apt-get download libabsl-dev libabsl20220623 libsystemd-dev
#                          libsqlite3-dev libgloo-dev` (keep it out of git)
#   BUILD_DIR=build-torch2
#   NCCL_CHECK_TARGETS     what to build (default: sdk_test_worker worker_sdk_test ddprun)
#   JOBS=$(nproc)          parallel compile jobs
set -uo pipefail
cd "$(dirname "$0")/.."

START=$(date +%s)
BUDGET=${CHECK_BUDGET_S:-450}
BUILD_DIR=${BUILD_DIR:-build-torch2}
OUT=${OUT:-$PWD/$BUILD_DIR/nccl-check}
mkdir -p "$OUT"
SUMMARY=$OUT/nccl-summary.txt
: >"$SUMMARY"
failures=0

note() { echo "$*" | tee -a "$SUMMARY"; }
left() { echo $((BUDGET - ($(date +%s) - START))); }
finish() {
  note "result: $1"
  note "took $(($(date +%s) - START)) s"
  exit "$2"
}
# Runs a named check (a command, no shell function) with a time limit; its output goes to
# $OUT/<name>.log. A failure counts unless INFORMATIVE=1.
check() {
  local name=$1 limit=$2
  shift 2
  local begin rc=0
  timeout --kill-after=10 "$limit" "$@" >"$OUT/$name.log" 2>&1 || rc=$?
  if [ "$rc" -eq 0 ]; then
    note "$name: passed in $(($(date +%s) - begin)) s"
  else
    local why="exit $rc"
    [ "$rc" -ne 124 ] || why="$why, timed out"
    note "$name: FAILED ($why) in $(($(date +%s) - begin)) s"
    [ "${INFORMATIVE:-0}" = 1 ] || failures=$((failures + 1))
  fi
  return "$rc"
}
# The limit for a check that may take up to $1 s, leaving $2 s for what follows.
limit() {
  local l=$(($(left) - $2))
  [ "$l" -lt "$1" ] || l=$1
  [ "$l" -gt 10 ] || l=10
  echo "$l"
}

note "device-nccl-check on $(hostname) at $(date -u +%FT%TZ)"

# ---- a GPU?
gpus=0
if command -v nvidia-smi >/dev/null && nvidia-smi -L >"$OUT/gpus.txt" 2>&1; then
  gpus=$(grep -c '^GPU ' "$OUT/gpus.txt")
  sed 's/^/  /' "$OUT/gpus.txt" >>"$SUMMARY"
fi
note "GPUs: $gpus"
if [ "$gpus" -eq 0 ] && [ "${NCCL_CHECK_WITHOUT_GPU:-0}" != 1 ]; then
  finish "skipped: no CUDA device (nvidia-smi sees none); nothing was checked" 77
fi

# ---- which torch
PYTHON=${DDPRUN_TORCH2_PYTHON:-}
if [ -z "$PYTHON" ]; then
  PYTHON=$PWD/.venv/torch2/bin/python
  [ -x "$PYTHON" ] || PYTHON=$(command -v python3)
fi
export DDPRUN_TORCH2_PYTHON=$PYTHON
torch_info=$("$PYTHON" -c 'import torch
nccl = ".".join(map(str, torch.cuda.nccl.version())) if torch.version.cuda else "-"
print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, NCCL {nccl}, "
      f"devices seen by torch: {torch.cuda.device_count()}")' 2>&1) ||
  finish "failed: $PYTHON cannot import torch: $torch_info" 1
note "Python: $PYTHON; $torch_info"

# ---- build dependencies this machine may lack, unpacked into a private prefix (never into /):
# development files only; their libraries' links are pointed at this machine's own copies.
# A machine without systemd-analyze gets a stand-in so that the configure passes (the test of
# configs/ that uses it is not run here).
if ! compgen -G "/usr/lib/*/cmake/absl/abslConfig.cmake" >/dev/null ||
  ! pkg-config --exists libsystemd || [ ! -e /usr/include/sqlite3.h ] ||
  [ ! -e /usr/include/gloo/algorithm.h ]; then
  DEPS_DEBS=${DEPS_DEBS:-.device-deps}
  if compgen -G "$DEPS_DEBS/*.deb" >/dev/null; then
    prefix=$PWD/$BUILD_DIR/deps
    mkdir -p "$prefix"
    for deb in "$DEPS_DEBS"/*.deb; do dpkg-deb -x "$deb" "$prefix"; done
    sed -i "s#^\([a-z_]*\)=/usr#\1=$prefix/usr#" "$prefix"/usr/lib/x86_64-linux-gnu/pkgconfig/*.pc
    while IFS= read -r link; do
      target=$(basename "$(readlink "$link")")
      for dir in /usr/lib/x86_64-linux-gnu /lib/x86_64-linux-gnu; do
        if [ -e "$dir/$target" ]; then
          ln -sfn "$dir/$target" "$link"
          break
        fi
      done
    done < <(find "$prefix" -xtype l)
    pkgconfig=$prefix/usr/lib/x86_64-linux-gnu/pkgconfig
    export PKG_CONFIG_PATH=$pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
    export EXTRA_PREFIX_PATH=$prefix/usr
    # The libraries' own dependencies (absl's) are found by the loader, not through RUNPATH.
    export LD_LIBRARY_PATH=$prefix/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    note "dependencies: unpacked $(cd "$DEPS_DEBS" && echo *.deb) into $prefix"
  else
    note "dependencies: Abseil, libsystemd, SQLite or Gloo is missing, no .deb files in $DEPS_DEBS"
  fi
fi
if ! command -v systemd-analyze >/dev/null; then
  export DDPRUN_CMAKE_ARGS="${DDPRUN_CMAKE_ARGS:-} -DSYSTEMD_ANALYZE=$(command -v false)"
  note "systemd-analyze: missing; configs/'s unit check is configured with a stand-in (not run)"
fi

# ---- build (incremental when build-torch2 exists); keeps going past a failing target so
# that whatever can be run is
check build "$(limit 600 110)" env SDK_TORCH2_TEST=0 SDK_TORCH2_KEEP_GOING=1 JOBS="${JOBS:-$(nproc)}" \
  SDK_TORCH2_TARGETS="${NCCL_CHECK_TARGETS:-sdk_test_worker worker_sdk_test ddprun}" \
  scripts/sdk-torch2.sh
cp "$BUILD_DIR/configure.log" "$OUT/" 2>/dev/null
grep '^sdk-torch2:' "$OUT/build.log" | sed 's/^/  /' >>"$SUMMARY"
WORKER=$BUILD_DIR/tests/worker_sdk/sdk_test_worker
TEST=$BUILD_DIR/tests/worker_sdk/worker_sdk_test
if [ ! -x "$WORKER" ]; then
  grep -m5 -A3 'error' "$OUT/build.log" | sed 's/^/  /' >>"$SUMMARY"
  finish "failed: sdk_test_worker was not built (see build.log)" 1
fi
grep -q 'DDPRUN_WITH_NCCL): ON' "$OUT/build.log" || note "WARNING: the SDK was built without NCCL"

export NCCL_DEBUG=${NCCL_DEBUG:-WARN} OMP_NUM_THREADS=1
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
# More ranks than GPUs: NCCL refuses two ranks of one communicator on a device unless told.
multi=(NCCL_MULTI_RANK_GPU_ENABLE=1)
[ "$gpus" -ge 2 ] && multi=()

# ---- 1. the gtest NCCL tests (the test harness hosts the store)
if [ -x "$TEST" ]; then
  check gtest-NcclTest "$(limit 150 70)" "$TEST" --gtest_filter='NcclTest.*' --gtest_color=no
  grep -E '^\[ +(OK|FAILED|SKIPPED) +\]' "$OUT/gtest-NcclTest.log" | sort -u |
    sed 's/^/  /' >>"$SUMMARY"
  # A test skipped because this NCCL refuses two ranks on one GPU (before 2.30) is not the
  # SDK's failure; any other skip on a machine with a GPU is.
  skipped=$(grep -oE '^\[  SKIPPED \] NcclTest\.[A-Za-z]+' "$OUT/gtest-NcclTest.log" | sort -u |
    wc -l)
  refused=$(grep -c 'this NCCL refuses two ranks on one GPU' "$OUT/gtest-NcclTest.log")
  if [ "$refused" -gt 0 ]; then
    note "gtest-NcclTest: $refused test(s) skipped: this NCCL refuses two ranks on one GPU: not counted (needs 2 GPUs)"
  fi
  if [ "$gpus" -gt 0 ] && [ "$skipped" -gt "$refused" ]; then
    note "gtest-NcclTest: skipped on a machine with a GPU: counted as a failure"
    failures=$((failures + 1))
  fi
else
  note "gtest-NcclTest: not run: worker_sdk_test was not built (see build.log)"
  failures=$((failures + 1))
fi

# ---- 2. the scenario under this torch's own torchrun (the agent hosts the store)
under_torchrun() {  # <ranks> [VAR=value...]: the command line, one word a line
  printf '%s\n' env "${@:2}" "$PYTHON" -m torch.distributed.run --standalone --nnodes 1 \
    --nproc_per_node "$1" --no_python "$WORKER" nccl "dir=$scratch/snapshots_${1}_$RANDOM"
}
mapfile -t cmd < <(under_torchrun 1)
check torchrun-1rank "$(limit 60 60)" "${cmd[@]}"
mapfile -t cmd < <(under_torchrun 2 "${multi[@]}")
if ! check torchrun-2ranks "$(limit 90 20)" "${cmd[@]}"; then
  if [ "${#multi[@]}" -gt 0 ] && grep -q 'Duplicate GPU detected' "$OUT/torchrun-2ranks.log"; then
    # NCCL before 2.30 has no NCCL_MULTI_RANK_GPU_ENABLE: not the SDK's failure.
    note "torchrun-2ranks: this NCCL refuses two ranks on one GPU: not counted (needs 2 GPUs)"
    failures=$((failures - 1))
  else
    mapfile -t cmd < <(under_torchrun 2 "${multi[@]}" NCCL_P2P_DISABLE=1)
    INFORMATIVE=1 check torchrun-2ranks-without-p2p "$(limit 90 10)" "${cmd[@]}" || true
  fi
fi

# ---- 3. ddprun itself on the GPU (issue 38): built-in checks against the real NVML, CUDA
# workers with --nproc_per_node gpu, the SDK's NCCL path on one rank, a restart that waits for
# the first attempt's GPU memory
DDPRUN=$BUILD_DIR/launcher/ddprun
if [ -x "$DDPRUN" ]; then
  check ddprun-builtin-gpu "$(limit 60 60)" "$DDPRUN" --standalone --nproc_per_node 1 \
    --health_check "builtin:gpu=$gpus" --health_check_timeout 30 --no_python /bin/true
  sed -n '/health check/,+4p' "$OUT/ddprun-builtin-gpu.log" | sed 's/^/  /' >>"$SUMMARY"
  cat >"$scratch/cuda_worker.py" <<'PY'
# One all_reduce over NCCL per rank; on attempt 0 with FAIL_FIRST=1 it takes 1 GiB of GPU
# memory and dies holding it (os._exit: no cleanup), so that the restart meets that memory.
import os, time
import torch
import torch.distributed as dist
rank, local = int(os.environ["RANK"]), int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(local)
if os.environ.get("FAIL_FIRST") == "1" and os.environ["TORCHELASTIC_RESTART_COUNT"] == "0":
    held = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    torch.cuda.synchronize()
    os._exit(3)
dist.init_process_group("nccl")
t = torch.full((4,), float(rank + 1), device="cuda")
dist.all_reduce(t)
n = dist.get_world_size()
assert t[0].item() == n * (n + 1) / 2, t
free, total = torch.cuda.mem_get_info()
print(f"rank {rank}/{n} on {torch.cuda.get_device_name(local)}: all_reduce ok, "
      f"restart {os.environ['TORCHELASTIC_RESTART_COUNT']}, {free / 2**30:.1f} GiB free", flush=True)
dist.destroy_process_group()
PY
  check ddprun-nproc-gpu "$(limit 120 45)" env PYTHON_EXEC="$PYTHON" "$DDPRUN" --standalone \
    --nproc_per_node gpu "$scratch/cuda_worker.py"
  grep 'all_reduce ok' "$OUT/ddprun-nproc-gpu.log" | sed 's/^/  /' >>"$SUMMARY"
  check ddprun-sdk-nccl-1rank "$(limit 90 30)" "$DDPRUN" --standalone --nproc_per_node 1 \
    --no_python "$WORKER" nccl "dir=$scratch/snapshots_ddprun"
  check ddprun-restart-memory-wait "$(limit 120 15)" env PYTHON_EXEC="$PYTHON" FAIL_FIRST=1 \
    "$DDPRUN" --standalone --nproc_per_node 1 --max_restarts 1 --gpu_memory_wait 30 \
    "$scratch/cuda_worker.py"
  grep -E 'all_reduce ok|not released|restarting' "$OUT/ddprun-restart-memory-wait.log" |
    sed 's/^/  /' >>"$SUMMARY"
else
  note "ddprun checks: not run: $DDPRUN was not built (see build.log)"
  failures=$((failures + 1))
fi

# ---- 4. the rest of the SDK suite (Gloo), GPU hidden, if time is left: informative only
if [ -x "$TEST" ] && [ "$(left)" -gt 90 ]; then
  INFORMATIVE=1 check gloo-suite-gpu-hidden "$(limit 300 15)" env CUDA_VISIBLE_DEVICES= \
    ctest --test-dir "$BUILD_DIR" -L worker_sdk -E 'NcclTest|InstallTest' -j 8 --timeout 120 \
    --output-on-failure || true
  grep -E 'tests passed|\(Failed\)|\(Timeout\)|Not Run' "$OUT/gloo-suite-gpu-hidden.log" |
    sed 's/^/  /' >>"$SUMMARY"
else
  note "gloo-suite-gpu-hidden: not run (no test binary, or no time left)"
fi

[ "$failures" -eq 0 ] && finish "passed" 0
finish "FAILED: $failures NCCL check(s) failed (logs in $OUT)" 1
