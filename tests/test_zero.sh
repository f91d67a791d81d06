#!/usr/bin/env bash
# tests/test_zero.sh — sharded data parallelism (trainer_config.zero_stage) with OpenMPI's mpirun
# on this machine (-np 2 and -np 3 with --oversubscribe), a tiny model with dropout on:
#
#   * bad values (3, -1, true) refused when the config is bound, naming 0|1|2
#   * one process: zero_stage 1 says it behaves as 0, and gives stage 0's parameters bit for bit
#   * 2 and 3 ranks: zero_stage 1 and 2 (and, at 2 ranks, 1 with MINGPT_MPI_PROGRESS=test, and 2
#     with gradient accumulation, activation checkpointing and other bucket plans) give stage 0's
#     loss at every one of 50 iterations within 1e-6 relative (said when bitwise), and its
#     parameters; the start-up memory line gives per-rank AdamW state of one shard (1/N of stage 0
#     plus padding)
#   * stage 2's gradient memory per rank (start-up lines) is its shard (P/N, padded) plus a ring of at
#     most the largest bucket (MINGPT_ZERO2_RING=min, the default), at a small bucket cap and at the
#     default one on a model whose blocks straddle buckets; MINGPT_ZERO2_RING=overlap: a ring of at
#     least the largest bucket, the same losses (also with MINGPT_MPI_PROGRESS=test); a bad
#     MINGPT_ZERO2_RING is refused
#   * snapshots are independent of the sharding: 1 rank stage 0 -> 2 ranks stage 1 and 2, 2 ranks
#     stage 1 and 2 -> 1 rank stage 0, and 2 ranks stage 1 -> 3 ranks stage 1, mid-epoch, each equal
#     to an uninterrupted run (the AdamW moments gathered on save, sliced on resume);
#     `mingpt info` shows the stage and world size that wrote a file
#   * fp16 loss scaling: a loss scale of 2^24 overflows; stages 1 and 2 skip the steps stage 0 skips
#     and ends with the same parameters
#   * a rank that stops (SIGSTOP) mid-training under stage 1: the others' watchdog ends the job
#     within collective_timeout_s, naming the collective; a rank killed or frozen inside the
#     parameter all-gather (tests/ddp/mpi_fault.c), on the communication thread and with
#     MINGPT_MPI_PROGRESS=test: the job ends within collective_timeout_s, exit_status 1
#   * the emulated CUDA backend and NCCL (when built), 2 ranks: stages 1 and 2 give stage 0's
#     losses, parameters and snapshot moments bit for bit, with the same buckets and bytes per
#     iteration through NCCL (reduce-scatters, not all-reduces of gradients and parameters);
#     the all-gather started per bucket (allgather_start: the summary line says overlapped, one
#     per bucket) gives the blocking one's (MINGPT_ZERO_GATHER=blocking) parameters bit for bit,
#     and stage 0's with the emulator's deferred stream work (EMU_DEFER=1) and random thread
#     schedule (EMU_SCHEDULE=rand); at 3 ranks stage 2 gives stage 0's losses (1e-6) and parameters; stage 2 with gradient
#     accumulation gives stage 0's losses
#   * the parameter all-gather per bucket, overlapped with the next forward (the default): stages
#     1 and 2 give stage 0's training and test losses and parameters bit for bit, as the blocking
#     all-gather (MINGPT_ZERO_GATHER=blocking) does, with activation checkpointing, evaluations and
#     snapshots mid-run, MINGPT_MPI_PROGRESS=test, and (stage 1; stage 2: the blocking one's) with
#     gradient accumulation; the blocking one's bit for bit in a resumed run; the summary line says one all-gather per bucket started
#     before the next forward; MINGPT_ZERO_GATHER other than overlap|blocking is refused
# tests/test_zero.c checks the shard arithmetic and sharded AdamW without MPI.
cd "$(dirname "$0")/.."
. tests/lib.sh
ROOT=$PWD
B=${B:-build}
CHECK=$ROOT/$B/tests/ddp_check
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export ASAN_OPTIONS=$MPI_ASAN_OPTIONS
export MINGPT_MPI_LIB=$ROOT/$B/libmingpt_mpi.so
export OMPI_MCA_btl_vader_single_copy_mechanism=none OMP_NUM_THREADS=1
MPIRUN="mpirun --oversubscribe --bind-to none"
if ! command -v mpirun >/dev/null; then bad "mpirun is installed (make deps installs openmpi-bin)"; finish; exit; fi

common=(data_config.path=$ROOT/data/input.txt data_config.truncate=0.02 data_config.block_size=16 gpt_config.n_layer=2
        gpt_config.n_head=2 gpt_config.n_embd=32 trainer_config.device=cpu trainer_config.use_amp=false
        trainer_config.log_every=1 trainer_config.eval_iters=1 trainer_config.collective_timeout_s=60
        trainer_config.bucket_cap_mb=0.01 optimizer_config.learning_rate=1e-3)

