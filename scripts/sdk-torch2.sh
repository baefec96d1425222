#!/usr/bin/env bash
# Builds the worker SDK, its C++ examples and its tests against LibTorch 2.x from the project's
# PyTorch 2.x virtual environment (.venv/torch2, made by scripts/setup.sh), with the SDK's
# NCCL path compiled in, and runs the SDK's tests there (ctest -L worker_sdk, on CPU/Gloo).
# Run scripts/setup.sh first. Idempotent and incremental like setup.sh: the configure is
# repeated (cheap), the build only redoes what changed.
#
#   BUILD_DIR=build-torch2 (default)   where to build
#   BUILD_TYPE=Release                 CMake build type
#   JOBS=$(nproc)                      parallel compile jobs
#   SDK_TORCH2_TEST=1                  0: configure and build only, no ctest
#   SDK_TORCH2_TARGETS="a b"           build only these (default: what the SDK's tests run)
#   SDK_TORCH2_KEEP_GOING=1            build on past failures (ninja -k 0)
#   SDK_TORCH2_CTEST_ARGS=...          more ctest arguments (CI: --output-junit, for its check
#                                      of skipped tests)
#   DDPRUN_CMAKE_ARGS=...              extra CMake arguments
#   DDPRUN_SDK_TEST_LAUNCHER=...       the ddprun the SDK's tests launch (default:
#                                      build/launcher/ddprun when built, else this build's own)
#   DDPRUN_SDK_TEST_DAEMON=...         ddp-rendezvous for the spare-node test (default:
#                                      build/rendezvous/ddp-rendezvous when built, else this
#                                      build's own)
#   DDPRUN_TORCH2_VENV=.venv/torch2    the environment (as in setup.sh)
#   DDPRUN_TORCH2_PYTHON=...           another Python whose torch (a CUDA build) to use
#   DDPRUN_CUDA_HOME=...               a CUDA toolkit to use instead of the wheel's
#   EXTRA_PREFIX_PATH="a;b"            more CMake prefixes (dependencies in private prefixes)
#
# Why more than a CMAKE_PREFIX_PATH: TorchConfig.cmake of a CUDA wheel insists on finding the
# CUDA toolkit it was built with (nvcc, which it runs; libcudart.so) although the SDK compiles
# no CUDA code. The wheel's dependencies carry the toolkit's headers and libraries
# (site-packages/nvidia/cu13) but only versioned .so names and no nvcc; nvcc comes from
# nvidia-cuda-nvcc with an nvidia-nvvm (cicc) of the same release (setup.sh pins both). The
# build directory gets a toolkit root of symbolic links into the wheel (cuda-toolkit/: bin,
# include, nvvm, lib with unversioned names) and CMake is pointed at it. Without nvcc in the
# wheel (another Python's torch), an installed toolkit is used: DDPRUN_CUDA_HOME, else the
# nvcc on PATH, else /usr/local/cuda. Tests that compare with Python torch use the same
# interpreter and its torchrun, so 2.x is compared with 2.x.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${DDPRUN_TORCH2_VENV:-$PWD/.venv/torch2}
PYTHON=${DDPRUN_TORCH2_PYTHON:-$VENV/bin/python}
BUILD_DIR=${BUILD_DIR:-build-torch2}
# The ddprun the SDK's tests launch and the spare-node test's ddp-rendezvous (neither links
# LibTorch): the main build's when there is one, rather than compiling the launcher, agent and
# rendezvous a second time (about 450 CPU-seconds).
SDK_TEST_LAUNCHER=${DDPRUN_SDK_TEST_LAUNCHER:-}
if [ -z "$SDK_TEST_LAUNCHER" ] && [ -x build/launcher/ddprun ]; then
  SDK_TEST_LAUNCHER=$PWD/build/launcher/ddprun
fi
SDK_TEST_DAEMON=${DDPRUN_SDK_TEST_DAEMON:-}
if [ -z "$SDK_TEST_DAEMON" ] && [ -x build/rendezvous/ddp-rendezvous ]; then
  SDK_TEST_DAEMON=$PWD/build/rendezvous/ddp-rendezvous
fi
# Same pins as setup.sh's pip line: nvcc of torch's CUDA release, and its own cicc.
NVCC_PINS=(nvidia-cuda-nvcc==13.2.86 nvidia-nvvm==13.2.86)

die() {
  echo "sdk-torch2: $*" >&2
  exit 1
}

[ -x "$PYTHON" ] || die "no $PYTHON: run scripts/setup.sh first (it makes the PyTorch 2.x venv)"

# An environment made before setup.sh pinned nvcc lacks it (or has a newer nvvm whose PTX its
# ptxas rejects): install the pins once. Only the project's own environment is changed.
if [ "$PYTHON" = "$VENV/bin/python" ] && [ -z "${DDPRUN_CUDA_HOME:-}" ] &&
  ! "$PYTHON" - "${NVCC_PINS[@]}" <<'EOF'; then
import sys
from importlib.metadata import version, PackageNotFoundError
try:
    ok = all(version(n) == v for n, v in (p.split("==") for p in sys.argv[1:]))
except PackageNotFoundError:
    ok = False
sys.exit(0 if ok else 1)
EOF
  echo "sdk-torch2: installing ${NVCC_PINS[*]} into $VENV (PyPI)"
  "$VENV/bin/pip" install -q --disable-pip-version-check "${NVCC_PINS[@]}"
fi

