/* Direct 3x3 stride-1 pad-1 convolution with AVX-512 kernels (see conv3x3.h).
 * Shape letters: N batch, C input channels, OC output channels, H,W size,
 * HW = H*W, P = N*HW (one channel row of the batch), t = 3*kh + kw a tap,
 * sh_t = (kh-1)*W + (kw-1) its shift along the row.
 * dw and db ACCUMULATE (+=); dinp is OVERWRITTEN. */
#include "nn/conv3x3.h"

#include <stdint.h>
#include <string.h>

#include "nn/parallel.h"

#if defined(__AVX512F__)
#include <immintrin.h>

/* the tiles below only stay in registers when their fixed-count loops unroll */
#if defined(__clang__)
#define UNROLL _Pragma("unroll")
#else
#define UNROLL _Pragma("GCC unroll 16")
#endif

int conv3x3_ok(const Conv2dShape *s) {
    return s->KH == 3 && s->KW == 3 && s->stride == 1 && s->pad == 1 && (s->H * s->W) % 16 == 0;
}

/* mask tables: 9 tap masks, an "interior" flag and 2 column masks per vector position */
static size_t mask_floats(const Conv2dShape *s) { return ((size_t)12 * (s->H * s->W / 16) + 1) / 2 + 16; }

/* The weight gradient is summed over WG_ITEMS or fewer work items of at least
 * 256 vectors; each item has its own partial sums, added up in item order at
 * the end, so the result does not depend on which thread took which item
 * (nor on the number of threads). */
#define WG_ITEMS 32
static size_t wg_items(const Conv2dShape *s) {
    size_t V = (size_t)s->N * s->H * s->W / 16;
    size_t n = (V + 255) / 256;
    return n < WG_ITEMS ? n : WG_ITEMS;
}

#define WG_SUB 128 /* vectors per packed sub-chunk of the weight gradient */
size_t conv3x3_work_floats(const Conv2dShape *s) {
    size_t nw = (size_t)9 * s->C * s->OC;
    size_t part = wg_items(s) * (nw + (size_t)s->OC + 16);
    return mask_floats(s) + nw + 16 + part + (size_t)s->threads * (9 * WG_SUB * 16 + 16);
}

/* mk[t * NV + v]: lane i of vector v (positions 16v..16v+15 of an image) is
 * valid for tap t when the tap reads inside the image. After the 9 tables:
 * inter[v] = 1 when no lane of v reads above or below the image (then tap t's
 * mask is the column mask of its kw), and cm[2v], cm[2v+1] the column masks
 * for kw = 0 and kw = 2 (kw = 1 needs none). */
static void build_masks(uint16_t *mk /*12, HW/16*/, int H, int W) {
    int NV = H * W / 16;
    uint16_t *inter = mk + 9 * NV, *cm = inter + NV;
    for (int t = 0; t < 9; t++) {
        int kh = t / 3, kw = t % 3;
        for (int v = 0; v < NV; v++) {
            unsigned m = 0;
            for (int i = 0; i < 16; i++) {
                int p = 16 * v + i, ih = p / W + kh - 1, iw = p % W + kw - 1;
                if (ih >= 0 && ih < H && iw >= 0 && iw < W) m |= 1u << i;
            }
            mk[t * NV + v] = (uint16_t)m;
        }
    }
    for (int v = 0; v < NV; v++) {
        int in = 1;
        for (int t = 0; t < 9; t++) in &= mk[t * NV + v] == mk[(3 + t % 3) * NV + v];
        inter[v] = (uint16_t)in;
        cm[2 * v] = mk[3 * NV + v];
        cm[2 * v + 1] = mk[5 * NV + v];
    }
}

/* address of row + off (off may point before the row: only masked-off lanes
 * ever read there, and masked AVX-512 loads do not touch masked lanes) */
static inline const float *at(const float *row, ptrdiff_t off) {
    return (const float *)((uintptr_t)row + (uintptr_t)(off * (ptrdiff_t)sizeof(float)));
}

/* out[oc0+r, J + 16q] = bias + sum_{t,c} wp[t][c][oc0+r] * in[c, J + 16q + sh_t] (masked),
 * r < MR, q < NV. in has CI rows (stride ldi), out CO rows (stride ldo); wp is [9][CI][CO]. */
