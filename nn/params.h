/* The parameter table and the arenas.
 *
 * Every model keeps all its parameters in ONE float allocation (the parameter
 * arena). Gradients live in a second arena and optimizer state in further
 * arenas, all with the same offsets, so tensor t is params[t.offset ..
 * t.offset + t.numel) in every one of them. The table lists every tensor with a
 * dotted name (e.g. "layer2.0.conv1.weight", as PyTorch's state_dict would name
 * it), a kind, a shape, an offset and a size. The distributed layer picks codecs
 * by name and kind; optimizers and codecs see flat float ranges.
 */
#ifndef GC_PARAMS_H
#define GC_PARAMS_H

#include <stddef.h>

typedef enum {
    PK_CONV_WEIGHT,   /* [Cout, Cin, KH, KW] */
    PK_FC_WEIGHT,     /* [Out, In] */
    PK_BIAS,          /* [Out] (linear, conv, decoder bias) */
    PK_BN_WEIGHT,     /* batch-norm gamma [C] */
    PK_BN_BIAS,       /* batch-norm beta [C] */
    PK_EMBEDDING,     /* [V, E] */
    PK_LSTM_WEIGHT,   /* [4H, In] or [4H, H] */
    PK_LSTM_BIAS,     /* [4H] */
    PK_KIND_COUNT
} ParamKind;

#define PARAM_NAME_MAX 64
#define PARAM_MAX_DIMS 4

typedef struct {
    char name[PARAM_NAME_MAX];
    ParamKind kind;
    int ndim;
    int shape[PARAM_MAX_DIMS];
    size_t offset; /* in floats, into every arena */
    size_t numel;
} ParamInfo;

typedef struct {
    ParamInfo *t;
    int n, cap;
    size_t total; /* floats in each arena */
} ParamTable;

const char *param_kind_name(ParamKind k);
/* true for batch-norm gamma/beta (the distributed layer never compresses them) */
int param_kind_is_bn(ParamKind k);

void param_table_init(ParamTable *pt);
void param_table_free(ParamTable *pt);
/* Appends a tensor; returns its index. Offsets are assigned in order, each
 * tensor starting at a multiple of 16 floats (64 bytes) so every tensor is
 * cache-line aligned in every arena. ndim dims follow. */
int param_table_add(ParamTable *pt, const char *name, ParamKind kind, int ndim, const int *shape);
/* index of the tensor with this exact name, or -1 */
int param_table_find(const ParamTable *pt, const char *name);
/* number of real parameters (sum of numel, without alignment padding) */
size_t param_table_count(const ParamTable *pt);
/* allocate one zeroed, 64-byte aligned arena of pt->total floats. The padding
 * between tensors is written only by whole-arena operations (copies, sums and
 * scales of other arenas, the optimizers' whole-arena updates), each of which
 * gives zero from zero inputs, so it stays zero; code that handles arenas
 * whole relies on that (dist/exchange.c decodes over its average's arena
 * without zeroing it, then adds and scales it whole). */
float *param_arena_alloc(const ParamTable *pt);
void param_arena_free(float *arena);
/* "0.27M" style string */
void param_count_str(char *buf, size_t n, size_t count);

#endif
