#!/usr/bin/env bash
# Hydra checklist O1-O6: override grammar, value typing, every error text of the reference's
# section 1 (struct, append, delete, list index, parse, lexer, typed-mode conversions), with
# mingpt's exit code 2 for them (Hydra exits 1).
cd "$(dirname "$0")/.." && source tests/lib.sh && source tests/hydra_lib.sh
M=$MINGPT
SHIPPED=(-cp "$REPO")
cfg() { $M "${SHIPPED[@]}" --cfg job "$@"; }

# ---------------------------------------------------------------- O1 value typing
cfg optimizer_config.learning_rate=1e-3 trainer_config.batch_size=1_024 gpt_config.attn_pdrop=.5 trainer_config.seed=010 \
  trainer_config.use_amp=yes +s=010 +c=yes +x= +y=null "+q='5'" "+m=1e3x" "+b=TrUe" "+f=-1E5" "+i=inf" > o1.txt 2>&1
has "O1 typed keys take their type" o1.txt '  learning_rate: 0.001' '  batch_size: 1024' '  attn_pdrop: 0.5' \
  '  seed: 10' '  use_amp: true'
check "O1 new keys: Hydra's typing, appended in order" 0 "s: '010'
c: 'yes'
x: ''
'y': null
q: '5'
m: 1e3x
b: true
f: -100000.0
i: .inf" "" -- bash -c "tail -n 9 o1.txt"
check "O1 quoting, escapes, whitespace" 0 "a b
a,b
a[b
it's
/p/x.bin" "" -- bash -c "for v in 'a b ' '\"a,b\"' \"'a[b'\" \"'it\\\\'s'\" /p/x.bin; do $M -cp '$REPO' --cfg job -p data_config.path \"data_config.path=\$v\"; done"

# ---------------------------------------------------------------- O2 lists, dicts, merge, ++, ~
cfg '+z=[1,2,a]' '+w={a:1,b:x}' 'gpt_config={n_layer:2}' '++trainer_config.seed=7' '++extra.deep.k=1' \
  '+rel={a:5}' '~rel' '~data_config' 'optimizer_config.betas.1=0.999' > o2.txt 2>&1
has "O2 dict merge keeps the other keys, ++ sets, list index" o2.txt '  n_layer: 2' '  n_head: 8' '  seed: 7' '  - 0.999'
check "O2 new list, dict, nested ++, deletions" 0 "z:
- 1
- 2
- a
w:
  a: 1
  b: x
extra:
  deep:
    k: 1" "" -- bash -c "tail -n 10 o2.txt"
grep -q '^rel:' o2.txt && bad "O2 ~rel removes it" || ok "O2 ~rel removes it"
grep -q '^data_config:' o2.txt && bad "O2 ~section deletes it (defaults at run time)" || ok "O2 ~section deletes it (defaults at run time)"
check "O2 ~key=value deletes on a match; ??? matches ~k=???" 1 "0" "" -- bash -c \
  "$M -cp '$REPO' --cfg job -p _global_ +t=??? '~t=???' trainer_config.seed=5 '~trainer_config.seed=5' | grep -cE '^t:|^  seed:'"
check "O2 last override wins" 0 "9" "" -- $M "${SHIPPED[@]}" --cfg job -p gpt_config.n_layer gpt_config.n_layer=1 gpt_config.n_layer=9

# ---------------------------------------------------------------- O3 the seven error texts of section 1
check "O3 key.typo=v" 2 "" "$(hydra_err "Could not override 'trainer_config.lrr'.
To append to your config use +trainer_config.lrr=0.1
Key 'lrr' is not in struct
    full_key: trainer_config.lrr
    object_type=dict")" -- cfg trainer_config.lrr=0.1
check "O3 typo.key=v (+ suggestion)" 2 "" "$(hydra_err "Could not override 'trainerr_config.seed'.
To append to your config use +trainerr_config.seed=0.1
Key 'trainerr_config' is not in struct
    full_key: trainerr_config
    object_type=dict
Did you mean 'trainer_config.seed'?")" -- cfg trainerr_config.seed=0.1
check "O3 dict with a new key" 2 "" "$(hydra_err "Could not override 'gpt_config'.
To append to your config use +gpt_config={n_layer:2,new:1}
Key 'new' is not in struct
    full_key: gpt_config.new
    object_type=dict")" -- cfg 'gpt_config={n_layer:2,new:1}'
check "O3 + on an existing key" 2 "" "$(hydra_err "Could not append to config. An item is already at 'optimizer_config.learning_rate'.
Either remove + prefix: 'optimizer_config.learning_rate=0.1'
Or add a second + to add or override 'optimizer_config.learning_rate': '++optimizer_config.learning_rate=0.1'
")" -- cfg +optimizer_config.learning_rate=0.1
check "O3 ~ a missing key" 2 "" "$(hydra_err "Could not delete from config. 'trainer_config.nope' does not exist.")" \
  -- cfg '~trainer_config.nope'
check "O3 ~key=value that differs" 2 "" "$(hydra_err "Could not delete from config. The value of 'optimizer_config.learning_rate' is 0.0003 and not 5.")" \
  -- cfg '~optimizer_config.learning_rate=5'
check "O3 list index out of range" 2 "" "$(hydra_err "Error merging override lst.5=9
list index out of range
    full_key: lst[5]
    object_type=list")" -- cfg '+lst=[1,2,3]' lst.5=9
check "O3 suggestion from another section" 2 "" "~Did you mean 'optimizer_config.learning_rate'\?" \
  -- cfg trainer_config.learning_rate=0.1
check "O3 suggestion for a hydra key" 2 "" "~Did you mean 'hydra.run.dir'\?" -- cfg hydra.run.dirr=x

# ---------------------------------------------------------------- O4 parse and lexer errors
check "O4 missing EQUAL" 2 "" "$(hydra_err "Error parsing override 'optimizer_config.learning_rate'
missing EQUAL at '<EOF>'
$GRAMMAR")" -- cfg optimizer_config.learning_rate
check "O4 mismatched input '['" 2 "" "$(hydra_err "mismatched input '[' expecting <EOF>
$GRAMMAR")" -- cfg 'data_config.path=a[b'
check "O4 mismatched input '='" 2 "" "$(hydra_err "mismatched input '=' expecting <EOF>
$GRAMMAR")" -- cfg 'data_config.path=a=b'
check "O4 token recognition error (key)" 2 "" "$(hydra_err "Error parsing override '1k=2'
token recognition error at: '1k'
$GRAMMAR")" -- cfg 1k=2
check "O4 extraneous input" 2 "" "$(hydra_err "Error parsing override 'gpt_config.1a=2'
extraneous input 'a' expecting EQUAL
$GRAMMAR")" -- cfg gpt_config.1a=2
check "O4 token recognition error (~ value)" 2 "" "$(hydra_err "Error parsing override 'gpt_config.n_layer=~'
token recognition error at: '~'
$GRAMMAR")" -- cfg 'gpt_config.n_layer=~'
check "O4 non-ASCII needs quotes" 2 "" "$(hydra_err "LexerNoViableAltException: data_config.path=李明
                                            ^
$GRAMMAR")" -- cfg 'data_config.path=李明'
check "O4 'a b' is fine" 0 "a b" "" -- cfg -p data_config.path 'data_config.path=a b'
check "O4 quoted a[b is fine" 0 "a[b" "" -- cfg -p data_config.path 'data_config.path="a[b"'
check "O4 unquoted specials" 0 'x*y%z@w?|v:u/-\+.$' "" -- cfg -p data_config.path 'data_config.path=x*y%z@w?|v:u/-\+.$'

# ---------------------------------------------------------------- O5 interpolation from the command line
check "O5 stored as interpolation" 0 'v: ${trainer_config.seed}_x' "" -- bash -c "$M -cp '$REPO' --cfg job '+v=\${trainer_config.seed}_x' | tail -n 1"
check "O5 --resolve" 0 'v: 1337_x' "" -- bash -c "$M -cp '$REPO' --cfg job --resolve '+v=\${trainer_config.seed}_x' | tail -n 1"
$M "${TINY[@]}" '+name=run_${gpt_config.n_layer}L' 'hydra.run.dir=runs/${name}' > o5.log 2>&1
[ -f runs/run_1L/summary.json ] && ok "O5 hydra.run.dir=runs/\${name} -> runs/run_1L" || bad "O5 run dir from an interpolation" "$(tail -5 o5.log; ls -R runs 2>&1)"

# ---------------------------------------------------------------- O6 typed mode (types from the schema)
typed() {  # typed NAME OVERRIDE MESSAGE
  check "O6 $1" 2 "" "$(hydra_err "Error merging override $2
$3
    full_key: $(k=${2%%=*}; echo "${k#++}")
    object_type=dict")" -- cfg "$2"
}
typed "str -> int" trainer_config.batch_size=abc "Value 'abc' of type 'str' could not be converted to Integer"
typed "float -> int" trainer_config.batch_size=3.5 "Value '3.5' of type 'float' could not be converted to Integer"
typed "1e3 -> int" trainer_config.batch_size=1e3 "Value '1000.0' of type 'float' could not be converted to Integer"
typed "bool -> int" trainer_config.batch_size=true "Value 'True' of type 'bool' could not be converted to Integer"
typed "str -> float" optimizer_config.learning_rate=abc "Value 'abc' of type 'str' could not be converted to Float"
typed "str -> bool" trainer_config.use_amp=maybe "Value 'maybe' is not a valid bool (type str)"
typed "null -> int" trainer_config.batch_size=null "field 'trainer_config.batch_size' is not Optional"
typed "++ keeps the type" ++trainer_config.batch_size=abc "Value 'abc' of type 'str' could not be converted to Integer"
check "O6 accepted conversions" 0 "10
1.0
True
True
5" "" -- bash -c "for kv in trainer_config.batch_size=\"'010'\" optimizer_config.learning_rate=1 trainer_config.use_amp=1 trainer_config.use_amp=\"'Y'\" trainer_config.device=5; do
  $M -cp '$REPO' --cfg job -p \${kv%%=*} \$kv 2>&1; done"
check "O6 + and ++ add keys to a section (not bound)" 0 "1" "" -- cfg -p trainer_config.newkey +trainer_config.newkey=1 ++gpt_config.other=x
check "O6 a type error in the file names file:line:col" 2 "" "mingpt: error: conf/bad.yaml:2:15: trainer_config.batch_size: expected an integer, got 'abc'" \
  -- bash -c "printf 'trainer_config:\n  batch_size: abc\n' > conf/bad.yaml; $M -cp conf -cn bad --cfg job"
finish
