# tests/hydra_lib.sh — helpers for tests/test_hydra_*.sh (sourced after tests/lib.sh).
#
# The commands run in $WORK (a fresh temp dir), so nothing they create lands in the repository;
# $REPO is the checkout, whose gpt2_train_cfg.yaml is reached with -cp "$REPO".
REPO=$PWD
export OMP_NUM_THREADS=1   # tiny models: one thread is fastest and steady on a busy machine
unset HYDRA_FULL_ERROR DATA_DIR
cd "$WORK" || exit 1

TRAILER='Set the environment variable HYDRA_FULL_ERROR=1 for a complete stack trace.'
GRAMMAR='See https://hydra.cc/docs/1.2/advanced/override_grammar/basic for details'

# hydra_err MSG: how mingpt prints a Hydra error: MSG, a blank line, the HYDRA_FULL_ERROR hint.
hydra_err() { printf '%s\n\n%s' "$1" "$TRAILER"; }

# check NAME RC STDOUT STDERR -- CMD...: CMD exits with RC and prints exactly STDOUT and
# STDERR (trailing newlines aside); '-' skips a stream, '~REGEX' matches it with grep -E.
check() {
  local name=$1 rc=$2 want_out=$3 want_err=$4; shift 5
  local out err got
  out=$("$@" 2>"$WORK/.stderr"); got=$?; err=$(cat "$WORK/.stderr")
  if [ "$got" -ne "$rc" ]; then bad "$name (exit $got, want $rc)" "$err"; return; fi
  if ! same "$out" "$want_out"; then bad "$name (stdout)" "$(show_diff "$want_out" "$out")"; return; fi
  if ! same "$err" "$want_err"; then bad "$name (stderr)" "$(show_diff "$want_err" "$err")"; return; fi
  if grep -Eq 'Segmentation|Aborted|AddressSanitizer|core dumped' <<<"$err"; then bad "$name (crashed)" "$err"; return; fi
  ok "$name"
}
same() {
  case $2 in
    -) return 0 ;;
    '~'*) grep -Eq -- "${2#\~}" <<<"$1" ;;
    *) [ "$1" == "$2" ] ;;
  esac
}
show_diff() { diff <(printf '%s\n' "$1") <(printf '%s\n' "$2") | head -20; }

# has NAME FILE LINE...: FILE holds each LINE as a whole line.
has() {
  local name=$1 file=$2; shift 2
  [ -f "$file" ] || { bad "$name ($file missing)"; return; }
  for line in "$@"; do
    grep -Fxq -- "$line" "$file" || { bad "$name (no line '$line' in $file)" "$(head -40 "$file")"; return; }
  done
  ok "$name"
}

# in_order NAME FILE LINE...: FILE holds the LINEs as whole lines, in this order (other lines
# may come between them, e.g. schema defaults another part of mingpt adds).
in_order() {
  local name=$1 file=$2; shift 2
  local want=$# found=0 line
  while IFS= read -r line && [ $found -lt $want ]; do
    local i=$((found + 1))
    [ "$line" == "${!i}" ] && found=$i
  done < "$file"
  [ $found -eq $want ] && ok "$name" || { local i=$((found + 1)); bad "$name (line '${!i}' missing or out of order)" "$(head -50 "$file")"; }
}

# A small corpus and a config for a model that trains in milliseconds.
DATA=$WORK/tiny.txt
printf 'hello world, this is a small corpus for the mingpt hydra tests.\n%.0s' {1..30} > "$DATA"
mkdir -p "$WORK/conf"
cat > "$WORK/conf/tiny.yaml" <<YAML
data_config: {path: $DATA, block_size: 16, truncate: 1.0}
gpt_config: {n_layer: 1, n_head: 2, n_embd: 16}
trainer_config: {batch_size: 4, max_iters: 3, eval_iters: 1, log_every: 1, use_amp: false, device: cpu}
YAML
TINY=(-cp "$WORK/conf" -cn tiny)
