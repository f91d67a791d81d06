#!/usr/bin/env bash
# The `-sc install=bash` script in a real interactive bash with its default COMP_WORDBREAKS
# (which holds '=' and ':'): bash runs under tmux, the test types a partial command and Tab and
# reads the line back from the pane, so what is checked is what readline inserts, not COMPREPLY.
cd "$(dirname "$0")/.." && source tests/lib.sh
REPO=$PWD
M=$(readlink -f "$MINGPT")
if ! command -v tmux >/dev/null 2>&1; then
  bad "tmux is installed (make deps installs it)"; finish; exit
fi

# A private tmux server: its socket in $WORK (tmux leaves a -L socket behind in
# /tmp/tmux-UID), no ~/.tmux.conf, not nested in a tmux this may run under; killed on exit,
# then lib.sh's $WORK removed.
unset TMUX
tm() { tmux -S "$WORK/tmux.sock" -f /dev/null "$@"; }
trap 'tm kill-server >/dev/null 2>&1; rm -rf "$WORK"' EXIT

# `mingpt` on PATH is this build's binary; the config is the checkout's gpt2_train_cfg.yaml
# (the current directory). No rc files, no inputrc, no history file.
mkdir -p "$WORK/bin" && ln -s "$M" "$WORK/bin/mingpt"
"$M" -sc install=bash > "$WORK/completion.bash"

pane() { tm capture-pane -p -t t 2>/dev/null | sed -e 's/[[:space:]]*$//' -e '/^$/d'; }
# wait_for REGEX: polls the pane (up to 10 s) until a line matches REGEX (grep -E).
# wait_for_pane TEXT: the same until the whole pane is TEXT.
wait_for() {
  local i
  for ((i = 0; i < 200; i++)); do
    pane | grep -Eq -- "$1" && return 0
    sleep 0.05
  done
  return 1
}
wait_for_pane() {
  local i
  for ((i = 0; i < 200; i++)); do
    [ "$(pane)" = "$1" ] && return 0
    sleep 0.05
  done
  return 1
}

tm new-session -d -s t -x 200 -y 50 \
  "env HISTFILE= INPUTRC=/dev/null PATH='$WORK/bin:$PATH' bash --norc --noprofile" || {
  bad "tmux starts bash"; finish; exit; }
tm send-keys -t t -l "PS1='\$ '; cd '$REPO' && source '$WORK/completion.bash'; echo ready\$((6*7))"
tm send-keys -t t Enter
if ! wait_for '^ready42$'; then
  bad "bash starts under tmux with the completion script" "$(pane)"; finish; exit
fi
# bash's own default: '=' and ':' break words (the case this script must handle)
tm send-keys -t t -l "[[ \$COMP_WORDBREAKS == *=* && \$COMP_WORDBREAKS == *:* ]]; echo wordbreaks\$?"
tm send-keys -t t Enter
wait_for '^wordbreaks[0-9]+$' && [ "$(pane | grep -E '^wordbreaks[0-9]+$')" = wordbreaks0 ] \
  && ok "COMP_WORDBREAKS holds '=' and ':'" || bad "COMP_WORDBREAKS holds '=' and ':'" "$(pane)"

