#!/usr/bin/env bash
# tests/test_include_floors.sh — the rooms of the source tree stand on floors (docs/architecture.md):
# a file may include headers of its own room and of rooms on lower floors, never of a room
# above. Reads every #include "..." of the product's sources (not tests/ or bench/) and fails
# on one that climbs, naming the file, its line and both rooms. A source outside every room
# fails too, so that a new folder gets a floor.
cd "$(dirname "$0")/.." && source tests/lib.sh

# room floor (lowest first); main.c stands above all
FLOORS="config:0 process:0 dist:1 data:2 kernels:2 model:3 checkpoint:4 trainer:5 report:6 app:7 main.c:8"
floor_of() {   # floor_of PATH: the floor of the room PATH is in, or nothing
  local room=${1%%/*} f
  for f in $FLOORS; do [ "${f%%:*}" = "$room" ] && { echo "${f##*:}"; return; }; done
}

climbs=0 files=0 outside=""
while IFS= read -r src; do
  files=$((files + 1))
  from=$(floor_of "$src")
  if [ -z "$from" ]; then outside="$outside $src"; continue; fi
  while IFS=: read -r line inc; do
    to=$(floor_of "$inc")
    [ -z "$to" ] && continue                      # a header of the toolkit or a library
    if [ "$to" -gt "$from" ]; then
      climbs=$((climbs + 1))
      echo "  climbs: $src:$line includes \"$inc\" (${src%%/*}, floor $from -> ${inc%%/*}, floor $to)"
    fi
  done < <(grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$src" | sed 's/^\([0-9]*\):[^"]*"\([^"]*\)".*/\1:\2/')
done < <(git ls-files '*.c' '*.h' '*.cu' '*.cuh' | grep -v '^tests/\|^bench/')

[ "$files" -gt 50 ] && ok "$files source files read" || bad "the product's sources were found (only $files)"
[ -z "$outside" ] && ok "every source file is in a room with a floor" || bad "sources outside every room:$outside"
[ "$climbs" -eq 0 ] && ok "no #include climbs from a lower room to a higher one" || bad "$climbs #include lines climb"
finish
