/* Scratch benchmark for the sparse codecs' selection and coding (engineer B).
 *
 *   cc -std=c11 -O3 -march=native -D_GNU_SOURCE -I. dev/bench_sparse.c build/libgcx.a -lm -lz -fopenmp \
 *      -o build/bench_sparse && build/bench_sparse [n]
 *
 * Prints, per key mode and density, the time of select_topk and how it went
 * (sampled / fallback / candidates), then encode and decode GB/s of topk, dgc
 * and sbc at their defaults, best of 5 runs, on Student-t(3) data like
 * bench/codecs.c. Times are thread CPU time (single-threaded code), which
 * stays meaningful on a loaded machine; bench/codecs.c gives wall time. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/rng.h"
#include "compress/codec.h"
#include "compress/select.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts); /* CPU time: the dev machine is shared by many jobs */
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv) {
    size_t n = argc > 1 ? (size_t)atol(argv[1]) : (size_t)1 << 22;
    float *x = malloc(n * 4);
    Rng r;
    rng_init(&r, 1, 0);
    for (size_t i = 0; i < n; i++) { /* Student-t(3) = N / sqrt(chi2_3 / 3) */
        float z = rng_normal(&r), a = rng_normal(&r), b = rng_normal(&r), c = rng_normal(&r);
        x[i] = 1e-3f * z / sqrtf((a * a + b * b + c * c) / 3.0f);
    }
    uint32_t *idx = malloc(n * 4);
    static const double ds[] = {0.001, 0.01, 0.05, 0.25};
    static const char *mn[] = {"mag", "pos", "neg"};
    for (int mode = 0; mode < 3; mode++)
        for (int d = 0; d < 4; d++) {
            size_t k = select_count(ds[d], n);
            SelectInfo info;
            double best = 1e9;
            int64_t c = 0;
            for (int rep = 0; rep < 5; rep++) {
                double t0 = now();
                c = select_topk(idx, &info, x, n, k, (SelectKey)mode);
                double t = now() - t0;
                if (t < best) best = t;
            }
            printf("select %-3s d=%-5g n=%zu k=%zu got=%lld  %.2f ms = %.2f GB/s  sampled %d fallback %d m=%zu cand=%zu "
                   "(%.2fk)\n",
                   mn[mode], ds[d], n, k, (long long)c, best * 1e3, 4.0 * (double)n / best / 1e9, info.sampled,
                   info.fallback, info.sample, info.candidates, (double)info.candidates / (double)k);
        }
    static const char *specs[] = {"topk", "dgc", "sbc", "sbc:p=0.01"};
    float *out = malloc(n * 4);
    for (int s = 0; s < 4; s++) {
        CodecSpec sp;
        char err[128];
        codec_parse(&sp, specs[s], err, sizeof err);
        Codec *c = codec_new(&sp);
        size_t cap = codec_max_frame(c, n);
        uint8_t *frame = malloc(cap);
        double be = 1e9, bd = 1e9;
        int64_t len = 0;
        for (int rep = 0; rep < 5; rep++) {
            double t0 = now();
            len = codec_encode(c, frame, cap, x, n, NULL);
            double t1 = now();
            codec_decode(c, out, n, frame, (size_t)len);
            double t2 = now();
            if (t1 - t0 < be) be = t1 - t0;
            if (t2 - t1 < bd) bd = t2 - t1;
        }
        printf("%-12s n=%zu  %8lld B  encode %.2f GB/s  decode %.2f GB/s\n", specs[s], n, (long long)len,
               4.0 * (double)n / be / 1e9, 4.0 * (double)n / bd / 1e9);
        free(frame);
        codec_free(c);
    }
    free(out);
    free(idx);
    free(x);
    return 0;
}
