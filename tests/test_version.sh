#!/usr/bin/env bash
# mingpt --version (checkpoint/version.h): Hydra's line, mingpt's version and the git
# commit it was built from, the CPU backend, and the versions the CUDA backend library (real or
# emulated) and the MPI library were compiled with, checked against the headers / tools
# themselves; "library not found" when a library is missing.
cd "$(dirname "$0")/.." && source tests/lib.sh
REPO=$PWD
M=$MINGPT
BDIR=${B:-build}
out=$($M --version 2>&1); rc=$?
[ $rc -eq 0 ] && ok "--version exits 0" || bad "--version exits 0 (rc $rc)" "$out"
[ "$(sed -n 1p <<<"$out")" = "Hydra 1.3.2 (mingpt)" ] && ok "Hydra's line first" || bad "Hydra's line first" "$out"
ver=$(sed -n 's/^#define MINGPT_VERSION "\(.*\)"$/\1/p' checkpoint/version.h)
line2=$(sed -n 2p <<<"$out")
if git -C "$REPO" rev-parse --git-dir >/dev/null 2>&1; then
  # the commit the binary was built from is the checkout's (make test builds first)
  want=$(git -C "$REPO" describe --always)
  [[ "$line2" == "$ver (commit $want)" || "$line2" == "$ver (commit $want-dirty)" ]] \
    && ok "mingpt's version and commit: $line2" || bad "mingpt's version and commit" "got '$line2', want '$ver (commit $want[-dirty])'"
else
  [ "$line2" = "$ver (commit unknown)" ] && ok "outside git: commit unknown" || bad "outside git: commit unknown" "$line2"
fi
OMP_NUM_THREADS=3 $M --version | grep -Eq '^CPU: .*, 3 OpenMP threads$' && ok "CPU line with the thread count" \
  || bad "CPU line with the thread count" "$(OMP_NUM_THREADS=3 $M --version)"
OMP_NUM_THREADS=1 $M --version | grep -Eq '^CPU: .*, 1 OpenMP thread$' && ok "one thread: 1 OpenMP thread (singular)" \
  || bad "one thread: 1 OpenMP thread" "$(OMP_NUM_THREADS=1 $M --version)"
grep -Eq '^GEMM: OpenBLAS [0-9.]+' <<<"$out" && ok "GEMM line (BLAS)" || bad "GEMM line (BLAS)" "$out"

# CUDA: the versions in the headers the library was compiled with
NVCC=$(command -v nvcc || true)
if [ -n "$NVCC" ] && [ -f "$BDIR/emu/libmingpt_cuda.so" ]; then
  INC=$(dirname "$(dirname "$(readlink -f "$NVCC")")")/include
  def() { sed -n "s/^#define $1 *\([0-9]*\).*/\1/p" "$INC/$2" | head -1; }
  rt=$(def CUDART_VERSION cuda_runtime_api.h)
  want="toolkit $((rt / 1000)).$((rt % 1000 / 10)), cuBLAS $(def CUBLAS_VER_MAJOR cublas_api.h).$(def CUBLAS_VER_MINOR cublas_api.h).$(def CUBLAS_VER_PATCH cublas_api.h), NCCL $(def NCCL_MAJOR nccl.h).$(def NCCL_MINOR nccl.h).$(def NCCL_PATCH nccl.h)"
  EMU=$REPO/$BDIR/emu/libmingpt_cuda.so
  got=$(MINGPT_CUDA_LIB=$EMU $M --version | grep '^CUDA: ')
  [ "$got" = "CUDA: $want, CUDA emulation layer build (runs on the CPU) ($EMU)" ] \
    && ok "CUDA line of the emulated backend: $want" || bad "CUDA line of the emulated backend" "got:  $got
want: CUDA: $want, CUDA emulation layer build ..."
  if [ -f "$BDIR/libmingpt_cuda.so" ]; then  # the nvcc build: loaded without a GPU or driver
    grep -Fxq "CUDA: $want, nvcc build for sm_80/sm_90 ($(readlink -f "$BDIR/libmingpt_cuda.so"))" <<<"$out" \
      && ok "CUDA line of the nvcc backend" || bad "CUDA line of the nvcc backend" "$(grep CUDA <<<"$out")"
  fi
else
  grep -Eq '^CUDA: (not built|library not found: )' <<<"$out" && ok "CUDA not built" || bad "CUDA not built" "$out"
fi
got=$(MINGPT_CUDA_LIB=$WORK/none.so $M --version | grep '^CUDA: ')
[ "$got" = "CUDA: library not found: $WORK/none.so" ] && ok "CUDA: library not found" || bad "CUDA: library not found" "$got"

# MPI: the Open MPI that mpirun reports
if command -v mpirun >/dev/null && [ -f "$BDIR/libmingpt_mpi.so" ]; then
  ompi=$(mpirun --version 2>/dev/null | sed -n 's/^mpirun (Open MPI) \([0-9.]*\).*/\1/p')
  grep -Eq "^MPI: Open MPI $ompi, MPI [0-9]+\.[0-9]+ \(.*libmingpt_mpi.so\)$" <<<"$out" \
    && ok "MPI line: Open MPI $ompi" || bad "MPI line: Open MPI $ompi" "$(grep MPI <<<"$out")"
fi
got=$(MINGPT_MPI_LIB=$WORK/none.so $M --version | grep '^MPI: ')
[ "$got" = "MPI: library not found: $WORK/none.so" ] && ok "MPI: library not found" || bad "MPI: library not found" "$got"
finish
