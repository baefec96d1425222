#!/usr/bin/env bash
# Installs what is needed, builds (GCC), and runs the whole test suite (what CI runs). Then: the
# wheel and the Debian package (tests/packaging/); the worker SDK against LibTorch 2.x; the
# in-process tests once more under AddressSanitizer and UBSan (clang, the product file by
# file); the fuzz targets (clang) for a few seconds each. Beside all that, from the packages
# on, the clang lane (scripts/ci-clang-lane.sh: the style checks, the fuzz targets' build) runs
# in the background at the idle scheduling class, on the CPU time the rest leaves unused; its
# log is printed when it is waited for.
# docs/ci.md: what each step checks and how long it takes (budget: 45 minutes on 2 cores).
#
# Nothing passes by being left out: every ctest run fails on zero tests, a skipped test fails
# unless .ci/allowed-skips.txt lists it with its reason (scripts/check-skips.py), and a step
# that cannot run (not root, a tool or .venv/torch2 missing) fails. On a developer's machine:
#   DDPRUN_ALLOW_SKIPS=1              skips are listed, not failed; packaging tests that cannot
#                                     run skip
#   DDPRUN_SKIP_<STEP>=1              leave out a step: PACKAGING, TORCH2_SDK, SANITIZERS, LINT,
#                                     FUZZ (.ci/run clears all of these)
set -euo pipefail
cd "$(dirname "$0")/.."

