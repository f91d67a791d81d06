#!/usr/bin/env bash
# Hydra checklist C1-C6 (loading and printing the config) and F1-F4 (flags), against mingpt's
# own config: exact stdout, stderr and exit codes (../shared/reference/hydra_semantics.md, 7).
cd "$(dirname "$0")/.." && source tests/lib.sh && source tests/hydra_lib.sh
M=$MINGPT
SHIPPED=(-cp "$REPO")

# ---------------------------------------------------------------- C1 --cfg job: the shipped file re-dumped
# Every key of gpt2_train_cfg.yaml in file order, formatted as OmegaConf dumps it (3.0e-4 style
# floats, block lists); keys the file lacks come from the schema defaults, in between.
SHIPPED_LINES=('data_config:' '  path: data/input.txt' '  block_size: 128' '  train_split: 0.9' '  truncate: 0.05'
  '  split: contiguous' 'gpt_config:' '  n_layer: 8' '  n_head: 8' '  n_embd: 512' '  embd_pdrop: 0.1'
  '  resid_pdrop: 0.1' '  attn_pdrop: 0.1' 'trainer_config:' '  max_epochs: 10' '  batch_size: 216'
  '  data_loader_workers: 4' '  grad_norm_clip: 1.0' '  snapshot_path: gpt_snapshot.bin' '  save_every: 3'
  '  use_amp: true' '  device: auto' '  amp_dtype: auto' '  seed: 1337' '  max_iters: 0' '  log_every: 100' '  eval_iters: 0'
  'optimizer_config:' '  weight_decay: 0.1' '  learning_rate: 0.0003' '  betas:' '  - 0.9' '  - 0.95'
  '  eps: 1.0e-08')
check "C1 --cfg job exits 0, prints nothing on stderr" 0 - "" -- $M "${SHIPPED[@]}" --cfg job
$M "${SHIPPED[@]}" --cfg job > c1_shipped.txt 2>/dev/null
C1=$(cat c1_shipped.txt)
in_order "C1 --cfg job prints the shipped file re-dumped" c1_shipped.txt "${SHIPPED_LINES[@]}"
[ "$(grep -c '^[a-z_]*:$' c1_shipped.txt)" -eq 4 ] && ! grep -q -e '^hydra:' -e '\$' c1_shipped.txt \
  && ok "C1 --cfg job: the four sections, no hydra node" || bad "C1 --cfg job: the four sections" "$C1"
[ -z "$(ls -A "$WORK" | grep -v -e '^conf$' -e '^tiny.txt$' -e '^\.stderr$' -e '^c1_shipped.txt$')" ] && ok "C1 --cfg creates nothing" \
  || bad "C1 --cfg creates nothing" "$(ls -A "$WORK")"
check "C1 shipped hydra.run.dir is runs/<config name>" 0 "runs/gpt2_train_cfg" "" -- $M "${SHIPPED[@]}" --cfg hydra -p hydra.run.dir

# A fixture with interpolations, an environment default and a mandatory value.
cat > conf/interp.yaml <<'YAML'
defaults:
  - _self_
data_config:
  path: ${oc.env:DATA_DIR,data}/input.txt
  split: ???
gpt_config:
  n_layer: 12
  n_head: 12
  n_embd: 768
trainer_config:
  snapshot_path: run_${gpt_config.n_layer}L.bin
  max_epochs: 5
  save_every: ${.max_epochs}
optimizer_config:
  learning_rate: 3.0e-4
YAML
$M -cp conf -cn interp --cfg job > c1.txt 2>&1
has "C1 interpolations verbatim, ??? kept, 3.0e-4 re-dumped" c1.txt '  path: ${oc.env:DATA_DIR,data}/input.txt' \
  '  split: ???' '  snapshot_path: run_${gpt_config.n_layer}L.bin' '  save_every: ${.max_epochs}' '  learning_rate: 0.0003'
grep -q defaults c1.txt && bad "C1 defaults list dropped" || ok "C1 defaults list dropped"

