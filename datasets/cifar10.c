/* CIFAR-10 binary reader (see cifar10.h). */
#include "datasets/cifar10.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

const float cifar10_mean[3] = {0.4914f, 0.4822f, 0.4465f};
const float cifar10_std[3] = {0.2470f, 0.2435f, 0.2616f};

#define CIFAR_HINT                                                                                                \
    "CIFAR-10 (binary version) is expected as %s/{data_batch_1..5,test_batch}.bin; download "                   \
    "https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz and extract it into $DATA_DIR (now '%s'), which "  \
    "gives $DATA_DIR/cifar-10-batches-bin/"

/* opens path and checks its size; *nrec records */
static FILE *open_records(int64_t *nrec, const char *path, const char *dir, int *rc, char *err, size_t errlen) {
    *nrec = 0;
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "cannot open '%s': %s. " CIFAR_HINT, path, strerror(errno), dir, data_dir());
        *rc = -GC_ERR_IO;
        return NULL;
    }
    long size = -1;
    struct stat st = {0};
    if (fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode) && fseek(f, 0, SEEK_END) == 0) size = ftell(f);
    if (size < 0 || fseek(f, 0, SEEK_SET) != 0) {
        fclose(f);
        snprintf(err, errlen, "'%s' is %s, not a CIFAR-10 batch file", path,
                 S_ISDIR(st.st_mode) ? "a folder" : "not a regular file");
        *rc = -GC_ERR_IO;
        return NULL;
    }
    if (size == 0 || size % CIFAR10_RECORD != 0) {
        fclose(f);
        snprintf(err, errlen,
                 "'%s' has %ld bytes, not a positive multiple of the %d-byte CIFAR-10 record (the official files "
                 "have 10000 records, 30730000 bytes): truncated or not the binary version. " CIFAR_HINT,
                 path, size, CIFAR10_RECORD, dir, data_dir());
        *rc = -GC_ERR_TRUNCATED;
        return NULL;
    }
    *nrec = size / CIFAR10_RECORD;
    *rc = 0;
    return f;
}

static void file_path(char *path, size_t cap, const char *dir, int train, int f) {
    if (train) snprintf(path, cap, "%s/data_batch_%d.bin", dir, f + 1);
    else snprintf(path, cap, "%s/test_batch.bin", dir);
}

int cifar10_load(ImageSet *s, const char *dir, int train, char *err, size_t errlen) {
    memset(s, 0, sizeof *s);
    char dbuf[DATA_PATH_MAX];
    if (!dir) {
        if (data_path(dbuf, sizeof dbuf, "cifar-10-batches-bin")) {
            snprintf(err, errlen, "DATA_DIR too long");
            return -GC_ERR_PARAM;
        }
        dir = dbuf;
    }
    int nfiles = train ? CIFAR10_TRAIN_FILES : 1;
    int64_t counts[CIFAR10_TRAIN_FILES] = {0};
    char path[DATA_PATH_MAX + 32];
    int64_t total = 0, maxrec = 0;
    int rc = 0;
    /* pass 1: every file present with a whole number of records */
    for (int f = 0; f < nfiles; f++) {
        file_path(path, sizeof path, dir, train, f);
        FILE *fp = open_records(&counts[f], path, dir, &rc, err, errlen);
        if (!fp) return rc;
        fclose(fp);
        total += counts[f];
        if (counts[f] > maxrec) maxrec = counts[f];
    }
    if (total > 0x7FFFFFFF) {
        snprintf(err, errlen, "CIFAR-10 in '%s': %lld records, more than this loader indexes", dir, (long long)total);
        return -GC_ERR_OVERSIZED;
    }
    /* pass 2: read, validate labels, split into labels and pixels */
    uint8_t *buf = malloc((size_t)maxrec * CIFAR10_RECORD);
    s->x = malloc((size_t)total * 3072);
    s->y = malloc((size_t)total);
    if (!buf || !s->x || !s->y) {
        free(buf);
        imageset_free(s);
        snprintf(err, errlen, "out of memory for %lld CIFAR-10 images", (long long)total);
        return -GC_ERR_NOMEM;
    }
    int64_t k = 0;
    for (int f = 0; f < nfiles && rc == 0; f++) {
        file_path(path, sizeof path, dir, train, f);
        int64_t nrec;
        FILE *fp = open_records(&nrec, path, dir, &rc, err, errlen);
        if (!fp) break;
        if (nrec != counts[f]) {
            fclose(fp);
            snprintf(err, errlen, "'%s' changed size while loading", path);
            rc = -GC_ERR_IO;
            break;
        }
        size_t got = fread(buf, CIFAR10_RECORD, (size_t)nrec, fp);
        fclose(fp);
        if (got != (size_t)nrec) {
            snprintf(err, errlen, "short read on '%s': %zu of %lld records", path, got, (long long)nrec);
            rc = -GC_ERR_IO;
            break;
        }
        for (int64_t r = 0; r < nrec; r++, k++) {
            const uint8_t *rec = buf + r * CIFAR10_RECORD;
            if (rec[0] > 9) {
                snprintf(err, errlen,
                         "'%s': record %lld (byte offset %lld) has label %u, CIFAR-10 labels are 0..9: corrupt file "
                         "or not CIFAR-10 (CIFAR-100 binary records have 2 label bytes)",
                         path, (long long)r, (long long)(r * CIFAR10_RECORD), rec[0]);
                rc = -GC_ERR_CORRUPT;
                break;
            }
            s->y[k] = rec[0];
            memcpy(s->x + k * 3072, rec + 1, 3072);
        }
    }
    free(buf);
    if (rc) {
        imageset_free(s);
        return rc;
    }
    s->n = total;
    s->C = 3;
    s->H = 32;
    s->W = 32;
    s->num_classes = 10;
    for (int c = 0; c < 3; c++) {
        s->mean[c] = cifar10_mean[c];
        s->std[c] = cifar10_std[c];
    }
    s->pad = 4;
    s->flip = 1;
    snprintf(s->name, sizeof s->name, "cifar10");
    return 0;
}
