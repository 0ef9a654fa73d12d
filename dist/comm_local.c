/* Local backend: N workers as threads of one process, exchanging through
 * shared memory. Each collective publishes a pointer per rank, meets at a
 * barrier, copies or reduces, and meets again before the published buffers may
 * change. Sums are taken in rank order, so results are deterministic and equal
 * to the MPI backend's wherever the MPI backend also sums in rank order. Bytes
 * are copied through the receiving ByteBuf's allocator (bytebuf_copy): the device
 * exchange's bundles in GPU memory go device to device between the workers, which
 * share one GPU.
 *
 * Byte accounting (identical on every backend, docs/DIST.md):
 *   allreduce  ring model: 2 (N-1)/N * bytes sent and received per rank
 *   allgatherv each rank sends its frame to N-1 peers and receives theirs
 *   gatherv    non-roots send their frame; the root receives them
 *   bcast      the root sends to N-1 ranks; each other rank receives once
 *   sendrecv   what was sent and what was received
 */
#include <pthread.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>

#include "common/check.h"
#include "common/clock.h"
#include "dist/comm.h"

void bytebuf_reserve(ByteBuf *b, size_t cap) {
    if (cap <= b->cap) return;
    size_t nc = b->cap ? b->cap : 4096;
    while (nc < cap) nc *= 2;
    uint8_t *p;
    if (b->mem) { /* an allocator without realloc: a new block, the old bytes copied */
        p = b->mem->alloc(nc);
        if (p && b->cap) bytebuf_copy(b, p, b->p, b->cap);
        if (p) b->mem->free(b->p);
    } else {
        p = realloc(b->p, nc);
    }
    if (!p) {
        gc_fatal("error: out of memory growing a %zu-byte buffer\n", nc);
    }
    b->p = p;
    b->cap = nc;
}

void bytebuf_reserve_fresh(ByteBuf *b, size_t cap) {
    if (cap <= b->cap) return;
    bytebuf_free(b);
    bytebuf_reserve(b, cap);
}

void bytebuf_copy_start(const ByteBuf *b, void *dst, const void *src, size_t n) {
    if (!n) return;
    if (b->mem && b->mem->copy) b->mem->copy(dst, src, n);
    else memcpy(dst, src, n);
}

void bytebuf_settle(const ByteBuf *b) {
    if (b->mem && b->mem->settle) b->mem->settle();
}

void bytebuf_copy(const ByteBuf *b, void *dst, const void *src, size_t n) {
    if (!n) return;
    bytebuf_copy_start(b, dst, src, n);
    bytebuf_settle(b);
}

void bytebuf_free(ByteBuf *b) {
    const ByteAlloc *mem = b->mem;
    if (mem) mem->free(b->p);
    else free(b->p);
    memset(b, 0, sizeof *b);
    b->mem = mem;
}

struct LocalGroup {
    int size;
    /* the barrier: a generation counter, and the generation each rank last arrived at */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int count;
    unsigned long gen;
    unsigned long *at;
    const void **ptr; /* published by each rank */
    size_t *len;
    int root_flag;
    ByteBuf scratch; /* shared reduction result */
};

LocalGroup *comm_local_group_new(int size) {
    LocalGroup *g = callocCheck(1, sizeof *g);
    g->size = size;
    g->ptr = callocCheck((size_t)size, sizeof *g->ptr);
    g->len = callocCheck((size_t)size, sizeof *g->len);
    g->at = callocCheck((size_t)size, sizeof *g->at);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* deadlines unaffected by changes of the wall clock */
    if (pthread_mutex_init(&g->mu, NULL) != 0 || pthread_cond_init(&g->cv, &ca) != 0) {
        gc_fatal("error: cannot create the barrier of %d workers\n", size);
    }
    pthread_condattr_destroy(&ca);
    return g;
}

void comm_local_group_free(LocalGroup *g) {
    if (!g) return;
    pthread_mutex_destroy(&g->mu);
    pthread_cond_destroy(&g->cv);
    free(g->at);
    free(g->ptr);
    free(g->len);
    bytebuf_free(&g->scratch);
    free(g);
}

static LocalGroup *grp(Comm *c) { return (LocalGroup *)c->impl; }

/* Every worker of the group meets here. With c->timeout, a worker that waits
 * longer ends the process naming the workers that did not arrive (a stalled or
 * stuck thread: the others would otherwise wait forever). */
