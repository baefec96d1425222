#!/usr/bin/env bash
# The Debian package (issue 26, docs/packaging.md): made by CPack from a build's install
# rules, inspected (dpkg-deb, lintian), installed with apt on this machine, its units checked
# with systemd-analyze verify, ddprun run from /usr/bin, then removed and purged: nothing of
# it may be left, and the machine is left as it was found, failure or not.
#
#   tests/packaging/test_deb.sh [BUILD_DIR [SDK_BUILD_DIR]]
#     BUILD_DIR (default build): the ddprun package, from its built programs
#     SDK_BUILD_DIR: a build configured with -DCMAKE_INSTALL_PREFIX=/usr and its SDK built
#       (libddprun-dev needs the multiarch libdir): libddprun-dev is made from it, checked the
#       same way, and a user's program (tests/worker_sdk/consumer) built against the installed
#       package with find_package(ddprun), linked again with pkg-config's flags, and run as a
#       two-rank job under BUILD_DIR's ddprun
#
# Needs root (apt, a system user) and dpkg/apt/cpack/lintian. It also cannot run when a
# ddprun package or a ddprun user is already on the machine: the test would take away what it
# did not make. Where it cannot run it fails, saying why, so that CI cannot pass without it;
# DDPRUN_ALLOW_SKIPS=1 (a developer's machine) makes it skip instead.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=$(realpath "${1:-build}")
sdk_build=${2:+$(realpath "$2")}
skip() {
  if [ "${DDPRUN_ALLOW_SKIPS:-0}" = 1 ]; then
    echo "test_deb: skipped (DDPRUN_ALLOW_SKIPS=1): $*"
    exit 0
  fi
  echo "test_deb: FAIL: cannot run: $* (DDPRUN_ALLOW_SKIPS=1 skips it instead)" >&2
  exit 1
}
fail() { echo "test_deb: FAIL: $*" >&2; exit 1; }

[ "$(id -u)" -eq 0 ] || skip "not root (apt install and a system user need it)"
for tool in dpkg dpkg-deb apt-get cpack lintian systemd-analyze; do
  command -v "$tool" >/dev/null || skip "$tool is missing (scripts/setup.sh installs it)"
done
[ -f "$build/CPackConfig.cmake" ] || fail "$build has no CPackConfig.cmake (configure it first)"
for package in ddprun libddprun-dev; do
  if dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "installed"; then
    skip "a $package package is already installed"
  fi
done
getent passwd ddprun >/dev/null && skip "a ddprun user already exists"

