/* gcx: the codec command-line tool.
 *
 *   gcx encode --codec SPEC [--threads N] [--seed N] [--frame-values N] in.f32 out.gcf
 *   gcx decode in.gcf out.f32
 *   gcx stats  --codec SPEC [--codec SPEC ...] [--threads N] [--seed N] [--frame-values N] in.f32
 *   gcx info   in.gcf
 *   gcx info   model.safetensors   (--export / PyTorch state_dicts: tensors, dtypes, shapes)
 *   gcx --help
 *
 * in.f32 / out.f32: raw little-endian float32 values. SPEC is NAME[:key=value,...]
 * (codec_parse); "all" in stats means every registered codec with its defaults.
 * A .gcf file (docs/FORMAT.md) is a 28+S byte file header (magic "GCXFILE",
 * version, element count, values per frame, codec spec string, CRC-32C)
 * followed by the codec frames, each of at most 2^24 values, in order. One
 * Codec instance encodes (and one decodes) all frames of a file in order, so
 * stateful codecs (gcomp) work. Frame k is encoded with CodecSide.seed =
 * seed + k.
 *
 * Exit status: 0 ok, 1 bad file or failed codec (the message names the file),
 * 2 bad command line (usage printed). A failed encode or decode leaves no output
 * file behind and an existing one unchanged (open_out).
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/check.h"
#include "common/clock.h"
#include "common/crc32c.h"
#include "common/safetensors.h"
#include "compress/codec.h"

#define GCF_MAGIC "GCXFILE"
#define GCF_VERSION 1
#define GCF_FIXED 24              /* bytes before the spec string */
#define GCF_MAX_FRAME (1u << 24)  /* values per frame, at most */
#define GCF_MAX_SPEC 511
#define MAX_CODECS 32

static void usage_short(FILE *fp) {
    fprintf(fp,
            "usage:\n"
            "  gcx encode --codec SPEC [options] in.f32 out.gcf   compress raw float32 into a .gcf file\n"
            "  gcx decode in.gcf out.f32                         decompress a .gcf file to raw float32\n"
            "  gcx stats --codec SPEC [options] in.f32           bits/value, ratio, errors, speed (no files)\n"
            "  gcx info in.gcf                                   print a .gcf file's header and frames\n"
            "  gcx info model.safetensors                        list a safetensors file's tensors (--export)\n"
            "options:\n"
            "  --codec SPEC        NAME[:key=value,...]; stats takes several, or 'all'\n"
            "  --threads N         encoder threads (CodecSide.threads), 0 = OpenMP default (default 0)\n"
            "  --seed N            seed of the stochastic codecs; frame k uses seed + k (default 0)\n"
            "  --frame-values N    values per frame, 1..16777216 (default 16777216)\n"
            "  -h, --help          this help and the codec list\n"
            "files: .f32 = raw little-endian float32; .gcf = docs/FORMAT.md\n");
}

/* --help: the usage and every codec with its parameters */
static void usage(FILE *fp) {
    usage_short(fp);
    fputc('\n', fp);
    codec_print_help(fp);
}

/* a bad command line: the message (none when fmt is NULL: getopt has printed it), the
 * usage without the codec list, exit 2 */
static void die_usage(const char *fmt, const char *arg) {
    if (fmt) {
        fprintf(stderr, "gcx: ");
        fprintf(stderr, fmt, arg);
        fprintf(stderr, "\n\n");
    }
    usage_short(stderr);
    fprintf(stderr, "'gcx --help' also lists the codecs and their parameters.\n");
    exit(2);
}

/* ---- files ---- */

static FILE *open_file(const char *path, const char *mode) {
    FILE *f = fopen(path, mode);
    if (!f) {
        gc_fatal("gcx: cannot open '%s': %s\n", path, strerror(errno));
    }
    struct stat st;
    if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) gc_fatal("gcx: '%s' is a folder, not a file\n", path);
    return f;
}