# run NAME CMD...: CMD must succeed; output in $WORK/NAME.log
run() {
  local name=$1; shift
  if "$@" >"$WORK/$name.log" 2>&1; then return 0; fi
  bad "$name: exit $?" "$(tail -20 "$WORK/$name.log")"
  return 1
}
# train NAME NP ARGS...: mingpt on NP ranks (1: no mpirun), run dir $WORK/NAME, snapshot $WORK/NAME.bin
train() {
  local name=$1 np=$2; shift 2
  local launch=(); [ "$np" -gt 1 ] && launch=($MPIRUN -np "$np")
  run "$name" "${launch[@]}" "$MINGPT" "${common[@]}" hydra.run.dir=$WORK/$name trainer_config.snapshot_path=$WORK/$name.bin "$@"
}
# same_losses WHAT A B: every logged training loss of run A and run B within 1e-6 relative
same_losses() {
  local out
  if out=$(python3 - "$WORK/$2/metrics.jsonl" "$WORK/$3/metrics.jsonl" <<'PY'
import json, sys
def losses(p): return [(d["iter"], d["loss"]) for d in map(json.loads, open(p)) if "grad_norm" in d]
a, b = losses(sys.argv[1]), losses(sys.argv[2])
if len(a) != len(b) or len(a) < 2 or [i for i, _ in a] != [i for i, _ in b]:
    sys.exit("different iterations logged: %d vs %d" % (len(a), len(b)))
worst = max(abs(x - y) / abs(x) for (_, x), (_, y) in zip(a, b))
if worst > 1e-6: sys.exit("worst relative difference %.3g > 1e-6" % worst)
print("%d iterations, %s" % (len(a), "bitwise equal" if worst == 0 else "worst relative difference %.3g" % worst))
PY
  ); then ok "$1: losses ($out)"; else bad "$1: losses" "$out"; fi
}
# zero2_memory WHAT NAME NP MODE: run NAME's start-up lines at stage 2 on NP ranks: gradient bytes per
# rank = reduced shard + ring, the shard P/N padded to 16 floats, and the ring at most the largest
# bucket (MODE min, and below the whole gradient) or at least it (MODE overlap)
zero2_memory() {
  local g r
  g=$(sed -n 's/.*Memory per rank (zero_stage 2, '$3' ranks): parameters [0-9]* bytes, gradients \([0-9]*\) bytes.*/\1/p' "$WORK/$2.log")
  r=$(sed -n 's/.*ZeRO stage 2: no rank holds the whole gradient: \([0-9]*\) bytes of reduced shard and a \([0-9]*\)-byte ring .*MINGPT_ZERO2_RING='$4': .*the largest bucket: \([0-9]*\); the whole gradient: \([0-9]*\)).*/\1 \2 \3 \4/p' "$WORK/$2.log")
  if [ -n "$g" ] && [ -n "$r" ] && awk -v g="$g" -v r="$r" -v np="$3" -v mode="$4" 'BEGIN { split(r, a, " ")
        S = a[1]; R = a[2]; L = a[3]; W = a[4]
        if (g != S + R || S % 64 || S * np < W || S * np >= W + 64 * np) exit 1
        exit !(mode == "min" ? R <= L && g <= S + L && R < W : R >= L && R <= W) }'; then
    ok "$1: gradient bytes per rank $g = reduced shard + ring ($4: shard, ring, largest bucket, whole gradient: $r)"
  else bad "$1: the memory lines" "$(grep -E 'Memory|ZeRO|Data parallel' "$WORK/$2.log")"; fi
}
# same_snap WHAT A B [TOL]: ddp_check on two snapshots' parameters (default 1e-5 criterion)
same_snap() {
  local out
  if out=$("$CHECK" snapshots "$WORK/$2.bin" "$WORK/$3.bin" --tol "${4:-1e-5}" 2>&1); then ok "$1 ($(echo "$out" | tail -1))"
  else bad "$1" "$out"; fi
}

echo "-- bad values, refused when the config is bound"
bad_input cfg-zero-stage-3 2 'trainer_config.zero_stage must be one of 0|1|2, got 3' -- $MINGPT "${common[@]}" trainer_config.zero_stage=3
bad_input cfg-zero-stage-negative 2 'trainer_config.zero_stage must be one of 0|1|2, got -1' -- $MINGPT "${common[@]}" trainer_config.zero_stage=-1
bad_input cfg-zero-stage-bool 2 '(trainer_config.zero_stage must be one of 0|1|2)' -- $MINGPT "${common[@]}" trainer_config.zero_stage=true

echo "-- one process: stage 1 behaves as 0"
if train one0 1 trainer_config.batch_size=8 trainer_config.max_iters=8 &&
   train one1 1 trainer_config.batch_size=8 trainer_config.max_iters=8 trainer_config.zero_stage=1; then
  grep -q "note: trainer_config.zero_stage=1 on one rank behaves as 0" "$WORK/one1.log" && ok "one rank: the note says stage 1 behaves as 0" ||
    bad "one rank: the note" "$(head -20 "$WORK/one1.log")"
  same_snap "one rank: stage 1 = stage 0, bitwise" one0 one1 0
fi

