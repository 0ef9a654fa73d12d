/* 2-D convolution over CNHW activations (see conv2d.h).
 * Shape letters: N batch, C input channels, H,W input, OC output channels, KH,KW
 * kernel, OH,OW output; CKK = C*KH*KW (rows of the column matrix), a "unit" is
 * one output row (n, oh) of OW columns; units are numbered u = n*OH + oh, so the
 * columns of the batch matrix [*, N*OH*OW] are u*OW + ow; ldi, ldo are the
 * channel strides of the input and output activations (>= N*H*W, N*OH*OW).
 * dw and db ACCUMULATE (+=); dinp is OVERWRITTEN. */
#include "nn/conv2d.h"

#include <cblas.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "common/errors.h"
#include "nn/conv3x3.h"
#include "nn/parallel.h"

/* row + off, computed without forming an out-of-range pointer in C terms
 * (off may reach before the row; only in-range elements are dereferenced) */
static inline const float *at(const float *row, ptrdiff_t off) {
    return (const float *)((uintptr_t)row + (uintptr_t)(off * (ptrdiff_t)sizeof(float)));
}

static size_t g_chunk_floats = 48 * 1024;
static int g_direct = 1;

void conv2d_set_chunk_floats(size_t floats) { g_chunk_floats = floats ? floats : 1; }
void conv2d_set_direct(int enable) { g_direct = enable; }

/* output rows per chunk so that the column chunk holds about g_chunk_floats */
static int chunk_units(const Conv2dShape *s) {
    size_t ckk = (size_t)s->C * s->KH * s->KW;
    size_t per_unit = ckk * (size_t)s->OW;
    size_t cu = g_chunk_floats / (per_unit ? per_unit : 1);
    if (cu < 1) cu = 1;
    size_t units = (size_t)s->N * s->OH;
    if (cu > units) cu = units;
    return (int)cu;
}

int conv2d_shape(Conv2dShape *s, int N, int C, int H, int W, int OC, int KH, int KW, int stride, int pad) {
    memset(s, 0, sizeof *s);
    if (N <= 0 || C <= 0 || H <= 0 || W <= 0 || OC <= 0 || KH <= 0 || KW <= 0 || stride <= 0 || pad < 0) {
        fprintf(stderr, "error: conv2d: bad shape N=%d C=%d H=%d W=%d OC=%d K=%dx%d stride=%d pad=%d\n", N, C, H, W,
                OC, KH, KW, stride, pad);
        return -GC_ERR_PARAM;
    }
    if (H + 2 * pad < KH || W + 2 * pad < KW) {
        fprintf(stderr, "error: conv2d: kernel %dx%d larger than the padded input %dx%d\n", KH, KW, H + 2 * pad,
                W + 2 * pad);
        return -GC_ERR_PARAM;
    }
    s->N = N, s->C = C, s->H = H, s->W = W, s->OC = OC, s->KH = KH, s->KW = KW, s->stride = stride, s->pad = pad;
    s->OH = (H + 2 * pad - KH) / stride + 1;
    s->OW = (W + 2 * pad - KW) / stride + 1;
    s->threads = gc_num_threads();
    s->chunk = chunk_units(s);
    s->ldi = (size_t)N * H * W;
    s->ldo = (size_t)N * s->OH * s->OW;
    return 0;
}

static int is_direct(const Conv2dShape *s) { return s->KH == 1 && s->KW == 1 && s->stride == 1 && s->pad == 0; }

/* Work items: the batch in at most MAX_ITEMS groups of whole images, handed
 * to threads on demand. Each item keeps its own weight-gradient partial sums,
 * added up in item order, so results do not depend on the thread count. */
#define MAX_ITEMS 32
static int n_items(const Conv2dShape *s) { return s->N < MAX_ITEMS ? s->N : MAX_ITEMS; }

/* per-thread column buffer */
static size_t col_floats(const Conv2dShape *s, int cu) {
    size_t ckk = (size_t)s->C * s->KH * s->KW;
    size_t col = is_direct(s) ? 0 : ckk * (size_t)cu * s->OW;
    return (col + 15) & ~(size_t)15;
}
/* per-item partial sums of dw and db */
static size_t part_floats(const Conv2dShape *s) {
    size_t n = (size_t)s->OC * s->C * s->KH * s->KW + (size_t)s->OC;
    return (n + 15) & ~(size_t)15;
}