work=$(mktemp -d "${TMPDIR:-/tmp}/ddprun-deb.XXXXXX")
cleanup() {
  # Whatever happened, the package and what its postinst made go.
  for package in ddprun libddprun-dev; do
    if dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install"; then
      DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq "$package" >/dev/null 2>&1 ||
        dpkg --purge "$package" || true
    fi
  done
  if getent passwd ddprun >/dev/null; then userdel ddprun || true; fi
  if getent group ddprun >/dev/null; then groupdel ddprun || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

echo "== cpack -G DEB ($build) =="
started=$SECONDS
cpack --config "$build/CPackConfig.cmake" -G DEB -B "$work/pkg" >"$work/cpack.log" 2>&1 ||
  { cat "$work/cpack.log"; fail "cpack"; }
echo "packages made in $((SECONDS - started)) s"
debs=("$work"/pkg/ddprun_*.deb)
[ -f "${debs[0]}" ] || fail "no ddprun_*.deb in $work/pkg"
deb=${debs[0]}

echo "== $(basename "$deb") =="
dpkg-deb --info "$deb" | sed -n '/Package:/,$p'
dpkg-deb --contents "$deb" | awk '{print $6}' >"$work/contents"
for path in ./usr/bin/ddprun ./usr/bin/ddp-rendezvous ./usr/lib/ddprun/libddprun_security.so \
  ./lib/systemd/system/ddp-rendezvous.service ./lib/systemd/system/ddprun-agent@.service \
  ./usr/share/doc/ddprun/examples/single-node.yaml ./usr/share/doc/ddprun/copyright \
  ./usr/share/doc/ddprun/changelog.Debian.gz ./usr/lib/python3/dist-packages/ddprun/__init__.py \
  ./usr/lib/python3/dist-packages/ddprun/progress.py \
  ./usr/lib/python3/dist-packages/ddprun/snapshot.py \
  ./usr/lib/python3/dist-packages/ddprun/snapshot_format.py \
  ./usr/lib/python3/dist-packages/ddprun/snapshot_write.py; do
  grep -qxF "$path" "$work/contents" || fail "$path is not in the package"
done
dpkg-deb --field "$deb" Depends | grep -q adduser || fail "Depends lacks adduser"

echo "== lintian =="
for package in "$work"/pkg/*.deb; do
  # Errors and warnings fail; each tag the package keeps is overridden in the package with
  # the reason (packaging/deb/lintian-overrides, docs/packaging.md).
  lintian --fail-on error,warning --display-info "$package" || fail "lintian: $(basename "$package")"
done

echo "== apt install =="
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$deb" >"$work/apt.log" 2>&1 ||
  { cat "$work/apt.log"; fail "apt-get install"; }
dpkg -L ddprun >"$work/installed"
getent passwd ddprun >/dev/null || fail "postinst made no ddprun user"
[ "$(/usr/bin/ddprun --version)" = "ddprun $(dpkg-query -W -f='${Version}' ddprun | cut -d- -f1)" ] ||
  fail "/usr/bin/ddprun --version: $(/usr/bin/ddprun --version)"
/usr/bin/ddp-rendezvous --version
# The Python module, for Debian's python3: importable, and harmless outside ddprun.
(cd / && env -u DDPRUN_HEARTBEAT_FILE /usr/bin/python3 -c \
  "import ddprun; ddprun.heartbeat(1); assert ddprun.restart_count() == 0") ||
  fail "import ddprun with /usr/bin/python3"
# Installed, not enabled: nothing links to the units.
if find /etc/systemd/system -name 'ddp*' | grep -q .; then fail "the package enabled a unit"; fi
# The template is verified as an instance of it.
(cd "$work" && cp /lib/systemd/system/ddprun-agent@.service "ddprun-agent@check.service" &&
  systemd-analyze verify /lib/systemd/system/ddp-rendezvous.service \
    "$work/ddprun-agent@check.service") || fail "systemd-analyze verify"

echo "== apt remove, apt purge =="
DEBIAN_FRONTEND=noninteractive apt-get remove -y -qq ddprun >/dev/null
[ ! -e /usr/bin/ddprun ] || fail "/usr/bin/ddprun left after apt remove"
DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq ddprun >/dev/null
! dpkg-query -W -f='${Status}' ddprun 2>/dev/null | grep -q "install" || fail "ddprun still known to dpkg"
getent passwd ddprun >/dev/null && fail "the ddprun user is left after purge"
getent group ddprun >/dev/null && fail "the ddprun group is left after purge"
# Every file and every directory of its own (not /usr, /usr/bin, ...) is gone.
while read -r path; do
  if [ -d "$path" ]; then  # shared directories (/lib is a link on merged-/usr) stay
    case "$path" in /usr/lib/ddprun* | /usr/share/doc/ddprun*) ;; *) continue ;; esac
  fi
  [ ! -e "$path" ] || fail "$path is left after purge"
done <"$work/installed"
if [ -n "$sdk_build" ]; then
  echo "== libddprun-dev ($sdk_build) =="
  cpack --config "$sdk_build/CPackConfig.cmake" -G DEB -B "$work/sdk" \
    -D CPACK_COMPONENTS_ALL=worker_sdk >"$work/cpack-sdk.log" 2>&1 ||
    { cat "$work/cpack-sdk.log"; fail "cpack (SDK)"; }
  sdk_debs=("$work"/sdk/libddprun-dev_*.deb)
  [ -f "${sdk_debs[0]}" ] || fail "no libddprun-dev_*.deb in $work/sdk"
  dpkg-deb --field "${sdk_debs[0]}" Depends | grep -q libtorch-dev || fail "Depends lacks libtorch-dev"
  dpkg-deb --contents "${sdk_debs[0]}" | awk '{print $6}' >"$work/sdk-contents"
  multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
  for path in ./usr/include/ddp/ddp.h "./usr/lib/$multiarch/pkgconfig/ddprun.pc" \
    "./usr/lib/$multiarch/cmake/ddprun/ddprunConfig.cmake" \
    "./usr/lib/$multiarch/libddprun_worker_sdk.so"; do
    grep -qxF "$path" "$work/sdk-contents" || fail "$path is not in libddprun-dev"
  done
  lintian --fail-on error,warning "${sdk_debs[0]}" || fail "lintian: $(basename "${sdk_debs[0]}")"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${sdk_debs[0]}" \
    >"$work/apt-sdk.log" 2>&1 || { cat "$work/apt-sdk.log"; fail "apt-get install (SDK)"; }
  dpkg -L libddprun-dev >"$work/sdk-installed"
  # A user's program, as a user builds it: the in-tree consumer project (its own
  # find_package(ddprun), nothing of this tree's build) against the installed package only.
  echo "== a program built against the installed libddprun-dev =="
  started=$SECONDS
  cmake -S tests/worker_sdk/consumer -B "$work/consumer" -DCMAKE_BUILD_TYPE=Release \
    >"$work/consumer.log" 2>&1 || { cat "$work/consumer.log"; fail "find_package(ddprun) against libddprun-dev"; }
  grep -q "^ddprun_DIR:PATH=/usr/lib/$multiarch/cmake/ddprun$" "$work/consumer/CMakeCache.txt" ||
    fail "find_package(ddprun) did not find the installed package: $(grep ^ddprun_DIR "$work/consumer/CMakeCache.txt")"
  cmake --build "$work/consumer" >>"$work/consumer.log" 2>&1 ||
    { cat "$work/consumer.log"; fail "building a program against libddprun-dev"; }
  echo "built in $((SECONDS - started)) s"
  # pkg-config's link line is enough on its own: the same object linked with only its flags.
  pkg-config --exists ddprun || fail "pkg-config does not find ddprun.pc"
  # shellcheck disable=SC2046  # pkg-config's output is a list of flags
  c++ -o "$work/consumer-pc" "$work/consumer/CMakeFiles/consumer.dir/main.cc.o" \
    $(pkg-config --libs ddprun) || fail "linking with pkg-config --libs ddprun"
  for program in "$work/consumer/consumer" "$work/consumer-pc"; do
    # /lib is /usr/lib on a merged-/usr system: compared as real paths.
    loaded=$(ldd "$program" | awk '/libddprun_worker_sdk/ {print $3}')
    [ "$(realpath "$(dirname "$loaded")")" = "/usr/lib/$multiarch" ] ||
      fail "$program does not load the installed SDK: $(ldd "$program" | grep ddprun)"
    timeout 120 "$build/launcher/ddprun" --standalone --nproc_per_node 2 --no_python "$program" \
      >"$work/consumer-run.log" 2>&1 || { cat "$work/consumer-run.log"; fail "$program under ddprun"; }
    grep -q "consumer: sum 3 on 2 ranks" "$work/consumer-run.log" ||
      fail "$program: $(cat "$work/consumer-run.log")"
  done
  echo "the program ran as 2 ranks against the installed SDK (CMake and pkg-config builds)"
  DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq libddprun-dev >/dev/null
  while read -r path; do
    [ -d "$path" ] && continue
    [ ! -e "$path" ] || fail "$path is left after purging libddprun-dev"
  done <"$work/sdk-installed"
fi
echo "test_deb: ok"
