#!/usr/bin/env bash
# The config search path (config/search_path.h): from any directory the binary finds
# the config next to itself or in <binary dir>/../share/mingpt; the current directory and
# --config-path come first; a missing config names every place looked in; --info searchpath
# prints Hydra's table; a -m sweep runs from another directory.
cd "$(dirname "$0")/.." && source tests/lib.sh && source tests/hydra_lib.sh
M=$(readlink -f "$MINGPT")
EXE_DIR=$(dirname "$M")
mkdir -p elsewhere && cd elsewhere || exit 1

# ---------------------------------------------------------------- the shipped config, from another directory
check "shipped config found next to the binary" 0 "8" "" -- "$M" --cfg job -p gpt_config.n_layer
check "hydra.job.config_name" 0 "gpt2_train_cfg" "" -- "$M" --cfg hydra -p hydra.job.config_name
printf 'gpt_config:\n  n_layer: 3\n' > gpt2_train_cfg.yaml
check "the current directory comes before the binary's" 0 "3" "" -- "$M" --cfg job -p gpt_config.n_layer
mkdir -p conf && printf 'gpt_config:\n  n_layer: 5\n' > conf/gpt2_train_cfg.yaml
check "--config-path wins" 0 "5" "" -- "$M" -cp conf --cfg job -p gpt_config.n_layer
rm gpt2_train_cfg.yaml

# ---------------------------------------------------------------- a relocated binary: <dir>/bin + <dir>/share/mingpt
PFX=$WORK/pfx
mkdir -p "$PFX/bin" "$PFX/share/mingpt"
cp "$M" "$PFX/bin/mingpt"
printf 'gpt_config:\n  n_layer: 2\n' > "$PFX/share/mingpt/gpt2_train_cfg.yaml"
check "config from <binary dir>/../share/mingpt" 0 "2" "" -- "$PFX/bin/mingpt" --cfg job -p gpt_config.n_layer
printf 'gpt_config:\n  n_layer: 4\n' > "$PFX/bin/gpt2_train_cfg.yaml"
check "the binary's directory before the share directory" 0 "4" "" -- "$PFX/bin/mingpt" --cfg job -p gpt_config.n_layer
rm "$PFX/bin/gpt2_train_cfg.yaml"

# ---------------------------------------------------------------- every place named when missing
check "missing config lists every searched directory" 2 "" "$(hydra_err "Cannot find primary config 'nope'. Check that it's in your config search path.

Config search path:
	provider=hydra, path=pkg://hydra.conf
	provider=main, path=file://$WORK/elsewhere
	provider=mingpt, path=file://$PFX/bin
	provider=mingpt, path=file://$PFX/share/mingpt
	provider=schema, path=structured://")" -- "$PFX/bin/mingpt" -cn nope
check "missing config with --config-path: only that directory" 2 "" "$(hydra_err "Cannot find primary config 'nope'. Check that it's in your config search path.

Config search path:
	provider=hydra, path=pkg://hydra.conf
	provider=main, path=file://$WORK/elsewhere/conf
	provider=schema, path=structured://")" -- "$PFX/bin/mingpt" -cp conf -cn nope
# run from the binary's own directory: listed once
( cd "$PFX/bin" && ./mingpt -cn nope 2>&1 ) | grep -c "path=file://$PFX/bin$" | grep -qx 1 \
  && ok "the binary's directory is not listed twice" || bad "the binary's directory is not listed twice"

# ---------------------------------------------------------------- --info searchpath
# the table, padded by hand: the widest path is the share directory's
W=$(( ${#PFX} + 20 )); RULE=$(printf -- '-%.0s' $(seq 1 $((W + 19))))
row() { printf '| %-12s | %-*s |\n' "$1" "$W" "$2"; }
check "--info searchpath (Hydra's table)" 0 "
Config search path
******************
$(row Provider 'Search path')
$RULE
$(row hydra pkg://hydra.conf)
$(row main "file://$WORK/elsewhere")
$(row mingpt "file://$PFX/bin")
$(row mingpt "file://$PFX/share/mingpt")
$(row command-line "file://$WORK/elsewhere/conf")
$(row schema structured://)
$RULE" "" -- "$PFX/bin/mingpt" --info searchpath -cd conf
check "--info searchpath needs no config" 0 "~provider|Provider" "" -- "$PFX/bin/mingpt" --info searchpath -cn nope
check "--info without a value (all) is not supported" 2 "" \
  "mingpt: error: --info all is not supported (mingpt has no config groups or plugins); --info searchpath is" \
  -- "$M" --info
bad_input cli-info-page 2 '--info defaults is not supported (mingpt has no config groups or plugins); --info searchpath is' -- "$M" --info defaults
check "--info bogus" 2 "" "~mingpt: error: argument --info/-i: invalid choice: 'bogus' \(choose from 'all', 'config', 'defaults', 'defaults-tree', 'plugins', 'searchpath'\)$" \
  -- "$M" --info bogus
check "--info with --cfg" 2 "" "Only one of --run, --multirun, --cfg, --info and --shell_completion can be specified" \
  -- "$M" -i searchpath --cfg job

# ---------------------------------------------------------------- a sweep from another directory
cp "$WORK/conf/tiny.yaml" "$PFX/share/mingpt/gpt2_train_cfg.yaml"
mkdir -p "$WORK/exp" && cd "$WORK/exp" || exit 1
"$PFX/bin/mingpt" -m hydra.sweep.dir=sw gpt_config.n_layer=1,2 > sweep.out 2> sweep.err; rc=$?
[ $rc -eq 0 ] && grep -q '"exit_status": 0' sw/0/summary.json && grep -q '"exit_status": 0' sw/1/summary.json \
  && grep -qx '  n_layer: 2' sw/1/.hydra/config.yaml && ok "-m sweep from another directory with the installed config" \
  || bad "-m sweep from another directory (rc $rc)" "$(tail -5 sweep.err)"
finish
