#!/usr/bin/env bash
# Crafted configs and overrides: each is refused fast with a message that names the
# limit it passed, exit 2 like every config error; never a crash, a hang or gigabytes of memory.
# Rows of the bad-input table (docs/robustness.md).
cd "$(dirname "$0")/.." && source tests/lib.sh
REPO=$PWD
export OMP_NUM_THREADS=1
cd "$WORK" || exit 1
CFG=$WORK/cfg
mkdir -p "$CFG"
# Without its budget each case takes minutes (or GBs): the timeout makes a regression fail here
# instead of hanging.
M=(timeout 20 "$MINGPT")
# A training command that would start from these (tiny, never reached: the config is refused).
train=("${M[@]}" -cp "$REPO" hydra.run.dir="$WORK/run" trainer_config.max_iters=1 data_config.truncate=0.01)

# ${oc.env:X,${oc.env:X, ... a}} nested 9000 deep: overflowed the stack in cfg_interp.c.
unset X  # a short name: the override must stay under the kernel's 128 KiB per argument
nest=$(printf '${oc.env:X,%.0s' {1..9000}; printf a; printf '}%.0s' {1..9000})
bad_input cfg-interp-nested-override 2 'Interpolation nested too deeply: more than 32 levels of ${...} in one value' -- "${train[@]}" "trainer_config.snapshot_path=$nest"
printf 'trainer_config:\n  snapshot_path: %s\n' "$nest" > "$CFG/nested.yaml"
bad_input cfg-interp-nested-yaml 2 'full_key: trainer_config.snapshot_path' -- "${train[@]}" -cp "$CFG" -cn nested

# A misspelt key in a file gets the same suggestion as in an override.
printf 'optimizer_config:\n  lerning_rate: 0.1\n' > "$CFG/typo.yaml"
bad_input cfg-file-key-suggest 2 'typo.yaml:2:3: unknown key '\''optimizer_config.lerning_rate'\'' (did you mean '\''optimizer_config.learning_rate'\''?)' -- "${M[@]}" -cp "$CFG" -cn typo --cfg job

# Billion laughs: x0 ten scalars, each next line ten aliases of the one before.
{ printf 'hydra:\n  x0: &x0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n'
  for i in 1 2 3 4 5 6 7 8 9; do
    printf '  x%d: &x%d [' $i $i; for j in 1 2 3 4 5 6 7 8 9; do printf '*x%d, ' $((i-1)); done; printf '*x%d]\n' $((i-1))
  done; } > "$CFG/bomb.yaml"
bad_input cfg-alias-bomb 2 'bomb.yaml:6:12: aliases expand to more than 16384 nodes in all (an alias bomb?)' -- "${M[@]}" -cp "$CFG" -cn bomb --cfg job

# s1: ${s0}${s0}, s2: ${s1}${s1} ... 30 levels: 2^30 pastes (minutes).
{ printf 'hydra:\n  s0: ab\n'; for i in $(seq 1 30); do printf '  s%d: ${hydra.s%d}${hydra.s%d}\n' $i $((i-1)) $((i-1)); done
  printf 'trainer_config:\n  snapshot_path: ${hydra.s30}\n'; } > "$CFG/doubling.yaml"
bad_input cfg-interp-doubling 2 'Interpolation too costly: resolving trainer_config.snapshot_path takes more than 1048576 steps' -- "${train[@]}" -cp "$CFG" -cn doubling

# k0: ${k1}, k1: ${k2} ... 100k keys (> 60 s), and an acyclic chain of 65 (was "Recursive").
chain() { printf 'hydra:\n'; seq 0 $(($1-1)) | awk '{printf "  k%d: ${hydra.k%d}\n", $1, $1+1}'
          printf '  k%d: end\ntrainer_config:\n  snapshot_path: ${hydra.k0}\n' "$1"; }
