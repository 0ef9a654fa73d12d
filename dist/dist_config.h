/* The exchange's configuration: topologies and error-feedback memories by name,
 * DistConfig, the --codec parser and each codec's paper defaults (the topology,
 * the memory, SBC's p with --delay, DGC's warm-up). dist/exchange.h runs what
 * this describes; dist_config.c has the table of defaults with the papers'
 * sections. */
#ifndef GC_DIST_CONFIG_H
#define GC_DIST_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "dist/policy.h"

typedef enum { TOPO_AUTO = -1, TOPO_ALLREDUCE = 0, TOPO_ALLGATHER, TOPO_PS, TOPO_RING, TOPO_COUNT } Topology;
typedef enum { MEM_AUTO = -1, MEM_NONE = 0, MEM_RESIDUAL, MEM_DGC, MEM_COUNT } MemoryKind;

const char *topology_name(int t);
const char *memory_name(int m);
int topology_parse(const char *s);   /* -1 when unknown */
int memory_parse(const char *s);     /* -1 when unknown */

typedef struct {
    PolicyConfig policy;
    int topology;        /* TOPO_AUTO: the codec's paper default */
    int memory;          /* MEM_AUTO: the codec's paper default */
    int delay;           /* local steps per exchange, >= 1 */
    int deltas;          /* -1 auto (sbc or delay > 1), 0 gradients, 1 weight deltas */
    int sbc_p_given;     /* --codec sbc gave p=; if not, p follows the delay (SBC IV-B) */
    /* DGC (DGC section 3, appendix B-C) */
    double dgc_momentum; /* momentum of the correction (the optimizer's) */
    int dgc_nesterov;
    double dgc_clip;     /* global L2 clip threshold; each worker uses clip * N^-1/2 (0 = off) */
    double dgc_warmup;   /* warm-up epochs: density 25%, 6.25%, ... down to the target (default 4,
                          * DGC section 4.1's CIFAR setting; train_lstm sets 1, its language model's) */
    double weight_decay; /* folded into the clipped gradient before DGC's momentum correction */
    /* the task's gradient clipping (--clip; 0 = off), by the global L2 norm as
     * torch.nn.utils.clip_grad_norm_: of the averaged gradient before the
     * optimizer when gradients are exchanged ("conventionally executed after
     * gradient aggregation", DGC section 3.2), of each local step's gradient when
     * weight deltas are; under DGC's memory its local clipping (dgc_clip) instead */
    double clip_norm;
    /* TernGrad (TernGrad section 3.1) */
    int scalar_sharing;  /* allreduce-max of the per-tensor scalars: 1, 0, or -1 = TernGrad's tensors only */
    uint64_t seed;       /* stochastic codecs: per (step, rank, tensor) streams */
    int codec_threads;   /* threads of the per-tensor passes and chunk-parallel encoders; 0 = OpenMP default */
    /* network model */
    double bandwidth;    /* bits per second (0 = no model) */
    double latency;      /* seconds per message hop */
} DistConfig;

/* defaults: fp32, auto topology and memory, delay 1, warm-up 4 epochs, sharing on */
void dist_config_default(DistConfig *c);
/* Parse a --codec value: a codec spec, optionally with exchange keys mixed in
 * (dgc: warmup=EPOCHS, clip=NORM; terngrad: share=0|1; any: memory=KIND) or a
 * named configuration ("graddrop[:density=D]": Gradient Dropping = the dgc
 * selection with plain residual memory and no DGC corrections or warm-up).
 * 0, or -1 with a message. */
int dist_parse_codec(DistConfig *c, const char *text, char *err, size_t errlen);
/* Resolves what cfg leaves to the codec (topology, memory, deltas; SBC's p with
 * --delay) in place, and refuses, with a message, a combination the exchange
 * cannot run (DGC's memory with weight deltas, the ring or another optimizer
 * than SGD; a compressed codec on allreduce; --delay < 1). exchange_new does
 * the same; the trainers call it before reading any data. 0 or -1. */
int dist_config_resolve(DistConfig *c, int opt_kind, char *err, size_t errlen);
/* DGC warm-up: the density used in (fractional) epoch for target density d */
double dgc_warmup_density(double target, double warmup_epochs, double epoch);

#endif
