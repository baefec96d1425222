#!/usr/bin/env bash
# Round latency with the daemon's state in memory, in SQLite (--state-dir) and in etcd (a real
# three-member cluster on loopback): rendezvous_load's N nodes join one round; every decision
# is committed before it is pushed. Every repetition starts from empty state (etcd: a cluster
# name of its own, checked empty before). See docs/benchmarks.md.
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

# How many keys the cluster holds under the daemon's name $1 (/ddprun/$1/...), through etcd's
# JSON gateway (keys in base64; the range end is the prefix with its last byte, '/', plus one).
keys_under() {
  local key end
  key=$(printf '/ddprun/%s/' "$1" | base64 -w0)
  end=$(printf '/ddprun/%s0' "$1" | base64 -w0)
  curl -sf -X POST "http://${endpoints%%,*}/v3/kv/range" \
    -d "{\"key\":\"$key\",\"range_end\":\"$end\",\"count_only\":true}" |
    /usr/bin/python3 -c 'import json, sys; print(json.load(sys.stdin).get("count", 0))'
}

# Each repetition starts from empty state, as memory and a new SQLite directory do: etcd's under
# a cluster name of its own. (One shared name made every repetition's daemon restore the earlier
# repetitions' jobs before it served, and time that.)
for rep in $(seq "$reps"); do
  echo "memory: $(DDPRUN_LOAD_DAEMON_ARGS="" "$load" "$nodes")"
  state=$(mktemp -d)
  echo "sqlite: $(DDPRUN_LOAD_DAEMON_ARGS="--state-dir $state" "$load" "$nodes")"
  rm -rf "$state"
  name="latency-$rep"
  before=$(keys_under "$name")
  if [[ "$before" != 0 ]]; then
    echo "etcd: cluster name $name already holds $before keys: not a fresh start" >&2
    exit 1
  fi
  result=$(DDPRUN_LOAD_DAEMON_ARGS="--state etcd://$endpoints/$name ${DDPRUN_ETCD_DAEMON_ARGS:-}" \
    "$load" "$nodes")
  echo "etcd:   $result (cluster name $name: 0 keys before, $(keys_under "$name") after)"
done
