#!/usr/bin/env bash
# Hydra checklist R1-R5: run directories (.hydra/ files, mingpt.log, summary.json),
# timestamped directories and their same-second suffix, hydra.job.chdir, output_subdir, job
# name, missing values and interpolation errors at run time; relative paths; exit codes.
cd "$(dirname "$0")/.." && source tests/lib.sh && source tests/hydra_lib.sh
M=$MINGPT

# ---------------------------------------------------------------- R1 the files of a run
$M "${TINY[@]}" hydra.run.dir=out/r1 optimizer_config.learning_rate=1e-3 > r1.out 2>&1; rc=$?
[ $rc -eq 0 ] && ok "R1 run exits 0" || bad "R1 run exits 0 (rc $rc)" "$(tail -5 r1.out)"
for f in .hydra/config.yaml .hydra/hydra.yaml .hydra/overrides.yaml mingpt.log summary.json snapshot.bin; do
  [ -f out/r1/$f ] && ok "R1 out/r1/$f" || bad "R1 out/r1/$f missing" "$(ls -laR out 2>&1 | head -20)"
done
check "R1 overrides.yaml: task overrides only" 0 "- optimizer_config.learning_rate=1e-3" "" -- cat out/r1/.hydra/overrides.yaml
has "R1 config.yaml: the task config, unresolved" out/r1/.hydra/config.yaml '  learning_rate: 0.001' "  path: $DATA"
grep -q '^hydra:' out/r1/.hydra/config.yaml && bad "R1 config.yaml has no hydra node" || ok "R1 config.yaml has no hydra node"
has "R1 hydra.yaml: the hydra node with runtime values" out/r1/.hydra/hydra.yaml 'hydra:' '    dir: out/r1' \
  "    output_dir: $WORK/out/r1" "    cwd: $WORK" '    - hydra.run.dir=out/r1' '    - optimizer_config.learning_rate=1e-3' \
  '  mode: RUN' '    config_name: tiny' '    override_dirname: optimizer_config.learning_rate=1e-3'
has "R1 summary.json" out/r1/summary.json '  "exit_status": 0,' '  "iters": 3,' '  "iters_this_run": 3,' \
  "  \"snapshot_path\": \"$WORK/out/r1/snapshot.bin\"," "  \"output_dir\": \"$WORK/out/r1\"," "  \"cwd\": \"$WORK\""
grep -Eq '^  "(final_train_loss|test_loss|tokens_per_s|wall_s)": [0-9.e+-]+,$' out/r1/summary.json && \
  [ "$(grep -Ec '^  "(final_train_loss|test_loss|tokens_per_s|wall_s)": [0-9.e+-]+,$' out/r1/summary.json)" -eq 4 ] \
  && ok "R1 summary.json numbers" || bad "R1 summary.json numbers" "$(cat out/r1/summary.json)"
grep -Eq '^\[[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9:]{8},[0-9]{3}\]\[mingpt\]\[INFO\] - Snapshot saved at epoch 1, iteration 3: ' out/r1/mingpt.log \
  && ok "R1 mingpt.log gets the run's lines with Hydra's prefix" || bad "R1 mingpt.log gets the run's lines" "$(cat out/r1/mingpt.log)"
grep -q '^done: 3 iterations' r1.out && ok "R1 the console keeps plain lines" || bad "R1 the console keeps plain lines" "$(tail -3 r1.out)"

