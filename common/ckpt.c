#include "common/ckpt.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/crc32c.h"

static int put(FILE *f, const void *p, size_t n, uint32_t *crc) {
    *crc = crc32c(*crc, p, n);
    return fwrite(p, 1, n, f) == n ? 0 : -1;
}

static void le32(uint8_t *b, uint32_t v) {
    for (int i = 0; i < 4; i++) b[i] = (uint8_t)(v >> (8 * i));
}
static void le64(uint8_t *b, uint64_t v) {
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)(v >> (8 * i));
}
static uint32_t rd32(const uint8_t *b) {
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--) v = (v << 8) | b[i];
    return v;
}
static uint64_t rd64(const uint8_t *b) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | b[i];
    return v;
}

static int write_file(const char *tmp, const char *path, const CkptSection *s, int n, char *err, size_t errlen);

/* the temporary file a ckpt_write is writing, for ckpt_remove_partial (a signal handler) */
static char partial[4096];
static volatile sig_atomic_t partial_live;

void ckpt_remove_partial(void) {
    if (partial_live) unlink(partial); /* async-signal-safe */
}

int ckpt_write(const char *path, const CkptSection *s, int n, char *err, size_t errlen) {
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid()) >= (int)sizeof tmp) {
        snprintf(err, errlen, "checkpoint path too long: %s", path);
        return -1;
    }
    partial_live = 0;
    memcpy(partial, tmp, sizeof partial);
    partial_live = 1;
    int rc = write_file(tmp, path, s, n, err, errlen);
    partial_live = 0;
    return rc;
}

static int write_file(const char *tmp, const char *path, const CkptSection *s, int n, char *err, size_t errlen) {
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        snprintf(err, errlen, "cannot create %s: %s", tmp, strerror(errno));
        return -1;
    }
    uint32_t crc = 0;
    uint8_t hdr[16];
    memcpy(hdr, CKPT_MAGIC, 8);
    le32(hdr + 8, CKPT_VERSION);
    le32(hdr + 12, (uint32_t)n);
    int bad = put(f, hdr, 16, &crc);
    for (int i = 0; i < n && !bad; i++) {
        uint8_t sh[CKPT_NAME_MAX + 8];
        memset(sh, 0, sizeof sh);
        snprintf((char *)sh, CKPT_NAME_MAX, "%s", s[i].name);
        le64(sh + CKPT_NAME_MAX, s[i].len);
        bad |= put(f, sh, sizeof sh, &crc);
        if (s[i].len) bad |= put(f, s[i].data, s[i].len, &crc);
    }
    uint8_t tail[4];
    le32(tail, crc);
    bad |= fwrite(tail, 1, 4, f) != 4;
    bad |= fflush(f) != 0;
    bad |= fsync(fileno(f)) != 0;
    bad |= fclose(f) != 0;
    if (bad) {
        snprintf(err, errlen, "writing %s failed: %s", tmp, strerror(errno));
        unlink(tmp);
        return -1;
    }
    if (rename(tmp, path) != 0) {
        snprintf(err, errlen, "cannot rename %s to %s: %s", tmp, path, strerror(errno));
        unlink(tmp);
        return -1;
    }
    return 0;
}

int ckpt_read(Ckpt *ck, const char *path, char *err, size_t errlen) {
    memset(ck, 0, sizeof *ck);
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "cannot open checkpoint %s: %s", path, strerror(errno));
        return -1;
    }
    struct stat st = {0};
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        fclose(f);
        snprintf(err, errlen, "%s is %s, not a checkpoint file", path,
                 S_ISDIR(st.st_mode) ? "a folder" : "not a regular file");
        return -1;
    }
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    if (sz < 20) {
        fclose(f);
        snprintf(err, errlen, "%s: %ld bytes is too short for a checkpoint (at least 20)", path, sz);
        return -1;
    }
    ck->size = (size_t)sz;
    ck->file = malloc(ck->size);
    if (!ck->file || fread(ck->file, 1, ck->size, f) != ck->size) {
        fclose(f);
        ckpt_free(ck);
        snprintf(err, errlen, "cannot read %s", path);
        return -1;
    }
    fclose(f);
    return ckpt_parse(ck, path, err, errlen);
}

