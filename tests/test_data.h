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

static inline const char *tmpdir_make(void) {
    const char *base = getenv("TMPDIR");
    snprintf(tdir_, sizeof tdir_, "%s/gcx_data_test_XXXXXX", (base && base[0]) ? base : "/tmp");
    if (!mkdtemp(tdir_)) {
        perror("mkdtemp");
        exit(1);
    }
    return tdir_;
}

static inline int rm_one_(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(p);
}

static inline void tmpdir_remove(void) {
    if (tdir_[0]) nftw(tdir_, rm_one_, 16, FTW_DEPTH | FTW_PHYS);
}

/* path inside the temp dir */
static inline const char *tpath(const char *sub) {
    static char buf[8][1024];
    static int k;
    k = (k + 1) % 8;
    snprintf(buf[k], sizeof buf[k], "%s/%s", tdir_, sub);
    return buf[k];
}

static inline void tmkdir(const char *sub) {
    if (mkdir(tpath(sub), 0755) != 0) {
        perror(sub);
        exit(1);
    }
}

static inline void write_file(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, n, f) != n || fclose(f) != 0) {
        fprintf(stderr, "cannot write %s\n", path);
        exit(1);
    }
}

/* "$DATA_DIR/sub" if that path exists, else NULL (and a printed note) */
static inline const char *real_data(const char *sub) {
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

/* Reader of tests/fixtures/data_ref.bin (written by tests/ref/data_fixtures.py):
 * "GCXDFIX1", u32 count, entries {name[32], u32 dtype (0 i32, 1 f32, 2 u8), u32 n, data}. */
typedef struct {
    char name[32];
    uint32_t dtype, n;
    void *data;
} FixEntry;
static FixEntry *fix_;
static uint32_t nfix_;

static inline int fix_load(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        printf("cannot open fixture %s (run /usr/bin/python3 tests/ref/data_fixtures.py)\n", path);
        return -1;
    }
    char magic[8];
    if (fread(magic, 1, 8, f) != 8 || memcmp(magic, "GCXDFIX1", 8) || fread(&nfix_, 4, 1, f) != 1 || nfix_ > 100000) {
        printf("fixture %s: bad header\n", path);
        fclose(f);
        return -1;
    }
    fix_ = calloc(nfix_, sizeof *fix_);
    for (uint32_t i = 0; i < nfix_; i++) {
        if (fread(fix_[i].name, 1, 32, f) != 32 || fread(&fix_[i].dtype, 4, 1, f) != 1 || fread(&fix_[i].n, 4, 1, f) != 1 ||
            fix_[i].dtype > 2) {
            printf("fixture %s: bad entry %u\n", path, i);
            fclose(f);
            return -1;
        }
        fix_[i].name[31] = '\0';
        size_t sz = fix_[i].dtype == 2 ? 1 : 4;
        fix_[i].data = malloc(sz * fix_[i].n + 1);
        if (fread(fix_[i].data, sz, fix_[i].n, f) != fix_[i].n) {
            printf("fixture %s: entry %s truncated\n", path, fix_[i].name);
            fclose(f);
            return -1;
        }
    }
    fclose(f);
    return 0;
}

/* entry data (exits when missing: the fixture and the test disagree) */
static inline void *fix_get(const char *name, uint32_t dtype, uint32_t *n) {
    for (uint32_t i = 0; i < nfix_; i++)
        if (strcmp(fix_[i].name, name) == 0 && fix_[i].dtype == dtype) {
            if (n) *n = fix_[i].n;
            return fix_[i].data;
        }
    printf("fixture entry %s missing: regenerate with tests/ref/data_fixtures.py\n", name);
    exit(1);
}

static inline void fix_free(void) {
    for (uint32_t i = 0; i < nfix_; i++) free(fix_[i].data);
    free(fix_);
    fix_ = NULL;
    nfix_ = 0;
}

/* small deterministic generator for test content (independent of common/rng) */
static uint64_t trand_state_ = 88172645463325252ULL;
static inline uint32_t trand(void) {
    trand_state_ ^= trand_state_ << 13;
    trand_state_ ^= trand_state_ >> 7;
    trand_state_ ^= trand_state_ << 17;
    return (uint32_t)(trand_state_ >> 11);
}

#endif
