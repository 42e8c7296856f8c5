#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Builds rill and runs every test: all labels in an optimised build (the
# Python package's included, with Debian's /usr/bin/python3; the PyTorch
# device package's, label torch, with the pinned PyTorch in a cached virtual
# environment, scripts/torch-env.sh; `pip install`
# of the repository into fresh virtualenvs, label wheel, which needs PyPI;
# the collectives over MPI, label mpi, under mpirun there), the
# unit and seed tests under AddressSanitizer+UndefinedBehaviorSanitizer
# (LeakSanitizer included), and the unit and stress tests under
# ThreadSanitizer; then each libFuzzer target for a short, bounded time
# (scripts/fuzz.sh; RILL_FUZZ_SECONDS per target, default 25). Warnings are
# errors. First, scripts/layers.py checks that no include points up a layer
# (and, after the optimised build, no call),
# scripts/refs.py that every path a comment or document names exists,
# scripts/bench_tables.py that the benchmark tables are current, and
# clang-format that every source is formatted.
# Usage: scripts/test.sh [quick]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
# The module graph points one way, docs/design.md shows the current one,
# and python/rill's modules import each other one way.
/usr/bin/python3 scripts/layers.py --check --python
# Every path and file:line that a comment or a document names exists.
/usr/bin/python3 scripts/refs.py
# The benchmark tables of docs/bench.md and the README are what
# bench/results/ gives.
/usr/bin/python3 scripts/bench_tables.py --check
# Every C source is formatted as .clang-format says (include/rill.h keeps
# its hand-aligned tables: it turns the formatter off, and examples/acl's
# seed program is the seed's text: its folder's .clang-format does).
find src include compat tests bench examples tools python -type f \( -name '*.[ch]' -o -name '*.cpp' \) -print0 |
  xargs -0 clang-format --dry-run -Werror

jobs=$(nproc)
run() { # preset, ctest label regex, more CMake definitions
  local preset=$1 labels=$2
  shift 2
  echo "== $preset: building"
  cmake --preset "$preset" -G Ninja -DRILL_WERROR=ON "$@" >/dev/null
  cmake --build "build/$preset" -j "$jobs"
  echo "== $preset: ctest -L '$labels'"
  (cd "build/$preset" && ctest -L "$labels" --output-on-failure -j 1)
}

if [ "${1:-}" != quick ]; then
  run asan-ubsan 'unit|contract|seeds'
  TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" run tsan 'unit|contract|stress'
fi
# The PyTorch device package builds against the pinned PyTorch, in a
# virtual environment made once (scripts/torch-env.sh), and its tests run
# under the label torch.
torch_python=$(scripts/torch-env.sh)
run default 'unit|contract|seeds|stress|install|python|wheel|mpi|bench|cuda|torch' \
  -DRILL_TORCH_PYTHON="$torch_python"
# Calls point one way too: none up a layer, none in a loop among the files
# of a module that is to be one-way (scripts/layers.py, ONE_WAY).
/usr/bin/python3 scripts/layers.py --check --calls build/default
# The unit tests again with two CPU devices (a split of the processors):
# every rule holds whatever the number of devices.
echo "== default, RILL_CPU_DEVICES=2: ctest -L 'unit|contract'"
(cd build/default && RILL_CPU_DEVICES=2 ctest -L 'unit|contract' --output-on-failure -j 1)
if [ "${1:-}" != quick ]; then
  scripts/fuzz.sh "${RILL_FUZZ_SECONDS:-25}"
fi
