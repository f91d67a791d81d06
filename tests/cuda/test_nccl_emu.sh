#!/bin/bash
# tests/cuda/test_nccl_emu.sh BIN EMU_SO MPI_SO — the NCCL path of data-parallel training on
# the emulated CUDA backend: MPI ranks (processes, mpirun --oversubscribe) whose emulated NCCL
# all-reduces over MPI (kernels/cuda/emu/nccl_emu.h). BIN is tests/cuda/test_nccl_emu.c.
#   * -np 2 and -np 3, stream work immediate and deferred (EMU_DEFER=1), and the random
#     schedule: every rank passes every check of BIN;
#   * the watchdog, immediate and deferred: the last rank skips an all-reduce; with
#     timeout_s = 3 the job exits non-zero within 3 + 10 s (the whole run under `timeout 60`),
#     and the message names the waiting rank, the bucket and the timeout; the same for a ZeRO
#     reduce-scatter (the group of ncclReduce) and the parameter all-gather (of ncclBroadcast),
#     blocking and started (allgather_start, "ags": the compute stream waits, the host blocks
#     at the next allreduce_wait), immediate and deferred.
bin=${1:?usage: test_nccl_emu.sh BIN EMU_SO MPI_SO}
emu_so=$(realpath "${2:?}") && mpi_so=$(realpath "${3:?}") || exit 1
export MINGPT_CUDA_LIB=$emu_so MINGPT_MPI_LIB=$mpi_so
[ "$(id -u)" = 0 ] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none   # containers without ptrace rights
# under `make test SAN=1`: no leak detection under mpirun (Open MPI's own; see tests/lib.sh)
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
pass=0; fail=0
ok() { pass=$((pass+1)); echo "ok   $1"; }
ko() { fail=$((fail+1)); echo "FAIL $1"; [ -n "$2" ] && printf '%s\n' "$2" | tail -40 | sed 's/^/     /'; }

for np in 2 3; do
    for mode in "" "EMU_DEFER=1" "EMU_SCHEDULE=rand EMU_SEED=7"; do
        t0=$(date +%s.%N)
        out=$(env $mode timeout 120 mpirun --oversubscribe -np $np "$bin" 2>&1); rc=$?
        dt=$(echo "$(date +%s.%N) - $t0" | bc)
        npass=$(printf '%s\n' "$out" | grep -c "test_nccl_emu: $np ranks, .* checks passed")
        if [ $rc -eq 0 ] && [ "$npass" = "$np" ]; then
            ok "-np $np ${mode:-immediate}: $(printf '%s\n' "$out" | grep -m1 "checks passed" | sed 's/.*test_nccl_emu: //') on each rank ($(printf '%.1f' "$dt") s)"
        else ko "-np $np ${mode:-immediate} (rc $rc, $npass of $np ranks passed)" "$out"; fi
    done
done

# the watchdog: rank 1 of 2 (immediate: rank 0 blocks inside ncclAllReduce) and the last of 3
# (deferred: the others block in allreduce_wait's synchronisation)
for spec in "2 1 " "3 2 EMU_DEFER=1"; do
    set -- $spec; np=$1; skip=$2; mode=$3
    t0=$(date +%s.%N)
    out=$(env $mode timeout 60 mpirun --oversubscribe -np $np "$bin" --skip $skip 2>&1); rc=$?
    dt=$(echo "$(date +%s.%N) - $t0" | bc)
    msg=$(printf '%s\n' "$out" | grep -m1 "error: NCCL all-reduce of bucket 0 (1000 floats) did not complete within 3 s")
    if [ $rc -ne 0 ] && [ $rc -ne 124 ] && [ -n "$msg" ] && printf '%s' "$msg" | grep -q "^\[rank [0-9]\]" \
       && ! printf '%s' "$msg" | grep -q "^\[rank $skip\]" && [ "$(echo "$dt <= 13" | bc)" = 1 ]; then
        ok "-np $np ${mode:-immediate}, rank $skip skips: exit $rc after $(printf '%.1f' "$dt") s: $(printf '%s' "$msg" | cut -c1-100)..."
    else ko "-np $np ${mode:-immediate}, rank $skip skips an all-reduce (rc $rc after $(printf '%.1f' "$dt") s)" "$out"; fi
done

for spec in "2 1 rs reduce-scatter of bucket 0 (1000 floats)" "3 2 ag all-gather of the parameter shards (1000 floats)" \
            "2 1 ags all-gather of the parameter shards (1000 floats)" "2 1 ags,EMU_DEFER=1 all-gather of the parameter shards (1000 floats)"; do
    set -- $spec; np=$1; skip=$2; kind=${3%%,*}; mode=; [ "$kind" != "$3" ] && mode=${3#*,}; shift 3; what="$*"
    t0=$(date +%s.%N)
    out=$(env $mode timeout 60 mpirun --oversubscribe -np $np "$bin" --skip $skip --kind $kind 2>&1); rc=$?
    dt=$(echo "$(date +%s.%N) - $t0" | bc)
    msg=$(printf '%s\n' "$out" | grep -m1 -F "error: NCCL $what did not complete within 3 s")
    if [ $rc -ne 0 ] && [ $rc -ne 124 ] && [ -n "$msg" ] && printf '%s' "$msg" | grep -q "^\[rank [0-9]\]" \
       && ! printf '%s' "$msg" | grep -q "^\[rank $skip\]" && [ "$(echo "$dt <= 13" | bc)" = 1 ]; then
        ok "-np $np${mode:+ $mode}, rank $skip skips the $kind: exit $rc after $(printf '%.1f' "$dt") s: $(printf '%s' "$msg" | cut -c1-100)..."
    else ko "-np $np${mode:+ $mode}, rank $skip skips the $kind (rc $rc after $(printf '%.1f' "$dt") s)" "$out"; fi
done

echo "nccl on MPI ranks (emulated CUDA): $pass passed, $fail failed"
[ $fail -eq 0 ]