echo "-- stage 1 and 2 against stage 0, 50 iterations, dropout 0.1"
for np in 2 3; do
  train s0n$np $np trainer_config.batch_size=4 trainer_config.max_iters=50 || continue
  for z in 1 2; do
    train s${z}n$np $np trainer_config.batch_size=4 trainer_config.max_iters=50 trainer_config.zero_stage=$z || continue
    same_losses "$np ranks, zero_stage $z vs 0" s0n$np s${z}n$np
    same_snap "$np ranks, zero_stage $z vs 0: parameters after 50 steps" s0n$np s${z}n$np
  done
  if [ $np -eq 2 ] && MINGPT_MPI_PROGRESS=test MPIRUN="$MPIRUN -x MINGPT_MPI_PROGRESS" \
       train s1tn2 2 trainer_config.batch_size=4 trainer_config.max_iters=50 trainer_config.zero_stage=1; then
    same_losses "2 ranks, zero_stage 1 with non-blocking reduce-scatters (MINGPT_MPI_PROGRESS=test) vs 0" s0n2 s1tn2
  fi
  # the snapshot's ADAM/ADAV records: gathered shard by shard at stage 1, written whole at stage 0
  if [ $np -eq 2 ] && out=$(python3 - "$WORK/s0n2.bin" "$WORK/s1n2.bin" <<'PY'
import struct, sys
def records(p):
    b = open(p, "rb").read(); o = 12; r = {}
    while o + 12 <= len(b) - 4:
        tag, n = struct.unpack_from("<4sQ", b, o); r[tag] = b[o + 12:o + 12 + n]; o += 12 + n
    return r
a, b = records(sys.argv[1]), records(sys.argv[2])
for t in (b"ADAM", b"ADAV"):
    if t not in a or a[t] != b[t]: sys.exit("%s differs (%d / %d bytes)" % (t.decode(), len(a.get(t, b"")), len(b.get(t, b""))))
print("%d bytes each" % len(a[b"ADAM"]))
PY
  ); then ok "2 ranks: the snapshot's AdamW moments at stage 1 (gathered by shard) = stage 0's, bitwise ($out)"
  elif [ $np -eq 2 ]; then bad "2 ranks: the snapshot's AdamW moments, stage 1 vs 0" "$out"; fi
  # stage 2: no whole gradient on any rank; gradient accumulation and other bucket plans
  if [ $np -eq 2 ]; then
    zero2_memory "2 ranks, zero_stage 2, bucket_cap_mb 0.01" s2n2 2 min
    # the default bucket cap (25 MiB; the first bucket 1 MiB) on a model of 4 blocks of 0.8 MB: the
    # first bucket ends inside a block; and the ring that leaves room to overlap
    big=(trainer_config.bucket_cap_mb=25 gpt_config.n_layer=4 gpt_config.n_embd=128 gpt_config.n_head=4
         trainer_config.batch_size=2 trainer_config.max_iters=4)
    if train d0n2 2 "${big[@]}" && train d2n2 2 "${big[@]}" trainer_config.zero_stage=2; then
      zero2_memory "2 ranks, zero_stage 2, the default bucket cap" d2n2 2 min
      grep -q "Data parallel: 2 ranks (mpi), 2 gradient buckets" "$WORK/d2n2.log" && ok "the default bucket cap: 2 buckets" ||
        bad "the default bucket cap: 2 buckets" "$(grep 'Data parallel' "$WORK/d2n2.log")"
      same_losses "2 ranks, the default bucket cap, zero_stage 2 vs 0" d0n2 d2n2
      if MINGPT_ZERO2_RING=overlap MPIRUN="$MPIRUN -x MINGPT_ZERO2_RING" train o2n2 2 "${big[@]}" trainer_config.zero_stage=2; then
        zero2_memory "2 ranks, zero_stage 2, MINGPT_ZERO2_RING=overlap" o2n2 2 overlap
        same_losses "2 ranks, zero_stage 2 with MINGPT_ZERO2_RING=overlap vs 0" d0n2 o2n2
      fi
      # non-blocking reduce-scatters: the ring's space freed by waiting for the oldest requests
      for ring in min overlap; do
        MINGPT_ZERO2_RING=$ring MINGPT_MPI_PROGRESS=test MPIRUN="$MPIRUN -x MINGPT_ZERO2_RING -x MINGPT_MPI_PROGRESS" \
          train t2n2$ring 2 "${big[@]}" trainer_config.bucket_cap_mb=0.2 trainer_config.zero_stage=2 &&
          same_losses "2 ranks, zero_stage 2, MINGPT_ZERO2_RING=$ring, bucket_cap_mb 0.2, MINGPT_MPI_PROGRESS=test vs 0" d0n2 t2n2$ring
      done
    fi
    bad_input zero2-ring-mode 2 'MINGPT_ZERO2_RING must be min or overlap, got '\''big'\''' -- env MINGPT_ZERO2_RING=big $MINGPT "${common[@]}" trainer_config.zero_stage=2 trainer_config.max_iters=1 hydra.run.dir=$WORK/rb trainer_config.snapshot_path=$WORK/rb.bin
    train a0n2 2 trainer_config.batch_size=2 trainer_config.grad_accum_steps=2 trainer_config.max_iters=20 &&
    train a2n2 2 trainer_config.batch_size=2 trainer_config.grad_accum_steps=2 trainer_config.max_iters=20 trainer_config.zero_stage=2 &&
      same_losses "2 ranks, grad_accum_steps 2, zero_stage 2 vs 0" a0n2 a2n2
    for cap in 0.05 100; do
      train c0n2$cap 2 trainer_config.batch_size=4 trainer_config.max_iters=10 trainer_config.bucket_cap_mb=$cap &&
      train c2n2$cap 2 trainer_config.batch_size=4 trainer_config.max_iters=10 trainer_config.bucket_cap_mb=$cap \
        trainer_config.zero_stage=2 trainer_config.activation_checkpointing=true &&
        same_losses "2 ranks, bucket_cap_mb $cap, zero_stage 2 with activation checkpointing vs 0" c0n2$cap c2n2$cap
    done
  fi
  # the memory line: AdamW state of one shard per rank (shards padded to 16 floats)
  m=$(sed -n 's/.*Memory per rank (zero_stage 1, '$np' ranks): parameters \([0-9]*\) bytes, gradients \([0-9]*\) bytes, optimizer state \([0-9]*\) bytes (zero_stage 0: \([0-9]*\), \([0-9]*\), \([0-9]*\)).*/\3 \6 \1/p' "$WORK/s1n$np.log" | head -1)
  if [ -n "$m" ] && awk -v np=$np -v m="$m" 'BEGIN { split(m, a, " "); s = a[1] / 8; P = a[3] / 4
        exit !(a[2] == 8 * P && s % 16 == 0 && s * np >= P && s * np < P + 16 * np) }'; then
    ok "$np ranks: optimizer state per rank at stage 1 is one padded shard ($m: sharded, unsharded, parameter bytes)"
  else bad "$np ranks: the memory line" "$(grep -E 'Memory|Cost' "$WORK/s1n$np.log" | head -4)"; fi
  # ... and the activations, with the whole: parameters + gradients + optimizer state + activations (+ a cast copy)
  m=$(sed -n 's/.*Memory per rank (zero_stage 1, '$np' ranks): parameters \([0-9]*\) bytes, gradients \([0-9]*\) bytes, optimizer state \([0-9]*\) bytes (zero_stage 0: [0-9, ]*), activations \([0-9]*\) bytes, \([0-9]*\) bytes in all$/\1 \2 \3 \4 \5/p' "$WORK/s1n$np.log" | head -1)
  if [ -n "$m" ] && awk -v m="$m" 'BEGIN { split(m, a, " "); s = a[1] + a[2] + a[3] + a[4]; exit !(a[4] > 0 && a[5] >= s && a[5] <= s + a[1] / 2) }'; then
    ok "$np ranks: the memory line gives the activations and the sum ($m)"
  else bad "$np ranks: the memory line's activations and sum" "$(grep -E 'Memory per rank' "$WORK/s1n$np.log" | head -2)"; fi
