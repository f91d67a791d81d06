// model/gpt_infer.c — GPT inference with a key/value cache (see model/gpt_infer.h).
//
// Host memory only. Linear layers are cblas_sgemv for one new token and the CPU GEMM
// (kernels/cpu/gemm.h) for several; LayerNorm, GELU, residual adds and attention over the cache are serial loops
// on short vectors (a single token is too little work to split across threads).
#pragma GCC optimize("fp-contract=fast")
#include "model/gpt_infer.h"

#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/gemm.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/simd.h"

// ============================================================================
// Parameter views, found by name in gpt_param_table's layout
// ============================================================================
static const float *find(const ParamTensor *t, int n, const float *base, const char *name) {
    for (int k = 0; k < n; k++)
        if (strcmp(t[k].name, name) == 0) return base + t[k].offset;
    return NULL;
}

static int bind(GPTInfer *g, const float *params) {
    const GPTShape *s = &g->shape;
    const int n = gpt_param_table(s, NULL);
    ParamTensor *t = calloc((size_t)n, sizeof *t);
    g->p.h = calloc((size_t)s->n_layer, sizeof(BlockParams));
    if (!t || !g->p.h) { free(t); return 1; }
    gpt_param_table(s, t);
    int missing = 0;
#define BIND(dst, name) do { dst = (float *)find(t, n, params, name); missing |= dst == NULL; } while (0)
    BIND(g->p.wte, "transformer.wte.weight");
    BIND(g->p.wpe, "transformer.wpe.weight");
    BIND(g->p.ln_f_w, "transformer.ln_f.weight");
    BIND(g->p.ln_f_b, "transformer.ln_f.bias");
    BIND(g->p.lm_head_w, "lm_head.weight");
    for (int l = 0; l < s->n_layer; l++) {
        BlockParams *b = &g->p.h[l];
        char name[96];
#define BINDL(dst, suffix) do { snprintf(name, sizeof name, "transformer.h.%d.%s", l, suffix); BIND(dst, name); } while (0)
        BINDL(b->ln_1_w, "ln_1.weight");
        BINDL(b->ln_1_b, "ln_1.bias");
        BINDL(b->c_attn_w, "attn.c_attn.weight");
        BINDL(b->c_attn_b, "attn.c_attn.bias");
        BINDL(b->attn_proj_w, "attn.c_proj.weight");
        BINDL(b->attn_proj_b, "attn.c_proj.bias");
        BINDL(b->ln_2_w, "ln_2.weight");
        BINDL(b->ln_2_b, "ln_2.bias");
        BINDL(b->c_fc_w, "mlp.c_fc.weight");
        BINDL(b->c_fc_b, "mlp.c_fc.bias");
        BINDL(b->mlp_proj_w, "mlp.c_proj.weight");
        BINDL(b->mlp_proj_b, "mlp.c_proj.bias");
#undef BINDL
    }
#undef BIND
    free(t);
    return missing;
}

int gpt_infer_init(GPTInfer *g, const GPTShape *s, const float *params, char *err, size_t errlen) {
    memset(g, 0, sizeof *g);
    if (s->vocab_size < 1 || s->block_size < 1 || s->n_layer < 1 || s->n_head < 1 || s->n_embd < 1 ||
        s->n_embd % s->n_head != 0) {
        snprintf(err, errlen, "model: bad shape (V %d, block_size %d, n_layer %d, n_head %d, n_embd %d)",
                 s->vocab_size, s->block_size, s->n_layer, s->n_head, s->n_embd);
        return 1;
    }
    g->shape = *s;
    const size_t T = (size_t)s->block_size, C = (size_t)s->n_embd, L = (size_t)s->n_layer;
    g->tokens = malloc(T * sizeof(int32_t));
    g->kcache = malloc(L * T * C * sizeof(float));
    g->vcache = malloc(L * T * C * sizeof(float));
    g->x = malloc(T * C * sizeof(float));
    g->ln = malloc(T * C * sizeof(float));
    g->mean = malloc(T * sizeof(float));
    g->rstd = malloc(T * sizeof(float));
    g->qkv = malloc(T * 3 * C * sizeof(float));
    g->atty = malloc(T * C * sizeof(float));
    g->fch = malloc(T * 4 * C * sizeof(float));
    g->branch = malloc(T * C * sizeof(float));
    g->att = malloc((size_t)s->n_head * T * T * sizeof(float));
    g->logits = malloc((size_t)s->vocab_size * sizeof(float));
    if (!g->tokens || !g->kcache || !g->vcache || !g->x || !g->ln || !g->mean || !g->rstd ||
        !g->qkv || !g->atty || !g->fch || !g->branch || !g->att || !g->logits) {
        snprintf(err, errlen, "model: out of memory (key/value cache)");
        gpt_infer_free(g);
        return 1;
    }
    if (bind(g, params)) {
        snprintf(err, errlen, "model: parameter layout without the expected tensors");
        gpt_infer_free(g);
        return 1;
    }
    return 0;
}

