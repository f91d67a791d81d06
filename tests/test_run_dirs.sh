#!/usr/bin/env bash
# Run directories that never mix: a new run moves an earlier run's results aside (*.prev-<stamp>,
# a counter when that name is taken) while a resume appends; a run that fails before training
# takes back what it wrote (a directory it made goes, one that was there is left byte for byte);
# one run per directory (flock on .mingpt.lock, also on the snapshot's directory outside the run
# directory): a second run exits 1 naming the holder, the holder goes on, a SIGKILLed holder
# leaves no stale lock, and under mpirun and in -m sweeps the same holds.
cd "$(dirname "$0")/.." && source tests/lib.sh && source tests/hydra_lib.sh
M=$MINGPT
HOST=$(hostname)

# listing DIR: every file under DIR with its checksum (the lock file aside: its holder's pid)
listing() { (cd "$1" && find . -type f ! -name .mingpt.lock -print0 | sort -z | xargs -0 -r md5sum); }
# long NAME DIR [OVERRIDES...]: a run that trains until stopped, in the background ($LONG_PID);
# returns once it holds its directory's lock and trains
long() {
  local name=$1 dir=$2; shift 2
  $M "${TINY[@]}" hydra.run.dir=$dir trainer_config.max_iters=0 trainer_config.max_epochs=1000000 "$@" > $name.out 2>&1 &
  LONG_PID=$!
  for _ in $(seq 300); do grep -q '^Training:' $name.out 2>/dev/null && break; sleep 0.05; done
  grep -q "^$LONG_PID " $dir/.mingpt.lock 2>/dev/null || bad "$name: holds $dir/.mingpt.lock" "$(cat $name.out)"
}

echo "-- a new run moves an earlier run's results aside; a resume appends"
mkdir -p rot
for f in metrics.jsonl summary.json loss.svg; do echo "another run's $f" > rot/$f; done
$M "${TINY[@]}" hydra.run.dir=rot > rot1.out 2>&1; rc=$?
prev=$(ls rot | sed -n 's/^summary\.json\.prev-\([0-9]\{8\}-[0-9]\{6\}\)$/\1/p')
[ $rc -eq 0 ] && [ -n "$prev" ] && ok "fresh start: exit 0, summary.json.prev-$prev" || bad "fresh start moves files aside (rc $rc)" "$(ls -a rot; tail -3 rot1.out)"
all=1
for f in metrics.jsonl summary.json loss.svg; do
  [ "$(cat rot/$f.prev-$prev 2>/dev/null)" = "another run's $f" ] || all=0
  grep -q "another run" rot/$f && all=0
done
[ $all = 1 ] && ok "the earlier metrics.jsonl, summary.json, loss.svg kept whole as *.prev-$prev; the new ones are this run's" \
  || bad "the earlier files moved aside whole" "$(ls -a rot; head -2 rot/metrics.jsonl)"
