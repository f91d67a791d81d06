#!/bin/sh
# tests/cuda/emu/run_emu_bugs.sh — negative tests of the emulator: every broken case in
# emu_bugs.cu must be diagnosed.  usage: sh run_emu_bugs.sh BUILD-DIR (holding emu_bugs[.asan])
B=${1:?usage: run_emu_bugs.sh build-dir}
pass=0; fail=0
check() {  # case expected-regex [env...]
  c=$1; pat=$2; shift 2
  out=$(env "$@" "$B/emu_bugs" "$c" 2>&1)
  if printf '%s' "$out" | grep -Eq "$pat"; then pass=$((pass+1)); printf 'ok   %-24s %s\n' "$c" "$(printf '%s' "$out" | grep -E "$pat" | head -1 | cut -c1-150)"
  else fail=$((fail+1)); printf 'FAIL %-24s\n%s\n' "$c" "$out"; fi
}
check divergent_sync        'barrier divergence|deadlock'
check sync_in_branch        'deadlock'
check exit_before_sync      'exited'
check exit_before_sync      'completed, cudaSuccess' EMU_LENIENT_EXIT=1
check shfl_after_exit       'already exited|exited while'
check shfl_partial_warp     'do not exist'
check mismatched_collectives 'mismatched warp collectives'
check wmma_divergent        'divergent nvcuda::wmma calls'
check wmma_nonuniform       'non-uniform arguments'
check racy_sum              'RACE DETECTED'
check uninit_smem           'poisoned'
check host_ptr              'does not point into device memory'
check bad_launch            'cudaErrorInvalidConfiguration'
check big_smem              'without attribute -> cudaErrorInvalidValue, with attribute -> cudaSuccess'
check memcpy_oob            'cudaErrorInvalidValue'
check memcpy_kind           'cudaErrorInvalidValue'
check missing_stream_sync   'STALE READ DETECTED' EMU_DEFER=1
if [ -x "$B/emu_bugs.asan" ]; then
  out=$(ASAN_OPTIONS=detect_leaks=0 "$B/emu_bugs.asan" oob_write 2>&1); if printf '%s' "$out" | grep -q 'heap-buffer-overflow'; then pass=$((pass+1)); echo "ok   oob_write (ASan)          $(printf '%s' "$out" | grep -m1 'heap-buffer-overflow' | cut -c1-100)"; printf '%s\n' "$out" | grep 'cuda-emu\] the report' | sed 's/^/     /' ; else fail=$((fail+1)); echo "FAIL oob_write (ASan)"; printf '%s\n' "$out" | tail -5; fi
fi
echo "negative tests: $pass passed, $fail failed"
[ $fail -eq 0 ]
