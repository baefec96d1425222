# Sourced by the rendezvous benchmarks: starts a three-member etcd cluster on free loopback
# (DDPRUN_ETCD_ARGS: more etcd flags, e.g. --max-request-bytes for the largest jobs)
# ports in a temp dir (members ended by PID on exit) and sets $endpoints ("h:p,h:p,h:p").
etcd=${DDPRUN_ETCD:-/usr/bin/etcd}
dir=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -9 "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$dir"
}
trap cleanup EXIT

# Six ports that were free a moment ago (etcd has no "port 0").
read -r -a ports <<<"$(/usr/bin/python3 -c '
import socket
s = [socket.socket() for _ in range(6)]
for x in s: x.bind(("127.0.0.1", 0))
print(" ".join(str(x.getsockname()[1]) for x in s))')"
initial=""
for i in 0 1 2; do initial+="${initial:+,}m$i=http://127.0.0.1:${ports[$((3 + i))]}"; done
endpoints=""
for i in 0 1 2; do
  client="http://127.0.0.1:${ports[$i]}"
  peer="http://127.0.0.1:${ports[$((3 + i))]}"
  endpoints+="${endpoints:+,}127.0.0.1:${ports[$i]}"
  "$etcd" --name "m$i" --data-dir "$dir/m$i" --listen-client-urls "$client" \
    --advertise-client-urls "$client" --listen-peer-urls "$peer" \
    --initial-advertise-peer-urls "$peer" --initial-cluster "$initial" \
    --initial-cluster-token "$dir" --initial-cluster-state new \
    --heartbeat-interval 50 --election-timeout 500 ${DDPRUN_ETCD_ARGS:-} >"$dir/m$i.log" 2>&1 &
  pids+=($!)
done
for _ in $(seq 100); do  # up to 20 s for a quorum
  if curl -sf "http://127.0.0.1:${ports[0]}/health" | grep -q '"health":"true"'; then break; fi
  sleep 0.2  # nothing to wait on: etcd announces readiness only through this endpoint
done
