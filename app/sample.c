// app/sample.c — autoregressive sampling from a trained snapshot on any backend, through the
// model's incremental inference (model/gpt.h, gpt_infer_next): each new character costs one
// token's forward while the context fits in block_size; past it, the context is cropped to its
// last block_size characters (minGPT's generate), which moves every position, so the window is
// recomputed.
#include "app/sample.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "data/char_dataset.h"
#include "data/sampler.h"
#include "kernels/backend.h"
#include "model/gpt.h"
#include "checkpoint/snapshot.h"
#include "process/log.h"

enum { SAMPLE_CHUNK = 1 << 16 };   // tokens generated between two slides of the context

// ========================================================================== the command line

enum { SAMPLE_SNAPSHOT, SAMPLE_PROMPT, SAMPLE_MAX_NEW_TOKENS, SAMPLE_TEMPERATURE, SAMPLE_TOP_K, SAMPLE_SEED,
       SAMPLE_DEVICE, SAMPLE_N_FLAGS };

static const SubFlag SAMPLE_FLAGS[SAMPLE_N_FLAGS] = {
    [SAMPLE_SNAPSHOT] = {.name = "--snapshot", .type = SUB_STRING, .metavar = "PATH", .required = true,
                         .help = "the snapshot to load"},
    [SAMPLE_PROMPT] = {.name = "--prompt", .type = SUB_STRING, .metavar = "TEXT", .def = "\n",
                       .help = "the UTF-8 text to continue (default a newline)"},
    [SAMPLE_MAX_NEW_TOKENS] = {.name = "--max_new_tokens", .type = SUB_INT, .metavar = "N", .def = "500", .min = 0,
                               .max = LONG_MAX, .help = "characters to generate (default 500)"},
    [SAMPLE_TEMPERATURE] = {.name = "--temperature", .type = SUB_NUMBER, .metavar = "F", .def = "1.0", .above = 0,
                            .help = "the logits are divided by it (default 1.0)"},
    [SAMPLE_TOP_K] = {.name = "--top_k", .type = SUB_INT, .metavar = "K", .def = "0", .min = 0, .max = INT_MAX,
                      .help = "sample from the K most likely characters; 0: all (default)"},
    // MT19937 (torch.manual_seed's generator for sampling here) takes a 32-bit seed
    [SAMPLE_SEED] = {.name = "--seed", .type = SUB_INT, .metavar = "S", .def = "1337", .min = 0,
                     .max = (long)UINT32_MAX, .help = "the sampling generator's seed (default 1337)"},
    [SAMPLE_DEVICE] = {.name = "--device", .type = SUB_CHOICE, .metavar = "DEVICE", .def = "cpu",
                       .choices = "cpu|cuda|auto", .help = "the backend, as trainer_config.device (default cpu)"},
};

static int sample_command(const SubArgs *a, FILE *out) {
    const SubValue *v = a->values;
    const SampleOptions o = {.snapshot = v[SAMPLE_SNAPSHOT].text, .prompt = v[SAMPLE_PROMPT].text,
                             .max_new_tokens = v[SAMPLE_MAX_NEW_TOKENS].i, .temperature = v[SAMPLE_TEMPERATURE].d,
                             .top_k = (int)v[SAMPLE_TOP_K].i, .seed = (uint64_t)v[SAMPLE_SEED].i,
                             .device = v[SAMPLE_DEVICE].text};
    return sample_run(&o, out);
}

const Subcommand SAMPLE_COMMAND = {
    .name = "sample", .description = "print text sampled from a snapshot",
    .flags = SAMPLE_FLAGS, .n_flags = SAMPLE_N_FLAGS, .dialect = SUB_TERSE, .eq_form = true,
    .usage_after = SUB_USAGE_UNKNOWN | SUB_USAGE_NO_VALUE | SUB_USAGE_MISSING, .run = sample_command,
};

// ========================================================================== sampling

// Uniform double in [0,1) from two MT19937 draws (53 bits).
static double uniform01(MT19937 *g) {
    uint64_t a = mt19937_next(g) >> 5, b = mt19937_next(g) >> 6;
    return (a * 67108864.0 + b) / 9007199254740992.0;
}

static int cmp_desc(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x < y) - (x > y);
}

