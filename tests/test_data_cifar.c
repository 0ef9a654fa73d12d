/* CIFAR-10 reader and the in-memory image loader: tiny CIFAR-format files
 * written here, checked for content, normalization, augmentation, shuffling,
 * sharding, evaluation order, resume and malformed input; real-data checks
 * when $DATA_DIR/cifar-10-batches-bin exists. */
#include "datasets/cifar10.h"
#include "datasets/data.h"
#include "tests/test.h"
#include "tests/test_data.h"

#include <time.h>

#define NPER 8   /* records per training file */
#define NTEST 13 /* records in test_batch.bin */
#define NTRAIN (NPER * 5)

static uint8_t train_rec[NTRAIN][CIFAR10_RECORD];
static uint8_t test_rec[NTEST][CIFAR10_RECORD];

static const float MEAN[3] = {0.4914f, 0.4822f, 0.4465f};
static const float STD[3] = {0.2470f, 0.2435f, 0.2616f};

/* reference transform, written independently of the loader: pad the raw image
 * by 4 pixels of value 0, crop at (dy, dx), flip, then ToTensor + Normalize */
static void ref_sample(float *out, const uint8_t *rec, int dy, int dx, int flip) {
    static uint8_t padded[3][40][40];
    memset(padded, 0, sizeof padded);
    for (int c = 0; c < 3; c++)
        for (int i = 0; i < 32; i++)
            for (int j = 0; j < 32; j++) padded[c][i + 4][j + 4] = rec[1 + c * 1024 + i * 32 + j];
    for (int c = 0; c < 3; c++)
        for (int i = 0; i < 32; i++)
            for (int j = 0; j < 32; j++) {
                int jj = flip ? 31 - j : j;
                uint8_t u = padded[c][i + dy][jj + dx];
                out[c * 1024 + i * 32 + j] = ((float)u / 255.0f - MEAN[c]) / STD[c];
            }
}

static void ref_plain(float *out, const uint8_t *rec) {
    for (int c = 0; c < 3; c++)
        for (int k = 0; k < 1024; k++) out[c * 1024 + k] = ((float)rec[1 + c * 1024 + k] / 255.0f - MEAN[c]) / STD[c];
}

/* which training record and which (dy, dx, flip) produced x; -1 if none */
static int identify(const float *x, int *dy_out, int *dx_out, int *flip_out) {
    static float ref[3072];
    int found = -1;
    for (int idx = 0; idx < NTRAIN; idx++)
        for (int flip = 0; flip < 2; flip++)
            for (int dy = 0; dy <= 8; dy++)
                for (int dx = 0; dx <= 8; dx++) {
                    /* quick probe of the center pixel before the full comparison */
                    int jj = flip ? 31 - 16 : 16;
                    int si = 16 + dy - 4, sj = jj + dx - 4;
                    uint8_t u = train_rec[idx][1 + si * 32 + sj];
                    if (((float)u / 255.0f - MEAN[0]) / STD[0] != x[16 * 32 + 16]) continue;
                    ref_sample(ref, train_rec[idx], dy, dx, flip);
                    if (memcmp(ref, x, sizeof ref) == 0) {
                        if (found >= 0 && found != idx) return -2; /* ambiguous */
                        found = idx;
                        *dy_out = dy;
                        *dx_out = dx;
                        *flip_out = flip;
                    }
                }
    return found;
}

static void write_fixture(void) {
    tmkdir("cifar");
    for (int r = 0; r < NTRAIN; r++) {
        train_rec[r][0] = (uint8_t)(trand() % 10);
        for (int k = 1; k < CIFAR10_RECORD; k++) train_rec[r][k] = (uint8_t)trand();
    }
    for (int r = 0; r < NTEST; r++) {
        test_rec[r][0] = (uint8_t)(trand() % 10);
        for (int k = 1; k < CIFAR10_RECORD; k++) test_rec[r][k] = (uint8_t)trand();
    }
    char name[64];
    for (int f = 0; f < 5; f++) {
        snprintf(name, sizeof name, "cifar/data_batch_%d.bin", f + 1);
        write_file(tpath(name), train_rec[f * NPER], (size_t)NPER * CIFAR10_RECORD);
    }
    write_file(tpath("cifar/test_batch.bin"), test_rec, sizeof test_rec);
}

