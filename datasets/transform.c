/* Antialiased bilinear resize, random-resized-crop and center-crop geometry (transform.h). */
#include "datasets/transform.h"

#include <math.h>
#include <stdlib.h>

#include "common/errors.h"
#include "common/rng.h"

const float imagenet_mean[3] = {0.485f, 0.456f, 0.406f};
const float imagenet_std[3] = {0.229f, 0.224f, 0.225f};

/* Weights of the output pixels [o0, o0+n) of an in -> out resize along one axis
 * (PyTorch _compute_indices_weights_aa / PIL precompute_coeffs): start[i], len[i]
 * and w[i*kmax + j]. Returns kmax. */
static int axis_weights(int *start /* [n] */, int *len /* [n] */, float **wout, int in, int out, int o0, int n) {
    double scale = (double)in / (double)out;
    double support = scale >= 1.0 ? scale : 1.0; /* interp_size/2 = 1 for the triangle, times scale */
    double invscale = scale >= 1.0 ? 1.0 / scale : 1.0;
    int kmax = (int)ceil(support) * 2 + 1;
    float *w = malloc(sizeof(float) * (size_t)kmax * (size_t)(n > 0 ? n : 1));
    if (!w) return -1;
    for (int i = 0; i < n; i++) {
        double center = scale * (o0 + i + 0.5);
        long xmin = (long)(center - support + 0.5);
        if (xmin < 0) xmin = 0;
        long xmax = (long)(center + support + 0.5);
        if (xmax > in) xmax = in;
        int xs = (int)(xmax - xmin);
        if (xs > kmax) xs = kmax;
        double total = 0, tw[64];
        double *t = xs <= 64 ? tw : malloc(sizeof(double) * (size_t)xs);
        if (!t) {
            free(w);
            return -1;
        }
        for (int j = 0; j < xs; j++) {
            double x = fabs((j + xmin - center + 0.5) * invscale);
            t[j] = x < 1.0 ? 1.0 - x : 0.0;
            total += t[j];
        }
        for (int j = 0; j < kmax; j++) w[(size_t)i * kmax + j] = (j < xs && total != 0.0) ? (float)(t[j] / total) : 0.0f;
        if (t != tw) free(t);
        start[i] = (int)xmin;
        len[i] = xs;
    }
    *wout = w;
    return kmax;
}

int resize_crop_normalize(float *out, const uint8_t *src, int H, int W, int C, int y0, int x0, int h, int w, int OH,
                          int OW, int oy0, int ox0, int oh, int ow, int flip, const float *mean, const float *std) {
    if (C < 1 || C > 4 || h < 1 || w < 1 || y0 < 0 || x0 < 0 || y0 + h > H || x0 + w > W || OH < 1 || OW < 1 ||
        oh < 1 || ow < 1 || oy0 < 0 || ox0 < 0 || oy0 + oh > OH || ox0 + ow > OW)
        return -GC_ERR_PARAM;
    int rc = -GC_ERR_NOMEM;
    int *xs = malloc(sizeof(int) * (size_t)ow), *xl = malloc(sizeof(int) * (size_t)ow);
    int *ys = malloc(sizeof(int) * (size_t)oh), *yl = malloc(sizeof(int) * (size_t)oh);
    float *wx = NULL, *wy = NULL, *tmp = NULL;
    if (!xs || !xl || !ys || !yl) goto done;
    int kx = axis_weights(xs, xl, &wx, w, OW, ox0, ow);
    if (kx < 0) goto done;
    int ky = axis_weights(ys, yl, &wy, h, OH, oy0, oh);
    if (ky < 0) goto done;
    /* input rows (relative to y0) the window needs */
    int rmin = ys[0], rmax = ys[oh - 1] + yl[oh - 1];
    for (int i = 0; i < oh; i++) {
        if (ys[i] < rmin) rmin = ys[i];
        if (ys[i] + yl[i] > rmax) rmax = ys[i] + yl[i];
    }
    if (rmax <= rmin) rmax = rmin + 1;
    tmp = malloc(sizeof(float) * (size_t)(rmax - rmin) * (size_t)ow * (size_t)C);
    if (!tmp) goto done;
    /* horizontal pass: tmp[r][ox][c] = sum_j wx[ox][j] * src[y0 + r][x0 + xs[ox] + j][c] */
    for (int r = rmin; r < rmax; r++) {
        const uint8_t *row = src + ((size_t)(y0 + r) * W + x0) * C;
        float *trow = tmp + (size_t)(r - rmin) * ow * C;
        for (int ox = 0; ox < ow; ox++) {
            const float *wk = wx + (size_t)ox * kx;
            const uint8_t *p = row + (size_t)xs[ox] * C;
            for (int c = 0; c < C; c++) {
                float acc = 0;
                for (int j = 0; j < xl[ox]; j++) acc += wk[j] * (float)p[(size_t)j * C + c];
                trow[(size_t)ox * C + c] = acc;
            }
        }
    }
    /* vertical pass, normalize, flip: out[c][oy][ox'] with ox' = flip ? ow-1-ox : ox */
    for (int oy = 0; oy < oh; oy++) {
        const float *wk = wy + (size_t)oy * ky;
        for (int ox = 0; ox < ow; ox++) {
            int oxo = flip ? ow - 1 - ox : ox;
            for (int c = 0; c < C; c++) {
                float acc = 0;
                for (int k = 0; k < yl[oy]; k++)
                    acc += wk[k] * tmp[((size_t)(ys[oy] + k - rmin) * ow + ox) * C + c];
                out[((size_t)c * oh + oy) * ow + oxo] = (acc / 255.0f - mean[c]) / std[c];
            }
        }
    }
    rc = 0;
done:
    free(xs);
    free(xl);
    free(ys);
    free(yl);
    free(wx);
    free(wy);
    free(tmp);
    return rc;
}

