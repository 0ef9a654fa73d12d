/* Single-core GCOMP throughput and size, measured in thread CPU time.
 *
 *   cc -std=c11 -D_GNU_SOURCE -O3 -march=native -fopenmp -DHAVE_OPENMP -I. dev/gcomp_bench.c build/libgcx.a \
 *      -lm -lz -o build/gcomp_bench && OMP_NUM_THREADS=1 build/gcomp_bench [n] [runs]
 *
 * bench/codecs.c measures wall time over every codec; on a machine shared with
 * other jobs wall time swings with the load, so this tool reports the best
 * of `runs` measurements of CLOCK_THREAD_CPUTIME_ID (1 thread: CodecSide.threads
 * = 1 and OMP_NUM_THREADS=1 for the decoder), in GB/s of float32 input, and
 * bits per value (frame header included). Data:
 *   normal30   N(0, 1e-3) with 30% exact zeros
 *   student3   Student-t(3) * 1e-3, no zeros (the data of bench/codecs.c)
 *   late50     N(0, 5e-5) with 50% zeros, levels from the SGD metric of
 *              Section 5.1 (theta ~ N(0, 0.05), eta = 0.1)
 * each with levels 0 (lossless) and with levels (random for the first two). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/rng.h"
#include "compress/codec.h"

static double cpu_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void make_data(float *x, uint8_t *lv, size_t n, int kind) {
    Rng r;
    rng_init(&r, 1234, (uint64_t)kind);
    for (size_t i = 0; i < n; i++) {
        if (kind == 0) {
            x[i] = rng_uniform(&r) < 0.3f ? 0.0f : rng_normal(&r) * 1e-3f;
            lv[i] = (uint8_t)rng_below(&r, 4);
        } else if (kind == 1) {
            float z = rng_normal(&r), c = 0;
            for (int k = 0; k < 3; k++) {
                float t = rng_normal(&r);
                c += t * t;
            }
            x[i] = z / sqrtf(c / 3) * 1e-3f;
            lv[i] = (uint8_t)rng_below(&r, 4);
        } else {
            x[i] = rng_uniform(&r) < 0.5f ? 0.0f : rng_normal(&r) * 5e-5f;
            float theta = rng_normal(&r) * 0.05f;
            double delta = x[i] != 0 ? fabs(theta / (0.1 * x[i])) : 0;
            lv[i] = delta > 0x1p18 ? 3 : delta > 0x1p12 ? 2 : delta > 0x1p6 ? 1 : 0;
        }
    }
}

int main(int argc, char **argv) {
    size_t n = argc > 1 ? (size_t)atol(argv[1]) : 4u << 20;
    int runs = argc > 2 ? atoi(argv[2]) : 7;
    const char *names[3] = {"normal30", "student3", "late50"};
    float *x = malloc(n * 4), *y = malloc(n * 4);
    uint8_t *lv = malloc(n);
    CodecSpec s;
    char err[128];
    if (codec_parse(&s, "gcomp", err, sizeof err)) return 1;
    printf("gcomp, n = %zu, 1 thread, best of %d (thread CPU time)\n", n, runs);
    printf("%-9s %-7s %9s %8s %10s %10s\n", "data", "levels", "bits/val", "% fp32", "enc GB/s", "dec GB/s");
    for (int kind = 0; kind < 3; kind++) {
        make_data(x, lv, n, kind);
        for (int use = 0; use < 2; use++) {
            Codec *e = codec_new(&s), *d = codec_new(&s);
            size_t cap = codec_max_frame(e, n);
            uint8_t *f = malloc(cap);
            CodecSide side = {.levels = use ? lv : NULL, .threads = 1};
            int64_t len = codec_encode(e, f, cap, x, n, &side); /* bootstrap frame */
            if (len < 0 || codec_decode(d, y, n, f, (size_t)len) != 0) return 1;
            double be = 1e30, bd = 1e30;
            for (int r = 0; r < runs; r++) {
                double t0 = cpu_now();
                len = codec_encode(e, f, cap, x, n, &side);
                double t1 = cpu_now();
                int rc = codec_decode(d, y, n, f, (size_t)len);
                double t2 = cpu_now();
                if (len < 0 || rc) return 1;
                be = t1 - t0 < be ? t1 - t0 : be;
                bd = t2 - t1 < bd ? t2 - t1 : bd;
            }
            double bits = 8.0 * (double)len / (double)n;
            printf("%-9s %-7s %9.3f %7.1f%% %10.3f %10.3f\n", names[kind], use ? (kind == 2 ? "metric" : "random") : "0",
                   bits, 100 * bits / 32, 4.0 * (double)n / be / 1e9, 4.0 * (double)n / bd / 1e9);
            free(f);
            codec_free(e);
            codec_free(d);
        }
    }
    free(x), free(y), free(lv);
    return 0;
}
