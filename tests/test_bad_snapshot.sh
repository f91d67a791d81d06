#!/usr/bin/env bash
# Damaged and crafted snapshots: every one is refused by the one validated loader, by both
# its users (resume and `sample`), with a message naming the file and the problem; never a
# crash, never a partial file. Crafted files keep a valid CRC (tests/tools/snapedit), so they
# reach the record checks behind the checksum.
cd "$(dirname "$0")/.." && source tests/lib.sh
EDIT=${SNAPEDIT:-$PWD/${B:-build}/tests/tools/snapedit}

DATA=$WORK/tiny.txt
printf 'hello world, this is a small corpus for mingpt snapshot tests.\n%.0s' {1..20} > "$DATA"
small=(data_config.path=$DATA data_config.truncate=1.0 data_config.block_size=8 gpt_config.n_layer=1 gpt_config.n_head=2
       gpt_config.n_embd=8 trainer_config.batch_size=4 trainer_config.max_iters=2 hydra.run.dir=$WORK/run)
G=$WORK/good.bin
if ! $MINGPT "${small[@]}" trainer_config.snapshot_path=$G > $WORK/train.log 2>&1 || [ ! -f $G ]; then
  bad "a small run wrote no snapshot" "$(tail -5 $WORK/train.log)"; finish; exit 1
fi
size=$(stat -c %s $G)
# craft NAME OPS...: $WORK/NAME.bin from the good snapshot
craft() { local n=$1; shift; "$EDIT" $G $WORK/$n.bin "$@" || bad "snapedit $n"; }
# resume CASE: train resuming from the crafted file (max_iters past the snapshot's)
resume() { $MINGPT "${small[@]}" trainer_config.max_iters=4 trainer_config.snapshot_path=$WORK/$1.bin; }
sample() { $MINGPT sample --snapshot $WORK/$1.bin --max_new_tokens 5; }

# Damaged: cut at any offset, or one flipped byte (the CRC catches both).
for cut in 0 7 11 12 20 100 $((size / 2)) $((size - 5)) $((size - 1)); do
  craft cut trunc $cut
  bad_input snap-truncated 1 'is corrupt or truncated' -- sample cut
done
for off in 0 9 13 30 $((size / 3)) $((size - 2)); do
  craft flip flip $off
  bad_input snap-flipped-byte 1 'snapshot' -- resume flip
done

# Crafted, valid CRC.
craft iterneg set STAT 2 -1
bad_input snap-iter-in-epoch-negative 1 'STAT iter_in_epoch is -1' -- resume iterneg
craft fewparams set STAT 6 10 resize PARM 40 resize ADAM 40 resize ADAV 40
bad_input snap-num-params-small 1 'STAT num_params is 10 but the shape in SHAP has' -- resume fewparams
craft hugeparams set STAT 6 4611686018427387904 resize PARM 0
bad_input snap-num-params-huge 1 'STAT num_params is 4611686018427387904' -- sample hugeparams
craft dupstat set STAT 6 1 resize PARM 4 dup STAT
bad_input snap-duplicate-record 1 'record STAT appears twice' -- sample dupstat
craft wideembd set SHAP 4 4294967304
bad_input snap-shape-int64 1 'SHAP n_embd is 4294967304' -- sample wideembd
craft deep set SHAP 2 2147483647
bad_input snap-shape-huge 1 'n_layer is 2147483647; it must be in [1, 4096]' -- sample deep
craft longrec len SHAP 9223372036854775807
bad_input snap-record-length 1 'record SHAP at offset' -- resume longrec
craft badprec resize PREC 3
bad_input snap-precision-bad 1 'record PREC is not float32, bfloat16 or float16' -- resume badprec
craft newer version 2
bad_input snap-newer-version 1 'has format version 2.0, written by a newer mingpt; this mingpt reads format 1 (up to 1.2)' -- sample newer
craft bigscale setf SCAL 0 1e38
bad_input snap-loss-scale 1 'SCAL loss scale 1e+38 is outside' -- resume bigscale
craft nanparam setf PARM 3 nan
bad_input snap-nan-parameter 1 'record PARM holds non-finite values' -- resume nanparam
craft badvocab set VOCB 0 55296
bad_input snap-vocab 1 'is malformed: VOCB' -- sample badvocab
craft noparm drop PARM
bad_input snap-missing-record 1 'record PARM is missing' -- resume noparm
bad_input snap-not-regular 1 'is not a regular file' -- $MINGPT sample --snapshot /dev/zero
mkfifo $WORK/fifo.bin
bad_input snap-fifo 1 'is not a regular file' -- timeout 10 $MINGPT "${small[@]}" trainer_config.snapshot_path=$WORK/fifo.bin

# What resume refused was left as it was, and nothing partial appeared.
cmp -s $WORK/iterneg.bin <("$EDIT" $G /dev/stdout set STAT 2 -1) && ok "refused snapshot left untouched" \
  || bad "refused snapshot left untouched"
no_partial_files $WORK "no partial files after the refusals"

# sample's own arguments: a prompt the vocabulary cannot encode, values that wrapped silently.
bad_input sample-prompt-vocab 2 '(U+005A) at character 2 (byte offset 2) is not in the vocabulary' -- $MINGPT sample --snapshot $G --prompt "heZ"
bad_input sample-top-k-range 2 '--top_k must be an integer in [0, 2147483647]' -- $MINGPT sample --snapshot $G --top_k 4294967297
bad_input sample-seed-range 2 '--seed must be an integer in [0, 4294967295]' -- $MINGPT sample --snapshot $G --seed 4294967296
bad_input sample-device-bad 2 '--device must be cpu, cuda or auto, got '\''gpu'\''' -- $MINGPT sample --snapshot $G --device gpu
bad_input sample-device-no-cuda 2 'sample --device cuda: no CUDA backend at MINGPT_CUDA_LIB=' -- env MINGPT_CUDA_LIB=$WORK/none.so $MINGPT sample --snapshot $G --device cuda
bad_input sample-cuda-attention-env 2 'sample --device auto: MINGPT_CUDA_ATTENTION must be fused or cublas (got' -- env MINGPT_CUDA_ATTENTION=flash $MINGPT sample --snapshot $G --device auto
# --max_new_tokens near LONG_MAX was a heap overflow (n_total + 1 wrapped): now it streams.
out=$( { timeout 300 $MINGPT sample --snapshot $G --prompt h --max_new_tokens 4611686018427387904 | head -c 70000 | wc -c; } 2>&1)
[ "$out" = 70000 ] && ok "sample --max_new_tokens 2^62 streams (70000 bytes, past the context slide)" \
  || bad "sample --max_new_tokens 2^62" "$out"
# The slide of the context buffer changes nothing: 70000 characters equal, as a prefix, a longer run.
a=$($MINGPT sample --snapshot $G --prompt h --max_new_tokens 66000 --seed 7 2>&1 | head -c 66001 | md5sum)
b=$($MINGPT sample --snapshot $G --prompt h --max_new_tokens 66100 --seed 7 2>&1 | head -c 66001 | md5sum)
[ "$a" = "$b" ] && ok "sampling is a prefix across the context slide" || bad "sampling is a prefix across the context slide"
finish
