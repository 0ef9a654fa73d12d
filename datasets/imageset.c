/* ImageLoader over an in-memory uint8 image set (see imageset.h). */
#include "datasets/imageset.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/rng.h"

typedef struct {
    ImageSet *s;
    int own;
    int crop;             /* pad-crop augmentation active */
    int flip;             /* flip augmentation active */
    int *order;           /* [S] this worker's sample order for order_epoch */
    int *scratch;         /* [N] */
    int64_t order_epoch;  /* -1: none computed */
    float lut[3][256];    /* (u/255 - mean[c]) / std[c] */
} MemImpl;

void imageset_free(ImageSet *s) {
    if (!s) return;
    free(s->x);
    free(s->y);
    s->x = NULL;
    s->y = NULL;
    s->n = 0;
}

void imageset_stats(double *mean, double *std, const ImageSet *s) {
    int64_t plane = (int64_t)s->H * s->W;
    for (int c = 0; c < s->C; c++) {
        double sum = 0, sq = 0;
        for (int64_t i = 0; i < s->n; i++) {
            const uint8_t *p = s->x + (i * s->C + c) * plane;
            uint64_t a = 0, b = 0;
            for (int64_t k = 0; k < plane; k++) {
                a += p[k];
                b += (uint64_t)p[k] * p[k];
            }
            sum += (double)a;
            sq += (double)b;
        }
        double cnt = (double)s->n * (double)plane;
        double m = sum / cnt / 255.0;
        double var = sq / cnt / (255.0 * 255.0) - m * m;
        mean[c] = m;
        std[c] = sqrt(var > 0 ? var : 0);
    }
}

/* out[c][i][j] = lut[c][ src[c][i + dy - pad][jj + dx - pad] ], jj = flip ? W-1-j : j,
 * the pad value (pixel 0) outside the image. */
static void transform(float *out /* [C, H, W] */, const MemImpl *m, int64_t idx, int dy, int dx, int flip) {
    const ImageSet *s = m->s;
    int C = s->C, H = s->H, W = s->W, pad = m->crop ? s->pad : 0;
    const uint8_t *src = s->x + idx * (int64_t)C * H * W;
    for (int c = 0; c < C; c++) {
        const float *lut = m->lut[c];
        const uint8_t *sp = src + (int64_t)c * H * W;
        float *op = out + (int64_t)c * H * W;
        for (int i = 0; i < H; i++) {
            int si = i + dy - pad;
            float *orow = op + (int64_t)i * W;
            if (si < 0 || si >= H) {
                for (int j = 0; j < W; j++) orow[j] = lut[0];
                continue;
            }
            const uint8_t *srow = sp + (int64_t)si * W;
            for (int j = 0; j < W; j++) {
                int sj = (flip ? W - 1 - j : j) + dx - pad;
                orow[j] = (sj < 0 || sj >= W) ? lut[0] : lut[srow[sj]];
            }
        }
    }
}

static int mem_next(ImageLoader *l, float *x, int *y) {
    MemImpl *m = l->impl;
    const ImageSet *s = m->s;
    int64_t limit = l->opts.train ? l->steps_per_epoch * l->opts.batch : l->samples_per_epoch;
    if (l->cursor >= limit) {
        l->epoch++;
        l->cursor = 0;
        return 0;
    }
    int64_t nb = limit - l->cursor;
    if (nb > l->opts.batch) nb = l->opts.batch;
    if (m->order_epoch != l->epoch) {
        data_epoch_order(m->order, m->scratch, s->n, &l->opts, l->epoch);
        m->order_epoch = l->epoch;
    }
    int64_t chw = (int64_t)s->C * s->H * s->W;
    int aug = l->opts.train && (m->crop || m->flip);
    for (int64_t k = 0; k < nb; k++) {
        int64_t idx = m->order[l->cursor + k];
        int dy = m->crop ? s->pad : 0, dx = dy, flip = 0;
        if (aug) {
            uint64_t key = data_aug_key(l->opts.seed, l->epoch, idx, l->opts.worker);
            if (m->crop) {
                uint64_t span = 2 * (uint64_t)s->pad + 1;
                dy = (int)(rng_hash64(key, 0) % span);
                dx = (int)(rng_hash64(key, 1) % span);
            }
            if (m->flip) flip = (int)(rng_hash64(key, 2) >> 63);
        }
        transform(x + k * chw, m, idx, dy, dx, flip);
        y[k] = s->y[idx];
    }
    l->cursor += nb;
    return (int)nb;
}

