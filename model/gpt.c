// model/gpt.c — minGPT's GPT: parameter layout, init, forward and backward through the Backend.
#include "model/gpt.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/dropout_rng.h"
#include "kernels/fatal.h"

// ============================================================================
// Parameter layout
// ============================================================================
// Every tensor's shape is a multiple of C (n_embd) or one of V / block_size. The
// tables below drive the flat layout, init, weight-decay groups and the pointer views,
// so no per-layer offset arithmetic is written twice.

enum { DIM_NONE, DIM_V, DIM_BLOCK, DIM_C, DIM_3C, DIM_4C };
enum { INIT_NORMAL, INIT_PROJ, INIT_ONE, INIT_ZERO };

typedef struct {
    const char *name;
    int rows, cols;       // DIM_* (cols DIM_NONE = vector)
    int init;             // INIT_*
    bool decay;
    size_t member;        // offsetof into BlockParams / GPTParams
} TensorSpec;

static const TensorSpec BLOCK_TENSORS[] = {
    {"ln_1.weight",        DIM_C,  DIM_NONE, INIT_ONE,    false, offsetof(BlockParams, ln_1_w)},
    {"ln_1.bias",          DIM_C,  DIM_NONE, INIT_ZERO,   false, offsetof(BlockParams, ln_1_b)},
    {"attn.c_attn.weight", DIM_3C, DIM_C,    INIT_NORMAL, true,  offsetof(BlockParams, c_attn_w)},
    {"attn.c_attn.bias",   DIM_3C, DIM_NONE, INIT_ZERO,   false, offsetof(BlockParams, c_attn_b)},
    {"attn.c_proj.weight", DIM_C,  DIM_C,    INIT_PROJ,   true,  offsetof(BlockParams, attn_proj_w)},
    {"attn.c_proj.bias",   DIM_C,  DIM_NONE, INIT_ZERO,   false, offsetof(BlockParams, attn_proj_b)},
    {"ln_2.weight",        DIM_C,  DIM_NONE, INIT_ONE,    false, offsetof(BlockParams, ln_2_w)},
    {"ln_2.bias",          DIM_C,  DIM_NONE, INIT_ZERO,   false, offsetof(BlockParams, ln_2_b)},
    {"mlp.c_fc.weight",    DIM_4C, DIM_C,    INIT_NORMAL, true,  offsetof(BlockParams, c_fc_w)},
    {"mlp.c_fc.bias",      DIM_4C, DIM_NONE, INIT_ZERO,   false, offsetof(BlockParams, c_fc_b)},
    {"mlp.c_proj.weight",  DIM_C,  DIM_4C,   INIT_PROJ,   true,  offsetof(BlockParams, mlp_proj_w)},
    {"mlp.c_proj.bias",    DIM_C,  DIM_NONE, INIT_ZERO,   false, offsetof(BlockParams, mlp_proj_b)},
};
#define N_BLOCK_TENSORS ((int)(sizeof BLOCK_TENSORS / sizeof BLOCK_TENSORS[0]))

// Tensors before the blocks, then after them.
static const TensorSpec HEAD_TENSORS[] = {
    {"transformer.wte.weight", DIM_V,     DIM_C, INIT_NORMAL, false, offsetof(GPTParams, wte)},
    {"transformer.wpe.weight", DIM_BLOCK, DIM_C, INIT_NORMAL, false, offsetof(GPTParams, wpe)},
};
static const TensorSpec TAIL_TENSORS[] = {
    {"transformer.ln_f.weight", DIM_C, DIM_NONE, INIT_ONE,    false, offsetof(GPTParams, ln_f_w)},
    {"transformer.ln_f.bias",   DIM_C, DIM_NONE, INIT_ZERO,   false, offsetof(GPTParams, ln_f_b)},
    {"lm_head.weight",          DIM_V, DIM_C,    INIT_NORMAL, true,  offsetof(GPTParams, lm_head_w)},
};
#define N_HEAD_TENSORS 2
#define N_TAIL_TENSORS 3

static int dim_size(const GPTShape *s, int d) {
    switch (d) {
    case DIM_V: return s->vocab_size;
    case DIM_BLOCK: return s->block_size;
    case DIM_C: return s->n_embd;
    case DIM_3C: return 3 * s->n_embd;
    case DIM_4C: return 4 * s->n_embd;
    default: return 1;
    }
}

static void add_tensor(const GPTShape *s, const TensorSpec *spec, const char *prefix,
                       ParamTensor *out, int *n, size_t *offset) {
    if (out) {
        ParamTensor *t = &out[*n];
        snprintf(t->name, sizeof t->name, "%s%s", prefix, spec->name);
        t->rows = dim_size(s, spec->rows);
        t->cols = dim_size(s, spec->cols);
        t->numel = (size_t)t->rows * t->cols;
        t->offset = *offset;
        t->decay = spec->decay;
        t->init_std = spec->init == INIT_NORMAL ? 0.02f
                    : spec->init == INIT_PROJ ? 0.02f / sqrtf(2.0f * s->n_layer) : 0.0f;
        t->init_value = spec->init == INIT_ONE ? 1.0f : 0.0f;
        *offset += t->numel;
    }
    (*n)++;
}

uint64_t gpt_num_params(const GPTShape *s) {
    // Bounded above: V*C <= 2^39, per layer 12C^2 + 13C < 2^40, times L <= 2^12: no uint64 overflow.
    const uint64_t V = (uint64_t)s->vocab_size, T = (uint64_t)s->block_size, C = (uint64_t)s->n_embd;
    return V * C + T * C + (uint64_t)s->n_layer * (12 * C * C + 13 * C) + 2 * C + V * C;
}

int gpt_shape_check(const GPTShape *s, size_t *num_params, char *err, size_t errlen) {
    const struct { const char *name; int v; long max; } dims[] = {
        { "vocab_size", s->vocab_size, GPT_MAX_VOCAB }, { "block_size", s->block_size, GPT_MAX_BLOCK },
        { "n_layer", s->n_layer, GPT_MAX_LAYER },       { "n_head", s->n_head, GPT_MAX_EMBD },
        { "n_embd", s->n_embd, GPT_MAX_EMBD },
    };
    for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++)
        if (dims[i].v < 1 || dims[i].v > dims[i].max) {
            snprintf(err, errlen, "model: %s is %d; it must be in [1, %ld]", dims[i].name, dims[i].v, dims[i].max);
            return 1;
        }
    if (s->n_embd % s->n_head != 0) {
        snprintf(err, errlen, "model: n_embd (%d) must be divisible by n_head (%d)", s->n_embd, s->n_head);
        return 1;
    }
    const uint64_t n = gpt_num_params(s);
    if (n > GPT_MAX_PARAMS) {
        snprintf(err, errlen, "model: %llu parameters is more than mingpt's limit of %llu (n_layer %d, n_embd %d)",
                 (unsigned long long)n, (unsigned long long)GPT_MAX_PARAMS, s->n_layer, s->n_embd);
        return 1;
    }
    if (num_params) *num_params = (size_t)n;
    return 0;
}

int gpt_param_table(const GPTShape *s, ParamTensor *out) {
    int n = 0;
    size_t offset = 0;
    char prefix[48];
    for (int i = 0; i < N_HEAD_TENSORS; i++) add_tensor(s, &HEAD_TENSORS[i], "", out, &n, &offset);
    for (int l = 0; l < s->n_layer; l++) {
        snprintf(prefix, sizeof prefix, "transformer.h.%d.", l);
        for (int i = 0; i < N_BLOCK_TENSORS; i++) add_tensor(s, &BLOCK_TENSORS[i], prefix, out, &n, &offset);
    }
    for (int i = 0; i < N_TAIL_TENSORS; i++) add_tensor(s, &TAIL_TENSORS[i], "", out, &n, &offset);
    return n;
}

#define MEMBER(base, off) (*(float **)((char *)(base) + (off)))

// Points the views of `p` into `base` following the table order of gpt_param_table.
static void bind_params(const GPT *m, float *base, GPTParams *p) {
    int k = 0;
    for (int i = 0; i < N_HEAD_TENSORS; i++, k++) MEMBER(p, HEAD_TENSORS[i].member) = base + m->tensors[k].offset;
    for (int l = 0; l < m->shape.n_layer; l++)
        for (int i = 0; i < N_BLOCK_TENSORS; i++, k++)
            MEMBER(&p->h[l], BLOCK_TENSORS[i].member) = base + m->tensors[k].offset;
    for (int i = 0; i < N_TAIL_TENSORS; i++, k++) MEMBER(p, TAIL_TENSORS[i].member) = base + m->tensors[k].offset;
}

