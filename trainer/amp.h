// trainer/amp.h — trainer_config.use_amp and amp_dtype into the precision a run's matmuls use,
// as torch.autocast picks its dtype per device.
//
// With use_amp, amp_dtype "auto" (the default) is autocast's per-device default where it is
// faster than fp32: float16 on CUDA (with the dynamic loss scaler, the tutorial's GradScaler
// path), bfloat16 on a CPU with bf16 instructions (AVX512-BF16 or AMX); on a CPU without them
// fp32, said in a note (bfloat16 would only be emulated there, slower than fp32). "bfloat16" and
// "float16" are taken as asked, except bfloat16 on a CPU without bf16 instructions (fp32, with
// a note); float16 on the CPU is emulated (the CUDA backend's numerics), only when asked for.
#ifndef MINGPT_AMP_H
#define MINGPT_AMP_H

#include <stdbool.h>
#include <stddef.h>

#include "kernels/backend.h"

// The matmul dtype for use_amp / amp_dtype ("auto" | "bfloat16" | "float16"; anything else is
// taken as "auto") on a CUDA backend (on_cuda) or the CPU backend, whose CPU has bf16
// instructions or not (cpu_bf16, ignored on CUDA). note (len bytes) gets "" or one line, without
// "note: " and newline, saying why the run trains in fp32 although use_amp asks for less.
ComputeDtype amp_resolve(bool use_amp, const char *amp_dtype, bool on_cuda, bool cpu_bf16, char *note, size_t len);

// The dtype's name as torch spells it: "float32", "bfloat16", "float16" (what snapshots record).
const char *amp_dtype_name(ComputeDtype dt);

#endif
