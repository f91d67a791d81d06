#!/usr/bin/env bash
# What a run shows while it trains and leaves behind: the cost lines and the time
# estimate; on a terminal (a pseudo-terminal from util-linux's `script`) the live status line
# with its ETA, and never an escape code when stdout is a pipe, with TERM=dumb, or in the log;
# NO_COLOR drops the colour; metrics.jsonl: every line parses, the training lines carry the log
# lines' numbers, iterations strictly increase across a kill and a resume (lines past the
# snapshot dropped), tokens and time continue; under mpirun -np 2 one writer; the memory check
# refuses a model that cannot fit before allocating it; trainer_config.peak_tflops.
cd "$(dirname "$0")/.." && source tests/lib.sh
export OMP_NUM_THREADS=1
[ -f data/input.txt ] || { echo "data/input.txt missing: run make data"; exit 1; }
PY=/usr/bin/python3

run=(--config-name char_cpu data_config.path=$PWD/data/input.txt data_config.truncate=0.05 gpt_config.n_layer=1
     gpt_config.n_embd=32 gpt_config.n_head=2 data_config.block_size=16 trainer_config.batch_size=4
     trainer_config.eval_iters=2 trainer_config.eval_every=100 trainer_config.save_every_iters=0
     trainer_config.log_every=50 trainer_config.device=cpu)
ESC=$'\x1b'

echo "-- start-up: what the run costs; after the first iterations, the time it will take"
$MINGPT "${run[@]}" trainer_config.max_iters=60 hydra.run.dir=$WORK/pipe > $WORK/pipe.out 2> $WORK/pipe.err
rc=$?
grep -Eq '^Cost: 0\.[0-9]+M parameters, 64 tokens per iteration \(batch_size 4 x block_size 16 x grad_accum_steps 1 x world_size 1\), about [0-9.]+ MiB of host memory per rank \(parameters .*activations [0-9.]+ MiB\)$' $WORK/pipe.out \
  && ok "the cost line: parameters, tokens per iteration, the memory estimate" || bad "the cost line" "$(head -12 $WORK/pipe.out)"
# max_iters ends this run long before its first epoch does: the estimate is to iteration 60, and an
# epoch's time (which this run never reaches) is left out
grep -Eq '^Estimated time to the end of the run \([0-9]+ iterations left, to iteration 60\): [0-9:]+ \([0-9.]+ ms/iter, evaluations not counted\)$' $WORK/pipe.out \
  && ! grep '^Estimated' $WORK/pipe.out | grep -q 'epoch' \
  && ok "the estimated time to the end of the run (max_iters), no per-epoch time" || bad "the time estimate" "$(cat $WORK/pipe.out)"
[ $rc = 0 ] && ! grep -q "$ESC" $WORK/pipe.out $WORK/pipe.err $WORK/pipe/mingpt.log \
  && ok "stdout a file, stderr a file: no escape code anywhere" || bad "no escape code off a terminal (rc $rc)" "$(grep -c "$ESC" $WORK/pipe.out $WORK/pipe.err)"
out=$($MINGPT "${run[@]}" trainer_config.max_iters=20 hydra.run.dir=$WORK/pipe2 2>&1 | cat)
[ -n "$out" ] && ! grep -q "$ESC" <<<"$out" && ok "a pipe: no escape code" || bad "a pipe: no escape code" "$out"

