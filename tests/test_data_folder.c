/* Image folders: the antialiased bilinear resize against PyTorch
 * (tests/fixtures/data_ref.bin), random-resized-crop and center-crop geometry,
 * folder scanning (class order, extensions, nesting), the threaded loader
 * (output independent of thread count and prefetch depth, disjoint shards,
 * resume), malformed input, and image_loader_open. Images are written here
 * (PNG and JPEG with stb_image_write, BMP/PPM by hand). */
#include "datasets/data.h"
#include "datasets/decode.h"
#include "datasets/imagefolder.h"
#include "datasets/transform.h"
#include "common/rng.h"
#include "tests/test.h"
#include "tests/test_data.h"

#include <time.h>

#include <stb/stb_image.h>
#define STB_IMAGE_WRITE_IMPLEMENTATION
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wunused-parameter"
#pragma GCC diagnostic ignored "-Wsign-compare"
#pragma GCC diagnostic ignored "-Wimplicit-fallthrough"
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#include <stb/stb_image_write.h>
#pragma GCC diagnostic pop

static void test_resize_reference(void) {
    const int *count = fix_get("rs.count", 0, NULL);
    for (int k = 0; k < *count; k++) {
        char name[32];
        snprintf(name, sizeof name, "rs%d.geom", k);
        const int *g = fix_get(name, 0, NULL);
        snprintf(name, sizeof name, "rs%d.img", k);
        const uint8_t *img = fix_get(name, 2, NULL);
        snprintf(name, sizeof name, "rs%d.out", k);
        uint32_t n;
        const float *want = fix_get(name, 1, &n);
        int H = g[0], W = g[1], C = g[2];
        int oh = g[11], ow = g[12];
        float *got = malloc(sizeof(float) * (size_t)C * oh * ow);
        int rc = resize_crop_normalize(got, img, H, W, C, g[3], g[4], g[5], g[6], g[7], g[8], g[9], g[10], oh, ow, g[13],
                                       imagenet_mean, imagenet_std);
        CHECK(rc == 0 && n == (uint32_t)(C * oh * ow), "resize case %d", k);
        char what[96];
        snprintf(what, sizeof what, "resize %dx%d crop %dx%d -> %dx%d win %dx%d%s", H, W, g[5], g[6], g[7], g[8], oh, ow,
                 g[13] ? " flip" : "");
        if (rc == 0) CHECK_CLOSE(what, got, want, n, 1e-5f, 2e-5f);
        free(got);
    }
    float o[3];
    uint8_t px[3] = {1, 2, 3};
    CHECK(resize_crop_normalize(o, px, 1, 1, 3, 0, 0, 2, 1, 1, 1, 0, 0, 1, 1, 0, imagenet_mean, imagenet_std) ==
              -GC_ERR_PARAM,
          "crop outside the image refused");
    CHECK(resize_crop_normalize(o, px, 1, 1, 3, 0, 0, 1, 1, 1, 1, 0, 1, 1, 1, 0, imagenet_mean, imagenet_std) ==
              -GC_ERR_PARAM,
          "window outside the output refused");
}

static void test_geometry(void) {
    /* torchvision Resize(256) + CenterCrop(224) on 500x375 (W x H): 341x256, left round(58.5) = 58 (half-even) */
    int OH, OW, top, left;
    CHECK(eval_short_side(224) == 256 && eval_short_side(32) == 37, "short side 256/224 scaling");
    eval_resize_params(&OH, &OW, &top, &left, 375, 500, 256, 224);
    CHECK(OH == 256 && OW == 341 && top == 16 && left == 58, "eval geometry %dx%d at %d,%d", OH, OW, top, left);
    eval_resize_params(&OH, &OW, &top, &left, 500, 333, 256, 224);
    CHECK(OW == 256 && OH == 384 && top == 80 && left == 16, "portrait eval geometry %dx%d at %d,%d", OH, OW, top, left);

    /* random-resized-crop: always inside, area and aspect in range (up to rounding), varied */
    int inside = 1, in_range = 0, tries = 0, distinct = 0, prev_h = -1;
    double min_frac = 1, max_frac = 0;
    for (int t = 0; t < 2000; t++) {
        int H = 50 + (int)(trand() % 300), W = 50 + (int)(trand() % 300);
        int y0, x0, h, w;
        random_resized_crop_params(&y0, &x0, &h, &w, H, W, rng_hash64(77, (uint64_t)t));
        if (!(h >= 1 && w >= 1 && y0 >= 0 && x0 >= 0 && y0 + h <= H && x0 + w <= W)) inside = 0;
        double frac = (double)h * w / ((double)H * W), ratio = (double)w / h;
        if (frac > 0.07 && frac < 1.01 && ratio > 0.70 && ratio < 1.40) in_range++;
        if (frac < min_frac) min_frac = frac;
        if (frac > max_frac) max_frac = frac;
        distinct += h != prev_h;
        prev_h = h;
        tries++;
    }
    CHECK(inside, "crops inside the image");
    CHECK(in_range == tries, "area fraction in [0.08, 1] and ratio in [3/4, 4/3] (%d of %d)", in_range, tries);
    CHECK(min_frac < 0.12 && max_frac > 0.85 && distinct > tries / 2, "crops span the scale range (%.3f..%.3f)", min_frac,
          max_frac);
    /* fallback for extreme shapes: 1 x 100 -> ratio clamped to 4/3: h = 1, w = round(4/3) = 1, centered */
    int y0, x0, h, w;
    random_resized_crop_params(&y0, &x0, &h, &w, 1, 100, 5);
    CHECK(h == 1 && w == 1 && y0 == 0 && x0 == 49, "wide fallback %d,%d %dx%d", y0, x0, h, w);
    random_resized_crop_params(&y0, &x0, &h, &w, 100, 2, 5);
    CHECK(w == 2 && h == 3 && x0 == 0 && y0 == 48, "tall fallback %d,%d %dx%d", y0, x0, h, w);
}