static inline __attribute__((always_inline)) void fwd_tile(float *out, const float *in, const float *wp,
                                                           const float *bias, const uint16_t *mk, const int *sh,
                                                           const int *vi, int NVI, int CI, int CO, size_t ldi,
                                                           size_t ldo, size_t J, int oc0, const int MR,
                                                           const int NV) {
    __m512 acc[8][3];
    UNROLL
    for (int r = 0; r < MR; r++)
        UNROLL
        for (int q = 0; q < NV; q++) acc[r][q] = bias ? _mm512_set1_ps(bias[oc0 + r]) : _mm512_setzero_ps();
    for (int t = 0; t < 9; t++) {
        __mmask16 m[3];
        UNROLL
        for (int q = 0; q < NV; q++) m[q] = mk[t * NVI + vi[q]];
        const float *src = at(in, (ptrdiff_t)J + sh[t]);
        const float *wt = wp + (size_t)t * CI * CO + oc0;
        for (int c = 0; c < CI; c++) {
            __m512 x[3];
            UNROLL
            for (int q = 0; q < NV; q++) x[q] = _mm512_maskz_loadu_ps(m[q], src + (size_t)c * ldi + 16 * q);
            const float *wc = wt + (size_t)c * CO;
            UNROLL
            for (int r = 0; r < MR; r++) {
                __m512 wv = _mm512_set1_ps(wc[r]);
                UNROLL
                for (int q = 0; q < NV; q++) acc[r][q] = _mm512_fmadd_ps(wv, x[q], acc[r][q]);
            }
        }
    }
    UNROLL
    for (int r = 0; r < MR; r++)
        UNROLL
        for (int q = 0; q < NV; q++) _mm512_storeu_ps(out + (size_t)(oc0 + r) * ldo + J + 16 * q, acc[r][q]);
}

#define FWD_ROWS(NVc)                                                                                   \
    do {                                                                                                \
        int oc0 = 0;                                                                                    \
        for (; oc0 + 8 <= CO; oc0 += 8) fwd_tile(out, in, wp, bias, mk, sh, vi, NVI, CI, CO, ldi, ldo, J, oc0, 8, NVc); \
        if (CO - oc0 >= 4) fwd_tile(out, in, wp, bias, mk, sh, vi, NVI, CI, CO, ldi, ldo, J, oc0, 4, NVc), oc0 += 4; \
        if (CO - oc0 >= 2) fwd_tile(out, in, wp, bias, mk, sh, vi, NVI, CI, CO, ldi, ldo, J, oc0, 2, NVc), oc0 += 2; \
        if (CO - oc0 >= 1) fwd_tile(out, in, wp, bias, mk, sh, vi, NVI, CI, CO, ldi, ldo, J, oc0, 1, NVc);     \
    } while (0)

/* the shared "same" 3x3 kernel over vectors [v0, v1) of the rows */
static void fwd_range(float *out /*CO,ldo*/, const float *in /*CI,ldi*/, const float *wp /*9,CI,CO*/,
                      const float *bias /*CO or NULL*/, const uint16_t *mk, const int *sh, int HW, int CI, int CO,
                      size_t ldi, size_t ldo, size_t v0, size_t v1) {
    const int NVI = HW / 16;
    for (size_t v = v0; v < v1; v += 3) {
        size_t J = 16 * v;
        int nv = v1 - v < 3 ? (int)(v1 - v) : 3;
        int vi[3];
        for (int q = 0; q < 3; q++) vi[q] = (int)((v + q) % (size_t)NVI);
        if (nv == 3) FWD_ROWS(3);
        else if (nv == 2) FWD_ROWS(2);
        else FWD_ROWS(1);
    }
}

/* vectors per work item handed to a thread (a multiple of the 3-vector tile) */
#define FWD_BLOCK ((size_t)96)

static void make_shifts(int *sh, int W) {
    for (int t = 0; t < 9; t++) sh[t] = (t / 3 - 1) * W + (t % 3 - 1);
}

void conv3x3_forward(float *out /*OC,ldo*/, float *work /*conv3x3_work_floats*/, const float *inp /*C,ldi*/,
                     const float *w /*OC,C,3,3*/, const float *b /*OC or NULL*/, const Conv2dShape *s) {
    const int C = s->C, OC = s->OC, HW = s->H * s->W;
    const size_t P = (size_t)s->N * HW, V = P / 16;
    uint16_t *mk = (uint16_t *)work;
    float *wp = work + mask_floats(s);
    int sh[9];
    make_shifts(sh, s->W);
    build_masks(mk, s->H, s->W);
    /* wp[t][c][oc] = w[oc][c][t] */
    for (int oc = 0; oc < OC; oc++)
        for (int c = 0; c < C; c++)
            for (int t = 0; t < 9; t++) wp[((size_t)t * C + c) * OC + oc] = w[((size_t)oc * C + c) * 9 + t];
    int team = s->threads;
    const size_t nb = (V + FWD_BLOCK - 1) / FWD_BLOCK;
    OMP_PARALLEL(team) {
        OMP_FOR_DYN_IN
        for (size_t k = 0; k < nb; k++)
            fwd_range(out, inp, wp, b, mk, sh, HW, C, OC, s->ldi, s->ldo, k * FWD_BLOCK,
                      (k + 1) * FWD_BLOCK < V ? (k + 1) * FWD_BLOCK : V);
    }
}

