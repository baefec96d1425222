#!/usr/bin/env bash
# CI's clang lane: what needs only Debian's packages and clang 14, none of the GCC build or of
# PyTorch 2.x. scripts/run-tests.sh starts it in the background at the idle scheduling class
# (SCHED_IDLE) once the packages are installed, and waits for it after the GCC passes: it runs
# on the CPU time those leave unused (the PyTorch download, the tests' waits), and yields the
# CPU to them whenever they want it. docs/ci.md.
#
#   1. the style checks (scripts/lint.sh: clang-format, clang-tidy over a configured clang
#      unity build, build-tidy/);
#   2. the libFuzzer targets' build (build-fuzz/); run-tests.sh runs them in the foreground,
#      where their few seconds each get a whole core.
# (The product compiled file by file with clang is the sanitizer build's, in the foreground.)
#
#   DDPRUN_SKIP_LINT=1, DDPRUN_SKIP_FUZZ=1   leave out 1, or 2 (.ci/run clears both)
# Each part prints its duration; the lane stops at the first that fails.
set -euo pipefail
cd "$(dirname "$0")/.."

# Where the kernel groups tasks by session (kernel.sched_autogroup_enabled), the lane's new
# session is a group of its own, and groups share the CPU evenly whatever the policy of the
# tasks inside (seen: the lane's clang at 53% beside the GCC build's 46%). Its group gets the
# lowest weight, nice 19 (about 1.5% against a busy group). Written here, once setsid has made
# the session: written by the parent before, it could land on CI's own group.
if [ -w /proc/self/autogroup ]; then echo 19 >/proc/self/autogroup 2>/dev/null || true; fi

part() {
  local name=$1 start
  shift
  echo "== clang lane: $name =="
  start=$(date +%s)
  "$@"
  echo "== clang lane: $name: done in $(($(date +%s) - start)) s =="
}

# clang-format over the tree, and clang-tidy over the product code, reading a configured (not
# built) clang unity build: each batch of up to 8 product files parsed once (scripts/lint.sh).
lint() {
  cmake -S . -B build-tidy -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_COMPILER=clang++-14 \
    -DDDPRUN_WITH_TORCH=OFF -DDDPRUN_BUILD_TESTS=OFF -DDDPRUN_BUILD_BENCH=OFF \
    -DDDPRUN_UNITY_BUILD=ON >/dev/null
  scripts/lint.sh build-tidy
}

# The fuzz targets, with coverage instrumentation and ASan + UBSan, in a directory of their own.
fuzz_build() {
  WITH_FUZZ=1 WITH_TORCH2=0 BUILD_DIR=build-fuzz \
    DDPRUN_CMAKE_ARGS="-DDDPRUN_FUZZ=ON -DCMAKE_CXX_COMPILER=clang++-14" scripts/setup.sh
}

if [ "${DDPRUN_SKIP_LINT:-0}" != 1 ]; then
  part "lint: clang-format, clang-tidy (build-tidy/, configured only)" lint
fi
if [ "${DDPRUN_SKIP_FUZZ:-0}" != 1 ]; then
  part "fuzz targets' build (build-fuzz/)" fuzz_build
fi
echo "== clang lane: ok =="
