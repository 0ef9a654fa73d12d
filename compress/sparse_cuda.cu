/* GPU paths of the sparsifying codecs topk, dgc and sbc (docs/FORMAT.md section 9;
 * CPU twins compress/topk.c, dgc.c, sbc.c, selection compress/select.[ch]).
 *
 * Selection (DGC section 5, "sampling to reduce top-k selection time" and the
 * precise threshold "calculated from the already-selected gradients"):
 *   1. tensors above SELECT_EXACT_MAX values: a kernel gathers the keys of the
 *      same strided sample as the CPU (select_sample_index), and the radix
 *      select of step 3 finds the sample threshold t0 among them, left on the
 *      device;
 *   2. compaction on the GPU (cub::DeviceSelect::If over the indices): the
 *      candidates i with key(x[i]) >= t0, in increasing order; the host reads
 *      their count and t0 in one copy; if fewer than k pass a sampled t0, again
 *      with t0 = 1 (every nonzero key);
 *   3. more than k candidates: the exact k-th largest candidate key T by a
 *      radix select on the GPU (digits of 12, 12 and 8 bits as the CPU: one
 *      histogram kernel and one bucket-choosing block per digit), then the
 *      candidates with key > T and the first k - #(key > T) with key == T
 *      (lowest indices first: an exclusive scan of the ties), compacted.
 * The set is the definition of select.h (the k largest keys, ties by lowest
 * index), so it equals the CPU's whatever the sample.
 *
 * Payloads, written by kernels: topk's bitmap and values, dgc's values and 16-bit
 * runs, sbc's Golomb-Rice positions (SBC Algorithm 3: each code's length, their scan,
 * then one thread per code sets its bits); sbc's two means (Algorithm 2: double sums in
 * index order, the CPU's roundings) found in parallel where that sum is exact (k_sbc_bins),
 * else by one device thread.
 *
 * Decoders read the payload in device memory (a Pay: the host holds only its first 16
 * and last 8 bytes) and give the CPU decoder's return code for every input:
 *   topk: the bitmap's popcounts, their exclusive scan (each byte's first value),
 *         padding bits and values checked by kernels;
 *   dgc:  the 16-bit run entries in parallel: an entry ends a gap unless it is a skip
 *         (0xFFFF); with S the inclusive scan of the entries and J the number of gaps
 *         ended before an entry, the CPU walk's index after entry e is S[e] + J[e],
 *         nondecreasing in e, so the walk fails (an index >= n) exactly when it fails
 *         at the last entry it reads, the k-th gap's end or else the last entry;
 *   sbc:  the Rice codes (SBC Algorithm 4) without a sequential walk: where each code
 *         starts depends on the bits alone (a run of ones, a zero, b bits), so the starts
 *         come from the successor of every bit position by doubling (log2 m rounds), each
 *         code's value from its start, their sum each code's index, and the walk's
 *         checks (compress/golomb.h rice_get) on every code at once, the first failure's
 *         code the return code (rice_positions). A bundle's probe of a small payload, and
 *         the one-block decoder, walk in one thread (compress/sparse_check.cuh d_sbc_walk).
 * Then a kernel scatters the values into out.
 */
#define GC_CODEC_CUDA_INTERNAL
extern "C" {
#include "common/errors.h"
#include "common/rng.h"
#include "compress/codec.h"
#include "compress/golomb.h"
#include "compress/select.h"
}
#include "compress/codec_cuda.h"
#include "compress/sparse_check.cuh"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cub/cub.cuh>
#include <thrust/iterator/counting_iterator.h>

#include "common/check.h"
#include "common/cuda_check.h"

#define TPB 256
/* ============================================================ selection ==== */

/* compress/select.h select_key */
__device__ __forceinline__ uint32_t d_key(float f, int mode) {
    uint32_t u = __float_as_uint(f), mag = u & 0x7FFFFFFFu, sign = u >> 31;
    if (mode == SELECT_MAG) return mag;
    if (mode == SELECT_POS) return mag & (sign - 1u);
    return mag & (0u - sign);
}

/* the sample keys: one per stratum, at select_sample_index(n, m, j). s: [m] */
__global__ void k_sample(uint32_t *s, const float *x, size_t n, size_t m, int mode) {
    GRID_STRIDE(j, m) {
        uint64_t lo = (uint64_t)j * n / m, hi = (uint64_t)(j + 1) * n / m;
        uint64_t i = lo + (((rng_hash64(SELECT_SEED ^ (uint64_t)n, j) >> 32) * (hi - lo)) >> 32);
        s[j] = d_key(x[i], mode);
    }
}

/* the candidates' threshold and count (compact_ge): t on the device before the compaction,
 * num after it; both read back in one copy */
struct CandBack {
    int64_t num;
    uint32_t t, found; /* the sample's radix select: the digits it found (3 when none ran) */
};

struct KeyGe {
    const float *x;
    const CandBack *cb;
    int mode;
    __device__ bool operator()(const uint32_t &i) const { return d_key(x[i], mode) >= cb->t; }
};

/* indices i < n (increasing) with key(x[i]) >= cb->t into out ([n] device), their count into
 * cb->num (cb: device) */
static void compact_ge(uint32_t *out, const float *x, size_t n, CandBack *cb, int mode) {
    KeyGe pred = {x, cb, mode};
    thrust::counting_iterator<uint32_t> first(0);
    size_t tb = 0;
    cudaCheck(cub::DeviceSelect::If(NULL, tb, first, out, &cb->num, gcx_cub_items(n), pred));
    void *tmp = gcx_dmalloc(tb);
    cudaCheck(cub::DeviceSelect::If(tmp, tb, first, out, &cb->num, gcx_cub_items(n), pred));
    gcx_dfree(tmp);
}

__global__ void k_gather_keys(uint32_t *keys, const uint32_t *idx, const float *x, size_t c, int mode) {
    GRID_STRIDE(j, c) keys[j] = d_key(x[idx[j]], mode);
}

/* the radix select's state between digits, on the device: the digits chosen so far
 * (prefix), the rank still sought among the keys that share them (k), the keys above
 * them (greater), and how many digits found their bucket (found) */
struct KthState {
    uint32_t prefix, found;
    uint64_t k, greater;
};

/* histogram of the digit (key >> sh) & dm over the keys whose bits above hsh equal
 * those of st->prefix (all keys when hsh == 32). hist: [dm + 1] accumulated */
__global__ void k_digit_hist(uint32_t *hist, const uint32_t *keys, size_t c, int sh, uint32_t dm, int hsh,
                             const KthState *st) {
    __shared__ uint32_t h[4096];
    uint32_t hpre = hsh < 32 ? st->prefix >> hsh : 0u;
    for (uint32_t b = threadIdx.x; b <= dm; b += blockDim.x) h[b] = 0;
    __syncthreads();
    GRID_STRIDE(i, c) {
        uint32_t k = keys[i];
        if (hsh < 32 && (k >> hsh) != hpre) continue;
        atomicAdd(&h[(k >> sh) & dm], 1u);
    }
    __syncthreads();
    for (uint32_t b = threadIdx.x; b <= dm; b += blockDim.x)
        if (h[b]) atomicAdd(&hist[b], h[b]);
}

/* compress/select.c's bucket choice for one digit, in one block of TPB threads: going down
 * from the top bucket, the first whose count takes the running sum to st->k (bucket 0 if
 * none above it does); the sum of the buckets above it leaves k and joins greater.
 * Thread t sums w = nb / TPB buckets (the t-th run from the top), thread 0 scans the
 * sums, and the thread whose run holds the crossing walks it. nb: 256 or 4096 */
__global__ void k_digit_pick(KthState *st, const uint32_t *hist, uint32_t nb, int sh) {
    __shared__ uint64_t sums[TPB];
    __shared__ uint64_t k;
    uint32_t t = threadIdx.x, w = nb / TPB, top = nb - 1 - t * w; /* this run: buckets top .. top - w + 1 */
    uint64_t mine = 0;
    for (uint32_t q = 0; q < w; q++) mine += hist[top - q];
    sums[t] = mine;
    if (t == 0) k = st->k;
    __syncthreads();
    if (t == 0) {
        uint64_t run = 0;
        for (uint32_t u = 0; u < TPB; u++) {
            uint64_t v = sums[u];
            sums[u] = run;
            run += v;
        }
    }
    __syncthreads();
    uint64_t cum = sums[t];
    if (cum < k && cum + mine >= k) {
        uint32_t b = top;
        for (uint32_t q = 0; q < w; q++, b--) {
            if (b == 0 || cum + hist[b] >= k) break;
            cum += hist[b];
        }
        st->greater += cum;
        st->k = k - cum;
        st->prefix |= b << sh;
        st->found++;
    }
}

/* the k-th largest of keys[c] (1 <= k <= c) and the number of keys above it:
 * compress/select.c rs_rest, one digit level at a time (bits 31..20, 19..8, 7..0), every
 * bucket chosen on the device; one copy of the result to the host */
static_assert(sizeof(KthState) <= CUDA_PUT_MAX, "KthState goes up as a kernel argument");
/* the k-th largest of keys[c] (1 <= k <= c), left on the device: compress/select.c rs_rest,
 * one digit level at a time (bits 31..20, 19..8, 7..0), every bucket chosen on the device.
 * The state's prefix is the key, greater the number of keys above it, found 3 (the
 * caller checks it). gcx_dfree it */
static KthState *kth_largest_dev(const uint32_t *keys, size_t c, size_t k) {
    static const int sh[3] = {20, 8, 0}, width[3] = {12, 12, 8};
    uint32_t *dh = (uint32_t *)gcx_dmalloc(4096 * sizeof(uint32_t));
    KthState *dst = (KthState *)gcx_dmalloc(sizeof(KthState)), st = {0, 0, (uint64_t)k, 0};
    cuda_put_bytes(dst, &st, sizeof st);
    for (int level = 0; level < 3; level++) {
        uint32_t nb = 1u << width[level];
        cudaCheck(cudaMemsetAsync(dh, 0, nb * sizeof(uint32_t), 0));
        k_digit_hist<<<gcx_grid(c), TPB>>>(dh, keys, c, sh[level], nb - 1, level == 0 ? 32 : sh[level - 1], dst);
        cudaCheckLast();
        k_digit_pick<<<1, TPB>>>(dst, dh, nb, sh[level]);
        cudaCheckLast();
    }
    gcx_dfree(dh);
    return dst;
}

static void kth_check(uint32_t found) {
    if (found != 3) {
        fprintf(stderr, "internal error: GPU radix select found %u of 3 digits at %s:%d\n", found, __FILE__, __LINE__);
        exit(1);
    }
}

/* the candidates' threshold from the sample's radix select st (NULL: none): its key, or 1
 * where that is 0 (fewer nonzero sample keys than sought: every nonzero key); its digits'
 * count kept for the host's check */
__global__ void k_cand_t(CandBack *cb, const KthState *st) {
    cb->num = 0;
    cb->t = st && st->prefix ? st->prefix : 1u;
    cb->found = st ? st->found : 3u;
}

/* T = st->prefix, the k-th largest key (kth_largest_dev) */
__global__ void k_ties(uint32_t *eq, const uint32_t *keys, size_t c, const KthState *st) {
    uint32_t T = st->prefix;
    GRID_STRIDE(j, c) eq[j] = keys[j] == T ? 1u : 0u;
}

/* every key > T, and the first q = k - st->greater keys == T (rank: exclusive count of
 * ties before) */
__global__ void k_pick(uint8_t *fl, const uint32_t *keys, const uint32_t *rank, size_t c, const KthState *st,
                       uint64_t k) {
    uint32_t T = st->prefix, ok = st->found == 3; /* else nothing picked (idx holds k), and the host stops */
    uint64_t q = k - st->greater;
    GRID_STRIDE(j, c) {
        uint32_t key = keys[j];
        fl[j] = ok && (key > T || (key == T && (uint64_t)rank[j] < q)) ? 1 : 0;
    }
}

/* what an encoder reads back of its selection at its end, with its own results in one copy
 * (zeroed before the selection): the checks of its radix select (how many it picked, the
 * digits it found), and whether a selected value is NaN or infinite (k_nonfinite) */
struct SelBack {
    int64_t got;
    uint32_t found, bad;
};

/* the checks of gpu_select's radix select, where it ran (radix), read back in hb: an
 * internal error stops the program */
static void sel_check(const SelBack *hb, int radix, size_t k) {
    if (!radix) return;
    kth_check(hb->found);
    if ((size_t)hb->got != k) {
        fprintf(stderr, "internal error: GPU top-k picked %lld of %zu at %s:%d\n", (long long)hb->got, k, __FILE__,
                __LINE__);
        exit(1);
    }
}

/* A selection's first half (select_begin): the candidates, the indices whose keys reach
 * the sample's threshold (or every nonzero key), compacted on the device, their count
 * left in cb for the host's read; select_end takes it from there. Between them nothing
 * waits, so a pass's staged frames read all their counts at once
 * (gcx_sparse_finish_staged) */
typedef struct {
    const float *x;
    size_t n, k;
    int mode;
    KthState *st0;  /* the sample's threshold, left on the device for the compaction */
    uint32_t *ds;   /* the sample */
    CandBack *cb;   /* the threshold and the count */
    uint32_t *cand; /* [n] the candidates */
} SelPlan;

