/* MNIST IDX reader: gzipped and plain IDX files written here, checked for
 * content and normalization, then malformed variants (magic, truncation,
 * trailing bytes, count mismatch, labels, corrupt gzip); real-data checks when
 * $DATA_DIR/mnist exists. */
#include <zlib.h>

#include "datasets/data.h"
#include "datasets/mnist.h"
#include "examples/image_task.h"
#include "tests/test.h"
#include "tests/test_data.h"

#define NTR 17
#define NTE 5

static uint8_t tr_img[NTR][28 * 28], tr_lab[NTR], te_img[NTE][28 * 28], te_lab[NTE];

static size_t idx_bytes(uint8_t *out, int ndim, const uint32_t *dims, const uint8_t *data, size_t ndata) {
    out[0] = out[1] = 0;
    out[2] = 0x08;
    out[3] = (uint8_t)ndim;
    for (int d = 0; d < ndim; d++) {
        out[4 + 4 * d] = (uint8_t)(dims[d] >> 24);
        out[5 + 4 * d] = (uint8_t)(dims[d] >> 16);
        out[6 + 4 * d] = (uint8_t)(dims[d] >> 8);
        out[7 + 4 * d] = (uint8_t)dims[d];
    }
    memcpy(out + 4 + 4 * ndim, data, ndata);
    return 4 + 4 * (size_t)ndim + ndata;
}

static void write_gz(const char *path, const void *data, size_t n) {
    gzFile g = gzopen(path, "wb");
    if (!g || gzwrite(g, data, (unsigned)n) != (int)n || gzclose(g) != Z_OK) {
        fprintf(stderr, "cannot write %s\n", path);
        exit(1);
    }
}

static uint8_t fbuf[16 + NTR * 28 * 28 + 64];

/* writes dir/<pre>-images-idx3-ubyte[.gz] and labels with n images (label count nl) */
static void write_set(const char *dir, const char *pre, int gz, const uint8_t *img, int n, const uint8_t *lab, int nl) {
    char name[256];
    uint32_t d[3] = {(uint32_t)n, 28, 28};
    size_t len = idx_bytes(fbuf, 3, d, img, (size_t)n * 784);
    snprintf(name, sizeof name, "%s/%s-images-idx3-ubyte%s", dir, pre, gz ? ".gz" : "");
    if (gz) write_gz(tpath(name), fbuf, len);
    else write_file(tpath(name), fbuf, len);
    uint32_t dl[1] = {(uint32_t)nl};
    len = idx_bytes(fbuf, 1, dl, lab, (size_t)nl);
    snprintf(name, sizeof name, "%s/%s-labels-idx1-ubyte%s", dir, pre, gz ? ".gz" : "");
    if (gz) write_gz(tpath(name), fbuf, len);
    else write_file(tpath(name), fbuf, len);
}