/* ---------------------------------------------------------------- a tiny folder */

enum { NCLS = 3 };
static const char *cls_names[NCLS] = {"a_cls", "b_cls", "c_cls"};

static void write_bmp(const char *path, const uint8_t *rgb, int w, int h) {
    int row = (w * 3 + 3) & ~3, size = 54 + row * h;
    uint8_t *b = calloc(1, (size_t)size);
    b[0] = 'B';
    b[1] = 'M';
    memcpy(b + 2, &size, 4);
    b[10] = 54;
    b[14] = 40;
    memcpy(b + 18, &w, 4);
    memcpy(b + 22, &h, 4);
    b[26] = 1;
    b[28] = 24;
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            for (int c = 0; c < 3; c++) b[54 + (h - 1 - y) * row + x * 3 + (2 - c)] = rgb[(y * w + x) * 3 + c];
    write_file(path, b, (size_t)size);
    free(b);
}

static void write_ppm(const char *path, const uint8_t *rgb, int w, int h) {
    char hdr[64];
    int n = snprintf(hdr, sizeof hdr, "P6\n%d %d\n255\n", w, h);
    uint8_t *b = malloc((size_t)n + (size_t)w * h * 3);
    memcpy(b, hdr, (size_t)n);
    memcpy(b + n, rgb, (size_t)w * h * 3);
    write_file(path, b, (size_t)n + (size_t)w * h * 3);
    free(b);
}

/* image k of a folder: textured, or a solid color that identifies it */
static void make_image(uint8_t *rgb, int w, int h, int k, int solid) {
    for (int i = 0; i < w * h; i++)
        for (int c = 0; c < 3; c++)
            rgb[i * 3 + c] = solid ? (uint8_t)(k * 7 + c * 50 + 3) : (uint8_t)trand();
}

/* ROOT/train: 3 classes with png / bmp / ppm / jpg and a nested folder; ROOT/val: 2 classes */
static void write_folder(const char *root, int per_class, int solid) {
    char p[512];
    snprintf(p, sizeof p, "%s", root);
    tmkdir(p);
    const char *splits[2] = {"train", "val"};
    int k = 0;
    uint8_t *rgb = malloc(64 * 64 * 3);
    for (int sp = 0; sp < 2; sp++) {
        snprintf(p, sizeof p, "%s/%s", root, splits[sp]);
        tmkdir(p);
        for (int c = NCLS - 1; c >= 0; c--) { /* created out of order on purpose */
            if (sp == 1 && c == 1) continue;
            snprintf(p, sizeof p, "%s/%s/%s", root, splits[sp], cls_names[c]);
            tmkdir(p);
            int n = sp == 0 ? per_class : 2;
            for (int i = 0; i < n; i++, k++) {
                int w = 20 + (int)(trand() % 40), h = 20 + (int)(trand() % 40);
                make_image(rgb, w, h, k, solid);
                char f[600];
                switch (i % 4) {
                case 0:
                    snprintf(f, sizeof f, "%s/%s/%s/img%02d.png", root, splits[sp], cls_names[c], i);
                    stbi_write_png(tpath(f), w, h, 3, rgb, w * 3);
                    break;
                case 1:
                    snprintf(f, sizeof f, "%s/%s/%s/img%02d.BMP", root, splits[sp], cls_names[c], i);
                    write_bmp(tpath(f), rgb, w, h);
                    break;
                case 2:
                    snprintf(f, sizeof f, "%s/%s/%s/img%02d.ppm", root, splits[sp], cls_names[c], i);
                    write_ppm(tpath(f), rgb, w, h);
                    break;
                default:
                    snprintf(f, sizeof f, "%s/%s/%s/sub", root, splits[sp], cls_names[c]);
                    mkdir(tpath(f), 0755);
                    snprintf(f, sizeof f, "%s/%s/%s/sub/img%02d.jpg", root, splits[sp], cls_names[c], i);
                    stbi_write_jpg(tpath(f), w, h, 3, rgb, 95);
                    break;
                }
            }
            snprintf(p, sizeof p, "%s/%s/%s/notes.txt", root, splits[sp], cls_names[c]);
            write_file(tpath(p), "not an image", 12);
            snprintf(p, sizeof p, "%s/%s/%s/.hidden.png", root, splits[sp], cls_names[c]);
            write_file(tpath(p), "junk", 4);
        }
    }
    free(rgb);
}