done

echo "-- snapshots across stages and world sizes (global batch 12, mid-epoch)"
if train full 1 trainer_config.batch_size=12 trainer_config.max_iters=12; then
  train a 1 trainer_config.batch_size=12 trainer_config.max_iters=6 && cp "$WORK/a.bin" "$WORK/d.bin" &&
  train a 2 trainer_config.batch_size=6 trainer_config.max_iters=12 trainer_config.zero_stage=1 &&
    same_snap "1 rank stage 0 -> 2 ranks stage 1 = uninterrupted" full a
  train d 2 trainer_config.batch_size=6 trainer_config.max_iters=12 trainer_config.zero_stage=2 &&
    same_snap "1 rank stage 0 -> 2 ranks stage 2 = uninterrupted" full d
  train e 2 trainer_config.batch_size=6 trainer_config.max_iters=6 trainer_config.zero_stage=2 &&
  train e 1 trainer_config.batch_size=12 trainer_config.max_iters=12 &&
    same_snap "2 ranks stage 2 -> 1 rank stage 0 = uninterrupted" full e
  if train b 2 trainer_config.batch_size=6 trainer_config.max_iters=6 trainer_config.zero_stage=1; then
    cp "$WORK/b.bin" "$WORK/c.bin"
    out=$($MINGPT info "$WORK/b.bin"); js=$($MINGPT info --json "$WORK/b.bin")
    grep -q "^world size:   2" <<<"$out" && grep -q "^zero stage:   1" <<<"$out" && grep -q '"zero_stage": 1' <<<"$js" &&
      ok "mingpt info: zero stage 1, world size 2" || bad "mingpt info: zero stage and world size" "$out"
    train b 1 trainer_config.batch_size=12 trainer_config.max_iters=12 &&
      same_snap "2 ranks stage 1 -> 1 rank stage 0 = uninterrupted" full b
    train c 3 trainer_config.batch_size=4 trainer_config.max_iters=12 trainer_config.zero_stage=1 &&
      same_snap "2 ranks stage 1 -> 3 ranks stage 1 = uninterrupted" full c
  fi
fi