static void test_good(void) {
    tmkdir("mnist");
    for (int i = 0; i < NTR; i++) {
        tr_lab[i] = (uint8_t)(trand() % 10);
        for (int k = 0; k < 784; k++) tr_img[i][k] = (uint8_t)trand();
    }
    for (int i = 0; i < NTE; i++) {
        te_lab[i] = (uint8_t)(trand() % 10);
        for (int k = 0; k < 784; k++) te_img[i][k] = (uint8_t)trand();
    }
    write_set("mnist", "train", 1, tr_img[0], NTR, tr_lab, NTR); /* gzipped */
    write_set("mnist", "t10k", 0, te_img[0], NTE, te_lab, NTE);  /* plain */

    char err[DATA_ERR_LEN];
    ImageSet s;
    int rc = mnist_load(&s, tpath("mnist"), 1, err, sizeof err);
    CHECK(rc == 0, "gzipped train: %s", err);
    if (rc) return;
    CHECK(s.n == NTR && s.C == 1 && s.H == 28 && s.W == 28 && s.num_classes == 10, "shape");
    CHECK(memcmp(s.x, tr_img, sizeof tr_img) == 0 && memcmp(s.y, tr_lab, NTR) == 0, "gzipped content");

    /* training loader over 2 workers: plain normalized images, disjoint, no augmentation */
    static float x[4 * 784], ref[784];
    int y[4];
    int seen[NTR] = {0}, bad = 0;
    for (int w = 0; w < 2; w++) {
        LoaderOpts o = loader_opts(4, 1);
        o.worker = w;
        o.nworkers = 2;
        o.seed = 3;
        ImageLoader *l;
        rc = imageset_loader(&l, &s, 0, &o, err, sizeof err);
        CHECK(rc == 0 && l->steps_per_epoch == 2, "loader: %s", err);
        int n;
        while ((n = image_loader_next(l, x, y)) > 0) {
            for (int k = 0; k < n; k++) {
                int found = -1;
                for (int i = 0; i < NTR && found < 0; i++) {
                    for (int j = 0; j < 784; j++) ref[j] = ((float)tr_img[i][j] / 255.0f - 0.1307f) / 0.3081f;
                    if (memcmp(ref, x + k * 784, sizeof ref) == 0) found = i;
                }
                if (found < 0 || tr_lab[found] != y[k]) bad++;
                else seen[found]++;
            }
        }
        image_loader_free(l);
    }
    int twice = 0, count = 0;
    for (int i = 0; i < NTR; i++) {
        twice += seen[i] > 1;
        count += seen[i];
    }
    CHECK(bad == 0, "training samples are normalized images with their labels (%d bad)", bad);
    CHECK(twice == 0 && count == 16, "2 workers x 2 steps x 4 distinct samples (%d, %d repeated)", count, twice);
    imageset_free(&s);

    rc = mnist_load(&s, tpath("mnist"), 0, err, sizeof err);
    CHECK(rc == 0, "plain t10k: %s", err);
    if (rc) return;
    CHECK(s.n == NTE && memcmp(s.x, te_img, sizeof te_img) == 0 && memcmp(s.y, te_lab, NTE) == 0, "plain content");
    LoaderOpts o = loader_opts(4, 0);
    ImageLoader *l;
    imageset_loader(&l, &s, 0, &o, err, sizeof err);
    static float want[NTE * 784];
    for (int i = 0; i < NTE; i++)
        for (int j = 0; j < 784; j++) want[i * 784 + j] = ((float)te_img[i][j] / 255.0f - 0.1307f) / 0.3081f;
    int n1 = image_loader_next(l, x, y);
    CHECK(n1 == 4, "first eval batch");
    CHECK_CLOSE("mnist eval batch 1", x, want, 4 * 784, 0, 1e-6f);
    int n2 = image_loader_next(l, x, y);
    CHECK(n2 == 1 && y[0] == te_lab[4], "last partial eval batch");
    CHECK_CLOSE("mnist eval batch 2", x, want + 4 * 784, 784, 0, 1e-6f);
    CHECK(image_loader_next(l, x, y) == 0, "end of the evaluation epoch");
    image_loader_free(l);
    imageset_free(&s);
}

static void expect_fail(const char *dir, int train, int want_rc, const char *want_text, const char *what) {
    char err[DATA_ERR_LEN] = "";
    ImageSet s;
    int rc = mnist_load(&s, tpath(dir), train, err, sizeof err);
    CHECK(rc == want_rc && strstr(err, want_text) != NULL, "%s: rc %d (want %d): %s", what, rc, want_rc, err);
    if (rc == 0) imageset_free(&s);
}

