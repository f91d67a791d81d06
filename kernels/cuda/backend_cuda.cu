// kernels/cuda/backend_cuda.cu — the Backend table (kernels/backend.h) on CUDA: memory via
// cudaMalloc/cudaMemcpy on one stream, one cuBLAS handle, scratch buffers owned by the
// backend (grown on first use, kept until destroy), the weight-cast cache (matmul.cu), ops
// dispatched to the kernel families.
// Exports backend_cuda_create (declared weak in kernels/backend.h: a build without CUDA
// links, and backend_select then reports that CUDA was not built in).
#include <stdarg.h>
#include <string.h>

#include "kernels/cuda/cuda_ops.cuh"


[[noreturn]] void cuda_fatal(const char *what, const char *detail, const char *file, int line) {
    fflush(stdout);
    fprintf(stderr, "mingpt: error: CUDA backend: %s failed: %s (%s:%d)%s\n", what, detail, file, line,
            cuda_graph_capturing ? " inside a CUDA graph capture (MINGPT_CUDA_GRAPHS=0 trains without graphs)" : "");
    exit(1);
}

void *cuda_scratch(CudaCtx *c, int slot, size_t bytes) {
    if (bytes > c->scratch_bytes[slot]) {
        if (c->capturing)   // (a graph's ops must have run once directly: graph.cu)
            cuda_fatal("cuda_scratch", "a scratch buffer would grow inside a graph capture", __FILE__, __LINE__);
        c->scratch_gen++;
        if (c->scratch[slot]) CUDA_CHECK(cudaFree(c->scratch[slot]));  // synchronises with pending work
        c->scratch[slot] = nullptr;
        c->scratch_bytes[slot] = 0;
        CUDA_CHECK(cudaMalloc(&c->scratch[slot], bytes));
        c->scratch_bytes[slot] = bytes;
    }
    return c->scratch[slot];
}

static CudaCtx *CX(Backend *be) { return (CudaCtx *)be->ctx; }
static int be_graph_run(Backend *be, void **graph, void (*fn)(void *ctx), void *ctx) {
    return cuda_graph_run(CX(be), graph, fn, ctx);
}
static void be_graph_free(Backend *be, void *graph) { cuda_graph_free(CX(be), graph); }

