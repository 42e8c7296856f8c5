#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Soak test (not in CI): runs the random stress mixes of tests/stress/
# (test_stress_memory: allocations, cross-stream uses and frees, each block
# checked against the pattern of its last write, the second phase under a
# fixed rill_mem_set_limit, which fails when that phase's peak reserved
# bytes, its own (the peaks are reset at its start), exceed the limit;
# test_stress_order: the happens-before relation
# of random records and waits) again and again with fresh seeds for the
# given minutes, then prints the operations done. Stops at the first
# failure and prints the seed and the command that replays it.
# Usage: scripts/soak.sh [MINUTES (default 10)] [LIMIT_MIB (default 32)]
# RILL_SOAK_PRESET picks the build (default: default; asan-ubsan and tsan
# work too, more slowly).
#
# Every line of figures a run prints ("NAME: N word ...") is counted, or the
# soak stops: a total that counts nothing would report nothing.
# scripts/soak.sh --tally < OUTPUT prints the totals of the lines of OUTPUT
# (one run's output, or many) as name=value lines, and exits 1 when a line
# of figures is not counted; ctest's stress_soak_tally checks it against
# the lines of a real run (tests/stress/soak_tally_check.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

rounds=0 iterations=0 allocations=0 uses=0 oom=0 recoveries=0 commands=0 lines=0
uncounted=""

# The lines of figures the mixes print (tests/stress/test_stress_memory.c,
# test_stress_order.c), and what any line of figures looks like.
memory_re='^(reuse|limit): ([0-9]+) iterations, ([0-9]+) allocations, ([0-9]+) uses, ([0-9]+) out-of-memory failures'
recoveries_re='^limit: ([0-9]+) out-of-memory recoveries'
order_re='^stress: ([0-9]+) iterations, ([0-9]+) commands, '
figures_re='^[a-z]+: [0-9]+ [a-z]'

# Sums the figures of the lines in $1 (a run's output). A line of figures
# that matches none of the mixes' lines is added to $uncounted.
tally() {
  local line
  while IFS= read -r line; do
    if [[ $line =~ $memory_re ]]; then
      iterations=$((iterations + BASH_REMATCH[2]))
      allocations=$((allocations + BASH_REMATCH[3]))
      uses=$((uses + BASH_REMATCH[4]))
      oom=$((oom + BASH_REMATCH[5]))
    elif [[ $line =~ $recoveries_re ]]; then
      recoveries=$((recoveries + BASH_REMATCH[1]))
    elif [[ $line =~ $order_re ]]; then
      iterations=$((iterations + BASH_REMATCH[1]))
      commands=$((commands + BASH_REMATCH[2]))
    elif [[ $line =~ $figures_re ]]; then
      uncounted+="$line"$'\n'
      continue
    else
      continue
    fi
    lines=$((lines + 1))
  done <<<"$1"
}

if [ "${1:-}" = "--tally" ]; then
  tally "$(cat)"
  echo "lines=$lines"
  echo "iterations=$iterations"
  echo "allocations=$allocations"
  echo "uses=$uses"
  echo "oom=$oom"
  echo "recoveries=$recoveries"
  echo "commands=$commands"
  if [ -n "$uncounted" ]; then
    printf 'soak: lines of figures the tally does not count:\n%s' "$uncounted" >&2
    exit 1
  fi
  exit 0
fi

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
echo "== soak: $minutes min, memory limit $limit_mib MiB in the limit phase, log $log"

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
    if [ -n "$uncounted" ]; then
      printf '%s' "$uncounted" | tee -a "$log"
      echo "== soak: $t printed lines of figures that the tally does not count; teach" \
           "scripts/soak.sh's tally their form" >&2
      exit 1
    fi
  done
  rounds=$((rounds + 1))
done

echo "== soak: $rounds rounds with fresh seeds passed:"
echo "   memory: $allocations allocations and $uses checked uses (writes and reads), $oom" \
     "allocations refused at the limit and $recoveries recovered there; every read saw its" \
     "block's last pattern, no live blocks overlapped, and every block was freed"
echo "   order: $commands commands, each run after every command it waited for"
echo "   $iterations submitting iterations in all, from $lines lines of figures; nothing lost"