/* 1 <= k <= n */
static void select_begin(SelPlan *p, const float *x, size_t n, size_t k, int mode) {
    KthState *st0 = NULL;
    uint32_t *ds = NULL;
    if (n > SELECT_EXACT_MAX) {
        size_t m = (size_t)ceil((double)n * SELECT_SAMPLE_FRAC);
        if (m < SELECT_MIN_SAMPLE) m = SELECT_MIN_SAMPLE;
        if (m > n) m = n;
        ds = (uint32_t *)gcx_dmalloc(m * 4);
        k_sample<<<gcx_grid(m), TPB>>>(ds, x, n, m, mode);
        cudaCheckLast();
        /* select.c: t0 = the jr-th largest nonzero sample key, if there are jr of them;
         * zeros sort last, so that is the jr-th largest key when that is not 0 */
        double e = (double)k * (double)m / (double)n;
        double jr = ceil(e + 3.0 * sqrt(e) + 1.0);
        if (jr <= (double)m) st0 = kth_largest_dev(ds, m, (size_t)jr);
    }
    CandBack *cb = (CandBack *)gcx_dmalloc(sizeof(CandBack));
    k_cand_t<<<1, 1>>>(cb, st0);
    cudaCheckLast();
    uint32_t *cand = (uint32_t *)gcx_dmalloc(n * 4);
    compact_ge(cand, x, n, cb, mode);
    SelPlan q = {x, n, k, mode, st0, ds, cb, cand};
    *p = q;
}

/* a plan's threshold, count and sample returned (its candidates are the caller's) */
static void plan_release(SelPlan *p) {
    gcx_dfree(p->cb);
    gcx_dfree(p->st0);
    gcx_dfree(p->ds);
}

/* The selection's second half, once the host has read p->cb into hc: the top k (the
 * candidates again, with a wait, where the sample's threshold let fewer than k through),
 * indices increasing, into idx ([k] device). Returns min(k, number of nonzero keys). With
 * more candidates than k, a radix select picks them (*radix = 1), and its checks are left
 * in bk (device) for the caller's read, with sel_check. p's scratch is returned */
static size_t select_end(SelPlan *p, CandBack hc, uint32_t *idx, SelBack *bk, int *radix) {
    *radix = 0;
    const float *x = p->x;
    size_t n = p->n, k = p->k;
    int mode = p->mode;
    uint32_t *cand = p->cand;
    kth_check(hc.found);
    if ((size_t)hc.num < k && hc.t > 1) { /* the sample threshold was too high: every nonzero key */
        k_cand_t<<<1, 1>>>(p->cb, NULL);
        cudaCheckLast();
        compact_ge(cand, x, n, p->cb, mode);
        cudaCheck(cudaMemcpy(&hc, p->cb, sizeof hc, cudaMemcpyDeviceToHost));
    }
    size_t c = (size_t)hc.num;
    plan_release(p);
    if (c <= k) {
        if (c) cudaCheck(cudaMemcpyAsync(idx, cand, c * 4, cudaMemcpyDeviceToDevice, 0));
        gcx_dfree(cand);
        return c;
    }
    uint32_t *keys = (uint32_t *)gcx_dmalloc(c * 4), *eq = (uint32_t *)gcx_dmalloc(c * 4),
             *rank = (uint32_t *)gcx_dmalloc(c * 4);
    uint8_t *fl = (uint8_t *)gcx_dmalloc(c);
    k_gather_keys<<<gcx_grid(c), TPB>>>(keys, cand, x, c, mode);
    cudaCheckLast();
    KthState *st = kth_largest_dev(keys, c, k); /* T stays on the device: one wait, at the end */
    k_ties<<<gcx_grid(c), TPB>>>(eq, keys, c, st);
    cudaCheckLast();
    gcx_exclusive_sum_u32(rank, eq, c);
    k_pick<<<gcx_grid(c), TPB>>>(fl, keys, rank, c, st, (uint64_t)k);
    cudaCheckLast();
    gcx_select_flagged_u32_dev(idx, cand, fl, c, &bk->got);
    cudaCheck(cudaMemcpyAsync(&bk->found, &st->found, sizeof st->found, cudaMemcpyDeviceToDevice, 0));
    *radix = 1;
    gcx_dfree(st);
    gcx_dfree(keys);
    gcx_dfree(eq);
    gcx_dfree(rank);
    gcx_dfree(fl);
    gcx_dfree(cand);
    return k;
}

/* The top k keys of x[n] (select.h's definition), indices increasing, into
 * idx ([k] device): select_begin, the count read (a wait), select_end */
static size_t gpu_select(uint32_t *idx, const float *x, size_t n, size_t k, int mode, SelBack *bk, int *radix) {
    *radix = 0;
    if (k > n) k = n;
    if (k == 0) return 0;
    SelPlan p;
    CandBack hc;
    select_begin(&p, x, n, k, mode);
    cudaCheck(cudaMemcpy(&hc, p.cb, sizeof hc, cudaMemcpyDeviceToHost)); /* the count and the threshold */
    return select_end(&p, hc, idx, bk, radix);
}

/* ============================================================= helpers ==== */

/* v[j] = x[idx[j]] (x: [n]). The selection's own checks are read with the encoder's results,
 * after this runs: an index at or past n, which only a selection that failed them leaves,
 * reads nothing, so that the run stops with their message */
__global__ void k_gather_vals(float *v, const uint32_t *idx, const float *x, size_t c, size_t n) {
    GRID_STRIDE(j, c) v[j] = idx[j] < n ? x[idx[j]] : 0.0f;
}

/* *flag |= 1 when some v[j] is NaN or infinite */
__global__ void k_nonfinite(uint32_t *flag, const float *v, size_t c) {
    uint32_t f = 0;
    GRID_STRIDE(j, c) f |= (__float_as_uint(v[j]) & 0x7F800000u) == 0x7F800000u;
    if (f) atomicOr(flag, 1u);
}

/* the selected values v[c] gathered from x ([n]) and checked into bk->bad (k_nonfinite) */
static void gather_checked(float *v, const uint32_t *idx, const float *x, size_t c, size_t n, SelBack *bk) {
    if (c == 0) return;
    k_gather_vals<<<gcx_grid(c), TPB>>>(v, idx, x, c, n);
    cudaCheckLast();
    k_nonfinite<<<gcx_grid(c), TPB>>>(&bk->bad, v, c);
    cudaCheckLast();
}

/* whether a staged frame may write through the c indices its selection picked: got, the
 * radix select's count on the device (NULL: none ran, or the host has checked it). One
 * that failed its checks left idx partly unwritten; nothing is written through it, and the
 * host stops the run with their message once it reads them (gcx_sparse_staged_len) */
__device__ __forceinline__ int d_picked(const int64_t *got, size_t c) { return !got || *got == (int64_t)c; }

__global__ void k_scatter_mask(uint8_t *mask, const uint32_t *idx, size_t c, const int64_t *got) {
    if (!d_picked(got, c)) return;
    GRID_STRIDE(j, c) mask[idx[j]] = 1;
}

/* out[idx[j]] = v[j] (or += weight * v[j]); v == NULL: the constant cv */
__global__ void k_scatter(float *out, const uint32_t *idx, const float *v, float cv, size_t c, float weight,
                          int acc, const int64_t *got) {
    if (!d_picked(got, c)) return;
    GRID_STRIDE(j, c) {
        uint32_t i = idx[j];
        store_out(out, i, v ? v[j] : cv, weight, acc);
    }
}

/* CodecSide.mask and CodecSide.repr of a selection (repr may alias x: the
 * values were gathered before). idx: [c] device; v: [c] device or NULL; got: d_picked's */
static void side_outputs(const CodecSide *side, const uint32_t *idx, const float *v, float cv, size_t c, size_t n,
                         const int64_t *got) {
    if (side->mask && n) {
        cudaCheck(cudaMemsetAsync(side->mask, 0, n, 0));
        if (c) {
            k_scatter_mask<<<gcx_grid(c), TPB>>>(side->mask, idx, c, got);
            cudaCheckLast();
        }
    }
    if (side->repr && n) {
        cudaCheck(cudaMemsetAsync(side->repr, 0, n * sizeof(float), 0));
        if (c) {
            k_scatter<<<gcx_grid(c), TPB>>>(side->repr, idx, v, cv, c, 1.0f, 0, got);
            cudaCheckLast();
        }
    }
}

static void put_u32_dev(uint8_t *dst, uint32_t v) {
    uint8_t b[4];
    put_u32(b, v);
    cuda_put_bytes(dst, b, 4);
}

/* ================================================================ topk ==== */

/* bitmap bit of value i: bit 7 - (i % 8) of byte 4 + i/8 of the payload, set
 * through the aligned 32-bit word holding it (pay is 4-byte aligned: a device allocation,
 * or codec_encode_cuda_payload's staging buffer for a caller's pointer that is not) */
__global__ void k_topk_bits(uint32_t *pay32, const uint32_t *idx, size_t c, const int64_t *got) {
    if (!d_picked(got, c)) return;
    GRID_STRIDE(j, c) {
        uint32_t i = idx[j];
        uint64_t byte = 4 + (uint64_t)(i >> 3);
        atomicOr(&pay32[byte >> 2], (0x80u >> (i & 7)) << (8 * (byte & 3)));
    }
}

/* value j (float, little-endian) at byte off + 4j, any alignment */
__global__ void k_put_vals_bytes(uint8_t *pay, size_t off, const float *v, size_t c) {
    GRID_STRIDE(j, c) d_put_u32(pay + off + 4 * j, __float_as_uint(v[j]));
}

/* what topk_enc and dgc_enc read back at their end, in one copy: the selection's checks, and
 * the run entries dgc's values take */
struct SparseBack {
    SelBack sel;
    uint64_t entries;
};
static_assert(sizeof(SparseBack) == SPARSE_BACK, "a staged sparse frame's checks: SPARSE_BACK bytes");

/* the k (at most n) of topk's ratio, dgc's density or sbc's p (side->density: DGC's
 * warm-up), that density in *d where d is not NULL; or -1 */
static int64_t sparse_count(const CodecCuda *g, size_t n, const CodecSide *side, double *d) {
    double p;
    if (select_density(&p, g->spec.v[0], side->density)) return -1;
    if (d) *d = p;
    return (int64_t)select_count(p, n);
}

/* topk's and dgc's selection: the top k of x, their values gathered and checked into
 * bk->sel, bk zeroed first (staged: st->bk, read back with the pass's; else a piece of
 * its own, read by sparse_read) */
typedef struct {
    uint32_t *idx;      /* [k] device: the indices picked, increasing */
    float *v;           /* [cnt] device: their values */
    size_t cnt;         /* how many were picked */
    int radix;          /* gpu_select's */
    SparseBack *bk;
    const int64_t *got; /* d_picked's: staged after a radix select, its count still on the device */
} SparseSel;

/* sparse_select's first half: its k (at most n) into *k, the indices' room, bk zeroed */
static int select_open(SparseSel *s, CodecCuda *g, size_t n, const CodecSide *side, SparseStage *st, size_t *k) {
    int64_t kk = sparse_count(g, n, side, NULL);
    if (kk < 0) return -GC_ERR_PARAM;
    *k = (size_t)kk < n ? (size_t)kk : n;
    s->idx = (uint32_t *)gcx_dmalloc((kk ? (size_t)kk : 1) * 4);
    s->bk = st ? (SparseBack *)st->bk : (SparseBack *)gcx_dmalloc(sizeof(SparseBack));
    cudaCheck(cudaMemsetAsync(s->bk, 0, sizeof(SparseBack), 0));
    return 0;
}
/* its second half, once the selection has picked s->cnt: their values gathered and checked */
static void select_close(SparseSel *s, const float *x, size_t n, const SparseStage *st) {
    s->v = (float *)gcx_dmalloc((s->cnt ? s->cnt : 1) * 4);
    gather_checked(s->v, s->idx, x, s->cnt, n, &s->bk->sel);
    s->got = st && s->radix ? &s->bk->sel.got : NULL;
}
static int sparse_select(SparseSel *s, CodecCuda *g, const float *x, size_t n, const CodecSide *side,
                         SparseStage *st) {
    size_t k;
    if (select_open(s, g, n, side, st, &k)) return -GC_ERR_PARAM;
    s->cnt = gpu_select(s->idx, x, n, k, SELECT_MAG, &s->bk->sel, &s->radix);
    select_close(s, x, n, st);
    return 0;
}

/* the frame's payload length from its read-back hb, or its error: the selection's checks
 * (an internal error stops the program), a NaN or infinite value, cap exceeded */
static int64_t sparse_verdict(const CodecCuda *g, size_t n, const SparseBack *hb, int radix, size_t cnt, size_t cap) {
    sel_check(&hb->sel, radix, cnt);
    if (hb->sel.bad) return -GC_ERR_PARAM;
    size_t len = g->spec.ops->id == CODEC_DGC ? 4 + 4 * cnt + 2 * (size_t)hb->entries : 4 + (n + 7) / 8 + 4 * cnt;
    return cap < len ? -GC_ERR_NOSPACE : (int64_t)len;
}

/* in place: the encoder's one read (the selection's checks, the values', dgc's entries) and
 * its verdict; staged: 0, the read left to codec_batch_sizes */
