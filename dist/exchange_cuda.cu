/* The kernels of the device-resident exchange (dist/exchange_cuda.h): the
 * elementwise sum and scaling of the average and the residual's difference,
 * each one IEEE rounding as the host's `a[i] += b[i]`, `a[i] *= s` and
 * `d[i] = a[i] - b[i]` (never contracted), the trainers' --ema average, and the
 * sums of squares of the clipping norms in the host's order. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "common/cuda_check.h"
#include "common/ranges_cuda.cuh"
#include "compress/codec_cuda.h" /* codec_cuda_probe_listed */
#include "optim/optim.h" /* GCOMP_MAX_LEVEL, GCOMP_BITS_PER_LEVEL */

/* declared in dist/exchange_cuda.h (a C header of the distributed layer, kept out of C++) */
extern "C" void exchange_cuda_add(float *a, const float *b, size_t n);
extern "C" void exchange_cuda_scale(float *a, float s, size_t n);
extern "C" void exchange_cuda_sub(float *d, const float *a, const float *b, size_t n);
extern "C" void exchange_cuda_ema(float *ema, const float *params, float a, size_t n);
extern "C" void exchange_cuda_ranges(int op, float *d, const float *a, const float *b, const unsigned char *mask,
                                     const size_t *off, const size_t *n, size_t k);
enum { EXCHANGE_RANGE_ADD, EXCHANGE_RANGE_SUB, EXCHANGE_RANGE_MASK_ZERO, EXCHANGE_RANGE_COPY }; /* as dist/exchange_cuda.h */
extern "C" void exchange_cuda_dgc_in(float *u, float *v, float *x, const float *p, float wd, float m, int nesterov,
                                     const size_t *off, const size_t *n, size_t k);
extern "C" void exchange_cuda_div(float *d, const float *a, float s, size_t n);
extern "C" void exchange_cuda_delta_levels(unsigned char *lv, const float *p, const float *x, float mul, float div,
                                           int guard, size_t n);
extern "C" double exchange_cuda_sumsq(const float *a, const size_t *lo, const size_t *hi, size_t m, double *part);
extern "C" void exchange_cuda_layer_sums(double *out, const float *v, const float *repr, const unsigned char *mask,
                                         size_t n, double *part);
extern "C" void exchange_cuda_bundle_heads(unsigned char *out, unsigned char *scratch, const unsigned char *bundle,
                                           size_t len, uint32_t max);
extern "C" void exchange_cuda_read_bundles(unsigned char *out, CodecProbe *probes, unsigned char *scratch,
                                           const unsigned char *const *bundles, const size_t *lens, size_t k,
                                           uint32_t max);
#define EXCHANGE_HEADS_TOP 24 /* as dist/exchange_cuda.h */
#define EXCHANGE_HEAD_BYTES 24
#define EXCHANGE_HEADS_BYTES(max) (EXCHANGE_HEADS_TOP + (size_t)(max) * EXCHANGE_HEAD_BYTES)
#define EXCHANGE_READ_BYTES(max) (EXCHANGE_HEADS_BYTES(max) + (size_t)(max) * sizeof(CodecFrameRef) + 8)
#define BUNDLE_HDR 16 /* dist/bundle.h */
#define ENTRY_HDR 12

#define TPB 256
#define EXCHANGE_LAYER_BLOCKS 64 /* exchange_cuda_layer_sums' blocks at most: as dist/exchange_cuda.h */
#define GRID_STRIDE(i, n) \
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (size_t)(n); i += (size_t)gridDim.x * blockDim.x)

static unsigned grid_for(size_t n) {
    size_t b = (n + TPB - 1) / TPB;
    if (b > 65536) b = 65536;
    return b ? (unsigned)b : 1u;
}

/* a: [n], b: [n] */
__global__ void k_ex_add(float *a, const float *b, size_t n) {
    GRID_STRIDE(i, n) a[i] = __fadd_rn(a[i], b[i]);
}

/* a: [n] */
__global__ void k_ex_scale(float *a, float s, size_t n) {
    GRID_STRIDE(i, n) a[i] = __fmul_rn(a[i], s);
}

/* d: [n], a: [n], b: [n] */
__global__ void k_ex_sub(float *d, const float *a, const float *b, size_t n) {
    GRID_STRIDE(i, n) d[i] = __fsub_rn(a[i], b[i]);
}

/* d: [n], a: [n]; d = a / s, one IEEE division (make_side's x[i] / (float)N) */
__global__ void k_ex_div(float *d, const float *a, float s, size_t n) {
    GRID_STRIDE(i, n) d[i] = __fdiv_rn(a[i], s);
}

