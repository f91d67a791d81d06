#!/usr/bin/env bash
# tests/test_outputs.sh — nothing lost, nothing silent: what mingpt writes.
#
#   * an output never replaces an input: export --out vs --snapshot, plot --out vs the run files
#     it reads, the trainer's snapshot (and its save_best copy) vs data_config.path and init_from,
#     each spelt otherwise (./d/../f), as a symbolic link and as a hard link: exit 1 before
#     anything is written, both named, the input intact;
#   * atomic replace only over regular files: a character device node (mknod, root only) stays one
#     after export and plot, /dev/full's write error is reported; a directory is refused;
#     --out /dev/stdout gives the file alone on stdout;
#   * stdout checked at exit: every printing command and flag with stdout on /dev/full says
#     "mingpt: error writing standard output: No space left on device" and exits 1; a training
#     run still saves its snapshot; a closed pipe stays quiet;
#   * messages: an unwritable GEMM calibration cache is said once; a safetensors header too
#     costly to parse, 2^20 + 1 tensors and an F64 weight beyond float32 are named.
cd "$(dirname "$0")/.." && source tests/lib.sh
export OMP_NUM_THREADS=1
PY=/usr/bin/python3
W=$WORK
cp data/input.txt $W/corpus.txt
TINY=(--config-name char_cpu data_config.path=$W/corpus.txt data_config.truncate=0.02 data_config.block_size=16
      gpt_config.n_layer=1 gpt_config.n_head=2 gpt_config.n_embd=16 trainer_config.batch_size=4 trainer_config.max_iters=4
      trainer_config.eval_iters=1 trainer_config.eval_every=2 trainer_config.device=cpu trainer_config.use_amp=false)
M() { $MINGPT "${TINY[@]}" hydra.run.dir=$W/run "$@"; }
M trainer_config.snapshot_path=$W/s.bin > $W/train.log 2>&1 || { bad "training" "$(tail -5 $W/train.log)"; finish; exit 1; }
cp $W/s.bin $W/s.orig
intact() { cmp -s $W/s.bin $W/s.orig && cmp -s $W/corpus.txt data/input.txt; }

echo "-- an output never replaces an input"
mkdir -p $W/d
ln -s s.bin $W/link.bin
ln $W/s.bin $W/hard.bin
bad_input out-same-path 1 'is the same file as --snapshot' -- $MINGPT export --snapshot $W/s.bin --out $W/./d/../s.bin
bad_input out-same-symlink 1 'link.bin'\'' is the same file as --snapshot' -- $MINGPT export --snapshot $W/s.bin --out $W/link.bin
bad_input out-same-hardlink 1 'hard.bin'\'': writing it would destroy the input' -- $MINGPT export --snapshot $W/hard.bin --out $W/s.bin
intact && ok "the snapshot is intact after the three refusals" || bad "the snapshot is intact"
[ -L $W/link.bin ] && [ "$(stat -c %h $W/s.bin)" = 2 ] && ok "the link and the hard link are as they were" \
  || bad "the links are as they were"
ln $W/run/metrics.jsonl $W/metrics_hard.svg
ln -s run/summary.json $W/summary_link.svg
cp $W/run/metrics.jsonl $W/metrics.orig
bad_input plot-out-is-metrics 1 'metrics_hard.svg'\'' is the same file as the input' -- $MINGPT plot $W/run --out $W/metrics_hard.svg
expect_error "plot --out a symbolic link to summary.json" 1 "summary_link.svg' is the same file as the input '.*/run/summary.json'" \
  -- $MINGPT plot $W/run --out $W/summary_link.svg
cmp -s $W/run/metrics.jsonl $W/metrics.orig && ok "metrics.jsonl is intact" || bad "metrics.jsonl is intact"
bad_input train-snapshot-is-data 1 'corpus.txt'\'' is the same file as data_config.path' -- M trainer_config.snapshot_path=$W/corpus.txt
ln -s corpus.txt $W/corpus_link.bin
expect_error "training: snapshot_path a symbolic link to the corpus" 1 "is the same file as data_config.path" \
  -- M trainer_config.snapshot_path=$W/corpus_link.bin
$MINGPT export --snapshot $W/s.bin --out $W/w.safetensors > /dev/null 2>&1
ln $W/w.safetensors $W/w_hard.bin
cp $W/w.safetensors $W/w.orig
bad_input train-snapshot-is-init 1 'is the same file as trainer_config.init_from' -- M trainer_config.snapshot_path=$W/w_hard.bin trainer_config.init_from=$W/./d/../w.safetensors
ln -s corpus.txt $W/best.best.bin
expect_error "training: the save_best copy is the corpus" 1 "the save_best copy of trainer_config.snapshot_path '$W/best.best.bin' is the same file as data_config.path" \
  -- M trainer_config.snapshot_path=$W/best.bin trainer_config.save_best=true
