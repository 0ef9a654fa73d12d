/* Codec throughput and size benchmark.
 *
 *   build/bench/codecs [--sizes 1M,16M,64M] [--codec SPEC]... [--threads N]
 *                      [--input grad.f32] [--markdown FILE] [--min-time SEC] [--repr]
 *
 * For every registered codec (or each --codec SPEC) and every size: encode
 * and decode throughput in GB/s of float32 input (4 bytes per value), encode
 * with 1 thread and with N threads (CodecSide.threads; decoders run serially,
 * except gcomp's, which decodes its chunks on every OpenMP thread from 65,536
 * values up), next to memcpy bandwidth of the same buffer measured in the same run, and
 * bits per value (frame bytes * 8 / n, header included). Data: heavy-tailed,
 * gradient-like Student-t (nu = 3) values scaled by 1e-3. A second table gives
 * bits per value and errors on 1M values of several distributions (Student-t
 * nu=3, Laplace, normal, and the --input file if given).
 *
 * Times are the best of repeated runs (each size runs for at least --min-time
 * seconds per measurement, default 0.3), after one warm-up run.
 */
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/check.h"
#include "common/rng.h"
#include "compress/codec.h"
#include "bench/bench.h"

#ifdef HAVE_OPENMP
#include <omp.h>
#endif

#define MAX_SPECS 32
#define MAX_SIZES 8

