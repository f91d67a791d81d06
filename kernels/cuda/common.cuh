// kernels/cuda/common.cuh — what every CUDA kernel family shares: headers, the backend
// context (stream, cuBLAS and cuBLASLt handles, compute dtype, scratch), error checks, launch sizing,
// warp reductions and the fp32 -> bf16/fp16 rounding store.
//
// Dialect (kernels/cuda/emu/README.md): every .cu here compiles with nvcc for sm_80/sm_90
// AND with g++ -include kernels/cuda/emu/cuda_emu.h, where it runs on the CPU. Hence:
// launches only through LAUNCH(...), no inline PTX, no CUB/Thrust, nothing under
// __CUDA_ARCH__, device functions in headers static/inline, barriers and full-mask
// shuffles in uniform control flow (whole warps exit together).
#ifndef MINGPT_CUDA_COMMON_CUH
#define MINGPT_CUDA_COMMON_CUH

#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cublas_v2.h>
#include <cublasLt.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "kernels/cuda/emu/launch.cuh"

extern "C" {
#include "kernels/backend.h"
}

// Dropout masks: the very functions the CPU backend uses, compiled for host and device.
#define MINGPT_HD static inline __host__ __device__
#include "kernels/dropout_rng.h"

// The key a kernel uses: k itself, or the DropoutKey k.dev points to in device memory (read
// when the kernel runs: a replayed graph gets the step's key, kernels/dropout_key.h).
static __device__ __forceinline__ DropoutKey dropout_key_at(const DropoutKey &k) {
    if (!k.dev) return k;
    DropoutKey r = *k.dev;
    r.dev = nullptr;
    return r;
}

// Global mask index of flat element i of rows of row_len elements (dropout.cu, layernorm.cu).
// One process ({key, 0, 1}): i itself, no division; otherwise a 32-bit division where it fits
// (64-bit integer division is a long instruction sequence on the GPU). All three give
// dropout_global_index.
static __device__ __forceinline__ uint64_t dropout_global_elem(const DropoutKey &k, size_t i, size_t row_len) {
    if (k.row0 == 0 && k.row_stride == 1) return (uint64_t)i;
    if (i <= 0xffffffffu && row_len <= 0xffffffffu) {
        const unsigned j = (unsigned)i / (unsigned)row_len;
        return dropout_global_index(k, (int64_t)j, (int64_t)row_len, (int64_t)((unsigned)i - j * (unsigned)row_len));
    }
    return dropout_global_index(k, (int64_t)(i / row_len), (int64_t)row_len, (int64_t)(i % row_len));
}

// ---------------------------------------------------------------- context
// Scratch slots: device buffers owned by the backend, grown on first use to the largest
// size asked for (so after the first training step nothing is allocated any more).
enum ScratchSlot {
    SCR_IN_LP,     // matmul input rounded to bf16/fp16
    SCR_W_LP,      // matmul weight rounded
    SCR_DOUT_LP,   // matmul output gradient rounded
    SCR_PART,      // partial column sums (bias / LayerNorm weight gradients); the bias gradient
                   // of a cuBLASLt BGRADB epilogue before it is added to dbias
    SCR_RED,       // sum-of-squares partials, finiteness flag
    SCR_Q, SCR_K, SCR_V,   // attention: q, k, v as (B,NH,T,hs), compute dtype
    SCR_ATTD,      // dropout(att) (B,NH,T,T), compute dtype
    SCR_Y,         // attention output per head (B,NH,T,hs) fp32
    SCR_DY,        // attention output gradient per head, compute dtype
    SCR_DPRE,      // gradient of the pre-softmax scores, compute dtype (bf16/fp16 only)
    SCR_DQ, SCR_DK, SCR_DV,  // fp32 (B,NH,T,hs)
    SCR_TOK,       // encoder backward: sorted (token, position) keys and bucket starts
    SCR_LT_WS,     // cuBLASLt workspace (CUDA_LT_WORKSPACE bytes)
    SCR_ADAMW,     // adamw_update_segments' segment table (adamw.cu), uploaded once per new content
    SCR_F32,       // fp32 values the cuBLASLt-less fallbacks need where an op's output or input is
                   // only its compute-dtype copy (matmul.cu: dpre, a dout given as dout_lp, matmul_forward's
                   // out_lp)
    SCR_COUNT
};

// The weight-cast cache (Backend.cast_weights, kernels/backend.h): `lp` is the flat parameter
// buffer [params, params + n) rounded to the compute dtype, valid for content `version`.
struct WeightCast {
    const float *params;         // the cached fp32 buffer; nullptr = no valid copy
    size_t n;
    uint64_t version;
    void *lp;                    // n elements of the compute dtype (capacity cap elements)
    size_t cap;
};

