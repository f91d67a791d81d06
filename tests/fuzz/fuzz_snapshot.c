// tests/fuzz/fuzz_snapshot.c — libFuzzer target for the snapshot loader (checkpoint/snapshot.c).
//
// Input: the bytes of a snapshot file. Built with FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION,
// where snapshot_parse skips the CRC so mutations reach the record checks. What the loader
// accepts must be safe for its users: the counts agree with the shape, and `sample`'s path
// (vocabulary, model, incremental inference of one token) runs on it.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "data/char_dataset.h"
#include "model/gpt.h"
#include "checkpoint/snapshot.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    Snapshot s;
    char err[1024];
    if (snapshot_parse(data, size, "fuzz.bin", &s, err, sizeof err)) {
        if (!err[0]) abort();   // every refusal says why
        return 0;
    }
    size_t n = 0;
    if (gpt_shape_check(&s.shape, &n, err, sizeof err) || n != s.num_params || s.vocab_size != s.shape.vocab_size)
        abort();
    for (int i = 1; i < s.vocab_size; i++) if (s.vocab[i] <= s.vocab[i - 1]) abort();
    // sample's path, on models small enough to run in a fuzzing iteration
    const GPTShape *sh = &s.shape;
    if (n <= 100000 && (size_t)sh->block_size * sh->block_size * sh->n_head <= 100000) {
        CharDataset ds = {0};
        GPTShape inf_shape = *sh;   // sample's model: dropout off
        inf_shape.embd_pdrop = inf_shape.resid_pdrop = inf_shape.attn_pdrop = 0.0f;
        GPT m = {0};
        GPTInfer inf = {0};
        if (chardataset_from_vocab(&ds, s.vocab, s.vocab_size, sh->block_size) == 0 &&
            gpt_build(&m, &inf_shape, 1, 1, err, sizeof err) == 0 && gpt_infer_begin(&inf, &m, err, sizeof err) == 0) {
            gpt_set_params(&m, s.params);
            int32_t ctx[2] = { 0, s.vocab_size - 1 };
            if (!gpt_infer_next(&inf, ctx, 2)) abort();
        }
        gpt_infer_end(&inf);
        gpt_free(&m);
        chardataset_free(&ds);
    }
    snapshot_free(&s);
    return 0;
}