echo "-- fp16 loss scaling: overflow skips under stage 1"
fp16=(trainer_config.use_amp=true trainer_config.amp_dtype=float16 trainer_config.batch_size=4)
if train f 2 "${fp16[@]}" trainer_config.max_iters=6; then
  # a loss scale of 2^24 (the largest a snapshot holds): the next steps' fp16 gradients overflow
  "$ROOT/$B/tests/tools/snapedit" "$WORK/f.bin" "$WORK/f0.bin" setf SCAL 0 16777216 &&
    cp "$WORK/f0.bin" "$WORK/f1.bin" && cp "$WORK/f0.bin" "$WORK/f2.bin"
  if train f0 2 "${fp16[@]}" trainer_config.max_iters=12; then
    for z in 1 2; do
      train f$z 2 "${fp16[@]}" trainer_config.max_iters=12 trainer_config.zero_stage=$z || continue
      n=$(grep -c "gradient overflow, step skipped" "$WORK/f$z.log")
      if [ "$n" -ge 1 ] && [ "$(grep overflow "$WORK/f0.log")" = "$(grep overflow "$WORK/f$z.log")" ]; then
        ok "stage $z skips the $n overflowing steps stage 0 skips, with the same loss scales"
      else bad "fp16 overflow skips (stage $z: $n)" "$(grep overflow "$WORK/f0.log" "$WORK/f$z.log")"; fi
      same_snap "fp16 with skipped steps: stage $z = stage 0 parameters" f0 f$z
    done
  fi
fi

echo "-- the all-gather overlapped with the next forward: bit for bit stage 0's and the blocking one's"
bad_input zero-gather-env 2 'MINGPT_ZERO_GATHER must be overlap or blocking (got' -- env MINGPT_ZERO_GATHER=sometimes $MINGPT "${common[@]}" trainer_config.zero_stage=1 trainer_config.max_iters=1 hydra.run.dir=$WORK/genv trainer_config.snapshot_path=$WORK/genv.bin
# same_bitwise WHAT A B: every training and test loss of runs A and B bitwise equal, and their parameters
same_bitwise() {
  local out snap=""
  if out=$(python3 - "$WORK/$2/metrics.jsonl" "$WORK/$3/metrics.jsonl" <<'PY'
import json, sys
def losses(p): return [(d["iter"], "loss" in d, d.get("loss", d.get("test_loss"))) for d in map(json.loads, open(p))
                       if "grad_norm" in d or "test_loss" in d]
a, b = losses(sys.argv[1]), losses(sys.argv[2])
if len(a) < 2 or a != b: sys.exit("losses differ: %s vs %s" % (a[:4], b[:4]))
print("%d training and %d test losses" % (sum(x[1] for x in a), sum(not x[1] for x in a)))
PY
  ) && snap=$("$CHECK" snapshots "$WORK/$2.bin" "$WORK/$3.bin" --tol 0 2>&1); then
    ok "$1: bitwise equal ($out; $(echo "$snap" | tail -1 | sed 's/;.*//'))"
  else bad "$1" "$out $snap"; fi
}
# Every GEMM on OpenBLAS here (MINGPT_GEMM): the runs are compared bit for bit, and a rank that
# calibrates a GEMM shape (the first time it meets it, or when other processes rewrite the
# shared calibration cache) may choose another library from one run to the next.
export MINGPT_GEMM=openblas
MPIRUN_SAVED=$MPIRUN MPIRUN="$MPIRUN -x MINGPT_GEMM"
# activation checkpointing, an evaluation every 3 and a snapshot every 5 iterations
ov=(trainer_config.batch_size=4 trainer_config.activation_checkpointing=true trainer_config.eval_every=3
    trainer_config.save_every_iters=5 trainer_config.max_iters=12)
