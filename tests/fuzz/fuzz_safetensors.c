// tests/fuzz/fuzz_safetensors.c — libFuzzer target for the safetensors reader
// (checkpoint/safetensors.c) and init_from's checks on what it accepts (checkpoint/state_dict.c).
//
// Input: the bytes of a .safetensors file. What the reader accepts must be consistent (every
// tensor inside the data, the sizes its shape and dtype give, the tensors tiling the data) and
// safe for its user: every element of every tensor is read, then the file is offered to
// init_from's checks for a tiny model (V 5, T 4, 1 layer, 1 head, C 4), which must accept or
// refuse it with a message, never crash.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "model/gpt.h"
#include "checkpoint/safetensors.h"
#include "checkpoint/state_dict.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    SafeTensors st;
    char err[1024], note[1024];
    if (safetensors_parse(data, size, "fuzz.safetensors", &st, err, sizeof err)) {
        if (!err[0]) abort();   // every refusal says why
        return 0;
    }
    uint64_t total = 0;
    for (int i = 0; i < st.n_tensors; i++) {
        const StTensor *t = &st.tensors[i];
        uint64_t numel = 1;
        for (int d = 0; d < t->ndim; d++) numel *= (uint64_t)t->shape[d];
        if (t->ndim == 0) numel = 1;
        if (numel != t->numel || t->numel * st_dtype_size(t->dtype) != t->nbytes) abort();
        if (t->data < data || t->data + t->nbytes > data + size) abort();
        if (!t->name[0] || safetensors_find(&st, t->name) != t) abort();
        total += t->nbytes;
        volatile float sink = 0;
        if (t->dtype == ST_F32 || t->dtype == ST_F16 || t->dtype == ST_BF16 || t->dtype == ST_F64)
            for (uint64_t j = 0; j < t->numel; j++) sink += st_get_float(t, j);
        (void)sink;
    }
    uint64_t header;
    memcpy(&header, data, 8);
    if (total != size - 8 - header) abort();   // the tensors tile the data section
    const GPTShape shape = { 5, 4, 1, 1, 4, 0, 0, 0 };
    const uint32_t vocab[5] = { '\n', ' ', 'a', 'b', 'c' };
    size_t n;
    if (gpt_shape_check(&shape, &n, err, sizeof err)) abort();
    float *params = malloc(n * sizeof(float));
    const int rc = state_dict_from_safetensors(&st, "fuzz.safetensors", &shape, vocab, params, note, sizeof note, err,
                                               sizeof err);
    if (rc != 0 && !err[0]) abort();
    free(params);
    safetensors_free(&st);
    return 0;
}
