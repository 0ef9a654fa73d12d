/* Replay driver for libFuzzer targets, so `make test` runs every fuzz target
 * without clang's libFuzzer. For each file of the checked-in corpus
 * (CORPUS_DIR) it calls LLVMFuzzerTestOneInput on the file as is, on every
 * prefix of it (truncations), and on 64 seeded random mutations (byte flips,
 * byte sets, insertions and deletions). A crash, an abort or a sanitizer report
 * fails the run; otherwise it prints "RESULT <inputs> 0". */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/rng.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint8_t *read_all(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = malloc(len > 0 ? (size_t)len : 1);
    if (!buf || (len > 0 && fread(buf, 1, (size_t)len, f) != (size_t)len)) {
        free(buf);
        fclose(f);
        return NULL;
    }
    fclose(f);
    *n = (size_t)len;
    return buf;
}

#define REPLAY_MAX_INPUT ((size_t)1 << 26) /* corpus files are small; larger ones are skipped */

static int run_one(const uint8_t *data, size_t n) {
    if (n > REPLAY_MAX_INPUT) return 0;
    /* exact-size heap copy so ASan catches any read past the end */
    uint8_t *copy = malloc(n ? n : 1);
    if (n) memcpy(copy, data, n);
    LLVMFuzzerTestOneInput(copy, n);
    free(copy);
    return 1;
}

int main(int argc, char **argv) {
    const char *dir = argc > 1 ? argv[1] : CORPUS_DIR;
    DIR *d = opendir(dir);
    if (!d) {
        printf("FAIL cannot open corpus directory %s\n", dir);
        printf("RESULT 0 1\n");
        return 1;
    }
    struct dirent *e;
    long inputs = 0, files = 0;
    Rng rng;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        size_t n = 0;
        uint8_t *buf = read_all(path, &n);
        if (!buf) continue;
        files++;
        inputs += run_one(buf, n);
        for (size_t k = 0; k < n; k++) inputs += run_one(buf, k);
        rng_init(&rng, 12345, (uint64_t)files);
        uint8_t *mut = malloc(n + 16);
        for (int m = 0; m < 64; m++) {
            size_t len = n;
            memcpy(mut, buf, n);
            int edits = 1 + (int)rng_below(&rng, 4);
            for (int k = 0; k < edits; k++) {
                int op = (int)rng_below(&rng, 4);
                if (op == 0 && len) mut[rng_below(&rng, len)] ^= (uint8_t)(1u << rng_below(&rng, 8));
                else if (op == 1 && len) mut[rng_below(&rng, len)] = (uint8_t)rng_u64(&rng);
                else if (op == 2 && len < n + 16) {
                    size_t at = rng_below(&rng, len + 1);
                    memmove(mut + at + 1, mut + at, len - at);
                    mut[at] = (uint8_t)rng_u64(&rng);
                    len++;
                } else if (op == 3 && len) {
                    size_t at = rng_below(&rng, len);
                    memmove(mut + at, mut + at + 1, len - at - 1);
                    len--;
                }
            }
            inputs += run_one(mut, len);
        }
        free(mut);
        free(buf);
    }
    closedir(d);
    printf("replayed %ld inputs from %ld corpus files in %s\n", inputs, files, dir);
    if (files == 0) {
        printf("FAIL empty corpus %s\n", dir);
        printf("RESULT 0 1\n");
        return 1;
    }
    printf("RESULT %ld 0\n", files);
    return 0;
}
