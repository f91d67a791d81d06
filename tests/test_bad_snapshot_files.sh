#!/usr/bin/env bash
# Snapshots as files, the refusals: `mingpt info` and `mingpt export` on bad files
# and arguments, trainer_config.init_from on files that do not fit (each through its validated
# loader), the new keys' bad values, resuming with settings that break exact resume, and a final
# save that cannot be written. Each is one message and an exit code, never a crash, and leaves
# no file behind. (The features themselves: tests/test_snapshot_files.sh.)
cd "$(dirname "$0")/.." && source tests/lib.sh
export OMP_NUM_THREADS=1
EDIT=${SNAPEDIT:-$PWD/${B:-build}/tests/tools/snapedit}

base=(--config-name char_cpu data_config.truncate=0.05 data_config.block_size=32 gpt_config.n_layer=2 gpt_config.n_head=4
      gpt_config.n_embd=32 trainer_config.batch_size=8 trainer_config.eval_iters=2 trainer_config.eval_every=0
      trainer_config.save_every_iters=0 trainer_config.log_every=100 optimizer_config.warmup_iters=0
      optimizer_config.lr_decay_iters=0 hydra/job_logging=disabled)
run() { local d=$1; shift; $MINGPT "${base[@]}" hydra.run.dir=$WORK/$d trainer_config.snapshot_path=s.bin "$@"; }
S=$WORK/good/s.bin
if ! run good trainer_config.max_iters=30 > $WORK/good.log 2>&1; then bad "a small run" "$(tail -3 $WORK/good.log)"; finish; exit 1; fi
cp $S $WORK/good_copy.bin

echo "-- mingpt info and export"
"$EDIT" $S $WORK/extra.bin add XTRA 16
bad_input snap-unknown-record 1 'record XTRA at offset' -- $MINGPT info $WORK/extra.bin
"$EDIT" $S $WORK/cut.bin trunc 1000
bad_input info-damaged 1 'is corrupt or truncated (CRC32 mismatch)' -- $MINGPT info $WORK/cut.bin
bad_input info-not-found 1 'cannot open snapshot' -- $MINGPT info $WORK/absent.bin
bad_input info-usage 2 'a SNAPSHOT path is required' -- $MINGPT info --json
bad_input export-dtype 2 '--dtype must be float32, bfloat16 or float16' -- $MINGPT export --snapshot $S --out $WORK/x.safetensors --dtype float64
bad_input export-damaged 1 'is corrupt or truncated' -- $MINGPT export --snapshot $WORK/cut.bin --out $WORK/x.safetensors
[ ! -e $WORK/x.safetensors ] && ok "a refused export writes nothing" || bad "a refused export wrote a file"

echo "-- trainer_config.init_from"
$MINGPT export --snapshot $S --out $WORK/m2.safetensors > /dev/null || bad "export"
run one trainer_config.max_iters=2 gpt_config.n_layer=1 > /dev/null 2>&1 && $MINGPT export --snapshot $WORK/one/s.bin --out $WORK/m1.safetensors > /dev/null \
  || bad "a 1-layer model exported"
# the corpus with 'a' spelt '@' (absent from it): a vocabulary of the same size that differs
tr a @ < data/input.txt > $WORK/other.txt
head -c 100 $WORK/m2.safetensors > $WORK/cut.safetensors
printf '\xff\xff\xff\xff\x00\x00\x00\x00{}' > $WORK/long.safetensors
printf '\x07\x00\x00\x00\x00\x00\x00\x00{"a": 1' > $WORK/json.safetensors
init() { run init trainer_config.max_iters=2 trainer_config.init_from="$@"; }
bad_input init-not-found 2 'trainer_config.init_from: cannot open' -- init $WORK/absent.safetensors
bad_input init-other-layers 2 'm1.safetensors'\'' has n_layer 1 but the config has n_layer 2' -- init $WORK/m1.safetensors
bad_input init-wrong-shape 2 'm2.safetensors'\'' has n_embd 32 but the config has n_embd 64' -- init $WORK/m2.safetensors gpt_config.n_embd=64
bad_input init-snapshot-shape 2 's.bin'\'' has n_layer 2, n_embd 32, block_size 32 but the config has n_layer 1, n_embd 64, block_size 16' -- init $S gpt_config.n_layer=1 gpt_config.n_embd=64 data_config.block_size=16
bad_input init-vocab 2 'the vocabulary of' -- init $WORK/m2.safetensors data_config.path=$WORK/other.txt
bad_input init-truncated-header 1 'runs past the end of the file (100 bytes)' -- init $WORK/cut.safetensors
bad_input init-header-past-end 1 'its header length 4294967295 runs past the end of the file (10 bytes)' -- init $WORK/long.safetensors
bad_input init-bad-json 1 'the header is not valid JSON' -- init $WORK/json.safetensors
[ ! -e $WORK/init/s.bin ] && ok "no refused init_from wrote a snapshot" || bad "a refused init_from wrote a snapshot"

echo "-- the new keys, and resuming with settings that break exact resume"
bad_input cfg-keep-last-zero 2 'trainer_config.keep_last must be >= 1, got 0' -- run bad trainer_config.keep_last=0
bad_input cfg-save-best-bad 2 'Value '\''maybe'\'' is not a valid bool' -- run bad trainer_config.save_best=maybe
bad_input resume-seed-changed 2 'trainer_config.seed: 1337 in the snapshot, 7 now' -- run good trainer_config.max_iters=40 trainer_config.seed=7
bad_input resume-global-batch 2 'the global batch: 8 (batch_size 8 x grad_accum_steps 1 x world_size 1) sequences in the snapshot, 16' -- run good trainer_config.max_iters=40 trainer_config.batch_size=16
cmp -s $S $WORK/good_copy.bin && ok "refused resumes leave the snapshot as it was" || bad "a refused resume changed the snapshot"

echo "-- a final save that cannot be written (RLIMIT_FSIZE below the snapshot's size)"
size=$(stat -c %s $S)
bad_input snap-write-fails 1 'File too large); ' -- sh -c "ulimit -f $((size / 2048)); exec \"\$0\" \"\$@\"" $MINGPT "${base[@]}" hydra.run.dir=$WORK/good trainer_config.snapshot_path=s.bin trainer_config.max_iters=32
cmp -s $S $WORK/good_copy.bin && ok "the previous snapshot is intact" || bad "the failed save changed the snapshot"
no_partial_files $WORK "no temporary or partial file left by any refusal"
finish