chain 100000 > "$CFG/chain100k.yaml"
bad_input cfg-interp-chain-100k 2 'Interpolation chain too deep: more than 64 interpolations' -- "${train[@]}" -cp "$CFG" -cn chain100k
chain 65 > "$CFG/chain65.yaml"
bad_input cfg-interp-chain-65 2 'Interpolation chain too deep: more than 64 interpolations, each reading the next, the limit (the chain starts at trainer_config.snapshot_path)' -- "${train[@]}" -cp "$CFG" -cn chain65
out=$("$MINGPT" -cp "$CFG" -cn chain65 --cfg job --resolve 2>&1)
if grep -q 'Recursive interpolation' <<<"$out"; then bad "cfg-interp-chain-65 is not a cycle" "$out"; else ok "cfg-interp-chain-65 is not a cycle"; fi
chain 60 > "$CFG/chain60.yaml"
out=$("$MINGPT" -cp "$CFG" -cn chain60 --cfg job --resolve 2>&1)
if grep -q 'snapshot_path: end' <<<"$out"; then ok "a chain of 60 resolves"; else bad "a chain of 60 resolves" "$out"; fi

# A config file over 4 MiB (read no further than the limit).
{ printf 'trainer_config:\n  seed: 1\n'; head -c $((5 << 20)) /dev/zero | tr '\0' '#'; } > "$CFG/big.yaml"
bad_input cfg-file-too-large 2 'is larger than 4 MiB, the limit for a config file' -- "${M[@]}" -cp "$CFG" -cn big --cfg job

# YAML nested 100k deep (flow and block).
{ printf 'hydra:\n  x: '; head -c 100000 /dev/zero | tr '\0' '['; head -c 100000 /dev/zero | tr '\0' ']'; echo; } > "$CFG/deep.yaml"
bad_input cfg-yaml-too-deep 2 'deep.yaml:2:68: YAML nested deeper than 64 levels, the limit for a config' -- "${M[@]}" -cp "$CFG" -cn deep --cfg job
awk 'BEGIN { print "hydra:"; for (i = 1; i <= 100; i++) printf "%*sk:\n", 2 * i, "" }' > "$CFG/deep_block.yaml"
bad_input cfg-yaml-too-deep-block 2 'YAML nested deeper than 64 levels' -- "${M[@]}" -cp "$CFG" -cn deep_block --cfg job

# A scalar over 256 KiB; an override key of 100 parts.
{ printf 'trainer_config:\n  snapshot_path: '; head -c 300000 /dev/zero | tr '\0' 'x'; echo; } > "$CFG/long.yaml"
bad_input cfg-scalar-too-long 2 'trainer_config.snapshot_path: a scalar of 300000 bytes is longer than 262144 bytes' -- "${M[@]}" -cp "$CFG" -cn long --cfg job
bad_input cfg-override-key-too-deep 2 'the key has more than 64 parts, the limit' -- "${M[@]}" -cp "$REPO" --cfg job "++hydra$(printf '.a%.0s' {1..100})=1"
# 64 parts (within the parse limit) and a scalar: 65 levels, which --cfg would print as YAML no config reads
bad_input cfg-override-nests-too-deep 2 'the config would be nested 65 levels deep (64 key parts and a value of 1 levels), deeper than 64 levels, the limit for a config' -- "${M[@]}" -cp "$REPO" --cfg job "++hydra$(printf '.a%.0s' {1..63})=1"

# 30 MB of `--help`: a template that pastes the config 30000 times.
{ printf 'hydra:\n  help:\n    template: '"'"; for i in $(seq 1 300); do printf '$CONFIG%.0s' {1..100}; done; printf "'"'\n'; } > "$CFG/help.yaml"
bad_input cfg-help-too-long 2 'the help text is longer than 16 MiB, the limit' -- "${M[@]}" -cp "$CFG" -cn help --help

# Nothing above may take long: the whole file runs in a few seconds (100k chain included).
finish
