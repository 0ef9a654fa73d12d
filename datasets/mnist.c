/* MNIST IDX reader (see mnist.h). */
#include "datasets/mnist.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#define MNIST_MAX_BYTES (512u << 20) /* refuse to inflate more than this */

#define MNIST_HINT                                                                                                   \
    "MNIST is expected as %s/{train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]; download the four .gz files from " \
    "http://yann.lecun.com/exdb/mnist/ (or a mirror such as https://ossci-datasets.s3.amazonaws.com/mnist/) into " \
    "$DATA_DIR/mnist (DATA_DIR now '%s')"

static uint32_t be32(const uint8_t *p) {
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | (uint32_t)p[3];
}

int mnist_parse_idx(const uint8_t **data, uint32_t *dims, const uint8_t *buf, size_t len, int expect_ndim,
                    const char *what, char *err, size_t errlen) {
    *data = NULL;
    if (len < 4) {
        snprintf(err, errlen, "'%s': %zu bytes, shorter than the 4-byte IDX magic", what, len);
        return -GC_ERR_TRUNCATED;
    }
    uint32_t want = 0x00000800u | (uint32_t)expect_ndim;
    uint32_t magic = be32(buf);
    if (magic != want) {
        snprintf(err, errlen,
                 "'%s': IDX magic 0x%08X, expected 0x%08X (unsigned bytes, %d dimension%s): not an MNIST %s file or "
                 "still compressed twice",
                 what, magic, want, expect_ndim, expect_ndim > 1 ? "s" : "", expect_ndim == 3 ? "image" : "label");
        return -GC_ERR_MAGIC;
    }
    size_t hdr = 4 + 4 * (size_t)expect_ndim;
    if (len < hdr) {
        snprintf(err, errlen, "'%s': %zu bytes, shorter than its %zu-byte IDX header", what, len, hdr);
        return -GC_ERR_TRUNCATED;
    }
    uint64_t total = 1;
    for (int d = 0; d < expect_ndim; d++) {
        dims[d] = be32(buf + 4 + 4 * d);
        if (dims[d] == 0 || (d > 0 && dims[d] > 4096)) {
            snprintf(err, errlen, "'%s': dimension %d is %u: impossible for MNIST", what, d, dims[d]);
            return -GC_ERR_CORRUPT;
        }
        total *= dims[d];
    }
    if (total > len - hdr) {
        snprintf(err, errlen, "'%s': header promises %llu data bytes but the file holds %zu: truncated", what,
                 (unsigned long long)total, len - hdr);
        return -GC_ERR_TRUNCATED;
    }
    if (total < len - hdr) {
        snprintf(err, errlen, "'%s': %zu data bytes after the header, %llu expected: trailing bytes", what, len - hdr,
                 (unsigned long long)total);
        return -GC_ERR_OVERSIZED;
    }
    *data = buf + hdr;
    return 0;
}

/* Read a gzipped or plain file completely. Tries base".gz" then base.
 * On success *buf (malloc'd) holds *len bytes and path holds the name used. */
static int read_maybe_gz(uint8_t **buf, size_t *len, char *path, size_t cap, const char *dir, const char *base,
                         char *err, size_t errlen) {
    *buf = NULL;
    *len = 0;
    struct stat st;
    snprintf(path, cap, "%s/%s.gz", dir, base);
    if (stat(path, &st) != 0) {
        snprintf(path, cap, "%s/%s", dir, base);
        if (stat(path, &st) != 0) {
            snprintf(err, errlen, "cannot find '%s/%s.gz' nor '%s': %s. " MNIST_HINT, dir, base, path, strerror(errno),
                     dir, data_dir());
            return -GC_ERR_IO;
        }
    }
    if (!S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "'%s' is not a regular file", path);
        return -GC_ERR_IO;
    }
    gzFile g = gzopen(path, "rb");
    if (!g) {
        snprintf(err, errlen, "cannot open '%s': %s. " MNIST_HINT, path, strerror(errno), dir, data_dir());
        return -GC_ERR_IO;
    }
    size_t capb = 1 << 20, n = 0;
    uint8_t *b = malloc(capb);
    int rc = 0;
    while (b) {
        if (n == capb) {
            if (capb >= MNIST_MAX_BYTES) {
                snprintf(err, errlen, "'%s' inflates to more than %u MiB: not MNIST", path, MNIST_MAX_BYTES >> 20);
                rc = -GC_ERR_OVERSIZED;
                break;
            }
            uint8_t *nb = realloc(b, capb * 2);
            if (!nb) break;
            b = nb;
            capb *= 2;
        }
        int got = gzread(g, b + n, (unsigned)(capb - n));
        if (got < 0) {
            int zerr;
            const char *msg = gzerror(g, &zerr);
            snprintf(err, errlen, "'%s': gzip stream is corrupt (%s): download it again", path, msg);
            rc = -GC_ERR_CORRUPT;
            break;
        }
        if (got == 0) {
            int zerr = 0;
            const char *msg = gzerror(g, &zerr);
            if (zerr != Z_OK && zerr != Z_STREAM_END) {
                snprintf(err, errlen, "'%s': gzip stream is corrupt or truncated (%s): download it again", path, msg);
                rc = -GC_ERR_CORRUPT;
            }
            break;
        }
        n += (size_t)got;
    }
    gzclose(g);
    if (!b) {
        snprintf(err, errlen, "out of memory reading '%s'", path);
        return -GC_ERR_NOMEM;
    }
    if (rc) {
        free(b);
        return rc;
    }
    *buf = b;
    *len = n;
    return 0;
}

