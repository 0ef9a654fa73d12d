/* GPU codec throughput next to the device-to-device copy bandwidth.
 *
 *   build/bench/codecs_gpu [--sizes 1M,16M,64M] [--codec SPEC]... [--min-time SEC]
 *
 * For every registered codec (or each --codec SPEC) and every size, in GB/s of
 * float32 input (4 bytes per value):
 *   kernels  codec_encode_cuda_payload: the payload left in device memory (the
 *            codec's kernels and the small host steps they need, e.g. the
 *            table schedule of gcomp, the Golomb coding of sbc)
 *   frame    codec_encode_cuda: payload copied to a host frame, header + CRC
 *   decode   codec_decode_cuda: host frame to device floats
 *   dframe   codec_encode_cuda_dev: the whole frame in device memory, its CRC
 *            computed there (the exchange's bundles over NCCL)
 *   ddecode  codec_decode_cuda_dev: device frame to device floats
 * and per size the device CRC-32C of the 4n input bytes (crc32c_cuda),
 * next to cudaMemcpy device-to-device of the same 4n bytes measured in the same
 * run ("copy", counted as 4n bytes per copy, i.e. half the DRAM traffic), the
 * kernels column as a fraction of it, and bits per value (frame bytes * 8 / n).
 * Data: heavy-tailed, gradient-like Student-t (nu = 3) values scaled by 1e-3,
 * as bench/codecs.c. Times are the best of repeated runs (each measurement
 * lasts at least --min-time seconds, default 0.3), after one warm-up run.
 * Goal (docs/GPU.md): quantizers' kernels at half the copy bandwidth or better.
 */
#include <getopt.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "compress/codec.h"

#ifndef HAVE_CUDA
int main(void) {
    printf("codecs_gpu: this build has no CUDA (nvcc not found, or NO_CUDA=1)\n");
    return 0;
}
#else

#include "common/cuda_check.h"
#include "common/rng.h"
#include "compress/codec_cuda.h"
#include "bench/bench.h"

#define MAX_SPECS 32
#define MAX_SIZES 8

static void usage(FILE *fp) {
    fprintf(fp, "usage: codecs_gpu [options]\n"
                "  --sizes LIST     comma-separated value counts, k/M/G = 2^10/2^20/2^30 (default 1M,16M,64M)\n"
                "  --codec SPEC     codec to run, NAME[:key=value,...]; repeat for several (default: all, defaults)\n"
                "  --min-time SEC   time per measurement (default 0.3)\n"
                "  --help\n");
}

static int parse_size(size_t *out, const char *s) {
    char *end = NULL;
    double v = strtod(s, &end);
    if (end == s || !(v > 0)) return -1;
    double m = 1;
    if (*end == 'k' || *end == 'K') m = 1024.0, end++;
    else if (*end == 'M' || *end == 'm') m = 1048576.0, end++;
    else if (*end == 'G' || *end == 'g') m = 1073741824.0, end++;
    if (*end) return -1;
    v *= m;
    if (v > 4294967295.0 || v != floor(v)) return -1;
    *out = (size_t)v;
    return 0;
}

/* Student-t, nu = 3, scaled by 1e-3 */
static void gen(float *x, size_t n, uint64_t seed) {
    Rng r;
    rng_init(&r, seed, 0);
    for (size_t i = 0; i < n; i++) {
        double z = rng_normal(&r), c = 0;
        for (int k = 0; k < 3; k++) {
            double g = rng_normal(&r);
            c += g * g;
        }
        x[i] = (float)(1e-3 * z / sqrt(c / 3.0));
    }
}

/* best seconds per call of fn over at least min_time (after a warm-up) */
typedef int (*RunFn)(void *ctx);
static double best_time(RunFn fn, void *ctx, double min_time, int *fail) {
    if (fn(ctx)) {
        *fail = 1;
        return 0;
    }
    double best = 1e30, t0 = mono_seconds();
    int runs = 0;
    do {
        double a = mono_seconds();
        if (fn(ctx)) {
            *fail = 1;
            return 0;
        }
        cudaCheck(cudaStreamSynchronize(0)); /* the codec calls are stream-ordered: count their kernels */
        double t = mono_seconds() - a;
        best = t < best ? t : best;
        runs++;
    } while (mono_seconds() - t0 < min_time || runs < 3);
    return best;
}