static int64_t sparse_read(SparseSel *s, const CodecCuda *g, size_t n, size_t cap, const SparseStage *st) {
    if (st) return 0;
    SparseBack hb;
    cudaCheck(cudaMemcpy(&hb, s->bk, sizeof hb, cudaMemcpyDeviceToHost));
    gcx_dfree(s->bk);
    return sparse_verdict(g, n, &hb, s->radix, s->cnt, cap);
}

/* the selection's scratch returned; staged, what the length needs besides kept in st.
 * Returns the encoder's result: rc in place, 0 staged */
static int64_t sparse_end(SparseSel *s, SparseStage *st, int64_t rc) {
    gcx_dfree(s->idx);
    gcx_dfree(s->v);
    if (!st) return rc;
    st->cnt = s->cnt;
    st->radix = s->radix;
    return 0;
}

/* a staged topk, dgc or sbc frame of more than ONE_N values between codec_batch_stage and
 * codec_batch_sizes: its selection begun (plan, or sbc's two, when k > 0), what its
 * encoder needs */
struct SbcWork;
struct SparseLater {
    struct SbcWork *sbc; /* sbc's state, or NULL (topk, dgc: s, plan) */
    SparseSel s;
    SelPlan plan;
    size_t k, n, cap;
    CodecCuda *g;
    uint8_t *pay;
    const float *x;
    CodecSide side;
};

/* topk_enc and dgc_enc: the payload, the checks read back and the frame's length; or, staged
 * (st), the payload written for a frame that may yet fail and the checks left in st->bk */
static int64_t topk_write(SparseSel &s, CodecCuda *g, uint8_t *pay, size_t cap, size_t n, const CodecSide *side,
                          SparseStage *st) {
    int64_t rc = sparse_read(&s, g, n, cap, st);
    size_t bm = (n + 7) / 8;
    if (rc >= 0) {
        cudaCheck(cudaMemsetAsync(pay, 0, 4 + bm, 0));
        put_u32_dev(pay, (uint32_t)s.cnt);
        if (s.cnt) {
            k_topk_bits<<<gcx_grid(s.cnt), TPB>>>((uint32_t *)pay, s.idx, s.cnt, s.got);
            cudaCheckLast();
            k_put_vals_bytes<<<gcx_grid(s.cnt), TPB>>>(pay, 4 + bm, s.v, s.cnt);
            cudaCheckLast();
        }
        side_outputs(side, s.idx, s.v, 0.0f, s.cnt, n, s.got);
    }
    return sparse_end(&s, st, rc);
}
static int64_t topk_enc(CodecCuda *g, uint8_t *pay, size_t cap, const float *x, size_t n, const CodecSide *side,
                        SparseStage *st) {
    SparseSel s;
    if (sparse_select(&s, g, x, n, side, st)) return -GC_ERR_PARAM;
    return topk_write(s, g, pay, cap, n, side, st);
}


/* pc[b] = set bits of bitmap byte b (pc[bm] = 0); *flag |= 1 when the padding bits of
 * the last byte (pad: their mask) are not zero */
__global__ void k_popcnt(uint32_t *pc, uint32_t *flag, const uint8_t *bitmap, size_t bm, uint32_t pad) {
    GRID_STRIDE(b, bm + 1) {
        pc[b] = b < bm ? (uint32_t)__popc(bitmap[b]) : 0u;
        if (b + 1 == bm && (bitmap[b] & pad)) atomicOr(flag, 1u);
    }
}

/* *flag |= 1 for a value that is +-0, NaN or +-inf. vals: [k] little-endian floats, any alignment */
__global__ void k_bad_vals(uint32_t *flag, const uint8_t *vals, size_t k) {
    uint32_t f = 0;
    GRID_STRIDE(j, k) {
        f |= d_bad_value(d_get_u32(vals + 4 * j));
    }
    if (f) atomicOr(flag, 1u);
}

/* byte b of the bitmap: its set bits (MSB first = lowest index) take values
 * rank[b], rank[b] + 1, ...; with verdict (device), only where it is 0 */
__global__ void k_topk_dec(float *out, const uint8_t *bitmap, const uint8_t *vals, const uint32_t *rank, size_t bm,
                           size_t n, float weight, int acc, const int *verdict) {
    if (verdict && *verdict) return;
    GRID_STRIDE(b, bm) {
        uint32_t w = bitmap[b], r = rank[b];
        for (int t = 0; t < 8 && w; t++) {
            if (!(w & (0x80u >> t))) continue;
            size_t i = 8 * b + (size_t)t;
            float v = __uint_as_float(d_get_u32(vals + 4 * (size_t)r++));
            if (i < n) store_out(out, i, v, weight, acc);
        }
    }
}

/* compress/topk.c topk_decode's checks of the lengths, on the host: the count in *k */
static int topk_head(uint64_t *k, size_t n, const Pay *p, uint16_t flags) {
    if (flags) return -GC_ERR_CORRUPT;
    if (p->len < 4) return -GC_ERR_TRUNCATED;
    *k = get_u32(p->head);
    if (*k > n) return -GC_ERR_CORRUPT;
    uint64_t need = 4 + (uint64_t)((n + 7) / 8) + 4 * *k;
    if ((uint64_t)p->len < need) return -GC_ERR_TRUNCATED;
    if ((uint64_t)p->len > need) return -GC_ERR_OVERSIZED;
    return 0;
}

/* topk_dec's verdict from its checks (got: the bitmap's popcount, the flag of a set padding
 * bit or a bad value), on the host or the device */
__host__ __device__ static inline int topk_verdict(const uint32_t *got, uint64_t k) {
    return got[1] || got[0] != k ? -GC_ERR_CORRUPT : 0;
}
/* into *verdict */
__global__ void k_topk_verdict(int *verdict, const uint32_t *got, uint64_t k) { *verdict = topk_verdict(got, k); }

/* out[0 .. n - 1] = 0 where *verdict is 0 */
__global__ void k_zero_if(float *out, size_t n, const int *verdict) {
    if (*verdict) return;
    GRID_STRIDE(i, n) out[i] = 0.0f;
}

/* compress/topk.c topk_decode: lengths on the host, the bitmap and values on the device;
 * the device checks' verdict read with a wait, or with p->verdict left there (returns 1) */
static int topk_dec(float *out, size_t n, float weight, int acc, const Pay *p, uint16_t flags) {
    uint64_t k;
    int head = topk_head(&k, n, p, flags);
    if (head) return head;
    size_t bm = (n + 7) / 8;
    if (n == 0) return 0;
    int checked = p->checked == CODEC_TOPK, rc = checked ? (int)p->chk1 : 0; /* the probe's d_topk_check */
    if (rc) return rc;
    const uint8_t *bitmap = p->d + 4, *vals = p->d + 4 + bm;
    /* rank[0..bm]: the scan of the popcounts (rank[bm] = the bitmap's popcount, < 2^32: at
     * most n bits); rank[bm + 1]: the flag of a set padding bit or a bad value */
    uint32_t *pc = (uint32_t *)gcx_dmalloc((bm + 1) * 4), *rank = (uint32_t *)gcx_dmalloc((bm + 2) * 4);
    if (!checked) cudaCheck(cudaMemsetAsync(rank + bm + 1, 0, 4, 0));
    k_popcnt<<<gcx_grid(bm + 1), TPB>>>(pc, rank + bm + 1, bitmap, bm, (n & 7) ? 0xFFu >> (n & 7) : 0u);
    cudaCheckLast();
    gcx_exclusive_sum_u32(rank, pc, bm + 1);
    if (!checked) { /* the checks here, and a wait for them or the verdict left on the device */
        if (k) {
            k_bad_vals<<<gcx_grid(k), TPB>>>(rank + bm + 1, vals, k);
            cudaCheckLast();
        }
        if (p->verdict) {
            k_topk_verdict<<<1, 1>>>(p->verdict, rank + bm, k);
            cudaCheckLast();
            if (!acc) {
                k_zero_if<<<gcx_grid(n), TPB>>>(out, n, p->verdict);
                cudaCheckLast();
            }
            k_topk_dec<<<gcx_grid(bm), TPB>>>(out, bitmap, vals, rank, bm, n, weight, acc, p->verdict);
            cudaCheckLast();
            gcx_dfree(pc);
            gcx_dfree(rank);
            return 1;
        }
        uint32_t got[2]; /* popcount, flag */
        cudaCheck(cudaMemcpy(got, rank + bm, sizeof got, cudaMemcpyDeviceToHost));
        rc = topk_verdict(got, k);
    }
    if (!rc) {
        if (!acc) cudaCheck(cudaMemsetAsync(out, 0, n * sizeof(float), 0));
        k_topk_dec<<<gcx_grid(bm), TPB>>>(out, bitmap, vals, rank, bm, n, weight, acc, NULL);
        cudaCheckLast();
    }
    gcx_dfree(pc);
    gcx_dfree(rank);
    return rc;
}

/* out[idx[j]] = value j of vals (little-endian floats, any alignment), or += weight * it */
__global__ void k_scatter_le(float *out, const uint32_t *idx, const uint8_t *vals, size_t c, float weight, int acc) {
    GRID_STRIDE(j, c) {
        uint32_t i = idx[j];
        float v = __uint_as_float(d_get_u32(vals + 4 * j));
        store_out(out, i, v, weight, acc);
    }
}

/* ================================================================= dgc ==== */

/* entries of value j: floor(gap / 65535) skips + 1, gap = zeros before it. e: [c + 1] */
__global__ void k_dgc_entries(uint64_t *e, const uint32_t *idx, size_t c, const int64_t *got) {
    int ok = d_picked(got, c);
    GRID_STRIDE(j, c + 1) {
        if (j == c || !ok) {
            e[j] = 0;
        } else {
            uint64_t prev_end = j ? (uint64_t)idx[j - 1] + 1 : 0;
            e[j] = ((uint64_t)idx[j] - prev_end) / 65535 + 1;
        }
    }
}

/* values at 4 + 4j, run entries from byte 4 + 4c (u16, 2-byte aligned) */
__global__ void k_dgc_write(uint8_t *pay, const uint32_t *idx, const float *v, const uint64_t *off, size_t c,
                            const int64_t *got) {
    if (!d_picked(got, c)) return;
    GRID_STRIDE(j, c) {
        ((float *)(pay + 4))[j] = v[j];
        uint16_t *runs = (uint16_t *)(pay + 4 + 4 * c) + off[j];
        uint64_t prev_end = j ? (uint64_t)idx[j - 1] + 1 : 0;
        uint64_t g = (uint64_t)idx[j] - prev_end;
        uint64_t s = 0;
        for (; g >= 65535; g -= 65535) runs[s++] = (uint16_t)DGC_RUN_SKIP;
        runs[s] = (uint16_t)g;
    }
}

static int64_t dgc_write(SparseSel &s, CodecCuda *g, uint8_t *pay, size_t cap, size_t n, const CodecSide *side,
                         SparseStage *st) {
    size_t cnt = s.cnt;
    uint64_t *e = (uint64_t *)gcx_dmalloc((cnt + 1) * 8), *off = (uint64_t *)gcx_dmalloc((cnt + 1) * 8);
    /* how many run entries the values take, read back with the checks */
    k_dgc_entries<<<gcx_grid(cnt + 1), TPB>>>(e, s.idx, cnt, s.got);
    cudaCheckLast();
    gcx_exclusive_sum_u64(off, e, cnt + 1);
    cudaCheck(cudaMemcpyAsync(&s.bk->entries, off + cnt, 8, cudaMemcpyDeviceToDevice, 0));
    int64_t rc = sparse_read(&s, g, n, cap, st);
    if (rc >= 0) {
        put_u32_dev(pay, (uint32_t)cnt);
        if (cnt) {
            k_dgc_write<<<gcx_grid(cnt), TPB>>>(pay, s.idx, s.v, off, cnt, s.got);
            cudaCheckLast();
        }
        side_outputs(side, s.idx, s.v, 0.0f, cnt, n, s.got);
    }
    gcx_dfree(e);
    gcx_dfree(off);
    return sparse_end(&s, st, rc);
}
static int64_t dgc_enc(CodecCuda *g, uint8_t *pay, size_t cap, const float *x, size_t n, const CodecSide *side,
                       SparseStage *st) {
    SparseSel s;
    if (sparse_select(&s, g, x, n, side, st)) return -GC_ERR_PARAM;
    return dgc_write(s, g, pay, cap, n, side, st);
}

/* run entry e of runs (little-endian u16, any alignment): r[e], and t[e] = 1 when it ends
 * a gap (not a skip); r[E] = t[E] = 0 */
__global__ void k_dgc_entries_dec(uint64_t *r, uint32_t *t, const uint8_t *runs, size_t E) {
    GRID_STRIDE(e, E + 1) {
        uint32_t v = e < E ? (uint32_t)runs[2 * e] | ((uint32_t)runs[2 * e + 1] << 8) : 0u;
        r[e] = v;
        t[e] = e < E && v != DGC_RUN_SKIP;
    }
}

/* the walk's outcome: bad (a bad value), ends (gaps ended in all E entries), last (the
 * last entry the CPU walk reads) and at (its index after that entry) */
struct DgcWalk {
    uint32_t bad, ends;
    uint64_t last, at;
};

/* S, J: the exclusive scans of r and t (S[e] = r[0] + ... + r[e - 1]). The entry that
 * ends gap j (j = J[e]) puts value j at S[e] + r[e] + j; the k-th ends the walk */
