#!/usr/bin/env bash
# The README's Usage block works as printed, line by line and in order, after `make run`, in a
# fresh directory that holds only the binary, the two shipped configs and data/input.txt: every
# line exits 0, and the runs of different configs land in different directories.
#
# The lines are read from README.md (the first ```sh block after "## Usage"; `\` continuations
# joined) and `make run`'s commands from the Makefile's run recipe, never copied here. They run
# verbatim through bash, with one difference: ./mingpt is a wrapper that appends caps (a few
# iterations of a one-layer model on 2% of the corpus) to each training command, so that the
# whole block takes seconds instead of hours; subcommands and printing flags get nothing added,
# and a cap whose key the line sets itself (the sweep's gpt_config.n_layer) is left out.
# mpirun lines get what running as root in a container needs through the environment (Open
# MPI's MCA variables, as tests/test_progress.sh passes on its command line).
cd "$(dirname "$0")/.." && source tests/lib.sh
REPO=$PWD
BIN=$(readlink -f "$MINGPT")
export OMP_NUM_THREADS=1
export CAPS="trainer_config.max_iters=3 gpt_config.n_layer=1 gpt_config.n_embd=32 trainer_config.batch_size=4
  data_config.truncate=0.02 trainer_config.eval_iters=2 trainer_config.device=cpu trainer_config.use_amp=false"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none \
  OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_hwloc_base_binding_policy=none

D=$WORK/fresh
mkdir -p $D/data && cp gpt2_train_cfg.yaml char_cpu.yaml $D/ && cp data/input.txt $D/data/ \
  || { bad "a fresh directory (data/input.txt: make data)"; finish; exit 1; }
cat > $D/mingpt <<EOF
#!/usr/bin/env bash
# $BIN with the test's caps appended to a training command
case "\${1-}" in sample|info|export|runs|plot) exec "$BIN" "\$@" ;; esac
for a in "\$@"; do
  case \$a in --cfg|-c|--help|-h|--hydra-help|--info|-i|--version|-sc|--shell-completion) exec "$BIN" "\$@" ;; esac
done
caps=()
for c in \$CAPS; do
  set_here=0
  for a in "\$@"; do [[ \$a == "\${c%%=*}="* ]] && set_here=1; done
  [ \$set_here = 1 ] || caps+=("\$c")
done
exec "$BIN" "\$@" "\${caps[@]}"
EOF
chmod +x $D/mingpt

# run_line WHAT LINE: LINE through bash in $D; it must exit 0
run_line() {
  local out rc asan=${ASAN_OPTIONS:-}
  [[ $2 == mpirun* ]] && asan=$MPI_ASAN_OPTIONS   # Open MPI's own leaks (tests/lib.sh)
  out=$(cd $D && ASAN_OPTIONS=$asan timeout 300 bash -c "$2" 2>&1 </dev/null); rc=$?
  if [ $rc -eq 0 ] && ! grep -Eq 'Segmentation|Aborted|AddressSanitizer|runtime error:|core dumped' <<<"$out"; then ok "$1: $2"
  else bad "$1 (exit $rc): $2" "$(tail -8 <<<"$out")"; fi
}

echo "-- make run (its commands from the Makefile, shortened by the caps)"
mapfile -t make_run < <(awk '/^run:/ { f = 1; next } f && /^\t/ { sub(/^\t@?/, ""); print; next } f { exit }' Makefile \
                        | grep '^\./mingpt ')
[ ${#make_run[@]} -ge 2 ] && ok "make run: ${#make_run[@]} mingpt commands" || bad "make run's commands" "$(sed -n '/^run:/,/^$/p' Makefile)"
for l in "${make_run[@]}"; do run_line "make run" "$l"; done
[ -f $D/runs/char_cpu/char_cpu_snapshot.bin ] && [ ! -e $D/char_cpu_snapshot.bin ] \
  && ok "make run trains in runs/char_cpu/" || bad "make run trains in runs/char_cpu/" "$(cd $D && find . -name '*.bin')"

echo "-- the README's Usage block, in order"
mapfile -t lines < <(awk '/^## Usage/ { u = 1 } u && /^```sh/ { b = 1; next } b && /^```/ { exit }
  b { if (sub(/\\$/, "")) { acc = acc $0; next } print acc $0; acc = "" }' README.md | grep -v '^ *\(#.*\)\?$')
[ ${#lines[@]} -ge 15 ] && grep -q '^mpirun ' <(printf '%s\n' "${lines[@]}") && ok "the Usage block: ${#lines[@]} lines" \
  || bad "the Usage block parsed" "$(printf '%s\n' "${lines[@]}")"
for l in "${lines[@]}"; do run_line "README" "$l"; done

echo "-- where the runs landed"
name_of() { sed -n 's/^    config_name: //p' "$1/.hydra/hydra.yaml" 2>/dev/null; }
[ "$(name_of $D/runs/char_cpu)" = char_cpu ] && [ "$(name_of $D/runs/gpt2_train_cfg)" = gpt2_train_cfg ] \
  && [ -f $D/runs/gpt2_train_cfg/gpt_snapshot.bin ] && [ ! -e $D/runs/gpt2_train_cfg/char_cpu_snapshot.bin ] \
  && [ ! -e $D/runs/char_cpu/gpt_snapshot.bin ] && ok "the two configs' runs in runs/char_cpu/ and runs/gpt2_train_cfg/, unmixed" \
  || bad "the two configs' runs in their own directories" "$(cd $D && find runs -maxdepth 2 | sort)"
grep -q '^\[.*Resuming training' $D/runs/gpt2_train_cfg/mingpt.log && grep -q '^\[.*Resuming training' $D/runs/char_cpu/mingpt.log \
  && ok "rerunning a config's command resumes its run" || bad "rerunning resumes" "$(grep -h 'Snapshot\|Resuming' $D/runs/*/mingpt.log)"
for d in runs/char_cpu_np2 runs/lr1e-3 runs/lr3e-4 runs/finetune sw/0 sw/3; do
  grep -q '"exit_status": 0' $D/$d/summary.json 2>/dev/null && ok "$d: a run of its own, exit 0" || bad "$d: a run of its own" "$(ls -a $D/$d 2>&1)"
done
grep -q 'Data parallel: 2 ranks' $D/runs/char_cpu_np2/mingpt.log && ! grep -q 'Resuming' $D/runs/char_cpu_np2/mingpt.log \
  && ok "the mpirun line trained from scratch, not from make run's snapshot" || bad "the mpirun line: a new run" "$(head -20 $D/runs/char_cpu_np2/mingpt.log)"
[ "$(find $D -maxdepth 1 \( -name '*.bin' -o -name metrics.jsonl -o -name summary.json -o -name .hydra \) | wc -l)" = 0 ] \
  && ok "nothing of a run in the launch directory" || bad "nothing of a run in the launch directory" "$(ls -a $D)"
finish
