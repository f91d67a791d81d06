#!/usr/bin/env bash
# Hydra checklist M1-M9: -m sweeps (a,b / range() / choice()), cartesian order, job lines,
# numbered job directories under hydra.sweep.dir, validation before any job runs, failing jobs,
# override_dirname subdirs and one ${now:} per sweep. Each job is a tiny model (milliseconds).
cd "$(dirname "$0")/.." && source tests/lib.sh && source tests/hydra_lib.sh
M=$MINGPT
TS='\[[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2},[0-9]{3}\]\[HYDRA\] '

# jobs_lines FILE: the "[HYDRA]" lines of a sweep's stdout, without their timestamps.
hydra_lines() { grep -E "^$TS" "$1" | sed -E "s/^$TS//"; }

# ---------------------------------------------------------------- M1 the sweep, its lines and directories
$M "${TINY[@]}" -m hydra.sweep.dir=sw optimizer_config.learning_rate=1e-3,3e-4 'gpt_config.n_layer=range(1,3)' \
  trainer_config.batch_size=4 > m1.out 2> m1.err; rc=$?
[ $rc -eq 0 ] && ok "M1 sweep exits 0" || bad "M1 sweep exits 0 (rc $rc)" "$(tail -5 m1.err)"
check "M1 Launching / #i lines" 0 "Launching 4 jobs locally
	#0 : optimizer_config.learning_rate=0.001 gpt_config.n_layer=1 trainer_config.batch_size=4
	#1 : optimizer_config.learning_rate=0.001 gpt_config.n_layer=2 trainer_config.batch_size=4
	#2 : optimizer_config.learning_rate=0.0003 gpt_config.n_layer=1 trainer_config.batch_size=4
	#3 : optimizer_config.learning_rate=0.0003 gpt_config.n_layer=2 trainer_config.batch_size=4" "" -- hydra_lines m1.out
for j in 0 1 2 3; do
  [ -f sw/$j/.hydra/config.yaml ] && [ -f sw/$j/.hydra/hydra.yaml ] && [ -f sw/$j/.hydra/overrides.yaml ] \
    && [ -s sw/$j/mingpt.log ] && grep -q '"exit_status": 0' sw/$j/summary.json && [ -f sw/$j/snapshot.bin ] \
    && ok "M1 sw/$j complete" || bad "M1 sw/$j complete" "$(ls -aR sw/$j)"
done
[ -f sw/multirun.yaml ] && ok "M1 sw/multirun.yaml" || bad "M1 sw/multirun.yaml"
check "M1 sw/3 overrides.yaml in command-line order" 0 "- optimizer_config.learning_rate=0.0003
- gpt_config.n_layer=2
- trainer_config.batch_size=4" "" -- cat sw/3/.hydra/overrides.yaml
has "M1 job 3's config and hydra node" sw/3/.hydra/config.yaml '  n_layer: 2' '  learning_rate: 0.0003'
has "M1 job 3's hydra.yaml" sw/3/.hydra/hydra.yaml '  mode: MULTIRUN' '    num: 3' '    id: 3' "    output_dir: $WORK/sw/3" \
  '    dir: sw'
has "M1 multirun.yaml: the sweep's config, all task overrides" sw/multirun.yaml '  batch_size: 4' '  mode: MULTIRUN' \
  '    - optimizer_config.learning_rate=1e-3,3e-4' '    - gpt_config.n_layer=range(1,3)' '    - hydra.sweep.dir=sw'
has "M1 each job trained its own model" sw/1/summary.json '  "iters_this_run": 3,'

# ---------------------------------------------------------------- M2 exact decimal ranges
$M "${TINY[@]}" -m hydra.sweep.dir=sw2 'gpt_config.attn_pdrop=range(0,0.3,0.1)' > m2.out 2>&1
check "M2 range(0,0.3,0.1): 0.0 0.1 0.2" 0 "Launching 3 jobs locally
	#0 : gpt_config.attn_pdrop=0.0
	#1 : gpt_config.attn_pdrop=0.1
	#2 : gpt_config.attn_pdrop=0.2" "" -- hydra_lines m2.out
check "M2 range(0,1,0.25): 4 jobs" 0 "Launching 4 jobs locally" "" -- bash -c \
  "$M -cp conf -cn tiny -m hydra.sweep.dir=sw2b 'gpt_config.attn_pdrop=range(0,1,0.25)' 2>&1 | grep -Eo 'Launching.*'"