// ============================================================================
// Activation layout: one buffer, carved in order. A first pass with base == NULL
// only counts.
// ============================================================================
typedef struct { float *base; size_t used; } Bump;

static float *take(Bump *b, size_t n) {
    float *p = b->base ? b->base + b->used : NULL;
    b->used += n;
    return p;
}

// With a backend that has gelu_forward, the GELU outputs are not kept: every block's
// fch_gelu is the backward scratch dfch (free during the forward pass, and in the backward
// until gelu_backward of the same block), refilled from fch when the backward needs it.
static bool gelu_recomputed(const Backend *be) { return be && be->gelu_forward; }

// Bytes per element of the low-precision copies of the LayerNorm and attention outputs in the
// training layouts (0: none, the fp32 outputs are kept): the backend's lp_size when it has the
// *_lp ops and its matmuls run in low precision (kernels/backend.h).
static size_t lp_size(const Backend *be) {
    return be && be->matmul_dtype != DTYPE_FP32 && be->lp_size && be->layernorm_forward_lp && be->attention_forward_lp &&
           be->matmul_forward_lp && be->matmul_gelu_forward_lp && be->matmul_backward_lp ? be->lp_size : 0;
}

// The MLP's GELU output and c_fc's output gradient kept only as copies (BlockActs.fch_gelu_lp,
// GPTGradScratch.dfch_lp): with the *_lp ops and matmul_backward_dgelu, whose epilogue writes the
// gradient's copy. The CPU backend (no fused op) keeps its fp32 GELU outputs and separate calls.
static bool gelu_lp(const Backend *be) { return lp_size(be) && be->matmul_backward_dgelu; }

// attn.c_attn's output kept only as its copy (BlockActs.qkv_lp): with the *_lp ops, where the
// backend's attention forward and backward read q, k, v from the copy for this shape.
static bool qkv_lp_taken(const Backend *be, size_t T, size_t C, size_t NH) {
    return lp_size(be) && be->attention_backward_lp && be->attention_takes_lp &&
           be->attention_takes_lp(be, (int)T, (int)C, (int)NH);
}

// A low-precision copy of n elements of lp bytes each, 16-byte aligned (cuBLASLt's preference).
static void *take_lp(Bump *b, size_t n, size_t lp) {
    b->used = (b->used + 3) / 4 * 4;
    return take(b, (n * lp + 15) / 16 * 4);
}

// What an activation layout keeps (see GPT):
//   ACTS_TRAIN       every layer's BlockActs, plus the backward's gradient scratch;
//   ACTS_CHECKPOINT  one working set of BlockActs shared by every layer, res_3 per layer, scratch;
//   ACTS_INFER       one working set, res_3 included, no scratch (forward only).
typedef enum { ACTS_TRAIN, ACTS_CHECKPOINT, ACTS_INFER } ActsMode;

// Carves the activations of a (B,T) batch in `mode` from base; returns the floats used. With
// base == NULL it only counts; a->h (n_layer entries) and g may then be NULL.
// lp: lp_size (training layouts only; the inference layout, whose ops include the cached
// attention, keeps the fp32 LayerNorm and attention outputs).
static size_t layout_acts(const GPTShape *s, size_t B, size_t T, const Backend *be, bool gelu_rec, size_t lp,
                          bool glp, ActsMode mode, float *base, GPTActs *a, GPTGradScratch *g) {
    const size_t C = s->n_embd, NH = s->n_head, V = s->vocab_size, L = s->n_layer;
    const size_t BT = B * T, BTC = BT * C;
    Bump b = { base, 0 };
    GPTActs a_count = {0};
    GPTGradScratch g_count;
    if (!a) a = &a_count;
    if (!g) g = &g_count;
    if (mode == ACTS_INFER) lp = 0;
    if (!lp) glp = false;
    if (glp) gelu_rec = false;   // the copy is kept per layer: nothing to recompute
    const size_t att_n = attention_att_floats(be ? be->matmul_dtype : DTYPE_FP32, B, T, C, NH);
    // attn.c_attn's output gradient only as the rounded copy the attention backward writes
    const bool dqkv_lp = lp && be && be->attention_backward_lp;
    const bool qkv_lp = lp && qkv_lp_taken(be, T, C, NH);   // lp is 0 in ACTS_INFER
    a->encoded = take(&b, BTC);
    // a block's working set: one per layer in ACTS_TRAIN, else one for all
    const size_t n_sets = mode == ACTS_TRAIN ? L : 1;
    for (size_t l = 0; l < n_sets; l++) {
        BlockActs h;
        h.ln_1 = lp ? NULL : take(&b, BTC); h.ln_1_mean = take(&b, BT); h.ln_1_rstd = take(&b, BT);
        h.ln_1_lp = lp ? take_lp(&b, BTC, lp) : NULL;
        h.qkv = qkv_lp ? NULL : take(&b, 3 * BTC);
        h.qkv_lp = qkv_lp ? take_lp(&b, 3 * BTC, lp) : NULL;
        h.att = take(&b, att_n);
        h.atty = lp ? NULL : take(&b, BTC);
        h.atty_lp = lp ? take_lp(&b, BTC, lp) : NULL;
        h.res_2 = take(&b, BTC);
        h.ln_2 = lp ? NULL : take(&b, BTC); h.ln_2_mean = take(&b, BT); h.ln_2_rstd = take(&b, BT);
        h.ln_2_lp = lp ? take_lp(&b, BTC, lp) : NULL;
        h.fch = take(&b, 4 * BTC);
        h.fch_gelu = glp || (gelu_rec && mode != ACTS_INFER) ? NULL : take(&b, 4 * BTC);   // else dfch, below
        h.fch_gelu_lp = glp ? take_lp(&b, 4 * BTC, lp) : NULL;
        h.res_3 = mode == ACTS_CHECKPOINT ? NULL : take(&b, BTC);                  // else per layer, below
        if (a->h && mode == ACTS_TRAIN) a->h[l] = h;
        else if (a->h) for (size_t k = 0; k < L; k++) a->h[k] = h;
    }
    if (mode == ACTS_CHECKPOINT)
        for (size_t l = 0; l < L; l++) {
            float *res_3 = take(&b, BTC);
            if (a->h) a->h[l].res_3 = res_3;
        }
    a->ln_f = lp ? NULL : take(&b, BTC); a->ln_f_mean = take(&b, BT); a->ln_f_rstd = take(&b, BT);
    a->ln_f_lp = lp ? take_lp(&b, BTC, lp) : NULL;
    a->logits = take(&b, BT * V);
    a->probs = take(&b, BT * V);
    a->losses = take(&b, BT);
    a->branch = take(&b, BTC);
    if (mode == ACTS_INFER) return b.used;
    g->dres = take(&b, BTC);
    // with lp, 16-byte aligned: it may hold a branch's gradient as the c_proj matmul's rounded
    // operand instead (layernorm_backward_dropout's dbranch_lp, gpt_backward)
    g->dbranch = lp ? take_lp(&b, BTC, sizeof(float)) : take(&b, BTC);
    g->dln = take(&b, BTC);
    g->datty = take(&b, BTC);
    g->dqkv = dqkv_lp ? NULL : take(&b, 3 * BTC);
    g->dqkv_lp = dqkv_lp ? take_lp(&b, 3 * BTC, lp) : NULL;
    g->datt = take(&b, B * NH * T * T);
    g->dfch = take(&b, 4 * BTC);
    g->dfch_gelu = take(&b, 4 * BTC);
    g->dfch_lp = glp ? (void *)g->dfch_gelu : NULL;   // 4*BTC lp-byte elements fit in 4*BTC floats
    if (gelu_rec && a->h)
        for (size_t l = 0; l < L; l++) a->h[l].fch_gelu = g->dfch;
    return b.used;
}

static ActsMode train_mode(const GPTBuildOptions *opt) {
    return opt && opt->activation_checkpointing ? ACTS_CHECKPOINT : ACTS_TRAIN;
}