/* refuses an output that is the input itself (it would be replaced before it is read) */
static void not_same_file(const char *in, const char *out) {
    struct stat a, b;
    if (stat(in, &a) == 0 && stat(out, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino)
        gc_fatal("gcx: the output '%s' is the input file '%s'; give another output name\n", out, in);
}

/* read exactly n bytes or fail naming the file and what was being read */
static void read_exact(void *buf, size_t n, FILE *f, const char *path, const char *what) {
    size_t got = fread(buf, 1, n, f);
    if (got != n) {
        if (ferror(f)) fprintf(stderr, "gcx: '%s': read error in %s: %s\n", path, what, strerror(errno));
        else gc_fatal("gcx: '%s': file truncated in %s (%zu of %zu bytes)\n", path, what, got, n);
    }
}

static void write_exact(const void *buf, size_t n, FILE *f, const char *path) {
    if (n && fwrite(buf, 1, n, f) != n) {
        gc_fatal("gcx: cannot write '%s': %s\n", path, strerror(errno));
    }
}

/* The output file is written under a temporary name beside it and renamed over the
 * given name only once it is complete, so a failed run (bad input, codec error, full
 * disk) leaves no partial file and an existing file as it was: every failure path
 * exits, and the atexit handler removes the temporary file. A replaced file keeps its
 * mode. An output that exists and is not a regular file (/dev/stdout, a pipe, a
 * symbolic link, which stays a link) is written in place. */
static char out_tmp[4096];

static void remove_out_tmp(void) {
    if (out_tmp[0]) remove(out_tmp);
    out_tmp[0] = 0;
}

static FILE *open_out(const char *path) {
    struct stat st;
    int exists = lstat(path, &st) == 0;
    if (exists && !S_ISREG(st.st_mode)) return open_file(path, "wb");
    if (snprintf(out_tmp, sizeof out_tmp, "%s.XXXXXX", path) >= (int)sizeof out_tmp) {
        gc_fatal("gcx: cannot open '%s': path too long\n", path);
    }
    int fd = mkstemp(out_tmp);
    if (fd < 0) {
        out_tmp[0] = 0;
        gc_fatal("gcx: cannot open '%s': %s\n", path, strerror(errno));
    }
    atexit(remove_out_tmp);
    /* mkstemp makes 0600: a replaced file keeps its mode, a new one gets 0666 less the umask */
    mode_t mask = umask(0);
    umask(mask);
    FILE *f = fdopen(fd, "wb");
    if (!f || fchmod(fd, exists ? st.st_mode & 07777 : 0666 & ~mask) != 0) {
        gc_fatal("gcx: cannot open '%s': %s\n", path, strerror(errno));
    }
    return f;
}

/* close the complete output and give it its name */
static void commit_out(FILE *f, const char *path) {
    if (fclose(f) != 0) {
        gc_fatal("gcx: cannot write '%s': %s\n", path, strerror(errno));
    }
    if (out_tmp[0]) {
        if (rename(out_tmp, path) != 0) {
            gc_fatal("gcx: cannot write '%s': %s\n", path, strerror(errno));
        }
        out_tmp[0] = 0;
    }
}

/* size of a raw float32 file in values */
static uint64_t f32_count(FILE *f, const char *path) {
    if (fseeko(f, 0, SEEK_END) != 0) {
        gc_fatal("gcx: '%s': cannot seek: %s\n", path, strerror(errno));
    }
    off_t sz = ftello(f);
    fseeko(f, 0, SEEK_SET);
    if (sz < 0 || sz % 4) {
        gc_fatal("gcx: '%s' is not a raw float32 file: %lld bytes is not a multiple of 4\n", path,
                (long long)sz);
    }
    return (uint64_t)sz / 4;
}

/* ---- the .gcf file header ---- */

typedef struct {
    uint64_t count;       /* values in the file */
    uint32_t frame_values; /* values per frame (the last frame may hold fewer) */
    char spec[GCF_MAX_SPEC + 1];
} GcfHeader;

static void gcf_write_header(FILE *f, const char *path, const GcfHeader *h) {
    uint8_t b[GCF_FIXED + GCF_MAX_SPEC + 4];
    size_t s = strlen(h->spec);
    memcpy(b, GCF_MAGIC, 7);
    b[7] = GCF_VERSION;
    put_u32(b + 8, (uint32_t)h->count);
    put_u32(b + 12, (uint32_t)(h->count >> 32));
    put_u32(b + 16, h->frame_values);
    put_u16(b + 20, (uint16_t)s);
    put_u16(b + 22, 0);
    memcpy(b + GCF_FIXED, h->spec, s);
    put_u32(b + GCF_FIXED + s, crc32c(0, b, GCF_FIXED + s));
    write_exact(b, GCF_FIXED + s + 4, f, path);
}

static void gcf_read_header(GcfHeader *h, CodecSpec *spec, FILE *f, const char *path) {
    uint8_t b[GCF_FIXED + GCF_MAX_SPEC + 4];
    read_exact(b, GCF_FIXED, f, path, "the file header");
    if (memcmp(b, GCF_MAGIC, 7) != 0) {
        gc_fatal("gcx: '%s' is not a .gcf file: magic is not \"GCXFILE\" (made by 'gcx encode'?)\n", path);
    }
    if (b[7] != GCF_VERSION) {
        gc_fatal("gcx: '%s': .gcf version %d, this gcx reads version %d (use a matching gcx)\n", path, b[7],
                GCF_VERSION);
    }
    h->count = (uint64_t)get_u32(b + 8) | ((uint64_t)get_u32(b + 12) << 32);
    h->frame_values = get_u32(b + 16);
    size_t s = get_u16(b + 20);
    if (get_u16(b + 22) != 0 || s == 0 || s > GCF_MAX_SPEC || h->frame_values == 0 ||
        h->frame_values > GCF_MAX_FRAME) {
        gc_fatal("gcx: '%s': corrupt file header (spec length %zu, %u values per frame)\n", path, s,
                h->frame_values);
    }
    read_exact(b + GCF_FIXED, s + 4, f, path, "the file header");
    if (crc32c(0, b, GCF_FIXED + s) != get_u32(b + GCF_FIXED + s)) {
        gc_fatal("gcx: '%s': file header checksum mismatch (corrupt file)\n", path);
    }
    memcpy(h->spec, b + GCF_FIXED, s);
    h->spec[s] = 0;
    char err[256];
    if (codec_parse(spec, h->spec, err, sizeof err) != 0) {
        gc_fatal("gcx: '%s': codec spec \"%s\" in the header: %s\n", path, h->spec, err);
    }
}

/* ---- commands ---- */

typedef struct {
    CodecSpec specs[MAX_CODECS];
    int nspecs;
    int threads;
    uint64_t seed;
    uint32_t frame_values;
} Opts;

static int parse_u64(const char *s, uint64_t *out, uint64_t max) {
    char *end;
    errno = 0;
    if (!*s || *s == '-') return -1;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end || v > max) return -1;
    *out = v;
    return 0;
}

