#!/usr/bin/env bash
# Every systemd unit in configs/systemd/ passes `systemd-analyze verify` without a single
# warning, and is a Type=notify unit with a watchdog.
#
# verify checks that ExecStart's program exists, so the units are verified as copies in a temp
# dir with the installed paths (/usr/bin/ddprun, /usr/bin/ddp-rendezvous: the package's; an
# install elsewhere rewrites them, cmake/InstallUnits.cmake) replaced by this build's binaries; a template (name@.service) is verified as an instance
# (name@example.service). verify exits 0 on an unknown key or a value it cannot parse, which it
# only prints: any output at all fails the test.
#
# usage: verify_systemd_units.sh <configs/systemd> <ddprun binary> <ddp-rendezvous binary>
set -euo pipefail
src=$1 ddprun=$2 daemon=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

units=()
for unit in "$src"/*.service; do
  name=$(basename "$unit")
  [[ $name == *@.service ]] && name=${name%@.service}@example.service
  sed -e "s|/usr/bin/ddp-rendezvous|$daemon|g" -e "s|/usr/bin/ddprun|$ddprun|g" \
    "$unit" >"$tmp/$name"
  units+=("$tmp/$name")
done
if ((${#units[@]} < 2)); then
  echo "expected the daemon's and the agent's units in $src, found ${#units[@]}"
  exit 1
fi

status=0
out=$(cd "$tmp" && systemd-analyze verify --man=no "${units[@]}" 2>&1) || status=$?
if ((status != 0)) || [[ -n $out ]]; then
  echo "systemd-analyze verify (exit $status):"
  echo "$out"
  exit 1
fi
for unit in "${units[@]}"; do
  if ! grep -qx 'Type=notify' "$unit" || ! grep -q '^WatchdogSec=' "$unit"; then
    echo "$(basename "$unit"): not a Type=notify unit with WatchdogSec="
    exit 1
  fi
done
echo "verified: ${units[*]##*/}"
