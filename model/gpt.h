// model/gpt.h — minGPT's GPT (karpathy/minGPT mingpt/model.py) on any Backend (kernels/backend.h):
// the CPU's, or CUDA's; every op goes through the backend's table.
//
//   x = drop(wte[idx] + wpe[pos])                          (B,T,C)
//   n_layer pre-LN blocks:
//     x = x + drop(c_proj(attn(ln_1(x))))                  causal self-attention, c_attn C->3C
//     x = x + drop(c_proj(gelu_tanh(c_fc(ln_2(x)))))      MLP C->4C->C
//   logits = lm_head(ln_f(x))                              (B,T,V), no bias, not tied to wte
//   loss = mean cross-entropy over targets != -1           (F.cross_entropy, ignore_index=-1)
//
// Parameters live in one contiguous buffer and gradients in another with the same
// layout, so AdamW, the gradient norm and all-reduce see one flat array. The layout is
// layer-major (see gpt_param_table): wte, wpe, then each block's tensors in order, then
// ln_f and lm_head; names follow minGPT's state_dict.
#ifndef MINGPT_GPT_H
#define MINGPT_GPT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/backend.h"

typedef struct {
    int vocab_size;      // V
    int block_size;      // maximum T (rows of wpe)
    int n_layer;         // L
    int n_head;          // NH
    int n_embd;          // C
    float embd_pdrop, resid_pdrop, attn_pdrop;
} GPTShape;

// One parameter tensor of the flat buffer.
typedef struct {
    char name[64];       // minGPT state_dict name, e.g. "transformer.h.0.attn.c_attn.weight"
    size_t offset;       // first element in the flat buffer
    size_t numel;
    int rows, cols;      // (rows, cols); cols = 1 for vectors
    bool decay;          // AdamW weight decay applies (Linear weights only, as in minGPT)
    float init_std;      // N(0, std) at init; 0 = constant init_value
    float init_value;    // 1 for LayerNorm weights, 0 for biases
} ParamTensor;

// Pointers of one block into a flat buffer (parameters or gradients).
typedef struct {
    float *ln_1_w, *ln_1_b;        // (C), (C)
    float *c_attn_w, *c_attn_b;    // (3C,C), (3C)
    float *attn_proj_w, *attn_proj_b; // attn.c_proj (C,C), (C)
    float *ln_2_w, *ln_2_b;        // (C), (C)
    float *c_fc_w, *c_fc_b;        // (4C,C), (4C)
    float *mlp_proj_w, *mlp_proj_b;   // mlp.c_proj (C,4C), (C)
} BlockParams;

typedef struct {
    float *wte;                    // (V,C)
    float *wpe;                    // (block_size,C)
    BlockParams *h;                // (L) blocks
    float *ln_f_w, *ln_f_b;        // (C), (C)
    float *lm_head_w;              // (V,C)
} GPTParams;

// Activations of one block saved for the backward pass; shapes for (B,T). With activation
// checkpointing every layer's BlockActs point into one shared working set except res_3 (the
// residual stream, kept per layer); in the inference layout res_3 is shared too (see GPT).
typedef struct {
    float *ln_1, *ln_1_mean, *ln_1_rstd;   // (B,T,C), (B,T), (B,T)
    float *qkv;                            // (B,T,3C)
    float *att;                            // (B,NH,T,T) softmax probabilities, pre-dropout
    float *atty;                           // (B,T,C) attention output before c_proj
    float *res_2;                          // (B,T,C) x + drop(attn branch)
    float *ln_2, *ln_2_mean, *ln_2_rstd;   // (B,T,C), (B,T), (B,T)
    float *fch;                            // (B,T,4C) c_fc output (GELU input)
    float *fch_gelu;                       // (B,T,4C)
    float *res_3;                          // (B,T,C) block output
    // With a backend that has the *_lp ops (kernels/backend.h) and low-precision matmuls, the
    // training layouts keep the LayerNorm outputs only as the copies the matmuls multiply
    // (Backend.lp_size bytes per element; ln_1 and ln_2 are then NULL), and the attention output
    // likewise (atty then NULL); NULL otherwise.
    void *ln_1_lp, *ln_2_lp, *atty_lp;     // (B,T,C)
    // Where the backend also has matmul_backward_dgelu: the GELU output likewise, only as the copy
    // c_fc's epilogue writes and mlp.c_proj multiplies (fch_gelu then NULL); NULL otherwise.
    void *fch_gelu_lp;                     // (B,T,4C)
    // Where the backend's attention takes q, k, v as a copy for this shape
    // (Backend.attention_takes_lp): c_attn's output only as that copy, written by its GEMM
    // (matmul_forward_lp's out_lp) and read by the attention forward and backward (qkv then NULL);
    // NULL otherwise (the inference layout always: its cached attention reads fp32 qkv).
    void *qkv_lp;                          // (B,T,3C)
} BlockActs;

