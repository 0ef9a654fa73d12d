/* Internal to the exchange (dist/exchange.c and dist/exchange_ckpt.c): the
 * state of one worker's exchange. Everything else reaches it through
 * dist/exchange.h. */
#ifndef GC_EXCHANGE_INTERNAL_H
#define GC_EXCHANGE_INTERNAL_H

#include "dist/exchange.h"

enum { SLOT_PUSH = EXCHANGE_SLOT_PUSH, SLOT_PULL = EXCHANGE_SLOT_PULL }; /* allgather/ps encoder slots (exchange.h) */
enum { SIDE_PUSH, SIDE_PULL, SIDE_RING };  /* what a frame carries, for side inputs */

struct Exchange {
    DistConfig cfg;
    Comm *comm;
    const ParamTable *pt;
    OptConfig opt;
    int N, rank, T;
    int deltas;
    int grad_pull;       /* ps: workers pull the averaged gradient (TernGrad), not a model delta (3LC) */
    CodecSpec *pull_spec; /* [T] grad_pull: each tensor's pull codec (ternsum for TernGrad's, else fp32) */
    TensorPolicy *pol;
    int *mem;            /* [T] memory kind of each tensor */
    float *resid, *vel;  /* error feedback (DGC: resid is v, vel is u) */
    float *anchor;       /* deltas: parameters at the last exchange */
    float *work, *agg, *tmp;
    float *repr;
    uint8_t *mask, *levels;
    float *global;       /* ps server with model-delta pulls: the global model */
    float *pull_resid;   /* ps server with model-delta pulls: error accumulation of the pulled deltas */
    float *scalars;      /* [T] shared TernGrad scalars */
    int nslots;          /* codec slots per tensor */
    Codec **enc, **dec;  /* [T * nslots] lazily created */
    ByteBuf out, in;
    ByteBuf ckpt;        /* the "codecs" checkpoint section */
    size_t *lens;
    /* tensor-parallel passes (see tensor_loop) */
    int *order;          /* [T] tensors by size, largest first */
    size_t *at;          /* [T] a pass's staged entry offsets */
    int64_t *flen;       /* [T] a pass's frame lengths (or negative GcError, or NO_ENTRY) */
    const uint8_t **fp;  /* [T] a decode pass's frames */
    double *sq;          /* DGC's clipping: sums of squares per block of each tensor (optim/clip.h's
                          * clip_blocks), tensor t's from sq_at[t]; [sq_at[T]] */
    size_t *sq_at;       /* [T + 1] */
    int started; /* set by the first exchange_step, or by a checkpoint load after step > 0 */
    ExchangeStats st;  /* this step's, from exchange_step on (exchange_deltas adds its exchange) */
    uint64_t sent0, recv0; /* the Comm's counters when exchange_step began */
    double side_density;   /* this step's density for the codecs' side inputs (DGC's warm-up), else 0 */
    uint64_t dec_comp; /* bytes of the compressed tensors' entries in the bundle decode_pass read last */
    LayerStats *layers; /* [T] with exchange_track_layers, else NULL */
    int failed;
    int quiet_from; /* this step: the first peer whose bundle had no entries where frames were due, or -1 */
    char err[512];
};

/* the codec of tensor t in one of its slots (tab: ex->enc or ex->dec; exchange.c
 * says which slot serves which frames), created on first use */
Codec *exchange_slot_codec(Exchange *ex, Codec **tab, int t, int slot);

#endif
