/* libFuzzer target: the dataset readers, which read files from outside
 * (datasets/cifar10.c, mnist.c, text.c). Each input becomes a file in a
 * temporary folder that the reader then loads.
 *
 * Input layout:
 *   byte 0      reader: % 5 = 0 CIFAR-10 test_batch.bin, 1 one MNIST IDX file
 *               parsed in memory (mnist_parse_idx, 1 or 3 dimensions by bit 3),
 *               2 an MNIST t10k pair (images, then labels, split at the u16 of
 *               bytes 1-2), 3 a word-level text (train, valid and test), 4 a
 *               character-level text
 *   bytes 1..   the file (for 2: bytes 1-2 the images' length, then both files)
 * Every reader must return 0 or a negative GcError with a message, never read
 * outside its buffers (ASan), and leave nothing allocated (LeakSanitizer).
 *
 * The seed corpus tests/fuzz/corpus/fuzz_data/ is written by this file built
 * with -DDATA_GEN_CORPUS, from the root:
 *   cc -std=c11 -D_GNU_SOURCE -I. -O1 -DDATA_GEN_CORPUS tests/fuzz/fuzz_data.c build/libgcx.a -lm -lz \
 *      -fopenmp -o build/gen_data_corpus && build/gen_data_corpus
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/errors.h"
#include "datasets/cifar10.h"
#include "datasets/mnist.h"
#include "datasets/text.h"

static char dir[64];

static void put(const char *name, const uint8_t *p, size_t n) {
    char path[160];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f) abort();
    if (n && fwrite(p, 1, n, f) != n) abort();
    fclose(f);
}

static void cleanup(void) {
    const char *names[] = {"test_batch.bin", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte", "words.txt", "chars.txt"};
    char path[160];
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        unlink(path);
    }
    rmdir(dir);
}

static void ok(int rc) {
    if (rc > 0 || rc <= -GC_ERR_COUNT_) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "/tmp/gcx_fuzz_data.XXXXXX");
        if (!mkdtemp(dir)) abort();
        atexit(cleanup);
    }
    const uint8_t *p = data + 1;
    size_t n = size - 1;
    char err[1024], path[160], path2[160];
    switch (data[0] % 5) {
    case 0: {
        put("test_batch.bin", p, n);
        ImageSet s;
        int rc = cifar10_load(&s, dir, 0, err, sizeof err);
        ok(rc);
        if (rc == 0) imageset_free(&s);
        break;
    }
    case 1: {
        const uint8_t *d;
        uint32_t dims[3];
        ok(mnist_parse_idx(&d, dims, p, n, (data[0] & 8) ? 3 : 1, "fuzz", err, sizeof err));
        break;
    }
    case 2: {
        if (n < 2) break;
        size_t a = (size_t)(p[0] | p[1] << 8);
        a = a < n - 2 ? a : n - 2;
        put("t10k-images-idx3-ubyte", p + 2, a);
        put("t10k-labels-idx1-ubyte", p + 2 + a, n - 2 - a);
        ImageSet s;
        int rc = mnist_load(&s, dir, 0, err, sizeof err);
        ok(rc);
        if (rc == 0) imageset_free(&s);
        break;
    }
    case 3: {
        put("words.txt", p, n);
        snprintf(path, sizeof path, "%s/words.txt", dir);
        TextCorpus c;
        int rc = word_corpus_load(&c, path, path, path, err, sizeof err);
        ok(rc);
        if (rc == 0) text_corpus_free(&c);
        break;
    }
    default: {
        put("chars.txt", p, n);
        snprintf(path2, sizeof path2, "%s/chars.txt", dir);
        TextCorpus c;
        int rc = char_corpus_load(&c, path2, 0.1, err, sizeof err);
        ok(rc);
        if (rc == 0) text_corpus_free(&c);
        break;
    }
    }
    return 0;
}

#ifdef DATA_GEN_CORPUS
static void seed(const char *name, uint8_t kind, const uint8_t *p, size_t n) {
    char path[160];
    snprintf(path, sizeof path, "tests/fuzz/corpus/fuzz_data/%s", name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(&kind, 1, 1, f) != 1 || (n && fwrite(p, 1, n, f) != n) || fclose(f)) exit(1);
    printf("  %s\n", path);
}

static size_t idx(uint8_t *b, int ndim, const uint32_t *dims, uint8_t fill) {
    b[0] = b[1] = 0;
    b[2] = 8;
    b[3] = (uint8_t)ndim;
    size_t at = 4, count = 1;
    for (int i = 0; i < ndim; i++, at += 4) {
        b[at] = (uint8_t)(dims[i] >> 24), b[at + 1] = (uint8_t)(dims[i] >> 16);
        b[at + 2] = (uint8_t)(dims[i] >> 8), b[at + 3] = (uint8_t)dims[i];
        count *= dims[i];
    }
    for (size_t i = 0; i < count; i++) b[at + i] = (uint8_t)(fill + i % 10);
    return at + count;
}

int main(void) {
    /* one CIFAR-10 record (label 3) */
    static uint8_t rec[CIFAR10_RECORD];
    rec[0] = 3;
    for (int i = 1; i < CIFAR10_RECORD; i++) rec[i] = (uint8_t)(i * 7);
    seed("cifar_1rec", 0, rec, sizeof rec);
    /* IDX files: 2 images of 4 x 4, 2 labels */
    static uint8_t img[64], lab[16], pair[128];
    const uint32_t di[3] = {2, 4, 4}, dl[1] = {2};
    size_t ni = idx(img, 3, di, 0), nl = idx(lab, 1, dl, 0);
    seed("idx_images", 1 | 8, img, ni);
    seed("idx_labels", 1, lab, nl);
    pair[0] = (uint8_t)ni;
    pair[1] = 0;
    memcpy(pair + 2, img, ni);
    memcpy(pair + 2 + ni, lab, nl);
    seed("mnist_pair", 2, pair, 2 + ni + nl);
    static const char words[] = " the cat sat on the mat \n a dog <unk> \n\n the end \n";
    seed("words", 3, (const uint8_t *)words, sizeof words - 1);
    static const char chars[] = "First Citizen:\nBefore we proceed any further, hear me speak.\n";
    seed("chars", 4, (const uint8_t *)chars, sizeof chars - 1);
    return 0;
}
#endif
