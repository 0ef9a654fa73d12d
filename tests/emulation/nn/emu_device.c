/* Tracked device memory for the host emulation (see cuda_runtime.h). Built with
 * -DEMU_NO_PROTECT (the calibration program, whose "GPU" ops are CPU code) the
 * pages stay accessible and nothing is checked. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cuda_runtime.h"

/* Under AddressSanitizer (EMU_ASAN=1) the bytes between an allocation's end and its last
 * page's end are poisoned, so an access just past the end is reported, to the byte, where
 * the page protection alone sees nothing; a freed allocation is poisoned whole. */
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define POISON(p, n) ((void)(p), (void)(n))
#define UNPOISON(p, n) ((void)(p), (void)(n))
#endif

#define MAXA 4096
#define MAXRD 8
typedef struct {
    int st;           /* the stream (a host thread's: stream_me), -1: none */
    unsigned long long seq; /* its operation's number on that stream */
} Use;
/* an allocation, and the operations of the streams that last wrote it and read it since */
static struct {
    char *p;
    size_t n, mapped;
    Use w, r[MAXRD];
    int nr;
} allocs[MAXA];
static int nallocs, open_depth;

/* Several host threads (the trainer's local workers) may use the "device": every device
 * operation runs between emu_dev_open and emu_dev_close under one recursive lock, so
 * operations run one at a time, as on one GPU stream, and the allocation table and the
 * page protection change under the lock. */
static pthread_mutex_t lock;
static pthread_once_t lock_once = PTHREAD_ONCE_INIT;
static void lock_init(void) {
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&lock, &a);
}
static void take(void) {
    pthread_once(&lock_once, lock_init);
    pthread_mutex_lock(&lock);
}
static void give(void) { pthread_mutex_unlock(&lock); }

static size_t page_round(size_t n) {
    size_t pg = (size_t)sysconf(_SC_PAGESIZE);
    return (n + pg - 1) / pg * pg;
}

static void protect_all(int prot) {
#ifdef EMU_NO_PROTECT
    return;
#endif
    for (int i = 0; i < nallocs; i++)
        if (mprotect(allocs[i].p, allocs[i].mapped, prot)) { perror("emu mprotect"); abort(); }
}

/* What is open: every allocation (all_open), or only those of the current operation's
 * pointers (opened[], e.g. a kernel's arguments), so that each operation changes the
 * protection of the pages it touches and no others: a launch over 3 buffers makes 6
 * mprotect calls, not 2 per live allocation. A kernel that reaches an allocation it was
 * not handed (through a pointer stored in memory) faults. */
#define MAXOPEN 64
static struct { char *p; size_t mapped; } opened[MAXOPEN];
static int nopened, all_open;

static void open_one(const void *q) {
    const char *p = q;
    if (!p || all_open) return;
    /* the allocation holding p; else the one p is the end of (adjacent mappings: the
     * end of one may be the start of the next, which then wins) */
    int at = -1;
    for (int i = 0; i < nallocs && (at < 0 || p == allocs[at].p + allocs[at].n); i++)
        if (p >= allocs[i].p && p <= allocs[i].p + allocs[i].n) at = i;
    if (at < 0) return; /* the caller has refused non-device pointers */
    for (int k = 0; k < nopened; k++)
        if (opened[k].p == allocs[at].p) return;
    if (nopened == MAXOPEN) { /* more than any launch has: open everything */
        protect_all(PROT_READ | PROT_WRITE);
        all_open = 1;
        return;
    }
#ifndef EMU_NO_PROTECT
    if (mprotect(allocs[at].p, allocs[at].mapped, PROT_READ | PROT_WRITE)) { perror("emu mprotect"); abort(); }
#endif
    opened[nopened].p = allocs[at].p, opened[nopened].mapped = allocs[at].mapped;
    nopened++;
}