static void mem_seek(ImageLoader *l) { (void)l; /* the order is recomputed from (seed, epoch) */ }

static void mem_free(ImageLoader *l) {
    MemImpl *m = l->impl;
    if (m) {
        if (m->own) {
            imageset_free(m->s);
            free(m->s);
        }
        free(m->order);
        free(m->scratch);
        free(m);
    }
    free(l);
}

static const ImageLoaderOps mem_ops = {mem_next, mem_seek, mem_free};

int imageset_loader(ImageLoader **out, ImageSet *s, int own, const LoaderOpts *o, char *err, size_t errlen) {
    *out = NULL;
    int rc = loader_opts_check(o, err, errlen);
    if (rc) return rc;
    if (s->n <= 0 || s->n > 0x7FFFFFFF || s->C < 1 || s->C > 3 || s->H < 1 || s->W < 1) {
        snprintf(err, errlen, "%s: empty or impossible image set (n=%lld, %dx%dx%d)", s->name, (long long)s->n, s->C,
                 s->H, s->W);
        return -GC_ERR_PARAM;
    }
    int64_t S = data_samples_per_epoch(s->n, o);
    int64_t steps = o->train ? S / o->batch : (S + o->batch - 1) / o->batch;
    if (o->train && steps == 0) {
        snprintf(err, errlen,
                 "%s: a worker's shard has %lld samples (%lld / %d workers), fewer than one batch of %d: lower the "
                 "batch size or the worker count",
                 s->name, (long long)S, (long long)s->n, o->nworkers, o->batch);
        return -GC_ERR_PARAM;
    }
    ImageLoader *l = calloc(1, sizeof *l);
    MemImpl *m = calloc(1, sizeof *m);
    int *order = malloc((size_t)(S > 0 ? S : 1) * sizeof(int));
    int *scratch = malloc((size_t)s->n * sizeof(int));
    if (!l || !m || !order || !scratch) {
        free(l);
        free(m);
        free(order);
        free(scratch);
        snprintf(err, errlen, "%s: out of memory for the loader", s->name);
        return -GC_ERR_NOMEM;
    }
    m->s = s;
    m->own = own;
    int augment = o->train && o->augment != 0;
    m->crop = augment && s->pad > 0;
    m->flip = augment && s->flip;
    m->order = order;
    m->scratch = scratch;
    m->order_epoch = -1;
    for (int c = 0; c < s->C; c++)
        for (int u = 0; u < 256; u++) m->lut[c][u] = ((float)u / 255.0f - s->mean[c]) / s->std[c];

    l->ops = &mem_ops;
    snprintf(l->name, sizeof l->name, "%s", s->name);
    l->C = s->C;
    l->H = s->H;
    l->W = s->W;
    l->num_classes = s->num_classes;
    l->opts = *o;
    l->n = s->n;
    l->samples_per_epoch = S;
    l->steps_per_epoch = steps;
    l->impl = m;
    uint64_t h = 0xCBF29CE484222325ULL;
    h = data_mix(h, (uint64_t)s->n);
    h = data_mix(h, ((uint64_t)s->C << 40) ^ ((uint64_t)s->H << 20) ^ (uint64_t)s->W);
    h = data_mix(h, (uint64_t)o->batch);
    h = data_mix(h, (uint64_t)o->train);
    h = data_mix(h, o->seed);
    h = data_mix(h, ((uint64_t)o->worker << 32) ^ (uint64_t)o->nworkers);
    h = data_mix(h, ((uint64_t)o->shard << 8) ^ ((uint64_t)m->crop << 4) ^ (uint64_t)m->flip);
    l->fingerprint = h;
    *out = l;
    return 0;
}
