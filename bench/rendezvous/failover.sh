#!/usr/bin/env bash
# Starts a three-member etcd cluster on free loopback ports (in a temp dir, members ended by
# PID on exit), then runs failover_bench against it. See docs/benchmarks.md.
#
#   bench/rendezvous/failover.sh BUILD_DIR [nodes=100] [lease_ttl_s=2] [reps=3]
set -euo pipefail
build=${1:?usage: failover.sh BUILD_DIR [nodes] [lease_ttl_s] [reps]}
shift
source "$(dirname "$0")/etcd_cluster.sh"
"$build/bench/rendezvous/failover_bench" "etcd://$endpoints" "$@"