if train g0 2 "${ov[@]}"; then
  for z in 1 2; do
    train g$z 2 "${ov[@]}" trainer_config.zero_stage=$z && same_bitwise "2 ranks, zero_stage $z, overlapped all-gather vs stage 0" g0 g$z
    MINGPT_ZERO_GATHER=blocking MPIRUN="$MPIRUN -x MINGPT_ZERO_GATHER" train g${z}b 2 "${ov[@]}" trainer_config.zero_stage=$z &&
      same_bitwise "2 ranks, zero_stage $z, blocking all-gather (MINGPT_ZERO_GATHER=blocking) vs stage 0" g0 g${z}b
    MINGPT_MPI_PROGRESS=test MPIRUN="$MPIRUN -x MINGPT_MPI_PROGRESS" train g${z}t 2 "${ov[@]}" trainer_config.zero_stage=$z &&
      same_bitwise "2 ranks, zero_stage $z, overlapped all-gather with MINGPT_MPI_PROGRESS=test vs stage 0" g0 g${z}t
  done
  # the summary lines: one all-gather per gradient bucket, started before the next forward; one blocking
  nb=$(sed -n 's/.*Data parallel: 2 ranks (mpi), \([0-9]*\) gradient bucket.*/\1/p' "$WORK/g1.log" | head -1)
  for r in g1 g2 g1t g2t; do
    line=$(grep -m1 "^all-gather:" "$WORK/$r.log")
    if [ -n "$nb" ] && grep -Eq "^all-gather: overlapped, $nb\.0 per iteration started before the next forward, [0-9.]+ ms busy and [0-9.]+ ms exposed per iteration \([0-9]+% hidden\)" <<<"$line"; then
      ok "$r: the summary line says $nb all-gathers per iteration (one per bucket) started before the next forward ($line)"
    else bad "$r: the all-gather summary line ($nb buckets)" "$line"; fi
  done
  grep -Eq "^all-gather: blocking, 1\.0 per iteration, [0-9.]+ ms busy and [0-9.]+ ms exposed" "$WORK/g1b.log" &&
    ok "g1b: the summary line says one blocking all-gather per iteration" || bad "g1b: the summary line" "$(grep all- "$WORK/g1b.log")"
  grep -q "^all-gather:" "$WORK/g0.log" && bad "stage 0 has no all-gather line" "$(grep all-gather "$WORK/g0.log")" || ok "stage 0: no all-gather line"
  # a resumed run: 7 iterations, then on to 12, overlapped and blocking (the last step's
  # all-gathers finish before the snapshot; the resumed run starts from the gathered parameters)
  for z in 1 2; do
    train r$z 2 "${ov[@]}" trainer_config.zero_stage=$z trainer_config.max_iters=7 &&
    train r$z 2 "${ov[@]}" trainer_config.zero_stage=$z &&
    MINGPT_ZERO_GATHER=blocking MPIRUN="$MPIRUN -x MINGPT_ZERO_GATHER" train r${z}b 2 "${ov[@]}" trainer_config.zero_stage=$z trainer_config.max_iters=7 &&
    MINGPT_ZERO_GATHER=blocking MPIRUN="$MPIRUN -x MINGPT_ZERO_GATHER" train r${z}b 2 "${ov[@]}" trainer_config.zero_stage=$z &&
      same_bitwise "2 ranks, zero_stage $z, resumed at 7: overlapped vs blocking all-gather" r${z}b r$z &&
      same_snap "2 ranks, zero_stage $z, resumed at 7 = uninterrupted" g$z r$z
  done
fi
# gradient accumulation (2 micro-steps) with the rest: stage 1 overlapped and blocking = stage 0
# bit for bit; stage 2 overlapped = stage 2 blocking bit for bit (stage 2 adds each micro-step's
# reduced shard, stage 0 reduces the accumulated gradient: within 1e-6 of it)
acc=("${ov[@]}" trainer_config.batch_size=2 trainer_config.grad_accum_steps=2)
if train a0 2 "${acc[@]}"; then
  for z in 1 2; do
    train a$z 2 "${acc[@]}" trainer_config.zero_stage=$z || continue
    MINGPT_ZERO_GATHER=blocking MPIRUN="$MPIRUN -x MINGPT_ZERO_GATHER" train a${z}b 2 "${acc[@]}" trainer_config.zero_stage=$z || continue
    if [ $z = 1 ]; then
      same_bitwise "2 ranks, zero_stage 1, grad_accum_steps 2, overlapped all-gather vs stage 0" a0 a1
      same_bitwise "2 ranks, zero_stage 1, grad_accum_steps 2, blocking all-gather vs stage 0" a0 a1b
    else
      same_bitwise "2 ranks, zero_stage 2, grad_accum_steps 2, overlapped vs blocking all-gather" a2b a2
      same_losses "2 ranks, zero_stage 2, grad_accum_steps 2 (blocking all-gather) vs 0" a0 a2b
    fi
  done
fi
MPIRUN=$MPIRUN_SAVED
unset MINGPT_GEMM

echo "-- a rank that stops under zero_stage 1 ends the job within collective_timeout_s (3 s)"
$MPIRUN -np 2 "$MINGPT" "${common[@]}" trainer_config.batch_size=4 trainer_config.max_iters=100000 trainer_config.zero_stage=1 \
  trainer_config.collective_timeout_s=3 hydra.run.dir=$WORK/hang trainer_config.snapshot_path=$WORK/hang.bin >"$WORK/hang.log" 2>&1 &
mpid=$!
for _ in $(seq 150); do grep -q "iter 5/" "$WORK/hang.log" 2>/dev/null && break; sleep 0.2; done
r1=""
for p in $(pgrep -f "hang.bin"); do
  tr '\0' '\n' </proc/$p/environ 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=1" && [ "$(cat /proc/$p/comm)" = mingpt ] && { r1=$p; break; }
done
t0=$(date +%s)
[ -n "$r1" ] && kill -STOP "$r1"
( sleep 60; kill -KILL $mpid 2>/dev/null ) & guard=$!
wait $mpid; rc=$?; dt=$(( $(date +%s) - t0 ))
kill $guard 2>/dev/null; [ -n "$r1" ] && kill -KILL "$r1" 2>/dev/null
what=$(sed -n 's/.*mingpt: error: \(.*\) has not completed after.*/\1/p' "$WORK/hang.log" | head -1)
if [ -n "$r1" ] && [ "$rc" -ne 0 ] && [ "$dt" -lt 30 ] && [ -n "$what" ]; then
  ok "rank 1 stopped: the job exits $rc after ${dt} s, rank 0's watchdog naming $what"
