#!/usr/bin/env bash
# tests/fresh_machine.sh — the README's two commands on a fresh Debian machine, in a chroot.
#
#   tests/fresh_machine.sh [--keep] [COMMAND...]        (as root; `make fresh-check` runs it)
#
# Builds a minimal Debian bookworm root with mmdebstrap (minbase + make, git, ca-certificates:
# what a new user needs to clone the project and type `make`; everything else must come from
# the README's commands), copies a clean clone of HEAD and ../shared/data into it, and runs
# each COMMAND there (default: `make run`, then `make test`) as root, the way a new user on a
# new machine would: /proc, /sys, /dev and /tmp mounted, a clean environment (PATH, HOME, LANG,
# TERM=dumb, CI, and the machine's OPENBLAS_* settings). It prints each command's time and, when
# one fails, the last lines of its output; the whole log stays in $FRESH_CACHE/last-<n>.log.
#
# The CUDA toolkit is part of this project's machines but no Debian package: when the host has
# nvcc, its toolkit directory is bind-mounted read-only at the same path and put on PATH, so
# `make test` compiles the .cu sources there too (FRESH_CUDA=0: without it).
#
# Caches (FRESH_CACHE, default /var/cache/mingpt-fresh): the bootstrapped base root as a tarball,
# rebuilt when this script's base package list, suite or apt sources change; Debian's .deb files
# and pip's downloads, shared between runs (they save downloads, not installs: each run starts
# from the bare base and installs everything itself).
#
# Nothing is left mounted or running: on exit, failure or a signal, the processes inside the root
# are killed, every mount under it is undone, and only then is it deleted (--keep: kept, unmounted).
# Exit status: 0 when every command passed, 1 when one failed, 2 when the root could not be made.
set -uo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD

keep=0
[ "${1:-}" = --keep ] && { keep=1; shift; }
[ $# -gt 0 ] || set -- "make run" "make test"

SUITE=bookworm
BASE_PKGS="make,git,ca-certificates"
CACHE=${FRESH_CACHE:-/var/cache/mingpt-fresh}
FRESH_CUDA=${FRESH_CUDA:-1}

say() { echo "fresh-check: $*"; }
die() { say "$*" >&2; exit 2; }

[ "$(id -u)" = 0 ] || die "needs root (chroot, mount): run it as root"
if ! command -v mmdebstrap >/dev/null; then
  say "installing mmdebstrap (Debian's package)"
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mmdebstrap >/dev/null; } \
    || die "cannot install mmdebstrap"
fi

# ---------------------------------------------------------------- the base root (cached)
# The apt sources of the host (its mirror and suites), when it is Debian: the root gets the same.
sources=""
for f in /etc/apt/sources.list.d/debian.sources /etc/apt/sources.list; do
  [ -s "$f" ] && grep -q "^[^#]*$SUITE" "$f" && { sources=$f; break; }
done
mkdir -p "$CACHE/apt-archives/partial" "$CACHE/pip" || die "cannot create $CACHE"
key=$(printf '%s\n' "$SUITE" "$BASE_PKGS" "$(cat ${sources:+"$sources"} 2>/dev/null)" | sha256sum | cut -c1-16)
base=$CACHE/base-$SUITE-$key.tar
if [ ! -s "$base" ]; then
  say "bootstrapping a minimal $SUITE root (minbase + ${BASE_PKGS//,/, }) into $base"
  t0=$SECONDS
  if ! mmdebstrap --quiet --format=tar --variant=minbase --include="$BASE_PKGS" "$SUITE" "$base.part" ${sources:+"$sources"} \
       > "$CACHE/bootstrap.log" 2>&1; then
    tail -20 "$CACHE/bootstrap.log" >&2; rm -rf "$base.part"; die "mmdebstrap failed (log: $CACHE/bootstrap.log)"
  fi
  mv "$base.part" "$base"
  rm -f $(ls "$CACHE"/base-*.tar 2>/dev/null | grep -vxF "$base")   # older keys
  say "base root made in $((SECONDS - t0)) s ($(du -h "$base" | cut -f1))"
fi

# ---------------------------------------------------------------- this run's root
ROOT=$(mktemp -d "$CACHE/root.XXXXXX") || die "cannot create a root under $CACHE"
LOG=$CACHE/last-$$.log
mounted=()   # mount points, in the order mounted

mnt() {   # mnt TARGET MOUNT-ARGS...: mount and remember it
  local target=$1; shift
  mkdir -p "$target" && mount "$@" "$target" && mounted+=("$target")
}

