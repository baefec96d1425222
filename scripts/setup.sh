#!/usr/bin/env bash
# Installs ddprun's build and test dependencies from Debian bookworm packages (as root, or
# through sudo) and builds the project. Idempotent: packages already present are not touched
# and the build is incremental.
#
#   BUILD_DIR=build (default)   where to build
#   BUILD_TYPE=Release          CMake build type (RelWithDebInfo for debugging)
#   BUILD_TARGETS="a b"         build only these targets (default: everything)
#   DDPRUN_CMAKE_ARGS=...       extra CMake arguments
#   WITH_FUZZ=1                 also install clang and its sanitizer/libFuzzer runtime (for
#                               -DDDPRUN_FUZZ=ON builds; two packages, no recommends)
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(
  cmake g++ ninja-build pkg-config
  libboost-dev libyaml-cpp-dev nlohmann-json3-dev libcli11-dev libspdlog-dev libfmt-dev
  libgtest-dev libgmock-dev zlib1g-dev libabsl-dev libsystemd-dev systemd
  libsqlite3-dev etcd-server libssl-dev openssl
  libtorch-dev libgloo-dev python3-torch dataset-fashion-mnist
  prometheus
)
# libclang-rt-14-dev holds libFuzzer and the sanitizer runtimes; clang-14 only recommends it.
[ "${WITH_FUZZ:-0}" = 1 ] && PACKAGES+=(clang-14 libclang-rt-14-dev)

missing=()
for package in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$package")
  fi
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends \
    "${missing[@]}"
fi

BUILD_DIR=${BUILD_DIR:-build}
# shellcheck disable=SC2086  # DDPRUN_CMAKE_ARGS is a list of arguments
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-Release}" \
  ${DDPRUN_CMAKE_ARGS:-} >/dev/null
targets=()
for target in ${BUILD_TARGETS:-}; do targets+=(--target "$target"); done
cmake --build "$BUILD_DIR" -j"$(nproc)" "${targets[@]}"
