/* Kernel launches of the host emulation: a block's threads run on fibers, each running the
 * kernel body until it returns or reaches a barrier, where it gives control back to the
 * scheduler. A __syncthreads releases the block's threads once all of them wait there; a
 * warp intrinsic's barrier releases the lanes its mask names once all of them wait at one
 * (other warps, and lanes outside the mask, go their own way, as on a GPU).
 * The order in which threads run is one sequence per launch (next_thread). A fiber whose
 * thread returns asks for the next one itself and, if that thread has not started yet,
 * runs it on the same stack with no switch: a kernel with no barrier runs all its blocks
 * on one fiber, and a kernel with barriers holds one fiber per thread that has started
 * and not returned.
 * The fibers are made once and reused by every block and launch; on x86-64 they switch
 * with a few instructions of their own (ucontext's switch makes a system call to save
 * the signal mask, which made the system the emulation's largest cost). */
#include <stdarg.h>
#include <vector>
#include "emu_cuda.h"
/* the scheduler's own bookkeeping, run between every two threads: not instrumented under
 * EMU_ASAN=1 (AddressSanitizer's checks made it a third of a launch's time; the kernels,
 * the tests and the rest of the emulation keep theirs) */
#if defined(__SANITIZE_ADDRESS__)
#define SCHED __attribute__((no_sanitize_address))
#else
#define SCHED
#endif
EmuDim blockIdx, threadIdx, blockDim, gridDim;
uint64_t emu_slot[1024];
#define STK (256 * 1024)
static std::function<void()> *body;
static int cur;
static void fiber_main();

#if defined(__x86_64__)
/* saves the callee-saved registers, MXCSR and the x87 control word on the current stack,
 * stores the stack pointer in *from, and resumes the context saved at to */
extern "C" void emu_ctx_switch(void **from, void *to);
asm(".text\n"
    ".globl emu_ctx_switch\n"
    ".type emu_ctx_switch,@function\n"
    "emu_ctx_switch:\n"
    "  pushq %rbp\n  pushq %rbx\n  pushq %r12\n  pushq %r13\n  pushq %r14\n  pushq %r15\n"
    "  subq $8, %rsp\n  stmxcsr (%rsp)\n  fnstcw 4(%rsp)\n"
    "  movq %rsp, (%rdi)\n  movq %rsi, %rsp\n"
    "  ldmxcsr (%rsp)\n  fldcw 4(%rsp)\n  addq $8, %rsp\n"
    "  popq %r15\n  popq %r14\n  popq %r13\n  popq %r12\n  popq %rbx\n  popq %rbp\n"
    "  ret\n"
    ".size emu_ctx_switch, .-emu_ctx_switch\n");
struct Ctx { void *sp; };
static void ctx_make(Ctx *c, char *stack) {
    uint64_t *top = (uint64_t *)(((uintptr_t)stack + STK) & ~(uintptr_t)15);
    top[-1] = 0;                          /* fiber_main's return address: it never returns */
    top[-2] = (uint64_t)(uintptr_t)fiber_main; /* where emu_ctx_switch's ret goes */
    for (int r = 3; r <= 8; r++) top[-r] = 0; /* rbp rbx r12 r13 r14 r15 */
    uint32_t cw[2] = {0, 0};
    uint16_t fpu;
    __asm__ volatile("stmxcsr %0" : "=m"(cw[0]));
    __asm__ volatile("fnstcw %0" : "=m"(fpu));
    cw[1] = fpu;
    memcpy(&top[-9], cw, 8);
    c->sp = &top[-9];
}
static void ctx_switch(Ctx *from, Ctx *to) { emu_ctx_switch(&from->sp, to->sp); }
#else
#include <ucontext.h>
struct Ctx { ucontext_t u; };
static void ctx_make(Ctx *c, char *stack) {
    getcontext(&c->u);
    c->u.uc_stack.ss_sp = stack, c->u.uc_stack.ss_size = STK, c->u.uc_link = 0;
    makecontext(&c->u, fiber_main, 0);
}
static void ctx_switch(Ctx *from, Ctx *to) { swapcontext(&from->u, &to->u); }
#endif

