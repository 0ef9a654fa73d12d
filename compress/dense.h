/* Helpers shared by the dense codecs (fp16, int8, terngrad, stoch3, 3lc,
 * onebit): thread counts, finite-max scans, deterministic block reductions.
 *
 * Reductions are done in fixed blocks of DENSE_BLOCK values, each summed in a
 * fixed lane order, and the block results are combined in block order, so a
 * statistic (TernGrad's sigma, 1-bit SGD's means) is bit-identical whatever
 * the thread count. The inner loops keep DENSE_LANES independent accumulators
 * so gcc -O3 vectorizes them without -ffast-math.
 *
 * Shape letters: n values in a tensor.
 */
#ifndef GC_DENSE_H
#define GC_DENSE_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "compress/codec.h"

#ifdef HAVE_OPENMP
#include <omp.h>
#define DENSE_PRAGMA_(x) _Pragma(#x)
#define DENSE_OMP(x) DENSE_PRAGMA_(omp x)
#else
#define DENSE_OMP(x)
#endif

#define DENSE_BLOCK ((size_t)1 << 16)     /* values per reduction block */
#define DENSE_MIN_PER_THREAD ((size_t)1 << 16) /* no thread gets less than this */

/* Threads an encoder uses for n values: CodecSide.threads, or the OpenMP
 * default when 0; never more than one per DENSE_MIN_PER_THREAD values. */
static inline int dense_threads(const CodecSide *side, size_t n) {
#ifdef HAVE_OPENMP
    int t = side->threads > 0 ? side->threads : omp_get_max_threads();
#else
    int t = 1;
    (void)side;
#endif
    size_t most = (n + DENSE_MIN_PER_THREAD - 1) / DENSE_MIN_PER_THREAD;
    if ((size_t)t > most) t = (int)most;
    return t < 1 ? 1 : t;
}

/* [lo, hi) of part p of P equal parts of n, rounded to multiples of align */
static inline void dense_part(size_t *lo, size_t *hi, size_t n, int p, int P, size_t align) {
    size_t units = (n + align - 1) / align;
    size_t a = units * (size_t)p / (size_t)P, b = units * (size_t)(p + 1) / (size_t)P;
    *lo = a * align < n ? a * align : n;
    *hi = b * align < n ? b * align : n;
}

static inline uint32_t dense_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
static inline float dense_float(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* max over i of the bit pattern of |x[i]|. Non-negative floats order like
 * their bit patterns, so the result is max|x| as bits, and any value above
 * 0x7F800000 means a NaN was seen; 0x7F800000 means an infinity. An integer
 * max reduction vectorizes without -ffast-math.
 * x: [n] */
static inline uint32_t dense_absmax_bits_serial(const float *x, size_t n) {
    uint32_t m = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t u = dense_bits(x[i]) & 0x7FFFFFFFu;
        m = u > m ? u : m;
    }
    return m;
}

/* same, with T threads (the result does not depend on T)
 * x: [n] */
static inline uint32_t dense_absmax_bits(const float *x, size_t n, int T) {
    if (T <= 1) return dense_absmax_bits_serial(x, n);
    uint32_t m = 0;
    DENSE_OMP(parallel for num_threads(T) reduction(max : m) schedule(static))
    for (int p = 0; p < T; p++) {
        size_t lo, hi;
        dense_part(&lo, &hi, n, p, T, 64);
        uint32_t v = dense_absmax_bits_serial(x + lo, hi - lo);
        m = v > m ? v : m;
    }
    return m;
}

#define DENSE_FINITE_MAX 0x7F7FFFFFu /* bits of FLT_MAX */

/* ---- deterministic block sums ----
 * dense_moments: sum and sum of squares (TernGrad's sigma), and max|x| bits.
 * dense_signed_sums: sum and count of the non-negative values and sum of the
 * negative ones (1-bit SGD's two reconstruction values). Both in double. */
typedef struct {
    double a, b, c; /* moments: a = sum, b = sum of squares; signed: a = sum(x>=0), b = sum(x<0), c = count(x>=0) */
    uint32_t m;     /* moments: max over the bit patterns of |x| (as dense_absmax_bits), in the same pass */
} DenseSums;

/* The block loops use GCC/clang vector extensions with a FIXED width (two
 * 8-lane double accumulators per sum, 16 values per step), so the summation
 * order, and the result, is the same on every machine and vector ISA. */
typedef float dense_v8f __attribute__((vector_size(32)));
typedef double dense_v8d __attribute__((vector_size(64)));
typedef int32_t dense_v8i __attribute__((vector_size(32)));
typedef uint32_t dense_v8u __attribute__((vector_size(32)));

/* lanes of a then b, in order (pointers: passing 64-byte vectors by value
 * changes the ABI without AVX-512, which compilers warn about) */
static inline double dense_hsum(const dense_v8d *a, const dense_v8d *b) {
    double r = 0;
    for (int k = 0; k < 8; k++) r += (*a)[k];
    for (int k = 0; k < 8; k++) r += (*b)[k];
    return r;
}