intact && cmp -s $W/w.safetensors $W/w.orig && [ ! -e $W/best.bin ] && ok "the corpus and init_from are intact, no snapshot written" \
  || bad "the corpus and init_from are intact"

echo "-- atomic replace only over regular files"
bad_input out-is-directory 1 'it is a directory, not a regular file, a character device or a FIFO' -- $MINGPT export --snapshot $W/s.bin --out $W/d
[ -d $W/d ] && [ -z "$(ls -A $W/d)" ] && ok "the directory is left as it was" || bad "the directory is left as it was"
out=$($MINGPT export --snapshot $W/s.bin --out /dev/stdout 2>$W/err | head -c 100000000 > $W/stdout.safetensors; echo "${PIPESTATUS[0]}")
[ "$out" = 0 ] && cmp -s $W/stdout.safetensors $W/w.safetensors && grep -q "^Exported .* to /dev/stdout" $W/err \
  && ok "export --out /dev/stdout: the file alone on stdout, the summary on stderr" || bad "export --out /dev/stdout (rc $out)" "$(cat $W/err)"
if [ "$(id -u)" = 0 ]; then
  mknod $W/null_node c 1 3 && mknod $W/full_node c 1 7
  out=$($MINGPT export --snapshot $W/s.bin --out $W/null_node 2>&1); rc=$?
  [ $rc -eq 0 ] && [ -c $W/null_node ] && ok "export --out a char device node (/dev/null's): written in place, still a device" \
    || bad "export --out a char device node (rc $rc)" "$out; $(ls -l $W/null_node)"
  ln -s null_node $W/null_node.svg
  out=$($MINGPT plot $W/run --out $W/null_node.svg 2>&1); rc=$?
  [ $rc -eq 0 ] && [ -c $W/null_node ] && [ -L $W/null_node.svg ] && ok "plot --out (a link to) a char device node: still a device" \
    || bad "plot --out a char device node (rc $rc)" "$out; $(ls -l $W/null_node*)"
  bad_input out-device-full 1 'full_node'\'': No space left on device' -- $MINGPT export --snapshot $W/s.bin --out $W/full_node
  ln -s full_node $W/full_node.svg
  expect_error "plot --out a /dev/full node: the write error" 1 "cannot write '$W/full_node.svg': No space left on device" \
    -- $MINGPT plot $W/run --out $W/full_node.svg
  [ -c $W/full_node ] && ok "the /dev/full node is still a char device" || bad "the /dev/full node is still a char device"
else
  skip no-mknod "only root can make device nodes (mknod): the char-device output cases"
fi
no_partial_files $W "no temporary files left"

echo "-- standard output checked at exit"
full() {  # NAME ARGS...: stdout on /dev/full -> exit 1 and the message
  local name=$1; shift
  local err rc
  err=$("$@" 2>&1 >/dev/full); rc=$?
  if [ $rc -eq 1 ] && grep -qx "mingpt: error writing standard output: No space left on device" <<<"$err"; then ok "$name > /dev/full"
  else bad "$name > /dev/full (rc $rc)" "$err"; fi
}
bad_input stdout-full 1 'mingpt: error writing standard output: No space left on device' -- sh -c "exec $MINGPT sample --snapshot $W/s.bin >/dev/full"
full "sample (an endless stream)" $MINGPT sample --snapshot $W/s.bin --max_new_tokens 9223372036854775807
full "info" $MINGPT info $W/s.bin
full "info --json" $MINGPT info --json $W/s.bin
full "runs" $MINGPT runs $W/run
full "runs --json" $MINGPT runs --json $W/run
full "export (its summary line)" $MINGPT export --snapshot $W/s.bin --out $W/x.safetensors
full "plot (its summary line)" $MINGPT plot $W/run --out $W/x.svg
for flags in "--cfg job" "--cfg all" "--help" "--hydra-help" "--version" "-sc install=bash" "-sc uninstall=bash" \
             "-sc query=trainer_config." "--info searchpath" \
             "sample --help" "info --help" "export --help" "plot --help" "runs --help"; do
  full "$flags" $MINGPT $flags
done
err=$(M trainer_config.snapshot_path=$W/full_run.bin hydra.run.dir=$W/full_run 2>&1 >/dev/full); rc=$?
[ $rc -eq 1 ] && grep -q "error writing standard output: No space left on device" <<<"$err" && [ -f $W/full_run.bin ] \
  && $MINGPT info $W/full_run.bin | grep -q "iteration 4" \
  && ok "training > /dev/full: the run finishes, saves its snapshot, exits 1 with the message" || bad "training > /dev/full (rc $rc)" "$err"