# step <name> <command...>: one step of CI, its duration printed after it and, with every
# other step's, at the end (also when a step fails: the trap).
ci_start=$(date +%s)
durations=()
current_step=
step() {
  local name=$1 start
  shift
  current_step=$name
  echo "== $name =="
  start=$(date +%s)
  "$@"
  durations+=("$(printf '%6d s  %s' $(($(date +%s) - start)) "$name")")
  echo "== $name: done in $(($(date +%s) - start)) s =="
  current_step=
}
report_durations() {
  local status=$?
  stop_clang_lane
  echo "== CI steps =="
  if ((${#durations[@]})); then printf '%s\n' "${durations[@]}"; fi
  [ -z "$current_step" ] || echo "  failed  $current_step (exit $status)"
  echo "total: $(($(date +%s) - ci_start)) s"
}
trap report_durations EXIT

# run_ctest <build dir> <ctest arguments...>: ctest that fails on zero tests, keeps each passed
# test's output (its end: GoogleTest lists skips last) in <build dir>/ci-junit.xml, and then
# fails on any skip not allowed by .ci/allowed-skips.txt.
ctest_output=(--test-output-size-passed 1048576 --test-output-truncation head)
run_ctest() {
  local dir=$1
  shift
  ctest --test-dir "$dir" --output-on-failure --no-tests=error --timeout 300 \
    --output-junit "$PWD/$dir/ci-junit.xml" "${ctest_output[@]}" "$@"
  scripts/check-skips.py .ci/allowed-skips.txt "$dir/ci-junit.xml"
}

# The clang lane (scripts/ci-clang-lane.sh) in a session of its own (so that a failing step
# can end it and everything it started, by process group) at SCHED_IDLE, its autogroup (if
# any) at nice 19 (the lane sets that itself): it gets the CPU only when nothing else of CI
# wants it.
lane_pid=
lane_log=$PWD/build-ci/clang-lane.log
start_clang_lane() {
  local idle=(chrt --idle 0)
  # Where the idle class is refused (a container without the right), the lowest nice value.
  "${idle[@]}" true 2>/dev/null || idle=(nice -n 19)
  mkdir -p build-ci
  setsid -w "${idle[@]}" scripts/ci-clang-lane.sh >"$lane_log" 2>&1 &
  lane_pid=$!
  echo "clang lane started in the background (${idle[*]}; pid $lane_pid, log $lane_log)"
}
wait_clang_lane() {
  local status=0
  wait "$lane_pid" || status=$?
  lane_pid=
  cat "$lane_log"
  return "$status"
}
stop_clang_lane() {
  if [ -n "$lane_pid" ]; then
    kill -TERM -- "-$lane_pid" 2>/dev/null || true
    lane_pid=
  fi
}

# The packages first (clang's too): the clang lane needs nothing more.
packages() {
  WITH_CLANG=1 WITH_TORCH2=0 SETUP_BUILD=0 scripts/setup.sh
}
run_lane=0
[ "${DDPRUN_SKIP_LINT:-0}" = 1 ] && [ "${DDPRUN_SKIP_FUZZ:-0}" = 1 ] || run_lane=1
step "packages (Debian)" packages
[ "$run_lane" = 0 ] || start_clang_lane

# The libraries, programs and tests compile in batches (DDPRUN_UNITY_BUILD: a clean build takes
# minutes less; the sanitizer build below compiles the product file by file). Configured for
# /usr, the Debian packages' prefix, so that both are packed from this build (no second build of
# the SDK for Debian's libdir).
# DDPRUN_REQUIRE_TORCH2: without .venv/torch2 the configure fails, rather than leave out the
# tests' .torch2 copies.
build_main() {
  BUILD_DIR=build \
    DDPRUN_CMAKE_ARGS="-DDDPRUN_BUILD_TESTS=ON -DDDPRUN_BUILD_BENCH=OFF -DDDPRUN_UNITY_BUILD=ON -DCMAKE_INSTALL_PREFIX=/usr -DDDPRUN_REQUIRE_TORCH2=ON" \
    scripts/setup.sh
}
step "setup, GCC build (build/)" build_main
step "ctest (build/)" run_ctest build -j2

# The packages (issue 26, docs/packaging.md): the wheel built by pip (its own CMake build,
# build-wheel/, kept between runs) and run in a fresh venv with torch 2.x; the Debian
# packages made by CPack from build/ (no compiling), installed, verified and purged.
if [ "${DDPRUN_SKIP_PACKAGING:-0}" != 1 ]; then
  step "packaging: the wheel" tests/packaging/test_wheel.sh
  step "packaging: the Debian packages" tests/packaging/test_deb.sh build build
fi

# The worker SDK against LibTorch 2.x (the PyTorch 2.x wheel of .venv/torch2, NCCL path
# compiled in: its configure fails without NCCL): its own build directory, then its whole test
# suite on CPU/Gloo.
sdk_torch2() {
  SDK_TORCH2_CTEST_ARGS="--output-junit $PWD/build-torch2/ci-junit.xml ${ctest_output[*]}" \
    DDPRUN_CMAKE_ARGS="-DDDPRUN_UNITY_BUILD=ON" scripts/sdk-torch2.sh
  scripts/check-skips.py .ci/allowed-skips.txt build-torch2/ci-junit.xml
}
if [ "${DDPRUN_SKIP_TORCH2_SDK:-0}" != 1 ]; then
  step "worker SDK against LibTorch 2.x (build-torch2/)" sdk_torch2
fi

# Every in-process test program (units, in-process servers on port 0), derived from the test
# labels of build/ (scripts/in-process-tests.py): a new one is in this pass without a list to
# keep, and the log says how many and which. Tests that start real processes with torch are
# left to the first pass. Built with clang 14 (the GCC passes above have GCC's view), unoptimised
# (quicker to compile, and the sanitizers see every access), without LibTorch; the product
# file by file (DDPRUN_UNITY_BUILD=TESTS), with ddprun and ddp-rendezvous, so that every product
# file is compiled alone once: one that compiles only beside the others of its unity batch in
# the builds above (an include it lacks) fails here.
sanitizer_build() {
  local list
  list=$(scripts/in-process-tests.py build)  # fails (and so CI) when build/ has none
  mapfile -t programs <<<"$list"
  echo "sanitizer pass: ${#programs[@]} in-process test programs: ${programs[*]}"
  WITH_CLANG=1 WITH_TORCH2=0 BUILD_DIR=build-asan BUILD_TYPE=Debug \
    DDPRUN_CMAKE_ARGS="-DCMAKE_CXX_COMPILER=clang++-14 -DDDPRUN_WITH_TORCH=OFF -DDDPRUN_BUILD_BENCH=OFF -DDDPRUN_SANITIZE=ON -DDDPRUN_UNITY_BUILD=TESTS" \
    BUILD_TARGETS="${programs[*]} ddprun ddp-rendezvous" scripts/setup.sh
}
# intercept_tls_get_addr=0: the sanitizer runtime misreads glibc 2.36's dynamic TLS vector
# once a dlopen()ed library with thread-locals is loaded (libcrypto, through the security
# module); LeakSanitizer's tracer then crashed at exit ("Tracer caught signal 11", "DTLS ... at
# 0x531-...") in a test that passed, depending only on the binary's layout (GCC 12's runtime,
# StatusAuthTest.MutualTlsStatusQueriesNeedTheClientCertificate after an unrelated change).
# Leaks are still detected; memory held only by a dynamic TLS block is not a root.
# The tests that hold every descriptor of their process (named OutOfDescriptors*) run apart,
# without UBSan's vptr check, which cannot work then (tests/sanitizers/out-of-descriptors.supp
# says why); everything else runs with every check.
sanitizer_tests() {
  local list
  list=$(scripts/in-process-tests.py --labels)
  mapfile -t labels <<<"$list"
  local -x ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:intercept_tls_get_addr=0
  UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    run_ctest build-asan -j2 "${labels[@]}" -E OutOfDescriptors
  UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1:suppressions=$PWD/tests/sanitizers/out-of-descriptors.supp \
    run_ctest build-asan -j2 "${labels[@]}" -R OutOfDescriptors
}
if [ "${DDPRUN_SKIP_SANITIZERS:-0}" != 1 ]; then
  step "sanitizer build (clang, ASan + UBSan, the product file by file; build-asan/)" sanitizer_build
  step "sanitizer tests (in-process programs)" sanitizer_tests
fi

# The clang lane's end (started after the packages; scripts/ci-clang-lane.sh): its log, with
# each part's duration. Then the fuzz targets it built, each for DDPRUN_FUZZ_SECONDS (5) over
# its checked-in seeds under ASan + UBSan (docs/reliability.md), in the foreground: a whole
# core each.
if [ "$run_lane" = 1 ]; then
  step "clang lane (since the packages: lint, fuzz build)" wait_clang_lane
fi
if [ "${DDPRUN_SKIP_FUZZ:-0}" != 1 ]; then
  step "fuzz targets (bounded runs, ASan + UBSan; build-fuzz/)" run_ctest build-fuzz -j2 -L fuzz
fi