__global__ void k_dgc_positions(uint32_t *pos, DgcWalk *w, const uint64_t *r, const uint32_t *t, const uint64_t *S,
                                const uint32_t *J, size_t E, uint64_t k) {
    GRID_STRIDE(e, E) {
        if (!t[e]) continue;
        uint64_t j = J[e], at = S[e] + r[e] + j;
        if (j < k) pos[j] = (uint32_t)at;
        if (j + 1 == k) {
            w->last = e;
            w->at = at;
        }
    }
}

/* fewer than k gaps in the E entries scanned: the walk reads them all; its index after
 * the last is S[E] + J[E - 1] (the gaps ended before it) */
__global__ void k_dgc_short(DgcWalk *w, const uint64_t *S, const uint32_t *J, size_t E, uint64_t k) {
    w->ends = J[E];
    if (J[E] < k) {
        w->last = E - 1;
        w->at = S[E] + J[E - 1];
    }
}

/* compress/dgc.c dgc_decode's checks of the count and length, on the host: the count in *k */
static int dgc_head(uint64_t *k, size_t n, const Pay *p, uint16_t flags) {
    if (flags) return -GC_ERR_CORRUPT;
    if (p->len < 4) return -GC_ERR_TRUNCATED;
    *k = get_u32(p->head);
    if (*k > n) return -GC_ERR_CORRUPT;
    if ((uint64_t)p->len < 4 + 6 * *k) return -GC_ERR_TRUNCATED;
    if (*k == 0 && p->len != 4) return -GC_ERR_OVERSIZED;
    return 0;
}

/* compress/dgc.c dgc_decode: the count on the host, values and run entries on the device */
static int dgc_dec(float *out, size_t n, float weight, int acc, const Pay *p, uint16_t flags) {
    uint64_t k;
    int head = dgc_head(&k, n, p, flags);
    if (head) return head;
    size_t E = (p->len - 4 - 4 * (size_t)k) / 2; /* >= k */
    int stray = (p->len - 4 - 4 * (size_t)k) & 1;
    int checked = p->checked == CODEC_DGC, rc = checked ? (int)p->chk1 : 0; /* the probe's d_dgc_check */
    if (rc) return rc;
    uint32_t *pos = NULL;
    if (k) {
        /* the CPU walk reads at most k gap ends and (n - 1) / 65535 + 1 skips (each takes the
         * index 65535 further, and one that reaches n fails it): only those entries are
         * scanned, so the scratch follows n and k, not a long frame's length; a walk that
         * ends before the last entry is OVERSIZED whether or not the rest was scanned */
        uint64_t most = k + (uint64_t)(n - 1) / 65535 + 1;
        size_t W = (uint64_t)E > most ? (size_t)most : E;
        uint64_t *r = (uint64_t *)gcx_dmalloc((W + 1) * 8), *S = (uint64_t *)gcx_dmalloc((W + 1) * 8);
        uint32_t *t = (uint32_t *)gcx_dmalloc((W + 1) * 4), *J = (uint32_t *)gcx_dmalloc((W + 1) * 4);
        DgcWalk *dw = (DgcWalk *)gcx_dmalloc(sizeof(DgcWalk)), w;
        pos = (uint32_t *)gcx_dmalloc(k * 4);
        if (!checked) {
            cudaCheck(cudaMemsetAsync(dw, 0, sizeof w, 0));
            k_bad_vals<<<gcx_grid(k), TPB>>>(&dw->bad, p->d + 4, k);
            cudaCheckLast();
        }
        k_dgc_entries_dec<<<gcx_grid(W + 1), TPB>>>(r, t, p->d + 4 + 4 * k, W);
        cudaCheckLast();
        gcx_exclusive_sum_u64(S, r, W + 1);
        gcx_exclusive_sum_u32(J, t, W + 1); /* at most W < 2^31 ends */
        k_dgc_positions<<<gcx_grid(W), TPB>>>(pos, dw, r, t, S, J, W, k);
        cudaCheckLast();
        if (!checked) { /* the walk's outcome here, and a wait for it */
            k_dgc_short<<<1, 1>>>(dw, S, J, W, k);
            cudaCheckLast();
            cudaCheck(cudaMemcpy(&w, dw, sizeof w, cudaMemcpyDeviceToHost));
            rc = dgc_verdict(w.bad, w.ends, w.last, w.at, n, k, E, stray);
        }
        gcx_dfree(r);
        gcx_dfree(S);
        gcx_dfree(t);
        gcx_dfree(J);
        gcx_dfree(dw);
    }
    if (!rc && n) {
        if (!acc) cudaCheck(cudaMemsetAsync(out, 0, n * sizeof(float), 0));
        if (k) {
            k_scatter_le<<<gcx_grid(k), TPB>>>(out, pos, p->d + 4, k, weight, acc);
            cudaCheckLast();
        }
    }
    if (pos) gcx_dfree(pos);
    return rc;
}

/* ================================================================= sbc ==== */

/* Algorithm 2's two sums: the CPU's (compress/sbc.c sum_at), double, in index order. The
 * values of one side share their sign, so every partial sum lies between 0 and the total;
 * all are multiples of the smallest value's unit in the last place, u. When the total is
 * below 2^53 u, every partial sum is a double, no addition rounds, and the CPU's sum is the
 * exact sum: that is found in parallel, order-free, from each exponent's sum of mantissas
 * (k_sbc_bins, integer atomics). Otherwise (a wide spread of exponents with many values)
 * one device thread adds them in index order, as the CPU (k_sbc_sums) */
struct SbcSums {
    double sp, sn;
};
/* what sbc_enc reads back, in one copy: its selections' checks (the first's bad: a value's),
 * the sums, and the Rice codes' total length on each side */
struct SbcBack {
    SelBack sel[2];
    SbcSums sums;
    uint64_t total[2];
};
/* each side's mantissas (with the hidden bit) summed by exponent (exact: below 2^24 each,
 * so 2^40 values fit); exponent 255's bin is not 0 exactly when a value is NaN or infinite */
struct SbcBins {
    unsigned long long m[2][256];
};

/* value f's mantissa, its hidden bit included, added to its exponent's bin of one side's
 * bins[256] */
__device__ __forceinline__ void d_sbc_bin(unsigned long long *bins, float f) {
    uint32_t u = __float_as_uint(f), e = (u >> 23) & 0xFFu;
    atomicAdd(&bins[e], (unsigned long long)((u & 0x7FFFFFu) | (e ? 0x800000u : 0u)));
}

/* v: [cp + cn] the positive side's values, then the negative side's. bins zeroed */
__global__ void k_sbc_bins(SbcBins *bins, const float *v, size_t cp, size_t cn) {
    __shared__ unsigned long long h[2][256];
    for (int i = threadIdx.x; i < 512; i += blockDim.x) h[i >> 8][i & 255] = 0;
    __syncthreads();
    GRID_STRIDE(j, cp + cn) d_sbc_bin(h[j >= cp], v[j]);
    __syncthreads();
    for (int i = threadIdx.x; i < 512; i += blockDim.x)
        if (h[i >> 8][i & 255]) atomicAdd(&bins->m[i >> 8][i & 255], h[i >> 8][i & 255]);
}

/* the exact sum of one side's magnitudes from its bins into *s, when it is below 2^53 units
 * of its smallest value's last place (so that the CPU's index-order double sum is exact and
 * equal to it); 0 otherwise. Exponent 0 (denormals) has exponent 1's unit */
__device__ int d_sbc_exact(double *s, const unsigned long long *m) {
    int lo = 0;
    while (lo < 255 && !m[lo]) lo++;
    if (lo == 255) {
        *s = 0.0;
        return 1;
    }
    const int ulo = lo ? lo : 1;
    const unsigned long long top = 1ull << 53;
    unsigned long long units = 0;
    for (int e = lo; e < 255; e++) {
        if (!m[e]) continue;
        int sh = (e ? e : 1) - ulo;
        if (sh >= 53 || m[e] >= top >> sh) return 0;
        units += m[e] << sh;
        if (units >= top) return 0;
    }
    *s = ldexp((double)units, ulo - 150);
    return 1;
}

/* Algorithm 2's sums of the two sides into sum[2] (the negative side's negative): exact from
 * their bins ([2][256]) where d_sbc_exact applies, else val(q, j), side q's j-th value,
 * added in index order with the CPU's roundings. One thread */
template <class V>
__device__ void d_sbc_sums(double *sum, const unsigned long long *bins, uint64_t cp, uint64_t cn, V val) {
    for (int q = 0; q < 2; q++) {
        if (d_sbc_exact(&sum[q], bins + 256 * q)) {
            if (q) sum[q] = -sum[q];
            continue;
        }
        double a = 0;
        for (uint64_t j = 0; j < (q ? cn : cp); j++) a = __dadd_rn(a, (double)val(q, j));
        sum[q] = a;
    }
}

/* the sums of v ([cp + cn], as k_sbc_bins'); *bad_out: a value is NaN or infinite */
__global__ void k_sbc_sums(SbcSums *s, uint32_t *bad_out, const SbcBins *bins, const float *v, size_t cp,
                           size_t cn) {
    double sum[2];
    d_sbc_sums(sum, bins->m[0], cp, cn, [&](int q, uint64_t j) { return v[q ? cp + j : j]; });
    s->sp = sum[0];
    s->sn = sum[1];
    *bad_out = bins->m[0][255] || bins->m[1][255];
}

/* the gap before position j (positions increasing; the first counts from -1) */
__device__ __forceinline__ uint64_t d_gap(const uint32_t *idx, size_t j) {
    return (uint64_t)idx[j] - (j ? (uint64_t)idx[j - 1] : (uint64_t)-1) - 1;
}

/* bits[j] = the length of position j's Rice code (golomb.h rice_len); bits[m] = 0 */
__global__ void k_rice_len(uint64_t *bits, const uint32_t *idx, size_t m, int b) {
    GRID_STRIDE(j, m + 1) bits[j] = j < m ? (d_gap(idx, j) >> b) + 1 + (uint64_t)b : 0;
}

/* sets bit P (MSB first in each byte) of the zeroed payload, through its aligned 32-bit word */
__device__ __forceinline__ void d_set_bit(uint32_t *pay32, uint64_t P) {
    uint64_t byte = P >> 3;
    atomicOr(&pay32[byte >> 2], (0x80u >> (P & 7)) << (8 * (byte & 3)));
}

/* position j's Rice code (golomb.h rice_put: q ones, a zero, the b low bits of the gap)
 * at bit off[j] after the 9-byte header */
__global__ void k_rice_put(uint32_t *pay32, const uint32_t *idx, const uint64_t *off, size_t m, int b) {
    GRID_STRIDE(j, m) {
        uint64_t gap = d_gap(idx, j), q = gap >> b, P = 8 * SBC_HEADER + off[j];
        for (uint64_t t = 0; t < q; t++) d_set_bit(pay32, P + t);
        P += q + 1;
        for (int t = 0; t < b; t++)
            if ((gap >> (b - 1 - t)) & 1) d_set_bit(pay32, P + (uint64_t)t);
    }
}

/* sbc_enc's state between its steps: the two selections (POS, NEG: their indices, counts
 * and checks), the values' sums and each side's codes' offsets, read back in bk */
struct SbcWork {
    size_t k, cp, cn;
    int radix[2], b;
    uint32_t *dpos, *dneg;
    SbcBack *bk;
    SelPlan plan[2]; /* staged: the selections begun (k > 0) */
    uint64_t *off[2];
};

/* the density and k, the selections' room, bk zeroed */
static int sbc_open(SbcWork *w, CodecCuda *g, size_t n, const CodecSide *side) {
    double p;
    if (select_density(&p, g->spec.v[0], side->density)) return -GC_ERR_PARAM;
    memset(w, 0, sizeof *w);
    w->k = select_count(p, n);
    w->b = golomb_rice_bits(p);
    w->dpos = (uint32_t *)gcx_dmalloc((w->k ? w->k : 1) * 4);
    w->dneg = (uint32_t *)gcx_dmalloc((w->k ? w->k : 1) * 4);
    w->bk = (SbcBack *)gcx_dmalloc(sizeof(SbcBack));
    cudaCheck(cudaMemsetAsync(w->bk, 0, sizeof(SbcBack), 0));
    return 0;
}

/* once both selections have picked (cp, cn): the values' sums and, Algorithm 3, each
 * side's gaps' Golomb-Rice codes with the optimal parameter (equation 5): each code's length
 * and their exclusive scan (each code's bit offset, the total at m), so that the side
 * Algorithm 2 picks has its total in the same read as the sums (bk) */
