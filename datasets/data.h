/* Dataset loaders: what they share.
 *
 *  - where the data lives: $DATA_DIR (environment), default "data/";
 *  - LoaderOpts: per-worker batch, train/eval, seed, worker rank and count,
 *    sharding mode, augmentation switch, decode threads;
 *  - LoaderPos: a loader's position (epoch, cursor) plus a fingerprint of its
 *    configuration, packed into 32 bytes for a checkpoint section. Restoring a
 *    position continues EXACTLY where the saved run was: sample order is a pure
 *    function of (seed, epoch) and augmentation randomness a pure function of
 *    (seed, epoch, sample index, worker), so no RNG state is saved;
 *  - ImageLoader: the one image-classification interface (CIFAR-10, MNIST,
 *    image folders) that train_resnet and train_lenet share;
 *  - the sample order of one worker in one epoch (shuffling + sharding).
 *
 * Sharding (training). Every worker MUST use the same seed; the data seed is not
 * the per-rank seed. Two modes:
 *   DATA_SHARD_EPOCH (default): each epoch a global permutation of the N
 *     samples from (seed, epoch), cut into W contiguous parts of floor(N/W);
 *     worker w takes part w (as PyTorch's DistributedSampler, but the N mod W
 *     leftover samples of that epoch's permutation are skipped, not padded).
 *   DATA_SHARD_FIXED: as SBC section IV ("We split the training data randomly
 *     into 4 shards of equal size, and assign one shard to every one of the 4
 *     clients"): one permutation from the seed alone, cut into W parts of
 *     floor(N/W) once for the whole run; each epoch worker w visits its own
 *     shard in an order shuffled from (seed, epoch).
 * Either way the W shards of an epoch are disjoint and have equal size S.
 * Training batches are full: an epoch has floor(S / batch) steps and the last
 * S mod batch samples of the worker's epoch order are skipped (drop_last).
 *
 * Evaluation (train = 0): no shuffling, no augmentation; worker w of W takes
 * the contiguous range [w*N/W, (w+1)*N/W) in order (W = 1: the whole set), and
 * the last partial batch is returned, so every sample is seen exactly once.
 *
 * Errors: functions return 0 (or a count) on success and a negative GcError
 * (common/errors.h) on failure, with a message naming the file and how to get
 * the data written into err (errlen bytes) or, for loaders, into l->err. */
#ifndef GC_DATA_H
#define GC_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "common/errors.h"

#define DATA_ERR_LEN 512
#define DATA_PATH_MAX 4096

/* $DATA_DIR, or "data" when unset or empty */
const char *data_dir(void);
/* out = "<data_dir()>/<sub>"; returns 0, or -GC_ERR_PARAM when it does not fit */
int data_path(char *out /* [cap] */, size_t cap, const char *sub);

enum { DATA_SHARD_EPOCH = 0, DATA_SHARD_FIXED = 1 };

typedef struct {
    int batch;        /* samples per batch on this worker (> 0) */
    int train;        /* 1: shuffle, shard, augment, full batches; 0: evaluation order */
    uint64_t seed;    /* data seed, identical on every worker */
    int worker;       /* this worker's rank, 0 <= worker < nworkers */
    int nworkers;     /* W >= 1 */
    int shard;        /* DATA_SHARD_EPOCH or DATA_SHARD_FIXED */
    int augment;      /* -1: the dataset's default training augmentation, 0: none, 1: on */
    int threads;      /* image folders: decode threads, 0 = automatic */
    int prefetch;     /* image folders: batches decoded ahead (>= 1), 0 = automatic (2) */
    int image_size;   /* image folders: output height = width, 0 = automatic (224) */
} LoaderOpts;

/* defaults: seed 0, worker 0 of 1, DATA_SHARD_EPOCH, augment -1, automatic rest */
LoaderOpts loader_opts(int batch, int train);
/* checks ranges; 0 or -GC_ERR_PARAM with a message */
int loader_opts_check(const LoaderOpts *o, char *err /* [errlen] */, size_t errlen);

