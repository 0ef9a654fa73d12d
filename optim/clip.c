/* Gradient clipping (see clip.h). Gradients are overwritten in place. */
#include "clip.h"

#include <math.h>

#define CLIP_BLOCK 4096 /* floats per partial sum at least */
#define CLIP_MAX_BLOCKS 1024
#define CLIP_PAR_MIN 32768

/* one block: sum of |g|^p (p = 2 and 1 fast paths) or max |g| (p = inf) */
static double block_norm(const float *g, size_t n, double p) {
    double acc = 0;
    if (isinf(p)) {
        for (size_t i = 0; i < n; i++) {
            double a = fabs((double)g[i]);
            if (a > acc || a != a) acc = a; /* keep NaN */
        }
    } else if (p == 2.0) {
        for (size_t i = 0; i < n; i++) acc += (double)g[i] * (double)g[i];
    } else if (p == 1.0) {
        for (size_t i = 0; i < n; i++) acc += fabs((double)g[i]);
    } else {
        for (size_t i = 0; i < n; i++) acc += pow(fabs((double)g[i]), p);
    }
    return acc;
}

size_t clip_blocks(size_t n, size_t *blk) {
    if (n == 0) {
        *blk = 0;
        return 0;
    }
    size_t nblk = (n + CLIP_BLOCK - 1) / CLIP_BLOCK;
    if (nblk > CLIP_MAX_BLOCKS) nblk = CLIP_MAX_BLOCKS;
    *blk = (n + nblk - 1) / nblk;
    return (n + *blk - 1) / *blk;
}

double grad_norm(const float *grads, size_t n, double norm_type) {
    if (!(norm_type > 0)) return NAN;
    if (n == 0) return 0.0;
    /* blocks depend on n only, so partial sums are the same for any thread count */
    size_t blk, nblk = clip_blocks(n, &blk);
    double part[CLIP_MAX_BLOCKS];
#ifdef HAVE_OPENMP
#pragma omp parallel for schedule(static) if (n >= CLIP_PAR_MIN)
#endif
    for (size_t b = 0; b < nblk; b++) {
        size_t lo = b * blk, hi = lo + blk < n ? lo + blk : n;
        part[b] = block_norm(grads + lo, hi - lo, norm_type);
    }
    double acc = 0;
    if (isinf(norm_type)) {
        for (size_t b = 0; b < nblk; b++)
            if (part[b] > acc || part[b] != part[b]) acc = part[b];
        return acc;
    }
    for (size_t b = 0; b < nblk; b++) acc += part[b];
    if (norm_type == 2.0) return sqrt(acc);
    if (norm_type == 1.0) return acc;
    return pow(acc, 1.0 / norm_type);
}

/* torch: clip_coef = max_norm / (total_norm + 1e-6) on a float tensor, where
 * scalar / tensor is Tensor.__rtruediv__ = tensor.reciprocal() * scalar */
float clip_coef(float total, double max_norm) { return (1.0f / (total + 1e-6f)) * (float)max_norm; }

double clip_grad_norm(float *grads, size_t n, double max_norm, double norm_type) {
    float total = (float)grad_norm(grads, n, norm_type);
    if (!isfinite(total)) return total;
    float coef = clip_coef(total, max_norm);
    if (coef < 1.0f) {
#ifdef HAVE_OPENMP
#pragma omp parallel for simd schedule(static) if (n >= CLIP_PAR_MIN)
#endif
        for (size_t i = 0; i < n; i++) grads[i] *= coef;
    }
    return total;
}

void clip_grad_value(float *grads, size_t n, double clip_value) {
    const float c = (float)clip_value;
#ifdef HAVE_OPENMP
#pragma omp parallel for simd schedule(static) if (n >= CLIP_PAR_MIN)
#endif
    for (size_t i = 0; i < n; i++) {
        float g = grads[i];
        grads[i] = g < -c ? -c : (g > c ? c : g);
    }
}
