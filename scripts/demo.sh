#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Builds rill (Release) and runs its main job: `rill info` and `rill demo`,
# a multi-stream pipeline on the current device (a GPU with
# RILL_CUDA_ENABLE=1 where the driver lists one, else the CPU device).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
cmake --preset release -G Ninja >/dev/null
cmake --build build/release -j "$(nproc)"
build/release/rill info
echo
build/release/rill demo "$@"
