// kernels/backend_profile.c — the timing shims of kernels/backend_profile.h.
#include "kernels/backend_profile.h"

#include <stdint.h>
#include <string.h>

#include "config/clock.h"
#include "kernels/cpu/gemm.h"

// Matmul roles (kernels/backend_profile.h: read from the shape and the bias).
enum { R_C_ATTN, R_ATTN_PROJ, R_C_FC, R_MLP_PROJ, R_LM_HEAD, R_OTHER, N_ROLES };

// Rows, in the table's order: forward, backward, optimizer, memory.
enum {
    P_CAST, P_ENCODER_FWD, P_LN_FWD, P_RESLN_FWD,
    P_MM_FWD, P_MMGELU_FWD = P_MM_FWD + N_ROLES,
    P_ATT_FWD = P_MMGELU_FWD + N_ROLES, P_ATT_FWD_CACHED, P_GELU_FWD, P_DROP_FWD, P_CE_FWD, P_CE_FWDBWD,
    P_CE_BWD, P_MM_BWD, P_ATT_BWD = P_MM_BWD + N_ROLES, P_GELU_BWD, P_LN_BWD, P_DROP_BWD, P_ENCODER_BWD,
    P_SUMSQ, P_SCALE, P_ACCUMULATE, P_ADAMW, P_ZERO, P_UPLOAD, P_DOWNLOAD, N_ROWS
};

static const char *const ROLE_NAME[N_ROLES] = {"c_attn", "attn_proj", "c_fc", "mlp_proj", "lm_head", "other"};

typedef struct { char op[48]; char category[40]; long calls; uint64_t ns; double gemm_s; } Row;

static Row g_rows[N_ROWS];
static Backend g_orig;       // the wrapped backend's table as it was
static Backend *g_be;        // the wrapped backend, NULL when none
static int g_depth;          // > 0 while inside a timed op

static void name_row(int r, const char *op, const char *category) {
    snprintf(g_rows[r].op, sizeof g_rows[r].op, "%s", op);
    snprintf(g_rows[r].category, sizeof g_rows[r].category, "%s", category);
}

static void name_matmul_rows(int first, const char *op, const char *dir) {
    for (int k = 0; k < N_ROLES; k++) {
        char o[48], c[40];
        snprintf(o, sizeof o, "%s[%s]", op, ROLE_NAME[k]);
        snprintf(c, sizeof c, "matmul.%s.%s", dir, ROLE_NAME[k]);
        name_row(first + k, o, c);
    }
}

static void name_rows(void) {
    name_row(P_CAST, "cast_weights", "cast");
    name_row(P_ENCODER_FWD, "encoder_forward", "embedding.fwd");
    name_row(P_LN_FWD, "layernorm_forward", "layernorm.fwd");
    name_row(P_RESLN_FWD, "residual_layernorm_forward", "layernorm.fwd");
    name_matmul_rows(P_MM_FWD, "matmul_forward", "fwd");
    name_matmul_rows(P_MMGELU_FWD, "matmul_gelu_forward", "fwd");
    name_row(P_ATT_FWD, "attention_forward", "attention.fwd");
    name_row(P_ATT_FWD_CACHED, "attention_forward_cached", "attention.fwd");
    name_row(P_GELU_FWD, "gelu_forward", "gelu.fwd");
    name_row(P_DROP_FWD, "dropout_forward", "dropout.fwd");
    name_row(P_CE_FWD, "crossentropy_forward", "crossentropy");
    name_row(P_CE_FWDBWD, "crossentropy_forward_backward", "crossentropy");
    name_row(P_CE_BWD, "crossentropy_softmax_backward", "crossentropy");
    name_matmul_rows(P_MM_BWD, "matmul_backward", "bwd");
    name_row(P_ATT_BWD, "attention_backward", "attention.bwd");
    name_row(P_GELU_BWD, "gelu_backward", "gelu.bwd");
    name_row(P_LN_BWD, "layernorm_backward", "layernorm.bwd");
    name_row(P_DROP_BWD, "dropout_backward", "dropout.bwd");
    name_row(P_ENCODER_BWD, "encoder_backward", "embedding.bwd");
    name_row(P_SUMSQ, "sum_squares", "clip");
    name_row(P_SCALE, "scale", "clip");
    name_row(P_ACCUMULATE, "accumulate", "other");   // ZeRO stage 2 only
    name_row(P_ADAMW, "adamw_update", "optimizer");
    name_row(P_ZERO, "zero", "zero");
    name_row(P_UPLOAD, "upload", "copy");
    name_row(P_DOWNLOAD, "download", "copy");
}