echo "-- a terminal: the live status line, redrawn under the log lines"
slow="gpt_config.n_embd=64 data_config.block_size=32 trainer_config.batch_size=8"   # about 1 ms an iteration
pty() {   # pty NAME ENV... : the run under a pseudo-terminal, its output in $WORK/NAME.tty
  local name=$1; shift
  env "$@" script -qec "$MINGPT ${run[*]} $slow trainer_config.max_iters=1500 hydra.run.dir=$WORK/$name" /dev/null \
    > $WORK/$name.tty 2>&1 < /dev/null
}
pty tty TERM=xterm NO_COLOR=
rc=$?
# the status line: epoch, iteration / total, loss, tokens/s, elapsed, ETA
grep -aEq "${ESC}\[2K${ESC}\[2mepoch 1 \| iter [0-9]+/1500 \| loss [0-9.]+ \| [0-9]+ tok/s \| elapsed [0-9:]+ \| ETA [0-9]+:[0-9]{2}" $WORK/tty.tty \
  && ok "the status line with an ETA" || bad "the status line with an ETA (rc $rc)" "$(tr "$ESC\r" '~\n' < $WORK/tty.tty | tail -5)"
grep -aq "${ESC}\[2m" $WORK/tty.tty && ok "drawn in colour (dim)" || bad "drawn in colour"
# the log lines are whole lines: each starts after a clear of the status line
grep -aEq "${ESC}\[2Kepoch 1 \| iter 100/1500 \| loss [0-9.]+ \| lr " $WORK/tty.tty && ok "a log line printed over the cleared status line" \
  || bad "log lines above the status line" "$(tr "$ESC\r" '~\n' < $WORK/tty.tty | grep 'iter 100' | head -3)"
last=$(tr '\r' '\n' < $WORK/tty.tty | grep -a . | tail -1)   # cleared, then the last log line, nothing drawn again
[[ "$last" == "${ESC}[2Kdone: 1500 iterations"* ]] && ! grep -q "$ESC" <<<"${last:4}" && ok "the status line is gone before the last lines" \
  || bad "the status line is removed at the end" "$(tail -c 300 $WORK/tty.tty | tr "$ESC\r" '~\n')"
! grep -q "$ESC" $WORK/tty/mingpt.log && ok "no escape code in mingpt.log" || bad "no escape code in mingpt.log"
pty nocolor TERM=xterm NO_COLOR=1
grep -aq "ETA" $WORK/nocolor.tty && ! grep -aq "${ESC}\[2m" $WORK/nocolor.tty && ok "NO_COLOR: the line without colour" \
  || bad "NO_COLOR" "$(tr "$ESC\r" '~\n' < $WORK/nocolor.tty | tail -3)"
pty dumb TERM=dumb
grep -aq "^done: 1500 iterations" <(tr -d '\r' < $WORK/dumb.tty) && ! grep -aq "$ESC" $WORK/dumb.tty \
  && ok "TERM=dumb: no status line, no escape code" || bad "TERM=dumb" "$(tr "$ESC\r" '~\n' < $WORK/dumb.tty | tail -3)"

echo "-- metrics.jsonl: the log's numbers, across a kill and a resume"
mrun=("${run[@]}" trainer_config.max_iters=2000 trainer_config.log_every=10 trainer_config.eval_every=300
      trainer_config.peak_tflops=0.5 hydra.run.dir=$WORK/m)
$MINGPT "${mrun[@]}" > $WORK/m1.log 2>&1 &
pid=$!
for _ in $(seq 300); do grep -q 'iter 700/' $WORK/m1.log 2>/dev/null && break; sleep 0.05; done
kill -TERM $pid; wait $pid; rc1=$?
stop=$(sed -n 's/^Snapshot saved at epoch [0-9]*, iteration \([0-9]*\).*/\1/p' $WORK/m1.log | tail -1)
printf '{"iter": 99999, "epoch": 1, "loss": 1.0, "tokens": 1, "time_s": 1}\n{"iter": 100000, "ep' >> $WORK/m/metrics.jsonl
$MINGPT "${mrun[@]}" > $WORK/m2.log 2>&1; rc2=$?
[ "$rc1" = 75 ] && [ "$rc2" = 0 ] && [ -n "$stop" ] && grep -qx "metrics.jsonl: dropped 1 line logged after the snapshot's iteration $stop (they belong to iterations the resume repeats)" $WORK/m2.log \
  && grep -qx "metrics.jsonl: dropped its last line, cut off without its newline (a writer killed mid-line)" $WORK/m2.log \
  && [ "$(grep -c '^metrics.jsonl:' $WORK/m2.log)" = 2 ] \
  && ok "killed at iteration $stop (exit 75), resumed to the end; the lines past it dropped" \
  || bad "kill and resume (rc $rc1, $rc2, stop '$stop')" "$(tail -3 $WORK/m1.log; head -14 $WORK/m2.log)"