else bad "rank 1 stopped under zero_stage 1 (pid '$r1', exit $rc after ${dt} s)" "$(tail -8 "$WORK/hang.log")"; fi

echo "-- a rank killed or frozen inside the parameter all-gather ends the job within collective_timeout_s (3 s)"
# tests/ddp/mpi_fault.c, preloaded into the ranks, raises the signal on rank 1 at the start of its
# 30th all-gather (a few steps in: one per bucket and step); ASan accepts a library preloaded
# before its runtime (make test SAN=1)
FAULT_SO=$ROOT/$B/tests/mpi_fault.so
if [ -f "$FAULT_SO" ]; then
  for sig in STOP KILL; do
    for mode in thread test; do
      name=gather_$sig$mode
      t0=$(date +%s)
      timeout -k 5 60 $MPIRUN -np 2 -x LD_PRELOAD="$FAULT_SO" -x MPI_FAULT="1:30:$sig" -x MINGPT_MPI_PROGRESS=$mode \
        -x ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0" "$MINGPT" "${common[@]}" \
        trainer_config.batch_size=4 trainer_config.max_iters=100000 trainer_config.zero_stage=1 \
        trainer_config.collective_timeout_s=3 hydra.run.dir=$WORK/$name trainer_config.snapshot_path=$WORK/$name.bin \
        >"$WORK/$name.log" 2>&1
      rc=$? dt=$(( $(date +%s) - t0 ))
      pkill -KILL -f "$WORK/$name.bin" 2>/dev/null
      st=$(sed -n 's/.*"exit_status": \([a-z0-9]*\).*/\1/p' "$WORK/$name/summary.json" 2>/dev/null)
      said=$(grep -c "mpi_fault: rank 1: $sig at all-gather 30" "$WORK/$name.log")
      # frozen: rank 0's watchdog names the all-gather; killed: mpirun ends the job, rank 0 aborts at its SIGTERM
      named=1; [ $sig = STOP ] && ! grep -q "the parameter all-gather has not completed after" "$WORK/$name.log" && named=0
      if [ "$said" -ge 1 ] && [ $rc -ne 0 ] && [ $rc -ne 124 ] && [ $dt -lt 30 ] && [ "$st" = 1 ] && [ $named = 1 ]; then
        ok "rank 1 $sig inside its all-gather ($mode): the job exits $rc after ${dt} s, summary.json exit_status 1$([ $sig = STOP ] && echo ", rank 0 names the parameter all-gather")"
      else bad "rank 1 $sig inside its all-gather ($mode): exit $rc after ${dt} s, exit_status '$st'" "$(tail -12 "$WORK/$name.log")"; fi
    done
  done
else
  bad "$FAULT_SO is built (make test builds it: mk/dist.mk)"
fi

