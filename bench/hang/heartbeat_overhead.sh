#!/usr/bin/env bash
# The cost of the SDK's automatic heartbeat (one pwrite per synchronised step, and the agent's
# inotify wake-up) on the SDK training benchmark: the same job with and without
# DDPRUN_HEARTBEAT_FILE reaching the workers, alternating, medians over ROUNDS rounds.
#
#   bench/hang/heartbeat_overhead.sh <build dir> [steps] [batch size]
#   ROUNDS (default 5); HANG_TIMEOUT (default 0: heartbeats only; e.g. 60 to also run detection)
set -euo pipefail
build=$1
steps=${2:-150}
batch=${3:-16}
rounds=${ROUNDS:-5}
hang=${HANG_TIMEOUT:-0}
launcher=("$build/launcher/ddprun" --standalone --nproc_per_node 2 --hang_timeout "$hang" --no_python)
bench=("$build/bench/worker_sdk/mnist_bench" --steps "$steps" --warmup 20 --batch_size "$batch")
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
steps_per_s() {  # the slowest rank's throughput, from the bench's "steps/s" lines
  grep -o '"steps_per_s":[0-9.e+-]*' "$1" | cut -d: -f2 | sort -g | head -1
}
on=() off=()
for ((r = 0; r < rounds; ++r)); do
  for mode in on off; do
    if [[ $mode == on ]]; then
      "${launcher[@]}" "${bench[@]}" >"$out/$mode" 2>&1
    else
      "${launcher[@]}" /usr/bin/env -u DDPRUN_HEARTBEAT_FILE "${bench[@]}" >"$out/$mode" 2>&1
    fi
    v=$(steps_per_s "$out/$mode")
    echo "round $r heartbeat $mode: $v steps/s" >&2
    if [[ $mode == on ]]; then on+=("$v"); else off+=("$v"); fi
  done
done
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
m_on=$(median "${on[@]}")
m_off=$(median "${off[@]}")
echo "| batch $batch, $steps steps, median of $rounds | heartbeat on | off | on / off |"
echo "|---|---:|---:|---:|"
awk -v a="$m_on" -v b="$m_off" 'BEGIN {printf "| steps/s (slowest rank) | %.2f | %.2f | %.4f |\n", a, b, a / b}'