// Picks an id from logits (V,): top-k filter (logits below the k-th largest get
// probability 0, as in minGPT's generate), temperature, softmax, inverse-CDF draw.
// probs is (V,) scratch.
static int pick(const float *logits, int V, double temperature, int top_k, double *probs, MT19937 *g) {
    double cut = -INFINITY;
    if (top_k > 0 && top_k < V) {
        for (int i = 0; i < V; i++) probs[i] = logits[i];
        qsort(probs, V, sizeof *probs, cmp_desc);
        cut = probs[top_k - 1];
    }
    double maxv = -INFINITY, sum = 0.0;
    for (int i = 0; i < V; i++) if (logits[i] >= cut && logits[i] > maxv) maxv = logits[i];
    for (int i = 0; i < V; i++) {
        probs[i] = logits[i] >= cut ? exp((logits[i] - maxv) / temperature) : 0.0;
        sum += probs[i];
    }
    double u = uniform01(g) * sum, acc = 0.0;
    int last = 0;
    for (int i = 0; i < V; i++) {
        if (probs[i] <= 0) continue;
        acc += probs[i];
        last = i;
        if (u < acc) return i;
    }
    return last;
}

// The backend of --device, fp32 (sampling runs no low precision). NULL after saying why on stderr,
// with *rc 2 for a device that cannot be had here, 1 when out of memory.
static Backend *sample_backend(const char *device, int *rc) {
    char why[2048];
    Backend *be;
    const int r = backend_select(device, 0, DTYPE_FP32, &be, why, sizeof why);
    if (r == BACKEND_OK) return be;
    fprintf(stderr, "mingpt: error: sample --device %s: %s\n", device, why);
    *rc = r == BACKEND_NO_MEMORY ? 1 : 2;
    return NULL;
}

int sample_run(const SampleOptions *o, FILE *out) {
    char err[2048];
    Snapshot snap;
    if (snapshot_load(o->snapshot, &snap, err, sizeof err)) {
        fprintf(stderr, "mingpt: error: %s\n", err);
        return 1;
    }
    int rc = 1;
    CharDataset ds = {0};
    Backend *be = NULL;
    GPT m = {0};
    GPTInfer inf = {0};
    int32_t *ctx = NULL;
    double *probs = NULL;
    const int T = snap.shape.block_size;
    if (chardataset_from_vocab(&ds, snap.vocab, snap.vocab_size, T)) { fprintf(stderr, "mingpt: error: out of memory\n"); goto done; }
    if (!(be = sample_backend(o->device, &rc))) goto done;
    GPTShape shape = snap.shape;
    shape.embd_pdrop = shape.resid_pdrop = shape.attn_pdrop = 0.0f;
    // snapshot_load checked the parameter count against the shape: snap.params is the model's layout
    if (gpt_build_on(&m, &shape, 1, 1, be, err, sizeof err) || gpt_infer_begin(&inf, &m, err, sizeof err)) {
        fprintf(stderr, "mingpt: error: %s\n", err);
        goto done;
    }
    gpt_set_params(&m, snap.params);

    // The model sees only the last block_size tokens: ctx holds the prompt plus room to
    // generate, and slides its last T tokens to the front when full, so any
    // --max_new_tokens (up to LONG_MAX: an endless stream) needs bounded memory.
    const size_t plen = strlen(o->prompt);
    const size_t cap = (plen > (size_t)T ? plen : (size_t)T) + SAMPLE_CHUNK;
    ctx = malloc(sizeof(int32_t) * cap);
    probs = malloc(sizeof(double) * ds.vocab_size);
    if (!ctx || !probs) { fprintf(stderr, "mingpt: error: out of memory\n"); goto done; }
    long n = chardataset_encode(&ds, o->prompt, ctx, err, sizeof err);
    if (n < 0) { fprintf(stderr, "mingpt: error: --prompt: %s\n", err); rc = 2; goto done; }
    if (n == 0) { fprintf(stderr, "mingpt: error: --prompt must not be empty\n"); rc = 2; goto done; }

    MT19937 g;
    mt19937_seed(&g, (uint32_t)o->seed);
    fputs(o->prompt, out);
    for (long i = 0; i < o->max_new_tokens; i++) {
        const float *last = gpt_infer_next(&inf, ctx, n);   // logits after ctx[n-min(n,T) .. n)
        int32_t id = pick(last, ds.vocab_size, o->temperature, o->top_k, probs, &g);
        if ((size_t)n == cap) {   // keep the window: the last T tokens (n >= T here)
            memmove(ctx, ctx + (n - T), sizeof(int32_t) * (size_t)T);
            n = T;
        }
        ctx[n++] = id;
        char buf[8];
        int k = chardataset_decode_one(&ds, id, buf);
        errno = 0;
        if (fwrite(buf, 1, k, out) != (size_t)k || ferror(out)) {   // a full disk: stop (an endless stream would not)
            if (out == stdout) log_stdout_failed(errno);
            break;
        }
    }
    fputc('\n', out);
    errno = 0;
    if (fflush(out) != 0 && out == stdout) log_stdout_failed(errno);   // said (and exit 1) by main's last check
    rc = 0;
done:
    free(ctx);
    free(probs);
    gpt_infer_end(&inf);
    gpt_free(&m);
    if (be) be->destroy(be);
    chardataset_free(&ds);
    snapshot_free(&snap);
    return rc;
}
