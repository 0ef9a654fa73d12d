/* The device-side checks of the sparsifiers' decoders (compress/sparse_cuda.cu: topk's
 * bitmap and values, dgc's values and run entries, sbc's Rice codes), each also made on a
 * whole frame by the bundle's probe (compress/codec_cuda.cu, k_probe_checks), so that a
 * decoder given the probe's result waits for none of them (docs/GPU.md, "Waits and
 * launches"), the small device helpers the codec files share (gcomp_cuda.cu too), and
 * the host's launcher of a batch's tables of jobs (launch_tables).
 * Device code for those files only; the block-wide helpers work with any block size, their
 * shared scratch sized by the caller. */
#ifndef GCX_COMPRESS_SPARSE_CHECK_CUH
#define GCX_COMPRESS_SPARSE_CHECK_CUH

extern "C" {
#include "compress/golomb.h" /* rice_get, compiled for both */
}
#include "common/cuda_check.h"

#define DGC_RUN_SKIP 0xFFFFu /* a dgc run entry that skips 65535 zeros and ends no gap */
#define SBC_HEADER 9         /* sbc's payload header: the count, the mean, the Rice parameter */

/* a grid-stride loop: i over 0 .. n - 1 */
#define GRID_STRIDE(i, n) \
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (size_t)(n); i += (size_t)gridDim.x * blockDim.x)