# --cfg hydra / all
$M "${SHIPPED[@]}" --cfg hydra > hydra.txt 2>&1
[ "$(head -1 hydra.txt)" == "hydra:" ] && ! grep -q '^  help:' hydra.txt && ! grep -q '^data_config:' hydra.txt \
  && ok "C1 --cfg hydra: only the hydra node, without its help templates" || bad "C1 --cfg hydra" "$(head -5 hydra.txt)"
has "C1 --cfg hydra: runtime values" hydra.txt '    output_dir: null' "    cwd: $WORK" '  mode: RUN' '    num: ???' \
  '    config_name: gpt2_train_cfg' "    - path: $REPO" '      schema: file' '      provider: main'
in_order "C1 --cfg hydra: runtime.config_sources (Hydra's ConfigSourceInfo list)" hydra.txt '    config_sources:' \
  '    - path: hydra.conf' '      schema: pkg' '      provider: hydra' "    - path: $REPO" '      schema: file' \
  '      provider: main' "    - path: ''" '      schema: structured' '      provider: schema'
$M "${SHIPPED[@]}" --cfg all > all.txt 2>&1
[ "$(head -1 all.txt)" == "hydra:" ] && grep -q '^  help:' all.txt && [ "$(sed -n '/^data_config:/,$p' all.txt)" == "$C1" ] \
  && ok "C1 --cfg all: the hydra node first, then the job config" || bad "C1 --cfg all" "$(head -3 all.txt)"

# ---------------------------------------------------------------- C2, C3 --resolve, -p
env -u DATA_DIR $M -cp conf -cn interp --cfg job --resolve > c2.txt 2>&1
has "C2 --resolve" c2.txt '  path: data/input.txt' '  split: ???' '  snapshot_path: run_12L.bin' '  save_every: 5'
check "C3 -p with --resolve and an env var" 0 '# @package data_config
path: /d/input.txt
block_size: 128
train_split: 0.9
truncate: 1.0
split: ???
eval_stride: 0' "" -- env DATA_DIR=/d $M -cp conf -cn interp --cfg job --resolve -p data_config

# ---------------------------------------------------------------- C4 -p leaf / missing
check "C4 -p leaf prints the bare value" 0 "0.0003" "" -- $M "${SHIPPED[@]}" --cfg job -p optimizer_config.learning_rate
check "C4 -p leaf resolves" 0 "run_12L.bin" "" -- $M -cp conf -cn interp --cfg job -p trainer_config.snapshot_path
check "C4 -p missing package" 2 "" "package 'trainer_config.nope' not found in config" \
  -- $M "${SHIPPED[@]}" --cfg job -p trainer_config.nope
check "C4 -p hydra node only under --cfg hydra" 2 "" "package 'hydra.run' not found in config" \
  -- $M "${SHIPPED[@]}" --cfg job -p hydra.run
check "C4 -p _global_ is the whole config" 0 "$C1" "" -- $M "${SHIPPED[@]}" --cfg job -p _global_

# ---------------------------------------------------------------- C5 --resolve alone
check "C5 --resolve without --cfg" 2 "" "The --resolve flag can only be used in conjunction with --cfg or --help" \
  -- $M "${SHIPPED[@]}" --resolve

# ---------------------------------------------------------------- C6 YAML typing and dump quoting
cat > conf/typing.yaml <<'YAML'
data_config:
  path: '1e-3'
  split: contiguous
trainer_config:
  seed: 0x1F
  max_iters: 1_000
  use_amp: Off
  snapshot_path: yes
optimizer_config:
  learning_rate: 1e-3
  weight_decay: .5
  eps: 3.0e-4
  min_lr: 0
  warmup_iters: 12:30
  lr_decay_iters: 010
YAML
$M -cp conf -cn typing --cfg job > c6.txt 2>&1
has "C6 YAML 1.1 typing (typed by the schema)" c6.txt "  path: '1e-3'" '  seed: 31' '  max_iters: 1000' \
  '  use_amp: false' "  snapshot_path: 'yes'" '  learning_rate: 0.001' '  weight_decay: 0.5' '  eps: 0.0003' \
  '  min_lr: 0.0' '  warmup_iters: 750' '  lr_decay_iters: 8'
