#!/usr/bin/env bash
# Bad input gets a clear message naming the file, key or line, and a non-zero exit;
# never a crash.
cd "$(dirname "$0")/.." && source tests/lib.sh

DATA=$WORK/tiny.txt
printf 'hello world, this is a small corpus for mingpt error tests.\n%.0s' {1..20} > "$DATA"
# A valid small config every case below starts from.
small=(data_config.path=$DATA data_config.truncate=1.0 data_config.block_size=8 gpt_config.n_layer=1 gpt_config.n_head=2
       gpt_config.n_embd=8 trainer_config.batch_size=4 trainer_config.max_iters=2
       trainer_config.snapshot_path=$WORK/s.bin hydra.run.dir=$WORK/run)

expect_error "missing config file" 2 "Cannot find primary config 'nope'" -- $MINGPT --config-name nope
expect_error "missing config dir"  2 "config directory '$WORK/nodir' exists" -- $MINGPT --config-path $WORK/nodir
expect_error "missing data file"   2 "data_config.path: cannot open '$WORK/absent\.txt': No such file or directory" -- $MINGPT "${small[@]}" data_config.path=$WORK/absent.txt
expect_error "unknown key (override)" 2 "Key 'batch_sizee' is not in struct" -- $MINGPT "${small[@]}" trainer_config.batch_sizee=3
expect_error "unknown section (override)" 2 "Could not override 'trainer.lr'" -- $MINGPT "${small[@]}" trainer.lr=3
expect_error "wrong type (override)" 2 "could not be converted to Integer" -- $MINGPT "${small[@]}" trainer_config.batch_size=abc
expect_error "override without =" 2 "Error parsing override 'trainer_config\.batch_size'" -- $MINGPT "${small[@]}" trainer_config.batch_size
expect_error "n_embd not divisible" 2 "n_embd \(10\) must be divisible by gpt_config.n_head \(4\)" -- $MINGPT "${small[@]}" gpt_config.n_embd=10 gpt_config.n_head=4
expect_error "block_size longer than data" 2 "block_size.*$WORK/tiny\.txt" -- $MINGPT "${small[@]}" data_config.block_size=5000
: > $WORK/empty.txt
expect_error "empty data" 2 "$WORK/empty\.txt.*empty" -- $MINGPT "${small[@]}" data_config.path=$WORK/empty.txt
printf 'abc\xff\xfedef\n' > $WORK/bad_utf8.txt
expect_error "invalid UTF-8 data" 2 "$WORK/bad_utf8\.txt.*UTF-8.*(offset|byte) 3" -- $MINGPT "${small[@]}" data_config.path=$WORK/bad_utf8.txt
expect_error "unknown flag" 2 "unrecognized arguments: --bogus" -- $MINGPT --bogus
expect_error "device=cuda without the backend" 2 "CUDA" -- $MINGPT "${small[@]}" trainer_config.device=cuda

# Errors inside a YAML file name the file and the line.
mkdir -p $WORK/cfg
cat > $WORK/cfg/typo.yaml <<YAML
data_config:
  path: $DATA
  block_size: 8
trainer_config:
  batch_sise: 4
YAML
expect_error "unknown key in file (file:line)" 2 "typo\.yaml:5:.*trainer_config\.batch_sise.*did you mean 'trainer_config\.batch_size'" -- $MINGPT --config-path $WORK/cfg --config-name typo
cat > $WORK/cfg/type.yaml <<YAML
gpt_config:
  n_layer: four
YAML
expect_error "wrong type in file (file:line)" 2 "type\.yaml:2:.*gpt_config\.n_layer" -- $MINGPT --config-path $WORK/cfg --config-name type
printf 'gpt_config:\n  n_layer: [1,\n' > $WORK/cfg/syntax.yaml
expect_error "YAML syntax error (file:line)" 2 "syntax\.yaml:[0-9]+" -- $MINGPT --config-path $WORK/cfg --config-name syntax

# A misspelt subcommand is named with the closest one; a word far from every name stays an override.
bad_input cli-unknown-command 2 'mingpt: error: unknown command '\''samples'\'' (did you mean '\''sample'\''?)' -- $MINGPT samples
expect_error "a word far from every subcommand" 2 "missing EQUAL" -- $MINGPT gpt_config
# Each subcommand's --help: its usage on stdout, exit 0.
for sub in sample info export plot runs; do
  out=$($MINGPT $sub --help 2>&1); rc=$?
  [ $rc -eq 0 ] && grep -q "^usage: mingpt $sub" <<<"$out" && ok "mingpt $sub --help" || bad "mingpt $sub --help (exit $rc)" "$out"
done

# A corrupt snapshot is refused with its path named; the run does not start over it.
$MINGPT "${small[@]}" > $WORK/train.log 2>&1 || bad "small training run" "$(tail -5 $WORK/train.log)"
if [ -f $WORK/s.bin ]; then
  cp $WORK/s.bin $WORK/good.bin
  printf '\x00\x00\x00\x00' | dd of=$WORK/s.bin bs=1 seek=100 conv=notrunc 2>/dev/null
  expect_error "corrupt snapshot (train)" 1 "$WORK/s\.bin.*corrupt" -- $MINGPT "${small[@]}" trainer_config.max_iters=4
  expect_error "corrupt snapshot (sample)" 1 "$WORK/s\.bin.*corrupt" -- $MINGPT sample --snapshot $WORK/s.bin
  expect_error "snapshot of another model" 2 "n_layer is 2 here but 1 in the snapshot" -- $MINGPT "${small[@]}" trainer_config.snapshot_path=$WORK/good.bin gpt_config.n_layer=2
  expect_error "prompt outside the vocabulary" 2 "prompt.*'Z' \(U\+005A\)" -- $MINGPT sample --snapshot $WORK/good.bin --prompt "heZ"
  expect_error "sample without --snapshot" 2 "--snapshot PATH is required" -- $MINGPT sample
  expect_error "sample bad temperature" 2 "temperature" -- $MINGPT sample --snapshot $WORK/good.bin --temperature 0
else
  bad "small training run wrote no snapshot" "$(tail -5 $WORK/train.log)"
fi
finish