size_t gpt_count_acts(const GPTShape *s, int B, int T, const Backend *be, const GPTBuildOptions *opt) {
    return layout_acts(s, (size_t)B, (size_t)T, be, gelu_recomputed(be), lp_size(be), gelu_lp(be), train_mode(opt),
                       NULL, NULL, NULL);
}

// ============================================================================
// Build / free / init
// ============================================================================
int gpt_check_build(const GPTShape *s, int B, int T, size_t *num_params, char *err, size_t errlen) {
    if (gpt_shape_check(s, num_params, err, errlen)) return 1;
    if (B < 1 || T < 1 || T > s->block_size) {
        snprintf(err, errlen, "model: batch (%d, %d) must have 1 <= T <= block_size (%d)", B, T, s->block_size);
        return 1;
    }
    // Every size below is counted in size_t, but B*T indexes rows as an int in the kernels,
    // and the activation count must not wrap: bound both before layout_acts (an upper
    // estimate in double: (B,T,C)-sized buffers, attention (B,NH,T,T) twice, logits twice).
    const double BT = (double)B * T, L = s->n_layer;
    const double acts = BT * s->n_embd * (24.0 * L + 16.0) + 2.0 * BT * T * s->n_head * L + 2.0 * BT * s->vocab_size;
    if (BT > INT_MAX || acts > 0x1p40) {
        snprintf(err, errlen, "model: a batch of (%d, %d) needs %.3g activation floats; the limits are B*T <= %d "
                 "and 2^40 floats", B, T, acts, INT_MAX);
        return 1;
    }
    float p[3] = { s->embd_pdrop, s->resid_pdrop, s->attn_pdrop };
    for (int i = 0; i < 3; i++)
        if (!(p[i] >= 0.0f && p[i] < 1.0f)) {
            snprintf(err, errlen, "model: dropout probabilities must be in [0, 1)");
            return 1;
        }
    return 0;
}

int gpt_build_with(GPT *m, const GPTShape *s, int B, int T, Backend *be, const GPTBuildOptions *opt,
                   char *err, size_t errlen) {
    memset(m, 0, sizeof *m);
    if (gpt_check_build(s, B, T, NULL, err, errlen)) return 1;
    m->shape = *s;
    m->be = be;
    m->args = GPT_STEP_ARGS_DEFAULT;
    m->B = B;
    m->T = T;
    m->checkpointing = train_mode(opt) == ACTS_CHECKPOINT;
    const bool gelu_rec = gelu_recomputed(be);
    const size_t lp = lp_size(be);
    const bool glp = gelu_lp(be);
    m->num_acts = layout_acts(s, (size_t)B, (size_t)T, be, gelu_rec, lp, glp, train_mode(opt), NULL, NULL, NULL);
    // The evaluation batch: as many rows as the inference layout fits in the same floats (every
    // term of a layout is proportional to B; one row of it is smaller than a training row).
    const size_t infer_row = layout_acts(s, 1, (size_t)T, be, gelu_rec, 0, false, ACTS_INFER, NULL, NULL, NULL);
    const size_t rows = m->num_acts / infer_row, max_rows = (size_t)INT_MAX / (size_t)T;
    m->B_infer = (int)(rows < max_rows ? rows : max_rows);
    if (m->B_infer < B) {   // cannot happen: a training layout holds at least a whole working set per row
        snprintf(err, errlen, "model: internal error: the inference layout fits %d rows, fewer than the batch %d",
                 m->B_infer, B);
        return 1;
    }
    const size_t io_tokens = (size_t)m->B_infer * T;
    m->n_tensors = gpt_param_table(s, NULL);
    m->tensors = calloc(m->n_tensors, sizeof *m->tensors);
    m->params.h = calloc(s->n_layer, sizeof(BlockParams));
    m->grads.h = calloc(s->n_layer, sizeof(BlockParams));
    m->acts.h = calloc(s->n_layer, sizeof(BlockActs));
    m->infer.h = calloc(s->n_layer, sizeof(BlockActs));
    m->host_losses = calloc(io_tokens, sizeof(float));
    if (!m->tensors || !m->params.h || !m->grads.h || !m->acts.h || !m->infer.h || !m->host_losses) goto oom;
    gpt_param_table(s, m->tensors);
    const ParamTensor *last = &m->tensors[m->n_tensors - 1];
    m->num_params = last->offset + last->numel;
    m->params_memory = be->alloc(be, m->num_params * sizeof(float));
    const bool own_grads = !(opt && opt->no_grad_buffer);
    if (own_grads) m->grads_memory = be->alloc(be, m->num_params * sizeof(float));
    m->acts_memory = be->alloc(be, m->num_acts * sizeof(float));
    m->inputs = be->alloc(be, io_tokens * sizeof(int32_t));
    m->targets = be->alloc(be, io_tokens * sizeof(int32_t));
    if (!m->params_memory || (own_grads && !m->grads_memory) || !m->acts_memory || !m->inputs || !m->targets) goto oom;
    bind_params(m, m->params_memory, &m->params);
    if (own_grads) bind_params(m, m->grads_memory, &m->grads);
    layout_acts(s, (size_t)B, (size_t)T, be, gelu_rec, lp, glp, train_mode(opt), m->acts_memory, &m->acts, &m->scratch);
    layout_acts(s, (size_t)m->B_infer, (size_t)T, be, gelu_rec, 0, false, ACTS_INFER, m->acts_memory, &m->infer, NULL);
    return 0;
oom:
    snprintf(err, errlen, "model: out of %s memory (%zu parameters, %zu activation floats)",
             be->name, m->num_params, m->num_acts);
    gpt_free(m);
    return 1;
}

int gpt_build_on(GPT *m, const GPTShape *s, int B, int T, Backend *be, char *err, size_t errlen) {
    return gpt_build_with(m, s, B, T, be, NULL, err, errlen);
}

int gpt_build(GPT *m, const GPTShape *s, int B, int T, char *err, size_t errlen) {
    Backend *be = backend_cpu_create(DTYPE_FP32);
    if (!be) { snprintf(err, errlen, "model: out of memory"); return 1; }
    if (gpt_build_on(m, s, B, T, be, err, errlen)) { be->destroy(be); return 1; }
    m->owned_be = be;
    return 0;
}

void gpt_free(GPT *m) {
    Backend *be = m->be;
    free(m->tensors);
    free(m->params.h);
    free(m->grads.h);
    free(m->acts.h);
    free(m->infer.h);
    free(m->host_losses);
    free(m->drop_keys_host);
    if (be) {
        for (int k = 0; k < m->n_graphs; k++) if (be->graph_free) be->graph_free(be, m->graphs[k].graph);
        be->free(be, m->params_memory);
        be->free(be, m->grads_memory);
        be->free(be, m->acts_memory);
        be->free(be, m->inputs);
        be->free(be, m->targets);
        be->free(be, m->drop_keys_dev);
    }
    if (m->owned_be) m->owned_be->destroy(m->owned_be);
    memset(m, 0, sizeof *m);
}

void gpt_set_params(GPT *m, const float *host) {
    m->be->upload(m->be, m->params_memory, host, m->num_params * sizeof(float));
    gpt_params_changed(m);
}

void gpt_params_changed(GPT *m) { m->params_version++; }

void gpt_get_params(const GPT *m, float *host) {
    m->be->download(m->be, host, m->params_memory, m->num_params * sizeof(float));
}

// Standard normal from two counter-based uniforms (Box-Muller), so init is a pure
// function of (seed, tensor, element) and independent of thread count.
static float normal_at(uint64_t key, uint64_t i) {
    uint64_t a = rng_mix64(key ^ (2 * i * 0x9e3779b97f4a7c15ULL));
    uint64_t b = rng_mix64(key ^ ((2 * i + 1) * 0x9e3779b97f4a7c15ULL));
    double u1 = ((a >> 11) + 1.0) / 9007199254740993.0;   // (0, 1]
    double u2 = (b >> 11) / 9007199254740992.0;           // [0, 1)
    return (float)(sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2));
}