void emu_dev_open(void) {
    take();
    open_depth++;
    if (!all_open) {
        protect_all(PROT_READ | PROT_WRITE);
        all_open = 1;
    }
}
/* Streams. Every host thread works on its own default stream (the project's per-thread
 * default streams, docs/GPU.md "Streams"), and may hand other streams it created to an
 * operation (NCCL's); the emulation numbers each (a thread's default stream, and each
 * other stream handle a thread uses, apart). Operations on one stream run in order; on
 * two streams a GPU may run them at once, unless the host has waited for the first one's
 * stream (cudaStreamSynchronize of that stream, cudaDeviceSynchronize, a copy between host
 * and device on it that returns only once it has run) before it issued the second. The
 * emulation runs every operation when it is issued, so it keeps, per allocation, the last
 * operation that wrote it and those that read it since (their stream and number), and
 * stops the run when an operation touches an allocation that another stream's operation
 * wrote (or, to write, read) and the host has not waited for that stream since: a kernel
 * reads through its pointers to const and may write through its other pointers (its
 * parameter types); a copy reads its source and writes its destination; an NCCL call (the
 * fake's, nccl/fake_nccl.c) reads what it sends and writes what it receives on the stream
 * it is given; cuBLAS's, cuDNN's and CUB's operands count as written. Waiting for a
 * stream before another stream uses its results is then checked on every run, where on a
 * GPU a missing wait shows only when the timing lets it */
typedef struct {
    unsigned long long issued, done; /* operations issued on it; of those, the ones the host waited for */
    int thread;                      /* the host thread's number */
    int other;                       /* a stream other than the thread's default */
} Stream;
static Stream *streams; /* under the lock; grown, never shrunk: a few per host thread */
static int nstreams, cstreams, nthreads;
static __thread int t_default = -1, t_thread = -1;
static __thread struct { cudaStream_t h; int id; } t_other[8];
static __thread int t_nother;
static int stream_new(int other) { /* under the lock */
    if (nstreams == cstreams) {
        cstreams = cstreams ? 2 * cstreams : 64;
        streams = realloc(streams, (size_t)cstreams * sizeof *streams);
        if (!streams) abort();
    }
    if (t_thread < 0) t_thread = nthreads++;
    streams[nstreams] = (Stream){0, 0, t_thread, other};
    return nstreams++;
}
/* the calling thread's stream s (0 and cudaStreamPerThread: its default), under the lock */
static cudaStream_t stream_of(cudaStream_t s) { return s == cudaStreamPerThread ? 0 : s; }
static int stream_id(cudaStream_t s) {
    if (stream_of(s) == 0) {
        if (t_default < 0) t_default = stream_new(0);
        return t_default;
    }
    for (int i = 0; i < t_nother; i++)
        if (t_other[i].h == s) return t_other[i].id;
    if (t_nother == (int)(sizeof t_other / sizeof t_other[0])) { fprintf(stderr, "emu: too many streams\n"); abort(); }
    t_other[t_nother].h = s;
    return t_other[t_nother++].id = stream_new(1);
}
/* the host has waited for the calling thread's stream s (EMU_ALL_STREAMS: for every
 * stream); also the waits of code built on ../emu_cuda.h (dist/comm_nccl.c in
 * train_resnet_nccl_emu) */