enum { RUNNING, AT_SYNCTHREADS, AT_WARP };
/* a thread of the running block: fib, the fiber it runs on (-1 until it starts) */
struct Thr { int done, at, fib; unsigned mask; const char *op; };
static Thr thr[1024];
/* the fibers: each started thread that has not returned holds one; free ones wait in spare */
struct Fib { Ctx c; char *stack; };
static Fib fiber[1024];
static int nfiber, spare[1024], nspare, cur_fib;
static Ctx sched;
static long handoff; /* what a fiber that ends its run passes the scheduler: the next thread, or -1 */
static int has_handoff;

/* AddressSanitizer must be told of every stack switch (EMU_ASAN=1 builds) */
#if defined(__SANITIZE_ADDRESS__)
extern "C" void __sanitizer_start_switch_fiber(void **fake_stack_save, const void *bottom, size_t size);
extern "C" void __sanitizer_finish_switch_fiber(void *fake_stack_save, const void **bottom_old, size_t *size_old);
static const void *sched_bottom;
static size_t sched_size;
static void to_fiber(int t) {
    void *fake = NULL;
    __sanitizer_start_switch_fiber(&fake, fiber[t].stack, STK);
    ctx_switch(&sched, &fiber[t].c);
    __sanitizer_finish_switch_fiber(fake, NULL, NULL);
}
/* The fibers outlive a launch and serve the next one, which another host thread may make:
 * a fiber resumed by to_fiber takes the bounds of the stack it was resumed from (that
 * launch's thread), so that its next to_sched tells AddressSanitizer that thread's stack.
 * The bounds of the thread that made the fiber would leave ASan holding the stack of a
 * thread that may have ended, and LeakSanitizer's scan at exit would fault in it
 * ("Tracer caught signal 11"). */
static void to_sched(void) {
    void *fake = NULL;
    __sanitizer_start_switch_fiber(&fake, sched_bottom, sched_size);
    ctx_switch(&fiber[cur_fib].c, &sched);
    __sanitizer_finish_switch_fiber(fake, &sched_bottom, &sched_size);
}
static void fiber_entered(void) { __sanitizer_finish_switch_fiber(NULL, &sched_bottom, &sched_size); }
#else
static void to_fiber(int t) { ctx_switch(&sched, &fiber[t].c); }
static void to_sched(void) { ctx_switch(&fiber[cur_fib].c, &sched); }
static void fiber_entered(void) {}
#endif

static long next_thread();
static void fiber_main() {
    fiber_entered();
    for (;;) { /* one run of the kernel body per thread this fiber serves */
        (*body)();
        thr[cur].done = 1;
        long t = next_thread();
        if (t >= 0 && thr[t].fib < 0) { /* a thread that has not started: on this stack */
            thr[t].fib = cur_fib, cur = (int)t, threadIdx = {(unsigned)t, 0, 0};
            continue;
        }
        spare[nspare++] = cur_fib; /* free again (to_sched still saves its context) */
        handoff = t, has_handoff = 1;
        to_sched();
    }
}
void __syncthreads() {
    thr[cur].at = AT_SYNCTHREADS;
    to_sched();
}
void emu_warp_sync(unsigned mask, const char *op) {
    thr[cur].at = AT_WARP;
    thr[cur].mask = mask;
    thr[cur].op = op;
    to_sched();
}

/* EMU_ORDER: the order in which blocks run, and in which a block's threads run from one
 * barrier to the next. "fwd" (default) 0, 1, 2, ... and "rev" the reverse: every thread
 * runs to its next barrier before any goes past one, so the warps stay in step.
 * "shuffle[:SEED]": the blocks of each launch in a random order, and in a block the warps
 * one at a time, in a random order drawn again after each __syncthreads, each running
 * its lanes (in a random order) through as many warp intrinsics as it can before the
 * next warp moves (block_next). A kernel whose result depends on the order (a missing
 * __syncthreads, a cross-block dependence, a float atomic sum) gives different results
 * under different orders, as it may on a GPU. */
