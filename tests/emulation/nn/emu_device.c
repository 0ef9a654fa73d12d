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
static struct { char *p; size_t n, mapped; } allocs[MAXA];
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
void emu_dev_open_ptrs(const void *const *p, int k) {
    take();
    open_depth++;
    for (int i = 0; i < k; i++) open_one(p[i]);
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

cudaError_t cudaMalloc(void **p, size_t n) {
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

cudaError_t cudaFree(void *p) {
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

cudaError_t cudaMemset(void *p, int v, size_t n) {
    emu_dev_check(p, "cudaMemset's destination");
    if (p && n) emu_dev_span(p, n, "cudaMemset's destination");
    emu_count_op("cudaMemset");
    EMU_DEV_OPEN(p);
    memset(p, v, n);
    emu_dev_close();
    return 0;
}

/* pinned host allocations (cudaMallocHost), under the lock */
#define MAXH 1024
static struct { char *p; size_t n; } pinned[MAXH];
static int npinned;
static __thread unsigned long long pageable_bytes, pageable_max; /* the calling thread's */

cudaError_t cudaMallocHost(void **p, size_t n) {
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
    take();
    int i = 0;
    while (i < npinned && pinned[i].p != p) i++;
    if (i == npinned) {
        fprintf(stderr, "emu: cudaFreeHost of %p, which cudaMallocHost did not return\n", p);
        abort();
    }
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
            Dl_info d;
            char where[512] = "?";
            if (dladdr(sites[i].at, &d) && d.dli_fname) { /* the call's line: the address before the return */
                char cmd[1024];
                snprintf(cmd, sizeof cmd, "addr2line -f -s -e '%s' %#lx 2>/dev/null", d.dli_fname,
                         (unsigned long)((const char *)sites[i].at - (const char *)d.dli_fbase) - 1);
                FILE *f = popen(cmd, "r");
                char fn[256] = "", line[256] = "";
                if (f && fgets(fn, sizeof fn, f) && fgets(line, sizeof line, f)) {
                    fn[strcspn(fn, "\n")] = line[strcspn(line, "\n")] = 0;
                    snprintf(where, sizeof where, "%s (%s)", fn, line);
                }
                if (f) pclose(f);
            }
            fprintf(stderr, "%12llu  %s\n", sites[i].n, where);
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

unsigned long long emu_device_ops(void) {
    unsigned long long n = device_ops;
    device_ops = 0;
    return n;
}

unsigned long long emu_host_waits(void) {
    unsigned long long w = host_waits;
    host_waits = 0;
    return w;
}

cudaError_t cudaStreamSynchronize(cudaStream_t s) {
    (void)s;
    count_wait(__builtin_return_address(0));
    return 0;
}

cudaError_t cudaDeviceSynchronize(void) {
    count_wait(__builtin_return_address(0));
    return 0;
}

/* a copy; async: cudaMemcpyAsync's (the host waits only through pageable memory) */
static cudaError_t memcpy_kind(void *d, const void *s, size_t n, enum cudaMemcpyKind k, int async, const void *at) {
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
    EMU_DEV_OPEN(dd ? d : NULL, sd ? s : NULL);
    memmove(d, s, n);
    emu_dev_close();
    return 0;
}

cudaError_t cudaMemcpy(void *d, const void *s, size_t n, enum cudaMemcpyKind k) {
    return memcpy_kind(d, s, n, k, 0, __builtin_return_address(0));
}

cudaError_t emu_memcpy_async(void *d, const void *s, size_t n, enum cudaMemcpyKind k) {
    return memcpy_kind(d, s, n, k, 1, __builtin_return_address(0));
}