# ---------------------------------------------------------------- R2 timestamped directories
before=$(date +%F)
$M "${TINY[@]}" > r2.out 2>&1 || bad "R2 default run" "$(tail -3 r2.out)"
d=$(ls -d outputs/*/* 2>/dev/null | head -1)
[[ "$d" =~ ^outputs/[0-9]{4}-[0-9]{2}-[0-9]{2}/[0-9]{2}-[0-9]{2}-[0-9]{2}$ ]] && [[ "$d" == outputs/$before/* || "$d" == outputs/$(date +%F)/* ]] \
  && ok "R2 default hydra.run.dir: outputs/YYYY-MM-DD/HH-MM-SS ($d)" || bad "R2 default run dir" "$(ls -R outputs 2>&1 | head)"
[ -f "$d/summary.json" ] && [ -d "$d/.hydra" ] && ok "R2 the default directory is complete" || bad "R2 the default directory is complete"
# Two runs in the same "second" (a pattern that changes once a year): the second gets _1.
$M "${TINY[@]}" 'hydra.run.dir=stamp/${now:%Y}' > /dev/null 2>&1
$M "${TINY[@]}" 'hydra.run.dir=stamp/${now:%Y}' > /dev/null 2>&1
y=$(date +%Y)
[ -f stamp/$y/summary.json ] && [ -f stamp/${y}_1/summary.json ] && ok "R2 same timestamp: a _1 suffix, never shared" \
  || bad "R2 same timestamp: a _1 suffix" "$(ls -R stamp 2>&1)"
# A named directory is reused (Hydra's behaviour): the log is appended to.
$M "${TINY[@]}" hydra.run.dir=out/named > /dev/null 2>&1
$M "${TINY[@]}" hydra.run.dir=out/named > /dev/null 2>&1
[ "$(grep -c 'Snapshot not found' out/named/mingpt.log)" -eq 1 ] && [ "$(grep -c 'Resuming training' out/named/mingpt.log)" -eq 1 ] \
  && ok "R2 a named directory is reused (log appended, snapshot resumed)" || bad "R2 named directory reused" "$(cat out/named/mingpt.log)"

# ---------------------------------------------------------------- R3 chdir, output_subdir, job name, logging
$M "${TINY[@]}" hydra.run.dir=out/r3 hydra.job.chdir=True data_config.path=tiny.txt > r3.out 2>&1 \
  && ok "R3 chdir: a relative data path still reads from the launch directory" || bad "R3 chdir run" "$(tail -3 r3.out)"
has "R3 chdir: the job ran in its output directory" out/r3/summary.json "  \"cwd\": \"$WORK/out/r3\"" \
  "  \"snapshot_path\": \"$WORK/out/r3/snapshot.bin\","
[ "$(pwd)" == "$WORK" ] && ok "R3 cwd unchanged for the caller" || bad "R3 cwd unchanged"
$M "${TINY[@]}" hydra.run.dir=out/r3b hydra.output_subdir=null hydra.job.name=gpt > /dev/null 2>&1
[ ! -e out/r3b/.hydra ] && [ -s out/r3b/gpt.log ] && [ ! -e out/r3b/mingpt.log ] \
  && ok "R3 output_subdir=null: no .hydra; job.name=gpt: gpt.log" || bad "R3 output_subdir/job.name" "$(ls -a out/r3b)"
$M "${TINY[@]}" hydra.run.dir=out/r3c hydra/job_logging=disabled > /dev/null 2>&1
[ ! -e out/r3c/mingpt.log ] && [ -f out/r3c/summary.json ] && ok "R3 hydra/job_logging=disabled: no log file" \
  || bad "R3 job_logging=disabled" "$(ls -a out/r3c)"
check "R3 hydra.job.chdir must be a bool" 2 "" "mingpt: error: hydra.job.chdir must be true, false or null" \
  -- $M "${TINY[@]}" hydra.run.dir=out/r3d hydra.job.chdir=maybe

# ---------------------------------------------------------------- R4 mandatory values read at run time
check "R4 ??? read by the trainer" 2 "" "$(hydra_err "Error executing job with overrides: ['data_config.split=???']
Missing mandatory value: data_config.split
    full_key: data_config.split
    object_type=dict")" -- $M "${TINY[@]}" 'data_config.split=???' hydra.run.dir=out/r4
[ ! -e out/r4 ] && ok "R4 nothing created for an invalid config" || bad "R4 nothing created"
check "R4 ??? not read (a key of its own) is fine" 0 - "" -- $M "${TINY[@]}" '+tag=???' hydra.run.dir=out/r4b
check "R4 with a value" 0 - "" -- $M "${TINY[@]}" 'data_config.split=random' hydra.run.dir=out/r4c

# ---------------------------------------------------------------- R5 interpolation errors (--resolve and run time)
unset NOPE_VAR
resolve_err() {  # resolve_err NAME MESSAGE FULL_KEY OVERRIDES...
  local name=$1 msg=$2 key=$3; shift 3
  check "R5 --resolve: $name" 2 "" "$(hydra_err "$msg
    full_key: $key
    object_type=dict")" -- $M "${TINY[@]}" --cfg job --resolve "$@"
}
resolve_err "key not found" "Interpolation key 'nope.x' not found" k '+k=${nope.x}'
resolve_err "recursion" "Recursive interpolation detected" k2 '+k1=${k2}' '+k2=${k1}'
resolve_err "env var" "KeyError raised while resolving interpolation: \"Environment variable 'NOPE_VAR' not found\"" k '+k=${oc.env:NOPE_VAR}'
resolve_err "resolver" "Unsupported interpolation type foo" k '+k=${foo:1}'
resolve_err "parent" "Interpolation to parent node detected" a.b '+a={b:${a}}'
resolve_err "missing" "MissingMandatoryValue while resolving interpolation: Missing mandatory value: tag" x '+tag=???' '+x=a_${tag}'
check "R5 at run time" 2 "" "$(hydra_err "Error executing job with overrides: ['trainer_config.snapshot_path=\${oc.env:NOPE_VAR}']
KeyError raised while resolving interpolation: \"Environment variable 'NOPE_VAR' not found\"
    full_key: trainer_config.snapshot_path
    object_type=dict")" -- $M "${TINY[@]}" 'trainer_config.snapshot_path=${oc.env:NOPE_VAR}' hydra.run.dir=out/r5
check "R5 a typed interpolation is checked once resolved" 2 "" "mingpt: error: gpt_config.n_layer must be >= 1, got 0 (from override 'gpt_config.n_layer=\${oc.env:ZERO}')" \
  -- env ZERO=0 $M "${TINY[@]}" 'gpt_config.n_layer=${oc.env:ZERO}' hydra.run.dir=out/r5
check "R5 \${hydra:runtime.output_dir} names the run directory" 0 - "" \
  -- $M "${TINY[@]}" 'trainer_config.snapshot_path=${hydra:runtime.output_dir}/snap_${gpt_config.n_layer}.bin' hydra.run.dir=out/r5b
[ -f out/r5b/snap_1.bin ] && ok "R5 snapshot at \${hydra:runtime.output_dir}" || bad "R5 snapshot at output_dir" "$(ls out/r5b)"

# ---------------------------------------------------------------- relative paths, summary on failure, exit codes
$M "${TINY[@]}" hydra.run.dir=./ trainer_config.snapshot_path=here.bin > /dev/null 2>&1
[ -f here.bin ] && [ -f summary.json ] && [ -d .hydra ] && ok "hydra.run.dir=./ writes in the launch directory" \
  || bad "hydra.run.dir=./" "$(ls -a)"
$M "${TINY[@]}" hydra.run.dir=out/abs trainer_config.snapshot_path=$WORK/abs.bin > /dev/null 2>&1
[ -f abs.bin ] && ok "an absolute snapshot path is kept" || bad "absolute snapshot path"
check "a runtime error (data file) keeps its exit code" 2 - "mingpt: error: data_config.path: cannot open '$WORK/nope.txt': No such file or directory" \
  -- $M "${TINY[@]}" hydra.run.dir=out/fail data_config.path=$WORK/nope.txt
[ ! -e out/fail ] && [ -d out ] && ok "a run that fails before training removes the directory it made" \
  || bad "a run that fails before training removes the directory it made" "$(ls -aR out/fail 2>&1)"
# a failure once training runs (the loss diverges): summary.json and the log keep it
$M "${TINY[@]}" hydra.run.dir=out/nan optimizer_config.learning_rate=1e30 trainer_config.max_iters=20 > nan.out 2>&1; rc=$?
[ $rc -eq 1 ] && ok "a diverged run exits 1" || bad "a diverged run exits 1 (rc $rc)" "$(tail -3 nan.out)"
has "summary.json records a failed run" out/nan/summary.json '  "exit_status": 1,'
grep -q "\[mingpt\]\[ERROR\] - mingpt: error: " out/nan/mingpt.log && ok "errors go to mingpt.log too" \
  || bad "errors go to mingpt.log" "$(cat out/nan/mingpt.log)"

# Interrupted (SIGINT): the trainer saves a snapshot, exits 75, summary.json says so.
$M "${TINY[@]}" hydra.run.dir=out/int trainer_config.max_iters=0 trainer_config.max_epochs=1000 > int.out 2>&1 &
pid=$!
for _ in $(seq 100); do grep -q '^Training:' int.out 2>/dev/null && break; sleep 0.1; done
sleep 0.2; kill -INT $pid; wait $pid; rc=$?
[ $rc -eq 75 ] && ok "SIGINT: exit 75" || bad "SIGINT: exit 75 (rc $rc)" "$(tail -3 int.out)"
has "SIGINT: summary.json exit_status 75" out/int/summary.json '  "exit_status": 75,'

# ---------------------------------------------------------------- the shell-loop workflow
for lr in 1e-3 3e-4; do $M "${TINY[@]}" optimizer_config.learning_rate=$lr hydra.run.dir=runs/lr$lr > loop.out 2>&1; done
for lr in 1e-3 3e-4; do
  [ -f runs/lr$lr/.hydra/config.yaml ] && [ -f runs/lr$lr/mingpt.log ] && [ -f runs/lr$lr/snapshot.bin ] \
    && grep -q '"iters_this_run": 3' runs/lr$lr/summary.json \
    && ok "shell loop: runs/lr$lr complete, trained from scratch" || bad "shell loop: runs/lr$lr" "$(ls -a runs/lr$lr; cat runs/lr$lr/summary.json)"
done
finish
