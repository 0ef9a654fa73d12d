/* Per-tensor codec policy: which codec each tensor of the parameter table is
 * sent with.
 *
 *   --codec SPEC                 the codec of every compressible tensor
 *   --layer-codec PATTERN=SPEC   (repeatable) tensors whose name matches the glob
 *                                PATTERN use SPEC; later rules win; an explicit
 *                                rule also overrides the automatic exclusions
 *   --min-compress N             tensors with fewer than N values go uncompressed
 *                                (default: none by size)
 * Automatic exclusions (sent as fp32): batch-norm tensors (3LC section 4.2
 * excludes those); biases, except with terngrad ("we separately ternarize the
 * gradients of biases and weights", TernGrad section 3.3) and 3lc (which
 * excludes batch norm only); tensors below --min-compress when given; with
 * terngrad, the last layer (TernGrad section 4.2: "We suggest not to apply
 * ternarizing to the last layer").
 */
#ifndef GC_POLICY_H
#define GC_POLICY_H

#include <stdio.h>

#include "compress/codec.h"
#include "nn/params.h"

#define POLICY_MAX_RULES 32

typedef struct {
    char pattern[128];
    CodecSpec spec;
} LayerRule;

typedef struct {
    CodecSpec spec;     /* the codec this tensor is sent with (fp32 when excluded) */
    int compressed;     /* 0: excluded, sent as fp32 */
    const char *reason; /* why: "codec", "rule PATTERN", "batch-norm", "small", "last layer" */
} TensorPolicy;

typedef struct {
    CodecSpec global;          /* --codec */
    LayerRule rules[POLICY_MAX_RULES];
    int nrules;
    long min_compress;         /* -1 = none by size (biases and batch norm by kind) */
    int keep_last_fp32;        /* -1 = automatic (on for terngrad) */
} PolicyConfig;

/* parse "PATTERN=SPEC" into a rule; 0 or -1 with a message */
int policy_parse_rule(LayerRule *rule, const char *text, char *err, size_t errlen);
/* out[i] for every tensor of pt */
void policy_build(TensorPolicy *out /*pt->n*/, const PolicyConfig *cfg, const ParamTable *pt);
/* the start-of-run table: tensor, numel, codec, reason */
void policy_print(FILE *fp, const TensorPolicy *pol, const ParamTable *pt);
/* the same in one line: "59 tensors: 20 sbc:p=0.01 (99.5% of values), 39 fp32 (0.5% of
 * values; 38 batch-norm, 1 bias)" */
void policy_summary(char *buf, size_t n, const TensorPolicy *pol, const ParamTable *pt);

#endif