static int role(int C, int OC, const void *bias) {
    if (!bias) return R_LM_HEAD;
    if (OC == 3 * C) return R_C_ATTN;
    if (OC == C) return R_ATTN_PROJ;
    if (OC == 4 * C) return R_C_FC;
    if (C == 4 * OC) return R_MLP_PROJ;
    return R_OTHER;
}

static double gemm_s(void) {
    double s = 0;
    cpu_gemm_totals(&s, NULL);
    return s;
}

// Every shim: time the call when it is the outermost one, then add it to its row.
#define TIMED(row, call)                                                                     \
    do {                                                                                     \
        if (g_depth++) { call; g_depth--; break; }                                           \
        const double g0 = gemm_s();                                                          \
        const uint64_t t0 = now_ns();                                                        \
        call;                                                                                \
        const uint64_t t1 = now_ns();                                                        \
        Row *r_ = &g_rows[row];                                                              \
        r_->calls++; r_->ns += t1 - t0; r_->gemm_s += gemm_s() - g0;                        \
        g_depth--;                                                                           \
    } while (0)

static void s_zero(Backend *be, void *p, size_t n) { TIMED(P_ZERO, g_orig.zero(be, p, n)); }
static void s_upload(Backend *be, void *d, const void *s, size_t n) { TIMED(P_UPLOAD, g_orig.upload(be, d, s, n)); }
static void s_download(Backend *be, void *d, const void *s, size_t n) {
    TIMED(P_DOWNLOAD, g_orig.download(be, d, s, n));
}
static void s_encoder_forward(Backend *be, float *out, const int32_t *inp, const float *wte, const float *wpe, int B,
                              int T, int C) {
    TIMED(P_ENCODER_FWD, g_orig.encoder_forward(be, out, inp, wte, wpe, B, T, C));
}
static void s_encoder_backward(Backend *be, float *dwte, float *dwpe, const float *dout, const int32_t *inp, int B,
                               int T, int C) {
    TIMED(P_ENCODER_BWD, g_orig.encoder_backward(be, dwte, dwpe, dout, inp, B, T, C));
}
static void s_layernorm_forward(Backend *be, float *out, float *mean, float *rstd, const float *inp, const float *w,
                                const float *b, int N, int C) {
    TIMED(P_LN_FWD, g_orig.layernorm_forward(be, out, mean, rstd, inp, w, b, N, C));
}
static void s_residual_layernorm_forward(Backend *be, float *res, float *out, float *mean, float *rstd,
                                         const float *a, const float *b, const float *w, const float *bias, int N,
                                         int C) {
    TIMED(P_RESLN_FWD, g_orig.residual_layernorm_forward(be, res, out, mean, rstd, a, b, w, bias, N, C));
}
static void s_layernorm_backward(Backend *be, float *dinp, float *dw, float *db, const float *dout, const float *inp,
                                 const float *w, const float *mean, const float *rstd, int N, int C) {
    TIMED(P_LN_BWD, g_orig.layernorm_backward(be, dinp, dw, db, dout, inp, w, mean, rstd, N, C));
}
// The residual dropout fused into the LayerNorms counts in the LayerNorms' rows.
static void s_residual_dropout_layernorm_forward(Backend *be, float *res, float *out, void *out_lp, float *mean,
                                                 float *rstd, const float *a, const float *b, const float *w,
                                                 const float *bias, int N, int C, long row_len, float p, DropoutKey k) {
    TIMED(P_RESLN_FWD, g_orig.residual_dropout_layernorm_forward(be, res, out, out_lp, mean, rstd, a, b, w, bias, N, C,
                                                                 row_len, p, k));
}
static void s_layernorm_backward_dropout(Backend *be, float *dinp, float *dbr, void *dbr_lp, float *dw, float *db,
                                         const float *dout, const float *inp, const float *w, const float *mean,
                                         const float *rstd, int N, int C, long row_len, float p, DropoutKey k) {
    TIMED(P_LN_BWD, g_orig.layernorm_backward_dropout(be, dinp, dbr, dbr_lp, dw, db, dout, inp, w, mean, rstd, N, C,
                                                      row_len, p, k));
}
static void s_matmul_forward(Backend *be, float *out, const float *inp, const float *w, const float *bias, int N,
                             int C, int OC) {
    TIMED(P_MM_FWD + role(C, OC, bias), g_orig.matmul_forward(be, out, inp, w, bias, N, C, OC));
}
static void s_matmul_gelu_forward(Backend *be, float *pre, float *out, const float *inp, const float *w,
                                  const float *bias, int N, int C, int OC) {
    TIMED(P_MMGELU_FWD + role(C, OC, bias), g_orig.matmul_gelu_forward(be, pre, out, inp, w, bias, N, C, OC));
}
static void s_matmul_backward(Backend *be, float *dinp, float *dw, float *db, const float *dout, const float *inp,
                              const float *w, int N, int C, int OC) {
    // the bias's gradient is NULL exactly when the forward had no bias (lm_head)
    TIMED(P_MM_BWD + role(C, OC, db), g_orig.matmul_backward(be, dinp, dw, db, dout, inp, w, N, C, OC));
}
// The producers of the matmuls' low-precision operands and the matmuls taking them (kernels/backend.h)
// count in the rows of the ops they stand for.
static void s_layernorm_forward_lp(Backend *be, float *res, float *out, void *out_lp, float *mean, float *rstd,
                                   const float *a, const float *b, const float *w, const float *bias, int N, int C) {
    TIMED(res ? P_RESLN_FWD : P_LN_FWD, g_orig.layernorm_forward_lp(be, res, out, out_lp, mean, rstd, a, b, w, bias, N, C));
}
static void s_attention_forward_lp(Backend *be, float *out, void *out_lp, float *att, const float *qkv,
                                   const void *qkv_lp, int B, int T, int C, int NH, float p, DropoutKey k) {
    TIMED(P_ATT_FWD, g_orig.attention_forward_lp(be, out, out_lp, att, qkv, qkv_lp, B, T, C, NH, p, k));
}
static void s_matmul_forward_lp(Backend *be, float *out, void *out_lp, const void *inp_lp, const float *w,
                                const float *bias, int N, int C, int OC) {
    TIMED(P_MM_FWD + role(C, OC, bias), g_orig.matmul_forward_lp(be, out, out_lp, inp_lp, w, bias, N, C, OC));
}
static void s_matmul_gelu_forward_lp(Backend *be, float *pre, float *out, void *out_lp, const void *inp_lp,
                                     const float *w, const float *bias, int N, int C, int OC) {
    TIMED(P_MMGELU_FWD + role(C, OC, bias), g_orig.matmul_gelu_forward_lp(be, pre, out, out_lp, inp_lp, w, bias, N, C, OC));
}
static void s_matmul_backward_lp(Backend *be, float *dinp, float *dw, float *db, const float *dout, const void *dout_lp,
                                 const void *inp_lp, const float *w, int N, int C, int OC) {
    TIMED(P_MM_BWD + role(C, OC, db), g_orig.matmul_backward_lp(be, dinp, dw, db, dout, dout_lp, inp_lp, w, N, C, OC));
}
static void s_attention_forward(Backend *be, float *out, float *att, const float *qkv, int B, int T, int C, int NH,
                                float p, DropoutKey k) {
    TIMED(P_ATT_FWD, g_orig.attention_forward(be, out, att, qkv, B, T, C, NH, p, k));
}
static void s_attention_forward_cached(Backend *be, float *out, float *att, float *kc, float *vc, const float *qkv,
                                       int B, int p0, int Tn, int Tq, int T_max, int C, int NH) {
    TIMED(P_ATT_FWD_CACHED, g_orig.attention_forward_cached(be, out, att, kc, vc, qkv, B, p0, Tn, Tq, T_max, C, NH));
}
static void s_attention_backward(Backend *be, float *dqkv, float *scratch, const float *dout, const float *qkv,
                                 const float *att, int B, int T, int C, int NH, float p, DropoutKey k) {
    TIMED(P_ATT_BWD, g_orig.attention_backward(be, dqkv, scratch, dout, qkv, att, B, T, C, NH, p, k));
}
static void s_attention_backward_lp(Backend *be, float *dqkv, void *dqkv_lp, float *scratch, const float *dout,
                                    const float *qkv, const void *qkv_lp, const float *att, int B, int T, int C,
                                    int NH, float p, DropoutKey k) {
    TIMED(P_ATT_BWD, g_orig.attention_backward_lp(be, dqkv, dqkv_lp, scratch, dout, qkv, qkv_lp, att, B, T, C, NH, p,
                                                  k));
}
static void s_gelu_forward(Backend *be, float *out, const float *inp, long N) {
    TIMED(P_GELU_FWD, g_orig.gelu_forward(be, out, inp, N));
}
static void s_gelu_backward(Backend *be, float *dinp, const float *inp, const float *dout, long N) {
    TIMED(P_GELU_BWD, g_orig.gelu_backward(be, dinp, inp, dout, N));
}
static void s_dropout_forward(Backend *be, float *out, const float *inp, long N, long row_len, float p,
                              DropoutKey k) {
    TIMED(P_DROP_FWD, g_orig.dropout_forward(be, out, inp, N, row_len, p, k));
}
static void s_dropout_backward(Backend *be, float *dinp, const float *dout, long N, long row_len, float p,
                               DropoutKey k) {
    TIMED(P_DROP_BWD, g_orig.dropout_backward(be, dinp, dout, N, row_len, p, k));
}
static void s_crossentropy_forward(Backend *be, float *losses, float *probs, const float *logits,
                                   const int32_t *targets, int N, int V) {
    TIMED(P_CE_FWD, g_orig.crossentropy_forward(be, losses, probs, logits, targets, N, V));
}
static void s_crossentropy_softmax_backward(Backend *be, float *dlogits, const float *probs, const int32_t *targets,
                                            int N, int V, float dloss) {
    TIMED(P_CE_BWD, g_orig.crossentropy_softmax_backward(be, dlogits, probs, targets, N, V, dloss));
}
static void s_crossentropy_forward_backward(Backend *be, float *losses, float *dlogits, const float *logits,
                                            const int32_t *targets, int N, int V, float dloss) {
    TIMED(P_CE_FWDBWD, g_orig.crossentropy_forward_backward(be, losses, dlogits, logits, targets, N, V, dloss));
}
static void s_adamw_update(Backend *be, float *p, const float *g, float *m, float *v, size_t n, float b1, float b2,
                           float eps, float decay, float step, float bc2, float gs) {
    TIMED(P_ADAMW, g_orig.adamw_update(be, p, g, m, v, n, b1, b2, eps, decay, step, bc2, gs));
}
// (the one-launch form times into the same row: a call per optimizer step instead of per tensor)
static void s_adamw_update_segments(Backend *be, float *p, const float *g, float *m, float *v, const AdamWSegment *segs,
                                    int n_segs, float b1, float b2, float eps, float decay, float step, float bc2,
                                    float gs) {
    TIMED(P_ADAMW, g_orig.adamw_update_segments(be, p, g, m, v, segs, n_segs, b1, b2, eps, decay, step, bc2, gs));
}
static double s_sum_squares(Backend *be, const float *x, size_t n) {
    double r = 0;
    TIMED(P_SUMSQ, r = g_orig.sum_squares(be, x, n));
    return r;
}
static void s_scale(Backend *be, float *x, size_t n, float s) { TIMED(P_SCALE, g_orig.scale(be, x, n, s)); }
static void s_accumulate(Backend *be, float *acc, const float *x, size_t n, int copy) {
    TIMED(P_ACCUMULATE, g_orig.accumulate(be, acc, x, n, copy));
}
static void s_cast_weights(Backend *be, const float *params, size_t n, uint64_t version) {
    TIMED(P_CAST, g_orig.cast_weights(be, params, n, version));
}