# tab TEXT TABS: on an empty, cleared screen (the pane is the prompt alone, so nothing of the
# last case is left in it) types TEXT, presses Tab TABS times, then types '%' (readline handles
# keys in order, so the '%' shows once completion is done). Sets LINE (the
# command line after completion, without the prompt and '%') and LIST (the candidates bash
# listed, sorted, one space apart; empty if none).
tab() {
  local text=$1 n=$2 i out
  tm send-keys -t t C-e C-u C-l
  wait_for_pane '$' || { LINE="(no empty prompt: $(pane | tr '\n' '|'))"; LIST=""; return; }
  tm send-keys -t t -l "$text"
  for ((i = 0; i < n; i++)); do tm send-keys -t t C-i; done
  tm send-keys -t t -l '%'
  if ! wait_for '^\$ .*%$'; then LINE="(no line ending in %: $(pane | tr '\n' '|'))"; LIST=""; return; fi
  out=$(pane)
  LINE=$(tail -n 1 <<<"$out" | sed -e 's/^\$ //' -e 's/%$//')
  LIST=$(sed -e '1d' -e '$d' <<<"$out" | tr -s ' \t' '\n' | sed '/^$/d' | sort | tr '\n' ' ' | sed 's/ $//')
}
# expect NAME TEXT TABS LINE [LIST]: after tab TEXT TABS the line is LINE ("mingpt " before it;
# a trailing space matters) and, when given, bash listed exactly LIST.
expect() {
  local name=$1 want_line="mingpt $4" want_list=${5-}
  tab "mingpt $2" "$3"
  if [ "$LINE" != "$want_line" ]; then bad "$name" "line: [$LINE]
want: [$want_line]"; return; fi
  if [ $# -ge 5 ] && [ "$LIST" != "$want_list" ]; then bad "$name (the list)" "list: [$LIST]
want: [$want_list]"; return; fi
  ok "$name"
}

# ---------------------------------------------------------------- keys
expect "a key with dots: 'key=' and no space" trainer_config.dev 1 "trainer_config.device="
expect "a section: 'section.' and no space" trainer_con 1 "trainer_config."
expect "a key of a section" trainer_config.use_a 1 "trainer_config.use_amp="
expect "~key" "~gpt_config.n_la" 1 "~gpt_config.n_layer="
expect "+key" "+trainer_config.use_a" 1 "+trainer_config.use_amp="
# ---------------------------------------------------------------- values after '=' (a word break)
expect "key=<Tab><Tab>: the values listed, the line unchanged" trainer_config.device= 2 \
  "trainer_config.device=" "auto cpu cuda"
expect "key=c<Tab><Tab>: cpu and cuda" trainer_config.device=c 2 "trainer_config.device=c" "cpu cuda"
expect "key=cu<Tab>: the value and a space" trainer_config.device=cu 1 "trainer_config.device=cuda "
expect "booleans listed" trainer_config.use_amp= 2 "trainer_config.use_amp=" "false true"
expect "a boolean completed" trainer_config.use_amp=t 1 "trainer_config.use_amp=true "
expect "data_config.split= listed" data_config.split= 2 "data_config.split=" "contiguous random"
expect "data_config.split= completed" data_config.split=r 1 "data_config.split=random "
expect "a key's current value" gpt_config.n_layer= 1 "gpt_config.n_layer=8 "
expect "+key=" +trainer_config.use_amp=f 1 "+trainer_config.use_amp=false "
expect "++key=" ++trainer_config.device=cu 1 "++trainer_config.device=cuda "
expect "++key= listed" ++trainer_config.device= 2 "++trainer_config.device=" "auto cpu cuda"
expect "after another override" "gpt_config.n_layer=3 gpt_config.n_layer=" 1 \
  "gpt_config.n_layer=3 gpt_config.n_layer=3 "
# ---------------------------------------------------------------- ':' breaks words too
expect "a value with ':' in it, after the ':'" "hydra.run.dir=out:x hydra.run.dir=out:" 1 \
  "hydra.run.dir=out:x hydra.run.dir=out:x "
expect "a value with ':' in it, before the ':'" "hydra.run.dir=out:x hydra.run.dir=o" 1 \
  "hydra.run.dir=out:x hydra.run.dir=out:x "
# ---------------------------------------------------------------- flags, subcommands
expect "a flag" --config-n 1 "--config-name "
expect "a subcommand" sam 1 "sample "
expect "a subcommand's flag" "sample --dev" 1 "sample --device "
expect "--flag=<Tab><Tab>" "sample --device=" 2 "sample --device=" "auto cpu cuda"
expect "--flag=c<Tab>" "sample --device=cu" 1 "sample --device=cuda "
expect "--flag <Tab><Tab>" "sample --device " 2 "sample --device " "auto cpu cuda"
expect "--flag c<Tab>" "sample --device cu" 1 "sample --device cuda "
expect "export --dtype=" "export --dtype=float1" 1 "export --dtype=float16 "
# ---------------------------------------------------------------- a COMP_WORDBREAKS without '=' and ':'
# (bash's word is then the whole key=value, and so are the candidates)
tm send-keys -t t C-e C-u
tm send-keys -t t -l "COMP_WORDBREAKS=\${COMP_WORDBREAKS//[=:]}; echo nobreaks\$((6*7))"
tm send-keys -t t Enter
wait_for '^nobreaks42$' || bad "COMP_WORDBREAKS set without '=' and ':'" "$(pane)"
expect "without '=' in COMP_WORDBREAKS: key=cu<Tab>" trainer_config.device=cu 1 "trainer_config.device=cuda "
expect "without '=' in COMP_WORDBREAKS: key=<Tab><Tab>" trainer_config.device= 2 "trainer_config.device=" \
  "trainer_config.device=auto trainer_config.device=cpu trainer_config.device=cuda"
expect "without ':' in COMP_WORDBREAKS: a value holding ':'" "hydra.run.dir=out:x hydra.run.dir=out:" 1 \
  "hydra.run.dir=out:x hydra.run.dir=out:x "
finish