/* little-endian 32-bit word at any alignment */
__device__ __forceinline__ uint32_t d_get_u32(const uint8_t *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

__device__ __forceinline__ void d_put_u32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* out[i] = v (acc == 0) or out[i] + weight * v, both roundings separate as on the CPU */
__device__ __forceinline__ void store_out(float *out, size_t i, float v, float weight, int acc) {
    out[i] = acc ? __fadd_rn(out[i], __fmul_rn(weight, v)) : v;
}

/* a value topk and dgc may not carry: +-0, NaN or +-inf */
__device__ __forceinline__ int d_bad_value(uint32_t u) {
    return (u & 0x7FFFFFFFu) == 0 || (u & 0x7F800000u) == 0x7F800000u;
}

/* dgc_decode's return code from its walk's outcome over E run entries (a bad value, the
 * gaps ended, the last entry the walk reads and its index after it) */
__host__ __device__ static inline int dgc_verdict(uint32_t bad, uint64_t ends, uint64_t last, uint64_t at, uint64_t n,
                                                  uint64_t k, uint64_t E, int stray) {
    if (bad || at >= n) return -GC_ERR_CORRUPT;
    if (ends < k) return -GC_ERR_TRUNCATED;
    if (last != E - 1 || stray) return -GC_ERR_OVERSIZED;
    return 0;
}

/* compress/sbc.c sbc_walk's verdict on what follows its last code, at bit `at` of
 * bits[nbytes]: only the zero padding of the last byte may remain */
static __device__ int d_sbc_tail(const uint8_t *bits, size_t nbytes, uint64_t at) {
    BitReader r;
    br_init(&r, bits, nbytes);
    r.bitpos = at;
    uint64_t left = br_bits_left(&r);
    if (left >= 8) return -GC_ERR_OVERSIZED;
    if (left && br_peek(&r, (int)left) != 0) return -GC_ERR_CORRUPT;
    return 0;
}

/* compress/sbc.c sbc_walk (SBC Algorithm 4, validation) of m Rice codes in bits[nbytes],
 * the positions into pos ([m]) unless it is NULL; its return code. One thread */
static __device__ int d_sbc_walk(uint32_t *pos, uint64_t n, int b, uint64_t m, const uint8_t *bits, size_t nbytes) {
    BitReader r;
    br_init(&r, bits, nbytes);
    uint64_t next = 0;
    for (uint64_t j = 0; j < m; j++) {
        uint64_t gap;
        if (next >= n) return -GC_ERR_CORRUPT;
        int e = rice_get(&gap, &r, b, n - 1 - next);
        if (e) return e;
        if (pos) pos[j] = (uint32_t)(next + gap);
        next += gap + 1;
    }
    return d_sbc_tail(bits, nbytes, r.bitpos);
}

/* the exclusive scan of v over the block's threads in thread order, a sum (or with max a
 * maximum, 0 before thread 0), and in *total the whole; sh: [blockDim.x] shared, free
 * again when it returns */
static __device__ uint64_t d_scan(uint64_t v, int max, uint64_t *sh, uint64_t *total) {
    unsigned t = threadIdx.x, T = blockDim.x;
    sh[t] = v;
    __syncthreads();
    for (unsigned d = 1; d < T; d <<= 1) {
        uint64_t o = t >= d ? sh[t - d] : 0;
        __syncthreads();
        if (t >= d) sh[t] = max ? (o > sh[t] ? o : sh[t]) : sh[t] + o;
        __syncthreads();
    }
    uint64_t ex = t ? sh[t - 1] : 0;
    *total = sh[T - 1];
    __syncthreads();
    return ex;
}

static __device__ uint64_t d_scan_sum(uint64_t v, uint64_t *sh, uint64_t *total) { return d_scan(v, 0, sh, total); }

/* topk_dec's device checks of payload p (k values of n > 0, 4 + bm + 4k bytes): a set
 * padding bit, a bad value, the bitmap's count against k; their return code */
static __device__ int d_topk_check(const uint8_t *p, uint64_t n, uint64_t k, uint64_t *sh) {
    size_t bm = (size_t)((n + 7) / 8);
    uint32_t pad = (n & 7) ? 0xFFu >> (n & 7) : 0u;
    uint64_t pop = 0, bad = 0, all, anybad;
    for (size_t b = threadIdx.x; b < bm; b += blockDim.x) {
        pop += (uint64_t)__popc(p[4 + b]);
        bad |= b + 1 == bm && (p[4 + b] & pad);
    }
    for (size_t j = threadIdx.x; j < k; j += blockDim.x) bad |= d_bad_value(d_get_u32(p + 4 + bm + 4 * j));
    d_scan_sum(pop, sh, &all);
    d_scan_sum(bad, sh, &anybad);
    return anybad || all != k ? -GC_ERR_CORRUPT : 0;
}

/* dgc_dec's device checks of payload p (k >= 1 values of n, pl >= 4 + 6k bytes): a bad
 * value, and the walk over the first W run entries that k_dgc_positions and k_dgc_short
 * make of the whole scans, here with the scans carried from one block's worth of entries
 * to the next; the return code */
static __device__ int d_dgc_check(const uint8_t *p, size_t pl, uint64_t n, uint64_t k, uint64_t *sh) {
    __shared__ uint64_t last, at;
    uint64_t E = (pl - 4 - 4 * k) / 2, most = k + (n - 1) / 65535 + 1, W = E > most ? most : E;
    int stray = (int)((pl - 4 - 4 * k) & 1);
    const uint8_t *runs = p + 4 + 4 * k;
    uint64_t bad = 0, anybad, S = 0, J = 0, rs, ts;
    for (size_t j = threadIdx.x; j < k; j += blockDim.x) bad |= d_bad_value(d_get_u32(p + 4 + 4 * j));
    d_scan_sum(bad, sh, &anybad);
    if (threadIdx.x == 0) last = at = 0;
    for (uint64_t base = 0; base < W; base += blockDim.x) { /* S, J: the scans before entry base */
        uint64_t e = base + threadIdx.x, r = 0, t = 0;
        if (e < W) {
            r = (uint64_t)runs[2 * e] | (uint64_t)runs[2 * e + 1] << 8;
            t = r != DGC_RUN_SKIP;
        }
        uint64_t se = S + d_scan_sum(r, sh, &rs), je = J + d_scan_sum(t, sh, &ts);
        if (t && je + 1 == k) { /* the entry that ends the k-th gap: one thread's */
            last = e;
            at = se + r + je;
        }
        S += rs;
        J += ts;
    }
    __syncthreads();
    uint64_t l = last, a = at;
    if (J < k) { /* fewer than k gaps: the walk reads all W entries */
        uint64_t rl = (uint64_t)runs[2 * (W - 1)] | (uint64_t)runs[2 * (W - 1) + 1] << 8;
        l = W - 1;
        a = S + (J - (rl != DGC_RUN_SKIP));
    }
    return dgc_verdict((uint32_t)anybad, J, l, a, n, k, E, stray);
}

/* the device checks of a frame of len bytes (any bytes) whose header says topk, dgc or sbc,
 * where the payload is one a probe takes: of up to 64 bytes a thread of the block, and sbc's
 * of up to 4 codes a thread besides (its walk is one thread's, and its decoder walks it
 * again for the positions); the decoders check larger ones themselves, with a wait. Returns the codec's id and its decoder's
 * return code in *rc (which the host uses once the header and the decoder's own checks on
 * the host have passed), or 0 where it checked nothing. Every thread of the block calls it;
 * sh: [blockDim.x] shared */
static __device__ int d_sparse_check(const uint8_t *frame, size_t len, uint64_t *sh, int *rc) {
    *rc = 0;
    if (len < CODEC_HEADER_SIZE + 4) return 0; /* without its count the host fails it */
    uint8_t id = frame[5];
    const uint8_t *p = frame + CODEC_HEADER_SIZE;
    size_t pl = len - CODEC_HEADER_SIZE, most = (size_t)blockDim.x * 64;
    uint64_t n = d_get_u32(frame + 8), k = d_get_u32(p);
    if (id == CODEC_TOPK && n > 0 && k <= n && pl <= most && pl == 4 + (n + 7) / 8 + 4 * k) {
        *rc = d_topk_check(p, n, k, sh);
    } else if (id == CODEC_DGC && k >= 1 && k <= n && pl <= most && pl >= 4 + 6 * k) {
        *rc = d_dgc_check(p, pl, n, k, sh);
    } else if (id == CODEC_SBC && pl >= SBC_HEADER && pl <= most && p[8] <= 31 && k <= 4 * (uint64_t)blockDim.x) {
        if (threadIdx.x == 0) *rc = d_sbc_walk(NULL, n, p[8], k, p + SBC_HEADER, pl - SBC_HEADER);
    } else {
        return 0;
    }
    return id;
}

/* k jobs, job(i) each, launched CODEC_BATCH at a time: launch(tab, m) runs the table's first m
 * jobs (a block each, or as its other members say, which it may fill), the table going as
 * the kernel's argument (no upload, no wait). Tab: a struct whose member j[CODEC_BATCH]
 * holds the jobs */
template <class Tab, class Job, class Launch>
static void launch_tables(size_t k, Job job, Launch launch) {
    Tab a = Tab(); /* its unused entries zero: the launch's argument is all defined bytes */
    for (size_t i = 0; i < k; i += CODEC_BATCH) {
        unsigned m = (unsigned)(k - i < CODEC_BATCH ? k - i : CODEC_BATCH);
        for (unsigned q = 0; q < m; q++) a.j[q] = job(i + q);
        launch(a, m);
        cudaCheckLast();
    }
}

#endif