cat $WORK/m1.log $WORK/m2.log > $WORK/m.log
if $PY - $WORK/m/metrics.jsonl $WORK/m.log "$stop" <<'PYEOF'
import json, re, sys
path, log, stop = sys.argv[1], sys.argv[2], int(sys.argv[3])
lines = [json.loads(l) for l in open(path)]          # every line parses
train = [d for d in lines if "loss" in d]
evals = [d for d in lines if "test_loss" in d]
it = [d["iter"] for d in train]
assert all(a < b for a, b in zip(it, it[1:])), "training iterations not strictly increasing"
assert it[-1] == 2000 and evals and all(d["iter"] <= 2000 for d in evals)
assert [d["iter"] for d in evals] == sorted(set(d["iter"] for d in evals)), "an evaluation repeats"
keys = ["iter", "epoch", "loss", "lr", "grad_norm", "loss_scale", "tokens_per_s", "ms_per_iter", "mfu", "tokens", "time_s"]
assert all(list(d) == keys for d in train), train[0]
assert all(list(d) == ["iter", "epoch", "test_loss", "tokens", "time_s"] for d in evals), evals[0]
# the log's lines, of the process that ran each iteration (the first up to the stop)
logged = {}
for l in open(log):
    m = re.match(r"epoch (\d+) \| iter (\d+)/\d+ \| loss ([0-9.]+) \| lr ([0-9.e+-]+) \| norm ([0-9.]+)", l)
    if m: logged[int(m[2])] = (int(m[1]), m[3], float(m[4]), m[5])
    m = re.match(r"epoch (\d+) \| iter (\d+) \| test loss ([0-9.]+)$", l)
    if m: logged[("eval", int(m[2]))] = m[3]
assert set(it) == {k for k in logged if type(k) is int}, "not one line per logged iteration"
for d in train:
    ep, loss, lr, norm = logged[d["iter"]]
    assert d["epoch"] == ep and "%.4f" % d["loss"] == loss and "%.3f" % d["grad_norm"] == norm, (d, logged[d["iter"]])
    assert abs(d["lr"] - lr) <= 1e-2 * lr and d["loss_scale"] == 1.0
    assert d["tokens"] == d["iter"] * 64, d            # 4 x 16 tokens per iteration, continued on resume
    assert 0 < d["mfu"] < 1 and d["tokens_per_s"] > 0 and d["ms_per_iter"] > 0
for d in evals:
    assert "%.4f" % d["test_loss"] == logged[("eval", d["iter"])], d
t = [d["time_s"] for d in lines]
assert all(a <= b for a, b in zip(t, t[1:])), "time_s goes back"
print(len(train), "training lines,", len(evals), "evaluation lines")
PYEOF
then ok "every line parses; iterations strictly increase; the log's losses, norms, lrs and test losses; tokens and time continue"
else bad "metrics.jsonl against the log" "$(head -3 $WORK/m/metrics.jsonl)"; fi