static void test_load(void) {
    char err[DATA_ERR_LEN];
    ImageSet s;
    int rc = cifar10_load(&s, tpath("cifar"), 1, err, sizeof err);
    CHECK(rc == 0, "load train: %s", err);
    if (rc) return;
    CHECK(s.n == NTRAIN && s.C == 3 && s.H == 32 && s.W == 32 && s.num_classes == 10, "train shape n=%lld",
          (long long)s.n);
    int ok = 1;
    for (int r = 0; r < NTRAIN; r++) {
        if (s.y[r] != train_rec[r][0]) ok = 0;
        if (memcmp(s.x + (size_t)r * 3072, train_rec[r] + 1, 3072) != 0) ok = 0;
    }
    CHECK(ok, "training records kept as uint8 in file order");
    imageset_free(&s);

    rc = cifar10_load(&s, tpath("cifar"), 0, err, sizeof err);
    CHECK(rc == 0 && s.n == NTEST, "load test: %s", err);
    if (rc == 0) imageset_free(&s);
}

static void test_eval_iterator(void) {
    char err[DATA_ERR_LEN];
    ImageSet *s = calloc(1, sizeof *s);
    int rc = cifar10_load(s, tpath("cifar"), 0, err, sizeof err);
    CHECK(rc == 0, "%s", err);
    if (rc) return;
    LoaderOpts o = loader_opts(5, 0);
    o.augment = 1; /* ignored in evaluation */
    ImageLoader *l;
    rc = imageset_loader(&l, s, 1, &o, err, sizeof err);
    CHECK(rc == 0, "%s", err);
    if (rc) return;
    CHECK(l->steps_per_epoch == 3 && l->samples_per_epoch == NTEST, "eval steps %lld", (long long)l->steps_per_epoch);
    static float x[5 * 3072], ref[5 * 3072];
    int y[5];
    for (int pass = 0; pass < 2; pass++) {
        int seen = 0, sizes[4] = {0};
        for (int b = 0; b < 4; b++) {
            int n = image_loader_next(l, x, y);
            sizes[b] = n;
            for (int k = 0; k < n; k++) {
                ref_plain(ref + k * 3072, test_rec[seen + k]);
                CHECK(y[k] == test_rec[seen + k][0], "eval label %d", seen + k);
            }
            if (n > 0) CHECK_CLOSE("eval batch (in order, normalized)", x, ref, (size_t)n * 3072, 0, 1e-6f);
            seen += n > 0 ? n : 0;
        }
        CHECK(sizes[0] == 5 && sizes[1] == 5 && sizes[2] == 3 && sizes[3] == 0, "eval batch sizes %d %d %d %d", sizes[0],
              sizes[1], sizes[2], sizes[3]);
        CHECK(l->epoch == pass + 1 && l->cursor == 0, "epoch advances after the pass");
    }
    /* evaluation split over 3 workers: contiguous ranges covering everything */
    image_loader_free(l);
    ImageSet t;
    cifar10_load(&t, tpath("cifar"), 0, err, sizeof err);
    int covered[NTEST] = {0};
    for (int w = 0; w < 3; w++) {
        LoaderOpts ow = loader_opts(4, 0);
        ow.worker = w;
        ow.nworkers = 3;
        rc = imageset_loader(&l, &t, 0, &ow, err, sizeof err);
        CHECK(rc == 0, "%s", err);
        int n, base = (int)(w * NTEST / 3);
        int off = 0;
        while ((n = image_loader_next(l, x, y)) > 0) {
            for (int k = 0; k < n; k++) {
                ref_plain(ref, test_rec[base + off + k]);
                if (memcmp(ref, x + k * 3072, 3072 * sizeof(float)) == 0) covered[base + off + k]++;
            }
            off += n;
        }
        image_loader_free(l);
    }
    int all = 1;
    for (int i = 0; i < NTEST; i++) all &= covered[i] == 1;
    CHECK(all, "eval over 3 workers covers each test sample exactly once");
    imageset_free(&t);
}