int backend_profile_install(Backend *be, char *err, size_t errlen) {
    if (g_be) {
        snprintf(err, errlen, "a backend profile is already installed (one per process)");
        return 1;
    }
    if (!be->host_memory) {
        snprintf(err, errlen, "the %s backend's ops are asynchronous: a profile would time launches, not ops",
                 be->name);
        return 1;
    }
    g_orig = *be;
    g_be = be;
    name_rows();
    backend_profile_reset();
// a shim only where the backend has the op (optional ops stay NULL)
#define WRAP(f) if (be->f) be->f = s_##f
    WRAP(zero); WRAP(upload); WRAP(download);
    WRAP(encoder_forward); WRAP(encoder_backward);
    WRAP(layernorm_forward); WRAP(residual_layernorm_forward); WRAP(layernorm_backward);
    WRAP(matmul_forward); WRAP(matmul_gelu_forward); WRAP(matmul_backward);
    WRAP(attention_forward); WRAP(attention_forward_cached); WRAP(attention_backward);
    WRAP(gelu_forward); WRAP(gelu_backward); WRAP(dropout_forward); WRAP(dropout_backward);
    WRAP(crossentropy_forward); WRAP(crossentropy_softmax_backward); WRAP(crossentropy_forward_backward);
    WRAP(adamw_update); WRAP(adamw_update_segments); WRAP(sum_squares); WRAP(scale); WRAP(accumulate); WRAP(cast_weights);
    WRAP(layernorm_forward_lp); WRAP(attention_forward_lp); WRAP(matmul_forward_lp); WRAP(matmul_gelu_forward_lp);
    WRAP(matmul_backward_lp); WRAP(attention_backward_lp); WRAP(residual_dropout_layernorm_forward);
    WRAP(layernorm_backward_dropout);
#undef WRAP
    return 0;
}