static void test_scan(void) {
    write_folder("f1", 5, 0);
    char err[DATA_ERR_LEN];
    FolderSet s;
    int rc = folderset_scan(&s, tpath("f1"), 1, err, sizeof err);
    CHECK(rc == 0, "scan train: %s", err);
    if (rc) return;
    CHECK(s.num_classes == 3 && strcmp(s.classes[0], "a_cls") == 0 && strcmp(s.classes[2], "c_cls") == 0,
          "classes sorted by name");
    CHECK(s.n == 15, "15 training images (txt and hidden files skipped): %lld", (long long)s.n);
    int ok = 1;
    for (int64_t i = 0; i < s.n; i++) {
        const char *p = folderset_path(&s, i);
        ok &= strstr(p, cls_names[s.labels[i]]) != NULL;
        if (i > 0) ok &= s.labels[i] >= s.labels[i - 1];
    }
    CHECK(ok, "labels follow the class directories, grouped by class");
    /* torchvision order within a class: files of the class dir sorted, then sub/ */
    CHECK(strstr(folderset_path(&s, 0), "a_cls/img00.png") && strstr(folderset_path(&s, 1), "a_cls/img01.BMP") &&
              strstr(folderset_path(&s, 3), "a_cls/img04.png") && strstr(folderset_path(&s, 4), "a_cls/sub/img03.jpg"),
          "file order %s %s", folderset_path(&s, 3), folderset_path(&s, 4));
    folderset_free(&s);
    rc = folderset_scan(&s, tpath("f1"), 0, err, sizeof err);
    CHECK(rc == 0 && s.n == 4 && s.num_classes == 3 && s.labels[0] == 0 && s.labels[3] == 2,
          "val uses the training classes: %s", err);
    if (rc == 0) folderset_free(&s);
}

/* expected eval sample: decode with stb_image, then the eval geometry */
static void expected_eval(float *out, const char *path, int S) {
    int w, h, comp;
    uint8_t *img = stbi_load(path, &w, &h, &comp, 3);
    if (!img) {
        memset(out, 0, sizeof(float) * 3 * S * S);
        return;
    }
    int OH, OW, top, left;
    eval_resize_params(&OH, &OW, &top, &left, h, w, eval_short_side(S), S);
    resize_crop_normalize(out, img, h, w, 3, 0, 0, h, w, OH, OW, top, left, S, S, 0, imagenet_mean, imagenet_std);
    stbi_image_free(img);
}