void gpt_infer_free(GPTInfer *g) {
    free(g->p.h);
    free(g->tokens); free(g->kcache); free(g->vcache);
    free(g->x); free(g->ln); free(g->mean); free(g->rstd); free(g->qkv); free(g->atty);
    free(g->fch); free(g->branch); free(g->att); free(g->logits);
    memset(g, 0, sizeof *g);
}

void gpt_infer_reset(GPTInfer *g) { g->pos = 0; }

// ============================================================================
// Row kernels (serial)
// ============================================================================
static float row_sum(const float *x, int n) {
    VF acc = vset1(0.0f);
    int i = 0;
    for (; i + VL <= n; i += VL) acc += vload(x + i);
    float s = vsum(acc);
    for (; i < n; i++) s += x[i];
    return s;
}

// out (n,C) = layernorm(x) as torch.nn.LayerNorm(C, eps=1e-5), two passes per row.
static void ln_rows(float *out, const float *x, const float *w, const float *b, int n, int C) {
    for (int r = 0; r < n; r++) {
        const float *xr = x + (size_t)r * C;
        float *o = out + (size_t)r * C;
        const float m = row_sum(xr, C) / (float)C;
        VF acc = vset1(0.0f);
        int i = 0;
        for (; i + VL <= C; i += VL) { const VF d = vload(xr + i) - m; acc += d * d; }
        float v = vsum(acc);
        for (; i < C; i++) v += (xr[i] - m) * (xr[i] - m);
        const float rs = 1.0f / sqrtf(v / (float)C + 1e-5f);
        for (i = 0; i < C; i++) o[i] = (xr[i] - m) * rs * w[i] + b[i];
    }
}

// y (n,OC) = x (n,C) @ W (OC,C)^T + bias (or no bias).
static void linear(float *y, const float *x, const float *W, const float *bias, int n, int C, int OC) {
    float beta = 0.0f;
    if (bias) {
        for (int r = 0; r < n; r++) memcpy(y + (size_t)r * OC, bias, (size_t)OC * sizeof(float));
        beta = 1.0f;
    }
    if (n == 1)
        cblas_sgemv(CblasRowMajor, CblasNoTrans, OC, C, 1.0f, W, C, x, 1, beta, y, 1);
    else
        cpu_sgemm(0, 1, n, OC, C, x, C, W, C, beta, y, OC);
}

static void gelu_rows(float *x, long n) {
    const float k = 0.7978845608028654f, a = 0.044715f;
    long i = 0;
    for (; i + VL <= n; i += VL) {
        const VF v = vload(x + i);
        vstore(x + i, v / (1.0f + vexp(-2.0f * k * (v + a * v * v * v))));
    }
    for (; i < n; i++) x[i] = x[i] / (1.0f + expf_fast(-2.0f * k * (x[i] + a * x[i] * x[i] * x[i])));
}

static void add_rows(float *x, const float *y, long n) {
    long i = 0;
    for (; i + VL <= n; i += VL) vstore(x + i, vload(x + i) + vload(y + i));
    for (; i < n; i++) x[i] += y[i];
}

static float dot(const float *a, const float *b, int n) {
    VF acc = vset1(0.0f);
    int i = 0;
    for (; i + VL <= n; i += VL) acc += vload(a + i) * vload(b + i);
    float s = vsum(acc);
    for (; i < n; i++) s += a[i] * b[i];
    return s;
}

// out (C,) = causal attention of one query row q (3C row of qkv: q part used) at position P
// over cached keys/values 0..P of one layer (K, V (block_size, C)).
static void attend(float *out, const float *q, const float *K, const float *V, int P, int C, int NH,
                   float *att) {
    const int hs = C / NH;
    const float scale = 1.0f / sqrtf((float)hs);
    for (int h = 0; h < NH; h++) {
        const float *qh = q + (size_t)h * hs;
        float maxv = -INFINITY;
        for (int j = 0; j <= P; j++) {
            att[j] = dot(qh, K + (size_t)j * C + (size_t)h * hs, hs) * scale;
            maxv = att[j] > maxv ? att[j] : maxv;
        }
        float sum = 0.0f;
        for (int j = 0; j <= P; j++) { att[j] = expf_fast(att[j] - maxv); sum += att[j]; }
        const float inv = 1.0f / sum;
        float *o = out + (size_t)h * hs;
        for (int i = 0; i < hs; i++) o[i] = 0.0f;
        for (int j = 0; j <= P; j++) {
            const float p = att[j] * inv;
            const float *v = V + (size_t)j * C + (size_t)h * hs;
            int i = 0;
            for (; i + VL <= hs; i += VL) vstore(o + i, vload(o + i) + p * vload(v + i));
            for (; i < hs; i++) o[i] += p * v[i];
        }
    }
}