static void meet(Comm *c, const char *op) {
    LocalGroup *g = grp(c);
    pthread_mutex_lock(&g->mu);
    unsigned long gen = g->gen;
    g->at[c->rank] = gen + 1;
    if (++g->count == g->size) {
        g->count = 0;
        g->gen++;
        pthread_cond_broadcast(&g->cv);
        pthread_mutex_unlock(&g->mu);
        return;
    }
    double t = c->timeout > 0 ? c->timeout : 0;
    WaitClock w;
    wait_clock_start(&w, 0.1); /* (a pause of the whole process is not a stall: common/clock.h) */
    while (g->gen == gen) {
        if (t <= 0) {
            pthread_cond_wait(&g->cv, &g->mu);
            continue;
        }
        struct timespec dl;
        clock_gettime(CLOCK_MONOTONIC, &dl);
        dl.tv_nsec += (long)(w.slice * 1e9); /* (a slice < 1 s) */
        if (dl.tv_nsec >= 1000000000L) {
            dl.tv_sec++;
            dl.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&g->cv, &g->mu, &dl);
        if (g->gen == gen && wait_clock_poll(&w) > t) {
            char who[512] = "";
            size_t at = 0;
            int missing = 0;
            for (int r = 0; r < g->size && at < sizeof who - 16; r++)
                if (g->at[r] != gen + 1) at += (size_t)snprintf(who + at, sizeof who - at, "%s%d", missing++ ? ", " : "", r);
            pthread_mutex_unlock(&g->mu);
            gc_fatal("error: step %ld: %s: worker%s %s did not arrive within %g s (--timeout; stalled or stuck); "
                     "stopping\n", c->step, op, missing > 1 ? "s" : "", who, t);
        }
    }
    pthread_mutex_unlock(&g->mu);
}

static void local_barrier(Comm *c) { meet(c, "barrier"); }

/* element range [lo, hi) of n split into size near-equal chunks, chunk r */
static void chunk_range(size_t n, int size, int r, size_t *lo, size_t *hi) {
    *lo = n * (size_t)r / (size_t)size;
    *hi = n * (size_t)(r + 1) / (size_t)size;
}

#define DEFINE_ALLREDUCE(NAME, T)                                                              \
    static void NAME(Comm *c, T *buf, size_t n, CommOp op) {                                   \
        LocalGroup *g = grp(c);                                                                \
        int N = g->size, r = c->rank;                                                          \
        if (r == 0) bytebuf_reserve(&g->scratch, n * sizeof(T));                               \
        g->ptr[r] = buf;                                                                       \
        meet(c, "allreduce");                                                                  \
        T *res = (T *)(void *)g->scratch.p;                                                    \
        size_t lo, hi;                                                                         \
        chunk_range(n, N, r, &lo, &hi);                                                        \
        const T *first = (const T *)g->ptr[0];                                                 \
        for (size_t i = lo; i < hi; i++) res[i] = first[i];                                    \
        for (int k = 1; k < N; k++) {                                                          \
            const T *src = (const T *)g->ptr[k];                                               \
            if (op == COMM_SUM)                                                                \
                for (size_t i = lo; i < hi; i++) res[i] += src[i];                             \
            else                                                                               \
                for (size_t i = lo; i < hi; i++) res[i] = src[i] > res[i] ? src[i] : res[i];   \
        }                                                                                      \
        meet(c, "allreduce");                                                                  \
        memcpy(buf, res, n * sizeof(T));                                                       \
        uint64_t bytes = N > 1 ? (uint64_t)(2.0 * (N - 1) / N * (double)(n * sizeof(T))) : 0; \
        c->sent += bytes;                                                                      \
        c->received += bytes;                                                                  \
        meet(c, "allreduce");                                                                  \
    }
DEFINE_ALLREDUCE(local_allreduce_f32, float)
DEFINE_ALLREDUCE(local_allreduce_f64, double)