err=$($MINGPT sample --snapshot $W/s.bin 2>&1 | head -c 10 >/dev/null; echo "rc=${PIPESTATUS[0]}")
[ "$err" = "rc=0" ] && ok "sample | head -c 10: quiet, exit 0" || bad "sample | head -c 10" "$err"
err=$( (trap '' PIPE; timeout 60 $MINGPT sample --snapshot $W/s.bin --max_new_tokens 9223372036854775807 2>&1 | head -c 10 >/dev/null; echo "rc=${PIPESTATUS[0]}") )
[ "$err" = "rc=0" ] && ok "SIGPIPE ignored: an endless sample into a closed pipe ends, quiet, exit 0" || bad "endless sample into a closed pipe" "$err"
err=$($MINGPT --version 2>&1 >&-); rc=$?
[ $rc -eq 1 ] && grep -q "error writing standard output: Bad file descriptor" <<<"$err" && ok "--version with stdout closed: exit 1, said" \
  || bad "--version with stdout closed (rc $rc)" "$err"

echo "-- messages"
touch $W/not_a_dir
err=$(MINGPT_CACHE_DIR=$W/not_a_dir/cache M trainer_config.snapshot_path=$W/c.bin hydra.run.dir=$W/c 2>&1 >/dev/null); rc=$?
[ $rc -eq 0 ] && [ "$(grep -c "^mingpt: note: cannot write the GEMM calibration cache '$W/not_a_dir/cache/gemm-[0-9a-f]*.txt': Not a directory; calibrating every run$" <<<"$err")" = 1 ] \
  && ok "an unwritable GEMM cache: said once on stderr, the run goes on" || bad "an unwritable GEMM cache (rc $rc)" "$err"
# safetensors headers built by Python (json + struct): N minimal tensors, or the model's tensors with one as F64
$PY - $W <<'EOF'
import json, struct, sys
w = sys.argv[1]
def write(path, header, data=b""):
    h = json.dumps(header, separators=(",", ":")).encode()
    open(path, "wb").write(struct.pack("<Q", len(h)) + h + data)
# 1.4 million tensors: a 99 MB header (under the format's 100 MB) whose parse would need 1.3 GB
n = 1400000
with open(w + "/many.safetensors", "wb") as f:
    h = ("{" + ",".join('"t%d":{"dtype":"F32","shape":[1],"data_offsets":[%d,%d]}' % (i, 4 * i, 4 * i + 4)
                        for i in range(n)) + "}").encode()
    f.write(struct.pack("<Q", len(h)) + h + bytes(4 * n))
# 2^20 + 1 entries that are no tensors: refused by the count before anything else
with open(w + "/count.safetensors", "wb") as f:
    h = ("{" + ",".join('"%d":0' % i for i in range((1 << 20) + 1)) + "}").encode()
    f.write(struct.pack("<Q", len(h)) + h)
# the exported model with lm_head.weight as F64 and one weight 1e300
raw = open(w + "/w.safetensors", "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
head = json.loads(raw[8:8 + n]); body = raw[8 + n:]
out, data, off = {}, b"", 0
for k, v in head.items():
    if k == "__metadata__": out[k] = v; continue
    b = body[v["data_offsets"][0]:v["data_offsets"][1]]
    if k == "lm_head.weight":
        vals = list(struct.unpack("<%df" % (len(b) // 4), b)); vals[3] = 1e300
        b = struct.pack("<%dd" % len(vals), *vals); v = dict(v, dtype="F64")
    out[k] = dict(v, data_offsets=[off, off + len(b)]); data += b; off += len(b)
write(w + "/f64.safetensors", out, data)
EOF
bad_input init-header-memory 1 'needs more than 256 MiB of memory to parse, the limit' -- M trainer_config.snapshot_path=$W/i1.bin trainer_config.init_from=$W/many.safetensors
if [ "${B:-build}" = build/san ]; then
  skip rss-under-asan "AddressSanitizer's redzones and quarantine are not the program's memory: the peak RSS bound"
else
rss=$($PY -c 'import resource, subprocess, sys
subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)' $MINGPT "${TINY[@]}" hydra.run.dir=$W/run \
  trainer_config.snapshot_path=$W/i1.bin trainer_config.init_from=$W/many.safetensors)
[ -n "$rss" ] && [ "$rss" -lt 614400 ] && ok "... in bounded memory: peak RSS $((rss / 1024)) MB (the file, 256 MiB, the rest; before: about 2 GB)" \
  || bad "the 99 MB header in bounded memory (peak RSS '$rss' KB)"
fi
bad_input init-too-many-tensors 1 '1048577 tensors, more than the limit of 1048576' -- M trainer_config.snapshot_path=$W/i2.bin trainer_config.init_from=$W/count.safetensors
bad_input init-f64-range 1 'holds 1e+300 (element 3), outside float32'\''s range' -- M trainer_config.snapshot_path=$W/i3.bin trainer_config.init_from=$W/f64.safetensors
finish