void emu_stream_waited(cudaStream_t s) {
    take();
    if (s == EMU_ALL_STREAMS)
        for (int i = 0; i < nstreams; i++) streams[i].done = streams[i].issued;
    else {
        int id = stream_id(s); /* first: it may grow streams */
        streams[id].done = streams[id].issued;
    }
    give();
}
static int alloc_at(const void *q) { /* as open_one's: the allocation holding q, or ending there */
    const char *p = q;
    int at = -1;
    for (int i = 0; i < nallocs && (at < 0 || p == allocs[at].p + allocs[at].n); i++)
        if (p >= allocs[i].p && p <= allocs[i].p + allocs[i].n) at = i;
    return at;
}
static int pending(Use u, int st) { return u.st >= 0 && u.st != st && streams[u.st].done < u.seq; }
static void race(const char *what, int st, const void *q, int a, const char *did, Use u) {
    fprintf(stderr,
            "emu: %s on host thread %d's %sstream uses device memory at %p (an allocation of %zu bytes) that host "
            "thread %d's %sstream %s in an operation the host has not waited for since: a GPU may run the two at "
            "once (wait for that stream, cudaStreamSynchronize, before another stream may use its results)\n",
            what, streams[st].thread, streams[st].other ? "other " : "", q, allocs[a].n, streams[u.st].thread,
            streams[u.st].other ? "other " : "", did);
    abort();
}
/* one operation of the calling thread's stream s on p[0..k) (w[i]: written; w NULL: all), under the lock */
static void stream_use(const char *what, cudaStream_t s, const void *const *p, const char *w, int k) {
    int st = stream_id(s);
    unsigned long long seq = ++streams[st].issued;
    for (int i = 0; i < k; i++) {
        int a = p[i] ? alloc_at(p[i]) : -1;
        if (a < 0) continue;
        int wr = w ? w[i] : 1;
        if (pending(allocs[a].w, st)) race(what, st, p[i], a, "wrote", allocs[a].w);
        for (int j = 0; wr && j < allocs[a].nr; j++)
            if (pending(allocs[a].r[j], st)) race(what, st, p[i], a, "read", allocs[a].r[j]);
        if (wr) {
            allocs[a].w = (Use){st, seq};
            allocs[a].nr = 0;
            continue;
        }
        int j = 0;
        while (j < allocs[a].nr && allocs[a].r[j].st != st) j++;
        if (j == allocs[a].nr && j == MAXRD) { /* the oldest read gives way (it may then go unchecked) */
            memmove(allocs[a].r, allocs[a].r + 1, (MAXRD - 1) * sizeof(Use));
            j = MAXRD - 1;
        } else if (j == allocs[a].nr) {
            allocs[a].nr++;
        }
        allocs[a].r[j] = (Use){st, seq};
    }
}
/* an NCCL call's operand p on stream s (nccl/fake_nccl.c): written (w) or read */
void emu_stream_use(const void *p, int w, cudaStream_t s) {
    char wr = (char)(w != 0);
    take();
    stream_use(w ? "an NCCL receive" : "an NCCL send", s, &p, &wr, 1);
    give();
}

void emu_dev_open_ptrs(const void *const *p, int k) {
    take();
    stream_use("an operation", 0, p, NULL, k);
    open_depth++;
    for (int i = 0; i < k; i++) open_one(p[i]);
}
/* the operands of an operation whose reads and writes stream_use was told already */
void emu_dev_open_used(const void *const *p, int k) {
    take();
    open_depth++;
    for (int i = 0; i < k; i++) open_one(p[i]);
}
void emu_dev_open_kernel(const char *name, const void *const *p, const char *w, int k) {
    take();
    char what[160];
    snprintf(what, sizeof what, "kernel %s", name);
    stream_use(what, 0, p, w, k);
    emu_dev_open_used(p, k);
    give();
}
void emu_dev_close(void) {
    if (--open_depth == 0) {
        if (all_open) protect_all(PROT_NONE);
#ifndef EMU_NO_PROTECT
        else
            for (int k = 0; k < nopened; k++)
                if (mprotect(opened[k].p, opened[k].mapped, PROT_NONE)) { perror("emu mprotect"); abort(); }
#endif
        all_open = 0;
        nopened = 0;
    }
    give();
}

/* inside an allocation or just past its end: a kernel may be handed the end of
 * a buffer with nothing left to read there (an empty tail), as in C */
int emu_is_dev(const void *q) {
    const char *p = q;
    int r = 0;
    take();
    for (int i = 0; i < nallocs && !r; i++)
        if (p >= allocs[i].p && p <= allocs[i].p + allocs[i].n) r = 1;
    give();
    return r;
}