// Backend.upload_async's and download_async's staging: a ring of STAGE_SLOTS pinned buffers,
// each with the event recorded after its last copy (nullptr before the first). A training step
// uploads its inputs, its targets and its dropout keys, so a slot is reused a step later, its
// copy long done.
enum { STAGE_SLOTS = 4 };
struct StageRing {
    void *buf[STAGE_SLOTS];
    size_t bytes[STAGE_SLOTS];
    cudaEvent_t done[STAGE_SLOTS];
    int next;
};

struct CudaCtx {
    int device;                  // the CUDA device (cudaSetDevice) every call of this backend uses
    cudaStream_t stream;
    cublasHandle_t cublas;
    cublasLtHandle_t cublaslt;   // NULL: no cuBLASLt (cublasLtCreate failed): epilogues as kernels
    ComputeDtype dtype;          // matmul input precision
    bool tf32;                   // fp32 matmuls on TF32 tensor cores (Backend.set_matmul_precision)
    bool grad_overwrite;         // matmul backwards write (=) parameter gradients (Backend.set_grad_write)
    unsigned max_grid;           // cap on the grid of grid-stride kernels
    bool attention_cublas;       // no fused attention: unless MINGPT_CUDA_ATTENTION=fused
    void *scratch[SCR_COUNT];
    size_t scratch_bytes[SCR_COUNT];
    WeightCast wcast;
    uint64_t scratch_gen;        // bumped whenever cuda_scratch reallocates a slot (graph.cu)
    bool capturing;              // a graph capture is in progress on stream (graph.cu)
    // the pinned staging of Backend.upload_async (up) and download_async (down); the
    // downloads not yet delivered (n_pending, oldest first): slot and destination
    StageRing up, down;
    int n_pending;
    struct { void *dst; size_t bytes; int slot; } pending[STAGE_SLOTS];
    AdamWSegment *adamw_segs;    // host copy of the segments whose table SCR_ADAMW holds (adamw.cu)
    int adamw_nsegs;             // their count; 0: no table uploaded
    unsigned *ticket;            // device counter, 0 between launches: the last-block ticket of
                                 // layernorm_backward_kernel (layernorm.cu), which resets it
};

// Device buffer of at least `bytes` for `slot` (contents undefined). Aborts when the
// device is out of memory.
void *cuda_scratch(CudaCtx *c, int slot, size_t bytes);

// ---------------------------------------------------------------- errors
// A failed CUDA/cuBLAS call inside an op is a fatal error (the op has no error return):
// print what failed and where, and exit(1).
// Inside a graph capture (graph.cu) the message adds that MINGPT_CUDA_GRAPHS=0 runs without.
[[noreturn]] void cuda_fatal(const char *what, const char *detail, const char *file, int line);
extern thread_local bool cuda_graph_capturing;   // a capture is in progress on this thread (graph.cu)
#define CUDA_CHECK(x) do { cudaError_t e_ = (x); \
    if (e_ != cudaSuccess) cuda_fatal(#x, cudaGetErrorString(e_), __FILE__, __LINE__); } while (0)
#define CUBLAS_CHECK(x) do { cublasStatus_t s_ = (x); \
    if (s_ != CUBLAS_STATUS_SUCCESS) cuda_fatal(#x, cublasGetStatusString(s_), __FILE__, __LINE__); } while (0)
// After every launch: catches bad launch configurations immediately (no synchronisation).
#define LAUNCH_CHECK() CUDA_CHECK(cudaGetLastError())

// ---------------------------------------------------------------- launch sizing
#define BLOCK 256            // threads of the element-wise kernels
#define ROWS_PER_BLOCK 4     // warp-per-row kernels: 4 warps (128 threads) per block

static inline unsigned ceil_div(size_t a, size_t b) { return (unsigned)((a + b - 1) / b); }
// Grid of a grid-stride loop over n elements (n > 0).
static inline unsigned grid_for(const CudaCtx *c, size_t n) {
    size_t g = (n + BLOCK - 1) / BLOCK;
    return (unsigned)(g < c->max_grid ? g : c->max_grid);
}
#define GRID_STRIDE(i, n) \
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (n); i += (size_t)gridDim.x * blockDim.x)

// ---------------------------------------------------------------- device helpers
static __device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
static __device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
// Store an fp32 value as the compute dtype (round to nearest even).
static __device__ __forceinline__ void store_as(float *p, float x) { *p = x; }
static __device__ __forceinline__ void store_as(__nv_bfloat16 *p, float x) { *p = __float2bfloat16_rn(x); }
static __device__ __forceinline__ void store_as(__half *p, float x) { *p = __float2half_rn(x); }
// Read a compute-dtype value as fp32 (exact).
static __device__ __forceinline__ float load_f(const float *p) { return *p; }
static __device__ __forceinline__ float load_f(const __nv_bfloat16 *p) { return __bfloat162float(*p); }
static __device__ __forceinline__ float load_f(const __half *p) { return __half2float(*p); }

static inline size_t dtype_size(ComputeDtype d) { return d == DTYPE_FP32 ? 4 : 2; }

#endif
