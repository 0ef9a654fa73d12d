/* Seconds on the monotonic clock (unaffected by changes of the wall clock), for
 * measuring intervals: step times, deadlines, benchmarks. */
#ifndef GC_CLOCK_H
#define GC_CLOCK_H

#include <time.h>

static inline double mono_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#endif