/* run a training loader over several epochs; returns per epoch the index list */
static void test_train_shards(int shard) {
    char err[DATA_ERR_LEN];
    ImageSet s;
    int rc = cifar10_load(&s, tpath("cifar"), 1, err, sizeof err);
    CHECK(rc == 0, "%s", err);
    if (rc) return;
    enum { W = 4, B = 3, EPOCHS = 20 };
    static float x[B * 3072];
    int y[B];
    int seen[EPOCHS][NTRAIN];
    memset(seen, 0, sizeof seen);
    int first_order[W][9];
    int order_changed = 0, bad_id = 0, bad_label = 0;
    int dyhist[9] = {0}, dxhist[9] = {0}, flips = 0, total = 0;
    int shard_of[NTRAIN];
    for (int i = 0; i < NTRAIN; i++) shard_of[i] = -1;
    int shard_conflict = 0;
    for (int w = 0; w < W; w++) {
        LoaderOpts o = loader_opts(B, 1);
        o.seed = 1234;
        o.worker = w;
        o.nworkers = W;
        o.shard = shard;
        ImageLoader *l;
        rc = imageset_loader(&l, &s, 0, &o, err, sizeof err);
        CHECK(rc == 0, "%s", err);
        if (rc) return;
        CHECK(l->samples_per_epoch == NTRAIN / W && l->steps_per_epoch == (NTRAIN / W) / B, "shard size %lld steps %lld",
              (long long)l->samples_per_epoch, (long long)l->steps_per_epoch);
        for (int e = 0; e < EPOCHS; e++) {
            int pos = 0, n;
            while ((n = image_loader_next(l, x, y)) > 0) {
                CHECK(n == B, "training batches are full");
                for (int k = 0; k < n; k++) {
                    int dy, dx, fl;
                    int idx = identify(x + k * 3072, &dy, &dx, &fl);
                    if (idx < 0) {
                        bad_id++;
                        continue;
                    }
                    if (y[k] != train_rec[idx][0]) bad_label++;
                    seen[e][idx]++;
                    if (e == 0) first_order[w][pos] = idx;
                    else if (e == 1 && first_order[w][pos] != idx) order_changed = 1;
                    pos++;
                    dyhist[dy]++;
                    dxhist[dx]++;
                    flips += fl;
                    total++;
                    if (shard == DATA_SHARD_FIXED) {
                        if (shard_of[idx] >= 0 && shard_of[idx] != w) shard_conflict = 1;
                        shard_of[idx] = w;
                    }
                }
            }
            CHECK(pos == 9, "samples per epoch per worker %d", pos);
        }
        image_loader_free(l);
    }
    CHECK(bad_id == 0, "every augmented sample is a crop/flip of exactly one training image (%d not)", bad_id);
    CHECK(bad_label == 0, "labels follow their images (%d wrong)", bad_label);
    int disjoint = 1, distinct_epochs = 0;
    for (int e = 0; e < EPOCHS; e++) {
        int cnt = 0;
        for (int i = 0; i < NTRAIN; i++) {
            if (seen[e][i] > 1) disjoint = 0;
            cnt += seen[e][i];
        }
        if (cnt != W * 9) disjoint = 0;
        if (e > 0 && memcmp(seen[e], seen[0], sizeof seen[0]) != 0) distinct_epochs++;
    }
    CHECK(disjoint, "shards of one epoch are disjoint (mode %d)", shard);
    CHECK(order_changed, "the order changes between epochs");
    if (shard == DATA_SHARD_FIXED) {
        CHECK(!shard_conflict, "fixed shards: a sample always goes to the same worker");
        int used = 0;
        for (int i = 0; i < NTRAIN; i++) used += shard_of[i] >= 0;
        CHECK(used == W * (NTRAIN / W), "fixed shards: %d of %d samples ever used", used, W * (NTRAIN / W));
    } else {
        CHECK(distinct_epochs > 0, "epoch sharding: the skipped samples vary between epochs");
    }
    /* augmentation draws: uniform offsets in [0, 8], flip with p = 1/2 */
    int ok = 1;
    for (int v = 0; v < 9; v++)
        if (dyhist[v] < total / 9 / 2 || dxhist[v] < total / 9 / 2) ok = 0;
    CHECK(ok, "crop offsets cover 0..8 evenly (n=%d)", total);
    CHECK(flips > total * 0.4 && flips < total * 0.6, "flip rate %d / %d", flips, total);
    imageset_free(&s);
}