/* dw partial: acc over vectors [v0, v1) of sum dout[oc0+r, .] * in[c, . + sh_t] (masked),
 * added into dwp[(oc0+r)][c][t] */
static inline __attribute__((always_inline)) void wgrad_tile(float *dwp /*OC,C,9*/, const float *dout,
                                                             const float *in, const uint16_t *mk, const int *sh,
                                                             int NVI, int C, size_t ldi, size_t ldo, size_t v0,
                                                             size_t v1, int oc0, int c, const int MR) {
    __m512 acc[3][9];
    UNROLL
    for (int r = 0; r < MR; r++)
        UNROLL
        for (int t = 0; t < 9; t++) acc[r][t] = _mm512_setzero_ps();
    const float *xin = in + (size_t)c * ldi;
    const uint16_t *inter = mk + 9 * NVI, *cm = inter + NVI;
    int vi = (int)(v0 % (size_t)NVI);
    for (size_t v = v0; v < v1; v++) {
        size_t J = 16 * v;
        __m512 d[3];
        UNROLL
        for (int r = 0; r < MR; r++) d[r] = _mm512_loadu_ps(dout + (size_t)(oc0 + r) * ldo + J);
        if (inter[vi]) {
            /* no row border: two column masks serve all nine taps */
            __mmask16 m0 = _load_mask16((__mmask16 *)&cm[2 * vi]), m2 = _load_mask16((__mmask16 *)&cm[2 * vi + 1]);
            UNROLL
            for (int t = 0; t < 9; t++) {
                const float *src = at(xin, (ptrdiff_t)J + sh[t]);
                __m512 x = t % 3 == 0 ? _mm512_maskz_loadu_ps(m0, src)
                                      : (t % 3 == 2 ? _mm512_maskz_loadu_ps(m2, src) : _mm512_loadu_ps(src));
                UNROLL
                for (int r = 0; r < MR; r++) acc[r][t] = _mm512_fmadd_ps(d[r], x, acc[r][t]);
            }
        } else {
            UNROLL
            for (int t = 0; t < 9; t++) {
                /* kmovw straight from memory: a load, not a port-5 move from a GPR */
                __m512 x = _mm512_maskz_loadu_ps(_load_mask16((__mmask16 *)&mk[t * NVI + vi]),
                                                 at(xin, (ptrdiff_t)J + sh[t]));
                UNROLL
                for (int r = 0; r < MR; r++) acc[r][t] = _mm512_fmadd_ps(d[r], x, acc[r][t]);
            }
        }
        if (++vi == NVI) vi = 0;
    }
    UNROLL
    for (int r = 0; r < MR; r++)
        UNROLL
        for (int t = 0; t < 9; t++) dwp[((size_t)(oc0 + r) * C + c) * 9 + t] += _mm512_reduce_add_ps(acc[r][t]);
}

/* col[t][i] (16 lanes) = tap t of channel row xin at vector v0 + i, masked */
static void pack_taps(float *col /*9, nv*16*/, const float *xin, const uint16_t *mk, const int *sh, int NVI,
                      size_t v0, size_t v1) {
    const size_t nv = v1 - v0;
    for (int t = 0; t < 9; t++) {
        float *dst = col + (size_t)t * nv * 16;
        const uint16_t *m = mk + t * NVI;
        int vi = (int)(v0 % (size_t)NVI);
        for (size_t v = v0; v < v1; v++) {
            _mm512_store_ps(dst + (v - v0) * 16,
                            _mm512_maskz_loadu_ps(_load_mask16((__mmask16 *)&m[vi]), at(xin, (ptrdiff_t)(16 * v) + sh[t])));
            if (++vi == NVI) vi = 0;
        }
    }
}

