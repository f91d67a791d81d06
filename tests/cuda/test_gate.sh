#!/bin/sh
# tests/cuda/test_gate.sh — the dialect gate must reject each forbidden construct (one bad
# file per case in a scratch directory) and accept the same code written in the dialect.
here=$(dirname "$0")
tmp=$(mktemp -d) || exit 2
trap 'rm -rf "$tmp"' EXIT
pass=0; fail=0
case_() {  # name expect(0|1) body
    d="$tmp/$1"; mkdir -p "$d"; printf '%s\n' "$3" > "$d/k.cu"
    sh "$here/check_dialect.sh" "$d" > "$d/out" 2>&1; rc=$?
    if { [ "$2" = 0 ] && [ $rc -eq 0 ]; } || { [ "$2" = 1 ] && [ $rc -ne 0 ]; }; then pass=$((pass+1))
    else fail=$((fail+1)); echo "FAIL gate case $1 (expected $([ "$2" = 0 ] && echo accept || echo reject)):"; cat "$d/out"; fi
}
case_ triple_chevron 1 'void f() { k<<<1, 32>>>(p); }'
case_ inline_ptx     1 '__device__ int lane() { int l; asm volatile("mov.u32 %0, %%laneid;" : "=r"(l)); return l; }'
case_ gnu_asm        1 '__device__ void f() { __asm__("nop"); }'
case_ cub            1 '#include <cub/cub.cuh>'
case_ thrust         1 'void f() { thrust::sort(a, b); }'
case_ cuda_arch      1 '#if __CUDA_ARCH__ >= 800
#endif'
case_ extern_smem    1 '__global__ void k(float *o) { extern __shared__ float buf[]; o[0] = buf[0]; }'
case_ mma_ptx        1 '__device__ void f() { const char *s = "ok"; (void)s; } // then: mma.sync.aligned.m16n8k16
void g() { mma.sync(d, a, b, c); }'
case_ wgmma          1 'void f() { wgmma_fence(); }'
case_ wmma_ok        0 '#include <mma.h>
__device__ void f(float *p) { nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float> c; nvcuda::wmma::fill_fragment(c, 0.0f); nvcuda::wmma::store_matrix_sync(p, c, 16, nvcuda::wmma::mem_row_major); }'
case_ in_comment     0 '// never k<<<1,1>>>(), asm, thrust::, __CUDA_ARCH__
/* nor <<< in a block
   comment */ void f() { LAUNCH(k, 1, 32)(p); const char *s = "<<< in a string"; (void)s; }'
case_ dialect_ok     0 'void f() { LAUNCH((k<float>), dim3(2, 3), 128, 0, st)(p, n); int assembly = 0; (void)assembly; }'
echo "gate self-test: $pass passed, $fail failed"
[ $fail -eq 0 ]
