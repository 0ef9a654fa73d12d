#include "examples/image_task.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/check.h"
#include "datasets/cifar10.h"
#include "datasets/mnist.h"

int image_data_open(ImageData *d, const char *dataset, char *err, size_t errlen) {
    snprintf(d->dataset, sizeof d->dataset, "%s", dataset);
    if (!strcmp(dataset, "cifar10") || !strcmp(dataset, "mnist")) {
        int cifar = dataset[0] == 'c';
        int rc = cifar ? cifar10_load(&d->train, NULL, 1, err, errlen) : mnist_load(&d->train, NULL, 1, err, errlen);
        if (!rc) {
            rc = cifar ? cifar10_load(&d->test, NULL, 0, err, errlen) : mnist_load(&d->test, NULL, 0, err, errlen);
            if (rc) imageset_free(&d->train);
        }
        if (rc) return -1;
        /* the model is built for the training images: the test split must match them */
        if (d->test.C != d->train.C || d->test.H != d->train.H || d->test.W != d->train.W ||
            d->test.num_classes != d->train.num_classes) {
            snprintf(err, errlen, "%s: the test images are %dx%dx%d in %d classes, the training images %dx%dx%d in %d",
                     dataset, d->test.C, d->test.H, d->test.W, d->test.num_classes, d->train.C, d->train.H, d->train.W,
                     d->train.num_classes);
            imageset_free(&d->train);
            imageset_free(&d->test);
            return -1;
        }
        d->loaded = 1;
        d->C = d->train.C;
        d->H = d->train.H;
        d->W = d->train.W;
        d->num_classes = d->train.num_classes;
        return 0;
    }
    if (!strncmp(dataset, "folder:", 7)) {
        /* open the training split once to learn the shape and classes */
        LoaderOpts lo = loader_opts(1, 1);
        lo.image_size = d->image_size;
        lo.threads = 1;
        ImageLoader *l = NULL;
        if (image_loader_open(&l, dataset, 1, &lo, err, errlen)) return -1;
        d->C = l->C;
        d->H = l->H;
        d->W = l->W;
        d->num_classes = l->num_classes;
        image_loader_free(l);
        return 0;
    }
    snprintf(err, errlen, "unknown dataset '%s' (cifar10, mnist or folder:ROOT)", dataset);
    return -1;
}

void image_data_close(ImageData *d) {
    if (d->loaded) {
        imageset_free(&d->train);
        imageset_free(&d->test);
    }
}

typedef struct {
    ImageLoader *l;
    float *x;
    int *y;
} ImageIter;

static int ii_next(DataIter *it, Batch *b) {
    ImageIter *ii = it->impl;
    int n = image_loader_next(ii->l, ii->x, ii->y);
    if (n < 0) {
        snprintf(it->err, sizeof it->err, "%s", ii->l->err);
        return n;
    }
    memset(b, 0, sizeof *b);
    b->x = ii->x;
    b->y = ii->y;
    b->N = n;
    return n;
}

static LoaderPos ii_get_pos(const DataIter *it) { return image_loader_get_pos(((ImageIter *)it->impl)->l); }

static int ii_set_pos(DataIter *it, const LoaderPos *p) {
    ImageIter *ii = it->impl;
    int rc = image_loader_set_pos(ii->l, p);
    if (rc) snprintf(it->err, sizeof it->err, "%s", ii->l->err);
    return rc;
}

static void ii_free(DataIter *it) {
    ImageIter *ii = it->impl;
    image_loader_free(ii->l);
    free(ii->x);
    free(ii->y);
    free(ii);
    free(it);
}

DataIter *image_data_iter(Task *t, int split, int rank, int world, int batch, uint64_t seed, char *err,
                          size_t errlen) {
    ImageData *d = t->ctx;
    int train = split == SPLIT_TRAIN;
    LoaderOpts lo = loader_opts(batch, train);
    lo.seed = seed;
    lo.worker = rank;
    lo.nworkers = world;
    lo.shard = d->shard_fixed ? DATA_SHARD_FIXED : DATA_SHARD_EPOCH;
    lo.image_size = d->image_size;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    lo.threads = cpus / world > 1 ? (int)(cpus / world) : 1; /* folders: decode threads per worker */
    ImageLoader *l = NULL;
    int rc = d->loaded ? imageset_loader(&l, train ? &d->train : &d->test, 0, &lo, err, errlen)
                       : image_loader_open(&l, d->dataset, train, &lo, err, errlen);
    if (rc) return NULL;
    ImageIter *ii = callocCheck(1, sizeof *ii);
    ii->l = l;
    ii->x = mallocCheck((size_t)batch * (size_t)(l->C * l->H * l->W) * sizeof(float));
    ii->y = mallocCheck((size_t)batch * sizeof(int));
    DataIter *it = callocCheck(1, sizeof *it);
    it->next = ii_next;
    it->get_pos = ii_get_pos;
    it->set_pos = ii_set_pos;
    it->free = ii_free;
    it->steps_per_epoch = (long)l->steps_per_epoch;
    it->samples_per_step = batch;
    it->pos_per_step = batch;
    it->impl = ii;
    return it;
}