int ckpt_parse(Ckpt *ck, const char *name, char *err, size_t errlen) {
    const char *path = name;
    if (ck->size < 20) {
        snprintf(err, errlen, "%s: %zu bytes is too short for a checkpoint (at least 20)", path, ck->size);
        ckpt_free(ck);
        return -1;
    }
    const uint8_t *b = ck->file;
    if (memcmp(b, CKPT_MAGIC, 8) != 0) {
        snprintf(err, errlen,
                 "%s is not a gcx checkpoint (expected magic \"%s\" at offset 0); pass a file written by --save",
                 path, CKPT_MAGIC);
        ckpt_free(ck);
        return -1;
    }
    uint32_t ver = rd32(b + 8);
    if (ver != CKPT_VERSION) {
        snprintf(err, errlen, "%s: checkpoint version %u, this build reads version %d; use the matching gcx build",
                 path, ver, CKPT_VERSION);
        ckpt_free(ck);
        return -1;
    }
    uint32_t want = rd32(b + ck->size - 4), got = crc32c(0, b, ck->size - 4);
    if (want != got) {
        snprintf(err, errlen, "%s: checksum mismatch (stored %08x, computed %08x): the file is corrupt or truncated",
                 path, want, got);
        ckpt_free(ck);
        return -1;
    }
    uint32_t n = rd32(b + 12);
    size_t at = 16, end = ck->size - 4;
    if (n > (end - at) / (CKPT_NAME_MAX + 8)) {
        snprintf(err, errlen, "%s: %u sections cannot fit in %zu bytes", path, n, ck->size);
        ckpt_free(ck);
        return -1;
    }
    ck->sec = calloc(n ? n : 1, sizeof *ck->sec);
    for (uint32_t i = 0; i < n; i++) {
        if (end - at < CKPT_NAME_MAX + 8) goto corrupt;
        memcpy(ck->sec[i].name, b + at, CKPT_NAME_MAX);
        ck->sec[i].name[CKPT_NAME_MAX - 1] = 0;
        uint64_t len = rd64(b + at + CKPT_NAME_MAX);
        at += CKPT_NAME_MAX + 8;
        if (len > end - at) goto corrupt;
        ck->sec[i].data = b + at;
        ck->sec[i].len = (size_t)len;
        at += (size_t)len;
    }
    if (at != end) goto corrupt;
    ck->n = (int)n;
    return 0;
corrupt:
    snprintf(err, errlen, "%s: section table is inconsistent with the file size", path);
    ckpt_free(ck);
    return -1;
}

void ckpt_free(Ckpt *ck) {
    free(ck->file);
    free(ck->sec);
    memset(ck, 0, sizeof *ck);
}

const void *ckpt_find(const Ckpt *ck, const char *name, size_t *len) {
    for (int i = 0; i < ck->n; i++)
        if (strncmp(ck->sec[i].name, name, CKPT_NAME_MAX) == 0) {
            if (len) *len = ck->sec[i].len;
            return ck->sec[i].data;
        }
    return NULL;
}

int ckpt_load(const Ckpt *ck, const char *name, void *out, size_t len, char *err, size_t errlen) {
    size_t have = 0;
    const void *p = ckpt_find(ck, name, &have);
    if (!p) {
        snprintf(err, errlen, "checkpoint has no section '%s' (was it written by another program or model?)", name);
        return -1;
    }
    if (have != len) {
        snprintf(err, errlen, "checkpoint section '%s' holds %zu bytes, this run expects %zu (different model or flags?)",
                 name, have, len);
        return -1;
    }
    if (len) memcpy(out, p, len); /* an empty section may load into NULL */
    return 0;
}