check "C6 dump quoting" 0 "x: ''
'y': null
q: '5'
s: '010'
c: 'yes'
d: '2023-09-16'
e: '1e-3'" "" -- $M "${SHIPPED[@]}" --cfg job -p _global_ +x= +y=null "+q='5'" +s=010 +c=yes +d=2023-09-16 "+e='1e-3'" \
  ~data_config ~gpt_config ~trainer_config ~optimizer_config
printf 'trainer_config:\n  seed: 1\n  batch_size: 2\n  seed: 3\n' > conf/dup.yaml
check "C6 duplicate key" 2 "" "mingpt: error: conf/dup.yaml:4:3: found duplicate key seed (trainer_config.seed was first defined at line 2)" \
  -- $M -cp conf -cn dup --cfg job
printf 'defaults:\n  - optim: adamw\n' > conf/groups.yaml
check "C6 defaults list with a group" 2 "" "mingpt: error: conf/groups.yaml:2:5: defaults: only _self_ is supported (mingpt has no config groups)" \
  -- $M -cp conf -cn groups --cfg job

# ---------------------------------------------------------------- F1 --help, --hydra-help, --version
{
  printf 'mingpt is powered by Hydra.\n\n== Subcommands ==\nmingpt COMMAND --help for a command'\''s usage\n\n'
  printf '%s\n' 'sample : print text sampled from a snapshot' 'info : what a snapshot holds (text or JSON)' \
    "export : write a snapshot's model as minGPT's state_dict in safetensors" \
    'plot : the loss curves of runs and sweeps in one SVG or PNG' 'runs : the runs of a sweep side by side, best test loss first'
  printf '\n== Configuration groups ==\nCompose your configuration from those groups (group=option)\n\n\n\n'
  printf '== Config ==\nOverride anything in the config (foo.bar=value)\n\n%s\n\n\n' "$C1"
  printf 'Powered by Hydra (https://hydra.cc)\nUse --hydra-help to view Hydra specific help\n\n\n'
} > help.want
$M "${SHIPPED[@]}" --help > help.got 2>&1; rc=$?
[ $rc -eq 0 ] && cmp -s help.want help.got && ok "F1 --help template (exact, rc 0)" \
  || bad "F1 --help template (rc $rc)" "$(diff help.want help.got | head)"
$M "${SHIPPED[@]}" --help gpt_config.n_layer=2 | grep -qx '  n_layer: 2' && ok "F1 --help applies overrides" \
  || bad "F1 --help applies overrides"
$M -cp conf -cn interp --help --resolve | grep -qx '  snapshot_path: run_12L.bin' && ok "F1 --help --resolve" \
  || bad "F1 --help --resolve"
check "F1 --hydra-help" 0 '~^Hydra \(1\.3\.2\)
See https://hydra.cc for more info.

== Flags ==
--help,-h : Application.s help' "" -- $M "${SHIPPED[@]}" --hydra-help
$M "${SHIPPED[@]}" --hydra-help | grep -q "^hydra/job_logging: default, disabled$" && ok "F1 --hydra-help groups" \
  || bad "F1 --hydra-help groups"
$M "${SHIPPED[@]}" --hydra-help > hh.txt
for sub in sample info export plot runs; do grep -q "^$sub : ." hh.txt || bad "F1 --hydra-help lists $sub" "$(cat hh.txt)"; done
grep -q '^mingpt COMMAND ... runs a subcommand' hh.txt && ok "F1 --hydra-help lists the subcommands" \
  || bad "F1 --hydra-help lists the subcommands" "$(cat hh.txt)"
# Hydra's line first, then what mingpt computes with: the CPU and the GEMM libraries
check "F1 --version" 0 "~^GEMM: OpenBLAS [0-9.]+ \([A-Za-z0-9]+ kernels: [a-z0-9_]+\)" "" -- $M --version
[ "$($M --version | head -1)" = "Hydra 1.3.2 (mingpt)" ] && ok "F1 --version: Hydra's line first" \
  || bad "F1 --version: Hydra's line first" "$($M --version)"

# ---------------------------------------------------------------- F2 argparse errors
USAGE='usage: mingpt [--help] [--hydra-help] [--version]
              [--cfg {job,hydra,all}] [--resolve]
              [--package PACKAGE] [--run] [--multirun]
              [--shell-completion] [--config-path CONFIG_PATH]
              [--config-name CONFIG_NAME]
              [--config-dir CONFIG_DIR]
              [--info [{all,config,defaults,defaults-tree,plugins,searchpath}]]
              [overrides ...]
       mingpt sample --snapshot PATH [--prompt TEXT] [--max_new_tokens N]
                     [--temperature F] [--top_k K] [--seed S]'
