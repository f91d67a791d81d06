// checkpoint/state_dict.h — minGPT's state_dict as a safetensors file (checkpoint/safetensors.h):
// `mingpt export` writes a snapshot's model under minGPT's names and PyTorch's layouts, so that
//   model.load_state_dict(safetensors.torch.load_file("model.safetensors"))
// loads it into karpathy/minGPT's GPT (or bench/torch_gpt.py's) as it is; and
// trainer_config.init_from reads such a file (from mingpt or from PyTorch) into a new run.
//
// Tensors (V vocab_size, T block_size, C n_embd; Linear weights are (out, in) as in PyTorch):
//   transformer.wte.weight (V, C)            transformer.wpe.weight (T, C)
//   transformer.h.<l>.ln_1.weight, .bias (C)
//   transformer.h.<l>.attn.c_attn.weight (3C, C), .bias (3C)
//   transformer.h.<l>.attn.c_proj.weight (C, C), .bias (C)
//   transformer.h.<l>.attn.bias (1, 1, T, T)  minGPT's causal-mask buffer: tril(ones(T, T));
//                                            left out when T > 4096 (T^2 floats per layer)
//   transformer.h.<l>.ln_2.weight, .bias (C)
//   transformer.h.<l>.mlp.c_fc.weight (4C, C), .bias (4C)
//   transformer.h.<l>.mlp.c_proj.weight (C, 4C), .bias (C)
//   transformer.ln_f.weight, .bias (C)       lm_head.weight (V, C)
// __metadata__ (strings, as safetensors requires): format "pt", mingpt (the version that
// exported it), vocab (a JSON list of the characters, in token-id order), vocab_size,
// block_size, n_layer, n_head, n_embd, iteration (of the snapshot), config (the YAML the run
// was trained with).
#ifndef MINGPT_STATE_DICT_H
#define MINGPT_STATE_DICT_H

#include <stddef.h>
#include <stdint.h>

#include "model/gpt.h"
#include "checkpoint/snapshot.h"
#include "checkpoint/safetensors.h"

// minGPT's masks are block_size^2 floats per layer: written up to this block_size (64 MiB per
// layer in fp32), left out above it (then load_state_dict needs strict=False for them).
#define STATE_DICT_MASK_MAX_BLOCK 4096

// Writes snapshot s's model to path as above, the tensors in dtype (ST_F32, ST_BF16 or ST_F16).
// Returns 0, or non-zero with a message naming the file in err.
int state_dict_export(const Snapshot *s, const char *path, StDtype dtype, char *err, size_t errlen);

// Reads the weights at path, a safetensors file or a mingpt snapshot (told apart by its first
// bytes, each through its validated loader), for a model of `shape` whose data has the
// vocabulary vocab[0..shape->vocab_size) (code points), into params (the model's num_params
// floats, its flat layout). Every tensor of the model must be there with its shape, in F32, F16,
// BF16 or F64, finite; the attn.bias buffers may be there (then they must be the causal mask);
// nothing else may. The vocabulary (metadata `vocab`) and n_head (metadata `n_head`) must equal
// the model's when the file gives them; a file without `vocab` is said in *note (its token ids
// are taken to be the data's). Returns 0; 1 when the file is missing, damaged or holds
// non-finite values; 2 when it does not fit the model or the data (the first mismatch named,
// with the config key that decides it). Messages in err, notes in note (may be "").
int state_dict_import(const char *path, const GPTShape *shape, const uint32_t *vocab, float *params, char *note,
                      size_t notelen, char *err, size_t errlen);

// state_dict_import's checks and conversion on a parsed safetensors file (`path` names it in
// messages); the same results.
int state_dict_from_safetensors(const SafeTensors *st, const char *path, const GPTShape *shape, const uint32_t *vocab,
                                float *params, char *note, size_t notelen, char *err, size_t errlen);

#endif
