/* The emulation's scheduler (emu_sched.cpp, emu_cuda.h) against small kernels: legal
 * CUDA must run and give the right values under every EMU_ORDER, and each kind of
 * barrier misuse must stop the run with its message. Each case runs in a child
 * process (a caught misuse aborts it, a hang is stopped after 20 s), once per order.
 * Also checks that the
 * shuffled order lets a warp run ahead of another through its warp intrinsics, so
 * that a missing __syncthreads between warps shows. */
#include "child.h"
#include "emu_cuda.h"
#include "../test.h"

static const unsigned FULL = 0xFFFFFFFFu;
static unsigned out[2][64];
#define LANE (threadIdx.x & 31)

/* a failed value check in the child: its message, exit status 3 */
#define WANT(cond, ...)                                                                   \
    do {                                                                                  \
        if (!(cond)) { fprintf(stderr, "value: " __VA_ARGS__); fputc('\n', stderr); exit(3); } \
    } while (0)

/* legal: warps 1.. return whole while warp 0 shuffles */
static void whole_warps_return() {
    emu_launch(1, 64, [] {
        if (threadIdx.x >= 32) return;
        unsigned v = threadIdx.x;
        for (int o = 16; o; o >>= 1) v += __shfl_down_sync(FULL, v, o);
        out[0][threadIdx.x] = v;
    });
    WANT(out[0][0] == 496, "lane 0 sums to %u, not 496", out[0][0]);
}

/* legal: each half-warp shuffles with its own mask, then the whole warp */
static void half_masks() {
    emu_launch(1, 32, [] {
        unsigned m = LANE < 16 ? 0x0000FFFFu : 0xFFFF0000u;
        out[0][LANE] = __shfl_down_sync(m, LANE * 10, 1);
        out[1][LANE] = __shfl_down_sync(FULL, LANE * 100, 16);
    });
    for (unsigned l = 0; l < 32; l++) {
        if (l != 15 && l != 31) WANT(out[0][l] == (l + 1) * 10, "lane %u got %u", l, out[0][l]);
        if (l < 16) WANT(out[1][l] == (l + 16) * 100, "lane %u got %u", l, out[1][l]);
    }
}

/* legal: one half-warp shuffles alone first while the other already waits at the
 * whole warp's shuffle (hi: the upper half goes alone) */
static void one_half_first(int hi) {
    static int h;
    h = hi;
    emu_launch(1, 32, [] {
        unsigned mine = h ? LANE >= 16 : LANE < 16;
        if (mine) out[0][LANE] = __shfl_down_sync(h ? 0xFFFF0000u : 0x0000FFFFu, LANE * 10, 1);
        out[1][LANE] = __shfl_down_sync(FULL, LANE * 100, 16);
    });
    for (unsigned l = 0; l < 16; l++) {
        unsigned a = h ? l + 16 : l;
        if (a != 15 && a != 31) WANT(out[0][a] == (a + 1) * 10, "lane %u got %u", a, out[0][a]);
        WANT(out[1][l] == (l + 16) * 100, "lane %u got %u", l, out[1][l]);
    }
}
static void upper_half_first() { one_half_first(1); }
static void lower_half_first() { one_half_first(0); }

/* legal: in a 40-thread block, lanes 16-31 of warp 0 and lanes 0-3 of warp 1 shuffle
 * among themselves while the rest wait at a __syncthreads; then each warp shuffles whole
 * (warp 1: its 8 lanes) */
static void split_warps_partial_block() {
    emu_launch(1, 40, [] {
        unsigned v = threadIdx.x * 10, w0 = threadIdx.x & ~31u;
        if (w0 == 0 && LANE >= 16) v += __shfl_down_sync(0xFFFF0000u, v, 1);
        if (w0 == 32 && LANE < 4) v += __shfl_down_sync(0x0000000Fu, v, 1);
        __syncthreads();
        out[0][threadIdx.x] = v;
        out[1][threadIdx.x] = __shfl_down_sync(w0 ? 0xFFu : FULL, threadIdx.x, 1);
    });
    WANT(out[0][16] == 160 + 170 && out[0][15] == 150 && out[0][32] == 320 + 330 && out[0][36] == 360,
         "first shuffles: %u %u %u %u", out[0][16], out[0][15], out[0][32], out[0][36]);
    WANT(out[1][0] == 1 && out[1][30] == 31 && out[1][32] == 33 && out[1][38] == 39, "second: %u %u %u %u",
         out[1][0], out[1][30], out[1][32], out[1][38]);
}