# torch's install prefix (share/cmake/Torch, lib, include), its version, its CUDA release and
# the wheels' nvidia/ directory.
read -r TORCH_PREFIX TORCH_VERSION TORCH_CUDA NVIDIA_DIR < <("$PYTHON" -c '
import os, torch
prefix = os.path.dirname(torch.__file__)
nvidia = os.path.join(os.path.dirname(prefix), "nvidia")
print(prefix, torch.__version__, torch.version.cuda, nvidia)')
[ "$TORCH_CUDA" != None ] || die "torch $TORCH_VERSION of $PYTHON is a CPU build: no NCCL path"
CUDA_DIR=$NVIDIA_DIR/cu${TORCH_CUDA%%.*}

mkdir -p "$BUILD_DIR"
if [ -z "${DDPRUN_CUDA_HOME:-}" ] && [ -x "$CUDA_DIR/bin/nvcc" ]; then
  # The toolkit root of links into the wheel (see above), rebuilt each time: cheap, and never
  # stale. Links keep their targets' times, so nothing is recompiled for it.
  TOOLKIT=$PWD/$BUILD_DIR/cuda-toolkit
  rm -rf "$TOOLKIT"
  mkdir -p "$TOOLKIT/lib"
  for dir in bin include nvvm; do ln -s "$CUDA_DIR/$dir" "$TOOLKIT/$dir"; done
  ln -s lib "$TOOLKIT/lib64"
  for lib in "$CUDA_DIR"/lib/*; do
    name=$(basename "$lib")
    ln -s "$lib" "$TOOLKIT/lib/$name"
    case $name in *.so.*) ln -sf "$lib" "$TOOLKIT/lib/${name%%.so.*}.so" ;; esac
  done
else
  TOOLKIT=${DDPRUN_CUDA_HOME:-}
  if [ -z "$TOOLKIT" ] && command -v nvcc >/dev/null; then
    TOOLKIT=$(dirname "$(dirname "$(readlink -f "$(command -v nvcc)")")")
  fi
  TOOLKIT=${TOOLKIT:-/usr/local/cuda}
  [ -x "$TOOLKIT/bin/nvcc" ] ||
    die "no nvcc: neither in $CUDA_DIR/bin (pip install ${NVCC_PINS[*]}) nor in $TOOLKIT/bin"
fi

# CMAKE_PREFIX_PATH starts with torch's install prefix, not share/cmake: TorchConfig's
# find_library calls then search the prefix's lib/ before the system's, which holds Debian's
# LibTorch 1.13. TORCH_CUDA_ARCH_LIST only quiets the GPU probe: the SDK compiles no CUDA code.
# shellcheck disable=SC2086  # DDPRUN_CMAKE_ARGS is a list of arguments
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-Release}" \
  -DCMAKE_PREFIX_PATH="$TORCH_PREFIX${EXTRA_PREFIX_PATH:+;$EXTRA_PREFIX_PATH}" \
  -DCUDA_TOOLKIT_ROOT_DIR="$TOOLKIT" -DCUDAToolkit_ROOT="$TOOLKIT" \
  -DCMAKE_CUDA_COMPILER="$TOOLKIT/bin/nvcc" -DTORCH_CUDA_ARCH_LIST=9.0 \
  -DDDPRUN_BUILD_BENCH=OFF \
  -DDDPRUN_TEST_PYTHON="$PYTHON" -DDDPRUN_TORCHRUN_WRAPPER="$(dirname "$PYTHON")/torchrun" \
  -DDDPRUN_TEST_LAUNCHER="$SDK_TEST_LAUNCHER" -DDDPRUN_SDK_TEST_DAEMON="$SDK_TEST_DAEMON" \
  ${DDPRUN_CMAKE_ARGS:-} >"$BUILD_DIR/configure.log" 2>&1 ||
  {
    cat "$BUILD_DIR/configure.log" >&2
    die "configure failed (log: $BUILD_DIR/configure.log)"
  }

cache_value() { sed -n "s/^$1:[A-Z]*=//p" "$BUILD_DIR/CMakeCache.txt"; }
echo "sdk-torch2: LibTorch $TORCH_VERSION (CUDA $TORCH_CUDA) from $(cache_value Torch_DIR)"
echo "sdk-torch2: CUDA toolkit for CMake: $TOOLKIT"
echo "sdk-torch2: the tests launch ${SDK_TEST_LAUNCHER:-the ddprun of $BUILD_DIR}"
echo "sdk-torch2: NCCL path compiled (DDPRUN_WITH_NCCL): $(cache_value DDPRUN_WITH_NCCL)" \
  "$(cache_value DDPRUN_NCCL_INCLUDE_DIR)"

# What the SDK's tests run (tests/worker_sdk/CMakeLists.txt), and every C++ example; ddprun
# too unless another build's is launched.
own_ddprun=ddprun
[ -z "$SDK_TEST_LAUNCHER" ] || own_ddprun=
TARGETS=${SDK_TORCH2_TARGETS:-ddprun_worker_sdk worker_sdk_unit_test worker_sdk_test \
worker_sdk_install_test worker_sdk_spare_node_test sdk_test_worker min_ddp mnist snapshot_trainer \
$own_ddprun}
args=()
for target in $TARGETS; do args+=(--target "$target"); done
args+=(-j"${JOBS:-$(nproc)}")
[ "${SDK_TORCH2_KEEP_GOING:-0}" = 1 ] && args+=(-- -k 0)
start=$(date +%s)
cmake --build "$BUILD_DIR" "${args[@]}"
echo "sdk-torch2: build took $(($(date +%s) - start)) s"

if [ "${SDK_TORCH2_TEST:-1}" = 1 ]; then
  # shellcheck disable=SC2086  # SDK_TORCH2_CTEST_ARGS is a list of arguments
  ctest --test-dir "$BUILD_DIR" -L worker_sdk --output-on-failure --no-tests=error -j2 --timeout 300 \
    ${SDK_TORCH2_CTEST_ARGS:-}
fi
