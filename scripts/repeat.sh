#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# For whoever touches concurrency: runs the unit and stress tests under
# ThreadSanitizer and the unit and seed tests under
# AddressSanitizer+UndefinedBehaviorSanitizer, each test N times in a row
# (ctest --repeat until-fail:N, default 20), beside a busy loop on every
# processor so that threads are descheduled at awkward moments. A test
# that fails once fails the script.
# Usage: scripts/repeat.sh [N] [--no-load]
set -euo pipefail
cd "$(dirname "$0")/.."
repeats=20
load=1
for arg in "$@"; do
  case $arg in
  --no-load) load=0 ;;
  *[!0-9]* | '') echo "usage: scripts/repeat.sh [N] [--no-load]" >&2 && exit 2 ;;
  *) repeats=$arg ;;
  esac
done
scripts/deps.sh

pids=()
stop_load() { [ ${#pids[@]} -eq 0 ] || kill "${pids[@]}" 2>/dev/null || true; }
trap stop_load EXIT
if [ "$load" = 1 ]; then
  for _ in $(seq "$(nproc)"); do
    (while :; do :; done) &
    pids+=($!)
  done
fi

run() { # preset, ctest label regex
  local preset=$1 labels=$2
  echo "== $preset: building"
  cmake --preset "$preset" -G Ninja -DRILL_WERROR=ON >/dev/null
  cmake --build "build/$preset" -j "$(nproc)"
  echo "== $preset: ctest -L '$labels' --repeat until-fail:$repeats"
  (cd "build/$preset" && ctest -L "$labels" --output-on-failure -j 1 --repeat "until-fail:$repeats")
}
run asan-ubsan 'unit|contract|seeds'
TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" run tsan 'unit|contract|stress'