int gpt_init_weights(GPT *m, uint64_t seed) {
    // Computed on the host, then uploaded (a no-op copy on the CPU backend).
    float *host = m->be->host_memory ? m->params_memory : malloc(m->num_params * sizeof(float));
    if (!host) return 1;
    for (int k = 0; k < m->n_tensors; k++) {
        const ParamTensor *t = &m->tensors[k];
        float *w = host + t->offset;
        uint64_t key = dropout_key(seed, rng_stream(RNG_DOMAIN_INIT, (uint64_t)k));
        if (t->init_std > 0) {
            #pragma omp parallel for schedule(static)
            for (size_t i = 0; i < t->numel; i++) w[i] = t->init_std * normal_at(key, i);
        } else {
            for (size_t i = 0; i < t->numel; i++) w[i] = t->init_value;
        }
    }
    if (host != m->params_memory) {
        gpt_set_params(m, host);
        free(host);
    } else {
        gpt_params_changed(m);
    }
    return 0;
}

void gpt_zero_grad(GPT *m) {
    if (!m->grads_memory) return;
    m->be->zero(m->be, m->grads_memory, m->num_params * sizeof(float));
    m->grads_zero = true;
}

// Whether the next backward may write (=) the matmuls' parameter gradients: the model's own
// buffer holds zeros and every gradient lies in it (gpt_bind_grad moves some out), so each
// matmul gradient's only writer in the pass writes exactly what it would have added to zero.
static bool grads_overwrite(const GPT *m) {
    return m->grads_memory && m->grads_zero && !m->grads_rebound && m->be->set_grad_write;
}

// The view of tensor k in p (the table order of bind_params).
static float **tensor_view(const GPT *m, GPTParams *p, int k) {
    if (k < N_HEAD_TENSORS) return &MEMBER(p, HEAD_TENSORS[k].member);
    k -= N_HEAD_TENSORS;
    const int nb = m->shape.n_layer * N_BLOCK_TENSORS;
    if (k < nb) return &MEMBER(&p->h[k / N_BLOCK_TENSORS], BLOCK_TENSORS[k % N_BLOCK_TENSORS].member);
    return &MEMBER(p, TAIL_TENSORS[k - nb].member);
}

void gpt_bind_grad(GPT *m, int k, float *p) {
    *tensor_view(m, &m->grads, k) = p;
    m->grads_rebound = true;
    m->grads_zero = false;
}

// The block's tensors (BLOCK_TENSORS indices) whose offset gpt_backward's hook passes after each op
// of a block, in the backward's order: mlp.c_proj, mlp.c_fc, ln_2, attn.c_proj, attn.c_attn, ln_1
// (each the op's weight: the lowest offset of its tensors).
static const int BLOCK_READY[] = { 10, 8, 6, 4, 2, 0 };
#define N_BLOCK_READY ((int)(sizeof BLOCK_READY / sizeof BLOCK_READY[0]))

int gpt_grads_ready_points(const GPTShape *s, size_t *out) {
    const int count = 2 + N_BLOCK_READY * s->n_layer;
    if (!out) return count;
    const int nt = gpt_param_table(s, NULL);
    ParamTensor *pt = calloc((size_t)nt, sizeof *pt);
    int n = 0;
    if (!pt) return 0;
    gpt_param_table(s, pt);
    // the table: head tensors, each block's (ln_1.weight first), the tail's (ln_f.weight first):
    // the pointers gpt_backward's hook calls take their offsets from
    out[n++] = pt[N_HEAD_TENSORS + s->n_layer * N_BLOCK_TENSORS].offset;
    for (int l = s->n_layer - 1; l >= 0; l--)
        for (int i = 0; i < N_BLOCK_READY; i++) out[n++] = pt[N_HEAD_TENSORS + l * N_BLOCK_TENSORS + BLOCK_READY[i]].offset;
    out[n++] = 0;
    free(pt);
    return n;
}

// ============================================================================
// Forward
// ============================================================================
// Dropout sites within one step: 0 = embedding, then three per block.
enum { SITE_EMBD = 0, SITE_ATTN = 1, SITE_ATTN_RESID = 2, SITE_MLP_RESID = 3 };

// Key of site `index` (0 = embedding, 1 + 3 * layer + site - 1) of the current step.
static DropoutKey index_key(const GPT *m, int index) {
    uint64_t stream = rng_stream(RNG_DOMAIN_DROPOUT, m->step * GPT_DROPOUT_SITES + (uint64_t)index);
    return (DropoutKey){ dropout_key(m->dropout_seed, stream), m->args.batch_row0, m->args.batch_row_stride, NULL };
}

// The key an op gets; while m->dev_keys, with .dev pointing at its copy in backend memory
// (gpt_forward_backward wrote the step's keys there), which the kernels read when they run.
static DropoutKey site_key(const GPT *m, int layer, int site) {
    const int index = site == SITE_EMBD ? 0 : 1 + 3 * layer + (site - 1);
    DropoutKey k = index_key(m, index);
    if (m->dev_keys) k.dev = m->drop_keys_dev + index;
    return k;
}

// A training forward with a backend that fuses the loss and its gradient computes dlogits
// right away (into acts.probs); gpt_backward then starts from it.
static bool fused_loss_grad(const GPT *m) { return m->train && m->be->crossentropy_forward_backward; }

// The ops whose input or output may be a low-precision copy (BlockActs.ln_1_lp): the *_lp op
// when the layout keeps the copy (non-NULL), else the plain op on the fp32 tensor. res and b
// NULL: a LayerNorm alone, else the residual add fused with it.
static void ln_forward(Backend *be, float *res, float *out, void *out_lp, float *mean, float *rstd,
                       const float *a, const float *b, const float *w, const float *bias, int N, int C) {
    if (out_lp) be->layernorm_forward_lp(be, res, out, out_lp, mean, rstd, a, b, w, bias, N, C);
    else if (res) be->residual_layernorm_forward(be, res, out, mean, rstd, a, b, w, bias, N, C);
    else be->layernorm_forward(be, out, mean, rstd, a, w, bias, N, C);
}
static void mm_forward(Backend *be, float *out, const float *inp, const void *inp_lp, const float *w,
                       const float *bias, int N, int C, int OC) {
    if (inp_lp) be->matmul_forward_lp(be, out, NULL, inp_lp, w, bias, N, C, OC);
    else be->matmul_forward(be, out, inp, w, bias, N, C, OC);
}
// dout_lp: dout's copy written by its producer (only with inp_lp; dout may then be NULL)
static void mm_backward(Backend *be, float *dinp, float *dw, float *dbias, const float *dout, const void *dout_lp,
                        const float *inp, const void *inp_lp, const float *w, int N, int C, int OC) {
    if (inp_lp) be->matmul_backward_lp(be, dinp, dw, dbias, dout, dout_lp, inp_lp, w, N, C, OC);
    else be->matmul_backward(be, dinp, dw, dbias, dout, inp, w, N, C, OC);
}
// Dropout of probability p fused into the LayerNorms around it (kernels/backend.h,
// residual_dropout_layernorm_forward and layernorm_backward_dropout): where the backend has the
// ops and the dropout is on (p 0 is the identity: nothing to fuse, and no key is needed).
static bool drop_fused(const Backend *be, float p) {
    return p > 0.0f && be->residual_dropout_layernorm_forward && be->layernorm_backward_dropout;
}
// A residual add (res, a, b non-NULL) + LayerNorm as ln_forward, the branch b first through the
// dropout of probability p, key k, over rows of row_len elements: fused when drop_fused, else
// dropout_forward in place over b, then the add.
static void res_drop_ln_forward(Backend *be, float *res, float *out, void *out_lp, float *mean, float *rstd,
                                const float *a, float *b, const float *w, const float *bias, int N, int C,
                                long row_len, float p, DropoutKey k) {
    if (drop_fused(be, p)) {
        be->residual_dropout_layernorm_forward(be, res, out, out_lp, mean, rstd, a, b, w, bias, N, C, row_len, p, k);
        return;
    }
    be->dropout_forward(be, b, b, (long)N * C, row_len, p, k);
    ln_forward(be, res, out, out_lp, mean, rstd, a, b, w, bias, N, C);
}
// Row r's element offset o (r * C) of a copy lp (NULL: NULL).
static void *lp_at(const Backend *be, void *lp, size_t o) { return lp ? (char *)lp + o * be->lp_size : NULL; }

// Input of block l: the embedding for block 0, else the previous block's output.
static float *block_input(const GPTActs *a, int l) { return l == 0 ? a->encoded : a->h[l - 1].res_3; }