typedef struct {
    float *encoded;                        // (B,T,C) drop(wte + wpe), the input of block 0
    BlockActs *h;                          // (L)
    float *ln_f, *ln_f_mean, *ln_f_rstd;   // (B,T,C), (B,T), (B,T)
    void *ln_f_lp;                         // (B,T,C) as BlockActs.ln_1_lp (ln_f then NULL), or NULL
    float *logits;                         // (B,T,V)
    float *probs;                          // (B,T,V) softmax; becomes dlogits in backward
    float *losses;                         // (B,T) per-token loss
    float *branch;                         // (B,T,C) scratch: a block branch's output
} GPTActs;

// Gradient scratch of the backward pass, reused by every block.
typedef struct {
    float *dres;                           // (B,T,C) gradient of the residual stream
    float *dbranch;                        // (B,T,C) gradient of a branch output
    float *dln;                            // (B,T,C) gradient of a LayerNorm output
    float *datty;                          // (B,T,C)
    float *dqkv;                           // (B,T,3C); NULL when dqkv_lp is kept instead
    void *dqkv_lp;                         // (B,T,3C) in matmul_dtype (Backend.attention_backward_lp), or NULL
    float *datt;                           // (B,NH,T,T) attention scratch
    float *dfch, *dfch_gelu;               // (B,T,4C)
    // With BlockActs.fch_gelu_lp: the gradient of c_fc's output as the copy matmul_backward_dgelu
    // writes and c_fc's backward multiplies, in dfch_gelu's memory (free on that path); else NULL.
    void *dfch_lp;                         // (B,T,4C)
} GPTGradScratch;

// The per-call inputs of a training forward beyond its batch: where the batch's rows sit in the
// global batch (for the dropout masks) and the weight of its loss gradient. gpt_forward keeps
// them for the gpt_backward that follows it, which must see the same masks and scale. A NULL
// pointer stands for GPT_STEP_ARGS_DEFAULT (one process, one micro-batch, no loss scaling);
// zero-initialised fields are NOT the defaults (stride 0, scale 0).
typedef struct {
    // Local row j of the batch is global row batch_row0 + j * batch_row_stride, which keys its
    // dropout masks (kernels/dropout_rng.h). {0, 1} in one process; rank r of W passes
    // {r + W*m*B, W} for micro-step m of batch size B, so that W ranks draw exactly the masks
    // of one process with batch W*B.
    int64_t batch_row0, batch_row_stride;
    // Multiplies d(mean loss) in the backward (a factor on every gradient, not on the returned
    // loss): 1, or S under fp16 dynamic loss scaling; the trainer also folds 1/world_size and the
    // micro-batch's share of the step's tokens in (trainer/train_step.c).
    float loss_scale;
    // Optional (NULL: none): gpt_forward calls params_needed(params_ctx, lo, hi) just before it
    // first reads the parameters [lo, hi) of the flat buffer (offsets in floats): the embeddings,
    // then each block (with the next block's ln_1, or ln_f, which its last op applies), then ln_f
    // and lm_head; the ranges grow in order and together cover [0, num_params). With low-precision
    // matmuls and Backend.cast_weights, which reads every weight first, one call covers them all.
    // The data-parallel trainer waits there for the all-gather of the updated parameters (ZeRO,
    // trainer/buckets.h). gpt_backward (activation checkpointing's recomputation included) reads
    // only what this forward already asked for; gpt_forward_inference never calls it.
    void (*params_needed)(void *ctx, size_t lo, size_t hi);
    void *params_ctx;
    // gpt_forward_backward only: where it runs as a graph on a backend with download_async, the
    // per-token losses are copied to the host without waiting and it returns NAN; gpt_loss_wait
    // then returns the mean loss (after a later call that waits for the backend, such as the
    // gradient norm's sum_squares, without waiting again). targets must stay valid until then.
    // Elsewhere the loss is read at once, as without it.
    bool defer_loss;
    // gpt_forward_backward only (NULL: none): called after the backward, among the step's ops,
    // inside the graph where the micro-step runs as one (it must then queue backend ops only, the
    // same ones on every call with the same tail_ctx: the trainer's optimizer tail,
    // Backend.optimizer_tail), else right after gpt_backward.
    void (*tail)(void *ctx);
    void *tail_ctx;
} GPTStepArgs;
#define GPT_STEP_ARGS_DEFAULT ((GPTStepArgs){ .batch_row0 = 0, .batch_row_stride = 1, .loss_scale = 1.0f })