typedef struct {
    CodecCuda *g;
    float *dx, *dout;
    uint8_t *dpay, *frame, *dframe;
    size_t n, cap;
    int64_t len;
    uint64_t seed;
    const uint8_t *src;
    void *dst;
} Ctx;

static int run_copy(void *p) {
    Ctx *c = p;
    cudaCheck(cudaMemcpy(c->dst, c->src, 4 * c->n, cudaMemcpyDeviceToDevice));
    cudaCheck(cudaDeviceSynchronize());
    return 0;
}

static int run_payload(void *p) {
    Ctx *c = p;
    CodecSide s = {0};
    s.seed = c->seed++;
    uint16_t fl;
    int64_t l = codec_encode_cuda_payload(c->g, c->dpay, c->cap, &fl, c->dx, c->n, &s);
    return l < 0;
}

static int run_frame(void *p) {
    Ctx *c = p;
    CodecSide s = {0};
    s.seed = c->seed++;
    c->len = codec_encode_cuda(c->g, c->frame, c->cap, c->dx, c->n, &s);
    return c->len < 0;
}

static int run_decode(void *p) {
    Ctx *c = p;
    return codec_decode_cuda(c->g, c->dout, c->n, c->frame, (size_t)c->len) != 0;
}

/* the whole frame in device memory (the exchange's bundles over NCCL) */
static int run_frame_dev(void *p) {
    Ctx *c = p;
    CodecSide s = {0};
    s.seed = c->seed++;
    c->len = codec_encode_cuda_dev(c->g, c->dframe, c->cap, c->dx, c->n, &s);
    return c->len < 0;
}

static int run_decode_dev(void *p) {
    Ctx *c = p;
    return codec_decode_cuda_dev(c->g, c->dout, c->n, c->dframe, (size_t)c->len) != 0;
}

static int run_crc(void *p) {
    Ctx *c = p;
    c->seed ^= crc32c_cuda(0, c->src, 4 * c->n);
    return 0;
}