size_t conv2d_work_floats(const Conv2dShape *s) {
    size_t a = (size_t)s->threads * col_floats(s, s->chunk) + (size_t)n_items(s) * part_floats(s);
    size_t b = conv3x3_work_floats(s);
    return a > b ? a : b;
}

/* valid output columns [*lo, *hi) for kernel column kw: 0 <= ow*stride - pad + kw < W */
static inline void valid_range(int *lo, int *hi, int kw, const Conv2dShape *s) {
    int a = s->pad - kw; /* ow*stride >= a */
    int l = a <= 0 ? 0 : (a + s->stride - 1) / s->stride;
    int b = s->W - 1 + s->pad - kw; /* ow*stride <= b */
    int h = b < 0 ? 0 : b / s->stride + 1;
    if (h > s->OW) h = s->OW;
    if (l > h) l = h;
    *lo = l, *hi = h;
}

/* Stride-2 rows: row[ow] = src[2*ow] for ow in [lo, hi), 0 for the other
 * ow < OW (gather_s2), and its adjoint dst[2*ow] += row[ow] (scatter_add_s2),
 * for nr rows at once: output rows OW apart, input rows sstride apart.
 * src/dst may point before the input row: only indices 2*ow with ow in
 * [lo, hi) are ever touched. AVX-512: per 16 outputs two masked loads and one
 * two-source permute, with the masks worked out once for all rows. */
#if defined(__AVX512F__)
#include <immintrin.h>

/* bits 2j for j in [a, b) (0 <= a, b <= 8) */
static inline __mmask16 even_bits(int a, int b) {
    unsigned m = 0;
    for (int j = a; j < b; j++) m |= 1u << (2 * j);
    return (__mmask16)m;
}

typedef struct {
    __mmask16 ma, mb, mo, mn; /* input lanes of the two loads, valid outputs, outputs to store */
} S2Chunk;

/* at most 64 chunks (OW <= 1024); wider rows take the scalar loops */
static int s2_plan(S2Chunk *ch, int lo, int hi, int OW) {
    int k = 0;
    for (int o = 0; o < OW; o += 16, k++) {
        int n = OW - o < 16 ? OW - o : 16;
        int a = lo - o, b = hi - o;
        if (a < 0) a = 0;
        if (b > n) b = n;
        if (a > b) a = b;
        ch[k].ma = even_bits(a < 8 ? a : 8, b < 8 ? b : 8);
        ch[k].mb = even_bits(a > 8 ? a - 8 : 0, b > 8 ? b - 8 : 0);
        ch[k].mo = (__mmask16)(((1u << b) - 1) & ~((1u << a) - 1));
        ch[k].mn = (__mmask16)((1u << n) - 1);
    }
    return k;
}

static void gather_s2(float *row, const float *src, int lo, int hi, int OW, int nr, size_t sstride) {
    if (OW > 1024) {
        for (int r = 0; r < nr; r++)
            for (int ow = 0; ow < OW; ow++)
                row[(size_t)r * OW + ow] = (ow >= lo && ow < hi) ? src[r * (ptrdiff_t)sstride + 2 * (ptrdiff_t)ow] : 0.0f;
        return;
    }
    const __m512i idx = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    S2Chunk ch[64];
    int nch = s2_plan(ch, lo, hi, OW);
    for (int r = 0; r < nr; r++) {
        const float *sp = src + r * (ptrdiff_t)sstride;
        float *rp = row + (size_t)r * OW;
        for (int k = 0; k < nch; k++) {
            __m512 A = _mm512_maskz_loadu_ps(ch[k].ma, sp + 32 * k), B = _mm512_maskz_loadu_ps(ch[k].mb, sp + 32 * k + 16);
            _mm512_mask_storeu_ps(rp + 16 * k, ch[k].mn, _mm512_permutex2var_ps(A, idx, B));
        }
    }
}