static void test_eval_loader(void) {
    char err[DATA_ERR_LEN];
    ImageLoader *l;
    LoaderOpts o = loader_opts(3, 0);
    o.image_size = 24;
    o.threads = 2;
    int rc = image_loader_open(&l, "folder:" "PLACEHOLDER", 0, &o, err, sizeof err);
    CHECK(rc < 0 && strstr(err, "PLACEHOLDER/train"), "missing root named: %s", err);
    char spec[600];
    snprintf(spec, sizeof spec, "folder:%s", tpath("f1"));
    rc = image_loader_open(&l, spec, 0, &o, err, sizeof err);
    CHECK(rc == 0, "open val: %s", err);
    if (rc) return;
    FolderSet s;
    folderset_scan(&s, tpath("f1"), 0, err, sizeof err);
    CHECK(l->n == 4 && l->C == 3 && l->H == 24 && l->W == 24 && l->num_classes == 3, "eval loader shape");
    float *x = malloc(sizeof(float) * 3 * 3 * 24 * 24), *want = malloc(sizeof(float) * 3 * 24 * 24);
    int y[3];
    for (int pass = 0; pass < 2; pass++) {
        int n1 = image_loader_next(l, x, y);
        int ok = n1 == 3;
        for (int k = 0; k < n1 && ok; k++) {
            expected_eval(want, folderset_path(&s, k), 24);
            ok &= memcmp(want, x + k * 3 * 576, sizeof(float) * 3 * 576) == 0 && y[k] == s.labels[k];
        }
        CHECK(ok, "eval batch 1 = resize + center crop of the decoded files, in order (pass %d)", pass);
        int n2 = image_loader_next(l, x, y);
        expected_eval(want, folderset_path(&s, 3), 24);
        CHECK(n2 == 1 && memcmp(want, x, sizeof(float) * 3 * 576) == 0 && y[0] == 2, "last partial batch");
        CHECK(image_loader_next(l, x, y) == 0, "end of epoch");
    }
    free(x);
    free(want);
    folderset_free(&s);
    image_loader_free(l);
}

/* all training batches of `epochs` epochs into buf (n floats per batch) */
static int run_train(float *buf, int *ybuf, const char *root, LoaderOpts o, int epochs, int *nbatches) {
    char err[DATA_ERR_LEN];
    ImageLoader *l;
    char spec[600];
    snprintf(spec, sizeof spec, "folder:%s", tpath(root));
    int rc = image_loader_open(&l, spec, 1, &o, err, sizeof err);
    if (rc) {
        printf("open: %s\n", err);
        return rc;
    }
    size_t per = (size_t)o.batch * 3 * l->H * l->W;
    int b = 0;
    for (int e = 0; e < epochs; e++) {
        int n;
        while ((n = image_loader_next(l, buf + b * per, ybuf + b * o.batch)) > 0) b++;
        if (n < 0) {
            printf("next: %s\n", l->err);
            image_loader_free(l);
            return n;
        }
    }
    *nbatches = b;
    image_loader_free(l);
    return 0;
}

static void test_train_threads(void) {
    enum { B = 2, S = 16, EP = 2, MAXB = 16 };
    size_t per = (size_t)B * 3 * S * S;
    float *ref = malloc(sizeof(float) * per * MAXB), *got = malloc(sizeof(float) * per * MAXB);
    int yref[MAXB * B], ygot[MAXB * B], nref = 0, ngot = 0;
    LoaderOpts o = loader_opts(B, 1);
    o.image_size = S;
    o.seed = 42;
    o.threads = 1;
    o.prefetch = 1;
    int rc = run_train(ref, yref, "f1", o, EP, &nref);
    CHECK(rc == 0 && nref == EP * 7, "1 thread: %d batches", nref);
    int cfg[3][2] = {{4, 2}, {3, 5}, {8, 1}};
    for (int c = 0; c < 3; c++) {
        o.threads = cfg[c][0];
        o.prefetch = cfg[c][1];
        rc = run_train(got, ygot, "f1", o, EP, &ngot);
        CHECK(rc == 0 && ngot == nref && memcmp(got, ref, sizeof(float) * per * nref) == 0 &&
                  memcmp(ygot, yref, sizeof(int) * B * nref) == 0,
              "%d threads, prefetch %d: bit-identical to 1 thread", o.threads, o.prefetch);
    }
    /* the first training sample equals the documented transform of its file */
    char err[DATA_ERR_LEN];
    FolderSet s;
    folderset_scan(&s, tpath("f1"), 1, err, sizeof err);
    int order[15], scratch[15];
    o.threads = 2;
    data_epoch_order(order, scratch, 15, &o, 0);
    int w, h, comp;
    uint8_t *img = stbi_load(folderset_path(&s, order[0]), &w, &h, &comp, 3);
    uint64_t key = data_aug_key(o.seed, 0, order[0], 0);
    int y0, x0, ch, cw;
    random_resized_crop_params(&y0, &x0, &ch, &cw, h, w, key);
    float *want = malloc(sizeof(float) * 3 * S * S);
    resize_crop_normalize(want, img, h, w, 3, y0, x0, ch, cw, S, S, 0, 0, S, S, (int)(rng_hash64(key, 40) >> 63),
                          imagenet_mean, imagenet_std);
    CHECK(memcmp(want, ref, sizeof(float) * 3 * S * S) == 0 && yref[0] == s.labels[order[0]],
          "training sample = random-resized-crop + flip of its file");
    stbi_image_free(img);
    free(want);
    /* epochs differ */
    CHECK(memcmp(ref, ref + 7 * per, sizeof(float) * per) != 0, "second epoch differs from the first");
    folderset_free(&s);
    free(ref);
    free(got);
}