/* lv: [n] out, p, x: [n]; dist/exchange.c's delta_levels of the delta d = (mul x) / div
 * (div != 0) or d = x mul (div == 0), with make_side's roundings: level L is the
 * largest L <= 3 with |p / d| > 2^(6 L + guard) (GCOMP section 5.1), 0 where d = 0 */
__global__ void k_ex_delta_levels(unsigned char *lv, const float *p, const float *x, float mul, float div, int guard,
                                  size_t n) {
    GRID_STRIDE(i, n) {
        float d = div != 0.0f ? __fdiv_rn(__fmul_rn(mul, x[i]), div) : __fmul_rn(x[i], mul);
        float q = d != 0.0f ? fabsf(__fdiv_rn(p[i], d)) : 0.0f;
        int L = 0;
        while (L < GCOMP_MAX_LEVEL && q > ldexpf(1.0f, GCOMP_BITS_PER_LEVEL * (L + 1) + guard)) L++;
        lv[i] = (unsigned char)L;
    }
}

/* part: [m], a: the arena, lo, hi: [m]; part[k] = a[lo[k]]^2 + ... + a[hi[k] - 1]^2 in
 * double, one value after the other from 0 (the host's `acc += (double)g[i] * g[i]`),
 * one thread per range */
__global__ void k_ex_sumsq_ranges(double *part, const float *a, const size_t *lo, const size_t *hi, size_t m) {
    GRID_STRIDE(k, m) {
        double acc = 0;
        for (size_t i = lo[k]; i < hi[k]; i++) acc = __dadd_rn(acc, __dmul_rn((double)a[i], (double)a[i]));
        part[k] = acc;
    }
}

/* part: [m + 1]; part[m] = part[0] + ... + part[m - 1], in order from 0 (one thread) */
__global__ void k_ex_sum_ordered(double *part, size_t m) {
    double acc = 0;
    for (size_t k = 0; k < m; k++) acc = __dadd_rn(acc, part[k]);
    part[m] = acc;
}

/* part: [3 * gridDim.x]: each block's sums of v[i]^2, of (v[i] - repr[i])^2 and of
 * mask[i] != 0 (mask may be NULL) over its grid-stride share, in double, tree-reduced
 * in shared memory (blockDim.x == TPB) */
__global__ void k_ex_layer_sums(double *part, const float *v, const float *repr, const unsigned char *mask, size_t n) {
    __shared__ double s[3][TPB];
    double in = 0, err = 0, k = 0;
    GRID_STRIDE(i, n) {
        double x = v[i], d = x - (double)repr[i];
        in += x * x;
        err += d * d;
        if (mask) k += mask[i] != 0;
    }
    s[0][threadIdx.x] = in;
    s[1][threadIdx.x] = err;
    s[2][threadIdx.x] = k;
    __syncthreads();
    for (unsigned h = TPB / 2; h > 0; h >>= 1) {
        if (threadIdx.x < h)
            for (int j = 0; j < 3; j++) s[j][threadIdx.x] += s[j][threadIdx.x + h];
        __syncthreads();
    }
    if (threadIdx.x == 0)
        for (int j = 0; j < 3; j++) part[3 * blockIdx.x + j] = s[j][0];
}

/* part: [3 * blocks]; the blocks' three sums added in block order into out[3] */
__global__ void k_ex_layer_total(double *out, const double *part, unsigned blocks) {
    for (int j = 0; j < 3; j++) {
        double acc = 0;
        for (unsigned k = 0; k < blocks; k++) acc += part[3 * k + j];
        out[j] = acc;
    }
}

/* ema: [n], p: [n]; ema - a * (ema - p), as examples/trainer.c's ema_update */
__global__ void k_ex_ema(float *ema, const float *p, float a, size_t n) {
    GRID_STRIDE(i, n) ema[i] = __fsub_rn(ema[i], __fmul_rn(a, __fsub_rn(ema[i], p[i])));
}

extern "C" void exchange_cuda_add(float *a, const float *b, size_t n) {
    if (n == 0) return;
    k_ex_add<<<grid_for(n), TPB>>>(a, b, n);
    cudaCheckLast();
}

extern "C" void exchange_cuda_scale(float *a, float s, size_t n) {
    if (n == 0) return;
    k_ex_scale<<<grid_for(n), TPB>>>(a, s, n);
    cudaCheckLast();
}