static void scatter_add_s2(float *dst, const float *row, int lo, int hi, int OW, int nr, size_t dstride) {
    if (OW > 1024) {
        for (int r = 0; r < nr; r++)
            for (int ow = lo; ow < hi; ow++) dst[r * (ptrdiff_t)dstride + 2 * (ptrdiff_t)ow] += row[(size_t)r * OW + ow];
        return;
    }
    const __m512i ia = _mm512_setr_epi32(0, 16, 1, 16, 2, 16, 3, 16, 4, 16, 5, 16, 6, 16, 7, 16);
    const __m512i ib = _mm512_setr_epi32(8, 16, 9, 16, 10, 16, 11, 16, 12, 16, 13, 16, 14, 16, 15, 16);
    const __m512 z = _mm512_setzero_ps();
    S2Chunk ch[64];
    int nch = s2_plan(ch, lo, hi, OW);
    for (int r = 0; r < nr; r++) {
        float *dp0 = dst + r * (ptrdiff_t)dstride;
        const float *rp = row + (size_t)r * OW;
        for (int k = 0; k < nch; k++) {
            __m512 v = _mm512_maskz_loadu_ps(ch[k].mo, rp + 16 * k);
            float *dp = dp0 + 32 * k;
            if (ch[k].ma)
                _mm512_mask_storeu_ps(dp, ch[k].ma, _mm512_add_ps(_mm512_maskz_loadu_ps(ch[k].ma, dp),
                                                                  _mm512_permutex2var_ps(v, ia, z)));
            if (ch[k].mb)
                _mm512_mask_storeu_ps(dp + 16, ch[k].mb, _mm512_add_ps(_mm512_maskz_loadu_ps(ch[k].mb, dp + 16),
                                                                       _mm512_permutex2var_ps(v, ib, z)));
        }
    }
}
#else
static void gather_s2(float *row, const float *src, int lo, int hi, int OW, int nr, size_t sstride) {
    for (int r = 0; r < nr; r++)
        for (int ow = 0; ow < OW; ow++)
            row[(size_t)r * OW + ow] = (ow >= lo && ow < hi) ? src[r * (ptrdiff_t)sstride + 2 * (ptrdiff_t)ow] : 0.0f;
}
static void scatter_add_s2(float *dst, const float *row, int lo, int hi, int OW, int nr, size_t dstride) {
    for (int r = 0; r < nr; r++)
        for (int ow = lo; ow < hi; ow++) dst[r * (ptrdiff_t)dstride + 2 * (ptrdiff_t)ow] += row[(size_t)r * OW + ow];
}
#endif

/* Stride 1 with OW == W ("same" width): the valid rows of one image map to a
 * contiguous block of the input shifted by d = kw - pad, so a column row is one
 * long copy plus zeroed border columns (ow < lo or ow >= hi) instead of one
 * short copy per output row. */
static int same_width(const Conv2dShape *s) { return s->stride == 1 && s->OW == s->W; }

/* valid output rows [*va, *vb) within [oa, ob) for kernel row kh: 0 <= oh*stride - pad + kh < H */
static inline void valid_rows(int *va, int *vb, int oa, int ob, int kh, const Conv2dShape *s) {
    int a = s->pad - kh; /* oh*stride >= a */
    int l = a <= 0 ? 0 : (a + s->stride - 1) / s->stride;
    int b = s->H - 1 + s->pad - kh;
    int h = b < 0 ? 0 : b / s->stride + 1;
    if (l < oa) l = oa;
    if (h > ob) h = ob;
    if (l > h) l = h;
    *va = l, *vb = h;
}

/* col[r, i*OW + ow] = inp[c, n, oh*stride - pad + kh, ow*stride - pad + kw] (0 outside),
 * r = (c*KH + kh)*KW + kw, for units u0 .. u0+nu-1 (u = n*OH + oh). */
