#!/usr/bin/env bash
# Round latency with the daemon's state in memory, in SQLite (--state-dir) and in etcd (a real
# three-member cluster on loopback): rendezvous_load's N nodes join one round; every decision
# is committed before it is pushed. See docs/benchmarks.md.
#
#   bench/rendezvous/state_latency.sh BUILD_DIR [nodes=1000] [reps=3]
#
# Jobs over about 5,000 nodes need a larger etcd value than the 1 MiB default on both sides:
#   DDPRUN_ETCD_ARGS="--max-request-bytes 10485760" \
#   DDPRUN_ETCD_DAEMON_ARGS="--etcd-max-job-bytes 8388608" state_latency.sh BUILD_DIR 10000 1
set -euo pipefail
build=${1:?usage: state_latency.sh BUILD_DIR [nodes] [reps]}
nodes=${2:-1000}
reps=${3:-3}
load="$build/bench/rendezvous/rendezvous_load"
source "$(dirname "$0")/etcd_cluster.sh"
for rep in $(seq "$reps"); do
  echo "memory: $(DDPRUN_LOAD_DAEMON_ARGS="" "$load" "$nodes")"
  state=$(mktemp -d)
  echo "sqlite: $(DDPRUN_LOAD_DAEMON_ARGS="--state-dir $state" "$load" "$nodes")"
  rm -rf "$state"
  echo "etcd:   $(DDPRUN_LOAD_DAEMON_ARGS="--state etcd://$endpoints ${DDPRUN_ETCD_DAEMON_ARGS:-}" "$load" "$nodes")"
done