/* dwp[(oc0+r)][c][t] += sum_i dout[oc0+r, v0+i] . col[t][i] */
static inline __attribute__((always_inline)) void wgrad_tile_packed(float *dwp /*OC,C,9*/, const float *dout,
                                                                    const float *col, size_t nv, size_t ldo,
                                                                    size_t v0, int oc0, int c, int C, const int MR) {
    __m512 acc[3][9];
    UNROLL
    for (int r = 0; r < MR; r++)
        UNROLL
        for (int t = 0; t < 9; t++) acc[r][t] = _mm512_setzero_ps();
    for (size_t i = 0; i < nv; i++) {
        __m512 d[3];
        UNROLL
        for (int r = 0; r < MR; r++) d[r] = _mm512_loadu_ps(dout + (size_t)(oc0 + r) * ldo + 16 * (v0 + i));
        UNROLL
        for (int t = 0; t < 9; t++) {
            __m512 x = _mm512_load_ps(col + ((size_t)t * nv + i) * 16);
            UNROLL
            for (int r = 0; r < MR; r++) acc[r][t] = _mm512_fmadd_ps(d[r], x, acc[r][t]);
        }
    }
    UNROLL
    for (int r = 0; r < MR; r++)
        UNROLL
        for (int t = 0; t < 9; t++) dwp[((size_t)(oc0 + r) * C + c) * 9 + t] += _mm512_reduce_add_ps(acc[r][t]);
}

/* the weight gradient of vectors [c0, c1) into dwp, tiles reading the input in place:
 * forward out[oc, p] = sum_{c,t} w[oc,c,t] * in[c, p + sh_t] * valid_t(p)
 *   =>  dw[oc,c,t] += sum_p dout[oc, p] * in[c, p + sh_t] * valid_t(p) */
static __attribute__((noinline)) void wgrad_item(float *dwp, const float *dout, const float *inp, const uint16_t *mk,
                                                 const int *sh, int NVI, int C, int OC, size_t ldi, size_t ldo,
                                                 size_t c0, size_t c1) {
    for (int c = 0; c < C; c++) {
        int oc0 = 0;
        for (; oc0 + 3 <= OC; oc0 += 3) wgrad_tile(dwp, dout, inp, mk, sh, NVI, C, ldi, ldo, c0, c1, oc0, c, 3);
        if (OC - oc0 == 2) wgrad_tile(dwp, dout, inp, mk, sh, NVI, C, ldi, ldo, c0, c1, oc0, c, 2);
        else if (OC - oc0 == 1) wgrad_tile(dwp, dout, inp, mk, sh, NVI, C, ldi, ldo, c0, c1, oc0, c, 1);
    }
}

/* the same with the taps packed per channel and sub-chunk first */
static __attribute__((noinline)) void wgrad_item_packed(float *dwp, float *col /*9*WG_SUB*16, aligned*/,
                                                        const float *dout, const float *inp, const uint16_t *mk,
                                                        const int *sh, int NVI, int C, int OC, size_t ldi,
                                                        size_t ldo, size_t c0, size_t c1) {
    for (size_t s0 = c0; s0 < c1; s0 += WG_SUB) {
        size_t s1 = c1 - s0 < WG_SUB ? c1 : s0 + WG_SUB, nv = s1 - s0;
        for (int c = 0; c < C; c++) {
            pack_taps(col, inp + (size_t)c * ldi, mk, sh, NVI, s0, s1);
            int oc0 = 0;
            for (; oc0 + 3 <= OC; oc0 += 3) wgrad_tile_packed(dwp, dout, col, nv, ldo, s0, oc0, c, C, 3);
            if (OC - oc0 == 2) wgrad_tile_packed(dwp, dout, col, nv, ldo, s0, oc0, c, C, 2);
            else if (OC - oc0 == 1) wgrad_tile_packed(dwp, dout, col, nv, ldo, s0, oc0, c, C, 1);
        }
    }
}

