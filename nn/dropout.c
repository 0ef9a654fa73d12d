/* Inverted dropout with seed-reproducible masks (see dropout.h).
 * Shape letter: n elements. No parameters; outputs are OVERWRITTEN (may alias inputs). */
#include "nn/dropout.h"

#include <string.h>

#include "common/errors.h"
#include "nn/parallel.h"

static int dropout_apply(float *out /*n*/, const float *inp /*n*/, float p, uint64_t s, size_t n) {
    if (!(p >= 0.0f && p < 1.0f)) return -GC_ERR_PARAM;
    if (p == 0.0f) {
        if (out != inp) memmove(out, inp, n * sizeof(float));
        return 0;
    }
    const float scale = 1.0f / (1.0f - p);
    const long nn = (long)n;
#ifdef HAVE_OPENMP
#pragma omp parallel for schedule(static) if (nn > 16384)
#endif
    for (long i = 0; i < nn; i++) out[i] = dropout_keep(s, (uint64_t)i, p) ? inp[i] * scale : 0.0f;
    return 0;
}

int dropout_forward(float *out /*n*/, const float *inp /*n*/, float p, uint64_t s, size_t n) {
    return dropout_apply(out, inp, p, s, n);
}

int dropout_backward(float *dinp /*n*/, const float *dout /*n*/, float p, uint64_t s, size_t n) {
    /* forward: out[i] = keep_i * inp[i] / (1 - p)  =>  dinp[i] = keep_i * dout[i] / (1 - p) */
    return dropout_apply(dinp, dout, p, s, n);
}