static void test_malformed(void) {
    char err[DATA_ERR_LEN];
    /* missing directory */
    expect_fail("none", 1, -GC_ERR_IO, "train-images-idx3-ubyte.gz", "missing files");
    expect_fail("none", 1, -GC_ERR_IO, "yann.lecun.com", "missing files hint");

    /* label count differs */
    tmkdir("m1");
    write_set("m1", "train", 0, tr_img[0], NTR, tr_lab, NTR - 1);
    expect_fail("m1", 1, -GC_ERR_COUNT, "labels", "count mismatch");

    /* truncated image data: header says NTR, data for NTR-1 */
    tmkdir("m2");
    uint32_t d[3] = {NTR, 28, 28};
    size_t len = idx_bytes(fbuf, 3, d, tr_img[0], (size_t)NTR * 784);
    write_file(tpath("m2/t10k-images-idx3-ubyte"), fbuf, len - 784);
    uint32_t dl[1] = {NTR};
    static uint8_t lbuf[64];
    size_t llen = idx_bytes(lbuf, 1, dl, tr_lab, NTR);
    write_file(tpath("m2/t10k-labels-idx1-ubyte"), lbuf, llen);
    expect_fail("m2", 0, -GC_ERR_TRUNCATED, "truncated", "truncated images");
    /* trailing bytes */
    write_file(tpath("m2/t10k-images-idx3-ubyte"), fbuf, len); /* fbuf has room */
    fbuf[len] = 0;
    write_file(tpath("m2/t10k-images-idx3-ubyte"), fbuf, len + 1);
    expect_fail("m2", 0, -GC_ERR_OVERSIZED, "trailing", "trailing bytes");
    /* wrong magic: labels file where the images belong */
    write_file(tpath("m2/t10k-images-idx3-ubyte"), lbuf, llen);
    expect_fail("m2", 0, -GC_ERR_MAGIC, "0x00000801", "label file as image file");
    /* header shorter than its dims */
    write_file(tpath("m2/t10k-images-idx3-ubyte"), fbuf, 9);
    expect_fail("m2", 0, -GC_ERR_TRUNCATED, "header", "short header");
    write_file(tpath("m2/t10k-images-idx3-ubyte"), fbuf, 2);
    expect_fail("m2", 0, -GC_ERR_TRUNCATED, "magic", "shorter than the magic");
    /* impossible dims */
    d[1] = 0;
    len = idx_bytes(fbuf, 3, d, tr_img[0], 0);
    write_file(tpath("m2/t10k-images-idx3-ubyte"), fbuf, len);
    expect_fail("m2", 0, -GC_ERR_CORRUPT, "dimension 1", "zero dimension");
    /* label out of range */
    write_set("m2", "t10k", 0, tr_img[0], 3, tr_lab, 3);
    uint8_t lab3[3] = {1, 2, 11};
    llen = idx_bytes(lbuf, 1, (uint32_t[]){3}, lab3, 3);
    write_file(tpath("m2/t10k-labels-idx1-ubyte"), lbuf, llen);
    expect_fail("m2", 0, -GC_ERR_CORRUPT, "label 11", "label out of range");

    /* corrupt and truncated gzip */
    tmkdir("m3");
    write_set("m3", "train", 1, tr_img[0], NTR, tr_lab, NTR);
    FILE *f = fopen(tpath("m3/train-images-idx3-ubyte.gz"), "rb");
    static uint8_t gz[1 << 16];
    size_t gzlen = fread(gz, 1, sizeof gz, f);
    fclose(f);
    write_file(tpath("m3/train-images-idx3-ubyte.gz"), gz, gzlen / 2);
    expect_fail("m3", 1, -GC_ERR_CORRUPT, "train-images-idx3-ubyte.gz", "truncated gzip");
    for (size_t i = 20; i < gzlen - 20; i += 7) gz[i] ^= 0x5A;
    write_file(tpath("m3/train-images-idx3-ubyte.gz"), gz, gzlen);
    ImageSet s;
    int rc = mnist_load(&s, tpath("m3"), 1, err, sizeof err);
    CHECK(rc < 0, "corrupted gzip refused: %s", err);
    if (rc == 0) imageset_free(&s);
}

/* random truncations and byte flips of a valid IDX buffer: the parser either
 * refuses it or returns data that lies inside the buffer */