[ "$(grep -c "^note: a new run in '$WORK/rot': moved the earlier run's metrics.jsonl, summary.json, loss.svg to \*.prev-$prev$" rot1.out)" = 1 ] \
  && ok "one line says so" || bad "one line says so" "$(cat rot1.out)"
n1=$(grep -c '"loss"' rot/metrics.jsonl)
$M "${TINY[@]}" hydra.run.dir=rot trainer_config.max_iters=6 > rot2.out 2>&1; rc=$?
n2=$(grep -c '"loss"' rot/metrics.jsonl)
[ $rc -eq 0 ] && grep -q '^Resuming training' rot2.out && [ "$n2" -gt "$n1" ] && grep -q '"iter":1,' rot/metrics.jsonl \
  && grep -q '"iter":6,' rot/metrics.jsonl && [ "$(ls rot | grep -c prev)" = 3 ] && ! grep -q '^note: a new run' rot2.out \
  && ok "a resume appends to metrics.jsonl ($n1 -> $n2 training lines) and moves nothing" \
  || bad "a resume appends (rc $rc, $n1 -> $n2 lines)" "$(ls -a rot; cat rot/metrics.jsonl | head -3)"
# the stamp of this second and the next few are taken: the counter
rm rot/snapshot.bin
for s in 0 1 2 3 4 5; do echo taken > "rot/metrics.jsonl.prev-$(date -d "+$s sec" +%Y%m%d-%H%M%S)"; done
before=$(ls rot/metrics.jsonl.prev-* | wc -l)
$M "${TINY[@]}" hydra.run.dir=rot > rot3.out 2>&1; rc=$?
c=$(ls rot | grep -E '^summary\.json\.prev-[0-9]{8}-[0-9]{6}-1$')
[ $rc -eq 0 ] && [ -n "$c" ] && [ -f "rot/metrics.jsonl.${c#summary.json.}" ] && [ -f "rot/loss.svg.${c#summary.json.}" ] \
  && [ "$(grep -lx taken rot/metrics.jsonl.prev-* | wc -l)" = 6 ] \
  && ok "a taken name: one counter for all the files (${c#summary.json.}), nothing overwritten" \
  || bad "a taken name gets a counter (rc $rc)" "$(ls -a rot)"
[ ! -e rot/.mingpt.lock ] && ok "the lock file goes when the run ends" || bad "the lock file goes when the run ends" "$(ls -a rot)"

echo "-- a run that fails before training takes back what it wrote"
expect_error "missing corpus in a new directory: exit 2" 2 "data_config.path: cannot open" \
  -- $M "${TINY[@]}" hydra.run.dir=new/a data_config.path=$WORK/absent.txt
[ ! -e new/a ] && ok "the new directory is gone" || bad "the new directory is gone" "$(ls -aR new/a)"
expect_error "bad init_from in a new directory: exit 2" 2 "trainer_config.init_from" \
  -- $M "${TINY[@]}" hydra.run.dir=new/b trainer_config.init_from=$WORK/absent.safetensors
[ ! -e new/b ] && ok "init_from: the new directory is gone" || bad "init_from: the new directory is gone" "$(ls -aR new/b)"
# directories that were there: left byte for byte
$M "${TINY[@]}" hydra.run.dir=old > /dev/null 2>&1 || bad "a first run in old/"
before=$(listing old)
expect_error "a snapshot of another model: exit 2" 2 "n_layer is 2 here but 1 in the snapshot" \
  -- $M "${TINY[@]}" hydra.run.dir=old gpt_config.n_layer=2 trainer_config.max_iters=6
[ "$(listing old)" = "$before" ] && ok "resume refused: the directory as it was (summary.json, .hydra/, log)" \
  || bad "resume refused: the directory as it was" "$(diff <(echo "$before") <(listing old))"
head -c 100 old/snapshot.bin > old/cut && mv old/cut old/snapshot.bin
before=$(listing old)
expect_error "a damaged snapshot: exit 1" 1 "snapshot.bin" -- $M "${TINY[@]}" hydra.run.dir=old trainer_config.max_iters=6
[ "$(listing old)" = "$before" ] && ok "damaged snapshot: the directory as it was" \
  || bad "damaged snapshot: the directory as it was" "$(diff <(echo "$before") <(listing old))"
rm old/snapshot.bin
before=$(listing old)
expect_error "a new run in a used directory, corpus missing" 2 "data_config.path: cannot open" \
  -- $M "${TINY[@]}" hydra.run.dir=old data_config.path=$WORK/absent.txt
[ "$(listing old)" = "$before" ] && ! ls old | grep -q prev && ok "the files it moved aside are back" \
  || bad "the files it moved aside are back" "$(diff <(echo "$before") <(listing old))"

echo "-- one run per directory"
long holder L
bad_input run-dir-in-use 1 'is in use by process' -- $M "${TINY[@]}" hydra.run.dir=L trainer_config.seed=7
expect_error "the second run names the holder's pid and host" 1 "^mingpt: error: run directory '$WORK/L' is in use by process $LONG_PID on $HOST" \
  -- $M "${TINY[@]}" hydra.run.dir=L trainer_config.seed=7
grep -q 'seed' L/.hydra/overrides.yaml && bad "the second run touched nothing (.hydra/overrides.yaml is its)" \
  || ok "the second run touched nothing (.hydra/ is the holder's)"
grep -q 'in use' L/mingpt.log && bad "the second run wrote in the holder's log" || ok "the holder's log has no line of the second run"
# the snapshot's directory, outside the run directory, is locked too
bad_input snapshot-dir-in-use 1 'is in use by process' -- $M "${TINY[@]}" hydra.run.dir=L2 trainer_config.snapshot_path=$WORK/L/snapshot.bin
expect_error "it names the snapshot's directory" 1 "snapshot directory '$WORK/L' \\(of trainer_config.snapshot_path\\) is in use by process $LONG_PID" \
  -- $M "${TINY[@]}" hydra.run.dir=L2 trainer_config.snapshot_path=$WORK/L/snapshot.bin
[ ! -e L2 ] && ok "snapshot directory in use: no directory left" || bad "snapshot directory in use: no directory left" "$(ls -a L2)"
# a sweep: each job locks its own directory; the job on L fails, the other runs
mkdir -p sw && ln -s ../L sw/1
out=$($M "${TINY[@]}" -m hydra.sweep.dir=sw trainer_config.seed=1,2 2>&1); rc=$?
[ $rc -eq 1 ] && grep -q "run directory '$WORK/sw/1' is in use by process $LONG_PID" <<<"$out" && grep -q '"exit_status": 0' sw/0/summary.json \
  && ok "-m: the job whose directory is in use fails, the other runs" || bad "-m: locks each job's directory (rc $rc)" "$out"
if command -v mpirun > /dev/null; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
  MPIRUN="timeout 120 env ASAN_OPTIONS=$MPI_ASAN_OPTIONS mpirun --oversubscribe --bind-to none -x OMP_NUM_THREADS=1"
  out=$($MPIRUN -np 2 $M "${TINY[@]}" hydra.run.dir=L 2>&1); rc=$?
  [ $rc -eq 1 ] && grep -q "is in use by process $LONG_PID on $HOST" <<<"$out" \
    && ok "mpirun -np 2 on a directory in use: every rank exits 1" || bad "mpirun on a directory in use (rc $rc)" "$out"
  $MPIRUN -np 2 $M "${TINY[@]}" hydra.run.dir=mpi > mpi.out 2>&1; rc=$?
  [ $rc -eq 0 ] && grep -q '"exit_status": 0' mpi/summary.json && [ ! -e mpi/.mingpt.lock ] \
    && ok "mpirun -np 2 on a free directory: trains, the lock goes at the end" || bad "mpirun on a free directory (rc $rc)" "$(tail -3 mpi.out)"
else bad "mpirun is installed (make deps installs openmpi-bin)"; fi
kill -INT $LONG_PID; wait $LONG_PID; rc=$?
[ $rc -eq 75 ] && grep -q '"exit_status": 75' L/summary.json && ! grep -q seed L/.hydra/overrides.yaml \
  && ok "the holder was not disturbed (stopped by SIGINT: exit 75, its own summary)" || bad "the holder went on (rc $rc)" "$(tail -3 holder.out)"

echo "-- a killed holder leaves no stale lock"
long killed K
kill -KILL $LONG_PID; wait $LONG_PID 2>/dev/null
[ -f K/.mingpt.lock ] && ok "SIGKILL: the lock file stays (the lock does not)" || bad "SIGKILL: the lock file stays"
$M "${TINY[@]}" hydra.run.dir=K > k.out 2>&1; rc=$?
[ $rc -eq 0 ] && grep -q '"exit_status": 0' K/summary.json && ok "the next run takes the directory (exit 0)" \
  || bad "the next run after a SIGKILL (rc $rc)" "$(tail -3 k.out)"
finish