// ============================================================================
// Forward over new tokens
// ============================================================================
const float *gpt_infer_feed(GPTInfer *g, const int32_t *tokens, int n) {
    const GPTShape *s = &g->shape;
    const int C = s->n_embd, NH = s->n_head, V = s->vocab_size, L = s->n_layer, T = s->block_size;
    const int p0 = g->pos;
    if (n < 1 || p0 + n > T) return NULL;
    const GPTParams *p = &g->p;
    memcpy(g->tokens + p0, tokens, (size_t)n * sizeof(int32_t));
    for (int r = 0; r < n; r++) {
        const float *we = p->wte + (size_t)tokens[r] * C, *pe = p->wpe + (size_t)(p0 + r) * C;
        float *x = g->x + (size_t)r * C;
        for (int c = 0; c < C; c++) x[c] = we[c] + pe[c];
    }
    for (int l = 0; l < L; l++) {
        const BlockParams *w = &p->h[l];
        float *K = g->kcache + (size_t)l * T * C, *Vc = g->vcache + (size_t)l * T * C;
        // Every new row's keys and values go to the cache; in the last block only the last
        // row is carried on (only its logits are returned).
        ln_rows(g->ln, g->x, w->ln_1_w, w->ln_1_b, n, C);
        linear(g->qkv, g->ln, w->c_attn_w, w->c_attn_b, n, C, 3 * C);
        for (int r = 0; r < n; r++) {
            memcpy(K + (size_t)(p0 + r) * C, g->qkv + (size_t)r * 3 * C + C, (size_t)C * sizeof(float));
            memcpy(Vc + (size_t)(p0 + r) * C, g->qkv + (size_t)r * 3 * C + 2 * C, (size_t)C * sizeof(float));
        }
        const int r0 = l == L - 1 ? n - 1 : 0, m = n - r0;
        float *x = g->x + (size_t)r0 * C;
        if (p0 == 0 && m > 1)   // a window from position 0: the batched causal kernel
            attention_forward(g->atty, g->att, g->qkv, 1, n, C, NH, 0.0f, (DropoutKey){ 0, 0, 1 });
        else
            for (int r = r0; r < n; r++)
                attend(g->atty + (size_t)(r - r0) * C, g->qkv + (size_t)r * 3 * C, K, Vc, p0 + r, C, NH, g->att);
        linear(g->branch, g->atty, w->attn_proj_w, w->attn_proj_b, m, C, C);
        add_rows(x, g->branch, (long)m * C);
        ln_rows(g->ln, x, w->ln_2_w, w->ln_2_b, m, C);
        linear(g->fch, g->ln, w->c_fc_w, w->c_fc_b, m, C, 4 * C);
        gelu_rows(g->fch, (long)m * 4 * C);
        linear(g->branch, g->fch, w->mlp_proj_w, w->mlp_proj_b, m, 4 * C, C);
        add_rows(x, g->branch, (long)m * C);
        if (l == L - 1) memmove(g->x, x, (size_t)C * sizeof(float));   // last row first
    }
    g->pos = p0 + n;
    ln_rows(g->ln, g->x, p->ln_f_w, p->ln_f_b, 1, C);
    linear(g->logits, g->ln, p->lm_head_w, NULL, 1, C, V);
    return g->logits;
}

const float *gpt_infer_next(GPTInfer *g, const int32_t *ctx, long n) {
    if (n < 1) return NULL;
    const int T = g->shape.block_size;
    const int32_t *win = n > T ? ctx + (n - T) : ctx;
    const int w = n > T ? T : (int)n;
    // The cache is a prefix of this window: extend it.
    if (g->pos < w && memcmp(g->tokens, win, (size_t)g->pos * sizeof(int32_t)) == 0)
        return gpt_infer_feed(g, win + g->pos, w - g->pos);
    g->pos = 0;
    return gpt_infer_feed(g, win, w);
}