/* index of the first NaN or infinity in x[0, n), or n */
static size_t first_nonfinite(const float *x, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i])) return i;
    return n;
}

static void encode_cmd(const Opts *o, const char *in, const char *out) {
    not_same_file(in, out);
    FILE *fi = open_file(in, "rb");
    uint64_t n = f32_count(fi, in);
    Codec *c = codec_new(&o->specs[0]);
    GcfHeader h;
    memset(&h, 0, sizeof h);
    h.count = n;
    h.frame_values = o->frame_values;
    codec_spec_str(h.spec, sizeof h.spec, &o->specs[0]);
    size_t F = o->frame_values;
    float *x = mallocCheck(4 * (n < F ? (size_t)n : F));
    size_t cap = codec_max_frame(c, n < F ? (size_t)n : F);
    uint8_t *frame = mallocCheck(cap);
    FILE *fo = open_out(out);
    gcf_write_header(fo, out, &h);
    uint64_t bytes = 0;
    for (uint64_t at = 0, k = 0; at < n; at += F, k++) {
        size_t m = n - at < F ? (size_t)(n - at) : F;
        read_exact(x, 4 * m, fi, in, "the float32 data");
        CodecSide side;
        memset(&side, 0, sizeof side);
        side.threads = o->threads;
        side.seed = o->seed + k;
        int64_t len = codec_encode(c, frame, cap, x, m, &side);
        if (len < 0) {
            size_t bad = first_nonfinite(x, m);
            if (bad < m) /* what the codecs refuse, named as the input's fault */
                fprintf(stderr, "gcx: cannot encode '%s' with %s: value %llu is %s; this codec takes finite values\n",
                        in, h.spec, (unsigned long long)(at + bad), isnan(x[bad]) ? "NaN" : "infinite");
            else
                gc_fatal("gcx: cannot encode '%s' (values %llu..%llu) with %s: %s\n", in,
                        (unsigned long long)at, (unsigned long long)(at + m - 1), h.spec, gc_strerror((int)len));
        }
        write_exact(frame, (size_t)len, fo, out);
        bytes += (uint64_t)len;
    }
    commit_out(fo, out);
    fclose(fi);
    printf("%s: %llu values -> %s: %llu bytes in %llu frames (%.4f bits/value, ratio %.2f) with %s\n", in,
           (unsigned long long)n, out, (unsigned long long)(bytes + GCF_FIXED + strlen(h.spec) + 4),
           (unsigned long long)((n + F - 1) / F), n ? 8.0 * (double)bytes / (double)n : 0.0,
           bytes ? 4.0 * (double)n / (double)bytes : 0.0, h.spec);
    free(x);
    free(frame);
    codec_free(c);
}