// gpt_backward's hook: called, when given, each time gradients [first, num_params) have become
// final: after ln_f + lm_head, then in each block (from the last to the first) after every op
// whose parameter gradients are then final (mlp.c_proj, mlp.c_fc, ln_2, attn.c_proj, attn.c_attn,
// ln_1: first is the op's weight), and after wte/wpe (first = 0). The flat layout puts later ops
// at higher offsets (within a block too: ln_1, c_attn, attn.c_proj, ln_2, c_fc, mlp.c_proj), so the
// finished part is always a suffix of the buffer and an op's weight and bias never sit on both
// sides of a hook point: the data-parallel trainer starts a bucket's all-reduce here, and ZeRO
// stage 2 places the next op's bucket (trainer/buckets.h, buckets_on_grads_ready).
typedef void (*GPTGradsReady)(void *ctx, size_t first);

// A captured micro-step of gpt_forward_backward (Backend.graph_run) and what it was captured for.
typedef struct {
    int B, T;
    bool train;
    long n_valid;
    float loss_scale;
    bool checkpointing;
    bool grad_overwrite;      // captured as the first backward after gpt_zero_grad (GRAD_OVERWRITE)
    void (*tail)(void *);     // GPTStepArgs.tail and tail_ctx captured after the backward (NULL: none)
    void *tail_ctx;
    void *graph;              // the backend's (Backend.graph_free)
    uint64_t last_use;        // GPT.graph_uses when last used
} GPTGraph;
#define GPT_GRAPHS 8          // graphs kept per model; a new key replaces the least recently used

// Every buffer below (parameters, gradients, activations) is backend memory: host memory
// on the CPU backend, device memory on CUDA. Read or write it from the host only when
// be->host_memory, else through gpt_get_params / gpt_set_params / be->download.
// Whoever writes params_memory other than through gpt_set_params / gpt_init_weights (an
// optimizer step, a broadcast, a memcpy into host memory) must call gpt_params_changed before
// the next gpt_forward: the backend's cast copy of the weights (Backend.cast_weights) is
// keyed by params_version.
typedef struct {
    GPTShape shape;
    Backend *be;              // where the buffers live and the ops run
    Backend *owned_be;        // set when gpt_build created its own CPU backend
    int B, T;                 // batch and sequence length the activation buffers hold
    int n_tensors;
    ParamTensor *tensors;     // (n_tensors) the flat layout
    size_t num_params;
    float *params_memory;     // (num_params)
    uint64_t params_version;  // bumped by gpt_params_changed: names the content of params_memory
    float *grads_memory;      // (num_params)
    bool grads_zero;          // grads_memory holds zeros: set by gpt_zero_grad, cleared by any
                              // backward (or graph of one) that writes it and by gpt_bind_grad
    bool grads_rebound;       // gpt_bind_grad moved a gradient out of grads_memory (for good)
    GPTParams params, grads;  // views into the two buffers
    float *acts_memory;
    size_t num_acts;
    GPTActs acts;
    GPTGradScratch scratch;
    // Activation checkpointing (torch.utils.checkpoint's trade): acts keeps each block's input
    // and output (encoded, res_3 of every layer) and ONE working set that every layer's other
    // activations share; gpt_backward recomputes block l's forward from its input into it.
    bool checkpointing;
    // Forward-only evaluation (gpt_forward_inference): every block's activations in one shared
    // set, carved from the same acts_memory, so a batch holds B_infer >= B rows (the most that
    // fit in num_acts floats). It overwrites the training activations.
    int B_infer;
    GPTActs infer;
    bool acts_overwritten;        // the last forward was gpt_forward_inference: no gpt_backward
    int32_t *inputs, *targets;    // (B_infer,T) backend copies of the last batch
    float *host_losses;           // (B_infer,T) host copy of the per-token losses
    // State of the last forward pass, used by gpt_backward.
    int cur_B, cur_T;
    long n_valid;             // targets != -1 in the last forward
    bool train;               // dropout was on
    uint64_t dropout_seed, step;
    GPTStepArgs args;         // the last gpt_forward's (GPT_STEP_ARGS_DEFAULT before any)
    float mean_loss;
    // A deferred loss read (GPTStepArgs.defer_loss) not yet completed: its targets and size
    bool loss_pending;
    const int32_t *pending_targets;
    int pending_BT;
    GPTGraph graphs[GPT_GRAPHS];  // gpt_forward_backward's graphs (n_graphs of them)
    int n_graphs;
    uint64_t graph_uses;      // gpt_forward_backward calls that went through a graph
    bool in_graph;            // the forward is being captured: the batch is uploaded and the
                              // losses are read outside it (gpt_forward_backward)
    // The step's dropout keys, one per site (1 + 3 n_layer), in backend memory (drop_keys_dev,
    // allocated by the first gpt_forward_backward that needs it) and their host copy: a graph
    // with dropout reads them at run time (DropoutKey.dev) while dev_keys is set.
    DropoutKey *drop_keys_dev, *drop_keys_host;
    bool dev_keys;
} GPT;

