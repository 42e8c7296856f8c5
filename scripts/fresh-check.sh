#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Checks what the README promises: that scripts/demo.sh and scripts/test.sh
# work as root on a fresh Debian 12 machine. It builds a minimal Debian 12
# root file system with debootstrap (variant minbase, with git added and
# nothing else) from the Debian mirror that this machine's apt sources name,
# clones the repository's committed HEAD into it (changes not committed are
# not checked), and runs the two commands there under chroot, as root with
# an empty environment but for HOME, PATH and TERM, printing PASS or FAIL
# and the time of each. The network's setup comes along: this machine's
# resolv.conf and local certificate authorities. /proc, /sys, /dev and a
# fresh /dev/shm are mounted in the root for the run and unmounted on exit,
# whatever happens.
# It needs root, the Debian mirror, PyPI (test.sh's wheel label), about
# 5 GB and, on 2 cores, about 15 min with `quick` and 25 without, so CI does
# not run it. apt-get installs debootstrap here if it is missing.
# Usage: scripts/fresh-check.sh [--root DIR] [--keep] [quick]
#   --root DIR  where to build the root: a folder that is absent or empty
#               (default: a new folder under /var/tmp);
#   --keep      leaves the root there afterwards (default: removed);
#   quick       runs `scripts/test.sh quick` instead of `scripts/test.sh`.
# RILL_FRESH_MIRROR overrides the mirror (a URL of Debian's archive).
set -euo pipefail
# One block, read whole before it runs: a checkout or an edit of this file
# during the hour it may take does not change what runs.
{
cd "$(dirname "$0")/.."
repo=$PWD

root='' keep=0 quick=''
while [ $# -gt 0 ]; do
  case $1 in
  --root) root=${2:?--root needs a folder}; shift 2 ;;
  --keep) keep=1; shift ;;
  quick) quick=quick; shift ;;
  *) echo "usage: scripts/fresh-check.sh [--root DIR] [--keep] [quick]" >&2; exit 2 ;;
  esac
done
[ "$(id -u)" -eq 0 ] || { echo "fresh-check: run it as root (debootstrap, mount and chroot need it)" >&2; exit 1; }
if [ -z "$root" ]; then
  root=$(mktemp -d /var/tmp/rill-fresh.XXXXXX)
else
  mkdir -p "$root"
  root=$(cd "$root" && pwd -P)
  [ -z "$(ls -A "$root")" ] || { echo "fresh-check: $root is not empty; remove it or name another folder" >&2; exit 1; }
fi

# The mirrors of the apt sources here (one-line and deb822 formats): the
# archive's (.../debian) and, if named, the security archive's.
uris() {
  cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources 2>/dev/null |
    awk '/^[[:space:]]*deb[[:space:]]/ { for (i = 2; i <= NF; i++) if ($i ~ /^(https?|ftp):\/\//) { print $i; break } }
         /^[[:space:]]*URIs:/ { for (i = 2; i <= NF; i++) print $i }'
}
mirror=${RILL_FRESH_MIRROR:-$(uris | grep -E '/debian/?$' | head -n 1 || true)}
security=$(uris | grep -E '/debian-security/?$' | head -n 1 || true)
[ -n "$mirror" ] || { echo "fresh-check: no Debian mirror in /etc/apt/sources.list*; set RILL_FRESH_MIRROR" >&2; exit 1; }
head=$(git rev-parse HEAD)
echo "fresh-check: Debian 12 (minbase + git) in $root from $mirror; rill at $(git rev-parse --short HEAD)"
[ -z "$(git status --porcelain --untracked-files=no)" ] || echo "fresh-check: note: changes not committed are not checked"

mounted=()
cleanup() {
  local i
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do
    umount -R "${mounted[i]}" 2>/dev/null || umount -R -l "${mounted[i]}" || true
  done
  mounted=()
  if awk -v r="$root" '$2 == r || index($2, r "/") == 1 { found = 1 } END { exit !found }' /proc/mounts; then
    echo "fresh-check: something is still mounted under $root; it is left there" >&2
  elif [ "$keep" -eq 0 ]; then
    rm -rf --one-file-system "$root"
  else
    echo "fresh-check: the root is kept in $root"
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

results=() failed=0
timed() { # name, command...: runs it, records PASS or FAIL and its time
  local name=$1 start=$SECONDS rc=0
  shift
  echo "== fresh-check: $name"
  "$@" || rc=$?
  local verdict=PASS
  [ "$rc" -eq 0 ] || { verdict="FAIL (exit $rc)"; failed=1; }
  results+=("$(printf '%-28s %s in %d s' "$name" "$verdict" $((SECONDS - start)))")
  echo "== fresh-check: $name: $verdict in $((SECONDS - start)) s"
  return "$rc"
}
summary() {
  echo "== fresh-check: summary"
  printf '  %s\n' "${results[@]}"
}

command -v debootstrap >/dev/null || {
  echo "fresh-check: installing debootstrap"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null
}
timed "debootstrap" debootstrap --variant=minbase --include=git bookworm "$root" "$mirror" ||
  { summary; exit 1; }

# What a fresh machine's apt sources name: the point release, its updates
# and the security archive.
{
  echo "deb $mirror bookworm main"
  echo "deb $mirror bookworm-updates main"
  [ -z "$security" ] || echo "deb $security bookworm-security main"
} >"$root/etc/apt/sources.list"
# The network's setup comes along: its name servers, and the local
# certificate authorities (a network that inspects TLS signs PyPI's
# certificates with its own), which ca-certificates adds to the bundle
# that pip reads when deps.sh installs it.
cp -L /etc/resolv.conf "$root/etc/resolv.conf"
if compgen -G '/usr/local/share/ca-certificates/*.crt' >/dev/null; then
  mkdir -p "$root/usr/local/share/ca-certificates"
  cp -L /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/"
fi

git clone -q --no-local --no-checkout "$repo" "$root/root/rill"
git -C "$root/root/rill" checkout -q --detach "$head"

# /dev and /sys as the host has them (slaves: nothing mounted inside goes
# back out), /proc and /dev/shm of their own.
mount -t proc proc "$root/proc"
mounted+=("$root/proc")
mount --rbind /sys "$root/sys"
mounted+=("$root/sys")
mount --make-rslave "$root/sys"
mount --rbind /dev "$root/dev"
mounted+=("$root/dev")
mount --make-rslave "$root/dev"
mount -t tmpfs -o mode=1777,nosuid,nodev shm "$root/dev/shm"

in_root() { # a command line, run in the clone as root on the fresh system
  chroot "$root" /usr/bin/env -i HOME=/root TERM="${TERM:-dumb}" \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    /bin/bash -c "cd /root/rill && $1"
}
timed "scripts/demo.sh" in_root scripts/demo.sh || true
timed "scripts/test.sh${quick:+ $quick}" in_root "scripts/test.sh $quick" || true
summary
exit "$failed"
}
