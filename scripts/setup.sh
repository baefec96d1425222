#!/usr/bin/env bash
# Installs ddprun's build and test dependencies from Debian bookworm packages (as root, or
# through sudo) and builds the project. Idempotent: packages already present are not touched
# and the build is incremental.
#
#   BUILD_DIR=build (default)   where to build
#   BUILD_TYPE=Release          CMake build type (RelWithDebInfo for debugging)
#   BUILD_TARGETS="a b"         build only these targets (default: everything)
#   DDPRUN_CMAKE_ARGS=...       extra CMake arguments
#   JOBS=$(nproc)               parallel compile jobs
#   WITH_CLANG=1                also install clang 14, its sanitizer/libFuzzer runtime and
#                               clang-format/clang-tidy (the clang sanitizer build, the fuzz
#                               targets, scripts/lint.sh; WITH_FUZZ=1 is the same)
#   WITH_TORCH2=0               skip PyTorch 2.x (installed by default, see below)
#   SETUP_BUILD=0               install only: no configure, no build
#   SETUP_FOR=demo              only what building and running the C++ demo needs (the
#                               launcher and examples/mnist on Debian's LibTorch 1.13:
#                               scripts/run-demo.sh): no test tools, no PyTorch 2.x, no test
#                               build. Default: everything the test suite and CI need.
#
# Two PyTorches: Debian's python3-torch 1.13 belongs to /usr/bin/python3 (and libtorch-dev is
# its LibTorch); PyTorch 2.x (TORCH2_VERSION, from PyPI: a CUDA build whose wheel also carries
# LibTorch 2.x, and NCCL through its dependencies) goes into the project's own virtual
# environment, .venv/torch2 (DDPRUN_TORCH2_VENV), made from /usr/bin/python3. Nothing else
# sees that environment: tests and benchmarks name its interpreter explicitly.
set -euo pipefail
cd "$(dirname "$0")/.."

# What the launcher, the daemon, the worker SDK and the examples are built from, and the
# Fashion-MNIST files the demo trains on.
DEMO_PACKAGES=(
  cmake g++ ninja-build pkg-config
  libboost-dev libyaml-cpp-dev nlohmann-json3-dev libcli11-dev libspdlog-dev libfmt-dev
  zlib1g-dev libabsl-dev libsystemd-dev libsqlite3-dev libssl-dev
  libtorch-dev libgloo-dev dataset-fashion-mnist
)
# And what the tests run or build with: GoogleTest, real etcd, systemd and Prometheus tools,
# Python torch 1.13, the packaging tools.
TEST_PACKAGES=(
  libgtest-dev libgmock-dev systemd etcd-server openssl iproute2 util-linux
  python3-torch python3-venv prometheus
  dpkg-dev lintian adduser
)
case ${SETUP_FOR:-all} in
  demo)
    PACKAGES=("${DEMO_PACKAGES[@]}")
    WITH_TORCH2=0
    ;;
  all) PACKAGES=("${DEMO_PACKAGES[@]}" "${TEST_PACKAGES[@]}") ;;
  *)
    echo "setup: SETUP_FOR=${SETUP_FOR}: expected demo or all" >&2
    exit 2
    ;;
esac
# libclang-rt-14-dev holds libFuzzer and the sanitizer runtimes; clang-14 only recommends it.
if [ "${WITH_CLANG:-0}" = 1 ] || [ "${WITH_FUZZ:-0}" = 1 ]; then
  PACKAGES+=(clang-14 libclang-rt-14-dev clang-format-14 clang-tidy-14)
fi

missing=()
for package in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$package")
  fi
done
setup_start=$(date +%s)
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends \
    "${missing[@]}"
  echo "setup: packages installed in $(($(date +%s) - setup_start)) s"
fi

# PyTorch 2.x in the project's virtual environment (pinned; the newest release when pinned), with
# nvcc and nvvm of its CUDA release (scripts/sdk-torch2.sh). By default .venv/torch2 links to
# the machine's cached environment for exactly these pins (scripts/pypi-env.sh), made from PyPI
# the first time; DDPRUN_TORCH2_VENV names an environment of your own, installed into in place.
TORCH2_VERSION=2.15.0
TORCH2_REQUIREMENTS=("torch==$TORCH2_VERSION" numpy nvidia-cuda-nvcc==13.2.86 nvidia-nvvm==13.2.86)
TORCH2_VENV=${DDPRUN_TORCH2_VENV:-$PWD/.venv/torch2}
if [ "${WITH_TORCH2:-1}" = 1 ]; then
  if ! "$TORCH2_VENV/bin/python" -c "import torch, sys; sys.exit(torch.__version__.split('+')[0] != '$TORCH2_VERSION')" 2>/dev/null; then
    torch_start=$(date +%s)
    if [ -n "${DDPRUN_TORCH2_VENV:-}" ]; then
      echo "setup: installing torch==$TORCH2_VERSION into $TORCH2_VENV (PyPI)"
      /usr/bin/python3 -m venv "$TORCH2_VENV"
      "$TORCH2_VENV/bin/pip" install -q --disable-pip-version-check "${TORCH2_REQUIREMENTS[@]}"
    else
      # shellcheck source=scripts/pypi-env.sh
      . scripts/pypi-env.sh
      pypi_env "$TORCH2_VENV" torch2 /usr/bin/python3 "${TORCH2_REQUIREMENTS[@]}"
    fi
    echo "setup: torch $TORCH2_VERSION ready in $(($(date +%s) - torch_start)) s"
  fi
fi

[ "${SETUP_BUILD:-1}" = 1 ] || exit 0

BUILD_DIR=${BUILD_DIR:-build}
# shellcheck disable=SC2086  # DDPRUN_CMAKE_ARGS is a list of arguments
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-Release}" \
  ${DDPRUN_CMAKE_ARGS:-} >/dev/null
targets=()
for target in ${BUILD_TARGETS:-}; do targets+=(--target "$target"); done
build_start=$(date +%s)
cmake --build "$BUILD_DIR" -j"${JOBS:-$(nproc)}" "${targets[@]}"
echo "setup: $BUILD_DIR built in $(($(date +%s) - build_start)) s"