/* legal: blocks of one thread */
static void one_thread_blocks() {
    emu_launch(3, 1, [] {
        unsigned v = __shfl_down_sync(1u, 7u, 0);
        __syncthreads();
        out[0][blockIdx.x] = v + (unsigned)__any_sync(1u, 1);
    });
    WANT(out[0][0] == 8 && out[0][1] == 8 && out[0][2] == 8, "got %u %u %u", out[0][0], out[0][1], out[0][2]);
}

/* legal on a GPU, where warps make progress independently: warp 0 polls, with a warp
 * intrinsic in its loop, a flag that warp 1 sets */
static void spin_on_other_warp() {
    for (int k = 0; k < 4; k++) {
        memset(out, 0, sizeof out);
        emu_launch(1, 64, [] {
            __shared__ volatile unsigned flag;
            if (threadIdx.x == 0) flag = 0;
            __syncthreads();
            if (threadIdx.x < 32)
                while (!__any_sync(FULL, flag)) {}
            else if (threadIdx.x == 32)
                flag = 1;
            out[0][threadIdx.x] = 1;
        });
        WANT(out[0][0] == 1 && out[0][32] == 1 && out[0][63] == 1, "launch %d", k);
    }
}

/* legal: __any_sync and __match_any_sync over the whole warp */
static void vote_match() {
    emu_launch(1, 64, [] {
        out[0][threadIdx.x] = (unsigned)__any_sync(FULL, threadIdx.x == 40);
        out[1][threadIdx.x] = __match_any_sync(FULL, LANE & 1);
    });
    for (unsigned t = 0; t < 64; t++) {
        WANT(out[0][t] == (t >= 32), "thread %u: __any_sync gave %u", t, out[0][t]);
        WANT(out[1][t] == (t & 1 ? 0xAAAAAAAAu : 0x55555555u), "thread %u: __match_any_sync gave 0x%08X", t, out[1][t]);
    }
}

/* misuse: a lane the mask names returns before the shuffle */
static void named_lane_returns() {
    emu_launch(1, 32, [] {
        if (LANE == 1) return;
        out[0][LANE] = __shfl_down_sync(FULL, LANE, 1);
    });
}

/* misuse: half the warp waits at a __syncthreads, the other half at a shuffle */
static void sync_in_warp_branch() {
    emu_launch(1, 64, [] {
        if (LANE < 16) __syncthreads();
        out[0][threadIdx.x] = __shfl_down_sync(FULL, LANE, 1);
    });
}

/* misuse: warp 1 returns before a __syncthreads that warp 0 waits at */
static void sync_skipped() {
    emu_launch(1, 64, [] {
        if (threadIdx.x >= 32) return;
        __syncthreads();
    });
}

/* misuse: the halves call with masks that name a lane of the other half but differ */
static void masks_differ() {
    emu_launch(1, 32, [] {
        unsigned m = LANE < 16 ? 0x0001FFFFu : 0xFFFF0001u;
        out[0][LANE] = __shfl_down_sync(m, LANE, 1);
    });
}

/* misuse: one lane calls another intrinsic with the same mask */
static void intrinsics_differ() {
    emu_launch(1, 32, [] {
        if (LANE == 5) out[0][LANE] = (unsigned)__any_sync(FULL, 1);
        else out[0][LANE] = __shfl_down_sync(FULL, LANE, 1);
    });
}

/* misuse: lane 0 waits with a mask naming lane 1, whose mask names lane 2, which waits at
 * a __syncthreads: reported at the __syncthreads */
static void chain_to_sync() {
    emu_launch(1, 3, [] {
        if (LANE == 2) { __syncthreads(); return; }
        out[0][LANE] = __shfl_down_sync(LANE == 0 ? 0x3u : 0x6u, LANE, 1);
        __syncthreads();
    });
}

/* misuse: the mask leaves out the calling lane */
static void mask_without_caller() {
    emu_launch(1, 32, [] { out[0][LANE] = __shfl_down_sync(0xFFFFFFFEu, LANE, 1); });
}

/* misuse: a 48-thread block's last warp shuffles with the full mask */
static void mask_past_block() {
    emu_launch(1, 48, [] { out[0][threadIdx.x] = __shfl_down_sync(FULL, LANE, 1); });
}

/* thread 0 writes a flag, both warps shuffle, thread 32 reads the flag: with no
 * __syncthreads between the write and the read (sync 0) thread 32 may see either
 * value; how many of 64 launches saw the write */