void conv3x3_backward(float *dinp /*C,ldi, overwritten; NULL = skip*/, float *dw /*OC,C,3,3, +=*/,
                      float *db /*OC, +=, NULL = skip*/, float *work /*conv3x3_work_floats*/,
                      const float *dout /*OC,ldo*/,
                      const float *inp /*C,ldi*/, const float *w /*OC,C,3,3*/, const Conv2dShape *s) {
    const int C = s->C, OC = s->OC, HW = s->H * s->W, NVI = HW / 16;
    const size_t P = (size_t)s->N * HW, V = P / 16, nw = (size_t)9 * C * OC;
    uint16_t *mk = (uint16_t *)work;
    float *wp = work + mask_floats(s);
    float *part = wp + nw + 16;
    const size_t pstride = nw + (size_t)OC + 16;
    float *colbase = part + wg_items(s) * pstride;
    int sh[9];
    make_shifts(sh, s->W);
    build_masks(mk, s->H, s->W);
    /* Small images are mostly border vectors (nine masks each): there the taps
     * are first packed, masked, per channel and sub-chunk, and the tile reads
     * them with plain aligned loads. Larger images keep the in-place tile. */
    int ninter = 0;
    for (int v = 0; v < NVI; v++) ninter += mk[9 * NVI + v];
    const int packed = 4 * ninter < 3 * NVI;
    /* data gradient weights: wp[t][oc][c] = w[oc][c][8 - t] */
    for (int oc = 0; oc < OC; oc++)
        for (int c = 0; c < C; c++)
            for (int t = 0; t < 9; t++) wp[((size_t)t * OC + oc) * C + c] = w[((size_t)oc * C + c) * 9 + (8 - t)];
    /* weight-gradient work items: nc items of chunk vectors, partial sums each */
    const size_t nc = wg_items(s), chunk = (V + nc - 1) / nc;
    int team = s->threads;
    const size_t nb = (V + FWD_BLOCK - 1) / FWD_BLOCK;
    OMP_PARALLEL(team) {
        /* forward: out = conv(in)  =>  din = conv(dout) with flipped, transposed weights */
        if (dinp) {
            OMP_FOR_DYN_NOWAIT
            for (size_t k = 0; k < nb; k++)
                fwd_range(dinp, dout, wp, NULL, mk, sh, HW, OC, C, s->ldo, s->ldi, k * FWD_BLOCK,
                          (k + 1) * FWD_BLOCK < V ? (k + 1) * FWD_BLOCK : V);
        }
        /* weight (and bias) gradient: item k sums into its own partial buffer */
        OMP_FOR_DYN_NOWAIT
        for (size_t k = 0; k < nc; k++) {
            size_t c0 = k * chunk, c1 = c0 + chunk < V ? c0 + chunk : V;
            float *dwp = part + k * pstride, *dbp = dwp + nw;
            memset(dwp, 0, sizeof(float) * (nw + OC));
            if (packed) {
                float *col = colbase + (size_t)gc_thread_id() * (9 * WG_SUB * 16 + 16);
                col = (float *)(((uintptr_t)col + 63) & ~(uintptr_t)63);
                wgrad_item_packed(dwp, col, dout, inp, mk, sh, NVI, C, OC, s->ldi, s->ldo, c0, c1);
            } else {
                wgrad_item(dwp, dout, inp, mk, sh, NVI, C, OC, s->ldi, s->ldo, c0, c1);
            }
            if (db) /* forward: out[oc, p] += b[oc]  =>  db[oc] += sum_p dout[oc, p] */
                for (int oc = 0; oc < OC; oc++) {
                    __m512 a = _mm512_setzero_ps();
                    for (size_t v = c0; v < c1; v++)
                        a = _mm512_add_ps(a, _mm512_loadu_ps(dout + (size_t)oc * s->ldo + 16 * v));
                    dbp[oc] += _mm512_reduce_add_ps(a);
                }
        }
        OMP_BARRIER
        OMP_FOR_IN
        for (size_t i = 0; i < nw; i++) {
            float a = 0.0f;
            for (size_t k = 0; k < nc; k++) a += part[k * pstride + i];
            dw[i] += a;
        }
        if (db) {
            OMP_FOR_IN
            for (int oc = 0; oc < OC; oc++) {
                float a = 0.0f;
                for (size_t k = 0; k < nc; k++) a += part[k * pstride + nw + oc];
                db[oc] += a;
            }
        }
    }
}

#else /* no AVX-512: conv2d's im2col path handles every shape */

int conv3x3_ok(const Conv2dShape *s) {
    (void)s;
    return 0;
}
size_t conv3x3_work_floats(const Conv2dShape *s) {
    (void)s;
    return 0;
}
void conv3x3_forward(float *out, float *work, const float *inp, const float *w, const float *b,
                     const Conv2dShape *s) {
    (void)out, (void)work, (void)inp, (void)w, (void)b, (void)s;
}
void conv3x3_backward(float *dinp, float *dw, float *db, float *work, const float *dout, const float *inp,
                      const float *w, const Conv2dShape *s) {
    (void)dinp, (void)dw, (void)db, (void)work, (void)dout, (void)inp, (void)w, (void)s;
}

#endif
