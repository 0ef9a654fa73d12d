/* Guarded image decoding (decode.h). */
#include "datasets/decode.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <stb/stb_image.h>

#include "common/errors.h"

#define IMAGE_MAX_FILE ((size_t)1 << 30)

/* stb_image's stbi__get8 on a memory buffer: 0 past the end */
static unsigned rd(const uint8_t *b, size_t len, size_t i) { return i < len ? b[i] : 0; }

/* The JPEG marker walk of stb_image 2.27 (stbi__decode_jpeg_header,
 * stbi__decode_jpeg_image, stbi__process_marker), checking every DHT table
 * stb would build. Returns 0 (safe for stb), or -GC_ERR_CORRUPT. */
static int check_jpeg(const uint8_t *b, size_t len, size_t i /* first byte after SOI */, const char *what, char *err,
                      size_t errlen) {
    for (;;) {
        /* stbi__get_marker: a non-0xFF byte is "no marker" and stb scans on; fill bytes 0xFF are skipped */
        while (i < len && b[i] != 0xFF) i++;
        while (i < len && b[i] == 0xFF) i++;
        if (i >= len) return 0;
        unsigned m = b[i++];
        if (m == 0xD9) return 0; /* EOI */
        if (m == 0x00 || m == 0x01 || (m >= 0xD0 && m <= 0xD8)) continue; /* stb ends or skips */
        size_t seg = i;                                      /* first byte of the length field */
        unsigned L = (rd(b, len, seg) << 8) | rd(b, len, seg + 1);
        if (L < 2) return 0; /* stb reports a bad length and stops */
        if (m == 0xC4) {
            /* DHT: L -= 2; while (L > 0) { q; 16 counts; n = sum; build table; n values; L -= 17 + n; } */
            long rem = (long)L - 2;
            size_t p = seg + 2;
            while (rem > 0) {
                unsigned q = rd(b, len, p++);
                if ((q >> 4) > 1 || (q & 15) > 3) return 0; /* stb: bad DHT header, stops */
                unsigned n = 0;
                for (int k = 0; k < 16; k++) n += rd(b, len, p++);
                if (n > 256) {
                    snprintf(err, errlen,
                             "'%s': corrupt JPEG: Huffman table with %u codes (at most 256) at byte %zu; refused "
                             "before decoding (stb_image 2.27 would overflow a buffer)",
                             what, n, seg - 2);
                    return -GC_ERR_CORRUPT;
                }
                p += n;
                rem -= 17 + (long)n;
            }
            if (rem != 0) return 0; /* stb: DHT length mismatch, stops */
            i = p;
            continue;
        }
        i = seg + L; /* every other segment (SOF, DQT, DRI, DNL, APPn, COM, SOS header) is L bytes */
        if (m == 0xDA) {
            /* entropy-coded data: up to the first 0xFF followed by neither 0x00, 0xFF nor RSTn */
            while (i + 1 < len) {
                if (b[i] == 0xFF) {
                    unsigned c = b[i + 1];
                    if (c != 0x00 && c != 0xFF && !(c >= 0xD0 && c <= 0xD7)) break;
                }
                i++;
            }
            if (i + 1 >= len) return 0;
        }
    }
}

/* PNM (P5/P6) header as stb reads it: whitespace, '#' comments, width, height, maxval */
static int pnm_int(const uint8_t *b, size_t len, size_t *i, long *out) {
    for (;;) {
        while (*i < len && (b[*i] == ' ' || (b[*i] >= '\t' && b[*i] <= '\r'))) (*i)++;
        if (*i < len && b[*i] == '#') {
            while (*i < len && b[*i] != '\n' && b[*i] != '\r') (*i)++;
            continue;
        }
        break;
    }
    long v = 0;
    int digits = 0;
    while (*i < len && b[*i] >= '0' && b[*i] <= '9') {
        if (++digits > 9) return -1;
        v = v * 10 + (b[*i] - '0');
        (*i)++;
    }
    *out = v;
    return digits ? 0 : -1;
}

static int check_pnm(const uint8_t *b, size_t len, const char *what, char *err, size_t errlen) {
    size_t i = 2;
    long w, h, maxv;
    if (pnm_int(b, len, &i, &w) || pnm_int(b, len, &i, &h) || pnm_int(b, len, &i, &maxv) || w < 1 || h < 1 ||
        maxv < 1 || maxv > 255) {
        snprintf(err, errlen, "'%s': unsupported or corrupt PNM header (8-bit P5/P6 with maxval 1..255 expected)",
                 what);
        return -GC_ERR_CORRUPT;
    }
    /* one whitespace byte after maxval, then the raster: stb_image does not
     * check its reads, so a short raster would decode as whatever memory holds */
    uint64_t need = (uint64_t)w * (uint64_t)h * (b[1] == '6' ? 3u : 1u);
    if (i >= len || (uint64_t)(len - i - 1) < need) {
        snprintf(err, errlen, "'%s': truncated PNM: %ld x %ld pixels need %llu bytes of raster, %zu remain", what, w, h,
                 (unsigned long long)need, i < len ? len - i - 1 : (size_t)0);
        return -GC_ERR_TRUNCATED;
    }
    return 0;
}