static void sbc_sums(SbcWork *w, const float *x, size_t n) {
    size_t cp = w->cp, cn = w->cn;
    float *dv = (float *)gcx_dmalloc((cp + cn ? cp + cn : 1) * 4);
    if (cp) {
        k_gather_vals<<<gcx_grid(cp), TPB>>>(dv, w->dpos, x, cp, n);
        cudaCheckLast();
    }
    if (cn) {
        k_gather_vals<<<gcx_grid(cn), TPB>>>(dv + cp, w->dneg, x, cn, n);
        cudaCheckLast();
    }
    SbcBins *bins = (SbcBins *)gcx_dmalloc(sizeof(SbcBins));
    cudaCheck(cudaMemsetAsync(bins, 0, sizeof(SbcBins), 0));
    if (cp + cn) {
        k_sbc_bins<<<gcx_grid(cp + cn), TPB>>>(bins, dv, cp, cn);
        cudaCheckLast();
    }
    k_sbc_sums<<<1, 1>>>(&w->bk->sums, &w->bk->sel[0].bad, bins, dv, cp, cn);
    cudaCheckLast();
    const uint32_t *sidx[2] = {w->dpos, w->dneg};
    size_t sm[2] = {cp, cn};
    for (int q = 0; q < 2; q++) {
        w->off[q] = (uint64_t *)gcx_dmalloc((sm[q] + 1) * 8);
        if (sm[q] == 0) continue;
        uint64_t *bits = (uint64_t *)gcx_dmalloc((sm[q] + 1) * 8);
        k_rice_len<<<gcx_grid(sm[q] + 1), TPB>>>(bits, sidx[q], sm[q], w->b);
        cudaCheckLast();
        gcx_exclusive_sum_u64(w->off[q], bits, sm[q] + 1);
        cudaCheck(cudaMemcpyAsync(&w->bk->total[q], w->off[q] + sm[q], 8, cudaMemcpyDeviceToDevice, 0));
        gcx_dfree(bits);
    }
    gcx_dfree(bins);
    gcx_dfree(dv);
}

/* once bk is read (hb): the checks, Algorithm 2 (the two means, the larger side), the
 * payload and the side outputs; w's scratch returned. The frame's length or GcError */
static int64_t sbc_write(SbcWork *w, uint8_t *pay, size_t cap, size_t n, const CodecSide *side, const SbcBack *hb) {
    size_t cp = w->cp, cn = w->cn;
    sel_check(&hb->sel[0], w->radix[0], cp);
    sel_check(&hb->sel[1], w->radix[1], cn);
    const SbcSums sums = hb->sums;
    int64_t rc = hb->sel[0].bad ? -GC_ERR_PARAM : 0;
    double mu_pos = cp ? sums.sp / (double)cp : 0.0;
    double mu_neg = cn ? -sums.sn / (double)cn : 0.0;
    const uint32_t *didx = NULL;
    size_t m = 0;
    float mean = 0.0f;
    int side_q = 0;
    if (cp || cn) {
        if (cp && mu_pos >= mu_neg) {
            didx = w->dpos, m = cp;
            mean = (float)mu_pos;
        } else {
            didx = w->dneg, m = cn, side_q = 1;
            mean = -(float)mu_neg;
        }
    }
    if (!rc && m && (!isfinite(mean) || mean == 0.0f)) rc = -GC_ERR_PARAM;
    uint64_t total = m ? hb->total[side_q] : 0;
    size_t len = SBC_HEADER + (size_t)((total + 7) / 8);
    if (!rc && cap < len) rc = -GC_ERR_NOSPACE;
    if (!rc) {
        uint8_t h[SBC_HEADER];
        put_u32(h, (uint32_t)m);
        put_f32(h + 4, mean);
        h[8] = (uint8_t)w->b;
        cudaCheck(cudaMemsetAsync(pay, 0, len, 0));
        if (m) {
            k_rice_put<<<gcx_grid(m), TPB>>>((uint32_t *)pay, didx, w->off[side_q], m, w->b);
            cudaCheckLast();
        }
        cuda_put_bytes(pay, h, SBC_HEADER);
        side_outputs(side, didx, NULL, mean, m, n, NULL);
        rc = (int64_t)len;
    }
    gcx_dfree(w->bk);
    gcx_dfree(w->off[0]);
    gcx_dfree(w->off[1]);
    gcx_dfree(w->dpos);
    gcx_dfree(w->dneg);
    return rc;
}

/* compress/sbc.c sbc_encode on the device, in place: the two selections (a wait each for
 * their candidates' counts), the sums, the Rice codes; the host reads the sums and both
 * sides' codes' lengths in one copy (a wait) before the payload. pay: 4-byte aligned (a
 * device allocation, or codec_encode_cuda_payload's staging) */
static int64_t sbc_enc(CodecCuda *g, uint8_t *pay, size_t cap, const float *x, size_t n, const CodecSide *side) {
    SbcWork w;
    if (sbc_open(&w, g, n, side)) return -GC_ERR_PARAM;
    w.cp = gpu_select(w.dpos, x, n, w.k, SELECT_POS, &w.bk->sel[0], &w.radix[0]);
    w.cn = gpu_select(w.dneg, x, n, w.k, SELECT_NEG, &w.bk->sel[1], &w.radix[1]);
    sbc_sums(&w, x, n);
    SbcBack hb;
    cudaCheck(cudaMemcpy(&hb, w.bk, sizeof hb, cudaMemcpyDeviceToHost)); /* the sums, lengths and checks */
    return sbc_write(&w, pay, cap, n, side, &hb);
}

/* ---- sbc's Rice codes in parallel (SBC Algorithm 4 without its sequential walk) ----
 * A Rice code is a run of ones, its terminating zero and b more bits, so the code that
 * starts at bit p ends at succ(p) = z(p) + 1 + b, z(p) the first zero at or after p: where
 * the codes start is a property of the bits alone, not of their values. So:
 *   1. z(p) for every p: each 32-bit word's first zero, and for runs of ones past a word
 *      the next word that has one (a max-scan of the words' indices, reversed);
 *   2. succ on every bit position p <= D (D + 1, past the last, is a sink succ keeps), and
 *      the codes' starts s_0 = 0, s_{j+1} = succ(s_j) by doubling: round k knows s_0 ..
 *      s_{2^k - 1} and succ^(2^k), gives s_{j + 2^k} = succ^(2^k)(s_j) and composes
 *      succ^(2^(k+1)); ceil(log2(m + 1)) rounds, no wait between them;
 *   3. each code's value from its start alone, clamped to n (only a code that fails is
 *      clamped), their exclusive sum each code's smallest index next_j (as the walk's);
 *   4. each code checked as rice_get and sbc.c sbc_walk check it at next_j, and the
 *      padding after s_m: the walk's return code is the first failure's, an atomic
 *      minimum of (j, code) over the codes.
 * The walk reads no bit past B = m (1 + b) + 2 (n >> b) + b + 2 (the codes that pass end by
 * m (1 + b) + (n >> b), their quotients summing to at most n >> b; the first that fails
 * reads its unary part up to (n >> b) + 1 bits and its b low bits), so the domain stops at
 * D = min(L, B + 14): past it, a padding of 16 bits is left, and the frame is oversized.
 * Scratch: 8 bytes a bit of the domain (two tables of 32-bit positions) and 24 a code. A
 * domain above RICE_PARSE_MAX bits (a payload above 32 MiB; an encoder writes at most about
 * one bit a value, so only a frame of more than 2^28 values, or a bad one, gets there) is
 * walked by one device thread instead (d_sbc_walk): a bad frame's scratch stays bounded. So
 * are up to RICE_WALK_CODES codes (as a bundle's probe walks them): one launch, where the
 * parse takes a dozen and more */
#define RICE_PARSE_MAX (1ull << 28)
#define RICE_WALK_CODES 1024

struct RiceBits {
    const uint8_t *p; /* the codes' bytes (after the header) */
    uint64_t nbytes, L, D; /* L = 8 nbytes bits; bits at D and past read as zeros */
    const uint32_t *nzw;   /* the reversed max-scan: UINT32_MAX - the next word with a zero */
    uint64_t words;        /* D / 32 + 1 */
    int b;
};

/* bits 32w .. 32w + 31 of the domain, MSB first */
__device__ __forceinline__ uint32_t d_rice_word(const RiceBits &r, uint64_t w) {
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) {
        uint64_t q = 4 * w + (uint64_t)i;
        v |= (uint32_t)(q < r.nbytes ? r.p[q] : 0) << (24 - 8 * i);
    }
    uint64_t lo = 32 * w;
    if (r.D <= lo) return 0;
    return r.D - lo >= 32 ? v : v & ~(0xFFFFFFFFu >> (r.D - lo));
}

/* the first zero bit at or after p (p <= D; at most D, which reads as zero) */
__device__ __forceinline__ uint64_t d_rice_zero(const RiceBits &r, uint64_t p) {
    uint64_t w = p >> 5;
    uint32_t inv = ~d_rice_word(r, w) & (0xFFFFFFFFu >> (p & 31));
    if (!inv) { /* the word is ones from p on, so it ends before D: word w + 1 exists */
        w = (uint64_t)(UINT32_MAX - r.nzw[r.words - 2 - w]);
        inv = ~d_rice_word(r, w);
    }
    return 32 * w + (uint64_t)__clz((int)inv);
}

/* the b bits at q (MSB first) */
__device__ __forceinline__ uint64_t d_rice_low(const RiceBits &r, uint64_t q) {
    uint64_t x = 0;
    for (int i = 0; i < r.b; i++) {
        uint64_t P = q + (uint64_t)i;
        x = x << 1 | (uint64_t)(P < r.D ? (r.p[P >> 3] >> (7 - (P & 7))) & 1 : 0);
    }
    return x;
}

/* e[words - 1 - w] = UINT32_MAX - w where word w has a zero, else 0 (the last word, holding
 * bit D, always has one) */
__global__ void k_rice_words(uint32_t *e, RiceBits r) {
    GRID_STRIDE(w, r.words) e[r.words - 1 - w] = d_rice_word(r, w) != 0xFFFFFFFFu ? UINT32_MAX - (uint32_t)w : 0;
}

/* A[p] = succ(p) for p <= D + 1 */
__global__ void k_rice_succ(uint32_t *A, RiceBits r) {
    GRID_STRIDE(p, r.D + 2) {
        uint64_t s = p > r.D ? r.D + 1 : d_rice_zero(r, p) + 1 + (uint64_t)r.b;
        A[p] = (uint32_t)(s < r.D + 1 ? s : r.D + 1);
    }
}

/* round k of the doubling (half = 2^k): s[j + half] = A[s[j]] for j < half, j + half < cnt;
 * with compose, B = A o A over the D + 2 positions */
__global__ void k_rice_jump(uint32_t *B, const uint32_t *A, uint32_t *s, uint64_t dom, uint64_t half, uint64_t cnt,
                            int compose) {
    GRID_STRIDE(i, compose && dom > half ? dom : half) {
        if (compose && i < dom) B[i] = A[A[i]];
        if (i < half && i + half < cnt) s[i + half] = A[s[i]];
    }
}

/* code j's value (clamped to n; a clamped one fails) from its start st; z: its terminating zero */
__device__ __forceinline__ uint64_t d_rice_val(const RiceBits &r, uint64_t st, uint64_t n, uint64_t *z) {
    if (st > r.D) return *z = r.D, n; /* past a code that ran off the domain */
    *z = d_rice_zero(r, st);
    uint64_t R = *z - st;
    if (R > (n >> r.b)) return n;
    uint64_t v = R << r.b | d_rice_low(r, *z + 1);
    return v < n ? v : n;
}

/* c[j] = code j's value + 1 (clamped), c[m] = 0: their exclusive sum is each code's next */
__global__ void k_rice_vals(uint64_t *c, const uint32_t *s, RiceBits r, uint64_t m, uint64_t n) {
    uint64_t z;
    GRID_STRIDE(j, m + 1) c[j] = j < m ? d_rice_val(r, (uint64_t)s[j], n, &z) + 1 : 0;
}

/* each code's checks (golomb.h rice_get, sbc.c sbc_walk) at next[j], its position into
 * pos, and the padding after s[m] (d_sbc_tail); the first failure's j * 8 + its GcError
 * into *first (UINT64_MAX before: none) */
static_assert(GC_ERR_TRUNCATED < 8 && GC_ERR_CORRUPT < 8 && GC_ERR_OVERSIZED < 8, "a Rice verdict's error in 3 bits");
__global__ void k_rice_check(unsigned long long *first, uint32_t *pos, const uint32_t *s, const uint64_t *next, RiceBits r,
                             uint64_t m, uint64_t n) {
    GRID_STRIDE(j, m + 1) {
        uint64_t st = (uint64_t)s[j], e = 0;
        if (j == m) {
            e = (uint64_t)-d_sbc_tail(r.p, r.nbytes, st);
        } else if (next[j] >= n) {
            e = GC_ERR_CORRUPT;
        } else {
            uint64_t vmax = n - 1 - next[j], z, v = d_rice_val(r, st, n, &z);
            if (st > r.D) e = GC_ERR_TRUNCATED; /* after a failure: any code */
            else if (z - st > (vmax >> r.b)) e = GC_ERR_CORRUPT;
            else if (z >= r.L || z + 1 + (uint64_t)r.b > r.L) e = GC_ERR_TRUNCATED;
            else if (v > vmax) e = GC_ERR_CORRUPT;
            else pos[j] = (uint32_t)(next[j] + v);
        }
        if (e) atomicMin(first, (unsigned long long)(j << 3 | e));
    }
}

/* the walk's return code and the m positions (pos), from the codes in bits[nbytes]; first:
 * device, where the verdict is left (rice_verdict reads it) */
