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

/* Time spent waiting for others (the --timeout of dist/comm_local.c and comm_mpi.c) that
 * does not count the spans in which this process itself did not run: stopped (SIGSTOP,
 * Ctrl-Z) and continued, or the machine suspended. The waiter polls at least every
 * `slice` seconds, and each poll adds the time since the last but at most two slices, so
 * a run paused for longer than its timeout is not taken for a stalled one, while a
 * worker that is stuck as the others keep polling still is. */
typedef struct {
    double last, waited, slice;
} WaitClock;

static inline void wait_clock_start(WaitClock *w, double slice) {
    w->last = mono_seconds();
    w->waited = 0;
    w->slice = slice;
}

/* the time waited so far, this poll included */
static inline double wait_clock_poll(WaitClock *w) {
    double now = mono_seconds(), d = now - w->last;
    w->last = now;
    w->waited += d < 2 * w->slice ? d : 2 * w->slice;
    return w->waited;
}

#endif