int mnist_load(ImageSet *s, const char *dir, int train, char *err, size_t errlen) {
    memset(s, 0, sizeof *s);
    char dbuf[DATA_PATH_MAX];
    if (!dir) {
        if (data_path(dbuf, sizeof dbuf, "mnist")) {
            snprintf(err, errlen, "DATA_DIR too long");
            return -GC_ERR_PARAM;
        }
        dir = dbuf;
    }
    const char *pre = train ? "train" : "t10k";
    char base[64], ipath[DATA_PATH_MAX + 64], lpath[DATA_PATH_MAX + 64];
    uint8_t *ib = NULL, *lb = NULL;
    size_t ilen = 0, llen = 0;
    snprintf(base, sizeof base, "%s-images-idx3-ubyte", pre);
    int rc = read_maybe_gz(&ib, &ilen, ipath, sizeof ipath, dir, base, err, errlen);
    if (rc) return rc;
    snprintf(base, sizeof base, "%s-labels-idx1-ubyte", pre);
    rc = read_maybe_gz(&lb, &llen, lpath, sizeof lpath, dir, base, err, errlen);
    if (rc) {
        free(ib);
        return rc;
    }
    const uint8_t *pix, *lab;
    uint32_t idim[3], ldim[3];
    rc = mnist_parse_idx(&pix, idim, ib, ilen, 3, ipath, err, errlen);
    if (rc == 0) rc = mnist_parse_idx(&lab, ldim, lb, llen, 1, lpath, err, errlen);
    if (rc == 0 && ldim[0] != idim[0]) {
        snprintf(err, errlen, "'%s' holds %u images but '%s' holds %u labels", ipath, idim[0], lpath, ldim[0]);
        rc = -GC_ERR_COUNT;
    }
    if (rc == 0 && idim[0] > 0x7FFFFFFFu) {
        snprintf(err, errlen, "'%s': %u images, more than this loader indexes", ipath, idim[0]);
        rc = -GC_ERR_OVERSIZED;
    }
    for (uint32_t i = 0; rc == 0 && i < ldim[0]; i++)
        if (lab[i] > 9) {
            snprintf(err, errlen, "'%s': label %u of sample %u, MNIST labels are 0..9", lpath, lab[i], i);
            rc = -GC_ERR_CORRUPT;
        }
    if (rc == 0) {
        size_t npix = (size_t)idim[0] * idim[1] * idim[2];
        s->x = malloc(npix);
        s->y = malloc(idim[0]);
        if (!s->x || !s->y) {
            imageset_free(s);
            snprintf(err, errlen, "out of memory for %u MNIST images", idim[0]);
            rc = -GC_ERR_NOMEM;
        } else {
            memcpy(s->x, pix, npix);
            memcpy(s->y, lab, idim[0]);
            s->n = idim[0];
            s->C = 1;
            s->H = (int)idim[1];
            s->W = (int)idim[2];
            s->num_classes = 10;
            s->mean[0] = MNIST_MEAN;
            s->std[0] = MNIST_STD;
            s->pad = 0;
            s->flip = 0;
            snprintf(s->name, sizeof s->name, "mnist");
        }
    }
    free(ib);
    free(lb);
    return rc;
}