static void test_parse_mutations(void) {
    static uint8_t good[16 + 4 * 784], buf[sizeof good];
    uint32_t d[3] = {4, 28, 28};
    size_t len = idx_bytes(good, 3, d, tr_img[0], 4 * 784);
    char err[DATA_ERR_LEN];
    int inside = 1, accepted = 0;
    for (int t = 0; t < 3000; t++) {
        memcpy(buf, good, len);
        size_t n = len;
        int kind = (int)(trand() % 3);
        if (kind == 0) n = trand() % (len + 1);
        else for (int f = 0; f < 1 + (int)(trand() % 4); f++) buf[trand() % 16] ^= (uint8_t)(1u << (trand() % 8));
        if (kind == 2) n = trand() % (len + 1);
        const uint8_t *data;
        uint32_t dims[3];
        int ndim = (trand() & 1) ? 3 : 1;
        if (mnist_parse_idx(&data, dims, buf, n, ndim, "mutant", err, sizeof err) == 0) {
            accepted++;
            uint64_t total = 1;
            for (int k = 0; k < ndim; k++) total *= dims[k];
            if (data < buf || (size_t)(data - buf) + total != n) inside = 0;
        }
    }
    CHECK(inside, "accepted mutants describe exactly their bytes (%d accepted)", accepted);
}

static void test_real_data(void) {
    if (!real_data("mnist")) return;
    char err[DATA_ERR_LEN];
    ImageSet s;
    int rc = mnist_load(&s, NULL, 1, err, sizeof err);
    CHECK(rc == 0 && s.n == 60000 && s.H == 28 && s.W == 28, "real MNIST train (60000): %s", err);
    if (rc) return;
    double mean, std;
    imageset_stats(&mean, &std, &s);
    printf("  MNIST training set: mean %.4f std %.4f\n", mean, std);
    CHECK(fabs(mean - MNIST_MEAN) < 1e-3 && fabs(std - MNIST_STD) < 1e-3, "statistics match the constants");
    int hist[10] = {0};
    for (int64_t i = 0; i < s.n; i++) hist[s.y[i]]++;
    CHECK(hist[1] == 6742 && hist[5] == 5421, "class counts (1: %d, 5: %d)", hist[1], hist[5]);
    imageset_free(&s);
    rc = mnist_load(&s, NULL, 0, err, sizeof err);
    CHECK(rc == 0 && s.n == 10000, "real MNIST test (10000): %s", err);
    if (rc == 0) imageset_free(&s);
}

/* the trainers' image_data_open: a test split whose images have another shape
 * than the training split's is refused (the model is built for the training
 * images; it used to read past the test images' buffer) */
static void test_split_shapes(void) {
    char err[512], *old = getenv("DATA_DIR") ? strdup(getenv("DATA_DIR")) : NULL;
    ImageData d;
    memset(&d, 0, sizeof d);
    setenv("DATA_DIR", tpath(""), 1); /* test_good's mnist/: both splits 28x28 */
    int rc = image_data_open(&d, "mnist", err, sizeof err);
    CHECK(rc == 0 && d.C == 1 && d.H == 28 && d.W == 28, "matching splits open: %s", err);
    if (rc == 0) image_data_close(&d);
    tmkdir("mm");
    tmkdir("mm/mnist");
    write_set("mm/mnist", "train", 0, tr_img[0], NTR, tr_lab, NTR);
    uint32_t dims[3] = {NTE, 20, 20}, dl[1] = {NTE};
    write_file(tpath("mm/mnist/t10k-images-idx3-ubyte"), fbuf, idx_bytes(fbuf, 3, dims, te_img[0], NTE * 400));
    write_file(tpath("mm/mnist/t10k-labels-idx1-ubyte"), fbuf, idx_bytes(fbuf, 1, dl, te_lab, NTE));
    setenv("DATA_DIR", tpath("mm"), 1);
    memset(&d, 0, sizeof d);
    rc = image_data_open(&d, "mnist", err, sizeof err);
    CHECK(rc == -1 && strstr(err, "test images are 1x20x20") && strstr(err, "training images 1x28x28"),
          "a 20x20 test split beside 28x28 training images is refused: %s", err);
    if (old) setenv("DATA_DIR", old, 1);
    else unsetenv("DATA_DIR");
    free(old);
}

int main(void) {
    tmpdir_make();
    test_good();
    test_malformed();
    test_parse_mutations();
    test_split_shapes();
    test_real_data();
    tmpdir_remove();
    TEST_END();
}