static void im2col(float *col /*CKK, nu*OW*/, const float *inp /*C,ldi*/, int u0, int nu, const Conv2dShape *s) {
    const int OW = s->OW, st = s->stride, OH = s->OH;
    const size_t cols = (size_t)nu * OW;
    const int fast = same_width(s);
    for (int c = 0; c < s->C; c++)
        for (int kh = 0; kh < s->KH; kh++)
            for (int kw = 0; kw < s->KW; kw++) {
                float *dst = col + ((size_t)(c * s->KH + kh) * s->KW + kw) * cols;
                int lo, hi;
                valid_range(&lo, &hi, kw, s);
                /* walk the chunk image by image: units [u, ue) of image n */
                for (int u = u0; u < u0 + nu;) {
                    int n = u / OH, oa = u % OH;
                    int ob = (n + 1) * OH - u0 < nu ? OH : u0 + nu - n * OH;
                    int va, vb;
                    valid_rows(&va, &vb, oa, ob, kh, s);
                    float *d0 = dst + (size_t)(u - u0) * OW; /* row oa */
                    if (va > oa) memset(d0, 0, sizeof(float) * (size_t)(va - oa) * OW);
                    if (vb < ob) memset(d0 + (size_t)(vb - oa) * OW, 0, sizeof(float) * (size_t)(ob - vb) * OW);
                    if (vb > va) {
                        const float *plane = inp + (size_t)c * s->ldi + (size_t)n * s->H * s->W;
                        float *d = d0 + (size_t)(va - oa) * OW;
                        if (fast) {
                            int sh = kw - s->pad;
                            size_t tot = (size_t)(vb - va) * OW;
                            size_t s0 = sh < 0 ? (size_t)-sh : 0, e0 = sh > 0 ? (size_t)sh : 0;
                            const float *src = plane + (size_t)(va - s->pad + kh) * s->W + sh;
                            if (tot > s0 + e0) memcpy(d + s0, src + s0, sizeof(float) * (tot - s0 - e0));
                            if (lo > 0 || hi < OW)
                                for (int oh = va; oh < vb; oh++) {
                                    float *row = d + (size_t)(oh - va) * OW;
                                    for (int ow = 0; ow < lo; ow++) row[ow] = 0.0f;
                                    for (int ow = hi; ow < OW; ow++) row[ow] = 0.0f;
                                }
                        } else if (st == 2) {
                            gather_s2(d, at(plane, (ptrdiff_t)(va * 2 - s->pad + kh) * s->W - s->pad + kw), lo, hi, OW,
                                      vb - va, 2 * (size_t)s->W);
                        } else {
                            for (int oh = va; oh < vb; oh++) {
                                const float *src = plane + (size_t)(oh * st - s->pad + kh) * s->W - s->pad + kw;
                                float *row = d + (size_t)(oh - va) * OW;
                                for (int ow = 0; ow < lo; ow++) row[ow] = 0.0f;
                                if (st == 1) memcpy(row + lo, src + lo, sizeof(float) * (hi - lo));
                                else
                                    for (int ow = lo; ow < hi; ow++) row[ow] = src[(size_t)ow * st];
                                for (int ow = hi; ow < OW; ow++) row[ow] = 0.0f;
                            }
                        }
                    }
                    u += ob - oa;
                }
            }
}

/* the adjoint of im2col: dinp[c, n, ih, iw] += dcol[r, i*OW + ow] (dcol's border
 * entries are zeroed on the way: it is scratch) */