static void test_augment_off_and_seeds(void) {
    char err[DATA_ERR_LEN];
    ImageSet s;
    cifar10_load(&s, tpath("cifar"), 1, err, sizeof err);
    static float x[8 * 3072], x2[8 * 3072], ref[3072];
    int y[8], y2[8];
    LoaderOpts o = loader_opts(8, 1);
    o.augment = 0;
    ImageLoader *l;
    imageset_loader(&l, &s, 0, &o, err, sizeof err);
    image_loader_next(l, x, y);
    int ok = 1;
    for (int k = 0; k < 8; k++) {
        int found = 0;
        for (int i = 0; i < NTRAIN && !found; i++) {
            ref_plain(ref, train_rec[i]);
            found = memcmp(ref, x + k * 3072, sizeof ref) == 0;
        }
        ok &= found;
    }
    CHECK(ok, "augment = 0: training samples are plain normalized images");
    image_loader_free(l);
    /* same seed -> same batch; other seed -> other batch */
    o.augment = -1;
    o.seed = 5;
    imageset_loader(&l, &s, 0, &o, err, sizeof err);
    image_loader_next(l, x, y);
    image_loader_free(l);
    imageset_loader(&l, &s, 0, &o, err, sizeof err);
    image_loader_next(l, x2, y2);
    image_loader_free(l);
    CHECK(memcmp(x, x2, sizeof x) == 0 && memcmp(y, y2, sizeof y) == 0, "same seed, same batch");
    o.seed = 6;
    imageset_loader(&l, &s, 0, &o, err, sizeof err);
    image_loader_next(l, x2, y2);
    image_loader_free(l);
    CHECK(memcmp(x, x2, sizeof x) != 0, "another seed, another batch");
    imageset_free(&s);
}

