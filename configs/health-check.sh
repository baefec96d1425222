#!/bin/sh
# An example node health check for ddprun's --health_check (YAML health_check:): run before the
# node joins each round; any exit status but 0 keeps the node out, and ddprun exits 69 so that
# SLURM or the node manager can drain it. Adapt the limits to the cluster. What it checks:
#   * each GPU (nvidia-smi, when the node has one): no uncorrectable (volatile) ECC error and no
#     retired pages pending (a row to retire at the next reset);
#   * free space on the file systems the job writes to: DDPRUN_CHECK_DIRS, a colon-separated
#     list (default: $TMPDIR or /tmp), each needing DDPRUN_CHECK_MIN_FREE_MB (default 1024).
# It prints one line per problem on stderr; ddprun shows the last lines in its message.
#
#   ddprun --health_check configs/health-check.sh --health_check_timeout 30 ... train.py
set -u
status=0

if command -v nvidia-smi >/dev/null 2>&1; then
  # index, uncorrectable volatile ECC errors, retired pages pending ("[N/A]" on GPUs without them)
  if ! out=$(nvidia-smi --query-gpu=index,ecc.errors.uncorrected.volatile.total,retired_pages.pending \
      --format=csv,noheader,nounits 2>&1); then
    echo "nvidia-smi failed: $out" >&2
    status=1
  else
    echo "$out" | while IFS=', ' read -r index ecc pending; do
      case "$ecc" in ''|*N/A*|0) ;; *) echo "GPU $index: $ecc uncorrectable ECC errors" >&2; exit 1 ;; esac
      case "$pending" in Yes|yes) echo "GPU $index: retired pages pending (reset the GPU)" >&2; exit 1 ;; esac
    done || status=1
  fi
fi

min_free_mb=${DDPRUN_CHECK_MIN_FREE_MB:-1024}
dirs=${DDPRUN_CHECK_DIRS:-${TMPDIR:-/tmp}}
old_ifs=$IFS
IFS=:
for dir in $dirs; do
  free_kb=$(df -Pk "$dir" 2>/dev/null | awk 'NR == 2 { print $4 }')
  if [ -z "$free_kb" ]; then
    echo "$dir: cannot read its free space (missing or hung file system?)" >&2
    status=1
  elif [ "$free_kb" -lt $((min_free_mb * 1024)) ]; then
    echo "$dir: $((free_kb / 1024)) MB free, below $min_free_mb MB" >&2
    status=1
  fi
done
IFS=$old_ifs
exit "$status"
