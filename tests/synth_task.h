/* A tiny image-classification task for trainer-level tests: a ResNet-8 on
 * synthetic 3x16x16 images whose class shifts the pixel values, made here in
 * memory (no dataset files needed). */
#ifndef GC_TEST_SYNTH_TASK_H
#define GC_TEST_SYNTH_TASK_H

#include <stdlib.h>
#include <string.h>

#include "common/rng.h"
#include "examples/image_task.h"
#include "examples/trainer.h"
#include "nn/resnet.h"

typedef struct {
    ImageData data; /* first: image_data_iter reads it */
    ResNetConfig cfg;
} SynthCtx;

static Model *synth_model(Task *t, int rank, int max_batch) {
    (void)rank;
    return resnet_cifar_create(&((SynthCtx *)t->ctx)->cfg, max_batch);
}

static void synth_images(ImageSet *s, int n, uint64_t seed) {
    memset(s, 0, sizeof *s);
    s->n = n;
    s->C = 3;
    s->H = s->W = 16;
    s->num_classes = 10;
    s->x = malloc((size_t)n * 768);
    s->y = malloc((size_t)n);
    Rng r;
    rng_init(&r, seed, 0);
    for (int i = 0; i < n; i++) {
        s->y[i] = (uint8_t)(i % 10);
        for (int k = 0; k < 768; k++) s->x[(size_t)i * 768 + k] = (uint8_t)((rng_u64(&r) & 63) + 20 * s->y[i]);
    }
    for (int c = 0; c < 3; c++) {
        s->mean[c] = 0.4f;
        s->std[c] = 0.25f;
    }
    s->pad = 2;
    s->flip = 1;
    snprintf(s->name, sizeof s->name, "synthetic");
}

/* ntrain/ntest synthetic images, ResNet-8, model and data seeds `seed` */
static void synth_task(Task *t, SynthCtx *c, int ntrain, int ntest, uint64_t seed) {
    memset(c, 0, sizeof *c);
    synth_images(&c->data.train, ntrain, seed * 2 + 11);
    synth_images(&c->data.test, ntest, seed * 2 + 12);
    c->data.loaded = 1;
    c->cfg = resnet_cifar_config(8);
    c->cfg.in_h = c->cfg.in_w = 16;
    c->cfg.seed = seed;
    memset(t, 0, sizeof *t);
    t->name = "resnet8 synthetic";
    t->model_new = synth_model;
    t->data_new = image_data_iter;
    t->ctx = c;
}

/* train_run on synth_task's images; argc/argv NULL for a run without MPI's */
static inline int synth_train(TrainOpts *o, int ntrain, int ntest, uint64_t seed, int *argc, char ***argv) {
    SynthCtx c;
    Task t;
    synth_task(&t, &c, ntrain, ntest, seed);
    int n = 0;
    char **v = NULL;
    int rc = train_run(o, &t, argc ? argc : &n, argv ? argv : &v);
    image_data_close(&c.data);
    return rc;
}

#endif
