#!/usr/bin/env bash
# Shell completion (config/completion.h): `-sc query=...` completes config keys from the
# composed config (the line's -cp/-cn/overrides applied), values of enumerated keys, flags, flag
# values, the subcommands and their flags (app/subcommand.h's tables); the `-sc install=bash` script, driven the way bash drives it,
# turns them into COMPREPLY.
cd "$(dirname "$0")/.." && source tests/lib.sh && source tests/hydra_lib.sh
M=$(readlink -f "$MINGPT")
q() { "$M" -cp "$REPO" --shell-completion "query=$1" | tr '\n' ' ' | sed 's/ $//'; }
same_set() { [ "$(tr ' ' '\n' <<<"$1" | sort)" == "$(tr ' ' '\n' <<<"$2" | sort)" ]; }
want() {  # want NAME GOT WANT
  same_set "$2" "$3" && ok "$1" || bad "$1" "got:  $2
want: $3"
}

# ---------------------------------------------------------------- config keys
# every key of the trainer_config section as --cfg job prints it (the composed config)
KEYS=$("$M" -cp "$REPO" --cfg job -p trainer_config | sed -n 's/^\([a-z_0-9]*\):.*/trainer_config.\1=/p' | tr '\n' ' ' | sed 's/ $//')
[ "$(wc -w <<<"$KEYS")" -ge 20 ] || bad "the trainer keys from --cfg job" "$KEYS"
want "query=trainer_config. lists the trainer keys" "$(q trainer_config.)" "$KEYS"
want "a partial key" "$(q trainer_config.dev)" "trainer_config.device="
want "the sections and hydra. at the top, with the subcommands" "$(q '')" \
  "sample info export plot runs data_config. gpt_config. trainer_config. optimizer_config. hydra."
want "hydra.* keys" "$(q hydra.run.)" "hydra.run.dir="
want "+ and ~ prefixes kept" "$(q '~gpt_config.n_')" "~gpt_config.n_layer= ~gpt_config.n_head= ~gpt_config.n_embd="
# ---------------------------------------------------------------- values
want "enumerated values (schema choices)" "$(q trainer_config.device=)" \
  "trainer_config.device=auto trainer_config.device=cpu trainer_config.device=cuda"
want "enumerated values, partial" "$(q trainer_config.amp_dtype=b)" "trainer_config.amp_dtype=bfloat16"
want "booleans" "$(q trainer_config.use_amp=)" "trainer_config.use_amp=true trainer_config.use_amp=false"
want "Hydra's switches" "$(q hydra.mode=)" "hydra.mode=RUN hydra.mode=MULTIRUN"
want "other keys: the current value" "$(q gpt_config.n_layer=)" "gpt_config.n_layer=8"
want "the line's overrides apply" "$(q 'gpt_config.n_layer=3 gpt_config.n_la')" "gpt_config.n_layer="
want "... and are composed" "$(q 'gpt_config.n_layer=3 gpt_config.n_layer=')" "gpt_config.n_layer=3"
want "a key an override adds" "$(q '+trainer_config.zz_extra=1 trainer_config.zz')" "trainer_config.zz_extra="
# the line's -cp / -cn choose the config
want "the line's -cp -cn" "$("$M" -sc "query=-cp $WORK/conf -cn tiny trainer_config.batch_size=" | tr '\n' ' ' | sed 's/ $//')" \
  "trainer_config.batch_size=4"