static void rice_positions(uint32_t *pos, unsigned long long *first, const uint8_t *bits, size_t nbytes, uint64_t n,
                           int b, uint64_t m, uint64_t D) {
    RiceBits r = {bits, nbytes, 8 * (uint64_t)nbytes, D, NULL, D / 32 + 1, b};
    uint32_t *e = (uint32_t *)gcx_dmalloc(r.words * 4), *nzw = (uint32_t *)gcx_dmalloc(r.words * 4);
    k_rice_words<<<gcx_grid(r.words), TPB>>>(e, r);
    cudaCheckLast();
    gcx_inclusive_max_u32(nzw, e, r.words);
    r.nzw = nzw;
    uint32_t *const A0 = (uint32_t *)gcx_dmalloc((D + 2) * 4), *const B0 = (uint32_t *)gcx_dmalloc((D + 2) * 4);
    uint32_t *A = A0, *B = B0, *s = (uint32_t *)gcx_dmalloc((m + 1) * 4);
    k_rice_succ<<<gcx_grid(D + 2), TPB>>>(A, r);
    cudaCheckLast();
    cudaCheck(cudaMemsetAsync(s, 0, 4, 0));
    for (uint64_t half = 1; half < m + 1; half *= 2) {
        int compose = 2 * half < m + 1;
        k_rice_jump<<<gcx_grid(compose && D + 2 > half ? D + 2 : half), TPB>>>(B, A, s, D + 2, half, m + 1, compose);
        cudaCheckLast();
        uint32_t *t = A;
        A = B, B = t;
    }
    uint64_t *c = (uint64_t *)gcx_dmalloc((m + 1) * 8), *next = (uint64_t *)gcx_dmalloc((m + 1) * 8);
    k_rice_vals<<<gcx_grid(m + 1), TPB>>>(c, s, r, m, n);
    cudaCheckLast();
    gcx_exclusive_sum_u64(next, c, m + 1);
    cudaCheck(cudaMemsetAsync(first, 0xFF, sizeof *first, 0));
    k_rice_check<<<gcx_grid(m + 1), TPB>>>(first, pos, s, next, r, m, n);
    cudaCheckLast();
    gcx_dfree(next);
    gcx_dfree(c);
    gcx_dfree(s);
    gcx_dfree(B0);
    gcx_dfree(A0);
    gcx_dfree(nzw);
    gcx_dfree(e);
}

/* the walk in one device thread (a domain above RICE_PARSE_MAX, or few codes), its verdict left as
 * k_rice_check leaves it */
__global__ void k_sbc_walk(uint32_t *pos, unsigned long long *first, size_t n, int b, uint64_t m, const uint8_t *bits,
                           size_t nbytes) {
    int rc = d_sbc_walk(pos, n, b, m, bits, nbytes);
    *first = rc ? (unsigned long long)-rc : ~0ull;
}

/* the return code of the first failure rice_positions (or k_sbc_walk) left */
__host__ __device__ static inline int rice_verdict(unsigned long long first) {
    return first == ~0ull ? 0 : -(int)(first & 7);
}

/* compress/sbc.c sbc_decode's checks of the header, on the host: the codes' count, the
 * mean and the Rice parameter */
static int sbc_head(uint64_t *m, float *mean, int *b, size_t n, const Pay *p, uint16_t flags) {
    if (flags) return -GC_ERR_CORRUPT;
    if (p->len < SBC_HEADER) return -GC_ERR_TRUNCATED;
    *m = get_u32(p->head);
    uint32_t mu_bits = get_u32(p->head + 4);
    *mean = get_f32(p->head + 4);
    *b = p->head[8];
    if (*m > n || *b > 31) return -GC_ERR_CORRUPT;
    if (*m == 0 && mu_bits != 0) return -GC_ERR_CORRUPT;
    if (*m > 0 && (!isfinite(*mean) || *mean == 0.0f)) return -GC_ERR_CORRUPT;
    uint64_t have = 8 * (uint64_t)(p->len - SBC_HEADER);
    if (*m * (uint64_t)(*b + 1) > have) return -GC_ERR_TRUNCATED;
    return 0;
}

/* sbc_dec's verdict from the walk's first failure into *verdict */
__global__ void k_sbc_verdict(int *verdict, const unsigned long long *first) { *verdict = rice_verdict(*first); }

/* out[pos[j]] = mean (or += weight * mean) where *verdict is 0 */
__global__ void k_scatter_mean_if(float *out, const uint32_t *pos, float mean, size_t m, float weight, int acc,
                                  const int *verdict) {
    if (*verdict) return;
    GRID_STRIDE(j, m) store_out(out, pos[j], mean, weight, acc);
}

/* compress/sbc.c sbc_decode: the header on the host, the Rice codes on the device; the
 * walk's verdict read with a wait, or with p->verdict left there (returns 1) */
static int sbc_dec(float *out, size_t n, float weight, int acc, const Pay *p, uint16_t flags) {
    uint64_t m;
    float mean;
    int b, head = sbc_head(&m, &mean, &b, n, p, flags);
    if (head) return head;
    int checked = p->checked == CODEC_SBC, rc = checked ? (int)p->chk1 : 0; /* the probe's walk */
    if (rc) return rc;
    /* the domain of rice_positions: the bits the walk can read, and 16 more */
    uint64_t L = 8 * (uint64_t)(p->len - SBC_HEADER), B = m * (uint64_t)(b + 1) + 2 * ((uint64_t)n >> b) + (uint64_t)b + 2;
    uint64_t D = L < B + 14 ? L : B + 14;
    uint32_t *pos = (uint32_t *)gcx_dmalloc(m * 4);
    unsigned long long *first = (unsigned long long *)gcx_dmalloc(sizeof *first), hf;
    if (D <= RICE_PARSE_MAX && m > RICE_WALK_CODES) {
        rice_positions(pos, first, p->d + SBC_HEADER, p->len - SBC_HEADER, n, b, m, D);
    } else {
        k_sbc_walk<<<1, 1>>>(pos, first, n, b, m, p->d + SBC_HEADER, p->len - SBC_HEADER);
        cudaCheckLast();
    }
    if (!checked && p->verdict) { /* the verdict left on the device: out written only where it is 0 */
        k_sbc_verdict<<<1, 1>>>(p->verdict, first);
        cudaCheckLast();
        if (!acc && n) {
            k_zero_if<<<gcx_grid(n), TPB>>>(out, n, p->verdict);
            cudaCheckLast();
        }
        if (m) {
            k_scatter_mean_if<<<gcx_grid(m), TPB>>>(out, pos, mean, m, weight, acc, p->verdict);
            cudaCheckLast();
        }
        gcx_dfree(first);
        gcx_dfree(pos);
        return 1;
    }
    if (!checked) { /* a wait for it */
        cudaCheck(cudaMemcpy(&hf, first, sizeof hf, cudaMemcpyDeviceToHost));
        rc = rice_verdict(hf);
    }
    if (!rc && n) {
        if (!acc) cudaCheck(cudaMemsetAsync(out, 0, n * sizeof(float), 0));
        if (m) {
            /* the CPU adds weight * mean, rounded once, to every position */
            k_scatter<<<gcx_grid(m), TPB>>>(out, pos, NULL, mean, m, weight, acc, NULL);
            cudaCheckLast();
        }
    }
    gcx_dfree(first);
    gcx_dfree(pos);
    return rc;
}

/* ===================================================== one block a frame ==== */

/* topk, dgc and sbc of a tensor of at most ONE_N values (ResNet-110's largest, 36,864) by one
 * kernel of one block instead of ten to twenty launches, CUB calls and a wait for the
 * candidates' count: a launch costs the host a driver call, and a step of ResNet-110 with
 * dgc codes 111 such frames a pass. The selection is select.h's by its definition (the k
 * largest keys, ties by lowest index; no sample needed): thread t owns values [t per,
 * (t + 1) per), per a multiple of 8 (whole bitmap bytes), and the block
 *   1. counts the nonzero keys: at most k of them are all picked;
 *   2. else finds the k-th largest key T by the radix select of compress/select.c, digits
 *      of 12, 12 and 8 bits (a shared histogram of each digit over the keys that share the
 *      digits found so far, and the bucket where the running count from the top reaches
 *      the rank still sought), and picks every key > T and the first q (the rank left)
 *      keys == T, each thread's ties counted before it by a scan;
 *   3. scans the picks' counts (each value's place in the payload), and writes the payload,
 *      side->mask and side->repr, or nothing when the frame fails (a NaN or infinite value
 *      picked, a mean that is not finite, more than cap bytes);
 * dgc's run entries (one a value: n < 65,536) from the exclusive max-scan of each thread's
 * last pick (the gap before its first); sbc's two selections, its sums (the CPU's
 * index-order roundings: exact from the block's bins, or in one thread; k_sbc_bins), its
 * mean and side (Algorithm 2) and its Rice
 * codes (Algorithm 3: each thread's codes' lengths scanned, their bits ORed a word at a
 * time into the zeroed payload). The frame's length, or its GcError, comes back in
 * OneBack: one wait in place, none staged (read with the pass's lengths). */
#define ONE_T (4 * TPB)
#define ONE_ITEMS (TPB / 4) /* 64 values a thread (a bit each in a uint64_t); 16 in the
                             * emulation's blocks of 64 threads, whose tests (at most 8,193
                             * values) then reach both paths */
#define ONE_N ((size_t)ONE_T * ONE_ITEMS - 1) /* below 65,536: a dgc gap is below 65535, so
                                               * each value takes one run entry, no skips */
static_assert(ONE_N < 65536, "dgc's one-block frames have no skip entries");

/* what the one-block encoder leaves for the host: the payload's length or a negative
 * GcError, and whether a radix select found no bucket (an internal error) */
struct OneBack {
    int64_t len;
    uint32_t lost, pad;
};
static_assert(sizeof(OneBack) <= SPARSE_BACK, "a one-block frame's read-back fits SPARSE_BACK");

/* a digit's bucket, chosen by one thread of the block */
struct OneLevel {
    uint32_t bucket, hit;
    uint64_t above; /* keys in the buckets above it */
};

struct OneShared {
    uint32_t hist[4096];
    uint64_t sh[ONE_T];
    OneLevel lev[2][3]; /* per selection (sbc has two), per digit */
    int64_t rc;         /* sbc: the verdict of its sums and mean */
    uint32_t side, mean;
    uint64_t m;
};

/* the picks of select.h (mode's keys, the k largest, ties by lowest index) among x[n]:
 * bit q of the result is whether value lo + q (of this thread's [lo, hi)) is picked.
 * lev: this selection's slots (hit zeroed); *lost set when a digit found no bucket */
__device__ uint64_t d_one_pick(OneShared &s, OneLevel *lev, const float *x, size_t lo, size_t hi, uint64_t k,
                               int mode, uint32_t *lost) {
    const unsigned t = threadIdx.x;
    uint64_t nz = 0, all;
    for (size_t i = lo; i < hi; i++) nz += d_key(x[i], mode) != 0;
    d_scan_sum(nz, s.sh, &all);
    uint32_t T = 0; /* all <= k: every nonzero key */
    uint64_t q = 0; /* ties at T picked */
    if (k == 0) {
        T = 0xFFFFFFFFu; /* above every key */
    } else if (all > k) {
        uint32_t prefix = 0;
        uint64_t kk = k, greater = 0;
        for (int level = 0; level < 3; level++) {
            const int sh = level == 0 ? 20 : level == 1 ? 8 : 0, hsh = level == 0 ? 32 : level == 1 ? 20 : 8;
            const uint32_t nb = level < 2 ? 4096u : 256u, w = (nb + ONE_T - 1) / ONE_T;
            for (uint32_t b = t; b < nb; b += ONE_T) s.hist[b] = 0;
            __syncthreads();
            for (size_t i = lo; i < hi; i++) {
                uint32_t key = d_key(x[i], mode);
                if (hsh < 32 && (key >> hsh) != (prefix >> hsh)) continue;
                atomicAdd(&s.hist[(key >> sh) & (nb - 1)], 1u);
            }
            __syncthreads();
            /* thread t sums the t-th run of w buckets from the top */
            int has = (uint32_t)t * w < nb;
            uint32_t top = has ? nb - 1 - t * w : 0;
            uint64_t mine = 0, tot;
            for (uint32_t j = 0; has && j < w; j++) mine += s.hist[top - j];
            uint64_t cum = d_scan_sum(mine, s.sh, &tot);
            if (has && cum < kk && cum + mine >= kk) { /* the crossing is in this run */
                uint32_t b = top;
                for (uint32_t j = 0; j < w; j++, b--) {
                    if (b == 0 || cum + s.hist[b] >= kk) break;
                    cum += s.hist[b];
                }
                lev[level].bucket = b;
                lev[level].above = cum;
                lev[level].hit = 1;
            }
            __syncthreads();
            if (!lev[level].hit) {
                *lost = 1;
                break;
            }
            prefix |= lev[level].bucket << sh;
            greater += lev[level].above;
            kk -= lev[level].above;
        }
        T = prefix;
        q = kk;
    }
    uint64_t ties = 0, tot;
    for (size_t i = lo; i < hi && q; i++) ties += d_key(x[i], mode) == T;
    uint64_t before = d_scan_sum(ties, s.sh, &tot);
    uint64_t pk = 0;
    for (size_t i = lo; i < hi; i++) {
        uint32_t key = d_key(x[i], mode);
        int take = key > T;
        if (key == T && q) take = before++ < q;
        pk |= (uint64_t)take << (i - lo);
    }
    return pk;
}

/* the stream's nb (1..32) bits of v, most significant first, ORed in at bit P of the
 * zeroed payload (MSB first in each byte), a 32-bit word at a time; only words that get
 * a set bit are touched */