cleanup() {
  local rc=$? pid root_link i
  trap - EXIT INT TERM HUP
  # processes whose root is inside ours (a test's leftover daemon, an orted)
  for pid in $(ls /proc | grep -E '^[0-9]+$'); do
    root_link=$(readlink "/proc/$pid/root" 2>/dev/null) || continue
    case "$root_link" in "$ROOT"|"$ROOT"/*) kill -KILL "$pid" 2>/dev/null;; esac
  done
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do
    umount -R "${mounted[i]}" 2>/dev/null || umount -R -l "${mounted[i]}" 2>/dev/null
  done
  if grep -qF " $ROOT/" /proc/self/mounts || grep -qF " $ROOT " /proc/self/mounts; then
    say "ERROR: mounts remain under $ROOT; it is not deleted:" >&2
    grep -F " $ROOT" /proc/self/mounts >&2
    exit 2
  fi
  if [ $keep = 1 ]; then say "kept the root: $ROOT (nothing mounted)"
  else rm -rf --one-file-system "$ROOT"; fi
  exit $rc
}
trap cleanup EXIT
trap 'say "interrupted"; exit 130' INT TERM HUP

tar -C "$ROOT" -xf "$base" || die "cannot unpack $base"
cp /etc/resolv.conf "$ROOT/etc/resolv.conf" 2>/dev/null
# The machine's own network setup comes along, as its apt sources do: the local certificate
# authorities it trusts (a TLS-intercepting proxy's, say) join the root's bundle, or pip's
# downloads would fail there where they work on the machine itself.
if ls /usr/local/share/ca-certificates/*.crt >/dev/null 2>&1; then
  mkdir -p "$ROOT/usr/local/share/ca-certificates"
  cp /usr/local/share/ca-certificates/*.crt "$ROOT/usr/local/share/ca-certificates/"
  chroot "$ROOT" update-ca-certificates >/dev/null 2>&1 || die "update-ca-certificates failed in the root"
fi
[ -f /etc/pip.conf ] && cp /etc/pip.conf "$ROOT/etc/pip.conf"   # e.g. which CA bundle pip uses
mkdir -p "$ROOT/home/user" "$ROOT/root/.cache/pip"
git clone -q "$REPO" "$ROOT/home/user/mingpt" || die "cannot clone $REPO"
if [ -d ../shared/data ]; then
  mkdir -p "$ROOT/home/user/shared" && cp -a ../shared/data "$ROOT/home/user/shared/data"
fi

mnt "$ROOT/proc" -t proc proc || die "cannot mount /proc in the root"
mnt "$ROOT/sys" -t sysfs sysfs || die "cannot mount /sys in the root"
mnt "$ROOT/dev" --rbind /dev && mount --make-rslave "$ROOT/dev" || die "cannot bind /dev into the root"
mkdir -p "$ROOT/.tmp-disk" && chmod 1777 "$ROOT/.tmp-disk"
mnt "$ROOT/tmp" --bind "$ROOT/.tmp-disk" && chmod 1777 "$ROOT/tmp" || die "cannot mount /tmp in the root"
mnt "$ROOT/var/cache/apt/archives" --bind "$CACHE/apt-archives" || die "cannot bind the apt cache"
mnt "$ROOT/root/.cache/pip" --bind "$CACHE/pip" || die "cannot bind the pip cache"
# the machine's apt configuration keeps .debs after installing (Debian's docker-style images
# delete them); without this the cache stays empty
echo 'Binary::apt::APT::Keep-Downloaded-Packages "true"; APT::Keep-Downloaded-Packages "true";' \
  > "$ROOT/etc/apt/apt.conf.d/01keep-debs"
rm -f "$ROOT/etc/apt/apt.conf.d/docker-clean"

path=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
cuda_note="without the CUDA toolkit"
if [ "$FRESH_CUDA" = 1 ] && nvcc=$(command -v nvcc 2>/dev/null); then
  cuda=$(dirname "$(dirname "$(readlink -f "$nvcc")")")
  mnt "$ROOT$cuda" --bind "$cuda" -o ro && mount -o remount,bind,ro "$ROOT$cuda" \
    || die "cannot bind the CUDA toolkit $cuda"
  path=$cuda/bin:$path
  cuda_note="with the host's CUDA toolkit ($cuda, read-only)"
fi

envs=(HOME=/root "PATH=$path" LANG=C.UTF-8 TERM=dumb "CI=${CI:-}")
for v in $(env | grep -oE '^OPENBLAS_[A-Z0-9_]+'); do envs+=("$v=${!v}"); done

say "Debian $SUITE root $ROOT, $cuda_note; log: $LOG"
: > "$LOG"
rc=0
for cmd in "$@"; do
  t0=$SECONDS
  say "\$ $cmd"
  echo "===== $cmd" >> "$LOG"
  env -i "${envs[@]}" chroot "$ROOT" /bin/bash -c "cd /home/user/mingpt && $cmd" < /dev/null >> "$LOG" 2>&1
  c=$?
  dt=$((SECONDS - t0))
  # the closing lines of its test runners, as the command printed them
  awk -v c="===== $cmd" '$0 == c { p = 1 } p' "$LOG" | grep -E '^(unit|e2e|skips|fuzz|valgrind|cuda)[a-z ]*: ' | sed 's/^/  /'
  if [ $c -eq 0 ]; then
    say "$cmd: passed in $((dt / 60))m$(printf %02d $((dt % 60)))s"
  else
    say "$cmd: FAILED (exit $c) after $((dt / 60))m$(printf %02d $((dt % 60)))s; its last lines:"
    tail -40 "$LOG" | sed 's/^/  | /'
    rc=1
    break
  fi
done
[ $rc -eq 0 ] && say "all passed" && rm -f "$LOG"
exit $rc