/* PNG: every chunk length must fit in the file (stb_image allocates what a
 * chunk header claims before reading it) */
static int check_png(const uint8_t *b, size_t len, const char *what, char *err, size_t errlen) {
    size_t i = 8;
    while (i + 8 <= len) {
        uint32_t n = ((uint32_t)b[i] << 24) | ((uint32_t)b[i + 1] << 16) | ((uint32_t)b[i + 2] << 8) | b[i + 3];
        if ((uint64_t)n + 12 > len - i) {
            snprintf(err, errlen, "'%s': truncated or corrupt PNG: chunk at byte %zu claims %u bytes, %zu remain",
                     what, i, n, len - i - 8);
            return -GC_ERR_TRUNCATED;
        }
        if (memcmp(b + i + 4, "IEND", 4) == 0) return 0;
        i += 12 + (size_t)n;
    }
    return 0;
}

int image_precheck(const uint8_t *buf, size_t len, const char *what, char *err, size_t errlen) {
    if (len < 8) {
        snprintf(err, errlen, "'%s': %zu bytes, too short for an image", what, len);
        return -GC_ERR_TRUNCATED;
    }
    if (len > IMAGE_MAX_FILE) {
        snprintf(err, errlen, "'%s': %zu bytes, larger than the 1 GiB this loader decodes", what, len);
        return -GC_ERR_OVERSIZED;
    }
    if (buf[0] == 0xFF) { /* stb's JPEG test: 0xFF fill bytes, then SOI */
        size_t i = 0;
        while (i < len && buf[i] == 0xFF) i++;
        if (i < len && buf[i] == 0xD8) return check_jpeg(buf, len, i + 1, what, err, errlen);
    }
    if (buf[0] == 'P' && (buf[1] == '5' || buf[1] == '6')) return check_pnm(buf, len, what, err, errlen);
    if (memcmp(buf, "\x89PNG\r\n\x1a\n", 8) == 0) return check_png(buf, len, what, err, errlen);
    return 0;
}

int image_decode_memory(uint8_t **rgb, int *H, int *W, const uint8_t *buf, size_t len, const char *what, char *err,
                        size_t errlen) {
    *rgb = NULL;
    *H = *W = 0;
    int rc = image_precheck(buf, len, what, err, errlen);
    if (rc) return rc;
    int w = 0, h = 0, comp = 0;
    if (!stbi_info_from_memory(buf, (int)len, &w, &h, &comp)) {
        snprintf(err, errlen, "cannot decode image '%s': %s (jpg, png, bmp, ppm, pgm are read)", what,
                 stbi_failure_reason());
        return -GC_ERR_CORRUPT;
    }
    if (w < 1 || h < 1 || (int64_t)w * h > IMAGE_MAX_PIXELS) {
        snprintf(err, errlen, "'%s': %d x %d pixels, outside 1 .. %lld pixels", what, w, h,
                 (long long)IMAGE_MAX_PIXELS);
        return -GC_ERR_OVERSIZED;
    }
    uint8_t *img = stbi_load_from_memory(buf, (int)len, &w, &h, &comp, 3);
    if (!img) {
        snprintf(err, errlen, "cannot decode image '%s': %s", what, stbi_failure_reason());
        return -GC_ERR_CORRUPT;
    }
    *rgb = img;
    *H = h;
    *W = w;
    return 0;
}

int image_decode_file(uint8_t **rgb, int *H, int *W, const char *path, char *err, size_t errlen) {
    *rgb = NULL;
    *H = *W = 0;
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "cannot open image '%s': %s", path, strerror(errno));
        return -GC_ERR_IO;
    }
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        fclose(f);
        snprintf(err, errlen, "'%s' is not a regular file", path);
        return -GC_ERR_IO;
    }
    if ((uint64_t)st.st_size > IMAGE_MAX_FILE) {
        fclose(f);
        snprintf(err, errlen, "'%s': %lld bytes, larger than the 1 GiB this loader decodes", path,
                 (long long)st.st_size);
        return -GC_ERR_OVERSIZED;
    }
    size_t len = (size_t)st.st_size;
    uint8_t *buf = malloc(len ? len : 1);
    if (!buf) {
        fclose(f);
        snprintf(err, errlen, "out of memory reading '%s'", path);
        return -GC_ERR_NOMEM;
    }
    size_t got = fread(buf, 1, len, f);
    fclose(f);
    int rc;
    if (got != len) {
        snprintf(err, errlen, "short read on '%s' (%zu of %zu bytes)", path, got, len);
        rc = -GC_ERR_IO;
    } else {
        rc = image_decode_memory(rgb, H, W, buf, len, path, err, errlen);
    }
    free(buf);
    return rc;
}

void image_free(uint8_t *rgb) { stbi_image_free(rgb); }