static void test_shards_and_resume(void) {
    write_folder("f2", 8, 1); /* solid colors: a sample's color names its image */
    enum { W = 3, B = 2, S = 8 };
    char err[DATA_ERR_LEN], spec[600];
    snprintf(spec, sizeof spec, "folder:%s", tpath("f2"));
    int seen[3][64];
    memset(seen, 0, sizeof seen);
    float x[B * 3 * S * S];
    int y[B], bad = 0;
    for (int w = 0; w < W; w++) {
        LoaderOpts o = loader_opts(B, 1);
        o.image_size = S;
        o.seed = 9;
        o.worker = w;
        o.nworkers = W;
        o.threads = 2;
        ImageLoader *l;
        int rc = image_loader_open(&l, spec, 1, &o, err, sizeof err);
        CHECK(rc == 0 && l->samples_per_epoch == 8 && l->steps_per_epoch == 4, "shard loader: %s", err);
        if (rc) return;
        for (int e = 0; e < 3; e++) {
            int n;
            while ((n = image_loader_next(l, x, y)) > 0)
                for (int k = 0; k < n; k++) {
                    /* red channel value r = (k*7 + 3) -> image id */
                    float v = x[k * 3 * S * S] * imagenet_std[0] + imagenet_mean[0];
                    int id = (int)lrintf((v * 255.0f - 3.0f) / 7.0f);
                    if (id < 0 || id >= 24) {
                        bad++;
                        continue;
                    }
                    seen[e][id]++;
                }
        }
        image_loader_free(l);
    }
    CHECK(bad == 0, "solid images stay solid");
    for (int e = 0; e < 3; e++) {
        int dup = 0, cnt = 0;
        for (int i = 0; i < 24; i++) {
            dup += seen[e][i] > 1;
            cnt += seen[e][i];
        }
        CHECK(dup == 0 && cnt == 24, "epoch %d: 3 workers see 24 distinct images (%d, %d twice)", e, cnt, dup);
    }

    /* resume mid-epoch, threads running ahead */
    LoaderOpts o = loader_opts(B, 1);
    o.image_size = S;
    o.seed = 9;
    o.threads = 3;
    o.prefetch = 3;
    ImageLoader *a, *b;
    image_loader_open(&a, spec, 1, &o, err, sizeof err);
    for (int i = 0; i < 5; i++) image_loader_next(a, x, y);
    LoaderPos p = image_loader_get_pos(a);
    enum { K = 30 };
    static float xa[K][B * 3 * S * S], xb[K][B * 3 * S * S];
    int ya[K][B], yb[K][B], na[K], nb[K];
    for (int i = 0; i < K; i++) na[i] = image_loader_next(a, xa[i], ya[i]);
    o.threads = 1;
    image_loader_open(&b, spec, 1, &o, err, sizeof err);
    image_loader_next(b, x, y); /* running threads get discarded by set_pos */
    int rc = image_loader_set_pos(b, &p);
    CHECK(rc == 0, "set pos: %s", b->err);
    for (int i = 0; i < K; i++) nb[i] = image_loader_next(b, xb[i], yb[i]);
    int same = 1;
    for (int i = 0; i < K; i++)
        same &= na[i] == nb[i] && (na[i] <= 0 || (memcmp(xa[i], xb[i], sizeof(float) * na[i] * 3 * S * S) == 0 &&
                                                  memcmp(ya[i], yb[i], sizeof(int) * na[i]) == 0));
    CHECK(same, "resumed folder loader continues bit-exactly over epoch ends");
    image_loader_free(a);
    image_loader_free(b);
}