if command -v mpirun > /dev/null; then
  echo "-- mpirun -np 2: one writer"
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
  MPIRUN="timeout 120 env ASAN_OPTIONS=$MPI_ASAN_OPTIONS mpirun --oversubscribe --bind-to none -x OMP_NUM_THREADS=1"
  $MPIRUN -np 2 $MINGPT "${run[@]}" trainer_config.batch_size=2 trainer_config.max_iters=120 trainer_config.log_every=10 \
    hydra.run.dir=$WORK/mpi > $WORK/mpi.log 2>&1; rc=$?
  n_log=$(grep -Ec '^epoch [0-9]+ \| iter [0-9]+/' $WORK/mpi.log)
  n_json=$(grep -c '"loss"' $WORK/mpi/metrics.jsonl)
  [ $rc = 0 ] && [ "$n_log" = 13 ] && ! grep -q "$ESC" $WORK/mpi.log && [ "$n_json" = 13 ] && grep -q '"iter":120,"epoch":1,"loss"' $WORK/mpi/metrics.jsonl \
    && grep -q '"tokens":7680,' $WORK/mpi/metrics.jsonl \
    && ok "2 ranks: 13 logged iterations, 13 training lines, tokens of both ranks, no escape code (Open MPI gives ranks a pty)" \
    || bad "mpirun -np 2: one writer (rc $rc, $n_log log lines, $n_json json lines)" "$(tail -3 $WORK/mpi.log; head -3 $WORK/mpi/metrics.jsonl)"
else bad "mpirun is installed (make deps installs openmpi-bin)"; fi

echo "-- memory and peak_tflops"
bad_input mem-exceeded 1 'of memory (the estimate above), more than the' -- $MINGPT "${run[@]}" gpt_config.n_embd=65536 gpt_config.n_head=1 hydra.run.dir=$WORK/huge
# refused before allocating: with 4 GiB of address space the 800 GB model could not even be tried
# (not under AddressSanitizer, which reserves terabytes of shadow address space)
if ldd $MINGPT | grep -q libasan; then ok "(the address-space limit is not tried under AddressSanitizer)"; else
(ulimit -v 4194304; $MINGPT "${run[@]}" gpt_config.n_embd=65536 gpt_config.n_head=1 hydra.run.dir=$WORK/huge2 > $WORK/huge2.out 2>&1); rc=$?
[ $rc = 1 ] && grep -q "more than the .* available (MemAvailable in /proc/meminfo); nothing was allocated" $WORK/huge2.out \
  && ! grep -q "number of parameters" $WORK/huge2.out && ok "the check comes before the model is built" || bad "memory check first (rc $rc)" "$(tail -3 $WORK/huge2.out)"
fi
EMU_SO=$PWD/${B:-build}/emu/libmingpt_cuda.so   # the CUDA backend, emulated: 80 GiB of device memory
if [ -f "$EMU_SO" ]; then
  out=$(MINGPT_CUDA_LIB=$EMU_SO $MINGPT "${run[@]}" trainer_config.device=cuda gpt_config.n_embd=65536 gpt_config.n_head=1 \
        hydra.run.dir=$WORK/hugecuda 2>&1); rc=$?
  [ $rc = 1 ] && grep -q '^Backend: cuda' <<<"$out" && grep -q "GiB of memory (the estimate above), more than the .* available (free on the device: cudaMemGetInfo)" <<<"$out" \
    && ok "the CUDA backend (emulated): checked against the device's free memory" || bad "memory check on CUDA (rc $rc)" "$(tail -3 <<<"$out")"
else bad "$EMU_SO is built (make test builds it)"; fi
bad_input cfg-peak-tflops-zero 2 'trainer_config.peak_tflops must be > 0.0, got 0.0' -- $MINGPT "${run[@]}" trainer_config.peak_tflops=0 hydra.run.dir=$WORK/pk
bad_input cfg-peak-tflops-str 2 'Error merging override trainer_config.peak_tflops=fast' -- $MINGPT "${run[@]}" trainer_config.peak_tflops=fast hydra.run.dir=$WORK/pk
$MINGPT "${run[@]}" trainer_config.max_iters=1 trainer_config.peak_tflops=null hydra.run.dir=$WORK/pk > /dev/null 2>&1 \
  && grep -q '"mfu":null' $WORK/pk/metrics.jsonl && ok "peak_tflops null: mfu null" || bad "peak_tflops null" "$(cat $WORK/pk/metrics.jsonl)"
finish
