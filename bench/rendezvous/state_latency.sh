#!/usr/bin/env bash
# Round latency with the daemon's state in memory, in SQLite (--state-dir) and in etcd (a real
# three-member cluster on loopback): rendezvous_load's N nodes join one round; every decision
# is committed before it is pushed. See docs/benchmarks.md.
#
#   bench/rendezvous/state_latency.sh BUILD_DIR [nodes=1000] [reps=3]
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
  echo "etcd:   $(DDPRUN_LOAD_DAEMON_ARGS="--state etcd://$endpoints" "$load" "$nodes")"
done