/* read the next frame of a .gcf file (m values expected) into *buf; returns its length */
static size_t read_frame(uint8_t **buf, size_t *bufcap, const Codec *c, size_t m, uint64_t k, FILE *f,
                         const char *path) {
    char what[64];
    snprintf(what, sizeof what, "frame %llu", (unsigned long long)k);
    uint8_t hb[CODEC_HEADER_SIZE];
    read_exact(hb, CODEC_HEADER_SIZE, f, path, what);
    uint32_t plen = get_u32(hb + 12);
    size_t most = codec_max_frame(c, m);
    if (memcmp(hb, CODEC_MAGIC, 4) != 0 || hb[4] != CODEC_VERSION) {
        gc_fatal("gcx: '%s': %s: not a codec frame (bad magic or version)\n", path, what);
    }
    if (hb[5] != (uint8_t)c->spec.ops->id || get_u32(hb + 8) != m) {
        gc_fatal("gcx: '%s': %s: codec id %d with %u values, the file header says %s (id %d) with %zu\n",
                path, what, hb[5], get_u32(hb + 8), c->spec.ops->name, (int)c->spec.ops->id, m);
    }
    if ((size_t)plen + CODEC_HEADER_SIZE > most) {
        gc_fatal("gcx: '%s': %s: payload of %u bytes is more than %s can produce for %zu values\n", path,
                what, plen, c->spec.ops->name, m);
    }
    size_t len = CODEC_HEADER_SIZE + (size_t)plen;
    if (len > *bufcap) {
        free(*buf);
        *buf = mallocCheck(len);
        *bufcap = len;
    }
    memcpy(*buf, hb, CODEC_HEADER_SIZE);
    read_exact(*buf + CODEC_HEADER_SIZE, plen, f, path, what);
    return len;
}