extern "C" void exchange_cuda_sub(float *d, const float *a, const float *b, size_t n) {
    if (n == 0) return;
    k_ex_sub<<<grid_for(n), TPB>>>(d, a, b, n);
    cudaCheckLast();
}

extern "C" void exchange_cuda_ema(float *ema, const float *params, float a, size_t n) {
    if (n == 0) return;
    k_ex_ema<<<grid_for(n), TPB>>>(ema, params, a, n);
    cudaCheckLast();
}

extern "C" void exchange_cuda_div(float *d, const float *a, float s, size_t n) {
    if (n == 0) return;
    k_ex_div<<<grid_for(n), TPB>>>(d, a, s, n);
    cudaCheckLast();
}

extern "C" void exchange_cuda_delta_levels(unsigned char *lv, const float *p, const float *x, float mul, float div,
                                           int guard, size_t n) {
    if (n == 0) return;
    k_ex_delta_levels<<<grid_for(n), TPB>>>(lv, p, x, mul, div, guard, n);
    cudaCheckLast();
}

/* each block on one range of the table (common/ranges_cuda.cuh); the roundings of
 * exchange_cuda_add and exchange_cuda_sub, a zero where mask is set, or a copy */
__global__ void k_ex_ranges(RangeTab r, int op, float *d, const float *a, const float *b, const unsigned char *mask) {
    RANGE_STRIDE(j, r) {
        if (op == EXCHANGE_RANGE_ADD) d[j] = __fadd_rn(d[j], a[j]);
        else if (op == EXCHANGE_RANGE_SUB) d[j] = __fsub_rn(a[j], b[j]);
        else if (op == EXCHANGE_RANGE_COPY) d[j] = a[j];
        else if (mask[j]) d[j] = 0.0f;
    }
}

extern "C" void exchange_cuda_ranges(int op, float *d, const float *a, const float *b, const unsigned char *mask,
                                     const size_t *off, const size_t *n, size_t k) {
    ranges_launch(off, n, k, [&](const RangeTab &r, unsigned blocks) {
        k_ex_ranges<<<blocks, RANGES_TPB>>>(r, op, d, a, b, mask);
        cudaCheckLast();
    });
}

/* DGC's memory_in over the table's ranges: g = x (+ wd p, optim.c's weight decay, where
 * p is given: the weight decay is not 0 as a double), then DGC eq. 7 (u = m u + g,
 * v = v + u) or appendix B (Nesterov: u = m (u + g), v = v + (u + g)), x = v: the
 * roundings of optim_add_weight_decay and dist/exchange.c's memory_in */
__global__ void k_ex_dgc_in(RangeTab r, float *u, float *v, float *x, const float *p, float wd, float m,
                            int nesterov) {
    RANGE_STRIDE(j, r) {
        float g = p ? __fmaf_rn(p[j], wd, x[j]) : x[j];
        if (nesterov) {
            u[j] = __fmul_rn(m, __fadd_rn(u[j], g));
            v[j] = __fadd_rn(v[j], __fadd_rn(u[j], g));
        } else {
            u[j] = __fadd_rn(__fmul_rn(m, u[j]), g);
            v[j] = __fadd_rn(v[j], u[j]);
        }
        x[j] = v[j];
    }
}

extern "C" void exchange_cuda_dgc_in(float *u, float *v, float *x, const float *p, float wd, float m, int nesterov,
                                     const size_t *off, const size_t *n, size_t k) {
    ranges_launch(off, n, k, [&](const RangeTab &r, unsigned blocks) {
        k_ex_dgc_in<<<blocks, RANGES_TPB>>>(r, u, v, x, p, wd, m, nesterov);
        cudaCheckLast();
    });
}

extern "C" double exchange_cuda_sumsq(const float *a, const size_t *lo, const size_t *hi, size_t m, double *part) {
    if (m) k_ex_sumsq_ranges<<<grid_for(m), TPB>>>(part, a, lo, hi, m);
    k_ex_sum_ordered<<<1, 1>>>(part, m);
    cudaCheckLast();
    double sum = 0;
    cudaCheck(cudaMemcpy(&sum, part + m, sizeof sum, cudaMemcpyDeviceToHost));
    return sum;
}

extern "C" void exchange_cuda_layer_sums(double *out, const float *v, const float *repr, const unsigned char *mask,
                                         size_t n, double *part) {
    size_t b = (n + TPB - 1) / TPB;
    unsigned blocks = b < EXCHANGE_LAYER_BLOCKS ? (b ? (unsigned)b : 1u) : EXCHANGE_LAYER_BLOCKS;
    k_ex_layer_sums<<<blocks, TPB>>>(part, v, repr, mask, n);
    k_ex_layer_total<<<1, 1>>>(out, part, blocks);
    cudaCheckLast();
}