static int order_mode = -1; /* 0 fwd, 1 rev, 2 shuffle */
static uint64_t order_rng = 0x9E3779B97F4A7C15ull;
static void order_init() {
    const char *e = getenv("EMU_ORDER");
    order_mode = 0;
    if (!e || !*e || !strcmp(e, "fwd")) return;
    if (!strcmp(e, "rev")) { order_mode = 1; return; }
    if (!strncmp(e, "shuffle", 7) && (e[7] == 0 || e[7] == ':')) {
        order_mode = 2;
        if (e[7] == ':') order_rng ^= strtoull(e + 8, NULL, 10) * 0xD1B54A32D192ED03ull;
        return;
    }
    fprintf(stderr, "EMU_ORDER=%s: expected fwd, rev or shuffle[:SEED]\n", e);
    exit(1);
}
SCHED static uint64_t order_next() { /* splitmix64 */
    uint64_t z = (order_rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
SCHED static void order_fill(std::vector<size_t> &p, size_t n) {
    p.resize(n);
    for (size_t i = 0; i < n; i++) p[i] = order_mode == 1 ? n - 1 - i : i;
    if (order_mode == 2)
        for (size_t i = n; i > 1; i--) { size_t j = order_next() % i, t = p[i - 1]; p[i - 1] = p[j]; p[j] = t; }
}

/* Shared memory (emu_cuda.h: every __shared__ variable of the program lies in section
 * emu_shared, delimited by the linker's __start_/__stop_ symbols) is filled with garbage
 * before each block runs: a kernel that reads it before writing it in the same block gets
 * NaN / all-ones (0xFF bytes) or 0x5A5A... (1.5e16 as a float), alternating from block to
 * block across launches, instead of a static's zeros or a previous block's values. The
 * anchor keeps the section (and its symbols) in programs whose kernels have none. (GCC's
 * AddressSanitizer puts no redzones around variables in a named section, so the memset
 * over the whole section is clean under EMU_ASAN=1.) */
__attribute__((section("emu_shared"), used)) static unsigned char shared_anchor[8];
extern "C" unsigned char __start_emu_shared[], __stop_emu_shared[];
static unsigned long long block_serial;
static void shared_poison() {
    memset(__start_emu_shared, (block_serial++ & 1) ? 0x5A : 0xFF, (size_t)(__stop_emu_shared - __start_emu_shared));
}

[[noreturn]] __attribute__((format(printf, 1, 2))) static void stuck(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "emu: block %u: ", blockIdx.x);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    abort();
}

/* thread k waits at the same intrinsic, with the same mask, as thread t */
SCHED static int same_call(size_t t, size_t k) {
    return thr[k].at == AT_WARP && thr[k].mask == thr[t].mask && (thr[k].op == thr[t].op || !strcmp(thr[k].op, thr[t].op));
}

/* Lets through the lanes of each warp intrinsic in the warp at w0 whose mask's lanes
 * all wait at that intrinsic with that mask; 1 if it let any through. A mask naming a
 * lane that returned stops the run: on a GPU a shuffle from it is undefined
 * (__any_sync and __match_any_sync leave exited lanes out there; this is stricter). */
SCHED static int release_warp(size_t w0) {
    int released = 0;
    for (size_t t = w0; t < w0 + 32 && t < blockDim.x; t++) {
        if (thr[t].done || thr[t].at != AT_WARP) continue;
        unsigned m = thr[t].mask, ready = 1;
        for (size_t k = 0; k < 32; k++) {
            if (!(m >> k & 1)) continue;
            /* the mask names lanes of the block only (emu_warp_mask) */
            if (thr[w0 + k].done)
                stuck("thread %zu waits at a warp intrinsic whose mask names thread %zu, which returned", t, w0 + k);
            /* another mask or intrinsic: not ready yet (that lane's own group may go first) */
            if (!same_call(t, w0 + k)) ready = 0;
        }
        if (ready) {
            for (size_t k = 0; k < 32; k++)
                if (m >> k & 1) thr[w0 + k].at = RUNNING;
            released = 1;
        }
    }
    return released;
}

/* Called when no thread of the block runs (each has returned or waits at a barrier):
 * lets through what release_warp lets through, or else the whole block at a
 * __syncthreads (2); 0 once every thread has returned. Stops the run where a GPU would
 * hang or be undefined: a warp intrinsic waiting for a lane that waits at a
 * __syncthreads, or at another intrinsic or with another mask; a __syncthreads that a
 * returned thread skipped. */
SCHED static int release(size_t block) {
    int released = 0;
    for (size_t w0 = 0; w0 < block; w0 += 32) released |= release_warp(w0);
    if (released) return 1;
    size_t at_sync = block, returned = block;
    for (size_t t = 0; t < block; t++)
        if (thr[t].done) returned = t;
        else if (thr[t].at == AT_SYNCTHREADS) at_sync = t;
    for (int pass = 0; pass < 2; pass++) /* the lanes at a __syncthreads first: the likelier cause */
        for (size_t t = 0; t < block; t++) {
            if (thr[t].done || thr[t].at != AT_WARP) continue; /* (and not ready) */
            for (size_t k = 0, w0 = t & ~(size_t)31; k < 32; k++) {
                const Thr &f = thr[w0 + k];
                if (!(thr[t].mask >> k & 1)) continue;
                if (pass == 0 && f.at == AT_SYNCTHREADS)
                    stuck("thread %zu waits at a warp intrinsic for thread %zu, which waits at __syncthreads", t,
                          w0 + k);
                if (pass == 1 && !same_call(t, w0 + k))
                    stuck("thread %zu waits at %s with mask 0x%08X, which names thread %zu, waiting at %s with "
                          "mask 0x%08X", t, thr[t].op, thr[t].mask, w0 + k, f.op, f.mask);
            }
        }
    if (at_sync == block) return 0; /* every thread returned */
    /* every thread of the block passes the same __syncthreads: one that some threads
     * skip (an early return before it) hangs or is undefined on a GPU, and here would
     * sync with fewer threads */
    if (returned < block)
        stuck("thread %zu returned while thread %zu waits at a __syncthreads that not every thread of the block "
              "reaches", returned, at_sync);
    for (size_t t = 0; t < block; t++) thr[t].at = RUNNING;
    return 2;
}

SCHED static int runnable(size_t t) { return !thr[t].done && thr[t].at == RUNNING; }

/* A launch's order as one sequence of threads to run (next_thread; the scheduler and the
 * fibers both draw from it): the blocks in their order and, in each block: fwd and rev:
 * every thread that can run runs to its next barrier, in that order, then the barriers
 * let them through; the warps stay in step. shuffle: the warps go one at a time, in a random order drawn
 * again after each __syncthreads: the first warp with a thread that can run runs it (its
 * lanes in a random order) and goes on through its warp intrinsics as far as it can
 * before the next warp moves, as a GPU may; a read of another warp's write that only a
 * __syncthreads would order sees the old value when the reader's warp comes first. A
 * warp that has gone 1024 times in a row since the last __syncthreads moves to the end
 * of the order (any warp; meant for one that spins on another warp's write with a warp
 * intrinsic in its loop). A loop with no barrier in it runs on until it ends, in every
 * order: a thread that spins there on another's write never gives way. */
static struct {
    size_t grid, block, bi, ti, nw, last, streak, w, lanes, li, idle;
    int in_block, ran, in_warp;
    std::vector<size_t> blocks, threads, warps;
} L;

SCHED static void block_start() {
    for (size_t t = 0; t < L.block; t++) thr[t].done = 0, thr[t].at = RUNNING, thr[t].fib = -1;
    if (order_mode != 2) {
        order_fill(L.threads, L.block), L.ti = 0, L.ran = 0;
        return;
    }
    L.nw = (L.block + 31) / 32, L.last = L.nw, L.streak = 0, L.in_warp = 0, L.idle = 0;
    order_fill(L.warps, L.nw);
}

/* the block's next thread to run, or -1 once every thread has returned */
SCHED static long block_next() {
    size_t block = L.block;
    if (order_mode != 2) {
        for (;;) {
            while (L.ti < block) {
                size_t t = L.threads[L.ti++];
                if (runnable(t)) { L.ran = 1; return (long)t; }
            }
            if (!L.ran && !release(block)) return -1;
            order_fill(L.threads, block), L.ti = 0, L.ran = 0;
        }
    }
    for (;;) {
        if (L.in_warp) {
            while (L.li < L.lanes) {
                size_t t = L.w * 32 + L.threads[L.li++];
                if (runnable(t)) return (long)t;
            }
            L.in_warp = 0;
            L.streak = L.w == L.last ? L.streak + 1 : 1, L.last = L.w;
            release_warp(L.w * 32); /* (its lanes only: the warp at L.idle) */
            continue;
        }
        if (L.streak >= 1024) { /* e.g. a warp spinning on another warp's write (legal): let the others move */
            size_t i = 0;
            while (L.warps[i] != L.last) i++;
            L.warps.erase(L.warps.begin() + (long)i), L.warps.push_back(L.last), L.streak = 0, L.idle = 0;
        }
        /* the first warp in the order with a thread that can run (the first L.idle warps have
         * none, and get one only from a release) */
        size_t w = L.nw;
        for (size_t i = L.idle; i < L.nw && w == L.nw; i++) {
            for (size_t t = L.warps[i] * 32; t < L.warps[i] * 32 + 32 && t < block; t++)
                if (runnable(t)) { w = L.warps[i]; break; }
            if (w == L.nw) L.idle = i + 1;
        }
        if (w < L.nw) {
            L.w = w, L.lanes = block - w * 32 < 32 ? block - w * 32 : 32, L.li = 0, L.in_warp = 1;
            order_fill(L.threads, L.lanes);
            continue;
        }
        int r = release(block);
        if (!r) return -1;
        L.idle = 0;
        if (r == 2) order_fill(L.warps, L.nw), L.streak = 0, L.last = L.nw; /* the turns count from the __syncthreads */
    }
}

/* the launch's next thread to run, or -1 once every block has ended */
SCHED static long next_thread() {
    for (;;) {
        if (!L.in_block) {
            if (L.bi == L.grid) return -1;
            blockIdx = {(unsigned)L.blocks[L.bi++], 0, 0};
            shared_poison();
            block_start();
            L.in_block = 1;
        }
        long t = block_next();
        if (t >= 0) return t;
        L.in_block = 0;
    }
}

/* nn/emu_device.c's count of the operations issued to the device (emu_device_ops); weak:
 * the scheduler's own test runs without it */
extern "C" __attribute__((weak)) void emu_count_op(const char *what);

void emu_launch(size_t grid, size_t block, std::function<void()> fn, const char *name) {
    if (emu_count_op) emu_count_op(name);
    /* CUDA's limits: 1..1024 threads per block, 1..2^31-1 blocks in x (a wider
     * grid expression would be cut to 32 bits by dim3, or refused) */
    if (block > 1024 || grid == 0 || block == 0 || grid > 0x7fffffffu) {
        fprintf(stderr, "emu: bad launch: %zu blocks of %zu threads (CUDA allows 1..2147483647 blocks of 1..1024 "
                "threads)\n", grid, block);
        exit(1);
    }
    if (order_mode < 0) order_init();
    body = &fn; /* launches come from host code (never from a kernel), one at a time */
    gridDim = {(unsigned)grid, 1, 1}; blockDim = {(unsigned)block, 1, 1};
    L.grid = grid, L.block = block, L.bi = 0, L.in_block = 0;
    order_fill(L.blocks, grid);
    long t = next_thread();
    while (t >= 0) {
        if (thr[t].fib < 0) { /* its first run: a spare fiber, or a new one */
            if (nspare) thr[t].fib = spare[--nspare];
            else {
                Fib &f = fiber[nfiber];
                if (!(f.stack = (char *)malloc(STK))) { fprintf(stderr, "emu: no memory for fibers\n"); exit(1); }
                ctx_make(&f.c, f.stack);
                thr[t].fib = nfiber++;
            }
        }
        cur = (int)t, cur_fib = thr[t].fib, threadIdx = {(unsigned)t, 0, 0};
        has_handoff = 0;
        to_fiber(cur_fib);
        /* back: the thread waits at a barrier, or its fiber ended a run and asked for the next */
        t = has_handoff ? handoff : next_thread();
    }
    body = NULL;
}
