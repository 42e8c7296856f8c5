#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Soak test (not in CI): runs the random stress mixes of tests/stress/
# (test_stress_memory: allocations, cross-stream uses and frees, each block
# checked against the pattern of its last write, the second phase under a
# fixed rill_mem_set_limit; test_stress_order: the happens-before relation
# of random records and waits) again and again with fresh seeds for the
# given minutes, then prints the operations done. Stops at the first
# failure and prints the seed and the command that replays it.
# Usage: scripts/soak.sh [MINUTES (default 10)] [LIMIT_MIB (default 32)]
# RILL_SOAK_PRESET picks the build (default: default; asan-ubsan and tsan
# work too, more slowly).
set -euo pipefail
cd "$(dirname "$0")/.."

minutes=${1:-10}
limit_mib=${2:-32}
preset=${RILL_SOAK_PRESET:-default}
case "$minutes$limit_mib" in
'' | *[!0-9]*)
  echo "usage: scripts/soak.sh [MINUTES] [LIMIT_MIB]" >&2
  exit 2
  ;;
esac
if [ "$limit_mib" -lt 4 ]; then
  echo "soak: the limit must be at least 4 MiB, the largest block of the memory mix" >&2
  exit 2
fi
limit=$((limit_mib << 20))

scripts/deps.sh
echo "== soak: building ($preset)"
cmake --preset "$preset" -G Ninja -DRILL_WERROR=ON >/dev/null
cmake --build "build/$preset" -j "$(nproc)" --target stress_test_stress_memory \
  stress_test_stress_order

bin=build/$preset/tests/stress
log=build/$preset/soak.log
: >"$log"
export RILL_CPU_WORKERS=${RILL_CPU_WORKERS:-4} RILL_STRESS_MEM_LIMIT=$limit
end=$(($(date +%s) + minutes * 60))
rounds=0 iterations=0 allocations=0 uses=0 oom=0 commands=0
echo "== soak: $minutes min, memory limit $limit_mib MiB in the limit phase, log $log"

# Sums the figures a run printed; $1 is its output.
tally() {
  local line n
  while IFS= read -r line; do
    case $line in
    reuse:*iterations* | limit:*iterations*)
      read -r n _ <<<"${line#*: }"
      iterations=$((iterations + n))
      n=${line#*iterations, }; allocations=$((allocations + ${n%% *}))
      n=${line#*allocations, }; uses=$((uses + ${n%% *}))
      n=${line#*uses, }; oom=$((oom + ${n%% *}))
      ;;
    stress:*commands)
      read -r n _ <<<"${line#stress: }"
      iterations=$((iterations + n))
      n=${line#*iterations, }; commands=$((commands + ${n%% *}))
      ;;
    esac
  done <<<"$1"
}

while [ "$(date +%s)" -lt "$end" ]; do
  seed=$(od -An -N8 -tu8 /dev/urandom | tr -d ' ')
  for t in stress_test_stress_memory stress_test_stress_order; do
    if ! out=$(RILL_STRESS_SEED=$seed "$bin/$t" 2>&1); then
      printf '%s\n' "$out" | tee -a "$log" | tail -n 30
      echo "== soak: $t FAILED with seed $seed after $rounds rounds; replay:" >&2
      echo "   RILL_STRESS_SEED=$seed RILL_STRESS_MEM_LIMIT=$limit RILL_CPU_WORKERS=$RILL_CPU_WORKERS $bin/$t" >&2
      exit 1
    fi
    printf '%s\n' "$out" >>"$log"
    tally "$out"
  done
  rounds=$((rounds + 1))
done

echo "== soak: $rounds rounds with fresh seeds passed:"
echo "   memory: $allocations allocations and $uses checked uses (writes and reads), $oom" \
     "allocations refused at the limit; every read saw its block's last pattern, no live" \
     "blocks overlapped, and every block was freed"
echo "   order: $commands commands, each run after every command it waited for"
echo "   $iterations submitting iterations in all; nothing lost"