# ---------------------------------------------------------------- flags, flag values, subcommands
want "flags" "$(q --con)" "--config-path --config-name --config-dir"
want "--cfg's values" "$(q '--cfg ')" "job hydra all"
want "--info's values" "$(q '-i s')" "searchpath"
want "--config-name: the configs in the search path" "$("$M" -sc "query=-cp $WORK/conf -cn " | tr '\n' ' ' | sed 's/ $//')" "tiny"
want "--package: keys without =" "$(q '-p gpt_config.n_l')" "gpt_config.n_layer"
want "subcommands" "$(q s)" "sample"
# a subcommand's line: its flags and the values of its choices; its paths are left to bash
want "a subcommand's flags" "$(q 'sample --sn')" "--snapshot"
want "... all of them" "$(q 'sample --')" "--snapshot --prompt --max_new_tokens --temperature --top_k --seed --device"
want "... after other arguments" "$(q 'runs d --')" "--json --csv"
want "a subcommand's choice values" "$(q 'sample --snapshot s --device ')" "cpu cuda auto"
want "... partial" "$(q 'plot d --x t')" "tokens time"
want "... as --flag=value" "$(q 'export --dtype=f')" "--dtype=float32 --dtype=float16"
[ -z "$(q 'sample --snapshot ')" ] && ok "a subcommand's path value: left to bash" || bad "a subcommand's path value" "$(q 'sample --snapshot ')"
[ -z "$(q 'info ')" ] && ok "a subcommand's positional argument: left to bash" || bad "a subcommand's positional argument" "$(q 'info ')"
[ -z "$(q '-cp ')" ] && ok "a directory: left to bash" || bad "a directory: left to bash" "$(q '-cp ')"
# no config anywhere: flags and subcommands still complete
( cd "$WORK" && mkdir -p empty && cd empty && cp "$M" ./mingpt-copy && \
  [ "$(./mingpt-copy -sc query=--ver)" = "--version" ] && [ -z "$(./mingpt-copy -sc query=trainer_config.)" ] ) \
  && ok "without a config: flags only" || bad "without a config: flags only"

# ---------------------------------------------------------------- Hydra's query=bash (COMP_LINE)
want "query=bash reads COMP_LINE up to COMP_POINT" \
  "$(COMP_LINE="mingpt trainer_config.devXYZ" COMP_POINT=25 "$M" -cp "$REPO" -sc query=bash | tr '\n' ' ' | sed 's/ $//')" \
  "trainer_config.device="

# ---------------------------------------------------------------- the bash script
"$M" -sc install=bash > script.sh
# complete WORD...: runs the completion function as bash would for the words (the last is the
# one being completed; bash splits at '=' too) and prints COMPREPLY, one per line (what
# readline inserts in a real bash: tests/test_completion_bash.sh)
complete_line() {
  bash -c 'source script.sh; line=$1; shift; COMP_LINE=$line; COMP_POINT=${#line}; COMP_WORDS=("$@");
           COMP_CWORD=$(($# - 1)); cd "$0" && _mingpt_completion; printf "%s\n" "${COMPREPLY[@]}"' "$REPO" "$@"
}
want "bash: a key" "$(complete_line "$M trainer_config.dev" "$M" trainer_config.dev | tr '\n' ' ' | sed 's/ $//')" \
  "trainer_config.device="
got=$(complete_line "$M trainer_config.device=c" "$M" trainer_config.device = c | tr '\n' ' ' | sed 's/ $//')
want "bash: values after '=' (bash's word is the part after '=')" "$got" "cpu cuda"
got=$(complete_line "$M trainer_config.device=" "$M" trainer_config.device = | tr '\n' ' ' | sed 's/ $//')
want "bash: values at '=' (readline's word after '=' is empty: no '=' in them)" "$got" "auto cpu cuda"
got=$(complete_line "$M trainer_config.device=cu" "$M" trainer_config.device = cu)
[ "$got" = "cuda " ] && ok "bash: one value gets its space" || bad "bash: one value gets its space" "[$got]"
got=$(complete_line "$M sample --dev" "$M" sample --dev)
[ "$got" = "--device " ] && ok "bash: a subcommand's flag" || bad "bash: a subcommand's flag" "[$got]"
got=$(complete_line "$M sample --device=c" "$M" sample --device = c | tr '\n' ' ' | sed 's/ $//')
want "bash: a subcommand's --flag=value" "$got" "cpu cuda"
check "uninstall=bash" 0 "complete -r mingpt ./mingpt" "" -- "$M" -sc uninstall=bash
check "-sc without a subcommand" 2 "" "Expecting one subcommand from ['install', 'uninstall', 'query'] to be set" -- "$M" -sc
check "-sc install=zsh" 2 "" "No completion plugin for 'zsh' found, available : 
	bash" -- "$M" -sc install=zsh
bad_input cli-sc-shell 2 'No completion plugin for' -- "$M" -sc install=zsh
bad_input cli-sc-missing 2 'Expecting one subcommand from' -- "$M" -sc uninstall=bash query=x
finish