static void test_resume(void) {
    char err[DATA_ERR_LEN];
    ImageSet s;
    cifar10_load(&s, tpath("cifar"), 1, err, sizeof err);
    enum { B = 4 };
    LoaderOpts o = loader_opts(B, 1);
    o.seed = 99;
    o.worker = 1;
    o.nworkers = 2;
    ImageLoader *a, *b;
    imageset_loader(&a, &s, 0, &o, err, sizeof err);
    static float xa[12][B * 3072], xb[12][B * 3072];
    int ya[12][B], yb[12][B], na[12], nb[12];
    /* steps_per_epoch = 20/4 = 5: run 7 calls (crossing an epoch end), save */
    for (int i = 0; i < 7; i++) image_loader_next(a, xa[0], ya[0]);
    LoaderPos p = image_loader_get_pos(a);
    uint8_t rec[LOADER_POS_BYTES];
    loader_pos_pack(rec, &p);
    for (int i = 0; i < 12; i++) na[i] = image_loader_next(a, xa[i], ya[i]);

    imageset_loader(&b, &s, 0, &o, err, sizeof err);
    LoaderPos q;
    int rc = loader_pos_unpack(&q, rec, sizeof rec, err, sizeof err);
    CHECK(rc == 0, "unpack: %s", err);
    rc = image_loader_set_pos(b, &q);
    CHECK(rc == 0, "set_pos: %s", b->err);
    for (int i = 0; i < 12; i++) nb[i] = image_loader_next(b, xb[i], yb[i]);
    int same = 1;
    for (int i = 0; i < 12; i++) {
        if (na[i] != nb[i]) same = 0;
        if (na[i] > 0 && (memcmp(xa[i], xb[i], sizeof(float) * 3072 * na[i]) || memcmp(ya[i], yb[i], sizeof(int) * na[i])))
            same = 0;
    }
    CHECK(same, "resumed loader continues bit-exactly (12 calls across an epoch end)");
    CHECK(p.epoch == 1 && p.cursor == 4, "position after 7 calls: epoch %lld cursor %lld", (long long)p.epoch,
          (long long)p.cursor);
    image_loader_free(b);

    /* another configuration refuses the position */
    o.seed = 100;
    imageset_loader(&b, &s, 0, &o, err, sizeof err);
    rc = image_loader_set_pos(b, &q);
    CHECK(rc == -GC_ERR_STATE && strstr(b->err, "configuration"), "fingerprint mismatch refused: %s", b->err);
    image_loader_free(b);
    o.seed = 99;
    imageset_loader(&b, &s, 0, &o, err, sizeof err);
    LoaderPos bad = q;
    bad.cursor = 1000;
    rc = image_loader_set_pos(b, &bad);
    CHECK(rc == -GC_ERR_PARAM, "cursor out of range refused: %s", b->err);
    image_loader_free(b);
    image_loader_free(a);

    /* packed record validation */
    rec[0] = 'X';
    CHECK(loader_pos_unpack(&q, rec, sizeof rec, err, sizeof err) == -GC_ERR_MAGIC, "bad magic refused");
    CHECK(loader_pos_unpack(&q, rec, 10, err, sizeof err) == -GC_ERR_TRUNCATED, "short record refused");
    imageset_free(&s);
}

static void test_malformed(void) {
    char err[DATA_ERR_LEN];
    ImageSet s;
    /* missing directory */
    int rc = cifar10_load(&s, tpath("nope"), 1, err, sizeof err);
    CHECK(rc == -GC_ERR_IO && strstr(err, "nope/data_batch_1.bin") && strstr(err, "cifar-10-binary.tar.gz"),
          "missing file names the path and the download: %s", err);
    /* truncated test file */
    tmkdir("bad");
    write_file(tpath("bad/test_batch.bin"), test_rec, 2 * CIFAR10_RECORD + 5);
    rc = cifar10_load(&s, tpath("bad"), 0, err, sizeof err);
    CHECK(rc == -GC_ERR_TRUNCATED && strstr(err, "bad/test_batch.bin"), "truncated file: %s", err);
    write_file(tpath("bad/test_batch.bin"), test_rec, 0);
    rc = cifar10_load(&s, tpath("bad"), 0, err, sizeof err);
    CHECK(rc == -GC_ERR_TRUNCATED, "empty file: %s", err);
    /* label out of range */
    static uint8_t recs[3][CIFAR10_RECORD];
    memcpy(recs, test_rec, sizeof recs);
    recs[2][0] = 10;
    write_file(tpath("bad/test_batch.bin"), recs, sizeof recs);
    rc = cifar10_load(&s, tpath("bad"), 0, err, sizeof err);
    CHECK(rc == -GC_ERR_CORRUPT && strstr(err, "record 2"), "bad label: %s", err);
    /* a directory where a file should be */
    tmkdir("bad2");
    tmkdir("bad2/test_batch.bin");
    rc = cifar10_load(&s, tpath("bad2"), 0, err, sizeof err);
    CHECK(rc < 0, "directory instead of file: %s", err);
    /* options */
    cifar10_load(&s, tpath("cifar"), 1, err, sizeof err);
    ImageLoader *l;
    LoaderOpts o = loader_opts(11, 1);
    o.nworkers = 4; /* shard of 10 < batch 11 */
    rc = imageset_loader(&l, &s, 0, &o, err, sizeof err);
    CHECK(rc == -GC_ERR_PARAM && strstr(err, "fewer than one batch"), "batch > shard refused: %s", err);
    o = loader_opts(4, 1);
    o.worker = 4;
    o.nworkers = 4;
    rc = imageset_loader(&l, &s, 0, &o, err, sizeof err);
    CHECK(rc == -GC_ERR_PARAM, "worker out of range refused: %s", err);
    o = loader_opts(0, 1);
    rc = imageset_loader(&l, &s, 0, &o, err, sizeof err);
    CHECK(rc == -GC_ERR_PARAM, "batch 0 refused: %s", err);
    imageset_free(&s);
}