// ---------------------------------------------------------------- memory
static void *be_alloc(Backend *be, size_t bytes) {
    void *p = nullptr;
    if (cudaMalloc(&p, bytes ? bytes : 1) != cudaSuccess) {
        (void)cudaGetLastError();  // clear the sticky-free error state of the runtime
        return NULL;
    }
    CUDA_CHECK(cudaMemsetAsync(p, 0, bytes ? bytes : 1, CX(be)->stream));
    return p;
}
// Backend.mem_info: the device's free and total memory (the trainer's check before allocating).
static int be_mem_info(Backend *, size_t *free_bytes, size_t *total_bytes) {   // the current device is the backend's
    if (cudaMemGetInfo(free_bytes, total_bytes) == cudaSuccess) return 0;
    (void)cudaGetLastError();
    return 1;
}
// Backend.set_matmul_precision: TF32 tensor cores for the fp32 GEMMs queued from now on
// (cuda_gemm picks the compute type per call).
static void be_set_matmul_precision(Backend *be, int tf32) { CX(be)->tf32 = tf32 != 0; }
// Backend.set_grad_write: whether the matmul backwards queued from now on overwrite their
// parameter gradients (matmul.cu reads it per call).
static void be_set_grad_write(Backend *be, GradWrite mode) { CX(be)->grad_overwrite = mode == GRAD_OVERWRITE; }
// Every free drops the weight-cast copy: the size of the freed block is not known here, and a
// later allocation may reuse the cached buffer's addresses.
static void be_free(Backend *be, void *p) {
    if (!p) return;
    CX(be)->wcast.params = nullptr;
    CUDA_CHECK(cudaFree(p));
}
static void be_zero(Backend *be, void *p, size_t bytes) {
    cuda_cast_touch(CX(be), p, bytes);
    if (bytes) CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, CX(be)->stream));
}
static void be_upload(Backend *be, void *dst, const void *src, size_t bytes) {
    if (!bytes) return;
    cuda_cast_touch(CX(be), dst, bytes);
    CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, CX(be)->stream));
    CUDA_CHECK(cudaStreamSynchronize(CX(be)->stream));  // the caller may reuse src at once
}
// Through the pinned staging ring: waits only for the copy of the upload_async STAGE_SLOTS calls
// before (long done when a download came in between), never for the stream.
// The ring's next slot, at least `bytes` long: waits for the slot's previous copy (done long
// ago, or delivered already), allocates it the first time or larger; its index in *slot.
static void *stage_take(StageRing *r, size_t bytes, int *slot) {
    const int k = r->next;
    r->next = (k + 1) % STAGE_SLOTS;
    if (r->done[k]) CUDA_CHECK(cudaEventSynchronize(r->done[k]));
    else CUDA_CHECK(cudaEventCreate(&r->done[k]));
    if (bytes > r->bytes[k]) {
        if (r->buf[k]) CUDA_CHECK(cudaFreeHost(r->buf[k]));
        r->buf[k] = nullptr;
        r->bytes[k] = 0;
        CUDA_CHECK(cudaMallocHost(&r->buf[k], bytes));
        r->bytes[k] = bytes;
    }
    *slot = k;
    return r->buf[k];
}
static void stage_free(StageRing *r) {
    for (int k = 0; k < STAGE_SLOTS; k++) {
        if (r->buf[k]) cudaFreeHost(r->buf[k]);
        if (r->done[k]) cudaEventDestroy(r->done[k]);
    }
}
static void be_upload_async(Backend *be, void *dst, const void *src, size_t bytes) {
    if (!bytes) return;
    CudaCtx *c = CX(be);
    if (c->capturing) cuda_fatal("upload_async", "called inside a graph capture", __FILE__, __LINE__);
    int k;
    void *stage = stage_take(&c->up, bytes, &k);
    memcpy(stage, src, bytes);
    cuda_cast_touch(c, dst, bytes);
    CUDA_CHECK(cudaMemcpyAsync(dst, stage, bytes, cudaMemcpyHostToDevice, c->stream));
    CUDA_CHECK(cudaEventRecord(c->up.done[k], c->stream));
}
// Delivers every pending download_async: one wait, on the last copy's event (the copies are queued
// in order on the one stream, so the earlier ones are done by then; for nothing when the stream was
// synchronised after it), then each staging slot copied to its destination.
static void be_download_wait(Backend *be) {
    CudaCtx *c = CX(be);
    if (c->n_pending) CUDA_CHECK(cudaEventSynchronize(c->down.done[c->pending[c->n_pending - 1].slot]));
    for (int i = 0; i < c->n_pending; i++)
        memcpy(c->pending[i].dst, c->down.buf[c->pending[i].slot], c->pending[i].bytes);
    c->n_pending = 0;
}
static void be_download_async(Backend *be, void *dst, const void *src, size_t bytes) {
    if (!bytes) return;
    CudaCtx *c = CX(be);
    if (c->capturing) cuda_fatal("download_async", "called inside a graph capture", __FILE__, __LINE__);
    if (c->n_pending == STAGE_SLOTS) be_download_wait(be);   // every slot holds an undelivered copy
    int k;
    void *stage = stage_take(&c->down, bytes, &k);            // (its last copy was delivered)
    CUDA_CHECK(cudaMemcpyAsync(stage, src, bytes, cudaMemcpyDeviceToHost, c->stream));
    CUDA_CHECK(cudaEventRecord(c->down.done[k], c->stream));
    c->pending[c->n_pending].dst = dst;
    c->pending[c->n_pending].bytes = bytes;
    c->pending[c->n_pending].slot = k;
    c->n_pending++;
}
static void be_download(Backend *be, void *dst, const void *src, size_t bytes) {
    if (!bytes) return;
    CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, CX(be)->stream));
    CUDA_CHECK(cudaStreamSynchronize(CX(be)->stream));
}
static void be_destroy(Backend *be) {
    if (!be) return;
    CudaCtx *c = CX(be);
    if (c) {
        cudaStreamSynchronize(c->stream);
        for (int i = 0; i < SCR_COUNT; i++) if (c->scratch[i]) cudaFree(c->scratch[i]);
        if (c->ticket) cudaFree(c->ticket);
        if (c->wcast.lp) cudaFree(c->wcast.lp);
        stage_free(&c->up);
        stage_free(&c->down);
        free(c->adamw_segs);
        if (c->cublaslt) cublasLtDestroy(c->cublaslt);
        if (c->cublas) cublasDestroy(c->cublas);
        if (c->stream) cudaStreamDestroy(c->stream);
        free(c);
    }
    free(be);
}

