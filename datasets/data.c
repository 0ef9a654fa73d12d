/* Shared loader pieces: data directory, options, positions, sample order. */
#include "datasets/data.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/check.h"
#include "common/rng.h"

#define SALT_SHUFFLE 0x5EED5A11D0C0FFEEULL
#define SALT_SHARD 0x5A4D0F1C3D5EEDULL
#define SALT_AUG 0xA06E57A7E0F1A7ULL

const char *data_dir(void) {
    const char *d = getenv("DATA_DIR");
    return (d && d[0]) ? d : "data";
}

int data_path(char *out, size_t cap, const char *sub) {
    const char *d = data_dir();
    size_t len = strlen(d);
    const char *sep = (len > 0 && d[len - 1] == '/') ? "" : "/";
    int w = snprintf(out, cap, "%s%s%s", d, sep, sub);
    if (w < 0 || (size_t)w >= cap) return -GC_ERR_PARAM;
    return 0;
}

LoaderOpts loader_opts(int batch, int train) {
    LoaderOpts o;
    memset(&o, 0, sizeof o);
    o.batch = batch;
    o.train = train ? 1 : 0;
    o.seed = 0;
    o.worker = 0;
    o.nworkers = 1;
    o.shard = DATA_SHARD_EPOCH;
    o.augment = -1;
    return o;
}

int loader_opts_check(const LoaderOpts *o, char *err, size_t errlen) {
    const char *why = NULL;
    if (o->batch <= 0) why = "batch must be > 0";
    else if (o->nworkers < 1) why = "nworkers must be >= 1";
    else if (o->worker < 0 || o->worker >= o->nworkers) why = "worker must be in [0, nworkers)";
    else if (o->shard != DATA_SHARD_EPOCH && o->shard != DATA_SHARD_FIXED) why = "shard must be DATA_SHARD_EPOCH or DATA_SHARD_FIXED";
    else if (o->augment < -1 || o->augment > 1) why = "augment must be -1, 0 or 1";
    else if (o->threads < 0 || o->threads > 256) why = "threads must be in [0, 256]";
    else if (o->prefetch < 0 || o->prefetch > 64) why = "prefetch must be in [0, 64]";
    else if (o->image_size < 0 || o->image_size > 8192) why = "image_size must be in [0, 8192]";
    if (why) {
        snprintf(err, errlen, "loader options: %s (batch=%d worker=%d nworkers=%d)", why, o->batch, o->worker,
                 o->nworkers);
        return -GC_ERR_PARAM;
    }
    return 0;
}

static void put_u32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static void put_u64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static uint32_t get_u32(const uint8_t *p) {
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) v |= (uint32_t)p[i] << (8 * i);
    return v;
}
static uint64_t get_u64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

void loader_pos_pack(uint8_t *out, const LoaderPos *p) {
    memcpy(out, "GXPS", 4);
    put_u32(out + 4, 1);
    put_u64(out + 8, (uint64_t)p->epoch);
    put_u64(out + 16, (uint64_t)p->cursor);
    put_u64(out + 24, p->fingerprint);
}

int loader_pos_unpack(LoaderPos *p, const uint8_t *in, size_t len, char *err, size_t errlen) {
    if (len != LOADER_POS_BYTES) {
        snprintf(err, errlen, "loader position: %zu bytes, expected %d", len, LOADER_POS_BYTES);
        return -GC_ERR_TRUNCATED;
    }
    if (memcmp(in, "GXPS", 4) != 0) {
        snprintf(err, errlen, "loader position: bad magic (expected \"GXPS\"): not a loader position record");
        return -GC_ERR_MAGIC;
    }
    uint32_t v = get_u32(in + 4);
    if (v != 1) {
        snprintf(err, errlen, "loader position: version %u, this build reads version 1", v);
        return -GC_ERR_VERSION;
    }
    p->epoch = (int64_t)get_u64(in + 8);
    p->cursor = (int64_t)get_u64(in + 16);
    p->fingerprint = get_u64(in + 24);
    if (p->epoch < 0 || p->cursor < 0) {
        snprintf(err, errlen, "loader position: negative epoch or cursor");
        return -GC_ERR_CORRUPT;
    }
    return 0;
}