echo "-- the emulated CUDA backend and NCCL: stages 1 and 2 = stage 0"
EMU_SO=$ROOT/$B/emu/libmingpt_cuda.so
if [ -f "$EMU_SO" ]; then
  export MINGPT_CUDA_LIB=$EMU_SO
  cuda=(trainer_config.device=cuda trainer_config.batch_size=4 trainer_config.max_iters=12)
  # the "all-reduce: B buckets per iteration, ..., M MB per iteration" line of a run: "B M"
  comm_line() { sed -n 's/.*all-reduce: \([0-9.]*\) buckets per iteration, .*, \([0-9.]*\) MB per iteration.*/\1 \2/p' "$WORK/$1.log" | tail -1; }
  if train cu0 2 "${cuda[@]}"; then
    for z in 1 2; do
      train cu$z 2 "${cuda[@]}" trainer_config.zero_stage=$z || continue
      grep -q "ZeRO stage $z: 2 shards" "$WORK/cu$z.log" && grep -q "Data parallel: 2 ranks (nccl)" "$WORK/cu$z.log" ||
        bad "emulated NCCL, zero_stage $z: the start-up lines" "$(grep -E 'Data parallel|ZeRO' "$WORK/cu$z.log")"
      same_losses "emulated NCCL, 2 ranks, zero_stage $z vs 0" cu0 cu$z
      same_snap "emulated NCCL, 2 ranks, zero_stage $z vs 0: parameters, bitwise" cu0 cu$z 0
      # NCCL's all-gather started per bucket (allgather_start: the compute stream waits for it,
      # not the host), one per gradient bucket and iteration; the blocking one (one per
      # iteration) gives the same parameters bit for bit
      nb=$(sed -n 's/.*Data parallel: 2 ranks (nccl), \([0-9]*\) gradient bucket.*/\1/p' "$WORK/cu$z.log" | head -1)
      line=$(grep -m1 "^all-gather:" "$WORK/cu$z.log")
      if [ -n "$nb" ] && grep -Eq "^all-gather: overlapped, $nb\.0 per iteration started before the next forward, [0-9.]+ ms busy and [0-9.]+ ms exposed per iteration \([0-9]+% hidden\)" <<<"$line"; then
        ok "emulated NCCL, zero_stage $z: $nb all-gathers per iteration (one per bucket) started before the next forward ($line)"
      else bad "emulated NCCL, zero_stage $z: the all-gather summary line ($nb buckets)" "$line"; fi
      if MINGPT_ZERO_GATHER=blocking MPIRUN="$MPIRUN -x MINGPT_ZERO_GATHER" train cu${z}b 2 "${cuda[@]}" trainer_config.zero_stage=$z; then
        same_losses "emulated NCCL, 2 ranks, zero_stage $z, blocking all-gather vs overlapped" cu${z}b cu$z
        same_snap "emulated NCCL, 2 ranks, zero_stage $z, blocking all-gather vs overlapped: parameters, bitwise" cu${z}b cu$z 0
        grep -Eq "^all-gather: blocking, 1\.0 per iteration, " "$WORK/cu${z}b.log" &&
          ok "emulated NCCL, zero_stage $z, MINGPT_ZERO_GATHER=blocking: one blocking all-gather per iteration" ||
          bad "emulated NCCL, zero_stage $z, MINGPT_ZERO_GATHER=blocking: the all-gather summary line" "$(grep all- "$WORK/cu${z}b.log")"
      fi
      # the emulator's deferred stream work (EMU_DEFER=1: everything queued runs at the next
      # synchronisation, the collectives included) and random thread schedules
      for mode in EMU_DEFER=1 "EMU_SCHEDULE=rand EMU_SEED=3"; do
        tag=$([ "$mode" = EMU_DEFER=1 ] && echo d || echo s)
        xs=""; for v in $mode; do xs="$xs -x ${v%%=*}"; export "${v?}"; done
        MPIRUN="$MPIRUN$xs" train cu$z$tag 2 "${cuda[@]}" trainer_config.zero_stage=$z &&
          same_snap "emulated NCCL ($mode), 2 ranks, zero_stage $z, overlapped all-gather vs stage 0: parameters, bitwise" cu0 cu$z$tag 0
        for v in $mode; do unset "${v%%=*}"; done
      done
      if out=$(python3 - "$WORK/cu0.bin" "$WORK/cu$z.bin" <<'PY'
import struct, sys
def records(p):
    b = open(p, "rb").read(); o = 12; r = {}
    while o + 12 <= len(b) - 4:
        tag, n = struct.unpack_from("<4sQ", b, o); r[tag] = b[o + 12:o + 12 + n]; o += 12 + n
    return r
a, b = records(sys.argv[1]), records(sys.argv[2])
for t in (b"ADAM", b"ADAV"):
    if t not in a or a[t] != b[t]: sys.exit("%s differs" % t.decode())
PY
      ); then ok "emulated NCCL, zero_stage $z: the snapshot's AdamW moments (device shards gathered through the host) = stage 0's, bitwise"
      else bad "emulated NCCL, zero_stage $z: the snapshot's AdamW moments" "$out"; fi
      # the gradients cross the NCCL communicator once, as reduce-scatters of stage 0's buckets:
      # the same buckets and bytes per iteration as stage 0's all-reduces (the parameter
      # all-gather is no bucket: by all-reduces it counted the whole parameter buffer again)
      c0=$(comm_line cu0); cz=$(comm_line cu$z)
      if [ -n "$c0" ] && [ "$c0" = "$cz" ]; then
        ok "emulated NCCL, zero_stage $z: $cz (buckets, MB) per iteration through NCCL, as stage 0"
      else bad "emulated NCCL, zero_stage $z: buckets and MB per iteration '$cz', stage 0 '$c0'" "$(grep 'all-reduce:' "$WORK/cu0.log" "$WORK/cu$z.log")"; fi
    done
  fi
  # 3 ranks: groups of 3 ncclReduce / ncclBroadcast (MPI may sum in another order than its all-reduce)
  train cu0n3 3 "${cuda[@]}" && train cu2n3 3 "${cuda[@]}" trainer_config.zero_stage=2 &&
    same_losses "emulated NCCL, 3 ranks, zero_stage 2 vs 0" cu0n3 cu2n3 &&
    same_snap "emulated NCCL, 3 ranks, zero_stage 2 vs 0: parameters" cu0n3 cu2n3
  # stage 2 adds the reduced parts of every micro-step into the device shard (Backend.accumulate)
  acc=(trainer_config.device=cuda trainer_config.batch_size=2 trainer_config.grad_accum_steps=2 trainer_config.max_iters=8)
  train cua0 2 "${acc[@]}" && train cua2 2 "${acc[@]}" trainer_config.zero_stage=2 &&
    same_losses "emulated NCCL, 2 ranks, grad_accum_steps 2, zero_stage 2 vs 0" cua0 cua2 &&
    same_snap "emulated NCCL, grad_accum_steps 2, zero_stage 2 vs 0: parameters" cua0 cua2
  unset MINGPT_CUDA_LIB
else
  skip no-nvcc "zero_stage with the CUDA backend: no emulated CUDA backend ($EMU_SO; built when nvcc is on PATH)"
fi
finish