static void decode_cmd(const char *in, const char *out) {
    not_same_file(in, out);
    FILE *fi = open_file(in, "rb");
    GcfHeader h;
    CodecSpec spec;
    gcf_read_header(&h, &spec, fi, in);
    Codec *c = codec_new(&spec);
    size_t F = h.frame_values;
    size_t bufn = h.count < F ? (size_t)h.count : F;
    float *y = mallocCheck(4 * bufn);
    uint8_t *frame = NULL;
    size_t fcap = 0;
    FILE *fo = open_out(out);
    for (uint64_t at = 0, k = 0; at < h.count; at += F, k++) {
        size_t m = h.count - at < F ? (size_t)(h.count - at) : F;
        size_t len = read_frame(&frame, &fcap, c, m, k, fi, in);
        int rc = codec_decode(c, y, m, frame, len);
        if (rc) {
            gc_fatal("gcx: '%s': frame %llu does not decode: %s\n", in, (unsigned long long)k,
                    gc_strerror(rc));
        }
        write_exact(y, 4 * m, fo, out);
    }
    if (fgetc(fi) != EOF) {
        gc_fatal("gcx: '%s': bytes after the last frame (corrupt or concatenated file)\n", in);
    }
    commit_out(fo, out);
    fclose(fi);
    printf("%s: %llu values (%s) -> %s\n", in, (unsigned long long)h.count, h.spec, out);
    free(y);
    free(frame);
    codec_free(c);
}

/* a safetensors file (a trainer's --export, a PyTorch state_dict): validated, then
 * its metadata and every tensor with dtype, shape and size */
static void st_info_cmd(const char *in) {
    StFile sf;
    char err[1024];
    if (st_read(&sf, in, err, sizeof err)) {
        fprintf(stderr, "error: %s\n", err);
        exit(1);
    }
    uint64_t values = 0;
    for (int i = 0; i < sf.n; i++) values += sf.t[i].numel;
    printf("%s: safetensors, %d tensors, %llu values, %zu bytes\n", in, sf.n, (unsigned long long)values, sf.size);
    for (int i = 0; i < sf.nmeta; i++) printf("  metadata %s = %s\n", sf.meta_key[i], sf.meta_val[i]);
    for (int i = 0; i < sf.n; i++) {
        char shape[200];
        st_shape_str(shape, sizeof shape, sf.t[i].shape, sf.t[i].ndim);
        printf("  %-40s %-4s %-20s %llu\n", sf.t[i].name, st_dtype_name(sf.t[i].dtype), shape,
               (unsigned long long)sf.t[i].numel);
    }
    st_free(&sf);
}

static void info_cmd(const char *in) {
    size_t L = strlen(in);
    if (L > 12 && !strcmp(in + L - 12, ".safetensors")) {
        st_info_cmd(in);
        return;
    }
    FILE *fi = open_file(in, "rb");
    GcfHeader h;
    CodecSpec spec;
    gcf_read_header(&h, &spec, fi, in);
    Codec *c = codec_new(&spec);
    size_t F = h.frame_values;
    printf("%s: .gcf version %d, codec %s, %llu values, %zu values per frame\n", in, GCF_VERSION, h.spec,
           (unsigned long long)h.count, F);
    uint8_t *frame = NULL;
    size_t fcap = 0;
    uint64_t total = GCF_FIXED + strlen(h.spec) + 4;
    float *y = mallocCheck(4 * (h.count < F ? (size_t)h.count : F) + 4);
    int bad = 0; /* frames that gcx decode would refuse, and trailing bytes */
    for (uint64_t at = 0, k = 0; at < h.count; at += F, k++) {
        size_t m = h.count - at < F ? (size_t)(h.count - at) : F;
        size_t len = read_frame(&frame, &fcap, c, m, k, fi, in);
        uint32_t crc = crc32c(0, frame + CODEC_HEADER_SIZE, len - CODEC_HEADER_SIZE);
        int rc = codec_decode(c, y, m, frame, len); /* as decode does, so stateful codecs stay in step */
        printf("  frame %llu: %zu values, %zu bytes (%.4f bits/value), flags 0x%04x, crc %s%s%s\n",
               (unsigned long long)k, m, len, 8.0 * (double)len / (double)m, get_u16(frame + 6),
               crc == get_u32(frame + 16) ? "ok" : "MISMATCH", rc ? ", does not decode: " : "",
               rc ? gc_strerror(rc) : "");
        bad += rc != 0;
        total += len;
    }
    if (fgetc(fi) != EOF) {
        printf("  trailing bytes after the last frame\n");
        bad++;
    }
    printf("  total %llu bytes, %.4f bits/value\n", (unsigned long long)total,
           h.count ? 8.0 * (double)total / (double)h.count : 0.0);
    free(y);
    free(frame);
    if (bad) gc_fatal("gcx: '%s' is damaged: gcx decode would refuse it\n", in);
    codec_free(c);
    fclose(fi);
}

