// tests/tools/logits.c — a snapshot's logits on fixed tokens, for tests/test_export.sh (which
// compares them with PyTorch's on the exported model). Linked with build/libmingpt.a.
//
//   logits SNAPSHOT OUT [B] [SEED]
// OUT gets: int32 B, T, V; int32 tokens (B, T); float32 logits (B, T, V), little-endian. The
// tokens are uniform in [0, V) from a fixed xorshift stream (SEED, default 1); T is the
// snapshot's block_size. The forward pass is the training one (gpt_forward) with dropout off,
// on the CPU backend in fp32.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "model/gpt.h"
#include "checkpoint/snapshot.h"

int main(int argc, char **argv) {
    if (argc < 3) { fprintf(stderr, "usage: logits SNAPSHOT OUT [B] [SEED]\n"); return 2; }
    const int B = argc > 3 ? atoi(argv[3]) : 2;
    uint64_t r = argc > 4 ? strtoull(argv[4], NULL, 10) : 1;
    Snapshot s;
    char err[2048];
    if (snapshot_load(argv[1], &s, err, sizeof err)) { fprintf(stderr, "logits: %s\n", err); return 1; }
    GPTShape shape = s.shape;
    shape.embd_pdrop = shape.resid_pdrop = shape.attn_pdrop = 0.0f;
    const int T = shape.block_size, V = shape.vocab_size;
    GPT m;
    if (B < 1 || gpt_build(&m, &shape, B, T, err, sizeof err)) { fprintf(stderr, "logits: %s\n", B < 1 ? "B < 1" : err); return 1; }
    gpt_set_params(&m, s.params);
    int32_t *x = malloc(sizeof(int32_t) * (size_t)B * T);
    r = r * 2654435761u + 0x9e3779b97f4a7c15ULL;
    for (long i = 0; i < (long)B * T; i++) {
        r ^= r >> 12; r ^= r << 25; r ^= r >> 27;
        x[i] = (int32_t)((r * 0x2545F4914F6CDD1DULL >> 33) % (uint64_t)V);
    }
    gpt_forward(&m, x, NULL, B, T, false, 0, 0, NULL);
    FILE *f = fopen(argv[2], "wb");
    const int32_t dims[3] = { B, T, V };
    const size_t n = (size_t)B * T * V;
    int ok = f && fwrite(dims, 4, 3, f) == 3 && fwrite(x, 4, (size_t)B * T, f) == (size_t)B * T &&
             fwrite(m.acts.logits, 4, n, f) == n;
    if (f && fclose(f) != 0) ok = 0;
    if (!ok) { fprintf(stderr, "logits: cannot write %s\n", argv[2]); return 1; }
    free(x);
    gpt_free(&m);
    snapshot_free(&s);
    return 0;
}