__device__ __forceinline__ void d_or_bits(uint32_t *pay32, uint64_t P, uint32_t v, int nb) {
    while (nb > 0) {
        int room = 32 - (int)(P & 31), take = nb < room ? nb : room;
        uint32_t bits = v >> (nb - take);
        if (take < 32) bits &= (1u << take) - 1u;
        if (bits) atomicOr(&pay32[P >> 5], __byte_perm(bits << (room - take), 0, 0x0123));
        P += (uint64_t)take;
        nb -= take;
    }
}

/* the one-block encoder (above) of frame j */
__device__ void d_sparse_one(const SparseOne &j) {
    __shared__ OneShared s;
    OneBack *bk = (OneBack *)j.bk;
    uint8_t *pay = j.pay, *mask = j.mask;
    float *repr = j.repr;
    uint32_t *idx = j.idx;
    const float *x = j.x;
    const size_t n = (size_t)j.n;
    const uint64_t k = j.k, cap = j.cap;
    const int id = j.id, rb = j.rb;
    const unsigned t = threadIdx.x;
    const size_t per = ((n + ONE_T - 1) / ONE_T + 7) / 8 * 8;
    const size_t lo = (size_t)t * per < n ? (size_t)t * per : n, hi = lo + per < n ? lo + per : n;
    if (t < 6) s.lev[t / 3][t % 3].hit = 0; /* the first scan's barrier comes before any use */
    uint32_t lost = 0;
    uint64_t pk, tot, before, bad = 0;
    int64_t len;
    float mean = 0.0f;
    if (id != CODEC_SBC) {
        pk = d_one_pick(s, s.lev[0], x, lo, hi, k, SELECT_MAG, &lost);
        before = d_scan_sum((uint64_t)__popcll(pk), s.sh, &tot); /* this thread's first value's place */
        const uint64_t cnt = tot;
        for (size_t i = lo; i < hi; i++)
            if (pk >> (i - lo) & 1) bad |= (__float_as_uint(x[i]) & 0x7F800000u) == 0x7F800000u;
        d_scan_sum(bad, s.sh, &bad);
        uint64_t prev = 0;
        if (id == CODEC_DGC) { /* one run entry a value (n <= ONE_N), after the values */
            uint64_t last = pk ? lo + (uint64_t)(63 - __clzll((long long)pk)) + 1 : 0;
            prev = d_scan(last, 1, s.sh, &tot); /* the index after the last value before this thread's */
            len = (int64_t)(4 + 6 * cnt);
        } else {
            len = (int64_t)(4 + (n + 7) / 8 + 4 * cnt);
        }
        len = bad ? -GC_ERR_PARAM : (uint64_t)len > cap ? -GC_ERR_NOSPACE : len;
        if (t == 0) {
            bk->len = len;
            bk->lost = lost;
        }
        if (len < 0 || lost) return; /* the whole block: nothing written */
        if (t == 0) d_put_u32(pay, (uint32_t)cnt);
        if (id == CODEC_TOPK) {
            uint8_t *vals = pay + 4 + (n + 7) / 8;
            for (size_t b = lo / 8; lo < hi && b < (hi + 7) / 8; b++) /* this thread's bytes, MSB = lowest index */
                pay[4 + b] = (uint8_t)(__brev((uint32_t)(pk >> (8 * b - lo))) >> 24);
            for (size_t i = lo; i < hi; i++)
                if (pk >> (i - lo) & 1) d_put_u32(vals + 4 * before++, __float_as_uint(x[i]));
        } else {
            float *vals = (float *)(pay + 4);
            uint16_t *runs = (uint16_t *)(pay + 4 + 4 * cnt);
            for (size_t i = lo; i < hi; i++) {
                if (!(pk >> (i - lo) & 1)) continue;
                vals[before] = x[i];
                runs[before++] = (uint16_t)(i - prev); /* the zeros before it */
                prev = i + 1;
            }
        }
    } else {
        /* Algorithm 1's two selections, each value's index at its place in idx */
        uint64_t pp = d_one_pick(s, s.lev[0], x, lo, hi, k, SELECT_POS, &lost);
        uint64_t bp = d_scan_sum((uint64_t)__popcll(pp), s.sh, &tot);
        const uint64_t cp = tot;
        uint64_t pn = d_one_pick(s, s.lev[1], x, lo, hi, k, SELECT_NEG, &lost);
        uint64_t bn = d_scan_sum((uint64_t)__popcll(pn), s.sh, &tot);
        const uint64_t cn = tot;
        if (lost) { /* the whole block: more than k may be picked, which idx cannot hold */
            if (t == 0) bk->lost = 1;
            return;
        }
        for (size_t i = lo; i < hi; i++) {
            if (pp >> (i - lo) & 1) idx[bp++] = (uint32_t)i;
            if (pn >> (i - lo) & 1) idx[k + bn++] = (uint32_t)i;
        }
        /* Algorithm 2's sums: each side's mantissas by exponent (k_sbc_bins), in the
         * histogram's memory, for the exact sum where it is the CPU's */
        unsigned long long *bins = (unsigned long long *)s.hist; /* [2][256] */
        for (unsigned i = t; i < 512; i += ONE_T) bins[i] = 0;
        __syncthreads();
        for (size_t i = lo; i < hi; i++)
            if ((pp | pn) >> (i - lo) & 1) d_sbc_bin(bins + (pp >> (i - lo) & 1 ? 0 : 256), x[i]);
        __syncthreads();
        if (t == 0) { /* Algorithm 2: the sums (in index order where not exact), the two means, the larger side */
            double sum[2];
            uint32_t nf = bins[255] || bins[256 + 255]; /* a NaN or an infinity */
            d_sbc_sums(sum, bins, cp, cn, [&](int q, uint64_t j) { return x[idx[q ? k + j : j]]; });
            const double sp = sum[0], sn = sum[1];
            double mu_pos = cp ? __ddiv_rn(sp, (double)cp) : 0.0, mu_neg = cn ? __ddiv_rn(-sn, (double)cn) : 0.0;
            uint32_t side = 0;
            uint64_t m = 0;
            if (cp || cn) {
                if (cp && mu_pos >= mu_neg) {
                    m = cp;
                    mean = __double2float_rn(mu_pos);
                } else {
                    side = 1;
                    m = cn;
                    mean = -__double2float_rn(mu_neg);
                }
            }
            s.rc = nf || (m && (!isfinite(mean) || mean == 0.0f)) ? -GC_ERR_PARAM : 0;
            s.side = side;
            s.m = m;
            s.mean = __float_as_uint(mean);
        }
        __syncthreads();
        const uint64_t m = s.m;
        const uint32_t *ix = idx + (s.side ? k : 0);
        mean = __uint_as_float(s.mean);
        pk = s.side ? pn : pp;
        /* Algorithm 3: thread t's codes [a, z), their bits, and each one's offset by a scan */
        const uint64_t cper = (m + ONE_T - 1) / ONE_T, a = t * cper < m ? t * cper : m, z = a + cper < m ? a + cper : m;
        uint64_t bits = 0;
        for (uint64_t j = a; j < z; j++)
            bits += (((uint64_t)ix[j] - (j ? (uint64_t)ix[j - 1] : (uint64_t)-1) - 1) >> rb) + 1 + (uint64_t)rb;
        uint64_t at = d_scan_sum(bits, s.sh, &tot);
        len = (int64_t)(SBC_HEADER + (tot + 7) / 8);
        len = s.rc ? s.rc : (uint64_t)len > cap ? -GC_ERR_NOSPACE : len;
        if (t == 0) {
            bk->len = len;
            bk->lost = lost;
        }
        if (len < 0 || lost) return;
        for (size_t i = SBC_HEADER + t; i < (size_t)len; i += ONE_T) pay[i] = 0;
        if (t == 0) {
            d_put_u32(pay, (uint32_t)m);
            d_put_u32(pay + 4, s.mean);
            pay[8] = (uint8_t)rb;
        }
        __syncthreads(); /* zeroed before any bit is ORed in */
        uint64_t P = 8 * SBC_HEADER + at;
        for (uint64_t j = a; j < z; j++) {
            uint64_t gap = (uint64_t)ix[j] - (j ? (uint64_t)ix[j - 1] : (uint64_t)-1) - 1, q = gap >> rb;
            for (; q > 0; q -= (uint64_t)(q < 32 ? q : 32)) { /* the quotient's ones */
                int ones = q < 32 ? (int)q : 32;
                d_or_bits((uint32_t *)pay, P, 0xFFFFFFFFu >> (32 - ones), ones);
                P += (uint64_t)ones;
            }
            P++; /* the zero that ends them */
            if (rb) d_or_bits((uint32_t *)pay, P, (uint32_t)gap & (uint32_t)((1ull << rb) - 1), rb);
            P += (uint64_t)rb;
        }
    }
    /* side->mask and side->repr over this thread's values, after every read of another's */
    for (size_t i = lo; i < hi; i++) {
        int on = pk >> (i - lo) & 1;
        if (mask) mask[i] = (uint8_t)on;
        if (repr) repr[i] = on ? (id == CODEC_SBC ? mean : x[i]) : 0.0f;
    }
}

/* up to CODEC_BATCH frames, a block each, their arguments going as the kernel's */
typedef struct {
    SparseOne j[CODEC_BATCH];
} OneTab;
__global__ void __launch_bounds__(ONE_T) k_sparse_one(OneTab a) { d_sparse_one(a.j[blockIdx.x]); }

void gcx_sparse_launch_ones(SparseOne *const *jobs, size_t k) {
    launch_tables<OneTab>(
        k, [&](size_t i) { return *jobs[i]; }, [](const OneTab &a, unsigned m) { k_sparse_one<<<m, ONE_T>>>(a); });
    for (size_t i = k; i-- > 0;) { /* sbc's index scratch, the newest first */
        gcx_dfree(jobs[i]->idx);
        jobs[i]->idx = NULL;
    }
}

/* The decoders of a payload the bundle's probe has checked (d_probe_check: valid as the
 * CPU decoder would find it) of a tensor of up to ONE_N values, in one block too: topk's
 * bitmap bytes split into runs a thread, their popcounts scanned for each value's place;
 * dgc's run entries (one a value: a skip would take the index past n) split the same way,
 * their sums scanned for each value's index; sbc's Rice codes walked by one thread (as the
 * probe walked them), after the block has zeroed out. out = v, or out += weight * v (acc),
 * as the general decoders (store_out) */

/* sbc: Algorithm 4's walk, each position given the mean, in one thread */
__device__ __noinline__ void d_sbc_put(float *out, const uint8_t *p, uint64_t len, uint64_t n, uint64_t m, int b,
                                       float mean, float weight, int acc) {
    BitReader r;
    br_init(&r, p + SBC_HEADER, len - SBC_HEADER);
    uint64_t next = 0, gap;
    for (uint64_t q = 0; q < m && next < n && !rice_get(&gap, &r, b, n - 1 - next); q++) {
        store_out(out, (size_t)(next + gap), mean, weight, acc);
        next += gap + 1;
    }
}

__device__ void d_sparse_one_dec(const SparseDec &j) {
    __shared__ uint64_t sh[ONE_T];
    const unsigned t = threadIdx.x;
    const size_t n = (size_t)j.n, k = (size_t)j.k;
    const uint8_t *p = j.pay;
    float *out = j.out;
    uint64_t tot;
    if (j.id == CODEC_TOPK) { /* every value of this thread's bytes written: no zeroing first */
        const size_t bm = (n + 7) / 8, per = (bm + ONE_T - 1) / ONE_T;
        const size_t b0 = t * per < bm ? t * per : bm, b1 = b0 + per < bm ? b0 + per : bm;
        uint64_t c = 0;
        for (size_t b = b0; b < b1; b++) c += (uint64_t)__popc(p[4 + b]);
        uint64_t r = d_scan_sum(c, sh, &tot);
        const uint8_t *vals = p + 4 + bm;
        for (size_t b = b0; b < b1; b++)
            for (int q = 0; q < 8 && 8 * b + q < n; q++) {
                size_t i = 8 * b + (size_t)q;
                if (p[4 + b] & (0x80u >> q))
                    store_out(out, i, __uint_as_float(d_get_u32(vals + 4 * r++)), j.weight, j.acc);
                else if (!j.acc) out[i] = 0.0f;
            }
        return;
    }
    if (!j.acc)
        for (size_t i = t; i < n; i += ONE_T) out[i] = 0.0f;
    __syncthreads(); /* zeroed before any value lands (d_scan's barriers come after, too) */
    if (j.id == CODEC_DGC) {
        const size_t per = (k + ONE_T - 1) / ONE_T, e0 = t * per < k ? t * per : k, e1 = e0 + per < k ? e0 + per : k;
        const uint8_t *runs = p + 4 + 4 * k;
        uint64_t g = 0;
        for (size_t e = e0; e < e1; e++) g += (uint64_t)runs[2 * e] | (uint64_t)runs[2 * e + 1] << 8;
        uint64_t at = d_scan_sum(g, sh, &tot) + e0; /* the index after value e0 - 1 */
        for (size_t e = e0; e < e1; e++) {
            at += (uint64_t)runs[2 * e] | (uint64_t)runs[2 * e + 1] << 8;
            store_out(out, (size_t)at++, __uint_as_float(d_get_u32(p + 4 + 4 * e)), j.weight, j.acc);
        }
    } else if (t == 0) {
        d_sbc_put(out, p, j.len, n, k, j.rb, j.mean, j.weight, j.acc);
    }
}