// The key/value cache of an incremental forward (gpt_infer_feed): layer l's keys and values are
// rows of kcache / vcache + l * T_max * C; the batch's T rows are the positions p0 .. p0+T-1.
typedef struct { float *kcache, *vcache; int p0, T_max; } KVStep;

// One pre-LN block, x (B,T,C) = block_input(a, l) -> a->h[l].res_3 (B,T,C):
//   res_2 = x + drop(attn.c_proj(attn(ln_1(x))))                 causal self-attention, c_attn C->3C
//   res_3 = res_2 + drop(mlp.c_proj(gelu(c_fc(ln_2(res_2)))))    MLP C->4C->C
// ln_1(x) is computed here for block 0 and when recomputing; otherwise the previous block's last
// op (its residual add fused with this LayerNorm) left it in h->ln_1. Likewise this block ends
// with the next LayerNorm (ln_1 of block l+1, or ln_f) fused with its last residual add.
// recompute: activation checkpointing's backward, which needs the block's activations up to
// c_fc only (not mlp.c_proj, the last residual add or the next LayerNorm). Both uses run the
// same ops on the same inputs, so the recomputed activations are the forward's bit for bit.
// kv: incremental inference (B = 1, no dropout): the attention reads the earlier positions from
// the cache, and in the last block only the last row attends and goes on (only its logits are
// wanted; every row's keys and values are cached by then).
static void block_forward(GPT *m, GPTActs *a, int l, int B, int T, bool recompute, const KVStep *kv) {
    const GPTShape *s = &m->shape;
    const int C = s->n_embd, NH = s->n_head, BT = B * T;
    const bool train = m->train && !kv;
    const float resid_p = train ? s->resid_pdrop : 0.0f, attn_p = train ? s->attn_pdrop : 0.0f;
    Backend *be = m->be;
    const GPTParams *p = &m->params;
    const BlockParams *w = &p->h[l];
    BlockActs *h = &a->h[l];
    const float *x = block_input(a, l);
    if (l == 0 || recompute)
        ln_forward(be, NULL, h->ln_1, h->ln_1_lp, h->ln_1_mean, h->ln_1_rstd, x, NULL, w->ln_1_w, w->ln_1_b, BT, C);
    if (h->qkv_lp)   // only the copy the fused attention reads (training layouts, not kv)
        be->matmul_forward_lp(be, NULL, h->qkv_lp, h->ln_1_lp, w->c_attn_w, w->c_attn_b, BT, C, 3 * C);
    else
        mm_forward(be, h->qkv, h->ln_1, h->ln_1_lp, w->c_attn_w, w->c_attn_b, BT, C, 3 * C);
    // Rows r0 .. BT-1 go on after the attention (all but in the last block of an incremental
    // forward, where every row's keys and values are cached and the last row attends); o is row
    // r0's offset.
    const int r0 = kv && l == s->n_layer - 1 ? BT - 1 : 0, N = BT - r0;
    const size_t o = (size_t)r0 * C;
    if (kv) {
        const size_t layer = (size_t)l * kv->T_max * C;
        be->attention_forward_cached(be, h->atty + o, h->att, kv->kcache + layer, kv->vcache + layer, h->qkv, B,
                                     kv->p0, T, N, kv->T_max, C, NH);
    } else {
        if (h->atty_lp)
            be->attention_forward_lp(be, NULL, h->atty_lp, h->att, h->qkv, h->qkv_lp, B, T, C, NH, attn_p,
                                     site_key(m, l, SITE_ATTN));
        else
            be->attention_forward(be, h->atty, h->att, h->qkv, B, T, C, NH, attn_p, site_key(m, l, SITE_ATTN));
    }
    // dropout's batch rows (off with kv); a->branch, the branch's output, is read only by the
    // residual add that follows (dropped out in place before it, or inside it)
    const long row_len = kv ? C : (long)T * C;
    mm_forward(be, a->branch + o, h->atty ? h->atty + o : NULL, lp_at(be, h->atty_lp, o), w->attn_proj_w,
               w->attn_proj_b, N, C, C);
    float *ln_2 = h->ln_2 ? h->ln_2 + o : NULL;
    void *ln_2_lp = lp_at(be, h->ln_2_lp, o);
    res_drop_ln_forward(be, h->res_2 + o, ln_2, ln_2_lp, h->ln_2_mean + r0, h->ln_2_rstd + r0, x + o, a->branch + o,
                        w->ln_2_w, w->ln_2_b, N, C, row_len, resid_p, site_key(m, l, SITE_ATTN_RESID));
    float *fch_gelu = h->fch_gelu ? h->fch_gelu + 4 * o : NULL;
    void *fch_gelu_lp = lp_at(be, h->fch_gelu_lp, 4 * o);
    if (ln_2_lp)
        be->matmul_gelu_forward_lp(be, h->fch + 4 * o, fch_gelu, fch_gelu_lp, ln_2_lp, w->c_fc_w, w->c_fc_b, N, C, 4 * C);
    else
        be->matmul_gelu_forward(be, h->fch + 4 * o, fch_gelu, ln_2, w->c_fc_w, w->c_fc_b, N, C, 4 * C);
    if (recompute) return;
    mm_forward(be, a->branch + o, fch_gelu, fch_gelu_lp, w->mlp_proj_w, w->mlp_proj_b, N, 4 * C, C);
    const bool last = l == s->n_layer - 1;
    float *next = last ? a->ln_f : a->h[l + 1].ln_1;
    res_drop_ln_forward(be, h->res_3 + o, next ? next + o : NULL, lp_at(be, last ? a->ln_f_lp : a->h[l + 1].ln_1_lp, o),
                        (last ? a->ln_f_mean : a->h[l + 1].ln_1_mean) + r0,
                        (last ? a->ln_f_rstd : a->h[l + 1].ln_1_rstd) + r0,
                        h->res_2 + o, a->branch + o,
                        last ? p->ln_f_w : p->h[l + 1].ln_1_w,
                        last ? p->ln_f_b : p->h[l + 1].ln_1_b, N, C, row_len, resid_p,
                        site_key(m, l, SITE_MLP_RESID));
}

// GPTStepArgs.params_needed of hk (NULL: none) for the parameters from p to q (views into
// m->params_memory: [p, q) as flat offsets).
static void need(const GPT *m, const GPTStepArgs *hk, const float *p, const float *q) {
    if (hk && hk->params_needed) hk->params_needed(hk->params_ctx, (size_t)(p - m->params_memory),
                                                   (size_t)(q - m->params_memory));
}

// The mean of the per-token losses a->losses over the targets != -1 (m->n_valid of them) into
// m->mean_loss: one download, summed on the host in a fixed order (bitwise reproducible).
static float sum_loss(GPT *m, const int32_t *targets, int BT) {
    double sum = 0.0;
    for (int i = 0; i < BT; i++)
        if (targets[i] != -1) sum += m->host_losses[i];
    m->mean_loss = m->n_valid > 0 ? (float)(sum / m->n_valid) : 0.0f;
    return m->mean_loss;
}
static float read_loss(GPT *m, const GPTActs *a, const int32_t *targets, int BT) {
    m->be->download(m->be, m->host_losses, a->losses, (size_t)BT * sizeof(float));
    return sum_loss(m, targets, BT);
}

float gpt_loss_wait(GPT *m) {
    if (m->loss_pending) {
        m->loss_pending = false;
        m->be->download_wait(m->be);
        sum_loss(m, m->pending_targets, m->pending_BT);
    }
    return m->mean_loss;
}