typedef struct {
    int64_t epoch;        /* epochs completed */
    int64_t cursor;       /* samples (image loaders) or time steps (LM loaders) done in this epoch */
    uint64_t fingerprint; /* hash of the configuration; restoring into another configuration fails */
} LoaderPos;

#define LOADER_POS_BYTES 32
/* little-endian: "GXPS", u32 version 1, i64 epoch, i64 cursor, u64 fingerprint */
void loader_pos_pack(uint8_t *out /* [LOADER_POS_BYTES] */, const LoaderPos *p);
int loader_pos_unpack(LoaderPos *p, const uint8_t *in /* [len] */, size_t len, char *err /* [errlen] */,
                      size_t errlen);

/* Per-worker sample order for one epoch (see the header comment).
 * data_samples_per_epoch: S (train: floor(N/W); eval: this worker's range). */
int64_t data_samples_per_epoch(int64_t n, const LoaderOpts *o);
/* out[k] = dataset index of the k-th sample worker o->worker visits in epoch */
void data_epoch_order(int *out /* [S] */, int *scratch /* [n] */, int64_t n, const LoaderOpts *o, int64_t epoch);
/* 64-bit key of one sample's augmentation randomness: a pure function of
 * (seed, epoch, sample index, worker); draw k is rng_hash64(key, k). */
uint64_t data_aug_key(uint64_t seed, int64_t epoch, int64_t index, int worker);
/* FNV-1a style mixing used for fingerprints */
uint64_t data_mix(uint64_t h, uint64_t v);

/* ------------------------------------------------------------------ */
/* Image classification loaders: x is NCHW float (normalized), y int labels. */

typedef struct ImageLoader ImageLoader;

typedef struct {
    /* fill up to batch samples; return the count n > 0, 0 at the end of an epoch */
    int (*next)(ImageLoader *l, float *x, int *y);
    /* epoch/cursor were changed from outside: drop anything computed ahead */
    void (*seek)(ImageLoader *l);
    void (*free)(ImageLoader *l);
} ImageLoaderOps;

struct ImageLoader {
    const ImageLoaderOps *ops;
    char name[32];             /* "cifar10", "mnist", "folder" */
    int C, H, W;               /* shape of one output sample */
    int num_classes;
    LoaderOpts opts;
    int64_t n;                 /* samples in the split */
    int64_t samples_per_epoch; /* S, this worker */
    int64_t steps_per_epoch;   /* train: floor(S/batch); eval: ceil(S/batch) */
    int64_t epoch, cursor;     /* position */
    uint64_t fingerprint;
    char err[DATA_ERR_LEN];    /* message of the last failed call */
    void *impl;
};

/* Next batch into x (batch*C*H*W floats) and y (batch ints). Returns the number
 * of samples n (train: always opts.batch; eval: the last batch may be shorter),
 * 0 at the end of an epoch (the position moves to the start of the next epoch:
 * the call after returns its first batch), or a negative GcError with l->err set. */
int image_loader_next(ImageLoader *l, float *x /* [batch, C, H, W] */, int *y /* [batch] */);
LoaderPos image_loader_get_pos(const ImageLoader *l);
/* 0, or -GC_ERR_STATE (other configuration) / -GC_ERR_PARAM (out of range) with l->err set */
int image_loader_set_pos(ImageLoader *l, const LoaderPos *p);
void image_loader_free(ImageLoader *l);

/* Open a loader by dataset name:
 *   "cifar10[:DIR]"  DIR or $DATA_DIR/cifar-10-batches-bin (train: data_batch_1..5, else test_batch)
 *   "mnist[:DIR]"    DIR or $DATA_DIR/mnist (train-* / t10k-* IDX files, gzipped or plain)
 *   "folder:ROOT"    image folders ROOT/train/<class>/..., ROOT/val/<class>/...
 * train selects the split (1: training files, 0: test / val files) and
 * o->train its treatment (normally the same). The loader owns what it loads;
 * to share one in-memory set between several workers' loaders use
 * cifar10_load / mnist_load + imageset_loader(own = 0) instead. */
int image_loader_open(ImageLoader **out, const char *dataset, int train, const LoaderOpts *o, char *err /* [errlen] */,
                      size_t errlen);

#endif