static double draw_uniform(uint64_t key, uint64_t k) { return (double)(rng_hash64(key, k) >> 11) * 0x1p-53; }

void random_resized_crop_params(int *y0, int *x0, int *h, int *w, int H, int W, uint64_t key) {
    double area = (double)H * (double)W;
    double lr0 = log(3.0 / 4.0), lr1 = log(4.0 / 3.0);
    for (int a = 0; a < 10; a++) {
        double target = area * (0.08 + (1.0 - 0.08) * draw_uniform(key, 4 * a));
        double aspect = exp(lr0 + (lr1 - lr0) * draw_uniform(key, 4 * a + 1));
        int cw = (int)nearbyint(sqrt(target * aspect));
        int ch = (int)nearbyint(sqrt(target / aspect));
        if (cw > 0 && cw <= W && ch > 0 && ch <= H) {
            *y0 = (int)(rng_hash64(key, 4 * a + 2) % (uint64_t)(H - ch + 1));
            *x0 = (int)(rng_hash64(key, 4 * a + 3) % (uint64_t)(W - cw + 1));
            *h = ch;
            *w = cw;
            return;
        }
    }
    /* fallback: central crop */
    double in_ratio = (double)W / (double)H;
    int cw, ch;
    if (in_ratio < 3.0 / 4.0) {
        cw = W;
        ch = (int)nearbyint(cw / (3.0 / 4.0));
    } else if (in_ratio > 4.0 / 3.0) {
        ch = H;
        cw = (int)nearbyint(ch * (4.0 / 3.0));
    } else {
        cw = W;
        ch = H;
    }
    if (ch > H) ch = H;
    if (cw > W) cw = W;
    if (ch < 1) ch = 1;
    if (cw < 1) cw = 1;
    *y0 = (H - ch) / 2;
    *x0 = (W - cw) / 2;
    *h = ch;
    *w = cw;
}

int eval_short_side(int size) { return (int)floor(size * 256.0 / 224.0 + 0.5); }

void eval_resize_params(int *OH, int *OW, int *top, int *left, int H, int W, int short_side, int size) {
    if (W <= H) {
        *OW = short_side;
        *OH = (int)((double)short_side * H / W);
    } else {
        *OH = short_side;
        *OW = (int)((double)short_side * W / H);
    }
    if (*OH < size) *OH = size;
    if (*OW < size) *OW = size;
    *top = (int)nearbyint((*OH - size) / 2.0);
    *left = (int)nearbyint((*OW - size) / 2.0);
}
