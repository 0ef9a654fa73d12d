#pragma once
#include "emu_cuda.h"
#include <limits>
/* Sequential stand-ins for the CUB calls the .cu files make, held to the contract of
 * real CUB (3.0, /usr/local/cuda/include/cccl/cub) where it is stricter than what
 * the stand-in needs: each rule quotes the CUB documentation it enforces. */
/* the device-wide calls run on the host over device memory: its pages are
 * opened for the call (tracked memory, nn/cuda_runtime.h) */
struct EmuDevScope {
    EmuDevScope() { emu_dev_open(); } /* all of it: e.g. a predicate that holds a device pointer */
    template <class... A> explicit EmuDevScope(A... a) { emu_open_args(a...); } /* the arguments' allocations */
    ~EmuDevScope() { emu_dev_close(); }
};
namespace emu_cub {
[[noreturn]] static inline void fail(const char *what, const char *why, const char *rule) {
    fprintf(stderr, "emu cub: %s: %s\n  CUB: \"%s\"\n", what, why, rule);
    abort();
}
/* "When `nullptr`, the required allocation size is written to `temp_storage_bytes` and no
 * work is done." (d_temp_storage of every device-wide call). Real CUB's size grows with
 * num_items (a tile-status array); here it grows by a byte per item, so a query made
 * for fewer items than the call is caught (real CUB would catch it at tile edges only). */
static inline size_t temp_bytes(int64_t n) { return 512 + (size_t)(n > 0 ? n : 0); }
/* the real call: "d_temp_storage: Device-accessible allocation of temporary storage";
 * "temp_storage_bytes: Reference to size in bytes of `d_temp_storage` allocation"; and
 * util_temporary_storage.cuh: "if (temp_storage_bytes < bytes_needed) return
 * CubDebug(cudaErrorInvalidValue);". Its bytes are then scribbled on (CUB uses them). */
static inline void check_temp(const char *what, void *t, size_t tb, int64_t n) {
    size_t need = temp_bytes(n);
    if (tb < need) {
        char why[160];
        snprintf(why, sizeof why, "temp_storage_bytes %zu < %zu, the size the query gives for num_items %lld", tb, need,
                 (long long)n);
        fail(what, why, "if (temp_storage_bytes < bytes_needed) return CubDebug(cudaErrorInvalidValue);");
    }
    if (!emu_is_dev(t))
        fail(what, "d_temp_storage is not device memory", "Device-accessible allocation of temporary storage.");
    emu_dev_span(t, tb, "CUB's d_temp_storage [temp_storage_bytes]"); /* all of it in one allocation */
    EMU_DEV_OPEN(t);
    memset(t, 0x5A, need);
    emu_dev_close();
}
/* the start of every device-wide call: true for a size query (tb set), else the real
 * call's temp storage checked */
static inline bool temp_query(const char *what, void *t, size_t &tb, int64_t n) {
    if (!t) {
        tb = temp_bytes(n);
        return true;
    }
    check_temp(what, t, tb, n);
    return false;
}
/* [lo, hi) bytes of p[0..n) for raw pointers; iterators (counting_iterator) have none */
template <class T> static inline bool span(T *p, size_t n, uintptr_t r[2]) {
    r[0] = (uintptr_t)p, r[1] = r[0] + n * sizeof(T);
    return true;
}
template <class It> static inline bool span(const It &, size_t, uintptr_t r[2]) {
    r[0] = r[1] = 0;
    return false;
}
static inline bool overlap(const uintptr_t a[2], const uintptr_t b[2]) { return a[0] < b[1] && b[0] < a[1]; }
/* the value a thread gets where CUB leaves it undefined: NaN, or 0xA5 bytes */
template <class T> static inline T poison() {
    T v;
    if constexpr (std::numeric_limits<T>::has_quiet_NaN) v = std::numeric_limits<T>::quiet_NaN();
    else memset((void *)&v, 0xA5, sizeof v);
    return v;
}
/* Selection output guard. DeviceSelect::Flagged: "The range ``[d_out, d_out +
 * *d_num_selected_out)`` shall not overlap ``[d_in, d_in + num_items)``, ``[d_flags,
 * d_flags + num_items)`` nor ``d_num_selected_out`` in any way."; DeviceSelect::If: "The
 * range ``[d_out, d_out + *d_num_selected_out)`` shall not overlap ``[d_in, d_in +
 * num_items)`` nor ``d_num_selected_out`` in any way." Each output item is checked before
 * it is written, so the first one that overlaps stops the run. */
struct OutGuard {
    const char *what, *rule;
    uintptr_t r[3][2];
    const char *name[3];
    int k = 0;
    template <class P> void add(const char *nm, P p, size_t n) {
        if (span(p, n, r[k])) name[k++] = nm;
    }
    template <class O> void check(O out, int64_t c) {
        uintptr_t o[2];
        if (!span(out + c, 1, o)) return;
        for (int i = 0; i < k; i++)
            if (overlap(o, r[i])) {
                char why[200];
                snprintf(why, sizeof why, "output item d_out + %lld overlaps %s", (long long)c, name[i]);
                fail(what, why, rule);
            }
    }
};
static const char *const kSelFlagged =
    "The range [d_out, d_out + *d_num_selected_out) shall not overlap [d_in, d_in + num_items), "
    "[d_flags, d_flags + num_items) nor d_num_selected_out in any way.";
static const char *const kSelIf = "The range [d_out, d_out + *d_num_selected_out) shall not overlap "
                                  "[d_in, d_in + num_items) nor d_num_selected_out in any way.";
/* DeviceScan: "When ``d_in`` and ``d_out`` are equal, the scan is performed in-place. The
 * range ``[d_in, d_in + num_items)`` and ``[d_out, d_out + num_items)`` shall not overlap
 * in any other way." */
template <class I, class O> static inline void check_scan(const char *what, I in, O out, int64_t n) {
    uintptr_t a[2], b[2];
    if (!span(in, (size_t)n, a) || !span(out, (size_t)n, b)) return;
    if (a[0] != b[0] && overlap(a, b))
        fail(what, "d_in and d_out overlap without being equal",
             "When d_in and d_out are equal, the scan is performed in-place. The range [d_in, d_in + num_items) "
             "and [d_out, d_out + num_items) shall not overlap in any other way.");
}
}
namespace cub {
struct DeviceScan {
    template <class I, class O, class N> static cudaError_t ExclusiveSum(void *t, size_t &tb, I in, O out, N n, cudaStream_t s = 0) {
        (void)s; if (emu_cub::temp_query("DeviceScan::ExclusiveSum", t, tb, (int64_t)n)) return 0; emu_count_op("cub::DeviceScan::ExclusiveSum");
        emu_cub::check_scan("DeviceScan::ExclusiveSum", in, out, (int64_t)n);
        EmuDevScope open(in, out);
        typedef typename std::remove_reference<decltype(out[0])>::type T; T acc = 0;
        for (int64_t i = 0; i < (int64_t)n; i++) { T v = in[i]; out[i] = acc; acc += v; }
        return 0;
    }
    template <class I, class O, class Op, class N> static cudaError_t InclusiveScan(void *t, size_t &tb, I in, O out, Op op, N n, cudaStream_t s = 0) {
        (void)s; if (emu_cub::temp_query("DeviceScan::InclusiveScan", t, tb, (int64_t)n)) return 0; emu_count_op("cub::DeviceScan::InclusiveScan");
        emu_cub::check_scan("DeviceScan::InclusiveScan", in, out, (int64_t)n);
        EmuDevScope open(in, out);
        typedef typename std::remove_reference<decltype(out[0])>::type T;
        if (n <= 0) return 0; T acc = in[0]; out[0] = acc;
        for (int64_t i = 1; i < (int64_t)n; i++) { acc = op(acc, in[i]); out[i] = acc; }
        return 0;
    }
};
struct DeviceSelect {
    template <class I, class F, class O, class NS> static cudaError_t Flagged(void *t, size_t &tb, I in, F fl, O out, NS num, int64_t n, cudaStream_t s = 0) {
        (void)s; if (emu_cub::temp_query("DeviceSelect::Flagged", t, tb, n)) return 0; emu_count_op("cub::DeviceSelect::Flagged");
        emu_cub::OutGuard g{"DeviceSelect::Flagged", emu_cub::kSelFlagged};
        g.add("[d_in, d_in + num_items)", in, (size_t)n);
        g.add("[d_flags, d_flags + num_items)", fl, (size_t)n);
        g.add("d_num_selected_out", num, 1);
        EmuDevScope open(in, fl, out, num);
        int64_t c = 0; for (int64_t i = 0; i < n; i++) if (fl[i]) { g.check(out, c); out[c++] = in[i]; }
        *num = c; return 0;
    }
    template <class I, class O, class NS, class P> static cudaError_t If(void *t, size_t &tb, I in, O out, NS num, int64_t n, P pred, cudaStream_t s = 0) {
        (void)s; if (emu_cub::temp_query("DeviceSelect::If", t, tb, n)) return 0; emu_count_op("cub::DeviceSelect::If");
        emu_cub::OutGuard g{"DeviceSelect::If", emu_cub::kSelIf};
        g.add("[d_in, d_in + num_items)", in, (size_t)n);
        g.add("d_num_selected_out", num, 1);
        EmuDevScope open; /* pred may hold device pointers */
        int64_t c = 0; for (int64_t i = 0; i < n; i++) { auto v = in[i]; if (pred(v)) { g.check(out, c); out[c++] = v; } }
        *num = c; return 0;
    }
};
/* Block collectives. As in real CUB (BlockScanWarpScans, BlockReduceWarpReductions: warp
 * shuffles, then the warp aggregates through temp storage and one barrier) there is one
 * barrier, between writing temp storage and reading it, and none at the end: CUB's
 * @smemreuse, "A subsequent __syncthreads() threadblock barrier should be invoked after
 * calling this method if the collective's temporary storage (e.g., temp_storage) is to be
 * reused or repurposed." (the alias's text; the installed headers carry only "@smemreuse"
 * on every method). A caller that reuses TempStorage without that barrier overwrites it
 * while other threads still read it; EMU_ORDER=shuffle/rev show the difference. */
template <class T, int N> struct BlockScan {
    struct TempStorage { T v[N]; };
    TempStorage &ts;
    BlockScan(TempStorage &t) : ts(t) {}
    /* "block_aggregate: block-wide aggregate reduction of input items" (the initial value is
     * not in it: "the value 126 will be stored in block_aggregate" for a max scan seeded with
     * INT_MIN); "Also provides every thread with the block-wide block_aggregate of all inputs." */
    /* Each thread's result comes from the temp storage as it finds it after the barrier.
     * The scan of those contents is computed once and kept (outside the emulated shared
     * memory) with a copy of the inputs: a thread that finds the same bytes, the same
     * initial value, operator and storage takes its result from there, one that finds
     * other bytes (a caller that overwrote the storage too early) scans them afresh. */
    template <class Op> void ExclusiveScan(T in, T &out, T init, Op op, T &agg) {
        if (blockDim.x != N) { fprintf(stderr, "BlockScan with blockDim %u != %d\n", blockDim.x, N); exit(1); }
        ts.v[threadIdx.x] = in; __syncthreads();
        static struct { const void *at; T in[N], init, before[N], total; unsigned char op[sizeof(Op)]; } kept;
        if (kept.at != &ts || memcmp(kept.in, ts.v, sizeof kept.in) || memcmp(&kept.init, &init, sizeof init) ||
            (!std::is_empty<Op>::value && memcmp(kept.op, &op, sizeof op))) { /* (one launch runs at a time) */
            memcpy(kept.in, ts.v, sizeof kept.in), memcpy(&kept.init, &init, sizeof init), kept.at = &ts;
            memcpy(kept.op, &op, sizeof op);
            T acc = init; for (int i = 0; i < N; i++) kept.before[i] = acc, acc = op(acc, kept.in[i]);
            T tot = kept.in[0]; for (int i = 1; i < N; i++) tot = op(tot, kept.in[i]); kept.total = tot;
        }
        out = kept.before[threadIdx.x], agg = kept.total;
    }
};
/* "The return value is undefined in threads other than thread0." (every BlockReduce
 * reduction): those threads get emu_cub::poison<T>() (NaN, or 0xA5 bytes). */
template <class T, int N> struct BlockReduce {
    struct TempStorage { T v[N]; };
    TempStorage &ts;
    BlockReduce(TempStorage &t) : ts(t) {}
    T Sum(T in) {
        if (blockDim.x != N) { fprintf(stderr, "BlockReduce with blockDim %u != %d\n", blockDim.x, N); exit(1); }
        ts.v[threadIdx.x] = in; __syncthreads();
        if (threadIdx.x != 0) return emu_cub::poison<T>();
        T tot = ts.v[0]; for (int i = 1; i < N; i++) tot += ts.v[i];
        return tot;
    }
};
}
