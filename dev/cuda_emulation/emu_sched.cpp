#include <ucontext.h>
#include "emu_cuda.h"
EmuDim blockIdx, threadIdx, blockDim, gridDim;
uint64_t emu_slot[1024];
static ucontext_t sched;
struct Fib { ucontext_t c; char *stack; int done; };
static Fib fibs[1024];
static int cur;
static std::function<void()> *body;
#define STK (256 * 1024)
static void entry() { (*body)(); fibs[cur].done = 1; swapcontext(&fibs[cur].c, &sched); }
void __syncthreads() { swapcontext(&fibs[cur].c, &sched); }
void emu_launch(size_t grid, size_t block, std::function<void()> fn) {
    if (block > 1024 || grid == 0 || block == 0) { fprintf(stderr, "bad launch %zu x %zu\n", grid, block); exit(1); }
    body = &fn;
    gridDim = {(unsigned)grid, 1, 1}; blockDim = {(unsigned)block, 1, 1};
    for (size_t b = 0; b < grid; b++) {
        blockIdx = {(unsigned)b, 0, 0};
        for (size_t t = 0; t < block; t++) {
            Fib &f = fibs[t];
            if (!f.stack) f.stack = (char *)malloc(STK);
            getcontext(&f.c); f.c.uc_stack.ss_sp = f.stack; f.c.uc_stack.ss_size = STK; f.c.uc_link = 0;
            makecontext(&f.c, entry, 0); f.done = 0;
        }
        for (;;) {
            int alive = 0;
            for (size_t t = 0; t < block; t++) {
                if (fibs[t].done) continue;
                cur = (int)t; threadIdx = {(unsigned)t, 0, 0};
                swapcontext(&sched, &fibs[t].c);
                alive |= !fibs[t].done;
            }
            if (!alive) break;
        }
    }
}
