#pragma once
#include "emu_cuda.h"
/* the device-wide calls run on the host over device memory: its pages are
 * opened for the call (tracked memory, nn/cuda_runtime.h) */
struct EmuDevScope {
    EmuDevScope() { emu_dev_open(); } /* all of it: e.g. a predicate that holds a device pointer */
    template <class... A> explicit EmuDevScope(A... a) { emu_open_args(a...); } /* the arguments' allocations */
    ~EmuDevScope() { emu_dev_close(); }
};
namespace cub {
struct DeviceScan {
    template <class I, class O, class N> static cudaError_t ExclusiveSum(void *t, size_t &tb, I in, O out, N n, cudaStream_t s = 0) {
        (void)s; if (!t) { tb = 16; return 0; }
        EmuDevScope open(in, out);
        typedef typename std::remove_reference<decltype(out[0])>::type T; T acc = 0;
        for (int64_t i = 0; i < (int64_t)n; i++) { T v = in[i]; out[i] = acc; acc += v; }
        return 0;
    }
    template <class I, class O, class Op, class N> static cudaError_t InclusiveScan(void *t, size_t &tb, I in, O out, Op op, N n, cudaStream_t s = 0) {
        (void)s; if (!t) { tb = 16; return 0; }
        EmuDevScope open(in, out);
        typedef typename std::remove_reference<decltype(out[0])>::type T;
        if (n <= 0) return 0; T acc = in[0]; out[0] = acc;
        for (int64_t i = 1; i < (int64_t)n; i++) { acc = op(acc, in[i]); out[i] = acc; }
        return 0;
    }
};
struct DeviceSelect {
    template <class I, class F, class O, class NS> static cudaError_t Flagged(void *t, size_t &tb, I in, F fl, O out, NS num, int64_t n, cudaStream_t s = 0) {
        (void)s; if (!t) { tb = 16; return 0; }
        EmuDevScope open(in, fl, out, num);
        int64_t c = 0; for (int64_t i = 0; i < n; i++) if (fl[i]) out[c++] = in[i];
        *num = c; return 0;
    }
    template <class I, class O, class NS, class P> static cudaError_t If(void *t, size_t &tb, I in, O out, NS num, int64_t n, P pred, cudaStream_t s = 0) {
        (void)s; if (!t) { tb = 16; return 0; }
        EmuDevScope open; /* pred may hold device pointers */
        int64_t c = 0; for (int64_t i = 0; i < n; i++) { auto v = in[i]; if (pred(v)) out[c++] = v; }
        *num = c; return 0;
    }
};
template <class T, int N> struct BlockScan {
    struct TempStorage { T v[N]; };
    TempStorage &ts;
    BlockScan(TempStorage &t) : ts(t) {}
    template <class Op> void ExclusiveScan(T in, T &out, T init, Op op, T &agg) {
        if (blockDim.x != N) { fprintf(stderr, "BlockScan with blockDim %u != %d\n", blockDim.x, N); exit(1); }
        ts.v[threadIdx.x] = in; __syncthreads();
        T acc = init; for (unsigned i = 0; i < threadIdx.x; i++) acc = op(acc, ts.v[i]); out = acc;
        T tot = init; for (int i = 0; i < N; i++) tot = op(tot, ts.v[i]); agg = tot;
        __syncthreads();
    }
};
template <class T, int N> struct BlockReduce {
    struct TempStorage { T v[N]; };
    TempStorage &ts;
    BlockReduce(TempStorage &t) : ts(t) {}
    T Sum(T in) {
        if (blockDim.x != N) { fprintf(stderr, "BlockReduce with blockDim %u != %d\n", blockDim.x, N); exit(1); }
        ts.v[threadIdx.x] = in; __syncthreads();
        T tot = 0; for (int i = 0; i < N; i++) tot += ts.v[i];
        __syncthreads(); return tot;
    }
};
}
