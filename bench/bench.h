/* Helpers shared by the benchmark programs of bench/. */
#ifndef GC_BENCH_H
#define GC_BENCH_H

#include <stdlib.h>

#include "common/clock.h" /* mono_seconds(): the benchmarks' clock */

/* *out = s as a decimal integer in [lo, hi]; 0 when s is not one */
static inline int parse_int(const char *s, int lo, int hi, int *out) {
    char *end;
    long v = strtol(s, &end, 10);
    if (*s == 0 || *end != 0 || v < lo || v > hi) return 0;
    *out = (int)v;
    return 1;
}

/* qsort order of doubles */
static inline int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

#endif