// The forward pass of gpt_forward and gpt_forward_inference into the activations `a`; hk:
// gpt_forward's step arguments, whose params_needed hook (if any) is called before each layer
// reads its weights (NULL: none).
static float forward(GPT *m, GPTActs *a, const int32_t *idx, const int32_t *targets, int B, int T,
                     bool train, uint64_t dropout_seed, uint64_t step, const GPTStepArgs *hk) {
    gpt_loss_wait(m);   // a deferred read of the previous forward's losses: host_losses is reused
    const GPTShape *s = &m->shape;
    const int C = s->n_embd, V = s->vocab_size, BT = B * T, L = s->n_layer;
    const long BTC = (long)BT * C;
    Backend *be = m->be;
    GPTParams *p = &m->params;
    m->cur_B = B; m->cur_T = T;
    m->train = train; m->dropout_seed = dropout_seed; m->step = step;
    const float embd_p = train ? s->embd_pdrop : 0.0f;
    float *const all_end = m->params_memory + m->num_params;
    // (m->in_graph: gpt_forward_backward has cast the weights and uploaded the batch already)
    if (be->cast_weights && be->matmul_dtype != DTYPE_FP32 && !m->in_graph) {   // once per parameter version
        // the cast reads every weight: wait for them all (a cast per range would need a
        // cast_weights per range, and the low-precision cast is the GPU's, where no hook waits)
        need(m, hk, m->params_memory, all_end);
        be->cast_weights(be, m->params_memory, m->num_params, m->params_version);
    }
    if (!m->in_graph) be->upload(be, m->inputs, idx, (size_t)BT * sizeof(int32_t));

    // the flat layout: wte, wpe, each block (ln_1 first), ln_f, lm_head (gpt_param_table)
    need(m, hk, m->params_memory, L > 0 ? p->h[0].ln_1_w : p->ln_f_w);
    be->encoder_forward(be, a->encoded, m->inputs, p->wte, p->wpe, B, T, C);
    be->dropout_forward(be, a->encoded, a->encoded, BTC, (long)T * C, embd_p, site_key(m, 0, SITE_EMBD));
    for (int l = 0; l < L; l++) {
        // block l, and the LayerNorm its last op applies (the next block's ln_1, or ln_f)
        need(m, hk, p->h[l].ln_1_w, l + 1 < L ? p->h[l + 1].ln_1_b + C : p->ln_f_b + C);
        block_forward(m, a, l, B, T, false, NULL);
    }
    need(m, hk, p->ln_f_w, all_end);
    mm_forward(be, a->logits, a->ln_f, a->ln_f_lp, p->lm_head_w, NULL, BT, C, V);

    if (!targets) { m->n_valid = 0; m->mean_loss = -1.0f; return -1.0f; }
    if (!m->in_graph) be->upload(be, m->targets, targets, (size_t)BT * sizeof(int32_t));
    long n_valid = 0;
    for (int i = 0; i < BT; i++) n_valid += targets[i] != -1;
    if (fused_loss_grad(m)) {
        // Training: the loss and d(mean loss)/d(logits) in one pass; dlogits lands in probs,
        // where gpt_backward expects it.
        be->crossentropy_forward_backward(be, a->losses, a->probs, a->logits, m->targets, BT, V,
                                          n_valid > 0 ? m->args.loss_scale / (float)n_valid : 0.0f);
    } else {
        be->crossentropy_forward(be, a->losses, a->probs, a->logits, m->targets, BT, V);
    }
    m->n_valid = n_valid;
    if (m->in_graph) return 0.0f;   // the losses are read after the graph has run
    return read_loss(m, a, targets, BT);
}

float gpt_forward(GPT *m, const int32_t *idx, const int32_t *targets, int B, int T,
                  bool train, uint64_t dropout_seed, uint64_t step, const GPTStepArgs *args) {
    m->acts_overwritten = false;
    m->args = args ? *args : GPT_STEP_ARGS_DEFAULT;
    return forward(m, &m->acts, idx, targets, B, T, train, dropout_seed, step, &m->args);
}

// ---- one micro-step as a backend graph (Backend.graph_run)
typedef struct {
    GPT *m;
    const int32_t *targets;
    int B, T;
    bool train;
    uint64_t dropout_seed, step;
} GraphStep;

// The graph's ops: the forward (batch already uploaded, losses not read) and the backward.
static void graph_step_ops(void *ctx) {
    GraphStep *g = ctx;
    forward(g->m, &g->m->acts, NULL, g->targets, g->B, g->T, g->train, g->dropout_seed, g->step, &g->m->args);
    gpt_backward(g->m, NULL, NULL);
    if (g->m->args.tail) g->m->args.tail(g->m->args.tail_ctx);
}

float gpt_forward_backward(GPT *m, const int32_t *idx, const int32_t *targets, int B, int T,
                           bool train, uint64_t dropout_seed, uint64_t step, const GPTStepArgs *args) {
    gpt_loss_wait(m);   // (a deferred read sums with its own forward's n_valid)
    const GPTShape *s = &m->shape;
    Backend *be = m->be;
    const GPTStepArgs a = args ? *args : GPT_STEP_ARGS_DEFAULT;
    const bool dropout = train && (s->embd_pdrop > 0.0f || s->resid_pdrop > 0.0f || s->attn_pdrop > 0.0f);
    const int BT = B * T;
    long n_valid = 0;
    for (int i = 0; i < BT; i++)
        if (targets[i] != -1) n_valid++;
    // a graph repeats its ops' scalar arguments: it serves one (B, T, train, n_valid, loss
    // scale); the dropout keys, which change every step, are read from backend memory (written
    // before each launch); a params_needed hook must run between the layers, and gradients
    // must land in the model's own buffer
    const int n_sites = 1 + 3 * s->n_layer;
    if (dropout && be->graph_run && be->upload_async && !m->drop_keys_dev) {
        m->drop_keys_dev = be->alloc(be, (size_t)n_sites * sizeof(DropoutKey));
        m->drop_keys_host = calloc((size_t)n_sites, sizeof(DropoutKey));
        if (!m->drop_keys_dev || !m->drop_keys_host)
            fatal_error("gpt_forward_backward: out of memory for %d dropout keys", n_sites);
    }
    // the backward's gradient write mode (gpt_backward) is baked into the captured ops: a graph
    // captured as a first micro-step (GRAD_OVERWRITE) never replays for a later one, nor the reverse
    const bool overwrite = n_valid > 0 && grads_overwrite(m);
    GPTGraph *slot = NULL;
    if (be->graph_run && (!dropout || m->drop_keys_dev) && !a.params_needed && m->grads_memory) {
        for (int k = 0; k < m->n_graphs && !slot; k++) {
            GPTGraph *q = &m->graphs[k];
            if (q->B == B && q->T == T && q->train == train && q->n_valid == n_valid &&
                q->checkpointing == m->checkpointing && q->grad_overwrite == overwrite &&
                q->tail == a.tail && q->tail_ctx == a.tail_ctx &&
                memcmp(&q->loss_scale, &a.loss_scale, sizeof(float)) == 0)
                slot = q;
        }
        if (!slot) {   // a new key: a free entry, else the least recently used one's
            if (m->n_graphs < GPT_GRAPHS) {
                slot = &m->graphs[m->n_graphs++];
            } else {
                slot = &m->graphs[0];
                for (int k = 1; k < GPT_GRAPHS; k++)
                    if (m->graphs[k].last_use < slot->last_use) slot = &m->graphs[k];
                be->graph_free(be, slot->graph);
            }
            *slot = (GPTGraph){ .B = B, .T = T, .train = train, .n_valid = n_valid, .loss_scale = a.loss_scale,
                                .checkpointing = m->checkpointing, .grad_overwrite = overwrite,
                                .tail = a.tail, .tail_ctx = a.tail_ctx };
        }
        slot->last_use = ++m->graph_uses;
    }
    if (!slot) {
        const float loss = gpt_forward(m, idx, targets, B, T, train, dropout_seed, step, args);
        gpt_backward(m, NULL, NULL);
        if (a.tail) a.tail(a.tail_ctx);
        return loss;
    }
    // what gpt_forward does on the host, before the captured ops
    m->acts_overwritten = false;
    m->args = a;
    m->cur_B = B; m->cur_T = T;
    m->train = train; m->dropout_seed = dropout_seed; m->step = step;
    m->n_valid = n_valid;
    if (be->cast_weights && be->matmul_dtype != DTYPE_FP32)
        be->cast_weights(be, m->params_memory, m->num_params, m->params_version);
    // staged: the host goes on to launch the replay while the previous step's kernels run
    void (*upload)(Backend *, void *, const void *, size_t) = be->upload_async ? be->upload_async : be->upload;
    upload(be, m->inputs, idx, (size_t)BT * sizeof(int32_t));
    upload(be, m->targets, targets, (size_t)BT * sizeof(int32_t));
    if (dropout) {   // this step's keys, where the graph's kernels read them
        for (int i = 0; i < n_sites; i++) m->drop_keys_host[i] = index_key(m, i);
        be->upload_async(be, m->drop_keys_dev, m->drop_keys_host, (size_t)n_sites * sizeof(DropoutKey));
    }
    GraphStep g = { m, targets, B, T, train, dropout_seed, step };
    m->in_graph = true;
    m->dev_keys = dropout;
    be->graph_run(be, &slot->graph, graph_step_ops, &g);
    m->dev_keys = false;
    m->in_graph = false;
    if (n_valid > 0) m->grads_zero = false;   // a replay wrote the gradients without calling gpt_backward
    if (a.defer_loss && be->download_async && be->download_wait) {
        be->download_async(be, m->host_losses, m->acts.losses, (size_t)BT * sizeof(float));
        m->loss_pending = true;
        m->pending_targets = targets;
        m->pending_BT = BT;
        return NAN;
    }
    return read_loss(m, &m->acts, targets, BT);
}

