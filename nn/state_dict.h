/* A Model as PyTorch's state_dict, in a safetensors file (common/safetensors.h):
 * what `--export FILE` writes and `--init-from FILE` reads.
 *
 * The tensors, in state_dict order, all float32 except the counters:
 *   every parameter of the table, under its name and shape (nn/params.h: the
 *     names are PyTorch's, and every model keeps PyTorch's memory layout:
 *     conv weights [Cout, Cin, KH, KW], linear weights [Out, In], the LSTM's
 *     [4H, In] / [4H, H] with gates i, f, g, o and both biases, embeddings
 *     [V, E]; so values are copied as they are, never transposed);
 *   after each batch norm's "<bn>.bias": "<bn>.running_mean" [C] and
 *     "<bn>.running_var" [C] from Model.state (which holds, per BN in table
 *     order, mean then var: nn/resnet.h), then "<bn>.num_batches_tracked", an
 *     int64 scalar (I64, shape []): the training steps taken (each step runs one
 *     train-mode forward through every BN). PyTorch uses it only for
 *     momentum=None; gcx's BN momentum is fixed, so on import the counter is
 *     optional, must be an I64 scalar when present, and its value is ignored;
 *   a language model with tied weights (a table with encoder.weight and
 *     decoder.bias but no decoder.weight) also gets "decoder.weight", a copy of
 *     encoder.weight, as PyTorch's state_dict of a tied module lists both; on
 *     import it must equal encoder.weight bit for bit.
 * __metadata__: "format": "pt" (as safetensors.torch writes), "gcx_task" and
 * "gcx_step" (as given by the caller).
 *
 * Import refuses, naming the tensor: a tensor the model lacks, a tensor of the
 * model the file lacks, another shape, another dtype. Nothing of the model
 * changes unless every check passes. An LSTM's carried hidden state, dropout
 * step and optimizer state are training state, not weights: not exported. */
#ifndef GC_NN_STATE_DICT_H
#define GC_NN_STATE_DICT_H

#include <stddef.h>

#include "common/safetensors.h"
#include "nn/model.h"

/* 0, or -1 with a message */
int model_export_safetensors(const Model *m, const char *path, long steps, const char *task, char *err,
                             size_t errlen);
/* loads path into m->params and m->state; 0, or -1 with a message (m unchanged) */
int model_import_safetensors(Model *m, const char *path, char *err, size_t errlen);
/* the same from a parsed file; name is for messages */
int model_import_st(Model *m, const StFile *sf, const char *name, char *err, size_t errlen);

#endif