// Number of dropout sites per step (stream index = step * GPT_DROPOUT_SITES + site in the
// dropout domain, kernels/dropout_rng.h).
#define GPT_DROPOUT_SITES 1024

// Size limits of a model shape: every size of the model is an int and every index fits one,
// and no file or override can make the parameter count overflow. Raising them needs no
// other change than these numbers while 4*n_embd, B*T and the largest tensor stay below 2^31.
#define GPT_MAX_VOCAB   0x110000          // every Unicode code point
#define GPT_MAX_BLOCK   (1 << 20)
#define GPT_MAX_LAYER   4096
#define GPT_MAX_EMBD    (1 << 18)
#define GPT_MAX_PARAMS  (1ull << 36)      // 256 GiB of fp32 parameters

// The parameter count of a shape: wte (V, C), wpe (T, C), per layer 12 C^2 + 13 C, ln_f 2 C,
// lm_head (V, C) (minGPT's, lm_head untied). Sizes within the limits above (vocab_size may be 0).
uint64_t gpt_num_params(const GPTShape *s);

// Checks a shape before anything is sized from it: every size in [1, its limit above],
// n_embd % n_head == 0, the parameter count <= GPT_MAX_PARAMS. Returns 0 and sets *num_params
// (may be NULL), or non-zero with a message naming the first bad size in err. No overflow
// for any int values.
int gpt_shape_check(const GPTShape *s, size_t *num_params, char *err, size_t errlen);

// Fills out[] (room for 4 + 12*n_layer tensors; NULL to only count) with the flat
// layout of a model of this shape. Returns the number of tensors.
int gpt_param_table(const GPTShape *s, ParamTensor *out);

// How gpt_build_with lays out the activations.
typedef struct {
    bool activation_checkpointing;   // see GPT.checkpointing; false: every activation kept
    // No gradient buffer (ZeRO stage 2: the trainer places each tensor's gradient itself, with
    // gpt_bind_grad, before the backward writes it): grads_memory is NULL and gpt_zero_grad does
    // nothing.
    bool no_grad_buffer;
} GPTBuildOptions;

// Checks the shape (gpt_shape_check, dropouts in [0,1)), allocates
// parameters, gradients and activations for batches up to (B,T) (T <= block_size) on
// backend `be` (not owned: it must outlive the model), laid out as opt says (NULL: the
// defaults, nothing recomputed). Returns non-zero with a message in err on a bad shape or
// out of memory.
int gpt_build_with(GPT *m, const GPTShape *s, int B, int T, Backend *be, const GPTBuildOptions *opt,
                   char *err, size_t errlen);
// The checks of gpt_build_with that need no memory: the shape (gpt_shape_check, dropouts in
// [0,1)), 1 <= T <= block_size, B*T and the activation count within the kernels' limits. Returns
// 0 and sets *num_params (may be NULL), or non-zero with a message in err.
int gpt_check_build(const GPTShape *s, int B, int T, size_t *num_params, char *err, size_t errlen);
// gpt_build_with with the default options.
int gpt_build_on(GPT *m, const GPTShape *s, int B, int T, Backend *be, char *err, size_t errlen);
// The activation floats (num_acts) gpt_build_with would allocate for this shape, batch and
// options on backend `be` (its gelu_forward changes the layout), without allocating anything.
// The shape and sizes must have passed gpt_build_with's checks.
size_t gpt_count_acts(const GPTShape *s, int B, int T, const Backend *be, const GPTBuildOptions *opt);
// gpt_build_on with a CPU backend (fp32) owned by the model.
int gpt_build(GPT *m, const GPTShape *s, int B, int T, char *err, size_t errlen);
void gpt_free(GPT *m);