static void col2im(float *dinp /*C,ldi*/, float *dcol /*CKK, nu*OW*/, int u0, int nu, const Conv2dShape *s) {
    const int OW = s->OW, st = s->stride, OH = s->OH;
    const size_t cols = (size_t)nu * OW;
    const int fast = same_width(s);
    for (int c = 0; c < s->C; c++)
        for (int kh = 0; kh < s->KH; kh++)
            for (int kw = 0; kw < s->KW; kw++) {
                float *src0 = dcol + ((size_t)(c * s->KH + kh) * s->KW + kw) * cols;
                int lo, hi;
                valid_range(&lo, &hi, kw, s);
                for (int u = u0; u < u0 + nu;) {
                    int n = u / OH, oa = u % OH;
                    int ob = (n + 1) * OH - u0 < nu ? OH : u0 + nu - n * OH;
                    int va, vb;
                    valid_rows(&va, &vb, oa, ob, kh, s);
                    if (vb > va) {
                        float *plane = dinp + (size_t)c * s->ldi + (size_t)n * s->H * s->W;
                        float *g = src0 + (size_t)(u - u0 + va - oa) * OW;
                        if (fast) {
                            int sh = kw - s->pad;
                            size_t tot = (size_t)(vb - va) * OW;
                            size_t s0 = sh < 0 ? (size_t)-sh : 0, e0 = sh > 0 ? (size_t)sh : 0;
                            if (lo > 0 || hi < OW)
                                for (int oh = va; oh < vb; oh++) {
                                    float *row = g + (size_t)(oh - va) * OW;
                                    for (int ow = 0; ow < lo; ow++) row[ow] = 0.0f;
                                    for (int ow = hi; ow < OW; ow++) row[ow] = 0.0f;
                                }
                            float *dst = plane + (size_t)(va - s->pad + kh) * s->W + sh;
                            for (size_t i = s0; i + e0 < tot; i++) dst[i] += g[i];
                        } else if (st == 2) {
                            scatter_add_s2((float *)at(plane, (ptrdiff_t)(va * 2 - s->pad + kh) * s->W - s->pad + kw), g,
                                           lo, hi, OW, vb - va, 2 * (size_t)s->W);
                        } else {
                            for (int oh = va; oh < vb; oh++) {
                                float *dst = plane + (size_t)(oh * st - s->pad + kh) * s->W - s->pad + kw;
                                const float *row = g + (size_t)(oh - va) * OW;
                                if (st == 1)
                                    for (int ow = lo; ow < hi; ow++) dst[ow] += row[ow];
                                else
                                    for (int ow = lo; ow < hi; ow++) dst[(size_t)ow * st] += row[ow];
                            }
                        }
                    }
                    u += ob - oa;
                }
            }
}

/* the team actually used: at most s->threads, and no more than there are images */
static int team_for(const Conv2dShape *s) { return s->threads < s->N ? s->threads : s->N; }

void conv2d_forward(float *out /*OC,ldo*/, float *work /*conv2d_work_floats*/,
                    const float *inp /*C,ldi*/, const float *w /*OC,C,KH,KW*/,
                    const float *b /*OC or NULL*/, const Conv2dShape *s) {
    if (g_direct && conv3x3_ok(s)) {
        conv3x3_forward(out, work, inp, w, b, s);
        return;
    }
    const int CKK = s->C * s->KH * s->KW, OW = s->OW;
    const int ldo = (int)s->ldo; /* channel stride of out (and of dout) */
    const int cu = s->chunk, direct = is_direct(s), NI = n_items(s);
    const size_t cf = col_floats(s, cu);
    const int team = team_for(s);
    OMP_PARALLEL(team) {
        float *col = work + (size_t)gc_thread_id() * cf;
        OMP_FOR_DYN_IN
        for (int k = 0; k < NI; k++) {
            int n0 = (int)((long)s->N * k / NI), n1 = (int)((long)s->N * (k + 1) / NI);
            for (int u0 = n0 * s->OH; u0 < n1 * s->OH; u0 += cu) {
                int nu = n1 * s->OH - u0 < cu ? n1 * s->OH - u0 : cu;
                int cols = nu * OW;
                const float *B;
                int ldb;
                if (direct) {
                    B = inp + (size_t)u0 * OW;
                    ldb = (int)s->ldi;
                } else {
                    im2col(col, inp, u0, nu, s);
                    B = col;
                    ldb = cols;
                }
                float *o = out + (size_t)u0 * OW;
                /* out[OC, cols] = w[OC, CKK] x col[CKK, cols] */
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s->OC, cols, CKK, 1.0f, w, CKK, B, ldb, 0.0f,
                            o, ldo);
                if (b)
                    for (int oc = 0; oc < s->OC; oc++) {
                        float *orow = o + (size_t)oc * ldo;
                        for (int j = 0; j < cols; j++) orow[j] += b[oc];
                    }
            }
        }
    }
}