float gpt_forward_inference(GPT *m, const int32_t *idx, const int32_t *targets, int B, int T) {
    if (B < 1 || B > m->B_infer || T < 1 || T > m->T)
        fatal_error("gpt_forward_inference: batch (%d, %d) outside (%d, %d)", B, T, m->B_infer, m->T);
    m->acts_overwritten = true;
    return forward(m, &m->infer, idx, targets, B, T, false, 0, 0, NULL);
}

// ============================================================================
// Incremental inference: a key/value cache, the same blocks
// ============================================================================
int gpt_infer_begin(GPTInfer *g, GPT *m, char *err, size_t errlen) {
    memset(g, 0, sizeof *g);
    Backend *be = m->be;
    if (be->matmul_dtype != DTYPE_FP32 || !be->attention_forward_cached) {
        snprintf(err, errlen, "model: incremental inference runs in fp32 on a backend with attention_forward_cached; "
                 "the %s backend here has %s", be->name,
                 be->attention_forward_cached ? "low-precision matmuls" : "no such op");
        return 1;
    }
    const GPTShape *s = &m->shape;
    const size_t T = (size_t)s->block_size, C = (size_t)s->n_embd, L = (size_t)s->n_layer;
    g->m = m;
    g->acts.h = calloc(L, sizeof(BlockActs));
    g->tokens = malloc(T * sizeof(int32_t));
    g->logits = malloc((size_t)s->vocab_size * sizeof(float));
    const size_t n_acts = layout_acts(s, 1, T, be, gelu_recomputed(be), 0, false, ACTS_INFER, NULL, NULL, NULL);
    g->acts_memory = be->alloc(be, n_acts * sizeof(float));
    g->kv_memory = be->alloc(be, 2 * L * T * C * sizeof(float));
    g->inputs = be->alloc(be, T * sizeof(int32_t));
    if (!g->acts.h || !g->tokens || !g->logits || !g->acts_memory || !g->kv_memory || !g->inputs) {
        snprintf(err, errlen, "model: out of %s memory (a key/value cache of %zu floats and %zu activation floats)",
                 be->name, 2 * L * T * C, n_acts);
        gpt_infer_end(g);
        return 1;
    }
    layout_acts(s, 1, T, be, gelu_recomputed(be), 0, false, ACTS_INFER, g->acts_memory, &g->acts, NULL);
    return 0;
}

void gpt_infer_end(GPTInfer *g) {
    if (g->m) {
        Backend *be = g->m->be;
        be->free(be, g->acts_memory);
        be->free(be, g->kv_memory);
        be->free(be, g->inputs);
    }
    free(g->acts.h);
    free(g->tokens);
    free(g->logits);
    memset(g, 0, sizeof *g);
}

void gpt_infer_reset(GPTInfer *g) { g->pos = 0; }

const float *gpt_infer_feed(GPTInfer *g, const int32_t *tokens, int n) {
    GPT *m = g->m;
    const GPTShape *s = &m->shape;
    const int C = s->n_embd, V = s->vocab_size, T = s->block_size, p0 = g->pos;
    if (n < 1 || n > T - p0) return NULL;
    Backend *be = m->be;
    GPTActs *a = &g->acts;
    const GPTParams *p = &m->params;
    memcpy(g->tokens + p0, tokens, (size_t)n * sizeof(int32_t));
    be->upload(be, g->inputs, tokens, (size_t)n * sizeof(int32_t));
    // the rows are positions p0 .. p0+n-1: their embeddings start at row p0 of wpe
    be->encoder_forward(be, a->encoded, g->inputs, p->wte, p->wpe + (size_t)p0 * C, 1, n, C);
    const size_t cache = (size_t)s->n_layer * T * C;
    const KVStep kv = { g->kv_memory, g->kv_memory + cache, p0, T };
    for (int l = 0; l < s->n_layer; l++) block_forward(m, a, l, 1, n, false, &kv);
    be->matmul_forward(be, a->logits, a->ln_f + (size_t)(n - 1) * C, p->lm_head_w, NULL, 1, C, V);
    be->download(be, g->logits, a->logits, (size_t)V * sizeof(float));
    g->pos = p0 + n;
    return g->logits;
}

const float *gpt_infer_next(GPTInfer *g, const int32_t *ctx, long n) {
    if (n < 1) return NULL;
    const int T = g->m->shape.block_size;
    const int32_t *win = n > T ? ctx + (n - T) : ctx;
    const int w = n > T ? T : (int)n;
    // The cache holds a prefix of this window: extend it. Otherwise (a new prompt, or the window
    // slid: every position changed) recompute the window.
    if (g->pos < w && memcmp(g->tokens, win, (size_t)g->pos * sizeof(int32_t)) == 0)
        return gpt_infer_feed(g, win + g->pos, w - g->pos);
    g->pos = 0;
    return gpt_infer_feed(g, win, w);
}

// ============================================================================
// Backward
// ============================================================================
static void zero(Backend *be, float *x, long n) { be->zero(be, x, (size_t)n * sizeof(float)); }

// Gradient of a dropout site's input given the gradient of its output, d->dres: dres itself
// when p = 0 (dropout is the identity), else dropout_backward into d->dbranch (overwritten).
static const float *branch_grad(GPT *m, int layer, int site, float p, long n) {
    GPTGradScratch *d = &m->scratch;
    if (p <= 0.0f) return d->dres;
    m->be->dropout_backward(m->be, d->dbranch, d->dres, n, (long)m->cur_T * m->shape.n_embd, p,
                            site_key(m, layer, site));
    return d->dbranch;
}

// The gradient of a dropout site's input, for the matmul (or encoder) backward that reads it: dout
// in fp32, or dout_lp, its copy rounded to matmul_dtype (dout NULL then).
typedef struct { const float *dout; const void *dout_lp; } BranchGrad;

// The LayerNorm backward (dinp d->dres, dout d->dln) that finishes d->dres, the gradient entering
// the dropout of `site` in `layer` (p its probability), and that site's input gradient: with
// drop_fused, both by layernorm_backward_dropout into d->dbranch, as the rounded copy when lp (the
// gradient's matmul takes dout_lp: matmul_backward_lp / _dgelu), else in fp32; otherwise
// layernorm_backward, then branch_grad.
static BranchGrad ln_backward_branch(GPT *m, bool lp, float *dweight, float *dbias, const float *inp,
                                     const float *weight, const float *mean, const float *rstd, int layer, int site,
                                     float p) {
    const int BT = m->cur_B * m->cur_T, C = m->shape.n_embd;
    GPTGradScratch *d = &m->scratch;
    Backend *be = m->be;
    if (drop_fused(be, p)) {
        be->layernorm_backward_dropout(be, d->dres, lp ? NULL : d->dbranch, lp ? (void *)d->dbranch : NULL, dweight,
                                       dbias, d->dln, inp, weight, mean, rstd, BT, C, (long)m->cur_T * C, p,
                                       site_key(m, layer, site));
        return lp ? (BranchGrad){ NULL, d->dbranch } : (BranchGrad){ d->dbranch, NULL };
    }
    be->layernorm_backward(be, d->dres, dweight, dbias, d->dln, inp, weight, mean, rstd, BT, C);
    return (BranchGrad){ branch_grad(m, layer, site, p, (long)BT * C), NULL };
}