static int max_threads(void) {
#ifdef HAVE_OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

static void usage(FILE *fp) {
    fprintf(fp,
            "usage: codecs [options]\n"
            "  --sizes LIST     comma-separated value counts, k/M/G = 2^10/2^20/2^30 (default 1M,16M,64M)\n"
            "  --codec SPEC     codec to run, NAME[:key=value,...]; repeat for several (default: all, defaults)\n"
            "  --threads N      thread count of the multi-thread rows (default: OpenMP max, %d here)\n"
            "  --input FILE     raw little-endian float32 file (e.g. a saved gradient) for the bits table\n"
            "  --markdown FILE  also write the tables as markdown to FILE\n"
            "  --min-time SEC   time per measurement (default 0.3)\n"
            "  --repr           encode also fills CodecSide.repr (as error feedback does)\n"
            "  --help\n",
            max_threads());
}

static int parse_count(const char *s, size_t *out) {
    char *end;
    double v = strtod(s, &end);
    if (end == s || !(v > 0)) return -1;
    if (*end == 'k' || *end == 'K') v *= 1024.0, end++;
    else if (*end == 'm' || *end == 'M') v *= 1048576.0, end++;
    else if (*end == 'g' || *end == 'G') v *= 1073741824.0, end++;
    if (*end || v != floor(v) || v > 4294967295.0) return -1;
    *out = (size_t)v;
    return 0;
}

/* counter-based normal from two uniforms (Box-Muller) */
static double hnormal(uint64_t seed, uint64_t i) {
    double u1 = ((double)(rng_hash64(seed, 2 * i) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
    double u2 = (double)(rng_hash64(seed, 2 * i + 1) >> 11) * (1.0 / 9007199254740992.0);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

/* kind 0: Student-t nu=3, 1: Laplace, 2: normal; scaled by 1e-3. x: [n] */
static void gen(float *x, size_t n, int kind, uint64_t seed) {
#ifdef HAVE_OPENMP
#pragma omp parallel for schedule(static)
#endif
    for (size_t i = 0; i < n; i++) {
        double v;
        if (kind == 0) {
            double z = hnormal(seed, 4 * i), a = hnormal(seed, 4 * i + 1), b = hnormal(seed, 4 * i + 2),
                   c = hnormal(seed, 4 * i + 3);
            v = z / sqrt((a * a + b * b + c * c) / 3.0);
        } else if (kind == 1) {
            double u = ((double)(rng_hash64(seed, i) >> 11) + 0.5) * (1.0 / 9007199254740992.0) - 0.5;
            v = (u < 0 ? 1.0 : -1.0) * log(1.0 - 2.0 * fabs(u));
        } else {
            v = hnormal(seed, i);
        }
        x[i] = (float)(1e-3 * v);
    }
}

typedef struct {
    double enc1, encN, dec, bpv; /* GB/s, GB/s, GB/s, bits per value */
    int err;
} Result;

/* best time of one encode (threads) over at least min_time seconds */
static double time_encode(Codec *c, uint8_t *frame, size_t cap, const float *x, size_t n, int threads, float *repr,
                          double min_time, int64_t *len) {
    CodecSide side;
    memset(&side, 0, sizeof side);
    side.threads = threads;
    side.repr = repr;
    double best = 1e30, start = mono_seconds();
    int reps = 0;
    do {
        side.seed = (uint64_t)reps;
        double t0 = mono_seconds();
        *len = codec_encode(c, frame, cap, x, n, &side);
        double t = mono_seconds() - t0;
        if (*len < 0) return -1;
        if (reps > 0 && t < best) best = t; /* the first run warms up */
        reps++;
    } while (reps < 3 || mono_seconds() - start < min_time);
    return best;
}

static double time_decode(Codec *c, float *out, size_t n, const uint8_t *frame, size_t len, double min_time) {
    double best = 1e30, start = mono_seconds();
    int reps = 0;
    do {
        double t0 = mono_seconds();
        if (codec_decode(c, out, n, frame, len) != 0) return -1;
        double t = mono_seconds() - t0;
        if (reps > 0 && t < best) best = t;
        reps++;
    } while (reps < 3 || mono_seconds() - start < min_time);
    return best;
}

static double time_memcpy(float *dst, const float *src, size_t n, double min_time) {
    double best = 1e30, start = mono_seconds();
    int reps = 0;
    do {
        double t0 = mono_seconds();
        memcpy(dst, src, 4 * n);
        double t = mono_seconds() - t0;
        if (reps > 0 && t < best) best = t;
        reps++;
    } while (reps < 3 || mono_seconds() - start < min_time);
    return best;
}

static void out2(FILE *md, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void out2(FILE *md, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    if (md) {
        va_list aq;
        va_copy(aq, ap);
        vfprintf(md, fmt, aq);
        va_end(aq);
    }
    va_end(ap);
}

int main(int argc, char **argv) {
    size_t sizes[MAX_SIZES] = {1u << 20, 16u << 20, 64u << 20};
    int nsizes = 3;
    CodecSpec specs[MAX_SPECS];
    int nspecs = 0;
    int threads = max_threads();
    const char *input = NULL, *mdpath = NULL;
    double min_time = 0.3;
    int want_repr = 0;
    static const struct option opts[] = {
        {"sizes", required_argument, 0, 's'}, {"codec", required_argument, 0, 'c'},
        {"threads", required_argument, 0, 't'}, {"input", required_argument, 0, 'i'},
        {"markdown", required_argument, 0, 'm'}, {"min-time", required_argument, 0, 'T'},
        {"repr", no_argument, 0, 'r'}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0},
    };
    int o;
    char err[256];
    while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (o) {
        case 's': {
            nsizes = 0;
            char buf[256];
            snprintf(buf, sizeof buf, "%s", optarg);
            char *save = NULL;
            for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
                if (nsizes == MAX_SIZES || parse_count(tok, &sizes[nsizes])) {
                    fprintf(stderr, "codecs: bad --sizes entry '%s' (want e.g. 1M,16M; at most %d)\n", tok,
                            MAX_SIZES);
                    usage(stderr);
                    return 2;
                }
                nsizes++;
            }
            if (!nsizes) {
                usage(stderr);
                return 2;
            }
            break;
        }
        case 'c':
            if (nspecs == MAX_SPECS || codec_parse(&specs[nspecs], optarg, err, sizeof err)) {
                fprintf(stderr, "codecs: --codec %s: %s\n", optarg, nspecs == MAX_SPECS ? "too many" : err);
                usage(stderr);
                return 2;
            }
            nspecs++;
            break;
        case 't': {
            char *end;
            long v = strtol(optarg, &end, 10);
            if (*end || v < 1 || v > 1024) {
                fprintf(stderr, "codecs: --threads wants an integer in [1, 1024], got '%s'\n", optarg);
                usage(stderr);
                return 2;
            }
            threads = (int)v;
            break;
        }
        case 'i': input = optarg; break;
        case 'm': mdpath = optarg; break;
        case 'T': {
            char *end;
            min_time = strtod(optarg, &end);
            if (*end || !(min_time >= 0 && min_time <= 60)) {
                fprintf(stderr, "codecs: --min-time wants seconds in [0, 60], got '%s'\n", optarg);
                usage(stderr);
                return 2;
            }
            break;
        }
        case 'r': want_repr = 1; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "codecs: unexpected argument '%s'\n", argv[optind]);
        usage(stderr);
        return 2;
    }
    if (!nspecs)
        for (int i = 0; i < codec_count() && nspecs < MAX_SPECS; i++) codec_spec_default(&specs[nspecs++], codec_ops_at(i));

    FILE *md = NULL;
    if (mdpath) md = fopenCheck(mdpath, "w");

    size_t nmax = 0;
    for (int k = 0; k < nsizes; k++) nmax = sizes[k] > nmax ? sizes[k] : nmax;
    float *x = mallocCheck(4 * nmax), *y = mallocCheck(4 * nmax), *repr = want_repr ? mallocCheck(4 * nmax) : NULL;
    size_t capmax = 0;
    for (int s = 0; s < nspecs; s++) {
        Codec *c = codec_new(&specs[s]);
        size_t cap = codec_max_frame(c, nmax);
        capmax = cap > capmax ? cap : capmax;
        codec_free(c);
    }
    uint8_t *frame = mallocCheck(capmax);
    gen(x, nmax, 0, 1);
    memset(y, 0, 4 * nmax);
    if (repr) memset(repr, 0, 4 * nmax);
    memset(frame, 0, capmax);

    printf("throughput: GB/s of float32 input (4 bytes/value); data Student-t(3) * 1e-3; encode 1 thread and "
           "%d threads; decode serial (gcomp: every OpenMP thread from 64K values); best of runs >= %.2fs%s\n",
           threads, min_time, want_repr ? "; encode fills repr" : "");
    out2(md, "| codec | values | bits/value | ratio | encode 1T GB/s | encode %dT GB/s | decode GB/s | memcpy GB/s |\n",
         threads);
    out2(md, "|---|---:|---:|---:|---:|---:|---:|---:|\n");
    printf("%-34s %8s %10s %8s %10s %10s %10s %10s\n", "codec", "values", "bits/val", "ratio", "enc 1T", "enc NT",
           "decode", "memcpy");
    for (int k = 0; k < nsizes; k++) {
        size_t n = sizes[k];
        double tm = time_memcpy(y, x, n, min_time);
        double gbm = 4.0 * (double)n / tm / 1e9;
        char nbuf[32];
        if (n % (1u << 20) == 0) snprintf(nbuf, sizeof nbuf, "%zuM", n >> 20);
        else snprintf(nbuf, sizeof nbuf, "%zu", n);
        for (int s = 0; s < nspecs; s++) {
            char name[128];
            codec_spec_str(name, sizeof name, &specs[s]);
            Codec *c = codec_new(&specs[s]);
            size_t cap = codec_max_frame(c, n);
            int64_t len = 0;
            double t1 = time_encode(c, frame, cap, x, n, 1, repr, min_time, &len);
            double tN = threads > 1 ? time_encode(c, frame, cap, x, n, threads, repr, min_time, &len) : t1;
            codec_free(c);
            c = codec_new(&specs[s]); /* fresh state: stateful decoders see the frame as the first one */
            {
                CodecSide side;
                memset(&side, 0, sizeof side);
                side.threads = threads;
                Codec *e = codec_new(&specs[s]);
                len = codec_encode(e, frame, cap, x, n, &side);
                codec_free(e);
            }
            double td = len > 0 ? time_decode(c, y, n, frame, (size_t)len, min_time) : -1;
            codec_free(c);
            if (t1 < 0 || tN < 0 || td < 0 || len <= 0) {
                printf("%-34s %8s  failed (%s)\n", name, nbuf, len < 0 ? gc_strerror((int)len) : "decode");
                out2(md, "| %s | %s | failed | | | | | |\n", name, nbuf);
                continue;
            }
            double bytes = 4.0 * (double)n, bpv = 8.0 * (double)len / (double)n;
            printf("%-34s %8s %10.3f %8.1f %10.2f %10.2f %10.2f %10.2f\n", name, nbuf, bpv, 32.0 / bpv,
                   bytes / t1 / 1e9, bytes / tN / 1e9, bytes / td / 1e9, gbm);
            out2(md, "| %s | %s | %.3f | %.1f | %.2f | %.2f | %.2f | %.2f |\n", name, nbuf, bpv, 32.0 / bpv,
                 bytes / t1 / 1e9, bytes / tN / 1e9, bytes / td / 1e9, gbm);
            fflush(stdout);
        }
    }

    /* bits per value and error on several data sets of 1M values */
    const char *dname[4] = {"student-t(3)", "laplace", "normal", input};
    int nd = input ? 4 : 3;
    size_t nb = nmax < (1u << 20) ? nmax : (1u << 20);
    float *d = x;
    size_t dn[4] = {nb, nb, nb, 0};
    float *fin = NULL;
    if (input) {
        FILE *f = fopen(input, "rb");
        if (!f) {
            fprintf(stderr, "codecs: cannot open --input '%s'\n", input);
            return 1;
        }
        fseek(f, 0, SEEK_END);
        long sz = ftell(f);
        fseek(f, 0, SEEK_SET);
        if (sz <= 0 || sz % 4) {
            fprintf(stderr, "codecs: --input '%s' is not a float32 file (%ld bytes)\n", input, sz);
            return 1;
        }
        dn[3] = (size_t)sz / 4;
        fin = mallocCheck((size_t)sz);
        freadCheck(fin, 4, dn[3], f);
        fclose(f);
    }
    printf("\nbits per value and error (rms error relative to rms of the data)\n");
    out2(md, "\n| codec | data | values | bits/value | ratio | max abs err | rel rms err |\n");
    out2(md, "|---|---|---:|---:|---:|---:|---:|\n");
    printf("%-34s %-14s %9s %10s %8s %12s %12s\n", "codec", "data", "values", "bits/val", "ratio", "max|err|",
           "rel rms");
    for (int di = 0; di < nd; di++) {
        size_t n = dn[di];
        float *src = di == 3 ? fin : d;
        if (di < 3) gen(src, n, di, 7);
        float *dec = mallocCheck(4 * n);
        for (int s = 0; s < nspecs; s++) {
            char name[128];
            codec_spec_str(name, sizeof name, &specs[s]);
            Codec *c = codec_new(&specs[s]);
            size_t cap = codec_max_frame(c, n);
            uint8_t *fr = mallocCheck(cap);
            CodecSide side;
            memset(&side, 0, sizeof side);
            side.threads = 1;
            int64_t len = codec_encode(c, fr, cap, src, n, &side);
            codec_free(c);
            c = codec_new(&specs[s]);
            int rc = len > 0 ? codec_decode(c, dec, n, fr, (size_t)len) : (int)len;
            codec_free(c);
            free(fr);
            if (rc) {
                printf("%-34s %-14s failed: %s\n", name, dname[di], gc_strerror(rc));
                continue;
            }
            double maxe = 0, se = 0, sx = 0;
            for (size_t i = 0; i < n; i++) {
                double e = fabs((double)dec[i] - (double)src[i]);
                maxe = e > maxe ? e : maxe;
                se += e * e;
                sx += (double)src[i] * src[i];
            }
            double bpv = 8.0 * (double)len / (double)n, rel = sx > 0 ? sqrt(se / sx) : 0;
            printf("%-34s %-14s %9zu %10.3f %8.1f %12.3e %12.3e\n", name, dname[di], n, bpv, 32.0 / bpv, maxe, rel);
            out2(md, "| %s | %s | %zu | %.3f | %.1f | %.3e | %.3e |\n", name, dname[di], n, bpv, 32.0 / bpv, maxe,
                 rel);
        }
        free(dec);
    }
    if (md) fcloseCheck(md);
    free(fin);
    free(x);
    free(y);
    free(repr);
    free(frame);
    return 0;
}