/* bundles a launch of k_bundle_heads, their pointers and lengths going as its argument */
#define HEADS_BATCH 32
typedef struct {
    const unsigned char *b[HEADS_BATCH];
    uint64_t len[HEADS_BATCH];
} HeadsTab;

/* block i, one thread: exchange_cuda_bundle_heads' walk along the entries' chain of the
 * table's bundle i, into o + i hb (the walks of a launch's bundles side by side, each a
 * chain of dependent reads); with refs, the frames of the entries that lie inside the
 * bundle listed at refs + i max, count[i] of them, for codec_cuda_probe_listed */
__global__ void k_bundle_heads(unsigned char *o, HeadsTab a, size_t hb, uint32_t max, CodecFrameRef *refs,
                               uint32_t *count) {
    const unsigned char *b = a.b[blockIdx.x];
    size_t len = (size_t)a.len[blockIdx.x];
    o += blockIdx.x * hb;
    uint32_t inside = 0;
    for (int i = 0; i < BUNDLE_HDR; i++) o[i] = (size_t)i < len ? b[i] : 0;
    uint32_t n = 0;
    size_t at = BUNDLE_HDR;
    while (n < max && at <= len && len - at >= ENTRY_HDR) {
        unsigned char *h = o + EXCHANGE_HEADS_TOP + (size_t)n * EXCHANGE_HEAD_BYTES;
        for (int i = 0; i < 8; i++) h[i] = (unsigned char)((uint64_t)at >> (8 * i));
        for (int i = 0; i < ENTRY_HDR; i++) h[8 + i] = b[at + i];
        size_t flen = (size_t)b[at + 8] | (size_t)b[at + 9] << 8 | (size_t)b[at + 10] << 16 | (size_t)b[at + 11] << 24;
        n++;
        if (flen > len - at - ENTRY_HDR) break;
        if (refs) {
            CodecFrameRef *r = refs + (size_t)blockIdx.x * max + inside;
            r->at = at + ENTRY_HDR;
            r->len = flen;
        }
        inside++;
        at += ENTRY_HDR + flen;
    }
    for (int i = 0; i < 4; i++) o[BUNDLE_HDR + i] = (unsigned char)(n >> (8 * i));
    if (count) count[blockIdx.x] = inside;
}

/* the walks of k bundles, HEADS_BATCH a launch, into scratch (and refs, count) */
static void heads_launch(unsigned char *scratch, const unsigned char *const *bundles, const size_t *lens, size_t k,
                         uint32_t max, CodecFrameRef *refs, uint32_t *count) {
    size_t hb = EXCHANGE_HEADS_BYTES(max);
    for (size_t at = 0; at < k; at += HEADS_BATCH) {
        size_t m = k - at < HEADS_BATCH ? k - at : HEADS_BATCH;
        HeadsTab a;
        memset(&a, 0, sizeof a);
        for (size_t i = 0; i < m; i++) {
            a.b[i] = bundles[at + i];
            a.len[i] = lens[at + i];
        }
        k_bundle_heads<<<(unsigned)m, 1>>>(scratch + at * hb, a, hb, max, refs ? refs + at * max : NULL,
                                           count ? count + at : NULL);
        cudaCheckLast();
    }
}

void exchange_cuda_read_bundles(unsigned char *out, CodecProbe *probes, unsigned char *scratch,
                                const unsigned char *const *bundles, const size_t *lens, size_t k, uint32_t max) {
    CodecFrameRef *refs = (CodecFrameRef *)(scratch + k * EXCHANGE_HEADS_BYTES(max)); /* EXCHANGE_READ_BYTES' */
    uint32_t *count = (uint32_t *)(refs + k * max);
    heads_launch(scratch, bundles, lens, k, max, refs, count);
    codec_cuda_probe_listed(probes, refs, count, k, max, bundles, lens, out, scratch, k * EXCHANGE_HEADS_BYTES(max));
}

void exchange_cuda_bundle_heads(unsigned char *out, unsigned char *scratch, const unsigned char *bundle, size_t len,
                                uint32_t max) {
    heads_launch(scratch, &bundle, &len, 1, max, NULL, NULL);
    cudaCheck(cudaMemcpy(out, scratch, EXCHANGE_HEADS_BYTES(max), cudaMemcpyDeviceToHost));
}