int64_t data_samples_per_epoch(int64_t n, const LoaderOpts *o) {
    int64_t W = o->nworkers, w = o->worker;
    if (o->train) return n / W;
    return (w + 1) * n / W - w * n / W;
}

static void iota(int *a, int64_t n) {
    for (int64_t i = 0; i < n; i++) a[i] = (int)i;
}

void data_epoch_order(int *out, int *scratch, int64_t n, const LoaderOpts *o, int64_t epoch) {
    int64_t W = o->nworkers, w = o->worker;
    if (!o->train) {
        int64_t lo = w * n / W, hi = (w + 1) * n / W;
        for (int64_t i = lo; i < hi; i++) out[i - lo] = (int)i;
        return;
    }
    int64_t S = n / W;
    Rng r;
    if (o->shard == DATA_SHARD_FIXED) {
        /* one split for the whole run, from the seed alone (SBC section IV) */
        iota(scratch, n);
        rng_init(&r, o->seed ^ SALT_SHARD, 0);
        rng_shuffle_int(&r, scratch, (int)n);
        memcpy(out, scratch + w * S, (size_t)S * sizeof(int));
        rng_init(&r, o->seed ^ SALT_SHUFFLE, ((uint64_t)epoch << 16) ^ (uint64_t)w);
        rng_shuffle_int(&r, out, (int)S);
    } else {
        /* one global permutation per epoch, same on every worker, cut in W parts */
        iota(scratch, n);
        rng_init(&r, o->seed ^ SALT_SHUFFLE, (uint64_t)epoch);
        rng_shuffle_int(&r, scratch, (int)n);
        memcpy(out, scratch + w * S, (size_t)S * sizeof(int));
    }
}

uint64_t data_aug_key(uint64_t seed, int64_t epoch, int64_t index, int worker) {
    uint64_t k = rng_hash64(seed ^ SALT_AUG, (uint64_t)epoch);
    k = rng_hash64(k, (uint64_t)index);
    return rng_hash64(k, (uint64_t)worker);
}

uint64_t data_mix(uint64_t h, uint64_t v) {
    for (int i = 0; i < 8; i++) {
        h ^= (v >> (8 * i)) & 0xFF;
        h *= 0x100000001B3ULL;
    }
    return h;
}

/* ------------------------------------------------------------------ */

int image_loader_next(ImageLoader *l, float *x, int *y) {
    l->err[0] = '\0';
    return l->ops->next(l, x, y);
}

LoaderPos image_loader_get_pos(const ImageLoader *l) {
    LoaderPos p = {l->epoch, l->cursor, l->fingerprint};
    return p;
}

int image_loader_set_pos(ImageLoader *l, const LoaderPos *p) {
    if (p->fingerprint != l->fingerprint) {
        snprintf(l->err, sizeof l->err,
                 "%s loader: saved position belongs to another configuration (fingerprint %016llx, this loader "
                 "%016llx): dataset size, batch, seed, worker count, sharding and augmentation must match the "
                 "saved run",
                 l->name, (unsigned long long)p->fingerprint, (unsigned long long)l->fingerprint);
        return -GC_ERR_STATE;
    }
    int64_t limit = l->opts.train ? l->steps_per_epoch * l->opts.batch : l->samples_per_epoch;
    if (p->epoch < 0 || p->cursor < 0 || p->cursor > limit) {
        snprintf(l->err, sizeof l->err, "%s loader: position epoch %lld cursor %lld out of range (cursor <= %lld)",
                 l->name, (long long)p->epoch, (long long)p->cursor, (long long)limit);
        return -GC_ERR_PARAM;
    }
    l->epoch = p->epoch;
    l->cursor = p->cursor;
    if (l->ops->seek) l->ops->seek(l);
    return 0;
}

void image_loader_free(ImageLoader *l) {
    if (l && l->ops) l->ops->free(l);
}