void backend_profile_uninstall(void) {
    if (!g_be) return;
    *g_be = g_orig;
    g_be = NULL;
}

void backend_profile_reset(void) {
    for (int r = 0; r < N_ROWS; r++) { g_rows[r].calls = 0; g_rows[r].ns = 0; g_rows[r].gemm_s = 0; }
}

int backend_profile_rows(ProfileRow *out, int max) {
    int n = 0;
    for (int r = 0; r < N_ROWS && n < max; r++) {
        if (!g_rows[r].calls) continue;
        out[n++] = (ProfileRow){g_rows[r].op, g_rows[r].category, g_rows[r].calls, 1e-9 * (double)g_rows[r].ns,
                                g_rows[r].gemm_s};
    }
    return n;
}

void backend_profile_print(FILE *f, int steps, double step_seconds) {
    ProfileRow rows[N_ROWS];
    const int n = backend_profile_rows(rows, N_ROWS);
    const double per = steps > 0 ? 1.0 / steps : 0.0, step_ms = 1e3 * step_seconds * per;
    const double share = step_seconds > 0 ? 100.0 / step_seconds : 0.0;
    double ops = 0;
    fprintf(f, "PROF %-36s %-22s %10s %10s %7s %10s\n", "op", "category", "calls/step", "ms/step", "share%",
            "gemm_ms");
    for (int i = 0; i < n; i++) {
        ops += rows[i].seconds;
        fprintf(f, "PROF %-36s %-22s %10.2f %10.3f %7.2f %10.3f\n", rows[i].op, rows[i].category,
                (double)rows[i].calls * per, 1e3 * rows[i].seconds * per, rows[i].seconds * share,
                1e3 * rows[i].gemm_seconds * per);
    }
    fprintf(f, "PROF %-36s %-22s %10s %10.3f %7.2f %10s\n", "(rest)", "rest", "-", 1e3 * (step_seconds - ops) * per,
            (step_seconds - ops) * share, "-");
    fprintf(f, "PROF %-36s %-22s %10s %10.3f %7.2f %10s\n", "(step)", "step", "-", step_ms,
            step_seconds > 0 ? 100.0 : 0.0, "-");
}