# ---------------------------------------------------------------- M3 rendering and choice()
$M "${TINY[@]}" -m hydra.sweep.dir=sw3 'trainer_config.use_amp=true,false' '+name="a,b",c' '+l=[1,2],[3]' \
  'trainer_config.seed=choice(1,2)' > m3.out 2>&1
check "M3 16 jobs, #0 and #15" 0 "Launching 16 jobs locally
	#0 : trainer_config.use_amp=True +name=\"a,b\" +l=[1,2] trainer_config.seed=1
	#15 : trainer_config.use_amp=False +name=c +l=[3] trainer_config.seed=2" "" -- bash -c "hydra_lines() { grep -E '^$TS' \"\$1\" | sed -E 's/^$TS//'; }; hydra_lines m3.out | sed -n '1p;2p;17p'"
[ -d sw3/15 ] && ok "M3 sw3/15 exists" || bad "M3 sw3/15 exists"

# ---------------------------------------------------------------- M4 sweeps need -m
check "M4 a,b without -m: Ambiguous value" 2 "" "$(hydra_err "Ambiguous value for argument 'optimizer_config.learning_rate=0.1,0.2'
1. To use it as a list, use key=[value1,value2]
2. To use it as string, quote the value: key=\\'value1,value2\\'
3. To sweep over it, add --multirun to your command line")" -- $M "${TINY[@]}" optimizer_config.learning_rate=0.1,0.2
check "M4 range() without -m" 2 "" "$(hydra_err "Sweep parameters 'optimizer_config.learning_rate=range(1,3)' requires --multirun")" \
  -- $M "${TINY[@]}" 'optimizer_config.learning_rate=range(1,3)'
check "M4 ... also under --cfg" 2 "" "~^Ambiguous value for argument" -- $M "${TINY[@]}" --cfg job trainer_config.seed=1,2

# ---------------------------------------------------------------- M5 repeated keys, no sweep, hydra sweeps
$M "${TINY[@]}" -m hydra.sweep.dir=sw5 trainer_config.seed=1 trainer_config.seed=2,3 > m5.out 2>&1
check "M5 seed=1 seed=2,3: 2 jobs" 0 "Launching 2 jobs locally
	#0 : trainer_config.seed=2
	#1 : trainer_config.seed=3" "" -- hydra_lines m5.out
$M "${TINY[@]}" -m hydra.sweep.dir=sw5b > m5b.out 2>&1
check "M5 -m alone: 1 job" 0 "Launching 1 jobs locally
	#0 : " "" -- hydra_lines m5b.out
[ -f sw5b/0/summary.json ] && ok "M5 -m alone runs in sw5b/0" || bad "M5 -m alone runs in sw5b/0"
check "M5 sweeping a hydra key" 2 "" "$(hydra_err "Sweeping over Hydra's configuration is not supported : 'hydra.run.dir=a,b'")" \
  -- $M "${TINY[@]}" -m 'hydra.run.dir=a,b'
check "M5 interval() is not a basic sweep" 2 "" "$(hydra_err "BasicSweeper does not support sweep type : INTERVAL_SWEEP")" \
  -- $M "${TINY[@]}" -m 'optimizer_config.learning_rate=interval(0,1)'

# ---------------------------------------------------------------- M6 every job validated before any runs
check "M6 a typo aborts the sweep" 2 "" "$(hydra_err "Could not override 'typo'.
To append to your config use +typo=3
Key 'typo' is not in struct
    full_key: typo
    object_type=dict")" -- $M "${TINY[@]}" -m hydra.sweep.dir=sw6 trainer_config.seed=1,2 typo=3
[ ! -e sw6 ] && ok "M6 nothing created" || bad "M6 nothing created" "$(ls -R sw6)"
check "M6 an invalid value in one job aborts before any runs" 2 "" \
  "mingpt: error: $WORK/conf/tiny.yaml:2:45: gpt_config.n_embd (16) must be divisible by gpt_config.n_head (3)" \
  -- $M "${TINY[@]}" -m hydra.sweep.dir=sw6b gpt_config.n_head=2,3
[ ! -e sw6b ] && ok "M6 nothing created (validation)" || bad "M6 nothing created (validation)"

# ---------------------------------------------------------------- M7 a failing job does not stop the others
check "M7 the first failure is named at the end" 1 - "~Error executing job with overrides: \['data_config.path=$WORK/absent.txt'\]
job #1 exited with status 2 \(its output is in $WORK/sw7/\)