/* x: [n], n <= DENSE_BLOCK */
static inline DenseSums dense_moments_block(const float *x, size_t n) {
    dense_v8d s0 = {0}, s1 = {0}, q0 = {0}, q1 = {0};
    dense_v8u m0 = {0}, m1 = {0};
    const dense_v8u absmask = {0x7FFFFFFFu, 0x7FFFFFFFu, 0x7FFFFFFFu, 0x7FFFFFFFu,
                               0x7FFFFFFFu, 0x7FFFFFFFu, 0x7FFFFFFFu, 0x7FFFFFFFu};
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        dense_v8f a, b;
        memcpy(&a, x + i, 32);
        memcpy(&b, x + i + 8, 32);
        dense_v8d da = __builtin_convertvector(a, dense_v8d), db = __builtin_convertvector(b, dense_v8d);
        s0 += da;
        s1 += db;
        q0 += da * da;
        q1 += db * db;
        dense_v8u ua = (dense_v8u)a & absmask, ub = (dense_v8u)b & absmask;
        dense_v8u ka = (dense_v8u)(ua > m0), kb = (dense_v8u)(ub > m1); /* all ones where larger */
        m0 = (m0 & ~ka) | (ua & ka);
        m1 = (m1 & ~kb) | (ub & kb);
    }
    DenseSums r = {dense_hsum(&s0, &s1), dense_hsum(&q0, &q1), 0, 0};
    for (int k = 0; k < 8; k++) {
        r.m = m0[k] > r.m ? m0[k] : r.m;
        r.m = m1[k] > r.m ? m1[k] : r.m;
    }
    for (; i < n; i++) {
        double v = (double)x[i];
        r.a += v;
        r.b += v * v;
        uint32_t u = dense_bits(x[i]) & 0x7FFFFFFFu;
        r.m = u > r.m ? u : r.m;
    }
    return r;
}

/* x: [n], n <= DENSE_BLOCK */
static inline DenseSums dense_signed_block(const float *x, size_t n) {
    dense_v8d p0 = {0}, p1 = {0}, m0 = {0}, m1 = {0};
    dense_v8i c0 = {0}, c1 = {0};
    const dense_v8f zero = {0};
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        dense_v8f a, b;
        memcpy(&a, x + i, 32);
        memcpy(&b, x + i + 8, 32);
        dense_v8i ka = a >= zero, kb = b >= zero; /* -1 where x >= 0 */
        dense_v8f pa = (dense_v8f)((dense_v8i)a & ka), pb = (dense_v8f)((dense_v8i)b & kb);
        dense_v8f na = (dense_v8f)((dense_v8i)a & ~ka), nb = (dense_v8f)((dense_v8i)b & ~kb);
        p0 += __builtin_convertvector(pa, dense_v8d);
        p1 += __builtin_convertvector(pb, dense_v8d);
        m0 += __builtin_convertvector(na, dense_v8d);
        m1 += __builtin_convertvector(nb, dense_v8d);
        c0 -= ka;
        c1 -= kb;
    }
    DenseSums r = {dense_hsum(&p0, &p1), dense_hsum(&m0, &m1), 0, 0};
    for (int k = 0; k < 8; k++) r.c += (double)c0[k] + (double)c1[k];
    for (; i < n; i++) {
        float v = x[i];
        if (v >= 0.0f) {
            r.a += (double)v;
            r.c += 1;
        } else {
            r.b += (double)v;
        }
    }
    return r;
}

/* Sum block results in block order; kind 0 = moments, 1 = signed.
 * Returns 0 or -GC_ERR_NOMEM. x: [n] */
static inline int dense_block_sums(DenseSums *out, const float *x, size_t n, int kind, int T) {
    size_t nb = (n + DENSE_BLOCK - 1) / DENSE_BLOCK;
    DenseSums r = {0, 0, 0, 0};
    if (T <= 1 || nb <= 1) {
        for (size_t b = 0; b < nb; b++) {
            size_t lo = b * DENSE_BLOCK, len = n - lo < DENSE_BLOCK ? n - lo : DENSE_BLOCK;
            DenseSums v = kind ? dense_signed_block(x + lo, len) : dense_moments_block(x + lo, len);
            r.a += v.a;
            r.b += v.b;
            r.c += v.c;
            r.m = v.m > r.m ? v.m : r.m;
        }
        *out = r;
        return 0;
    }
    DenseSums stackbuf[64];
    DenseSums *part = nb <= 64 ? stackbuf : (DenseSums *)malloc(nb * sizeof *part);
    if (!part) return -GC_ERR_NOMEM;
    DENSE_OMP(parallel for num_threads(T) schedule(static))
    for (size_t b = 0; b < nb; b++) {
        size_t lo = b * DENSE_BLOCK, len = n - lo < DENSE_BLOCK ? n - lo : DENSE_BLOCK;
        part[b] = kind ? dense_signed_block(x + lo, len) : dense_moments_block(x + lo, len);
    }
    for (size_t b = 0; b < nb; b++) {
        r.a += part[b].a;
        r.b += part[b].b;
        r.c += part[b].c;
        r.m = part[b].m > r.m ? part[b].m : r.m;
    }
    if (part != stackbuf) free(part);
    *out = r;
    return 0;
}

/* the effective random stream of a stochastic codec: the per-call seed
 * (CodecSide.seed) mixed with the spec's seed parameter; spec seed 0 leaves the
 * side seed unchanged, so value i uses rng_hash_uniform(side->seed, i) */
static inline uint64_t dense_seed(uint64_t side_seed, double spec_seed) {
    return side_seed ^ ((uint64_t)spec_seed * 0x9E3779B97F4A7C15ULL);
}

#endif
