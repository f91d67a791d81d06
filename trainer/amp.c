// trainer/amp.c — see amp.h.
#include "trainer/amp.h"

#include <stdio.h>
#include <string.h>

ComputeDtype amp_resolve(bool use_amp, const char *amp_dtype, bool on_cuda, bool cpu_bf16, char *note, size_t len) {
    if (len) note[0] = 0;
    if (!use_amp) return DTYPE_FP32;
    if (strcmp(amp_dtype, "float16") == 0) return DTYPE_FP16;
    const bool asked_bf16 = strcmp(amp_dtype, "bfloat16") == 0;
    if (on_cuda) return asked_bf16 ? DTYPE_BF16 : DTYPE_FP16;
    if (cpu_bf16) return DTYPE_BF16;
    // bfloat16 without the instructions could only be emulated, slower than fp32 (float16, asked
    // for, stays emulated: its loss scaling is part of what it means)
    if (asked_bf16)
        snprintf(note, len, "use_amp with bfloat16: this CPU has no AVX512-BF16 or AMX, where bfloat16 would only be "
                            "emulated (slower than fp32); training in fp32 instead");
    else
        snprintf(note, len, "use_amp with amp_dtype=auto: this CPU has no bfloat16 instructions (AVX512-BF16 or "
                            "AMX); training in float32");
    return DTYPE_FP32;
}

const char *amp_dtype_name(ComputeDtype dt) {
    return dt == DTYPE_BF16 ? "bfloat16" : dt == DTYPE_FP16 ? "float16" : "float32";
}