int main(int argc, char **argv) {
    size_t sizes[MAX_SIZES] = {(size_t)1 << 20, (size_t)1 << 24, (size_t)1 << 26};
    int nsizes = 3, nspecs = 0;
    const char *specs[MAX_SPECS];
    double min_time = 0.3;
    static const struct option opts[] = {{"sizes", required_argument, 0, 's'},
                                         {"codec", required_argument, 0, 'c'},
                                         {"min-time", required_argument, 0, 't'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    int o;
    while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (o) {
        case 's': {
            nsizes = 0;
            char buf[256];
            snprintf(buf, sizeof buf, "%s", optarg);
            for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
                if (nsizes == MAX_SIZES || parse_size(&sizes[nsizes], t)) {
                    fprintf(stderr, "codecs_gpu: bad --sizes '%s'\n", optarg);
                    usage(stderr);
                    return 2;
                }
                nsizes++;
            }
            break;
        }
        case 'c':
            if (nspecs == MAX_SPECS) {
                fprintf(stderr, "codecs_gpu: at most %d --codec\n", MAX_SPECS);
                return 2;
            }
            specs[nspecs++] = optarg;
            break;
        case 't': {
            char *end = NULL;
            min_time = strtod(optarg, &end);
            if (end == optarg || *end || !(min_time >= 0) || min_time > 60) {
                fprintf(stderr, "codecs_gpu: bad --min-time '%s'\n", optarg);
                usage(stderr);
                return 2;
            }
            break;
        }
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind < argc || nsizes == 0) {
        usage(stderr);
        return 2;
    }
    if (nspecs == 0)
        for (int k = 0; k < codec_count(); k++) specs[nspecs++] = codec_ops_at(k)->name;
    CodecSpec parsed[MAX_SPECS];
    for (int s = 0; s < nspecs; s++) {
        char err[256];
        if (codec_parse(&parsed[s], specs[s], err, sizeof err)) {
            fprintf(stderr, "codecs_gpu: %s\n", err);
            return 2;
        }
    }
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        fprintf(stderr, "codecs_gpu: no CUDA device\n");
        return 1;
    }
    struct cudaDeviceProp prop;
    cudaCheck(cudaGetDeviceProperties(&prop, 0));
    printf("GPU codec throughput on %s; GB/s of float32 input (4 bytes/value), best of runs >= %.2f s\n", prop.name,
           min_time);
    printf("%-36s %9s %9s %9s %9s %9s %9s %9s %7s %10s\n", "codec", "values", "copy", "kernels", "frame", "decode",
           "dframe", "ddecode", "k/copy", "bits/value");
    for (int si = 0; si < nsizes; si++) {
        size_t n = sizes[si];
        float *x = malloc(n * sizeof(float));
        if (!x) {
            fprintf(stderr, "codecs_gpu: out of memory for %zu values\n", n);
            return 1;
        }
        gen(x, n, 42);
        Ctx c;
        memset(&c, 0, sizeof c);
        c.n = n;
        cudaCheck(cudaMalloc((void **)&c.dx, n * sizeof(float)));
        cudaCheck(cudaMalloc((void **)&c.dout, n * sizeof(float)));
        cudaCheck(cudaMemcpy(c.dx, x, n * sizeof(float), cudaMemcpyHostToDevice));
        c.src = (const uint8_t *)c.dx;
        c.dst = c.dout;
        int fail = 0;
        double tcopy = best_time(run_copy, &c, min_time, &fail);
        double copy_gbs = 4.0 * (double)n / tcopy / 1e9;
        double tcrc = best_time(run_crc, &c, min_time, &fail);
        printf("%-36s %9zu %9.1f %9.1f\n", "crc32c on the device", n, copy_gbs, 4.0 * (double)n / tcrc / 1e9);
        for (int s = 0; s < nspecs; s++) {
            c.g = codec_cuda_new(&parsed[s]);
            c.cap = codec_cuda_max_frame(c.g, n);
            cudaCheck(cudaMalloc((void **)&c.dpay, c.cap));
            cudaCheck(cudaMalloc((void **)&c.dframe, c.cap));
            c.frame = malloc(c.cap);
            fail = 0;
            double tk = best_time(run_payload, &c, min_time, &fail);
            double tf = fail ? 0 : best_time(run_frame, &c, min_time, &fail);
            if (!fail) { /* decode a first frame of a fresh encoder: gcomp's carries its table */
                CodecCuda *ge = codec_cuda_new(&parsed[s]);
                CodecSide s0 = {0};
                c.len = codec_encode_cuda(ge, c.frame, c.cap, c.dx, n, &s0);
                fail = c.len < 0;
                codec_cuda_free(ge);
            }
            double td = fail ? 0 : best_time(run_decode, &c, min_time, &fail);
            double tfd = 0, tdd = 0;
            if (!fail) { /* the same in device memory */
                CodecCuda *ge = codec_cuda_new(&parsed[s]);
                CodecSide s0 = {0};
                int64_t l0 = codec_encode_cuda_dev(ge, c.dframe, c.cap, c.dx, n, &s0);
                fail = l0 != c.len;
                codec_cuda_free(ge);
                tdd = fail ? 0 : best_time(run_decode_dev, &c, min_time, &fail);
                tfd = fail ? 0 : best_time(run_frame_dev, &c, min_time, &fail);
            }
            char name[64];
            codec_spec_str(name, sizeof name, &parsed[s]);
            if (fail) {
                printf("%-36s %9zu  (failed)\n", name, n);
            } else {
                double gk = 4.0 * (double)n / tk / 1e9, gf = 4.0 * (double)n / tf / 1e9,
                       gd = 4.0 * (double)n / td / 1e9, gfd = 4.0 * (double)n / tfd / 1e9,
                       gdd = 4.0 * (double)n / tdd / 1e9;
                printf("%-36s %9zu %9.1f %9.1f %9.1f %9.1f %9.1f %9.1f %7.2f %10.3f\n", name, n, copy_gbs, gk, gf, gd,
                       gfd, gdd, gk / copy_gbs, 8.0 * (double)c.len / (double)n);
            }
            fflush(stdout);
            cudaCheck(cudaFree(c.dpay));
            cudaCheck(cudaFree(c.dframe));
            free(c.frame);
            codec_cuda_free(c.g);
        }
        cudaCheck(cudaFree(c.dx));
        cudaCheck(cudaFree(c.dout));
        free(x);
    }
    return 0;
}
#endif
