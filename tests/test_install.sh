#!/usr/bin/env bash
# make install / make uninstall (mk/install.mk): the installed binary runs from any
# directory with the shipped configs and finds its libraries next to itself (the CUDA backend's
# versions, MPI under mpirun); DESTDIR is honoured; uninstall removes every file install wrote
# and nothing else, then the directories it created when they are empty (never one that was
# there before or still holds a file of another package), and refuses manifest lines outside PREFIX.
cd "$(dirname "$0")/.." && source tests/lib.sh
REPO=$PWD
BDIR=${B:-build}
SANV=$([ "$BDIR" = build/san ] && echo 1 || echo 0)
# a make of its own (not the jobserver of a `make test` that runs this script)
mk() { env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s -C "$REPO" B="$BDIR" SAN=$SANV "$@"; }
export OMP_NUM_THREADS=1
PFX=$WORK/pfx
cd "$WORK" || exit 1

mk install PREFIX="$PFX" > install.out 2>&1; rc=$?
[ $rc -eq 0 ] && ok "make install PREFIX=\$tmp" || bad "make install (rc $rc)" "$(tail -5 install.out)"
want=(bin/mingpt share/mingpt/gpt2_train_cfg.yaml share/mingpt/char_cpu.yaml share/man/man1/mingpt.1
      share/bash-completion/completions/mingpt share/mingpt/install-manifest)
for l in libmingpt_cuda.so libmingpt_mpi.so libmingpt_plot.so; do [ -f "$REPO/$BDIR/$l" ] && want+=(lib/mingpt/$l); done
missing=""; for f in "${want[@]}"; do [ -f "$PFX/$f" ] || missing+=" $f"; done
[ -z "$missing" ] && ok "installed: ${#want[@]} files (the binary, libraries built, configs, man page, completion)" \
  || bad "installed files" "missing:$missing"
[ "$(cd "$PFX" && find . -type f | sed 's|^\./||' | sort)" = "$(printf '%s\n' "${want[@]}" | sort)" ] \
  && ok "nothing else installed" || bad "nothing else installed" "$(cd "$PFX" && find . -type f)"
[ "$(grep -v '^dir:' "$PFX/share/mingpt/install-manifest" | sort)" = "$(printf "$PFX/%s\n" "${want[@]}" | sort)" ] \
  && ok "the manifest lists every installed file" || bad "the manifest" "$(cat "$PFX/share/mingpt/install-manifest")"
cmp -s "$PFX/share/bash-completion/completions/mingpt" <("$MINGPT" -sc install=bash) \
  && ok "the completion file is -sc install=bash" || bad "the completion file is -sc install=bash"
man -l "$PFX/share/man/man1/mingpt.1" 2>&1 >/dev/null | grep -q . && bad "man page renders without warnings" \
  "$(man -l "$PFX/share/man/man1/mingpt.1" 2>&1 >/dev/null | head -3)" || ok "man page renders without warnings"
MANWIDTH=80 man -l "$PFX/share/man/man1/mingpt.1" 2>/dev/null | grep -q "EXIT STATUS" && ok "man page has EXIT STATUS" \
  || bad "man page has EXIT STATUS"

# ---------------------------------------------------------------- the installed binary, from /
out=$(cd / && "$PFX/bin/mingpt" --cfg job 2>&1); rc=$?
[ $rc -eq 0 ] && [ "$out" = "$(cd "$REPO" && "$MINGPT" --cfg job 2>&1)" ] \
  && ok "\$tmp/bin/mingpt --cfg job from / (the shipped config)" || bad "--cfg job from / (rc $rc)" "$out"
(cd / && "$PFX/bin/mingpt" --info searchpath) | grep -q "| mingpt *| file://$PFX/share/mingpt *|" \
  && ok "--info searchpath names the installed share directory" || bad "--info searchpath" "$(cd / && "$PFX/bin/mingpt" --info searchpath)"
check_ver() {  # NAME LIB: --version names the installed library
  if [ -f "$REPO/$BDIR/$2" ]; then
    "$PFX/bin/mingpt" --version | grep -Eq "^$1: .* \($PFX/lib/mingpt/$2\)$" && ok "--version: $1 from $PFX/lib/mingpt" \
      || bad "--version: $1 from $PFX/lib/mingpt" "$("$PFX/bin/mingpt" --version)"
  fi
}
check_ver CUDA libmingpt_cuda.so
check_ver MPI libmingpt_mpi.so

# a tiny training from a temp directory with the installed binary and config
printf 'hello world, this is a small corpus for the install test.\n%.0s' {1..30} > "$WORK/tiny.txt"
TINY=(data_config.path="$WORK/tiny.txt" data_config.block_size=16 data_config.truncate=1.0 gpt_config.n_layer=1
      gpt_config.n_head=2 gpt_config.n_embd=16 trainer_config.batch_size=4 trainer_config.max_iters=3
      trainer_config.eval_iters=1 trainer_config.log_every=1 trainer_config.use_amp=false trainer_config.device=cpu)