typedef struct {
    SparseDec j[CODEC_BATCH];
} DecTab;
__global__ void __launch_bounds__(ONE_T) k_sparse_one_dec(DecTab a) { d_sparse_one_dec(a.j[blockIdx.x]); }

void gcx_sparse_launch_decs(const SparseDec *jobs, size_t k) {
    launch_tables<DecTab>(
        k, [&](size_t i) { return jobs[i]; }, [](const DecTab &a, unsigned m) { k_sparse_one_dec<<<m, ONE_T>>>(a); });
}

int gcx_sparse_decode_job(SparseDec *j, const CodecCuda *g, float *out, size_t n, float weight, int acc, const Pay *p,
                          uint16_t flags) {
    int id = g->spec.ops->id, rc, rb = 0;
    uint64_t k;
    float mean = 0.0f;
    if (id == CODEC_TOPK) rc = topk_head(&k, n, p, flags);
    else if (id == CODEC_DGC) rc = dgc_head(&k, n, p, flags);
    else if (id == CODEC_SBC) rc = sbc_head(&k, &mean, &rb, n, p, flags);
    else return 0;
    if (rc) return rc;
    if (p->checked != id || n > ONE_N) return 0; /* the general decoder's own checks */
    if (p->chk1) return (int)p->chk1;
    SparseDec d = {out, p->d, (uint64_t)p->len, (uint64_t)n, k, weight, mean, acc, id, rb};
    *j = d;
    return 1;
}

/* ============================================================ dispatch ==== */

/* frame j of the one-block encoder: its k, and for sbc its Rice parameter and index
 * scratch (taken here, returned by gcx_sparse_launch_ones), of x[n] into pay (cap bytes
 * allowed), its result to be left in bk (SPARSE_BACK bytes of device memory). Returns 0,
 * or the GcError of a density out of range (nothing taken) */
static int sparse_one_job(SparseOne *j, CodecCuda *g, void *bk, uint8_t *pay, uint64_t cap, const float *x, size_t n,
                          const CodecSide *side) {
    double p;
    int64_t k = sparse_count(g, n, side, &p);
    if (k < 0) return -GC_ERR_PARAM;
    int id = g->spec.ops->id, sbc = id == CODEC_SBC;
    uint32_t *idx = sbc ? (uint32_t *)gcx_dmalloc((k ? 2 * k : 1) * 4) : NULL;
    SparseOne o = {bk, pay, side->mask, side->repr, idx, x, (uint64_t)n, (uint64_t)k, cap, id,
                   sbc ? golomb_rice_bits(p) : 0};
    *j = o;
    return 0;
}

/* the frame's length or GcError from the one-block encoder's read-back */
static int64_t sparse_one_verdict(const void *hb) {
    OneBack b;
    memcpy(&b, hb, sizeof b);
    if (b.lost) {
        fprintf(stderr, "internal error: GPU radix select found no bucket for a digit at %s:%d\n", __FILE__, __LINE__);
        exit(1);
    }
    return b.len;
}

/* in place: the one-block encoder, and one wait for its result */
static int64_t sparse_one_enc(CodecCuda *g, uint8_t *pay, size_t cap, const float *x, size_t n,
                              const CodecSide *side) {
    void *bk = gcx_dmalloc(SPARSE_BACK);
    uint8_t hb[sizeof(OneBack)];
    SparseOne j, *jp = &j;
    int rc = sparse_one_job(&j, g, bk, pay, cap, x, n, side);
    if (!rc) {
        gcx_sparse_launch_ones(&jp, 1);
        cudaCheck(cudaMemcpy(hb, bk, sizeof hb, cudaMemcpyDeviceToHost));
    }
    gcx_dfree(bk);
    return rc ? rc : sparse_one_verdict(hb);
}


int64_t gcx_sparse_encode(CodecCuda *g, uint8_t *pay, size_t cap, uint16_t *flags, const float *x, size_t n,
                          const CodecSide *side) {
    *flags = 0;
    int id = g->spec.ops->id;
    if (n <= ONE_N && (id == CODEC_TOPK || id == CODEC_DGC || id == CODEC_SBC))
        return sparse_one_enc(g, pay, cap, x, n, side);
    switch (id) {
    case CODEC_TOPK: return topk_enc(g, pay, cap, x, n, side, NULL);
    case CODEC_DGC: return dgc_enc(g, pay, cap, x, n, side, NULL);
    case CODEC_SBC: return sbc_enc(g, pay, cap, x, n, side);
    default: return -GC_ERR_CODEC;
    }
}

int64_t gcx_sparse_encode_staged(CodecCuda *g, uint8_t **pay, const float *x, size_t n, const CodecSide *side,
                                 SparseStage *st) {
    int id = g->spec.ops->id, dgc = id == CODEC_DGC, sbc = id == CODEC_SBC;
    double p;
    int64_t k = sparse_count(g, n, side, &p);
    if (k < 0 || !(dgc || sbc || id == CODEC_TOPK)) return k < 0 ? -GC_ERR_PARAM : -GC_ERR_CODEC;
    memset(st, 0, sizeof *st);
    st->one = n <= ONE_N;
    /* the most its values can take: topk's bitmap and k values; dgc's k values and entries,
     * one a value and one per 65535 zeros skipped (at most n / 65535 of them); sbc's k Rice
     * codes of rb + 1 bits besides their quotients, which sum to at most n >> rb (the gaps
     * sum to less than n), and the rest of the 32-bit word its last bits are ORed into */
    int rb = golomb_rice_bits(p);
    size_t cap = sbc ? SBC_HEADER + (size_t)(((uint64_t)(n >> rb) + (uint64_t)k * (rb + 1) + 7) / 8) + 3
               : dgc ? 4 + 4 * (size_t)k + 2 * ((size_t)k + n / 65535 + 1)
                     : 4 + (n + 7) / 8 + 4 * (size_t)k;
    *pay = (uint8_t *)gcx_dmalloc(cap);
    if (st->one || !sbc) st->bk = gcx_dmalloc(SPARSE_BACK); /* a larger sbc frame's length comes from its sums */
    if (st->one) return sparse_one_job(&st->job, g, st->bk, *pay, UINT64_MAX, x, n, side); /* launched there */
    /* the selection's first half now (sbc: both sides'), the rest at gcx_sparse_finish_staged */
    SparseLater *l = (SparseLater *)callocCheck(1, sizeof(SparseLater));
    size_t kk = (size_t)k < n ? (size_t)k : n;
    if (sbc) {
        l->sbc = (SbcWork *)callocCheck(1, sizeof(SbcWork));
        sbc_open(l->sbc, g, n, side); /* its density checked above */
        if (kk) {
            select_begin(&l->sbc->plan[0], x, n, kk, SELECT_POS);
            select_begin(&l->sbc->plan[1], x, n, kk, SELECT_NEG);
        }
        l->cap = cap - 3;
        st->len_later = 1;
    } else {
        select_open(&l->s, g, n, side, st, &kk); /* its k checked above */
        if (kk) select_begin(&l->plan, x, n, kk, SELECT_MAG);
        l->cap = cap;
    }
    l->g = g, l->pay = *pay, l->x = x, l->n = n, l->side = *side, l->k = kk;
    st->later = l;
    return 0;
}

/* m device pieces src[i] of size[i] bytes into host, one after the other: gathered by a
 * launch a CODEC_BATCH of them, then one copy (a wait) */
struct PieceAt {
    const uint8_t *src;
    uint8_t *dst;
    uint32_t size;
};
typedef struct {
    PieceAt j[CODEC_BATCH];
} PieceTab;
__global__ void k_gather_pieces(PieceTab a) {
    const PieceAt &p = a.j[blockIdx.x];
    for (uint32_t c = threadIdx.x; c < p.size; c += blockDim.x) p.dst[c] = p.src[c];
}
static void read_pieces(void *host, const void *const *src, const uint32_t *size, size_t m) {
    size_t total = 0;
    for (size_t i = 0; i < m; i++) total += size[i];
    uint8_t *d = (uint8_t *)gcx_dmalloc(total ? total : 1);
    PieceAt at[m + 1];
    for (size_t i = 0, off = 0; i < m; off += size[i++]) at[i] = PieceAt{(const uint8_t *)src[i], d + off, size[i]};
    launch_tables<PieceTab>(
        m, [&](size_t i) { return at[i]; }, [](const PieceTab &a, unsigned b) { k_gather_pieces<<<b, 32>>>(a); });
    if (total) cudaCheck(cudaMemcpy(host, d, total, cudaMemcpyDeviceToHost));
    gcx_dfree(d);
}

/* A pass's staged topk, dgc and sbc frames of more than ONE_N values: every selection's
 * candidates' count read in one copy (the pass's one wait for them), then each selection
 * finished; topk's and dgc's payload, side->mask and side->repr written, their checks
 * left in their bk for codec_batch_sizes' read; sbc's sums launched, all of them read in
 * one more copy (a second wait), then their payloads and side outputs written and their
 * lengths (or GcError) in st->len */
void gcx_sparse_finish_staged(SparseStage *const *sts, size_t k) {
    const void *src[2 * k + 1];
    uint32_t size[2 * k + 1];
    CandBack h[2 * k + 1];
    size_t m = 0, ns = 0;
    src[0] = NULL, size[0] = 0;
    for (size_t i = 0; i < k; i++) {
        const SparseLater *l = (const SparseLater *)sts[i]->later;
        for (int q = 0; l->k && q < (l->sbc ? 2 : 1); q++, m++) {
            src[m] = l->sbc ? l->sbc->plan[q].cb : l->plan.cb;
            size[m] = sizeof(CandBack);
        }
        ns += l->sbc != NULL;
    }
    read_pieces(h, src, size, m); /* the candidates' counts */
    m = 0;
    for (size_t i = 0; i < k; i++) {
        SparseStage *st = sts[i];
        SparseLater *l = (SparseLater *)st->later;
        if (l->sbc) {
            SbcWork *w = l->sbc;
            if (l->k) {
                w->cp = select_end(&w->plan[0], h[m++], w->dpos, &w->bk->sel[0], &w->radix[0]);
                w->cn = select_end(&w->plan[1], h[m++], w->dneg, &w->bk->sel[1], &w->radix[1]);
            }
            sbc_sums(w, l->x, l->n);
            continue;
        }
        l->s.cnt = 0, l->s.radix = 0;
        if (l->k) l->s.cnt = select_end(&l->plan, h[m++], l->s.idx, &l->s.bk->sel, &l->s.radix);
        select_close(&l->s, l->x, l->n, st);
        if (l->g->spec.ops->id == CODEC_DGC) dgc_write(l->s, l->g, l->pay, l->cap, l->n, &l->side, st);
        else topk_write(l->s, l->g, l->pay, l->cap, l->n, &l->side, st);
        free(l);
        st->later = NULL;
    }
    if (!ns) return;
    SbcBack hb[ns];
    m = 0;
    for (size_t i = 0; i < k; i++)
        if (sts[i]->later) src[m] = ((SparseLater *)sts[i]->later)->sbc->bk, size[m++] = sizeof(SbcBack);
    read_pieces(hb, src, size, m); /* sbc's sums, lengths and checks */
    m = 0;
    for (size_t i = 0; i < k; i++) {
        SparseStage *st = sts[i];
        SparseLater *l = (SparseLater *)st->later;
        if (!l) continue;
        st->len = sbc_write(l->sbc, l->pay, l->cap, l->n, &l->side, &hb[m++]);
        free(l->sbc);
        free(l);
        st->later = NULL;
    }
}

/* a plan never ended: everything it holds returned */
static void plan_drop(SelPlan *p) {
    plan_release(p);
    gcx_dfree(p->cand);
}
void gcx_sparse_drop_staged(SparseStage *st) {
    SparseLater *l = (SparseLater *)st->later;
    if (!l) return;
    if (l->sbc) {
        for (int q = 0; q < 2 && l->k; q++) plan_drop(&l->sbc->plan[q]);
        gcx_dfree(l->sbc->bk);
        gcx_dfree(l->sbc->dpos);
        gcx_dfree(l->sbc->dneg);
        free(l->sbc);
    } else {
        if (l->k) plan_drop(&l->plan);
        gcx_dfree(l->s.idx);
    }
    free(l);
    st->later = NULL;
}

int64_t gcx_sparse_staged_len(const CodecCuda *g, size_t n, const void *hb, const SparseStage *st) {
    if (st->one) return sparse_one_verdict(hb);
    SparseBack b;
    memcpy(&b, hb, sizeof b);
    return sparse_verdict(g, n, &b, st->radix, st->cnt, SIZE_MAX); /* its scratch took what its k can */
}

int gcx_sparse_decode(CodecCuda *g, float *out, size_t n, float weight, int acc, const Pay *p, uint16_t flags) {
    SparseDec j;
    int rc = gcx_sparse_decode_job(&j, g, out, n, weight, acc, p, flags);
    if (rc < 0) return rc;
    if (rc == 1) {
        gcx_sparse_launch_decs(&j, 1);
        return 0;
    }
    switch (g->spec.ops->id) {
    case CODEC_TOPK: return topk_dec(out, n, weight, acc, p, flags);
    case CODEC_DGC: return dgc_dec(out, n, weight, acc, p, flags);
    case CODEC_SBC: return sbc_dec(out, n, weight, acc, p, flags);
    default: return -GC_ERR_CODEC;
    }
}