check "F2 --cfg bogus" 2 "" "$USAGE
mingpt: error: argument --cfg/-c: invalid choice: 'bogus' (choose from 'job', 'hydra', 'all')" -- $M --cfg bogus
check "F2 --bogus" 2 "" "$USAGE
mingpt: error: unrecognized arguments: --bogus" -- $M --bogus
check "F2 --cfg without a value" 2 "" "$USAGE
mingpt: error: argument --cfg/-c: expected one argument" -- $M --cfg
check "F2 -c job -m" 2 "" "Only one of --run, --multirun, --cfg, --info and --shell_completion can be specified" \
  -- $M "${SHIPPED[@]}" -c job -m
check "F2 --run -m" 2 "" "Only one of --run, --multirun, --cfg, --info and --shell_completion can be specified" \
  -- $M "${SHIPPED[@]}" --run -m
check "F2 abbreviated long option" 0 "runs/gpt2_train_cfg" "" -- $M "${SHIPPED[@]}" --cf hydra --pack hydra.run.dir

# ---------------------------------------------------------------- F3 config search path
check "F3 -cn nope" 2 "" "$(hydra_err "Cannot find primary config 'nope'. Check that it's in your config search path.

Config search path:
	provider=hydra, path=pkg://hydra.conf
	provider=main, path=file://$WORK/conf
	provider=schema, path=structured://")" -- $M -cp conf -cn nope
check "F3 -cp missing_dir" 2 "" "$(hydra_err "Primary config directory not found.
Check that the config directory '$WORK/missing_dir' exists and readable")" -- $M -cp missing_dir
mkdir -p extra && printf 'gpt_config:\n  n_layer: 3\n' > extra/other.yaml
check "F3 -cd extra -cn other" 0 "3" "" -- $M -cd extra -cn other --cfg job -p gpt_config.n_layer
check "F3 -cd missing" 2 "" "$(hydra_err "Additional config directory '$WORK/nodir' not found")" -- $M "${SHIPPED[@]}" -cd nodir
# without -cp: the current directory, the binary's directory and the installed share directory
# (config/search_path.h), then -cd
EXE_DIR=$(dirname "$(readlink -f "$M")")
check "F3 -cn in search path listing with -cd" 2 "" "$(hydra_err "Cannot find primary config 'nope'. Check that it's in your config search path.

Config search path:
	provider=hydra, path=pkg://hydra.conf
	provider=main, path=file://$WORK
	provider=mingpt, path=file://$EXE_DIR
	provider=mingpt, path=file://$(dirname "$EXE_DIR")/share/mingpt
	provider=command-line, path=file://$WORK/extra
	provider=schema, path=structured://")" -- $M -cd extra -cn nope
check "F3 HYDRA_FULL_ERROR=1: no hint line" 2 "" "Additional config directory '$WORK/nodir' not found" \
  -- env HYDRA_FULL_ERROR=1 $M "${SHIPPED[@]}" -cd nodir
check "F3 --config-name with .yaml" 0 "8" "" -- $M "${SHIPPED[@]}" --config-name gpt2_train_cfg.yaml --cfg job -p gpt_config.n_layer

# ---------------------------------------------------------------- F4 shell completion
$M "${SHIPPED[@]}" -sc install=bash > sc.txt 2>&1
grep -q "^complete -o nospace -o default -F _mingpt_completion mingpt ./mingpt$" sc.txt \
  && ok "F4 -sc install=bash prints a completion script" || bad "F4 -sc install=bash prints a completion script" "$(cat sc.txt)"
( eval "$(cat sc.txt)" && complete -p mingpt >/dev/null ) && ok "F4 the script installs" || bad "F4 the script installs"
# what it completes: tests/test_completion.sh
check "F4 -sc uninstall=bash" 0 "complete -r mingpt ./mingpt" "" -- $M "${SHIPPED[@]}" -sc uninstall=bash
finish
