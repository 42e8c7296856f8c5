#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# scripts/soak.sh's tally against a real run: runs each stress mix once (a
# fixed seed, the soak's memory limit), passes the output to
# `scripts/soak.sh --tally`, and checks that it counted every line of
# figures ("NAME: N word ...") and that each total equals the sum of the
# run's own figures, read here from the lines' fields. A mix whose line the
# tally does not know, or a total that counts nothing, fails.
# Usage: soak_tally_check.sh SOAK_SH MEMORY_TEST ORDER_TEST
set -euo pipefail
soak=$1 memory=$2 order=$3

export RILL_STRESS_SEED=${RILL_STRESS_SEED:-2025} RILL_STRESS_MEM_LIMIT=$((32 << 20))
out=""
for t in "$memory" "$order"; do
  if ! run=$("$t" 2>&1); then
    printf '%s\n' "$run" | tail -n 30
    echo "FAIL: $t failed (seed $RILL_STRESS_SEED)" >&2
    exit 1
  fi
  out+="$run"$'\n'
done
printf '%s\n' "$out" | grep -E '^[a-z]+: [0-9]+ [a-z]' || true

if ! tallied=$(printf '%s\n' "$out" | "$soak" --tally); then
  echo "FAIL: scripts/soak.sh --tally left lines of figures uncounted" >&2
  exit 1
fi
echo "tally: $(tr '\n' ' ' <<<"$tallied")"

# name=value from the tally, and the same sum read from the run's lines.
got() { sed -n "s/^$1=//p" <<<"$tallied"; }
sum() { printf '%s\n' "$out" | awk "$1" | awk '{ s += $1 } END { print s + 0 }'; }
# shellcheck disable=SC2016 # awk programs: their $N are awk's fields
declare -A want=(
  [lines]=$(printf '%s\n' "$out" | grep -cE '^[a-z]+: [0-9]+ [a-z]' || true)
  [iterations]=$(sum '$3 == "iterations," { print $2 }')
  [allocations]=$(sum '$5 == "allocations," { print $4 }')
  [uses]=$(sum '$7 == "uses," { print $6 }')
  [oom]=$(sum '$9 == "out-of-memory" && $10 == "failures," { print $8 }')
  [recoveries]=$(sum '$3 == "out-of-memory" && $4 == "recoveries," { print $2 }')
  [commands]=$(sum '$1 == "stress:" && $5 == "commands," { print $4 }')
)
bad=0
for name in lines iterations allocations uses oom recoveries commands; do
  if [ "$(got "$name")" != "${want[$name]}" ]; then
    echo "FAIL: the tally's $name is $(got "$name"), the run's lines say ${want[$name]}" >&2
    bad=1
  fi
done
# Each mix ran and printed its line: none of these totals may be zero.
for name in iterations allocations uses commands; do
  if [ "${want[$name]}" -eq 0 ]; then
    echo "FAIL: the run's lines report no $name" >&2
    bad=1
  fi
done
if [ "${want[lines]}" -lt 4 ]; then
  echo "FAIL: ${want[lines]} lines of figures; the mixes print 4 (reuse, limit twice, stress)" >&2
  bad=1
fi
[ "$bad" -eq 0 ] && echo "every line of figures counted; every total equals the run's own"
exit "$bad"