static void test_real_data(void) {
    const char *dir = real_data("cifar-10-batches-bin");
    if (!dir) return;
    char err[DATA_ERR_LEN];
    ImageSet s;
    int rc = cifar10_load(&s, NULL, 1, err, sizeof err);
    CHECK(rc == 0, "real CIFAR-10 train: %s", err);
    if (rc) return;
    CHECK(s.n == 50000, "50000 training images (%lld)", (long long)s.n);
    int hist[10] = {0};
    for (int64_t i = 0; i < s.n; i++) hist[s.y[i]]++;
    int ok = 1;
    for (int c = 0; c < 10; c++) ok &= hist[c] == 5000;
    CHECK(ok, "5000 training images per class");
    double mean[3], std[3];
    imageset_stats(mean, std, &s);
    printf("  CIFAR-10 training set: mean %.4f %.4f %.4f std %.4f %.4f %.4f\n", mean[0], mean[1], mean[2], std[0],
           std[1], std[2]);
    for (int c = 0; c < 3; c++)
        CHECK(fabs(mean[c] - cifar10_mean[c]) < 1e-3 && fabs(std[c] - cifar10_std[c]) < 1e-3,
              "channel %d statistics match the constants", c);
    /* one training step of 4 workers: a full batch each */
    LoaderOpts o = loader_opts(128, 1);
    o.nworkers = 4;
    ImageLoader *l;
    rc = imageset_loader(&l, &s, 0, &o, err, sizeof err);
    CHECK(rc == 0 && l->steps_per_epoch == 12500 / 128, "real loader: %lld steps", (long long)l->steps_per_epoch);
    float *x = malloc(sizeof(float) * 128 * 3072);
    int y[128];
    CHECK(image_loader_next(l, x, y) == 128, "real batch");
    image_loader_free(l);
    /* one augmented epoch on one worker, timed */
    o = loader_opts(128, 1);
    imageset_loader(&l, &s, 0, &o, err, sizeof err);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int n, total = 0;
    while ((n = image_loader_next(l, x, y)) > 0) total += n;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double dt = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9;
    printf("  CIFAR-10 augmented epoch (batch 128, 1 worker): %d images in %.3f s, %.0f images/s\n", total, dt,
           total / dt);
    CHECK(total == 390 * 128, "390 full batches per epoch (%d images)", total);
    image_loader_free(l);
    free(x);
    imageset_free(&s);
    rc = cifar10_load(&s, NULL, 0, err, sizeof err);
    CHECK(rc == 0 && s.n == 10000, "10000 test images: %s", err);
    if (rc == 0) imageset_free(&s);
}

int main(void) {
    tmpdir_make();
    write_fixture();
    test_load();
    test_eval_iterator();
    test_train_shards(DATA_SHARD_EPOCH);
    test_train_shards(DATA_SHARD_FIXED);
    test_augment_off_and_seeds();
    test_resume();
    test_malformed();
    test_real_data();
    tmpdir_remove();
    TEST_END();
}
