#!/usr/bin/env bash
# tests/skip_check.sh SKIP_LOG — `make test`'s last step: a skipped check is not a passed one.
# SKIP_LOG holds one line per skip of this run ("KEY<TAB>TEST<TAB>REASON": tests/lib.sh's skip,
# the unit runner's cmocka skips, the CUDA targets). Each KEY must be listed in
# tests/allowed_skips.txt and its condition must hold here; otherwise this fails, naming it.
# CUDA and SAN come from make. Prints "skips: N passed, N failed" (allowed, not allowed).
set -u
log=${1:?usage: skip_check.sh SKIP_LOG}
list=$(dirname "$0")/allowed_skips.txt
export CUDA=${CUDA:-0} SAN=${SAN:-0}
allowed=0; refused=0
[ -f "$log" ] || : > "$log"
while IFS=$'\t' read -r key test reason; do
  [ -n "$key" ] || continue
  row=$(grep -v '^#' "$list" | awk -F' [|] ' -v k="$key" '$1 == k { print; exit }')
  if [ -z "$row" ]; then
    refused=$((refused+1)); echo "  FAIL skip [$key] in $test: not on tests/allowed_skips.txt ($reason)"; continue
  fi
  cond=$(awk -F' [|] ' '{ print $2 }' <<<"$row")
  if sh -c "$cond" 2>/dev/null; then
    allowed=$((allowed+1)); echo "  ok   skip [$key] in $test: $(awk -F' [|] ' '{ print $3 }' <<<"$row")"
  else
    refused=$((refused+1)); echo "  FAIL skip [$key] in $test: its condition '$cond' does not hold here ($reason)"
  fi
done < "$log"
echo "skips: $allowed passed, $refused failed"
[ $refused -eq 0 ]