void conv2d_backward(float *dinp /*C,ldi, overwritten; NULL = skip*/, float *dw /*OC,C,KH,KW, +=*/,
                     float *db /*OC, +=, NULL = skip*/, float *work /*conv2d_work_floats*/,
                     const float *dout /*OC,ldo*/, const float *inp /*C,ldi*/,
                     const float *w /*OC,C,KH,KW*/, const Conv2dShape *s) {
    if (g_direct && conv3x3_ok(s)) {
        conv3x3_backward(dinp, dw, db, work, dout, inp, w, s);
        return;
    }
    const int CKK = s->C * s->KH * s->KW, OW = s->OW;
    const int ldo = (int)s->ldo;
    const int ldi = (int)s->ldi;
    const int cu = s->chunk, direct = is_direct(s), NI = n_items(s);
    const size_t cf = col_floats(s, cu), pf = part_floats(s);
    const int team = team_for(s);
    const size_t nw = (size_t)s->OC * CKK;
    float *part = work + (size_t)s->threads * cf;
    OMP_PARALLEL(team) {
        float *col = work + (size_t)gc_thread_id() * cf;
        OMP_FOR_DYN_NOWAIT
        for (int k = 0; k < NI; k++) {
            int n0 = (int)((long)s->N * k / NI), n1 = (int)((long)s->N * (k + 1) / NI);
            float *dwt = part + (size_t)k * pf, *dbt = dwt + nw;
            memset(dwt, 0, sizeof(float) * (nw + s->OC));
            if (dinp && !direct)
                for (int c = 0; c < s->C; c++)
                    memset(dinp + (size_t)c * s->ldi + (size_t)n0 * s->H * s->W, 0,
                           sizeof(float) * (n1 - n0) * s->H * s->W);
            for (int u0 = n0 * s->OH; u0 < n1 * s->OH; u0 += cu) {
                int nu = n1 * s->OH - u0 < cu ? n1 * s->OH - u0 : cu;
                int cols = nu * OW;
                const float *dO = dout + (size_t)u0 * OW;
                const float *B;
                int ldb;
                if (direct) {
                    B = inp + (size_t)u0 * OW;
                    ldb = ldi;
                } else {
                    im2col(col, inp, u0, nu, s);
                    B = col;
                    ldb = cols;
                }
                /* forward: out = w x col  =>  dw[OC, CKK] += dout[OC, cols] x col[CKK, cols]^T */
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, s->OC, CKK, cols, 1.0f, dO, ldo, B, ldb, 1.0f,
                            dwt, CKK);
                if (db) /* forward: out[oc, j] += b[oc]  =>  db[oc] += sum_j dout[oc, j] */
                    for (int oc = 0; oc < s->OC; oc++) {
                        const float *r = dO + (size_t)oc * ldo;
                        float acc = 0.0f;
                        OMP_SIMD_REDUCE(+ : acc)
                        for (int j = 0; j < cols; j++) acc += r[j];
                        dbt[oc] += acc;
                    }
                if (dinp) {
                    /* dcol[CKK, cols] = w[OC, CKK]^T x dout[OC, cols] */
                    if (direct) {
                        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, CKK, cols, s->OC, 1.0f, w, CKK, dO, ldo,
                                    0.0f, dinp + (size_t)u0 * OW, ldi);
                    } else {
                        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, CKK, cols, s->OC, 1.0f, w, CKK, dO, ldo,
                                    0.0f, col, cols);
                        col2im(dinp, col, u0, nu, s);
                    }
                }
            }
        }
        OMP_BARRIER
        /* partial sums in item order: the same result for any thread count */
        OMP_FOR_IN
        for (size_t i = 0; i < nw; i++) {
            float acc = 0.0f;
            for (int k = 0; k < NI; k++) acc += part[(size_t)k * pf + i];
            dw[i] += acc;
        }
        if (db) {
            OMP_FOR_IN
            for (int oc = 0; oc < s->OC; oc++) {
                float acc = 0.0f;
                for (int k = 0; k < NI; k++) acc += part[(size_t)k * pf + nw + oc];
                db[oc] += acc;
            }
        }
    }
}
