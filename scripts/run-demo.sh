#!/usr/bin/env bash
# The main job: installs what is needed, builds, and trains the Fashion-MNIST CNN (a C++ worker
# on the ddprun worker SDK, gloo on CPU) with two workers under
#   ddprun --standalone --nproc_per_node 2
# Rank 0 shows progress while it trains (a live bar on a terminal, a line every 10 s in a log),
# writes the model, the accuracy history and the snapshots under DEMO_OUT (default: a fresh
# temporary directory), and ends by saying where they are and how to resume.
#   DEMO_EPOCHS=2 (default)   epochs to train
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_DIR=build scripts/setup.sh
out=${DEMO_OUT:-$(mktemp -d "${TMPDIR:-/tmp}/ddprun_demo_XXXXXX")}
echo "demo: training Fashion-MNIST under ddprun; output in $out"
build/launcher/ddprun --standalone --nproc_per_node 2 --no_python build/examples/mnist \
  --epochs "${DEMO_EPOCHS:-2}" --out_dir "$out"
echo "demo: done (outputs in $out)"