// Copies the flat parameter buffer (num_params floats) from / to host memory
// (gpt_set_params calls gpt_params_changed).
void gpt_set_params(GPT *m, const float *host);
void gpt_get_params(const GPT *m, float *host);

// Declares that params_memory has new content (bumps params_version), so that the next
// gpt_forward has the backend cast the weights again (Backend.cast_weights). Called by
// gpt_set_params, gpt_init_weights and trainer/train_step.c after an AdamW step.
void gpt_params_changed(GPT *m);

// minGPT init: every Linear and Embedding weight N(0, 0.02), both c_proj weights
// N(0, 0.02/sqrt(2*n_layer)), biases 0, LayerNorm weight 1 / bias 0. Deterministic in seed
// (stream RNG_DOMAIN_INIT of kernels/dropout_rng.h). Returns non-zero when out of host memory.
int gpt_init_weights(GPT *m, uint64_t seed);

// Forward pass on idx (B,T) int32 host memory, with B <= m->B, T <= m->T. With low-precision
// matmuls and a backend that has cast_weights, first hands it (params_memory, num_params,
// params_version): the weights are cast at most once per version. Logits land in
// m->acts.logits (backend memory). targets (B,T) host memory may be NULL (no loss; returns -1).
// train = true enables dropout, whose masks depend only on (dropout_seed, step, site, global
// element index; see GPTStepArgs.batch_row0). args (NULL: GPT_STEP_ARGS_DEFAULT) is kept for
// the gpt_backward that follows. Returns the mean loss (not multiplied by args->loss_scale).
float gpt_forward(GPT *m, const int32_t *idx, const int32_t *targets, int B, int T,
                  bool train, uint64_t dropout_seed, uint64_t step, const GPTStepArgs *args);

// gpt_forward followed by gpt_backward(m, NULL, NULL): the same results bit for bit (loss,
// gradients accumulated into m->grads_memory, the state gpt_forward leaves). targets must not be
// NULL. On a backend with graph_run (CUDA) the ops of both passes run as one graph per distinct
// (B, T, train, number of targets != -1, args->loss_scale, m->checkpointing, whether it is the
// first backward after gpt_zero_grad: gpt_backward's GRAD_OVERWRITE), the GPT_GRAPHS
// most recently used kept: the batch is uploaded first, the graph reads it from the model's
// buffers, and the losses are downloaded after it (the first call of a key runs directly, the
// second captures). With dropout on the keys of the step's masks (which change every step) are
// written to a fixed backend buffer (Backend.upload_async) before the graph, whose kernels read
// them there, so the graph serves every step. It runs the two calls directly instead when the
// backend has no graphs (or, with dropout on, no upload_async), when args has params_needed, or
// for a model without its own gradient buffer.
float gpt_forward_backward(GPT *m, const int32_t *idx, const int32_t *targets, int B, int T,
                           bool train, uint64_t dropout_seed, uint64_t step, const GPTStepArgs *args);

// The mean loss of the last forward (m->mean_loss), completing a deferred read
// (GPTStepArgs.defer_loss) first: Backend.download_wait, then the host sum, in gpt_forward's
// order (the same bits as a loss read at once). Every forward completes a pending read first.
float gpt_loss_wait(GPT *m);

// Forward-only pass for evaluation, dropout off: the same ops as gpt_forward(train = false)
// on the same rows, hence the same logits and loss bit for bit on a given backend, but every
// block writes into one shared set of activations (m->infer), so B may be up to m->B_infer
// (>= m->B). idx, targets (B,T) int32 host memory, T <= m->T; targets may be NULL (returns -1).
// Logits (B,T,V) land in m->infer.logits, per-token losses (B,T) in m->host_losses (0 where the
// target is -1). Returns the mean loss over targets != -1 (0 when there are none; m->n_valid
// counts them). The training activations are overwritten: gpt_backward may not follow.
float gpt_forward_inference(GPT *m, const int32_t *idx, const int32_t *targets, int B, int T);

