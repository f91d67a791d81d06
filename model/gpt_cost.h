// model/gpt_cost.h — what training a model of a given shape costs, before anything is allocated:
// FLOPs per token (for MFU) and the memory of parameters, gradients, AdamW moments and
// activations on the backend, described and checked against the memory available at start-up.
#ifndef MINGPT_GPT_COST_H
#define MINGPT_GPT_COST_H

#include <stddef.h>

#include "model/gpt.h"

// Model FLOPs per trained token (nanoGPT / PaLM, the causal mask not discounted):
//   6 * N_linear + 12 * L * C * T,   N_linear = L * 12 C^2 + V C (Linear weights incl. lm_head)
// 6 N: forward + backward multiply-adds of the weights (2 + 4 FLOPs per weight); 12 L C T: the
// attention scores and weighted sum (q k^T and att v), forward and backward. T: the sequence
// length trained on. MFU = FLOPs per token x tokens/s / peak FLOP/s.
double gpt_flops_per_token(const GPTShape *s, int T);

// Bytes a training run of this shape holds on its backend, by what holds them.
typedef struct {
    size_t num_params;   // parameters of the shape
    size_t params;       // fp32 master weights: 4 x num_params
    size_t grads;        // fp32 gradients: 4 x num_params
    size_t adamw;        // AdamW m and v, fp32: 8 x num_params
    size_t acts;         // the activation buffer gpt_build_with carves for (B,T) in this layout
                         // (saved activations + backward scratch; gpt_count_acts floats x 4)
    size_t weight_cast;  // the low-precision copy of the weights (Backend.cast_weights): 2 x num_params
                         // with bf16/fp16 matmuls on a backend that keeps one, else 0
    size_t total;        // the sum
} GPTMemory;

// The memory gpt_build_with + adamw_init would allocate for a batch of (B,T) on backend `be`
// with `dtype` matmuls, laid out as opt says (NULL: every activation kept). Counts what scales
// with the model and the batch; buffers of a few B x T ints and the libraries' own memory are
// not included (tests/test_gpt_cost.c checks the sum against the peak RSS of a real step). Returns
// 0, or non-zero with gpt_check_build's message in err for a shape or batch it refuses.
int gpt_memory_estimate(const GPTShape *s, int B, int T, const Backend *be, ComputeDtype dtype,
                        const GPTBuildOptions *opt, GPTMemory *out, char *err, size_t errlen);

// The estimate as people read it, into buf: "about 41.4 MiB of host memory per rank (parameters
// 3.1 MiB, gradients 3.1 MiB, AdamW moments 6.2 MiB, activations 28.9 MiB)", the memory named
// "host" for a backend in host memory, else by the backend's name; ", low-precision weights X"
// ends the list when mem->weight_cast. Sizes in MiB, from 1 GiB on in GiB.
void gpt_memory_describe(const GPTMemory *mem, const Backend *be, char *buf, size_t len);

// Checks the estimate against what backend `be` can allocate now: the device's free memory
// (Backend.mem_info), or the host's MemAvailable (/proc/meminfo) for a backend in host memory.
// Returns 0 when it fits or nothing tells, else 1 with the message in err ("the run needs about X
// of memory (the estimate above), more than the Y available (...); nothing was allocated (...)").
int gpt_memory_check(const GPTMemory *mem, Backend *be, char *err, size_t errlen);

#endif