static int sync_between;
static unsigned flag_seen(int sync) {
    sync_between = sync;
    for (int k = 0; k < 64; k++)
        emu_launch(1, 64, [k] {
            __shared__ unsigned flag;
            if (threadIdx.x == 0) flag = 0;
            __syncthreads();
            if (threadIdx.x == 0) flag = 1;
            unsigned v = LANE;
            for (int o = 16; o; o >>= 1) v += __shfl_down_sync(FULL, v, o);
            if (sync_between) __syncthreads();
            if (threadIdx.x == 32) out[0][k] = flag;
        });
    unsigned n = 0;
    for (int k = 0; k < 64; k++) n += out[0][k] == 1;
    return n;
}
static void flag_unsynced() {
    unsigned n = flag_seen(0);
    const char *o = getenv("EMU_ORDER");
    if (!strncmp(o, "shuffle", 7)) /* warp 1 runs ahead of warp 0 in some launches, not all */
        WANT(n > 0 && n < 64, "%u of 64 launches saw thread 0's write", n);
    else /* fwd, rev: the warps run in step, so the write lands before the shuffles end */
        WANT(n == 64, "%u of 64 launches saw thread 0's write", n);
}
static void flag_synced() {
    unsigned n = flag_seen(1);
    WANT(n == 64, "%u of 64 launches saw thread 0's write", n);
}

struct Case {
    const char *name;
    void (*run)();
    const char *expect; /* NULL: runs and gives the right values; else the message that stops it */
};
static const Case cases[] = {
    {"whole warps return while warp 0 shuffles", whole_warps_return, NULL},
    {"half-warp masks, then the whole warp", half_masks, NULL},
    {"upper half shuffles alone, lower half waits for the whole warp", upper_half_first, NULL},
    {"lower half shuffles alone, upper half waits for the whole warp", lower_half_first, NULL},
    {"__any_sync, __match_any_sync", vote_match, NULL},
    {"parts of warps shuffle while the rest wait at __syncthreads (40 threads)", split_warps_partial_block, NULL},
    {"blocks of one thread", one_thread_blocks, NULL},
    {"a warp spins on a flag another warp sets", spin_on_other_warp, NULL},
    {"a write read by another warp after a __syncthreads", flag_synced, NULL},
    {"a write read by another warp without a __syncthreads", flag_unsynced, NULL},
    {"a named lane returns", named_lane_returns, "whose mask names thread 1, which returned"},
    {"__syncthreads in a branch of a warp", sync_in_warp_branch, "which waits at __syncthreads"},
    {"a __syncthreads that returned threads skip", sync_skipped, "not every thread of the block reaches"},
    {"masks that name each other but differ", masks_differ,
     "thread 0 waits at __shfl_down_sync with mask 0x0001FFFF, which names thread 16, waiting at "
     "__shfl_down_sync with mask 0xFFFF0001"},
    {"another intrinsic with the same mask", intrinsics_differ,
     "waiting at __any_sync with mask 0xFFFFFFFF"},
    {"a mask naming a lane whose mask names one at __syncthreads", chain_to_sync,
     "thread 1 waits at a warp intrinsic for thread 2, which waits at __syncthreads"},
    {"a mask without the calling lane", mask_without_caller, "the calling lane is not in the mask"},
    {"a mask past the end of the block", mask_past_block, "mask 0xFFFFFFFF, but the warp's lanes are 0x0000FFFF"},
};

/* runs c in a child under EMU_ORDER=order; its exit status and what it wrote to stderr */
struct ChildCase {
    const Case *c;
    const char *order;
};
static void child_body(const void *p) {
    const ChildCase *k = (const ChildCase *)p;
    setenv("EMU_ORDER", k->order, 1);
    k->c->run();
}
static int run_child(const Case &c, const char *order, char *msg, size_t cap) {
    ChildCase k = {&c, order};
    return emu_run_child(child_body, &k, msg, cap);
}

int main() {
    const char *orders[] = {"fwd", "rev", "shuffle:1", "shuffle:2", "shuffle:3"};
    for (const Case &c : cases)
        for (const char *order : orders) {
            char msg[4096];
            int st = run_child(c, order, msg, sizeof msg);
            if (!c.expect)
                CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0 && !msg[0], "%s (EMU_ORDER=%s): status 0x%x, stderr: %s",
                      c.name, order, st, msg);
            else
                CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT && strstr(msg, c.expect),
                      "%s (EMU_ORDER=%s): want an abort with \"%s\"; status 0x%x, stderr: %s", c.name, order,
                      c.expect, st, msg);
        }
    TEST_END();
}