// ---- Incremental inference (sampling): minGPT's generate() on one sequence, with a key/value cache
// on the model's backend, through the same blocks and ops as gpt_forward. Feeding tokens runs the
// forward of the new positions only: each layer's keys and values of every position fed so far stay
// in the cache, which Backend.attention_forward_cached extends and attends over, so a new token costs
// one token's forward (one matrix-vector product per weight matrix, attention over the cached
// positions) instead of a forward over the whole context. In the last block only the last row goes
// on after the attention (only its logits are returned). Dropout is off. The logits equal
// gpt_forward's at the same position up to fp32 rounding (tests/test_infer.c: within 1e-5).
typedef struct {
    GPT *m;                   // the model (not owned; must outlive this)
    int pos;                  // positions held by the cache, 0 .. block_size
    int32_t *tokens;          // (block_size) host: the tokens at those positions
    float *kv_memory;         // backend: the keys (n_layer, block_size, C), then the values (same shape)
    float *acts_memory;       // backend: one working set for up to block_size rows (every block shares it)
    GPTActs acts;             // views into acts_memory
    int32_t *inputs;          // backend (block_size): the tokens of one feed
    float *logits;            // host (V): the logits of the last feed
} GPTInfer;

// Allocates the cache and the working set of g on m's backend: 2 n_layer block_size C floats for the
// cache, about block_size (n_head block_size + 19 C + 2 V) for the activations (the forward-only
// layout of gpt_forward_inference for one row of block_size). The backend must run fp32 matmuls
// and have attention_forward_cached (both built-in backends do). Returns non-zero with a message in
// err otherwise or when out of memory (g is then empty; gpt_infer_end on it is a no-op).
int gpt_infer_begin(GPTInfer *g, GPT *m, char *err, size_t errlen);
// Frees what gpt_infer_begin allocated.
void gpt_infer_end(GPTInfer *g);
// Empties the cache: the next token is at position 0.
void gpt_infer_reset(GPTInfer *g);
// Appends tokens (n) host int32, each in [0, V), at positions pos .. pos+n-1 and returns the logits
// (V,) host fp32 at the last of them (valid until the next feed), or NULL when n < 1 or
// pos + n > block_size (nothing done). The parameters are m's current ones; m's training
// activations are not touched.
const float *gpt_infer_feed(GPTInfer *g, const int32_t *tokens, int n);
// The logits (V,) for the token after ctx (n) host int32, n >= 1: gpt_forward on the last
// min(n, block_size) tokens, at its last position (minGPT's generate() crops the context so). While
// the cropped window extends the cached tokens the cache is extended; otherwise (a new context, or a
// window that slid past block_size, which moves every position) it is refilled with the window in one
// feed. NULL when n < 1.
const float *gpt_infer_next(GPTInfer *g, const int32_t *ctx, long n);

// Sets every gradient to 0. Until the next gpt_backward (or gpt_forward_backward) the model
// takes grads_memory to hold those zeros: nothing else may write it in between.
void gpt_zero_grad(GPT *m);

// Backward pass of the last gpt_forward (which must have had targets): accumulates
// args->loss_scale * d(mean loss)/d(params) into m->grads_memory, with that forward's
// GPTStepArgs. The first backward after gpt_zero_grad, when every gradient lies in the model's
// own buffer (no gpt_bind_grad), runs under the backend's GRAD_OVERWRITE (Backend.set_grad_write):
// the matmul backwards write their parameter gradients instead of adding them to the zeros,
// the same values, with less work on a GPU; the mode is back to GRAD_ACCUMULATE on return. With m->checkpointing each block's forward is first recomputed from its saved
// input (the dropout masks are a function of the step and the element, kernels/dropout_rng.h,
// so the recomputation is bit for bit the forward's). ready (NULL: none) is called with
// ready_ctx as each suffix of the gradients becomes final (GPTGradsReady). A call after
// gpt_forward_inference is a programming error (fatal_error).
void gpt_backward(GPT *m, GPTGradsReady ready, void *ready_ctx);

// Points the gradient of tensor k (m->tensors[k]) at p (backend memory of numel floats), where
// gpt_backward accumulates it from then on (for a model built with no_grad_buffer).
void gpt_bind_grad(GPT *m, int k, float *p);

// The `first` values gpt_backward passes to its GPTGradsReady hook for a model of shape s, in
// order (ln_f and lm_head; six per block, from the last block, each block's ops from mlp.c_proj to
// ln_1; the encoder: 0), into out; returns the count (6 * n_layer + 2), out NULL: only the count
// (the room out needs; 0 when out of memory). Descending; between two calls the backward writes
// the gradients of [next first, this first) only.
int gpt_grads_ready_points(const GPTShape *s, size_t *out);

#endif