mkdir -p "$WORK/run" && (cd "$WORK/run" && "$PFX/bin/mingpt" "${TINY[@]}" > out.txt 2>&1); rc=$?
R=$WORK/run/runs/gpt2_train_cfg   # the shipped config's run directory
[ $rc -eq 0 ] && grep -q '"exit_status": 0' "$R/summary.json" && [ -f "$R/gpt_snapshot.bin" ] \
  && ok "a tiny training from a temp directory (in runs/gpt2_train_cfg/)" || bad "a tiny training (rc $rc)" "$(tail -5 "$WORK/run/out.txt")"
# under mpirun: the installed MPI library
if command -v mpirun >/dev/null && [ -f "$PFX/lib/mingpt/libmingpt_mpi.so" ]; then
  mkdir -p "$WORK/mpi" && (cd "$WORK/mpi" && OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
    ASAN_OPTIONS=$MPI_ASAN_OPTIONS timeout 120 mpirun --oversubscribe -np 2 -x OMP_NUM_THREADS=1 -x ASAN_OPTIONS \
    "$PFX/bin/mingpt" "${TINY[@]}" > out.txt 2>&1); rc=$?
  [ $rc -eq 0 ] && grep -q '"exit_status": 0' "$WORK/mpi/runs/gpt2_train_cfg/summary.json" && grep -q "^Data parallel: 2 ranks (mpi)" "$WORK/mpi/out.txt" \
    && ok "the installed binary under mpirun -np 2" || bad "under mpirun -np 2 (rc $rc)" "$(tail -8 "$WORK/mpi/out.txt")"
fi

# ---------------------------------------------------------------- uninstall
mk uninstall PREFIX="$PFX" > uninstall.out 2>&1; rc=$?
left=$(find "$PFX" -type f)
[ $rc -eq 0 ] && [ -z "$left" ] && ok "make uninstall removes every file" || bad "make uninstall (rc $rc)" "$left"
[ ! -e "$PFX/lib/mingpt" ] && [ ! -e "$PFX/share/mingpt" ] && ok "and mingpt's own directories" || bad "mingpt's directories left"
left=$(find "$PFX" -mindepth 1)
[ -z "$left" ] && ok "and every directory install created (bin, lib, share/man/man1, ...)" || bad "directories install created are left" "$left"
# directories that were there before install, or hold another package's file, stay
mkdir -p "$PFX/bin" "$PFX/share/man/man1" && echo other > "$PFX/share/man/man1/other.1"
mk install PREFIX="$PFX" > install2.out 2>&1 && mk install PREFIX="$PFX" > install3.out 2>&1 \
  && mk uninstall PREFIX="$PFX" > uninstall2.out 2>&1; rc=$?
[ $rc -eq 0 ] && [ "$(cd "$PFX" && find . -mindepth 1 | sort | tr '\n' ' ')" = "./bin ./share ./share/man ./share/man/man1 ./share/man/man1/other.1 " ] \
  && ok "uninstall keeps a directory it did not create and one another file is in (after a reinstall)" \
  || bad "uninstall and directories it did not create (rc $rc)" "$(cd "$PFX" && find . -mindepth 1)"
mk uninstall PREFIX="$PFX" > again.out 2>&1 && grep -q "nothing to remove" again.out \
  && ok "uninstall again: nothing to remove" || bad "uninstall again" "$(cat again.out)"

# ---------------------------------------------------------------- DESTDIR, and a manifest that is not trusted
mk install DESTDIR="$WORK/stage" PREFIX=/opt/mingpt-test > stage.out 2>&1 && [ -x "$WORK/stage/opt/mingpt-test/bin/mingpt" ] \
  && grep -qx "/opt/mingpt-test/bin/mingpt" "$WORK/stage/opt/mingpt-test/share/mingpt/install-manifest" && [ ! -e /opt/mingpt-test ] \
  && ok "DESTDIR: staged, the manifest names PREFIX paths" || bad "DESTDIR" "$(tail -5 stage.out)"
echo keep > "$WORK/outside.txt"
mkdir -p "$WORK/empty_dir"
printf '%s\n%s\n%s\n' "$WORK/outside.txt" "/opt/mingpt-test/../../$WORK/outside.txt" "dir:$WORK/empty_dir" \
  >> "$WORK/stage/opt/mingpt-test/share/mingpt/install-manifest"
mk uninstall DESTDIR="$WORK/stage" PREFIX=/opt/mingpt-test > unstage.out 2>&1; rc=$?
[ $rc -ne 0 ] && [ -f "$WORK/outside.txt" ] && [ -d "$WORK/empty_dir" ] && [ -z "$(find "$WORK/stage" -type f)" ] \
  && grep -q "skipping 'dir:$WORK/empty_dir' (.*install-manifest: not a directory install creates)" unstage.out \
  && grep -q "skipping '$WORK/outside.txt' (.*install-manifest: not under /opt/mingpt-test)" unstage.out \
  && ok "uninstall refuses manifest lines outside PREFIX (and removes the rest)" || bad "manifest outside PREFIX (rc $rc)" "$(cat unstage.out)"
[ -d "$WORK/stage" ] && [ -z "$(find "$WORK/stage" -mindepth 1)" ] \
  && ok "DESTDIR: uninstall removes the staged directories (opt/mingpt-test/..., opt), not DESTDIR" \
  || bad "DESTDIR: staged directories" "$(find "$WORK/stage")"
expect_error "install with a relative PREFIX" 2 "PREFIX must be absolute" -- mk install PREFIX=relative/dir
finish