static void stats_cmd(const Opts *o, const char *in) {
    FILE *fi = open_file(in, "rb");
    uint64_t n64 = f32_count(fi, in);
    if (n64 > SIZE_MAX / 4) {
        gc_fatal("gcx: '%s' is too large for this machine\n", in);
    }
    size_t n = (size_t)n64, F = o->frame_values;
    float *x = mallocCheck(4 * n + 4), *y = mallocCheck(4 * n + 4);
    read_exact(x, 4 * n, fi, in, "the float32 data");
    fclose(fi);
    double sx = 0;
    for (size_t i = 0; i < n; i++) sx += (double)x[i] * x[i];
    printf("%s: %zu values, rms %.4g\n", in, n, n ? sqrt(sx / (double)n) : 0.0);
    printf("%-36s %10s %9s %11s %11s %11s %9s %9s\n", "codec", "bits/value", "ratio", "max|err|", "rms err",
           "rel rms", "enc GB/s", "dec GB/s");
    for (int s = 0; s < o->nspecs; s++) {
        char name[256];
        codec_spec_str(name, sizeof name, &o->specs[s]);
        Codec *enc = codec_new(&o->specs[s]), *dec = codec_new(&o->specs[s]);
        size_t fm = n < F ? n : F;
        size_t cap = codec_max_frame(enc, fm);
        uint8_t *frame = mallocCheck(cap);
        uint64_t bytes = 0;
        double tenc = 0, tdec = 0;
        int rc = 0;
        for (size_t at = 0, k = 0; at < n && !rc; at += F, k++) {
            size_t m = n - at < F ? n - at : F;
            CodecSide side;
            memset(&side, 0, sizeof side);
            side.threads = o->threads;
            side.seed = o->seed + k;
            double t0 = mono_seconds();
            int64_t len = codec_encode(enc, frame, cap, x + at, m, &side);
            double t1 = mono_seconds();
            if (len < 0) {
                rc = (int)len;
                break;
            }
            rc = codec_decode(dec, y + at, m, frame, (size_t)len);
            tdec += mono_seconds() - t1;
            tenc += t1 - t0;
            bytes += (uint64_t)len;
        }
        if (rc) {
            size_t bad = first_nonfinite(x, n);
            if (bad < n)
                printf("%-36s failed: value %zu is %s (this codec takes finite values)\n", name, bad,
                       isnan(x[bad]) ? "NaN" : "infinite");
            else
                printf("%-36s failed: %s\n", name, gc_strerror(rc));
        } else {
            double maxe = 0, se = 0;
            for (size_t i = 0; i < n; i++) {
                double e = fabs((double)y[i] - (double)x[i]);
                if (e > maxe || e != e) maxe = e;
                se += e * e;
            }
            double bpv = n ? 8.0 * (double)bytes / (double)n : 0;
            double gb = 4.0 * (double)n / 1e9;
            printf("%-36s %10.4f %9.2f %11.4g %11.4g %11.4g %9.3f %9.3f\n", name, bpv, bpv > 0 ? 32.0 / bpv : 0.0,
                   maxe, n ? sqrt(se / (double)n) : 0.0, sx > 0 ? sqrt(se / sx) : 0.0,
                   tenc > 0 ? gb / tenc : 0.0, tdec > 0 ? gb / tdec : 0.0);
        }
        free(frame);
        codec_free(enc);
        codec_free(dec);
    }
    printf("(bits/value counts the frame headers, not the .gcf file header; times are one run, wall clock)\n");
    free(x);
    free(y);
}