// ---------------------------------------------------------------- ops
static void be_encoder_forward(Backend *be, float *out, const int32_t *inp, const float *wte,
                               const float *wpe, int B, int T, int C) {
    cuda_encoder_forward(CX(be), out, inp, wte, wpe, B, T, C);
}
static void be_encoder_backward(Backend *be, float *dwte, float *dwpe, const float *dout,
                                const int32_t *inp, int B, int T, int C) {
    cuda_encoder_backward(CX(be), dwte, dwpe, dout, inp, B, T, C);
}
static void be_layernorm_forward(Backend *be, float *out, float *mean, float *rstd, const float *inp,
                                 const float *weight, const float *bias, int N, int C) {
    cuda_layernorm_forward(CX(be), nullptr, out, nullptr, mean, rstd, inp, nullptr, weight, bias, N, C);
}
static void be_residual_layernorm_forward(Backend *be, float *res, float *out, float *mean, float *rstd,
                                          const float *a, const float *b, const float *weight,
                                          const float *bias, int N, int C) {
    cuda_layernorm_forward(CX(be), res, out, nullptr, mean, rstd, a, b, weight, bias, N, C);
}
static void be_layernorm_backward(Backend *be, float *dinp, float *dweight, float *dbias,
                                  const float *dout, const float *inp, const float *weight,
                                  const float *mean, const float *rstd, int N, int C) {
    cuda_layernorm_backward(CX(be), dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C);
}
static void be_matmul_forward(Backend *be, float *out, const float *inp, const float *weight,
                              const float *bias, int N, int C, int OC) {
    cuda_matmul_forward(CX(be), out, nullptr, inp, nullptr, weight, bias, N, C, OC);
}
static void be_matmul_gelu_forward(Backend *be, float *pre, float *out, const float *inp,
                                   const float *weight, const float *bias, int N, int C, int OC) {
    cuda_matmul_gelu_forward(CX(be), pre, out, nullptr, inp, nullptr, weight, bias, N, C, OC);
}
static void be_matmul_backward(Backend *be, float *dinp, float *dweight, float *dbias,
                               const float *dout, const float *inp, const float *weight,
                               int N, int C, int OC) {
    cuda_matmul_backward(CX(be), dinp, dweight, dbias, dout, nullptr, inp, nullptr, weight, N, C, OC);
}
// Backend.layernorm_forward_lp and the matmuls' _lp twins: the producer writes the operand
static void be_layernorm_forward_lp(Backend *be, float *res, float *out, void *out_lp, float *mean, float *rstd,
                                    const float *a, const float *b, const float *weight, const float *bias,
                                    int N, int C) {
    cuda_layernorm_forward(CX(be), res, out, out_lp, mean, rstd, a, b, weight, bias, N, C);
}
static void be_matmul_forward_lp(Backend *be, float *out, void *out_lp, const void *inp_lp, const float *weight,
                                 const float *bias, int N, int C, int OC) {
    cuda_matmul_forward(CX(be), out, out_lp, nullptr, inp_lp, weight, bias, N, C, OC);
}
static void be_matmul_gelu_forward_lp(Backend *be, float *pre, float *out, void *out_lp, const void *inp_lp,
                                      const float *weight, const float *bias, int N, int C, int OC) {
    cuda_matmul_gelu_forward(CX(be), pre, out, out_lp, nullptr, inp_lp, weight, bias, N, C, OC);
}
static void be_matmul_backward_lp(Backend *be, float *dinp, float *dweight, float *dbias, const float *dout,
                                  const void *dout_lp, const void *inp_lp, const float *weight, int N, int C,
                                  int OC) {
    cuda_matmul_backward(CX(be), dinp, dweight, dbias, dout, dout_lp, nullptr, inp_lp, weight, N, C, OC);
}
// The residual branches' dropout inside the LayerNorms (kernels/cuda/layernorm.cu)
static void be_residual_dropout_layernorm_forward(Backend *be, float *res, float *out, void *out_lp, float *mean,
                                                  float *rstd, const float *a, const float *b, const float *weight,
                                                  const float *bias, int N, int C, long row_len, float p,
                                                  DropoutKey key) {
    cuda_residual_dropout_layernorm_forward(CX(be), res, out, out_lp, mean, rstd, a, b, weight, bias, N, C,
                                            row_len, p, key);
}
static void be_layernorm_backward_dropout(Backend *be, float *dinp, float *dbranch, void *dbranch_lp,
                                          float *dweight, float *dbias, const float *dout, const float *inp,
                                          const float *weight, const float *mean, const float *rstd, int N,
                                          int C, long row_len, float p, DropoutKey key) {
    cuda_layernorm_backward_dropout(CX(be), dinp, dbranch, dbranch_lp, dweight, dbias, dout, inp, weight, mean,
                                    rstd, N, C, row_len, p, key);
}
static void be_attention_forward(Backend *be, float *out, float *att, const float *qkv,
                                 int B, int T, int C, int NH, float attn_p, DropoutKey key) {
    cuda_attention_forward(CX(be), out, nullptr, att, qkv, nullptr, B, T, C, NH, attn_p, key);
}
static void be_attention_forward_lp(Backend *be, float *out, void *out_lp, float *att, const float *qkv,
                                    const void *qkv_lp, int B, int T, int C, int NH, float attn_p, DropoutKey key) {
    cuda_attention_forward(CX(be), out, out_lp, att, qkv, qkv_lp, B, T, C, NH, attn_p, key);
}
static void be_attention_forward_cached(Backend *be, float *out, float *att, float *kcache, float *vcache,
                                        const float *qkv, int B, int p0, int Tn, int Tq, int T_max, int C, int NH) {
    cuda_attention_forward_cached(CX(be), out, att, kcache, vcache, qkv, B, p0, Tn, Tq, T_max, C, NH);
}
static void be_matmul_backward_dgelu(Backend *be, float *dpre, void *dpre_lp, float *dbias_pre, float *dweight,
                                     float *dbias, const float *dout, const void *dout_lp, const float *inp,
                                     const void *inp_lp, const float *weight, const float *pre, int N, int C, int OC) {
    cuda_matmul_backward_dgelu(CX(be), dpre, dpre_lp, dbias_pre, dweight, dbias, dout, dout_lp, inp, inp_lp, weight,
                               pre, N, C, OC);
}
static void be_attention_backward(Backend *be, float *dqkv, float *scratch, const float *dout,
                                  const float *qkv, const float *att, int B, int T, int C, int NH,
                                  float attn_p, DropoutKey key) {
    cuda_attention_backward(CX(be), dqkv, nullptr, scratch, dout, qkv, nullptr, att, B, T, C, NH, attn_p, key);
}
static void be_attention_backward_lp(Backend *be, float *dqkv, void *dqkv_lp, float *scratch, const float *dout,
                                     const float *qkv, const void *qkv_lp, const float *att, int B, int T, int C,
                                     int NH, float attn_p, DropoutKey key) {
    cuda_attention_backward(CX(be), dqkv, dqkv_lp, scratch, dout, qkv, qkv_lp, att, B, T, C, NH, attn_p, key);
}
// the fused attention's shapes: it reads q, k, v from qkv's copy
static int be_attention_takes_lp(const Backend *be, int T, int C, int NH) {
    return cuda_flash_attention_ok((const CudaCtx *)be->ctx, T, C, NH);
}
static void be_gelu_backward(Backend *be, float *dinp, const float *inp, const float *dout, long N) {
    cuda_gelu_backward(CX(be), dinp, inp, dout, N);
}
static void be_dropout_forward(Backend *be, float *out, const float *inp, long N, long row_len, float p,
                               DropoutKey key) {
    cuda_dropout_forward(CX(be), out, inp, N, row_len, p, key);
}
static void be_dropout_backward(Backend *be, float *dinp, const float *dout, long N, long row_len, float p,
                                DropoutKey key) {
    cuda_dropout_backward(CX(be), dinp, dout, N, row_len, p, key);
}
static void be_crossentropy_forward(Backend *be, float *losses, float *probs, const float *logits,
                                    const int32_t *targets, int N, int V) {
    cuda_crossentropy_forward(CX(be), losses, probs, logits, targets, N, V);
}
static void be_crossentropy_softmax_backward(Backend *be, float *dlogits, const float *probs,
                                             const int32_t *targets, int N, int V, float dloss) {
    cuda_crossentropy_softmax_backward(CX(be), dlogits, probs, targets, N, V, dloss);
}
static void be_adamw_update(Backend *be, float *p, const float *g, float *m, float *v, size_t n,
                            float beta1, float beta2, float eps, float decay_factor,
                            float step_size, float bc2_sqrt, float grad_scale) {
    cuda_cast_touch(CX(be), p, n * sizeof(float));
    cuda_adamw_update(CX(be), p, g, m, v, n, beta1, beta2, eps, decay_factor, step_size, bc2_sqrt, grad_scale);
}
static void be_adamw_update_segments(Backend *be, float *p, const float *g, float *m, float *v,
                                     const AdamWSegment *segs, int n_segs, float beta1, float beta2, float eps,
                                     float decay_factor, float step_size, float bc2_sqrt, float grad_scale) {
    for (int k = 0; k < n_segs; k++) cuda_cast_touch(CX(be), p + segs[k].offset, segs[k].n * sizeof(float));
    cuda_adamw_update_segments(CX(be), p, g, m, v, segs, n_segs, beta1, beta2, eps, decay_factor, step_size,
                               bc2_sqrt, grad_scale);
}
// (no cuda_cast_touch: inside a capture it would drop the weight-cast copy that the graph's
// forward reads; the caller changes the parameters' version when the update ran: Backend.optimizer_tail)
static void be_optimizer_tail(Backend *be, float *p, const float *g, float *m, float *v, size_t n,
                              const AdamWSegment *segs, int n_segs, float beta1, float beta2, float eps,
                              const float *losses, const int32_t *targets, size_t n_losses,
                              const OptimizerTailArgs *args, OptimizerTailResult *res) {
    cuda_optimizer_tail(CX(be), p, g, m, v, n, segs, n_segs, beta1, beta2, eps, losses, targets, n_losses, args,
                        res);
}
static double be_sum_squares(Backend *be, const float *x, size_t n) { return cuda_sum_squares(CX(be), x, n); }
static void be_scale(Backend *be, float *x, size_t n, float s) {
    cuda_cast_touch(CX(be), x, n * sizeof(float));
    cuda_scale(CX(be), x, n, s);
}
static void be_accumulate(Backend *be, float *acc, const float *x, size_t n, int copy) {
    cuda_cast_touch(CX(be), acc, n * sizeof(float));
    cuda_accumulate(CX(be), acc, x, n, copy);
}
static void be_cast_weights(Backend *be, const float *params, size_t n, uint64_t version) {
    cuda_cast_weights(CX(be), params, n, version);
}

