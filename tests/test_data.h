/* Helpers shared by the dataset tests (tests/test_data_*.c): a temporary
 * directory the test writes tiny dataset files into, removed at the end, and
 * a check for the real data under $DATA_DIR. */
#ifndef GC_TEST_DATA_H
#define GC_TEST_DATA_H

#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char tdir_[256];

static const char *tmpdir_make(void) {
    const char *base = getenv("TMPDIR");
    snprintf(tdir_, sizeof tdir_, "%s/gcx_data_test_XXXXXX", (base && base[0]) ? base : "/tmp");
    if (!mkdtemp(tdir_)) {
        perror("mkdtemp");
        exit(1);
    }
    return tdir_;
}

static int rm_one_(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(p);
}

static void tmpdir_remove(void) {
    if (tdir_[0]) nftw(tdir_, rm_one_, 16, FTW_DEPTH | FTW_PHYS);
}

/* path inside the temp dir */
static const char *tpath(const char *sub) {
    static char buf[8][512];
    static int k;
    k = (k + 1) % 8;
    snprintf(buf[k], sizeof buf[k], "%s/%s", tdir_, sub);
    return buf[k];
}

static void tmkdir(const char *sub) {
    if (mkdir(tpath(sub), 0755) != 0) {
        perror(sub);
        exit(1);
    }
}

static void write_file(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, n, f) != n || fclose(f) != 0) {
        fprintf(stderr, "cannot write %s\n", path);
        exit(1);
    }
}

/* "$DATA_DIR/sub" if that path exists, else NULL (and a printed note) */
static const char *real_data(const char *sub) {
    static char buf[1024];
    const char *d = getenv("DATA_DIR");
    if (!d || !d[0]) d = "data";
    snprintf(buf, sizeof buf, "%s/%s", d, sub);
    struct stat st;
    if (stat(buf, &st) != 0) {
        printf("note: %s not found: real-data checks skipped (set DATA_DIR)\n", buf);
        return NULL;
    }
    return buf;
}

/* small deterministic generator for test content (independent of common/rng) */
static uint64_t trand_state_ = 88172645463325252ULL;
static uint32_t trand(void) {
    trand_state_ ^= trand_state_ << 13;
    trand_state_ ^= trand_state_ >> 7;
    trand_state_ ^= trand_state_ << 17;
    return (uint32_t)(trand_state_ >> 11);
}

#endif
