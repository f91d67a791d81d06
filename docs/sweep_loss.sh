#!/usr/bin/env bash
# docs/sweep_loss.sh — makes docs/sweep_loss.svg, the README's `mingpt plot` example, and prints
# the `mingpt runs` table shown next to it: a real `-m` sweep of 4 small models on
# tiny-shakespeare (n_layer 1, 2 x learning rate 1e-3, 3e-3; 1000 iterations each, about 20 s in
# all on one core). Run from the repository root after `make mingpt data`.
set -euo pipefail
cd "$(dirname "$0")/.."
SW=$(mktemp -d /tmp/mingpt_sweep.XXXXXX)
trap 'rm -rf "$SW"' EXIT
OMP_NUM_THREADS=1 ./mingpt -m --config-name char_cpu gpt_config.n_embd=64 data_config.block_size=32 \
  trainer_config.max_iters=1000 trainer_config.eval_every=100 trainer_config.eval_iters=20 trainer_config.log_every=20 \
  gpt_config.n_layer=1,2 optimizer_config.learning_rate=1e-3,3e-3 hydra.sweep.dir="$SW/sweep" > "$SW/sweep.log"
(cd "$SW" && "$OLDPWD/mingpt" runs sweep)
./mingpt plot "$SW/sweep" --out docs/sweep_loss.svg