int main(int argc, char **argv) {
    if (argc < 2) die_usage(NULL, NULL);
    if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    const char *cmd = argv[1];
    int is_enc = !strcmp(cmd, "encode"), is_dec = !strcmp(cmd, "decode"), is_stats = !strcmp(cmd, "stats"),
        is_info = !strcmp(cmd, "info");
    if (!is_enc && !is_dec && !is_stats && !is_info) die_usage("unknown command '%s'", cmd);
    Opts o;
    memset(&o, 0, sizeof o);
    o.frame_values = GCF_MAX_FRAME;
    static const struct option opts[] = {
        {"codec", required_argument, 0, 'c'}, {"threads", required_argument, 0, 't'},
        {"seed", required_argument, 0, 's'},  {"frame-values", required_argument, 0, 'f'},
        {"help", no_argument, 0, 'h'},        {0, 0, 0, 0},
    };
    optind = 2;
    int opt;
    char err[256];
    while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        uint64_t v;
        switch (opt) {
        case 'c':
            if (is_dec || is_info) die_usage("--codec does not apply to '%s' (the file names its codec)", cmd);
            if (!strcmp(optarg, "all")) {
                for (int i = 0; i < codec_count() && o.nspecs < MAX_CODECS; i++)
                    codec_spec_default(&o.specs[o.nspecs++], codec_ops_at(i));
                break;
            }
            if (o.nspecs == MAX_CODECS) die_usage("too many --codec options (at most %s)", "32");
            if (codec_parse(&o.specs[o.nspecs], optarg, err, sizeof err) != 0) die_usage("--codec: %s", err);
            o.nspecs++;
            break;
        case 't':
            if (parse_u64(optarg, &v, 1024)) die_usage("--threads wants an integer in [0, 1024], got '%s'", optarg);
            o.threads = (int)v;
            break;
        case 's':
            if (parse_u64(optarg, &v, UINT64_MAX)) die_usage("--seed wants a non-negative integer, got '%s'", optarg);
            o.seed = v;
            break;
        case 'f':
            if (parse_u64(optarg, &v, GCF_MAX_FRAME) || v == 0)
                die_usage("--frame-values wants an integer in [1, 16777216], got '%s'", optarg);
            o.frame_values = (uint32_t)v;
            break;
        case 'h': usage(stdout); return 0;
        default: die_usage(NULL, NULL);
        }
    }
    int nargs = argc - optind;
    if (is_enc) {
        if (o.nspecs != 1) die_usage("encode needs exactly one --codec SPEC%s", "");
        if (nargs != 2) die_usage("encode needs an input .f32 and an output .gcf file%s", "");
        encode_cmd(&o, argv[optind], argv[optind + 1]);
    } else if (is_dec) {
        if (nargs != 2) die_usage("decode needs an input .gcf and an output .f32 file%s", "");
        decode_cmd(argv[optind], argv[optind + 1]);
    } else if (is_stats) {
        if (o.nspecs == 0) die_usage("stats needs --codec SPEC (or --codec all)%s", "");
        if (nargs != 1) die_usage("stats needs one input .f32 file%s", "");
        stats_cmd(&o, argv[optind]);
    } else {
        if (nargs != 1) die_usage("info needs one .gcf or .safetensors file%s", "");
        info_cmd(argv[optind]);
    }
    return 0;
}
