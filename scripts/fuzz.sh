#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Builds the libFuzzer targets of tests/fuzz with clang (the fuzz preset:
# AddressSanitizer+UndefinedBehaviorSanitizer, LeakSanitizer at exit) and
# runs each for a bounded time, printing how many inputs it tried. Stops at
# the first target that fails and prints the input to replay it.
# The corpus of each target grows in build/fuzz/corpus/<target> from run
# to run; crashing inputs go to build/fuzz/artifacts/.
# Usage: scripts/fuzz.sh [SECONDS_PER_TARGET (default 60)] [TARGET...]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh

seconds=${1:-60}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(fuzz_ipc_mem fuzz_ipc_event fuzz_graph)
case $seconds in
'' | *[!0-9]*)
  echo "usage: scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]" >&2
  exit 2
  ;;
esac

echo "== fuzz: building"
cmake --preset fuzz -G Ninja -DRILL_WERROR=ON >/dev/null
cmake --build build/fuzz -j "$(nproc)" --target "${targets[@]}"

mkdir -p build/fuzz/artifacts build/fuzz/logs
for t in "${targets[@]}"; do
  corpus=build/fuzz/corpus/$t
  log=build/fuzz/logs/$t.log
  mkdir -p "$corpus"
  args=(-max_total_time="$seconds" -timeout=10 -print_final_stats=1
        -artifact_prefix="build/fuzz/artifacts/$t-")
  # A handle is 64 bytes behind two bytes of choices (tests/fuzz/fuzz_input.h).
  [ "$t" = fuzz_graph ] || args+=(-max_len=66)
  echo "== fuzz: $t for ${seconds} s"
  if ! RILL_CPU_WORKERS=2 "build/fuzz/tests/fuzz/$t" "${args[@]}" "$corpus" >"$log" 2>&1; then
    tail -n 60 "$log"
    input=$(sed -n "s/.*Test unit written to \(.*\)$/\1/p" "$log" | tail -n 1)
    echo "== fuzz: $t FAILED (log: $log)" >&2
    [ -z "$input" ] || echo "   replay: build/fuzz/tests/fuzz/$t $input" >&2
    exit 1
  fi
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
  echo "   $t: ${runs:-?} inputs tried (${rate:-?}/s), corpus $(ls "$corpus" | wc -l) inputs;" \
       "every status as allowed, no crash, hang or leak"
done