void emu_dev_check(const void *p, const char *what) {
#ifdef EMU_NO_PROTECT
    return;
#endif
    if (p && !emu_is_dev(p)) {
        fprintf(stderr, "emu: %s is a HOST pointer (%p) where device memory belongs\n", what, p);
        abort();
    }
}

void emu_dev_span(const void *q, size_t bytes, const char *what) {
#ifdef EMU_NO_PROTECT
    return;
#endif
    const char *p = q;
    take();
    for (int i = 0; i < nallocs; i++)
        if (p >= allocs[i].p && p < allocs[i].p + (allocs[i].n ? allocs[i].n : 1)) {
            if ((size_t)(allocs[i].p + allocs[i].n - p) < bytes) {
                fprintf(stderr, "emu: %s needs %zu bytes at %p but its device allocation ends %zu bytes after it\n",
                        what, bytes, q, (size_t)(allocs[i].p + allocs[i].n - p));
                abort();
            }
            give();
            return;
        }
    fprintf(stderr, "emu: %s (%p, %zu bytes) is not device memory\n", what, q, bytes);
    abort();
}

static cudaError_t dev_alloc(void **p, size_t n) {
    take();
    if (nallocs == MAXA) { fprintf(stderr, "emu: too many device allocations\n"); abort(); }
    size_t m = page_round(n ? n : 1);
    void *q = mmap(NULL, m, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (q == MAP_FAILED) {
        give();
        return 2;
    }
    memset(q, 0xA5, m); /* garbage, as fresh device memory */
    POISON((char *)q + n, m - n);
#ifndef EMU_NO_PROTECT
    if (!all_open && mprotect(q, m, PROT_NONE)) { perror("emu mprotect"); abort(); }
#endif
    allocs[nallocs].p = q, allocs[nallocs].n = n, allocs[nallocs].mapped = m;
    allocs[nallocs].w.st = -1, allocs[nallocs].nr = 0;
    nallocs++;
    *p = q;
    give();
    return 0;
}

/* A freed allocation's pages stay mapped, inaccessible and out of the table, so a later
 * use of the freed pointer faults (or, as a kernel argument, is refused) instead of
 * landing in whatever a new mapping at the same address would hold; only the QUAR most
 * recent ones are kept (each is a kernel mapping), the oldest unmapped first. */
#define QUAR 8192
static struct { char *p; size_t mapped; } quar[QUAR];
static size_t nquar;
static void quarantine(char *p, size_t mapped) {
#ifdef EMU_NO_PROTECT
    UNPOISON(p, mapped);
    munmap(p, mapped);
    return;
#endif
    POISON(p, mapped);
    if (mprotect(p, mapped, PROT_NONE) || madvise(p, mapped, MADV_DONTNEED)) { perror("emu quarantine"); abort(); }
    size_t k = nquar++ % QUAR;
    if (quar[k].p) {
        UNPOISON(quar[k].p, quar[k].mapped); /* the next mapping there starts clean */
        munmap(quar[k].p, quar[k].mapped);
    }
    quar[k].p = p, quar[k].mapped = mapped;
}

static cudaError_t dev_free(void *p) {
    if (!p) return 0;
    take();
    for (int i = 0; i < nallocs; i++)
        if (allocs[i].p == p) {
            quarantine(allocs[i].p, allocs[i].mapped);
            allocs[i] = allocs[--nallocs];
            give();
            return 0;
        }
    fprintf(stderr, "emu: cudaFree of %p, not a device allocation\n", p);
    abort();
}

/* The calls that wait for the whole device, every host thread's stream (on a GPU: cudaMalloc,
 * cudaFree, cudaMallocHost, cudaFreeHost, cudaDeviceSynchronize), counted per calling thread
 * (emu_device_barriers) and, under EMU_COUNTS, by kind; the stream-ordered allocations
 * (cudaMallocAsync, cudaFreeAsync) are not among them */
static __thread unsigned long long device_barriers;
static void count_site(const char *name, const void *at);
static void barrier(const char *what) {
    device_barriers++;
    count_site(what, NULL);
}
/* a per-thread count, read and started again from 0 */
static unsigned long long drain(unsigned long long *c) {
    unsigned long long v = *c;
    *c = 0;
    return v;
}
unsigned long long emu_device_barriers(void) { return drain(&device_barriers); }

cudaError_t cudaMalloc(void **p, size_t n) {
    barrier("cudaMalloc (waits for the whole device)");
    return dev_alloc(p, n);
}
cudaError_t cudaFree(void *p) {
    if (p) barrier("cudaFree (waits for the whole device)");
    return dev_free(p);
}
cudaError_t emu_malloc_async(void **p, size_t n) {
    emu_count_op("cudaMallocAsync");
    return dev_alloc(p, n);
}
cudaError_t emu_free_async(void *p, cudaStream_t s) {
    emu_count_op("cudaFreeAsync");
    if (p && s != cudaStreamLegacy) { /* in stream order: after every use of it that stream_use knows (the
                                       * legacy stream's operations wait for every other stream first) */
        take();
        stream_use("cudaFreeAsync", s, (const void *const *)&p, "\1", 1);
        give();
    }
    return dev_free(p);
}

cudaError_t cudaMemset(void *p, int v, size_t n) {
    emu_dev_check(p, "cudaMemset's destination");
    if (p && n) emu_dev_span(p, n, "cudaMemset's destination");
    emu_count_op("cudaMemset");
    EMU_DEV_OPEN(p);
    memset(p, v, n);
    emu_dev_close();
    return 0;
}

static void pending_free_check(const char *p, size_t n);
/* pinned host allocations (cudaMallocHost), under the lock */
#define MAXH 1024
static struct { char *p; size_t n; } pinned[MAXH];
static int npinned;
static __thread unsigned long long pageable_bytes, pageable_max; /* the calling thread's */

cudaError_t cudaMallocHost(void **p, size_t n) {
    barrier("cudaMallocHost (waits for the whole device)");
    take();
    *p = npinned < MAXH ? malloc(n ? n : 1) : NULL;
    if (*p) {
        pinned[npinned].p = *p;
        pinned[npinned++].n = n;
    }
    give();
    return *p ? cudaSuccess : 2; /* cudaErrorMemoryAllocation */
}

cudaError_t cudaFreeHost(void *p) {
    if (!p) return cudaSuccess;
    barrier("cudaFreeHost (waits for the whole device)");
    take();
    int i = 0;
    while (i < npinned && pinned[i].p != p) i++;
    if (i == npinned) {
        fprintf(stderr, "emu: cudaFreeHost of %p, which cudaMallocHost did not return\n", p);
        abort();
    }
    pending_free_check(pinned[i].p, pinned[i].n);
    pinned[i] = pinned[--npinned];
    give();
    free(p);
    return cudaSuccess;
}

/* [q, q+n) inside one pinned allocation (under the lock) */
static int is_pinned(const void *q, size_t n) {
    const char *c = q;
    for (int i = 0; i < npinned; i++)
        if (c >= pinned[i].p && c + n <= pinned[i].p + pinned[i].n) return 1;
    return 0;
}

void emu_pageable_copies(unsigned long long *bytes, unsigned long long *largest) {
    *bytes = pageable_bytes;
    *largest = pageable_max;
    pageable_bytes = pageable_max = 0;
}

static __thread unsigned long long host_waits; /* the calling thread's (emu_host_waits) */
static __thread unsigned long long device_ops; /* the calling thread's (emu_device_ops) */

/* EMU_COUNTS=1: at exit, on stderr, every thread's operations issued to the device by kind
 * (a kernel's name, a CUB call, a copy) and its waits for the device by the code that
 * waited (its function, file and line, by addr2line), since the start or the last
 * emu_counts_reset(): where a step's launches and round trips come from. A site is a
 * kind's name (by its text) or a wait's return address */
#define MAXSITE 4096
static struct { const char *name; const void *at; unsigned long long n; } sites[MAXSITE];
static int nsites, counts_on;
static pthread_mutex_t sites_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t counts_once = PTHREAD_ONCE_INIT;
static void counts_print(void);
static void counts_init(void) {
    const char *e = getenv("EMU_COUNTS");
    counts_on = e && *e && strcmp(e, "0") != 0;
    if (counts_on) atexit(counts_print);
}
static void count_site(const char *name, const void *at) {
    pthread_once(&counts_once, counts_init);
    if (!counts_on) return;
    pthread_mutex_lock(&sites_lock);
    int i = 0;
    while (i < nsites && !(at ? sites[i].at == at : sites[i].name && !strcmp(sites[i].name, name))) i++;
    if (i == nsites && nsites < MAXSITE) sites[nsites].name = name, sites[nsites].at = at, sites[nsites++].n = 0;
    if (i < nsites) sites[i].n++;
    pthread_mutex_unlock(&sites_lock);
}
void emu_counts_reset(void) {
    pthread_mutex_lock(&sites_lock);
    nsites = 0;
    pthread_mutex_unlock(&sites_lock);
}
/* the function, file and line of the call that returns to at, by addr2line ("?" if
 * unknown): the innermost one outside this runtime's inline wrappers (cuda_runtime.h) */
static const char *site_name(const void *at, char *where, size_t cap) {
    Dl_info d;
    snprintf(where, cap, "?");
    if (dladdr(at, &d) && d.dli_fname) { /* the call's line: the address before the return */
        char cmd[1024];
        snprintf(cmd, sizeof cmd, "addr2line -f -i -s -e '%s' %#lx 2>/dev/null", d.dli_fname,
                 (unsigned long)((const char *)at - (const char *)d.dli_fbase) - 1);
        FILE *f = popen(cmd, "r");
        char fn[256], line[256];
        int first = 1;
        while (f && fgets(fn, sizeof fn, f) && fgets(line, sizeof line, f)) { /* innermost first */
            fn[strcspn(fn, "\n")] = line[strcspn(line, "\n")] = 0;
            int wrapper = strstr(line, "cuda_runtime.h:") == line;
            if (first || !wrapper) snprintf(where, cap, "%s (%s)", fn, line);
            first = 0;
            if (!wrapper) break;
        }
        if (f) pclose(f);
    }
    return where;
}
static int by_count(const void *a, const void *b) {
    unsigned long long x = ((const __typeof__(sites[0]) *)a)->n, y = ((const __typeof__(sites[0]) *)b)->n;
    return x < y ? 1 : x > y ? -1 : 0;
}
static void counts_print(void) {
    qsort(sites, (size_t)nsites, sizeof sites[0], by_count);
    for (int pass = 0; pass < 2; pass++) {
        fprintf(stderr, pass ? "emu counts: waits for the device, by caller\n" : "emu counts: operations, by kind\n");
        for (int i = 0; i < nsites; i++) {
            if (!sites[i].at != !pass) continue;
            if (!pass) {
                fprintf(stderr, "%12llu  %s\n", sites[i].n, sites[i].name);
                continue;
            }
            char where[512];
            fprintf(stderr, "%12llu  %s\n", sites[i].n, site_name(sites[i].at, where, sizeof where));
        }
    }
}

void emu_count_op(const char *what) {
    device_ops++;
    count_site(what ? what : "kernel", NULL);
}
static void count_wait(const void *at) {
    host_waits++;
    count_site(NULL, at);
}

unsigned long long emu_device_ops(void) { return drain(&device_ops); }
unsigned long long emu_host_waits(void) { return drain(&host_waits); }

/* Asynchronous copies through page-locked memory. On a GPU a cudaMemcpyAsync between the
 * device and cudaMallocHost memory returns before the copy has run: until the host has
 * waited for the copy's stream (cudaStreamSynchronize, cudaDeviceSynchronize, a
 * synchronous cudaMemcpy between host and device on that stream), it may not write the
 * source of a copy to the device, nor read or write the destination of a copy to the host.
 * The emulation runs each copy when it is issued, so it keeps such a copy pending, per
 * host thread, until that wait: a copy to the device remembers its source's bytes, which
 * must be unchanged at the wait, else the run stops naming the copy's caller; a copy to
 * the host fills its destination with 0xFF bytes (a NaN, an impossible length) and writes
 * the copied bytes at the wait, and a destination the host wrote meanwhile stops the run.
 * Later copies on the same stream see the pending ones in stream order. Pageable memory
 * needs none of this: the runtime stages it (to the device) or waits (to the host).
 * cudaFreeHost of memory with a copy pending stops the run. */
typedef struct {
    int to_host;      /* a copy into host (else from host) */
    char *host;       /* the page-locked bytes */
    size_t n;
    unsigned char *v; /* to the device: the source as issued; to the host: the copied bytes */
    cudaStream_t st;
    const void *at; /* the caller */
} Pending;
static __thread Pending *pend;
static __thread size_t npend, cpend;


static void pending_die(const Pending *q, const char *what) {
    char where[512];
    fprintf(stderr,
            "emu: the host %s %zu bytes of page-locked memory at %p while the cudaMemcpyAsync %s them, issued by "
            "%s, could still be running on a GPU: wait for its stream first\n",
            what, q->n, (void *)q->host, q->to_host ? "into" : "from", site_name(q->at, where, sizeof where));
    abort();
}

/* the copy has run: check what the host did meanwhile, and land a copy to the host */
static void pending_land(const Pending *q) {
    if (!q->to_host) {
        if (memcmp(q->host, q->v, q->n)) pending_die(q, "wrote");
    } else {
        for (size_t i = 0; i < q->n; i++)
            if ((unsigned char)q->host[i] != 0xFF) pending_die(q, "wrote");
        memcpy(q->host, q->v, q->n);
    }
    free(q->v);
}

/* land the calling thread's pending copies on stream st (EMU_ALL_STREAMS: all of them), or only
 * those whose host bytes overlap [lo, lo+n) when lo is set */
static void pending_sync(cudaStream_t st, const char *lo, size_t n) {
    size_t k = 0;
    for (size_t i = 0; i < npend; i++) {
        Pending *q = &pend[i];
        int mine = st == EMU_ALL_STREAMS || q->st == st;
        if (mine && (!lo || (q->host < lo + n && lo < q->host + q->n))) pending_land(q);
        else pend[k++] = *q;
    }
    npend = k;
    if (!npend) { /* none left: nothing kept for a thread that ends (LeakSanitizer) */
        free(pend);
        pend = NULL;
        cpend = 0;
    }
}

static void pending_add(int to_host, char *host, const void *dev, size_t n, cudaStream_t st, const void *at) {
    if (npend == cpend) {
        cpend = cpend ? 2 * cpend : 16;
        pend = realloc(pend, cpend * sizeof *pend);
        if (!pend) abort();
    }
    Pending *q = &pend[npend++];
    q->to_host = to_host, q->host = host, q->n = n, q->st = st, q->at = at;
    q->v = malloc(n);
    if (!q->v) abort();
    if (to_host) {
        emu_dev_open_used(&dev, 1);
        memcpy(q->v, dev, n);
        emu_dev_close();
        memset(host, 0xFF, n);
    } else {
        memcpy(q->v, host, n);
    }
}

/* p[0..n), page-locked memory being freed, has no copy pending */
static void pending_free_check(const char *p, size_t n) {
    for (size_t k = 0; k < npend; k++)
        if (pend[k].host >= p && pend[k].host < p + (n ? n : 1)) pending_die(&pend[k], "freed");
}

cudaError_t cudaStreamSynchronize(cudaStream_t s) {
    emu_stream_waited(s);
    pending_sync(stream_of(s), NULL, 0);
    count_wait(__builtin_return_address(0));
    return 0;
}

cudaError_t cudaDeviceSynchronize(void) {
    barrier("cudaDeviceSynchronize (waits for the whole device)");
    emu_stream_waited(EMU_ALL_STREAMS);
    pending_sync(EMU_ALL_STREAMS, NULL, 0);
    count_wait(__builtin_return_address(0));
    return 0;
}

/* a copy on stream st; async: cudaMemcpyAsync's (the host waits only through pageable memory) */
static cudaError_t memcpy_kind(void *d, const void *s, size_t n, enum cudaMemcpyKind k, int async, cudaStream_t st,
                               const void *at) {
    int dd = emu_is_dev(d), sd = emu_is_dev(s);
    int ok = k == cudaMemcpyHostToDevice ? dd && !sd : k == cudaMemcpyDeviceToHost ? !dd && sd
           : k == cudaMemcpyDeviceToDevice ? dd && sd : 1;
#ifdef EMU_NO_PROTECT
    ok = 1;
#endif
    if (n && !ok) {
        fprintf(stderr, "emu: cudaMemcpy kind %d with destination on the %s and source on the %s\n", (int)k,
                dd ? "device" : "host", sd ? "device" : "host");
        abort();
    }
    if (n && dd) emu_dev_span(d, n, "cudaMemcpy's destination");
    if (n && sd) emu_dev_span(s, n, "cudaMemcpy's source");
    take();
    int pageable = n && dd != sd && !is_pinned(dd ? s : d, n);
    give();
    pageable_bytes += pageable ? n : 0;
    if (pageable && n > pageable_max) pageable_max = n;
    if (n && dd != sd && (!async || pageable)) count_wait(at);
    emu_count_op(!dd ? "copy to the host" : !sd ? "copy to the device" : "copy on the device");
    st = stream_of(st);
    const void *ops[2] = {sd ? s : NULL, dd ? d : NULL};
    /* the stream's earlier copies run first; a synchronous one (or an asynchronous one
     * into pageable memory) returns when it has run, and they with it, except a
     * synchronous one from pageable memory, which returns once the bytes are staged (the
     * stream's earlier work waited for, the copy itself maybe not: CUDA's "API
     * synchronization behavior") */
    int waits = n && dd != sd && (!async || (pageable && !dd));
    int staged = waits && pageable && dd;
    if (staged) emu_stream_waited(st);
    if (n) { /* the source read, the destination written, on the stream */
        take();
        stream_use(!dd ? "a copy to the host" : !sd ? "a copy to the device" : "a copy on the device", st, ops,
                   "\0\1", 2);
        give();
    }
    if (waits) pending_sync(st, NULL, 0);
    else if (n && dd != sd) pending_sync(st, dd ? s : d, n);
    if (n && dd != sd && async && !pageable) {
        pending_add(!dd, dd ? (char *)s : d, dd ? d : s, n, st, at);
        if (!dd) return 0; /* the bytes land at the wait */
    }
    emu_dev_open_used(ops, 2);
    memmove(d, s, n);
    emu_dev_close();
    if (waits && !staged) emu_stream_waited(st);
    return 0;
}

cudaError_t cudaMemcpy(void *d, const void *s, size_t n, enum cudaMemcpyKind k) {
    return memcpy_kind(d, s, n, k, 0, 0, __builtin_return_address(0));
}

cudaError_t emu_memcpy_async(void *d, const void *s, size_t n, enum cudaMemcpyKind k, cudaStream_t st) {
    return memcpy_kind(d, s, n, k, 1, st, __builtin_return_address(0));
}