$TRAILER\$" -- $M "${TINY[@]}" -m hydra.sweep.dir=sw7 "data_config.path=$DATA,$WORK/absent.txt,$DATA"
grep -q '"exit_status": 0' sw7/0/summary.json && [ ! -e sw7/1 ] \
  && grep -q '"exit_status": 0' sw7/2/summary.json && ok "M7 jobs 0..2 all ran (#1, failed before training, left no directory)" \
  || bad "M7 jobs 0..2 all ran" "$(ls -R sw7)"

# ---------------------------------------------------------------- M8 subdirs from override_dirname
$M "${TINY[@]}" -m hydra.sweep.dir=sw8 'hydra.sweep.subdir=${hydra.job.override_dirname}' \
  optimizer_config.learning_rate=0.1,0.2 trainer_config.seed=1 > m8.out 2>&1
check "M8 override_dirname subdirs" 0 "multirun.yaml
optimizer_config.learning_rate=0.1,trainer_config.seed=1
optimizer_config.learning_rate=0.2,trainer_config.seed=1" "" -- ls sw8

# ---------------------------------------------------------------- M9 one ${now:} for the whole sweep
# Job 1 trains long enough that the sweep spans more than a second (more iterations on a faster
# machine); every directory name must still carry the sweep's one timestamp.
iters=400
for attempt in 1 2 3 4; do
  rm -rf sw9_*
  start=$(date +%s%N)
  $M "${TINY[@]}" -m 'hydra.sweep.dir=sw9_${now:%s}' 'hydra.sweep.subdir=${hydra.job.num}_${now:%s}' \
    trainer_config.max_epochs=1000000 "trainer_config.max_iters=1,$iters" > m9.out 2>&1 || bad "M9 sweep" "$(tail -5 m9.out)"
  elapsed=$(( ($(date +%s%N) - start) / 1000000 ))
  [ "$elapsed" -ge 1100 ] && break
  iters=$((iters * 4))
done
s=$(ls -d sw9_* | head -1); s=${s#sw9_}
[ "$elapsed" -ge 1100 ] && [ -d "sw9_$s/0_$s" ] && [ -d "sw9_$s/1_$s" ] && [ "$(ls -d sw9_*/*_* | wc -l)" -eq 2 ] \
  && ok "M9 one timestamp over a ${elapsed} ms sweep" || bad "M9 one timestamp" "$elapsed ms; $(ls -d sw9_*/* 2>&1)"

# ---------------------------------------------------------------- defaults: multirun/${now}, hydra.mode, sweeper.params
$M "${TINY[@]}" -m trainer_config.seed=1,2 > md.out 2>&1
d=$(ls -d multirun/*/* 2>/dev/null | head -1)
[[ "$d" =~ ^multirun/[0-9]{4}-[0-9]{2}-[0-9]{2}/[0-9]{2}-[0-9]{2}-[0-9]{2}$ ]] && [ -f "$d/1/summary.json" ] && [ -f "$d/multirun.yaml" ] \
  && ok "default hydra.sweep.dir multirun/DATE/TIME ($d)" || bad "default sweep dir" "$(ls -R multirun 2>&1 | head)"
cat > conf/swept.yaml <<YAML
data_config: {path: $DATA, block_size: 16, truncate: 1.0}
gpt_config: {n_layer: 1, n_head: 2, n_embd: 16}
trainer_config: {batch_size: 4, max_iters: 2, eval_iters: 1, use_amp: false, device: cpu}
hydra:
  mode: MULTIRUN
  sweep: {dir: swp}
  sweeper:
    params:
      trainer_config.seed: 1,2,3
      optimizer_config.learning_rate: 0.1,0.2
YAML
$M -cp conf -cn swept optimizer_config.learning_rate=0.5 > mp.out 2>&1
check "hydra.mode=MULTIRUN + hydra.sweeper.params (the command line wins)" 0 "Launching 3 jobs locally
	#0 : trainer_config.seed=1 optimizer_config.learning_rate=0.5
	#1 : trainer_config.seed=2 optimizer_config.learning_rate=0.5
	#2 : trainer_config.seed=3 optimizer_config.learning_rate=0.5" "" -- hydra_lines mp.out
$M "${TINY[@]}" -m hydra.sweep.dir=swq hydra/hydra_logging=disabled trainer_config.seed=1,2 > mq.out 2>&1
[ -z "$(hydra_lines mq.out)" ] && [ -d swq/1 ] && ok "hydra/hydra_logging=disabled: no [HYDRA] lines" || bad "hydra_logging=disabled" "$(head -3 mq.out)"
finish