void gpt_backward(GPT *m, GPTGradsReady ready, void *ready_ctx) {
    const GPTShape *s = &m->shape;
    const int B = m->cur_B, T = m->cur_T, C = s->n_embd, NH = s->n_head, V = s->vocab_size, BT = B * T;
    const long BTC = (long)BT * C;
    const float embd_p = m->train ? s->embd_pdrop : 0.0f;
    const float resid_p = m->train ? s->resid_pdrop : 0.0f;
    const float attn_p = m->train ? s->attn_pdrop : 0.0f;
    GPTParams *p = &m->params, *g = &m->grads;
    GPTActs *a = &m->acts;
    GPTGradScratch *d = &m->scratch;
    Backend *be = m->be;
    if (m->acts_overwritten) fatal_error("gpt_backward after gpt_forward_inference: no activations to differentiate");
    if (m->n_valid == 0) return;   // every target ignored: the loss has no gradient (nothing written)
    // The first backward after gpt_zero_grad writes the matmuls' parameter gradients (=) rather
    // than adding them to zeros (on CUDA: no bias-gradient accumulate launches, no dweight read).
    const bool overwrite = grads_overwrite(m);
    m->grads_zero = false;
    if (overwrite) be->set_grad_write(be, GRAD_OVERWRITE);

    // loss -> logits (in place over probs) -> ln_f -> residual stream
    float *dlogits = a->probs;
    if (!fused_loss_grad(m))
        be->crossentropy_softmax_backward(be, dlogits, a->probs, m->targets, BT, V,
                                          m->args.loss_scale / (float)m->n_valid);
    // The activation gradients below (d->dln, dfch_gelu, dfch, datty, dqkv, dbranch) are
    // overwritten by the one op that writes each (kernels/backend.h): nothing to zero. d->dres
    // accumulates through every LayerNorm backward: it starts at 0.
    mm_backward(be, d->dln, g->lm_head_w, NULL, dlogits, NULL, a->ln_f, a->ln_f_lp, p->lm_head_w, BT, C, V);
    zero(be, d->dres, BTC);
    // The fused c_proj + GELU backward (below) takes the MLP branch's gradient as its rounded copy
    // where the layout keeps copies; the plain matmul_backward takes fp32.
    const bool dgelu = be->matmul_backward_dgelu && m->grads_memory;
    const bool mlp_lp = dgelu && lp_size(be);
    // each LayerNorm backward below also gives the input gradient of the dropout before it
    BranchGrad dbr = ln_backward_branch(m, mlp_lp, g->ln_f_w, g->ln_f_b, block_input(a, s->n_layer), p->ln_f_w,
                                        a->ln_f_mean, a->ln_f_rstd, s->n_layer - 1, SITE_MLP_RESID, resid_p);
    if (ready) ready(ready_ctx, (size_t)(p->ln_f_w - m->params_memory));   // ln_f and lm_head

    // d->dres holds the gradient of the block's output; each LayerNorm backward adds the
    // branch's contribution to it, which turns it into the gradient of the block's input.
    for (int l = s->n_layer - 1; l >= 0; l--) {
        const BlockParams *w = &p->h[l];
        BlockParams *gw = &g->h[l];
        BlockActs *h = &a->h[l];
        // Activation checkpointing: the block's activations, from its saved input, into the shared
        // working set (which still holds the last block's from the forward pass).
        if (m->checkpointing && l < s->n_layer - 1) block_forward(m, a, l, B, T, true, NULL);
        // MLP branch (its gradient dbr: without dropout dres itself, no copy)
        if (gelu_recomputed(be) && !h->fch_gelu_lp) be->gelu_forward(be, h->fch_gelu, h->fch, 4 * BTC);   // into d->dfch
        // The fused op writes c_fc's bias gradient during c_proj's backward, before the hook
        // that follows c_proj: only where every gradient has its place from the start (not under
        // ZeRO stage 2, whose trainer binds c_fc's gradients after that hook: gpt_bind_grad).
        if (dgelu) {
            // c_proj's backward, the GELU backward and c_fc's bias gradient in one op; the
            // gradient of the pre-activation goes to dfch_gelu (free here; fch_gelu may be dfch),
            // or only as its copy dfch_lp (in that memory), which c_fc's backward multiplies
            float *dfch = d->dfch_lp ? NULL : d->dfch_gelu;
            be->matmul_backward_dgelu(be, dfch, d->dfch_lp, gw->c_fc_b, gw->mlp_proj_w, gw->mlp_proj_b, dbr.dout,
                                      dbr.dout_lp, h->fch_gelu, h->fch_gelu_lp, w->mlp_proj_w, h->fch, BT, 4 * C, C);
            if (ready) ready(ready_ctx, (size_t)(w->mlp_proj_w - m->params_memory));
            mm_backward(be, d->dln, gw->c_fc_w, NULL, dfch, d->dfch_lp, h->ln_2, h->ln_2_lp, w->c_fc_w, BT, C, 4 * C);
        } else {
            if (h->fch_gelu_lp)
                be->matmul_backward_lp(be, d->dfch_gelu, gw->mlp_proj_w, gw->mlp_proj_b, dbr.dout, dbr.dout_lp,
                                       h->fch_gelu_lp, w->mlp_proj_w, BT, 4 * C, C);
            else
                be->matmul_backward(be, d->dfch_gelu, gw->mlp_proj_w, gw->mlp_proj_b, dbr.dout, h->fch_gelu,
                                    w->mlp_proj_w, BT, 4 * C, C);
            if (ready) ready(ready_ctx, (size_t)(w->mlp_proj_w - m->params_memory));
            be->gelu_backward(be, d->dfch, h->fch, d->dfch_gelu, 4 * BTC);
            mm_backward(be, d->dln, gw->c_fc_w, gw->c_fc_b, d->dfch, NULL, h->ln_2, h->ln_2_lp, w->c_fc_w, BT, C,
                        4 * C);
        }
        if (ready) ready(ready_ctx, (size_t)(w->c_fc_w - m->params_memory));
        // attention branch: its gradient as the rounded copy where c_proj's input has one
        dbr = ln_backward_branch(m, h->atty_lp != NULL, gw->ln_2_w, gw->ln_2_b, h->res_2, w->ln_2_w, h->ln_2_mean,
                                 h->ln_2_rstd, l, SITE_ATTN_RESID, resid_p);
        if (ready) ready(ready_ctx, (size_t)(w->ln_2_w - m->params_memory));
        mm_backward(be, d->datty, gw->attn_proj_w, gw->attn_proj_b, dbr.dout, dbr.dout_lp, h->atty, h->atty_lp,
                    w->attn_proj_w, BT, C, C);
        if (ready) ready(ready_ctx, (size_t)(w->attn_proj_w - m->params_memory));
        if (d->dqkv_lp)   // the rounded gradient only, straight from the attention's kernels
            be->attention_backward_lp(be, NULL, d->dqkv_lp, d->datt, d->datty, h->qkv, h->qkv_lp, h->att, B, T, C,
                                      NH, attn_p, site_key(m, l, SITE_ATTN));
        else
            be->attention_backward(be, d->dqkv, d->datt, d->datty, h->qkv, h->att, B, T, C, NH, attn_p,
                                   site_key(m, l, SITE_ATTN));
        mm_backward(be, d->dln, gw->c_attn_w, gw->c_attn_b, d->dqkv, d->dqkv_lp, h->ln_1, h->ln_1_lp, w->c_attn_w, BT,
                    C, 3 * C);
        if (ready) ready(ready_ctx, (size_t)(w->c_attn_w - m->params_memory));
        // the gradient of the block's input: layer l-1's MLP branch, or the embedding (fp32, for
        // encoder_backward) before block 0
        dbr = l > 0 ? ln_backward_branch(m, mlp_lp, gw->ln_1_w, gw->ln_1_b, block_input(a, l), w->ln_1_w,
                                         h->ln_1_mean, h->ln_1_rstd, l - 1, SITE_MLP_RESID, resid_p)
                    : ln_backward_branch(m, false, gw->ln_1_w, gw->ln_1_b, block_input(a, l), w->ln_1_w,
                                         h->ln_1_mean, h->ln_1_rstd, 0, SITE_EMBD, embd_p);
        if (ready) ready(ready_ctx, (size_t)(w->ln_1_w - m->params_memory));   // block l and everything after it
    }

    be->encoder_backward(be, g->wte, g->wpe, dbr.dout, m->inputs, B, T, C);
    if (overwrite) be->set_grad_write(be, GRAD_ACCUMULATE);
    if (ready) ready(ready_ctx, 0);
}