static void local_allgatherv(Comm *c, ByteBuf *out, size_t *lens, const uint8_t *data, size_t len) {
    LocalGroup *g = grp(c);
    int N = g->size, r = c->rank;
    g->ptr[r] = data;
    g->len[r] = len;
    meet(c, "allgather");
    size_t total = 0;
    for (int k = 0; k < N; k++) total += g->len[k];
    bytebuf_reserve_fresh(out, total);
    size_t at = 0;
    for (int k = 0; k < N; k++) {
        lens[k] = g->len[k];
        bytebuf_copy_start(out, out->p + at, g->ptr[k], g->len[k]);
        at += g->len[k];
        if (k != r) c->received += g->len[k];
    }
    bytebuf_settle(out); /* before the peers may change what they published */
    out->len = total;
    c->sent += (uint64_t)len * (uint64_t)(N - 1);
    meet(c, "allgather");
}

static void local_gatherv(Comm *c, ByteBuf *out, size_t *lens, const uint8_t *data, size_t len, int root) {
    LocalGroup *g = grp(c);
    int N = g->size, r = c->rank;
    g->ptr[r] = data;
    g->len[r] = len;
    meet(c, "gather");
    if (r == root) {
        size_t total = 0;
        for (int k = 0; k < N; k++) total += g->len[k];
        bytebuf_reserve_fresh(out, total);
        size_t at = 0;
        for (int k = 0; k < N; k++) {
            lens[k] = g->len[k];
            bytebuf_copy_start(out, out->p + at, g->ptr[k], g->len[k]);
            at += g->len[k];
            if (k != r) c->received += g->len[k];
        }
        bytebuf_settle(out);
        out->len = total;
    } else {
        c->sent += len;
    }
    meet(c, "gather");
}

static void local_bcast(Comm *c, ByteBuf *buf, int root) {
    LocalGroup *g = grp(c);
    int N = g->size, r = c->rank;
    if (r == root) {
        g->ptr[root] = buf->p;
        g->len[root] = buf->len;
    }
    meet(c, "broadcast");
    if (r != root) {
        size_t len = g->len[root];
        bytebuf_reserve_fresh(buf, len);
        bytebuf_copy(buf, buf->p, g->ptr[root], len);
        buf->len = len;
        c->received += len;
    } else {
        c->sent += (uint64_t)buf->len * (uint64_t)(N - 1);
    }
    meet(c, "broadcast");
}

static void local_sendrecv(Comm *c, ByteBuf *out, int src, const uint8_t *data, size_t len, int dst) {
    LocalGroup *g = grp(c);
    int r = c->rank;
    (void)dst; /* every rank publishes; the receiver picks its source */
    g->ptr[r] = data;
    g->len[r] = len;
    meet(c, "send/receive");
    size_t n = g->len[src];
    bytebuf_reserve_fresh(out, n);
    bytebuf_copy(out, out->p, g->ptr[src], n);
    out->len = n;
    c->sent += len;
    c->received += n;
    meet(c, "send/receive");
}

static void local_free(Comm *c) { free(c); }

static const CommOps local_ops = {
    .name = "local",
    .barrier = local_barrier,
    .allreduce_f32 = local_allreduce_f32,
    .allreduce_f64 = local_allreduce_f64,
    .allgatherv = local_allgatherv,
    .gatherv = local_gatherv,
    .bcast = local_bcast,
    .sendrecv = local_sendrecv,
    .free = local_free,
};

Comm *comm_local_new(LocalGroup *g, int rank) {
    Comm *c = callocCheck(1, sizeof *c);
    c->ops = &local_ops;
    c->rank = rank;
    c->size = g->size;
    c->impl = g;
    return c;
}

typedef struct {
    void (*fn)(int, void *);
    void *arg;
    int rank;
} ThreadArg;

static void *thread_main(void *p) {
    ThreadArg *t = p;
    t->fn(t->rank, t->arg);
    return NULL;
}

void comm_local_run(int size, void (*fn)(int rank, void *arg), void *arg) {
    pthread_t *th = callocCheck((size_t)size, sizeof *th);
    ThreadArg *ta = callocCheck((size_t)size, sizeof *ta);
    for (int r = 0; r < size; r++) ta[r] = (ThreadArg){fn, arg, r};
    for (int r = 1; r < size; r++) {
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setstacksize(&attr, 16u << 20);
        if (pthread_create(&th[r], &attr, thread_main, &ta[r]) != 0) {
            gc_fatal("error: cannot start worker thread %d\n", r);
        }
        pthread_attr_destroy(&attr);
    }
    thread_main(&ta[0]);
    for (int r = 1; r < size; r++) pthread_join(th[r], NULL);
    free(th);
    free(ta);
}
