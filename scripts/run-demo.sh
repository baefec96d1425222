#!/usr/bin/env bash
# The main job: installs what is needed, builds, and trains the Fashion-MNIST CNN (a C++ worker
# on the ddprun worker SDK, gloo on CPU) with two workers under
#   ddprun --standalone --nproc_per_node 2
# Rank 0 shows progress while it trains (a live bar on a terminal, a line every 10 s in a log),
# writes the model, the accuracy history and the snapshots under DEMO_OUT (default: a fresh
# temporary directory), and ends by saying where they are and how to resume.
#   DEMO_EPOCHS=2 (default)   epochs to train
#   BUILD_DIR=build (default) where to build
set -euo pipefail
cd "$(dirname "$0")/.."

# Only what the demo needs: its packages (no test tools, no PyTorch 2.x download) and two
# programs, the launcher and the example (scripts/run-tests.sh installs and builds the rest).
# A clean build compiles the sources in batches (DDPRUN_UNITY_BUILD: minutes less, as in CI).
BUILD_DIR=${BUILD_DIR:-build}
SETUP_FOR=demo BUILD_DIR=$BUILD_DIR BUILD_TARGETS="ddprun mnist" \
  DDPRUN_CMAKE_ARGS="-DDDPRUN_BUILD_TESTS=OFF -DDDPRUN_BUILD_BENCH=OFF -DDDPRUN_UNITY_BUILD=ON" \
  scripts/setup.sh
out=${DEMO_OUT:-$(mktemp -d "${TMPDIR:-/tmp}/ddprun_demo_XXXXXX")}
echo "demo: training Fashion-MNIST under ddprun; output in $out"
"$BUILD_DIR/launcher/ddprun" --standalone --nproc_per_node 2 --no_python "$BUILD_DIR/examples/mnist" \
  --epochs "${DEMO_EPOCHS:-2}" --out_dir "$out"
echo "demo: done (outputs in $out)"