static void be_crossentropy_forward_backward(Backend *be, float *losses, float *dlogits,
                                             const float *logits, const int32_t *targets, int N,
                                             int V, float dloss) {
    cuda_crossentropy_forward_backward(CX(be), losses, dlogits, logits, targets, N, V, dloss);
}

// ---------------------------------------------------------------- create
__attribute__((format(printf, 4, 5)))
static Backend *fail(Backend *be, char *err, size_t errlen, const char *fmt, ...) {
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    be_destroy(be);
    return NULL;
}

// device: any index; the backend runs on device % (visible device count), selected with
// cudaSetDevice before any other work (each data-parallel rank passes its local rank).
extern "C" Backend *backend_cuda_create(ComputeDtype matmul_dtype, int device, char *err, size_t errlen) {
    int ndev = 0;
    cudaError_t e = cudaGetDeviceCount(&ndev);
    if (e != cudaSuccess) {
        const char *hint = e == cudaErrorInsufficientDriver
            ? "the NVIDIA driver (libcuda.so) is missing or older than this CUDA runtime"
            : e == cudaErrorNoDevice ? "no NVIDIA GPU is visible" : "the CUDA driver could not be initialised";
        char detail[512];
        snprintf(detail, sizeof detail, "%s (%s)", cudaGetErrorString(e), cudaGetErrorName(e));
        (void)cudaGetLastError();
        return fail(NULL, err, errlen, "no usable CUDA device: cudaGetDeviceCount failed: %s: %s", detail, hint);
    }
    if (ndev < 1) return fail(NULL, err, errlen, "no usable CUDA device: the NVIDIA driver reports 0 GPUs");
    const int dev = device > 0 ? device % ndev : 0;
    cudaDeviceProp prop;
    if (cudaSetDevice(dev) != cudaSuccess || cudaGetDeviceProperties(&prop, dev) != cudaSuccess) {
        (void)cudaGetLastError();
        return fail(NULL, err, errlen, "no usable CUDA device: cannot select device %d (of %d, asked for %d)",
                    dev, ndev, device);
    }
    if (prop.major < 8)
        return fail(NULL, err, errlen, "CUDA device '%s' has compute capability %d.%d; mingpt's CUDA kernels "
                    "are built for sm_80 and sm_90 (compute capability 8.0 or newer)", prop.name, prop.major, prop.minor);

    Backend *be = (Backend *)calloc(1, sizeof *be);
    CudaCtx *c = (CudaCtx *)calloc(1, sizeof *c);
    if (!be || !c) { free(c); free(be); return fail(NULL, err, errlen, "CUDA backend: out of host memory"); }
    be->ctx = c;
    c->dtype = matmul_dtype;
    c->device = dev;
    c->max_grid = (unsigned)(prop.multiProcessorCount > 0 ? prop.multiProcessorCount : 1) * 16;
    // attention.cu's cuBLAS path for every shape unless MINGPT_CUDA_ATTENTION=fused asks for the
    // fused kernels (kernels/backend.h says why; backend_select has checked the value)
    const char *attn = getenv("MINGPT_CUDA_ATTENTION");
    c->attention_cublas = !(attn && strcmp(attn, "fused") == 0);
    if (cudaStreamCreate(&c->stream) != cudaSuccess)
        return fail(be, err, errlen, "CUDA backend: cudaStreamCreate failed");
    if (cudaMalloc(&c->ticket, sizeof *c->ticket) != cudaSuccess ||
        cudaMemset(c->ticket, 0, sizeof *c->ticket) != cudaSuccess) {
        c->ticket = NULL;
        (void)cudaGetLastError();
        return fail(be, err, errlen, "CUDA backend: cannot allocate a device counter (out of device memory?)");
    }
    cublasStatus_t s = cublasCreate(&c->cublas);
    if (s != CUBLAS_STATUS_SUCCESS) { c->cublas = NULL; return fail(be, err, errlen, "CUDA backend: cublasCreate failed: %s", cublasGetStatusString(s)); }
    cublasSetStream(c->cublas, c->stream);
    // FP32 mode is true fp32 (no TF32); low-precision inputs use tensor cores regardless.
    cublasSetMathMode(c->cublas, CUBLAS_DEFAULT_MATH);
    // cuBLASLt for the GEMMs with epilogues (matmul.cu); without it (or with
    // MINGPT_CUDA_EPILOGUES=off, kernels/backend.h) they fall back to cuBLAS and separate bias /
    // GELU / bias-gradient kernels
    const char *epi = getenv("MINGPT_CUDA_EPILOGUES");
    if ((epi && strcmp(epi, "off") == 0) || cublasLtCreate(&c->cublaslt) != CUBLAS_STATUS_SUCCESS) c->cublaslt = NULL;

    be->name = "cuda";
    be->matmul_dtype = matmul_dtype;
    be->host_memory = 0;
    be->alloc = be_alloc;
    be->free = be_free;
    be->zero = be_zero;
    be->upload = be_upload;
    be->upload_async = be_upload_async;
    be->download_async = be_download_async;
    be->download_wait = be_download_wait;
    be->download = be_download;
    be->destroy = be_destroy;
    be->encoder_forward = be_encoder_forward;
    be->encoder_backward = be_encoder_backward;
    be->layernorm_forward = be_layernorm_forward;
    be->residual_layernorm_forward = be_residual_layernorm_forward;
    be->layernorm_backward = be_layernorm_backward;
    be->residual_dropout_layernorm_forward = be_residual_dropout_layernorm_forward;
    be->layernorm_backward_dropout = be_layernorm_backward_dropout;
    be->matmul_forward = be_matmul_forward;
    be->matmul_gelu_forward = be_matmul_gelu_forward;
    be->matmul_backward = be_matmul_backward;
    be->matmul_backward_dgelu = be_matmul_backward_dgelu;
    if (matmul_dtype != DTYPE_FP32) {   // low-precision activation copies (kernels/backend.h)
        be->lp_size = dtype_size(matmul_dtype);
        be->layernorm_forward_lp = be_layernorm_forward_lp;
        be->attention_forward_lp = be_attention_forward_lp;
        be->attention_backward_lp = be_attention_backward_lp;
        be->attention_takes_lp = be_attention_takes_lp;
        be->matmul_forward_lp = be_matmul_forward_lp;
        be->matmul_gelu_forward_lp = be_matmul_gelu_forward_lp;
        be->matmul_backward_lp = be_matmul_backward_lp;
    }
    be->attention_forward = be_attention_forward;
    be->attention_backward = be_attention_backward;
    be->attention_forward_cached = be_attention_forward_cached;
    be->gelu_backward = be_gelu_backward;
    be->dropout_forward = be_dropout_forward;
    be->dropout_backward = be_dropout_backward;
    be->crossentropy_forward = be_crossentropy_forward;
    be->crossentropy_softmax_backward = be_crossentropy_softmax_backward;
    be->crossentropy_forward_backward = be_crossentropy_forward_backward;
    be->adamw_update = be_adamw_update;
    be->adamw_update_segments = be_adamw_update_segments;
    be->optimizer_tail = be_optimizer_tail;
    be->sum_squares = be_sum_squares;
    be->scale = be_scale;
    be->accumulate = be_accumulate;
    be->cast_weights = be_cast_weights;
    be->grad_comm_create = cuda_grad_comm_create;   // comm_nccl.cu
    be->mem_info = be_mem_info;
    be->set_matmul_precision = be_set_matmul_precision;
    be->set_grad_write = be_set_grad_write;
    be->graph_run = be_graph_run;
    be->graph_free = be_graph_free;
    return be;
}