static void test_malformed(void) {
    char err[DATA_ERR_LEN], spec[600];
    /* corrupt image: decoding error names the file, no crash */
    tmkdir("f3");
    tmkdir("f3/train");
    tmkdir("f3/train/x");
    tmkdir("f3/train/y");
    uint8_t rgb[10 * 10 * 3];
    make_image(rgb, 10, 10, 0, 0);
    stbi_write_png(tpath("f3/train/x/good.png"), 10, 10, 3, rgb, 30);
    write_file(tpath("f3/train/y/bad.png"), "\x89PNG\r\n\x1a\nthis is not a png", 25);
    snprintf(spec, sizeof spec, "folder:%s", tpath("f3"));
    LoaderOpts o = loader_opts(2, 0);
    o.image_size = 8;
    ImageLoader *l;
    int rc = image_loader_open(&l, spec, 1, &o, err, sizeof err);
    CHECK(rc == 0, "open: %s", err);
    if (rc == 0) {
        float x[2 * 3 * 64];
        int y[2];
        rc = image_loader_next(l, x, y);
        CHECK(rc == -GC_ERR_TRUNCATED && strstr(l->err, "bad.png"), "corrupt image reported: %s", l->err);
        rc = image_loader_next(l, x, y);
        CHECK(rc == -GC_ERR_TRUNCATED, "and again on retry");
        image_loader_free(l);
    }
    /* truncated and damaged PNG / JPEG files: an error or an image, never a crash */
    {
        tmkdir("f6");
        tmkdir("f6/train");
        tmkdir("f6/train/k");
        uint8_t img[24 * 20 * 3];
        make_image(img, 24, 20, 0, 0);
        stbi_write_png(tpath("f6/a.png"), 24, 20, 3, img, 24 * 3);
        stbi_write_jpg(tpath("f6/a.jpg"), 24, 20, 3, img, 90);
        const char *srcs[2] = {"f6/a.png", "f6/a.jpg"};
        static uint8_t bytes[1 << 16];
        int errors = 0, images = 0, others = 0;
        for (int f = 0; f < 2; f++) {
            FILE *fp = fopen(tpath(srcs[f]), "rb");
            size_t len = fread(bytes, 1, sizeof bytes, fp);
            fclose(fp);
            for (int t = 0; t < 12; t++) {
                static uint8_t mut[1 << 16];
                memcpy(mut, bytes, len);
                size_t n = t < 6 ? len * (size_t)(t + 1) / 7 : len;
                if (t >= 6)
                    for (int k = 0; k < 8; k++) mut[8 + trand() % (len - 8)] ^= (uint8_t)trand();
                char name[64];
                snprintf(name, sizeof name, "f6/train/k/m%d_%02d.%s", f, t, f ? "jpg" : "png");
                write_file(tpath(name), mut, n);
            }
        }
        snprintf(spec, sizeof spec, "folder:%s", tpath("f6"));
        LoaderOpts o6 = loader_opts(1, 1);
        o6.image_size = 8;
        o6.threads = 2;
        ImageLoader *l6;
        rc = image_loader_open(&l6, spec, 1, &o6, err, sizeof err);
        CHECK(rc == 0, "open damaged set: %s", err);
        if (rc == 0) {
            float x6[3 * 64];
            int y6[1];
            for (int b = 0; b < 24; b++) {
                LoaderPos p6 = {0, b, l6->fingerprint};
                image_loader_set_pos(l6, &p6);
                int r = image_loader_next(l6, x6, y6);
                if (r == 1) images++;
                else if ((r == -GC_ERR_CORRUPT || r == -GC_ERR_TRUNCATED) && strstr(l6->err, "f6/train/k/m")) errors++;
                else others++;
            }
            image_loader_free(l6);
        }
        printf("  damaged files: %d decoded anyway, %d reported\n", images, errors);
        CHECK(others == 0 && errors >= 6, "damaged images decode or fail cleanly (%d other outcomes)", others);
    }
    /* the guards in front of stb_image 2.27 */
    {
        uint8_t img[16 * 16 * 3];
        make_image(img, 16, 16, 0, 0);
        stbi_write_jpg(tpath("f6/g.jpg"), 16, 16, 3, img, 90);
        static uint8_t jb[1 << 16];
        FILE *fp = fopen(tpath("f6/g.jpg"), "rb");
        size_t len = fread(jb, 1, sizeof jb, fp);
        fclose(fp);
        uint8_t *rgb;
        int H, W;
        rc = image_decode_memory(&rgb, &H, &W, jb, len, "g.jpg", err, sizeof err);
        CHECK(rc == 0 && H == 16 && W == 16, "intact JPEG decodes: %s", err);
        if (rc == 0) image_free(rgb);
        size_t dht = 0;
        for (size_t i = 2; i + 1 < len && !dht; i++)
            if (jb[i] == 0xFF && jb[i + 1] == 0xC4) dht = i;
        CHECK(dht > 0, "JPEG has a DHT segment");
        jb[dht + 5] = 0xFF; /* first code count of the first table: sum > 256 */
        jb[dht + 6] = 0xFF;
        rc = image_decode_memory(&rgb, &H, &W, jb, len, "g.jpg", err, sizeof err);
        CHECK(rc == -GC_ERR_CORRUPT && strstr(err, "Huffman table"), "DHT with > 256 codes refused: %s", err);
        static const char pnm16[] = "P6\n# a comment\n2 2\n65535\n";
        uint8_t pb[sizeof pnm16 - 1 + 24] = {0};
        memcpy(pb, pnm16, sizeof pnm16 - 1);
        rc = image_decode_memory(&rgb, &H, &W, pb, sizeof pb, "p16.ppm", err, sizeof err);
        CHECK(rc == -GC_ERR_CORRUPT && strstr(err, "PNM"), "16-bit PNM refused: %s", err);
        memcpy(pb, "P6\n# a comment\n2 2\n255\n", 23);
        rc = image_decode_memory(&rgb, &H, &W, pb, 23 + 12, "p8.ppm", err, sizeof err);
        CHECK(rc == 0 && H == 2 && W == 2, "8-bit PNM with a comment decodes: %s", err);
        if (rc == 0) image_free(rgb);
        /* a raster one byte short (P6 2x2: 12 bytes; P5: 4), or none at all */
        rc = image_decode_memory(&rgb, &H, &W, pb, 23 + 11, "p8short.ppm", err, sizeof err);
        CHECK(rc == -GC_ERR_TRUNCATED && strstr(err, "truncated PNM"), "P6 one byte short refused: %s", err);
        rc = image_decode_memory(&rgb, &H, &W, pb, 22, "p8none.ppm", err, sizeof err);
        CHECK(rc == -GC_ERR_TRUNCATED && strstr(err, "truncated PNM"), "P6 without raster refused: %s", err);
        pb[1] = '5';
        rc = image_decode_memory(&rgb, &H, &W, pb, 23 + 4, "p5.pgm", err, sizeof err);
        CHECK(rc == 0 && H == 2 && W == 2, "P5 with its 4 bytes decodes: %s", err);
        if (rc == 0) image_free(rgb);
        rc = image_decode_memory(&rgb, &H, &W, pb, 23 + 3, "p5short.pgm", err, sizeof err);
        CHECK(rc == -GC_ERR_TRUNCATED, "P5 one byte short refused: %s", err);
        pb[1] = '6';
        rc = image_decode_memory(&rgb, &H, &W, pb, 5, "tiny", err, sizeof err);
        CHECK(rc == -GC_ERR_TRUNCATED, "5 bytes refused: %s", err);
    }
    /* empty class, unknown val class, missing val, no classes */
    tmkdir("f3/train/z");
    FolderSet s;
    rc = folderset_scan(&s, tpath("f3"), 1, err, sizeof err);
    CHECK(rc == -GC_ERR_COUNT && strstr(err, "train/z"), "empty class refused: %s", err);
    remove(tpath("f3/train/z"));
    rc = folderset_scan(&s, tpath("f3"), 0, err, sizeof err);
    CHECK(rc == -GC_ERR_IO && strstr(err, "f3/val"), "missing val: %s", err);
    tmkdir("f3/val");
    tmkdir("f3/val/q");
    rc = folderset_scan(&s, tpath("f3"), 0, err, sizeof err);
    CHECK(rc == -GC_ERR_CORRUPT && strstr(err, "val/q"), "unknown val class refused: %s", err);
    tmkdir("f4");
    tmkdir("f4/train");
    rc = folderset_scan(&s, tpath("f4"), 1, err, sizeof err);
    CHECK(rc == -GC_ERR_COUNT, "no classes: %s", err);
    /* image_loader_open errors */
    rc = image_loader_open(&l, "imagenet", 1, &o, err, sizeof err);
    CHECK(rc == -GC_ERR_PARAM && strstr(err, "folder:ROOT"), "unknown dataset: %s", err);
    rc = image_loader_open(&l, "folder", 1, &o, err, sizeof err);
    CHECK(rc == -GC_ERR_PARAM, "folder without root: %s", err);
    snprintf(spec, sizeof spec, "cifar10:%s", tpath("nothing"));
    rc = image_loader_open(&l, spec, 1, &o, err, sizeof err);
    CHECK(rc == -GC_ERR_IO && strstr(err, "nothing/data_batch_1.bin"), "cifar10:DIR: %s", err);
    snprintf(spec, sizeof spec, "mnist:%s", tpath("nothing"));
    rc = image_loader_open(&l, spec, 0, &o, err, sizeof err);
    CHECK(rc == -GC_ERR_IO && strstr(err, "t10k-images"), "mnist:DIR: %s", err);
    /* a folder loader with one image and a batch of 2 cannot train */
    snprintf(spec, sizeof spec, "folder:%s", tpath("f3"));
    remove(tpath("f3/train/y/bad.png"));
    remove(tpath("f3/train/y"));
    o = loader_opts(2, 1);
    rc = image_loader_open(&l, spec, 1, &o, err, sizeof err);
    CHECK(rc == -GC_ERR_PARAM && strstr(err, "fewer than one batch"), "batch > images: %s", err);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Decoding throughput (printed, not checked: the machine is shared) and the
 * time the trainer waits in next() when it computes longer than decoding takes. */
static void test_throughput(void) {
    enum { NIMG = 32, IW = 400, IH = 300, B = 8 };
    tmkdir("f5");
    tmkdir("f5/train");
    tmkdir("f5/train/k");
    uint8_t *rgb = malloc(IW * IH * 3);
    for (int i = 0; i < NIMG; i++) {
        for (int y = 0; y < IH; y++)
            for (int x = 0; x < IW; x++)
                for (int c = 0; c < 3; c++)
                    rgb[(y * IW + x) * 3 + c] = (uint8_t)((x * (c + 1) + y * (i + 1)) / 3 + (trand() & 15));
        char f[64];
        snprintf(f, sizeof f, "f5/train/k/%03d.jpg", i);
        stbi_write_jpg(tpath(f), IW, IH, 3, rgb, 90);
    }
    free(rgb);
    char spec[600], err[DATA_ERR_LEN];
    snprintf(spec, sizeof spec, "folder:%s", tpath("f5"));
    float *x = malloc(sizeof(float) * B * 3 * 224 * 224);
    int y[B];
    for (int threads = 1; threads <= 2; threads++) {
        LoaderOpts o = loader_opts(B, 1);
        o.threads = threads;
        ImageLoader *l;
        if (image_loader_open(&l, spec, 1, &o, err, sizeof err)) {
            CHECK(0, "open: %s", err);
            break;
        }
        double t0 = now_s();
        int n, total = 0;
        while ((n = image_loader_next(l, x, y)) > 0) total += n;
        double dt = now_s() - t0;
        printf("  folder loader, %dx%d JPEG -> random-resized-crop 224: %d thread%s %.0f images/s\n", IW, IH, threads,
               threads > 1 ? "s" : "", total / dt);
        CHECK(total == NIMG, "one epoch of %d images", total);
        image_loader_free(l);
    }
    /* trainer busy 3x longer than one thread needs per batch (at most 0.3 s): waits should vanish after the first batch */
    LoaderOpts o = loader_opts(B, 1);
    o.threads = 2;
    ImageLoader *l;
    image_loader_open(&l, spec, 1, &o, err, sizeof err);
    double t0 = now_s();
    image_loader_next(l, x, y);
    double first = now_s() - t0;
    double waited = 0;
    double busy_s = first * 3 < 0.3 ? first * 3 : 0.3;
    struct timespec busy = {0, (long)(busy_s * 1e9)};
    for (int b = 1; b < NIMG / B; b++) {
        nanosleep(&busy, NULL);
        t0 = now_s();
        image_loader_next(l, x, y);
        waited += now_s() - t0;
    }
    printf("  prefetch: first batch %.1f ms, then mean wait %.2f ms per batch while the trainer is busy %.1f ms\n",
           first * 1e3, waited * 1e3 / (NIMG / B - 1), busy_s * 1e3);
    image_loader_free(l);
    free(x);
}

static void test_real_data(void) {
    /* the generic entry point on the real CIFAR-10 and MNIST, when present */
    char err[DATA_ERR_LEN];
    ImageLoader *l;
    if (real_data("cifar-10-batches-bin")) {
        LoaderOpts o = loader_opts(100, 0);
        int rc = image_loader_open(&l, "cifar10", 0, &o, err, sizeof err);
        CHECK(rc == 0 && l->steps_per_epoch == 100 && l->C == 3 && l->H == 32, "open cifar10 test: %s", err);
        if (rc == 0) image_loader_free(l);
    }
    if (real_data("mnist")) {
        LoaderOpts o = loader_opts(64, 1);
        o.nworkers = 4;
        o.worker = 2;
        int rc = image_loader_open(&l, "mnist", 1, &o, err, sizeof err);
        CHECK(rc == 0 && l->samples_per_epoch == 15000 && l->C == 1 && l->H == 28, "open mnist train: %s", err);
        if (rc == 0) image_loader_free(l);
    }
}

int main(void) {
    if (fix_load("tests/fixtures/data_ref.bin")) {
        CHECK(0, "fixture missing");
        TEST_END();
    }
    tmpdir_make();
    test_resize_reference();
    test_geometry();
    test_scan();
    test_eval_loader();
    test_train_threads();
    test_shards_and_resume();
    test_malformed();
    test_throughput();
    test_real_data();
    tmpdir_remove();
    fix_free();
    TEST_END();
}
