/* GPU codecs: the CodecCuda object, frames, shared device primitives, and the
 * dense codecs (fp32, fp16, int8, terngrad, stoch3, 3lc, onebit). The sparse
 * codecs live in compress/sparse_cuda.cu, gcomp in compress/gcomp_cuda.cu.
 * Contract: compress/codec_cuda.h. Wire formats: docs/FORMAT.md.
 *
 * Exactness rules followed by every kernel here:
 *  - nvcc contracts a*b+c into an FMA by default (-fmad=true); the CPU build is
 *    ISO C and contracts nothing. Every float expression that mixes a product
 *    and a sum is therefore written with __fmul_rn / __fadd_rn (never fused),
 *    e.g. decode-accumulate out + weight*v.
 *  - Divisions and square roots are IEEE (__fdiv_rn; nvcc's defaults
 *    -prec-div=true -prec-sqrt=true, no -use_fast_math, no flush to zero).
 *  - Scalars are reduced in the CPU's order: max|x| is order-free (an integer
 *    max over bit patterns); TernGrad's sum / sum of squares and 1-bit SGD's
 *    signed sums follow compress/dense.h exactly: blocks of DENSE_BLOCK values,
 *    16 double lanes per block (lane k sums values 16t+k in order t), lanes
 *    added 0..15, the block's last len%16 values added one by one, blocks
 *    combined in block order on the host.
 *  - Random numbers are rng_hash_uniform(seed, i) (common/rng.h, __host__
 *    __device__), a pure function of the value's index.
 * Each kernel thread that writes repr[i] has read x[i] itself first, so repr
 * may alias x as on the CPU.
 */
#define GC_CODEC_CUDA_INTERNAL
extern "C" {
#include "common/check.h"
#include "common/crc32c.h"
#include "common/errors.h"
#include "common/rng.h"
#include "compress/base3.h"
#include "compress/codec.h"
#include "compress/golomb.h"
}
#include "compress/codec_cuda.h"
#include "compress/sparse_check.cuh"

#include <math.h>
#include <pthread.h>
#include <string.h>

#include <cub/cub.cuh>

#include "common/cuda_check.h"

/* ====================================================== device primitives == */

#define TPB 256
/* the default pool keeps freed blocks (no release at every synchronization) */
static void pool_setup(void) {
    static int done[64]; /* per device; the workers' threads call this at once */
    int dev = 0;
    cudaCheck(cudaGetDevice(&dev));
    if (dev < 0 || dev >= 64 || __atomic_load_n(&done[dev], __ATOMIC_ACQUIRE)) return;
    cudaMemPool_t pool;
    cudaCheck(cudaDeviceGetDefaultMemPool(&pool, dev));
    uint64_t keep = UINT64_MAX; /* the same value from every thread: setting it twice is harmless */
    cudaCheck(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
    __atomic_store_n(&done[dev], 1, __ATOMIC_RELEASE);
}

/* Scratch. Every codec call takes a few device buffers and returns them (the CUB calls'
 * temporaries, counts, a kernel's intermediate arrays), a few tens in a frame pass, and
 * each cudaMallocAsync or cudaFreeAsync is a driver call of a microsecond or so on the
 * host. So each thread keeps one device arena for its default stream, used as a stack:
 * gcx_dmalloc takes the next 256-byte aligned piece above the last, and the top comes down
 * past every piece returned (in any order) once no piece above it is left, so a piece kept
 * longer (a staged frame's payload, codec_batch_stage) holds only what lies below it.
 * Reuse needs no wait: every user of a piece is ordered on the thread's stream, before the
 * next user of the same bytes. What does not fit (and GCX_DSCRATCH=each, which the codec
 * tests of the emulation use so that its page protections see each buffer's bounds) comes
 * from the pool as before; once the arena is empty it grows, up to SCRATCH_MAX, to the
 * height that would have held what did not fit. */
#define SCRATCH_ALIGN 256
#define SCRATCH_MAX ((size_t)256 << 20) /* a staged pass of ResNet-50's larger sparsified tensors holds ~100 MiB */
#define SCRATCH_PIECES 1024
typedef struct {
    uint8_t *base;
    size_t cap, used, want, over; /* want: the height that would have held every piece this
                                   * round, over: the bytes of those that did not fit */
    uint32_t at[SCRATCH_PIECES]; /* the live pieces' offsets (below SCRATCH_MAX), bottom to top; */
    uint8_t done[SCRATCH_PIECES]; /* returned, above a piece still held */
    unsigned live;
    int dev;
} Scratch;
static thread_local Scratch scratch;
static pthread_key_t scratch_key; /* frees a thread's arena when the thread ends */
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;
static int scratch_each;
/* after the work still queued on the ending thread's stream: cudaFree does not wait for
 * the streams on memory from cudaMallocAsync, and the legacy stream waits for every
 * per-thread default stream */
static void scratch_end(void *p) { cudaFreeAsync(p, cudaStreamLegacy); } /* at thread exit: nothing to report to */
static void scratch_init(void) {
    const char *e = getenv("GCX_DSCRATCH");
    scratch_each = e && !strcmp(e, "each");
    pthread_key_create(&scratch_key, scratch_end);
}

void *gcx_dmalloc(size_t bytes) {
    pthread_once(&scratch_once, scratch_init);
    Scratch *s = &scratch;
    size_t need = ((bytes < 16 ? 16 : bytes) + SCRATCH_ALIGN - 1) / SCRATCH_ALIGN * SCRATCH_ALIGN;
    int dev = 0;
    cudaCheck(cudaGetDevice(&dev));
    if (s->used + need + s->over > s->want) s->want = s->used + need + s->over;
    if (s->base && dev == s->dev && s->used + need <= s->cap && s->live < SCRATCH_PIECES) {
        s->at[s->live] = (uint32_t)s->used;
        s->done[s->live++] = 0;
        s->used += need;
        return s->base + s->at[s->live - 1];
    }
    void *p = NULL;
    cudaCheck(cudaMallocAsync(&p, need, 0));
    s->over += need;
    return p;
}

void gcx_dfree(void *p) {
    if (!p) return;
    Scratch *s = &scratch;
    if (!s->base || (uint8_t *)p < s->base || (uint8_t *)p >= s->base + s->cap) {
        cudaCheck(cudaFreeAsync(p, 0));
    } else {
        size_t off = (size_t)((uint8_t *)p - s->base);
        unsigned k = s->live;
        while (k > 0 && s->at[k - 1] != off) k--;
        if (k == 0) {
            fprintf(stderr, "internal error: gcx_dfree of a scratch piece that is not held\n");
            exit(1);
        }
        s->done[k - 1] = 1;
        while (s->live > 0 && s->done[s->live - 1]) s->used = s->at[--s->live]; /* the top comes down */
    }
    if (s->live) return;
    /* the arena is empty: a larger one when this round's pieces did not all fit */
    size_t want = s->want < SCRATCH_MAX ? s->want : SCRATCH_MAX;
    s->used = 0;
    s->want = 0;
    s->over = 0;
    if (scratch_each || want <= s->cap) return;
    if (s->base) cudaCheck(cudaFreeAsync(s->base, 0));
    s->base = NULL;
    s->cap = 0;
    cudaCheck(cudaGetDevice(&s->dev));
    cudaCheck(cudaMallocAsync((void **)&s->base, want, 0));
    s->cap = want;
    pthread_setspecific(scratch_key, s->base);
}

unsigned gcx_grid(size_t work) {
    size_t b = (work + TPB - 1) / TPB;
    if (b > 65536) b = 65536;
    return b ? (unsigned)b : 1u;
}

int64_t gcx_cub_items(size_t n) {
#if defined(CUB_VERSION) && CUB_VERSION < 300000
    const size_t limit = INT32_MAX;
#else
    const size_t limit = INT64_MAX;
#endif
    if (n > limit) {
        fprintf(stderr, "error: %zu values: more than this CUB counts in one call (%zu)\n", n, limit);
        exit(1);
    }
    return (int64_t)n;
}

void gcx_exclusive_sum_u64(uint64_t *out, const uint64_t *in, size_t n) {
    if (n == 0) return;
    size_t tb = 0;
    cudaCheck(cub::DeviceScan::ExclusiveSum(NULL, tb, in, out, gcx_cub_items(n)));
    void *t = gcx_dmalloc(tb);
    cudaCheck(cub::DeviceScan::ExclusiveSum(t, tb, in, out, gcx_cub_items(n)));
    gcx_dfree(t);
}

void gcx_exclusive_sum_u32(uint32_t *out, const uint32_t *in, size_t n) {
    if (n == 0) return;
    size_t tb = 0;
    cudaCheck(cub::DeviceScan::ExclusiveSum(NULL, tb, in, out, gcx_cub_items(n)));
    void *t = gcx_dmalloc(tb);
    cudaCheck(cub::DeviceScan::ExclusiveSum(t, tb, in, out, gcx_cub_items(n)));
    gcx_dfree(t);
}

struct MaxU32 {
    __host__ __device__ uint32_t operator()(uint32_t a, uint32_t b) const { return a > b ? a : b; }
};

void gcx_inclusive_max_u32(uint32_t *out, const uint32_t *in, size_t n) {
    if (n == 0) return;
    size_t tb = 0;
    cudaCheck(cub::DeviceScan::InclusiveScan(NULL, tb, in, out, MaxU32(), gcx_cub_items(n)));
    void *t = gcx_dmalloc(tb);
    cudaCheck(cub::DeviceScan::InclusiveScan(t, tb, in, out, MaxU32(), gcx_cub_items(n)));
    gcx_dfree(t);
}

/* the selection with its count left on the device, in *d_num (n > 0) */
template <typename T>
static void select_flagged_dev(T *out, const T *in, const uint8_t *flags, size_t n, int64_t *d_num) {
    size_t tb = 0;
    cudaCheck(cub::DeviceSelect::Flagged(NULL, tb, in, flags, out, d_num, gcx_cub_items(n)));
    void *t = gcx_dmalloc(tb);
    cudaCheck(cub::DeviceSelect::Flagged(t, tb, in, flags, out, d_num, gcx_cub_items(n)));
    gcx_dfree(t);
}

template <typename T>
static size_t select_flagged(T *out, const T *in, const uint8_t *flags, size_t n) {
    if (n == 0) return 0;
    int64_t *d_num = (int64_t *)gcx_dmalloc(sizeof(int64_t));
    select_flagged_dev(out, in, flags, n, d_num);
    int64_t num = 0;
    cudaCheck(cudaMemcpy(&num, d_num, sizeof num, cudaMemcpyDeviceToHost));
    gcx_dfree(d_num);
    return (size_t)num;
}

size_t gcx_select_flagged_u8(uint8_t *out, const uint8_t *in, const uint8_t *flags, size_t n) {
    return select_flagged(out, in, flags, n);
}
size_t gcx_select_flagged_u32(uint32_t *out, const uint32_t *in, const uint8_t *flags, size_t n) {
    return select_flagged(out, in, flags, n);
}
void gcx_select_flagged_u32_dev(uint32_t *out, const uint32_t *in, const uint8_t *flags, size_t n, int64_t *d_num) {
    if (n == 0) {
        cudaCheck(cudaMemsetAsync(d_num, 0, sizeof *d_num, 0));
        return;
    }
    select_flagged_dev(out, in, flags, n, d_num);
}

/* ---- max|x| as a bit pattern (compress/dense.h dense_absmax_bits) ---- */

/* The blocks of a grid-wide max: about one wave of an H100/H200 (132 SMs x 2048 threads),
 * each block one atomic on the result word; one atomic per warp of a block per 256
 * values (gcx_grid) would queue half a million atomics on one word at 64M values */
#define MAX_BLOCKS 1024

__device__ __forceinline__ uint32_t d_warp_max(uint32_t m) {
    for (int o = 16; o; o >>= 1) {
        uint32_t v = __shfl_down_sync(0xFFFFFFFFu, m, o);
        m = v > m ? v : m;
    }
    return m;
}

__global__ void k_absmax(uint32_t *out, const float *x, size_t n) {
    __shared__ uint32_t wm[TPB / 32];
    uint32_t m = 0;
    GRID_STRIDE(i, n) {
        uint32_t u = __float_as_uint(x[i]) & 0x7FFFFFFFu;
        m = u > m ? u : m;
    }
    m = d_warp_max(m);
    if ((threadIdx.x & 31) == 0) wm[threadIdx.x >> 5] = m;
    __syncthreads();
    if (threadIdx.x < 32) {
        m = d_warp_max(threadIdx.x < TPB / 32 ? wm[threadIdx.x] : 0u);
        if (threadIdx.x == 0 && m) atomicMax(out, m);
    }
}

/* *d (device) = the bit pattern of max|x[i]|, in stream order; zeroed: *d is 0 already */
static void absmax_into(uint32_t *d, const float *x, size_t n, int zeroed = 0) {
    if (!zeroed) cudaCheck(cudaMemsetAsync(d, 0, sizeof(uint32_t), 0));
    if (n == 0) return;
    unsigned grid = gcx_grid(n);
    k_absmax<<<grid < MAX_BLOCKS ? grid : MAX_BLOCKS, TPB>>>(d, x, n);
    cudaCheckLast();
}

uint32_t gcx_absmax_bits(const float *x, size_t n) {
    if (n == 0) return 0;
    uint32_t *d = (uint32_t *)gcx_dmalloc(sizeof(uint32_t));
    absmax_into(d, x, n);
    uint32_t m = 0;
    cudaCheck(cudaMemcpy(&m, d, sizeof m, cudaMemcpyDeviceToHost));
    gcx_dfree(d);
    return m;
}

/* ---- deterministic block sums (compress/dense.h dense_block_sums) ---- */

#define DENSE_BLOCK_GPU ((size_t)1 << 16) /* = DENSE_BLOCK of compress/dense.h */
#define DENSE_FINITE_MAX_GPU 0x7F7FFFFFu  /* bits of FLT_MAX */
#define SUM_TILE 4096                     /* values staged in shared memory at a time (multiple of 16) */

typedef struct {
    double a, b, c; /* kind 0: sum, sum of squares; kind 1: sum(x >= 0), sum(x < 0), count(x >= 0) */
    uint32_t m;     /* kind 0: max bits of |x| */
} GpuSums;

/* One block of 256 threads per DENSE_BLOCK values: block blk of x into *out. Threads
 * 0..15 are the 16 lanes of the CPU's two 8-wide double vectors (lane k: values 16t + k of
 * the block, t increasing); everybody stages tiles and computes the max.  x: [n] */
__device__ void d_block_sums(GpuSums *out, const float *x, size_t n, int kind, size_t blk) {
    __shared__ float tile[SUM_TILE];
    __shared__ double la[16], lb[16];
    __shared__ uint32_t lc[16];
    __shared__ uint32_t bmax;
    const size_t lo = blk * DENSE_BLOCK_GPU;
    const size_t len = n - lo < DENSE_BLOCK_GPU ? n - lo : DENSE_BLOCK_GPU;
    const size_t full = len / 16 * 16;
    const float *xb = x + lo;
    const int t = threadIdx.x;
    double sa = 0.0, sb = 0.0;
    uint32_t cnt = 0, m = 0;
    if (t == 0) bmax = 0;
    for (size_t t0 = 0; t0 < full; t0 += SUM_TILE) {
        size_t tc = full - t0 < SUM_TILE ? full - t0 : SUM_TILE;
        for (size_t k = t; k < tc; k += blockDim.x) tile[k] = xb[t0 + k];
        __syncthreads();
        if (t < 16) {
            for (size_t j = t; j < tc; j += 16) {
                float f = tile[j];
                if (kind == 0) {
                    double d = (double)f;
                    sa = __dadd_rn(sa, d);
                    sb = __dadd_rn(sb, __dmul_rn(d, d)); /* exact product: float * float fits a double */
                } else {
                    float pf = f >= 0.0f ? f : 0.0f; /* the CPU masks the bits: +0 where not selected */
                    float nf = f >= 0.0f ? 0.0f : f;
                    sa = __dadd_rn(sa, (double)pf);
                    sb = __dadd_rn(sb, (double)nf);
                    cnt += f >= 0.0f ? 1u : 0u;
                }
            }
        }
        if (kind == 0)
            for (size_t k = t; k < tc; k += blockDim.x) {
                uint32_t u = __float_as_uint(tile[k]) & 0x7FFFFFFFu;
                m = u > m ? u : m;
            }
        __syncthreads();
    }
    if (t < 16) {
        la[t] = sa;
        lb[t] = sb;
        lc[t] = cnt;
    }
    for (int o = 16; o; o >>= 1) {
        uint32_t v = __shfl_down_sync(0xFFFFFFFFu, m, o);
        m = v > m ? v : m;
    }
    __syncthreads(); /* bmax = 0 is visible */
    if ((t & 31) == 0 && m) atomicMax(&bmax, m);
    __syncthreads();
    if (t == 0) {
        double ra = 0.0, rb = 0.0, rc = 0.0;
        for (int k = 0; k < 16; k++) ra = __dadd_rn(ra, la[k]); /* dense_hsum: lanes 0..7 then 8..15 */
        for (int k = 0; k < 16; k++) rb = __dadd_rn(rb, lb[k]);
        if (kind == 1)
            for (int k = 0; k < 8; k++) rc = __dadd_rn(rc, __dadd_rn((double)lc[k], (double)lc[k + 8]));
        uint32_t mm = bmax;
        for (size_t i = full; i < len; i++) {
            float f = xb[i];
            if (kind == 0) {
                double v = (double)f;
                ra = __dadd_rn(ra, v);
                rb = __dadd_rn(rb, __dmul_rn(v, v));
                uint32_t u = __float_as_uint(f) & 0x7FFFFFFFu;
                mm = u > mm ? u : mm;
            } else if (f >= 0.0f) {
                ra = __dadd_rn(ra, (double)f);
                rc = __dadd_rn(rc, 1.0);
            } else {
                rb = __dadd_rn(rb, (double)f);
            }
        }
        GpuSums r;
        r.a = ra;
        r.b = rb;
        r.c = rc;
        r.m = kind == 0 ? mm : 0;
        *out = r;
    }
}

/* the block sums of several tensors in one launch: tensor i is x[i][0, n[i]), of kind[i],
 * its blocks first[i] .. first[i + 1] - 1 (found with constant indices: the table stays in
 * the kernel's parameter space). out: [first[k]] */
typedef struct {
    const float *x[CODEC_BATCH];
    uint64_t n[CODEC_BATCH];
    uint32_t first[CODEC_BATCH + 1];
    uint8_t kind[CODEC_BATCH];
    unsigned k;
} SumsTab;
__global__ void k_block_sums_tab(GpuSums *out, SumsTab a) {
    const float *x = NULL;
    size_t n = 0, blk = 0;
    int kind = 0;
#pragma unroll
    for (unsigned i = 0; i < CODEC_BATCH; i++)
        if (i < a.k && blockIdx.x >= a.first[i] && blockIdx.x < a.first[i + 1])
            x = a.x[i], n = a.n[i], blk = blockIdx.x - a.first[i], kind = a.kind[i];
    d_block_sums(out + blockIdx.x, x, n, kind, blk);
}

/* blocks' sums combined in block order (the CPU's), on the host */
static GpuSums sums_combine(const GpuSums *h, size_t nb) {
    GpuSums r = {0.0, 0.0, 0.0, 0};
    for (size_t b = 0; b < nb; b++) {
        r.a += h[b].a;
        r.b += h[b].b;
        r.c += h[b].c;
        r.m = h[b].m > r.m ? h[b].m : r.m;
    }
    return r;
}

/* the whole-tensor sums of k tensors (x[i]: [n[i]] device, of kind[i]) into out[k]: one
 * launch for every CODEC_BATCH tensors, one read, the blocks combined in block order on
 * the host */
static void sums_of(const float *const *x, const size_t *n, const uint8_t *kind, size_t k, GpuSums *out) {
    size_t *nb = (size_t *)mallocCheck((k ? k : 1) * sizeof(size_t)), total = 0;
    for (size_t i = 0; i < k; i++) total += nb[i] = (n[i] + DENSE_BLOCK_GPU - 1) / DENSE_BLOCK_GPU;
    GpuSums *d = (GpuSums *)gcx_dmalloc((total ? total : 1) * sizeof(GpuSums));
    SumsTab a;
    memset(&a, 0, sizeof a);
    size_t base = 0, blocks = 0;
    for (size_t i = 0; i <= k; i++) { /* a table of CODEC_BATCH tensors a launch */
        if (a.k == CODEC_BATCH || (i == k && a.k)) {
            a.first[a.k] = (uint32_t)blocks;
            k_block_sums_tab<<<(unsigned)blocks, TPB>>>(d + base, a);
            cudaCheckLast();
            base += blocks;
            blocks = 0;
            memset(&a, 0, sizeof a);
        }
        if (i < k && nb[i]) {
            a.x[a.k] = x[i];
            a.n[a.k] = n[i];
            a.kind[a.k] = kind[i];
            a.first[a.k++] = (uint32_t)blocks;
            blocks += nb[i];
        }
    }
    GpuSums *h = (GpuSums *)gcx_pinned(total * sizeof(GpuSums));
    if (total) cudaCheck(cudaMemcpy(h, d, total * sizeof(GpuSums), cudaMemcpyDeviceToHost)); /* the one wait */
    gcx_dfree(d);
    for (size_t i = 0, at = 0; i < k; at += nb[i++]) out[i] = sums_combine(h + at, nb[i]);
    free(nb);
}

/* one tensor's: x: [n] device */
static GpuSums block_sums(const float *x, size_t n, int kind) {
    GpuSums r;
    uint8_t k8 = (uint8_t)kind;
    sums_of(&x, &n, &k8, 1, &r);
    return r;
}

/* ---- small device helpers ---- */

static inline float bits2f(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static inline uint32_t f2bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* set *flag when any byte of p[n] matches the codec's invalid-byte test */
enum { BAD_TERN = 1, BAD_B3 = 2, BAD_I8 = 3 };
__device__ __forceinline__ uint32_t d_bad_byte(uint32_t b, int what) {
    if (what == BAD_TERN) return b & (b >> 1) & 0x55u; /* a code 3 */
    if (what == BAD_B3) return b > B3_MAXLIT;           /* not a base-3^5 byte */
    return b == 0x80u;                                  /* int8 -128 is not a level */
}
__global__ void k_bad_bytes(uint32_t *flag, const uint8_t *p, size_t n, int what) {
    uint32_t bad = 0;
    GRID_STRIDE(j, n) bad |= d_bad_byte(p[j], what);
    if (__any_sync(0xFFFFFFFFu, bad != 0) && (threadIdx.x & 31) == 0) atomicOr(flag, 1u);
}

static int any_bad_bytes(const uint8_t *p_dev, size_t n, int what) {
    if (n == 0) return 0;
    uint32_t *d = (uint32_t *)gcx_dmalloc(4);
    cudaCheck(cudaMemsetAsync(d, 0, 4, 0));
    k_bad_bytes<<<gcx_grid(n), TPB>>>(d, p_dev, n, what);
    cudaCheckLast();
    uint32_t h = 0;
    cudaCheck(cudaMemcpy(&h, d, 4, cudaMemcpyDeviceToHost));
    gcx_dfree(d);
    return h != 0;
}

static thread_local void *t_pinned;
static thread_local size_t t_pinned_n;
static pthread_key_t pinned_key;
static pthread_once_t pinned_once = PTHREAD_ONCE_INIT;
static void pinned_end(void *p) { cudaFreeHost(p); }
static void pinned_init(void) { pthread_key_create(&pinned_key, pinned_end); }
void *gcx_pinned(size_t bytes) {
    if (bytes > t_pinned_n || !t_pinned) { /* doubling: each growth waits for the whole device */
        pthread_once(&pinned_once, pinned_init);
        size_t n = t_pinned_n > 4096 ? t_pinned_n : 4096;
        while (n < bytes) n *= 2;
        if (t_pinned) cudaCheck(cudaFreeHost(t_pinned));
        cudaCheck(cudaMallocHost(&t_pinned, n));
        t_pinned_n = n;
        pthread_setspecific(pinned_key, t_pinned);
    }
    return t_pinned;
}

uint8_t *gcx_upload(const uint8_t *p, size_t len) {
    uint8_t *d = (uint8_t *)gcx_dmalloc(len);
    if (len) cudaCheck(cudaMemcpy(d, p, len, cudaMemcpyHostToDevice));
    return d;
}

/* ---- small writes into device memory without a wait ----
 * The bytes travel as a kernel's argument, copied at the launch: the write is ordered on
 * the stream like any kernel and the host bytes are free at once (a cudaMemcpy from
 * pageable memory would wait for the stream to drain first). */
typedef struct {
    uint8_t b[CUDA_PUT_MAX];
} PutBytes;

__global__ void k_put_bytes(uint8_t *dst, PutBytes v, unsigned n) {
#pragma unroll
    for (unsigned i = 0; i < CUDA_PUT_MAX; i++) /* constant indices: the argument is not copied to local memory */
        if (i < n) dst[i] = v.b[i];
}

void cuda_put_bytes(void *dst, const void *src, size_t n) {
    if (n == 0) return;
    if (n > CUDA_PUT_MAX) {
        fprintf(stderr, "error: cuda_put_bytes of %zu bytes (at most %d)\n", n, CUDA_PUT_MAX);
        exit(1);
    }
    PutBytes v;
    memset(&v, 0, sizeof v);
    memcpy(v.b, src, n);
    k_put_bytes<<<1, 1>>>((uint8_t *)dst, v, (unsigned)n);
    cudaCheckLast();
}

/* ---- the dense codecs' loops as jobs ----
 * fp16, int8, terngrad, stoch3, onebit and ternsum encode and decode with one grid-stride
 * loop over m items (values, bytes or words) and, encoding, the payload's header (its
 * first hb bytes). A DenseJob holds one such loop's arguments; dense_run launches it at
 * once (k_dense_one: the loop and the header in one launch), or, while a batch takes the
 * frames' work (t_take: codec_encode_cuda_batched, codec_batch_stage and
 * codec_decode_cuda_batched, where the payload is written and read where it lies), queues
 * it there, and the flush runs the queued jobs first, CODEC_BATCH a launch (k_dense_batch).
 * A queued job reads and writes at the flush, so what it reads must stay until then: a
 * frame encoded into scratch that is copied out at once, or decoded from a copy, runs now
 * (dense_launch) */
enum {
    DK_FP16_ENC, DK_FP16_DEC, DK_INT8_ENC, DK_INT8_DEC, DK_TERN_ENC, DK_TERN_DEC, DK_STOCH3_ENC, DK_B3_DEC,
    DK_ONEBIT_ENC, DK_ONEBIT_DEC, DK_TERNSUM_ENC, DK_TERNSUM_DEC
};
typedef struct {
    uint8_t *dst;       /* encoders: the payload, its body at dst + hb; decoders: out (floats) */
    float *repr;        /* encoders: what the frame represents, or NULL */
    const uint8_t *src; /* encoders: x (floats); decoders: the payload's body */
    uint64_t n, m, L;   /* values, the loop's items, and the body's bytes (stoch3: L) */
    uint64_t seed, B;   /* terngrad's and stoch3's seed; ternsum's base */
    float a, b, weight; /* int8's scale; TernGrad's clip and s; onebit's two means; ternsum's s */
    int32_t tn, K;      /* ternsum's levels and values a word */
    uint8_t kind, hb, acc, hdr[8];
} DenseJob;
static void dense_run(const DenseJob &j);
static void dense_launch(const DenseJob &j);
static thread_local CodecBatch *t_take; /* the batch that takes the dense jobs, else NULL */
/* f() with the dense jobs it runs queued in b (t_take), or launched at once (b NULL) */
template <class F> static auto taken_by(CodecBatch *b, F f) -> decltype(f()) {
    t_take = b;
    auto r = f();
    t_take = NULL;
    return r;
}
/* a job of kind k over m items: zeroed, its pointers and sizes set */
static DenseJob dense_job(int k, void *dst, const void *src, size_t n, size_t m) {
    DenseJob j;
    memset(&j, 0, sizeof j);
    j.kind = (uint8_t)k;
    j.dst = (uint8_t *)dst;
    j.src = (const uint8_t *)src;
    j.n = n;
    j.m = m;
    return j;
}
/* an encoder's job: payload pay, hb header bytes hdr, x's n values in m items */
static DenseJob dense_enc(int k, uint8_t *pay, const uint8_t *hdr, unsigned hb, float *repr, const float *x, size_t n,
                          size_t m) {
    DenseJob j = dense_job(k, pay, x, n, m);
    j.repr = repr;
    j.hb = (uint8_t)hb;
    memcpy(j.hdr, hdr, hb);
    return j;
}
/* a decoder's job: the body body into out (weight, acc) */
static DenseJob dense_dec(int k, float *out, const uint8_t *body, size_t n, size_t m, float weight, int acc) {
    DenseJob j = dense_job(k, out, body, n, m);
    j.weight = weight;
    j.acc = (uint8_t)(acc ? 1 : 0);
    return j;
}

/* byte i of the payload, one of its last 8 */
static uint8_t pay_tail(const Pay *p, size_t i) { return p->tail[8 - (p->len - i)]; }

/* ================================================================ fp32 ==== */

__global__ void k_acc_f32(float *out, const float *v, size_t n, float weight) {
    GRID_STRIDE(i, n) store_out(out, i, v[i], weight, 1);
}

static int64_t fp32_enc(uint8_t *pay, size_t cap, const float *x, size_t n, const CodecSide *side) {
    if (cap < 4 * n) return -GC_ERR_NOSPACE;
    if (n) cudaCheck(cudaMemcpyAsync(pay, x, 4 * n, cudaMemcpyDeviceToDevice, 0));
    if (side->repr && side->repr != x && n)
        cudaCheck(cudaMemcpyAsync(side->repr, x, 4 * n, cudaMemcpyDeviceToDevice, 0));
    return (int64_t)(4 * n);
}

/* fp32's checks of a payload of len bytes for n values (flags: the header's) */
static int fp32_check(size_t n, size_t len, uint16_t flags) {
    if (flags) return -GC_ERR_CORRUPT;
    if (len != 4 * n) return len < 4 * n ? -GC_ERR_TRUNCATED : -GC_ERR_OVERSIZED;
    return 0;
}

static int fp32_dec(float *out, size_t n, float weight, int acc, const Pay *p, uint16_t flags) {
    int rc = fp32_check(n, p->len, flags);
    if (rc || n == 0) return rc;
    if (!acc) {
        cudaCheck(cudaMemcpyAsync(out, p->d, 4 * n, cudaMemcpyDeviceToDevice, 0));
        return 0;
    }
    k_acc_f32<<<gcx_grid(n), TPB>>>(out, (const float *)p->d, n, weight);
    cudaCheckLast();
    return 0;
}

/* ================================================================ fp16 ==== */

/* compress/half.h half_from_float, bit for bit (the subnormal path rounds with
 * the float adder: round to nearest even, no flush to zero on the GPU either) */
__device__ __forceinline__ uint16_t d_half_from_float(float f) {
    uint32_t u = __float_as_uint(f);
    uint32_t sign = (u >> 16) & 0x8000u;
    uint32_t a = u & 0x7FFFFFFFu;
    uint32_t h;
    if (a >= 0x47800000u) {
        if (a > 0x7F800000u) h = 0x7E00u | ((a >> 13) & 0x3FFu);
        else h = 0x7C00u;
    } else if (a < 0x38800000u) {
        const uint32_t magic = ((127 - 15) + (23 - 10) + 1) << 23;
        float fa = __fadd_rn(__uint_as_float(a), __uint_as_float(magic));
        h = __float_as_uint(fa) - magic;
    } else {
        uint32_t odd = (a >> 13) & 1u;
        h = (a + ((uint32_t)(15 - 127) << 23) + 0xFFFu + odd) >> 13;
    }
    return (uint16_t)(sign | h);
}

/* compress/half.h half_to_float (exact), except that a signalling NaN comes
 * out quiet, as x86 F16C's vcvtph2ps (the CPU decoder's main path) makes it;
 * the encoders never produce one, so only foreign frames see the difference */
__device__ __forceinline__ float d_half_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1Fu, m = h & 0x3FFu, u;
    if (e == 0) {
        u = __float_as_uint(__fmul_rn((float)m, 1.0f / 16777216.0f)) | sign;
    } else if (e == 31) {
        u = sign | 0x7F800000u | (m << 13) | (m ? 0x00400000u : 0u);
    } else {
        u = sign | ((e + 112) << 23) | (m << 13);
    }
    return __uint_as_float(u);
}

static int64_t fp16_enc(uint8_t *pay, size_t cap, const float *x, size_t n, const CodecSide *side) {
    if (cap < 2 * n) return -GC_ERR_NOSPACE;
    if (n) dense_run(dense_enc(DK_FP16_ENC, pay, NULL, 0, side->repr, x, n, n));
    return (int64_t)(2 * n);
}

static int fp16_dec(float *out, size_t n, float weight, int acc, const Pay *p, uint16_t flags) {
    if (flags) return -GC_ERR_CORRUPT;
    if (n > SIZE_MAX / 2) return -GC_ERR_COUNT;
    if (p->len != 2 * n) return p->len < 2 * n ? -GC_ERR_TRUNCATED : -GC_ERR_OVERSIZED;
    if (n) dense_run(dense_dec(DK_FP16_DEC, out, p->d, n, n, weight, acc));
    return 0;
}

/* ================================================================ int8 ==== */

/* value i's code at scale (compress/int8.c) */
__device__ __forceinline__ int8_t d_int8_code(float x, float scale) {
    if (scale == 0.0f) return 0;
    float r = rintf(__fdiv_rn(x, scale)); /* round half to even */
    r = r > 127.0f ? 127.0f : r;
    r = r < -127.0f ? -127.0f : r;
    return (int8_t)(int)r;
}

static int64_t int8_enc(uint8_t *pay, size_t cap, const float *x, size_t n, const CodecSide *side) {
    if (cap < 4 + n) return -GC_ERR_NOSPACE;
    uint32_t mb = side->local ? (isnan(side->local[1]) ? UINT32_MAX : f2bits(side->local[1])) : gcx_absmax_bits(x, n);
    if (mb > DENSE_FINITE_MAX_GPU) return -GC_ERR_PARAM;
    /* compress/int8.c, the same host arithmetic */
    float maxabs = bits2f(mb), scale = maxabs / 127.0f;
    if (scale < 0x1p-126f && (double)scale * 127.0 < (double)maxabs) scale = nextafterf(scale, 1.0f);
    if (isinf(127.0f * scale)) scale = nextafterf(scale, 0.0f);
    uint8_t hdr[4];
    put_f32(hdr, scale);
    DenseJob j = dense_enc(DK_INT8_ENC, pay, hdr, 4, side->repr, x, n, n);
    j.a = scale;
    dense_run(j);
    return (int64_t)(4 + n);
}

static int int8_dec(float *out, size_t n, float weight, int acc, const Pay *p, uint16_t flags) {
    size_t len = p->len;
    if (flags) return -GC_ERR_CORRUPT;
    if (len < 4 || len - 4 < n) return -GC_ERR_TRUNCATED;
    if (len - 4 > n) return -GC_ERR_OVERSIZED;
    uint32_t sb = get_u32(p->head);
    if (sb > DENSE_FINITE_MAX_GPU) return -GC_ERR_CORRUPT;
    if (isinf(127.0f * bits2f(sb))) return -GC_ERR_CORRUPT;
    if (n == 0) return 0;
    if (p->checked ? p->chk1 != 0 : any_bad_bytes(p->d + 4, n, BAD_I8)) return -GC_ERR_CORRUPT;
    DenseJob j = dense_dec(DK_INT8_DEC, out, p->d + 4, n, n, weight, acc);
    j.a = bits2f(sb);
    dense_run(j);
    return 0;
}

/* ===================================================== terngrad, stoch3 ==== */

typedef struct {
    float clip; /* |f(g)| = min(|g|, clip) */
    float s;    /* the scalar sent */
    uint64_t seed;
} TgQ;

/* compress/terngrad.c tg_local: the clip threshold (TernGrad 3.3, eq. 21) and
 * the local scalar (3.1 eq. 2), from device reductions in the CPU's order */
/* the same from x's sums m (kind 0: the max of |x| alone where cc <= 0 or n == 0) */
static int tg_from_sums(float *clip, float *s, double cc, const GpuSums *m, size_t n) {
    if (m->m > DENSE_FINITE_MAX_GPU) return -GC_ERR_PARAM;
    float maxabs = bits2f(m->m);
    if (cc <= 0.0 || n == 0) {
        *clip = *s = maxabs;
        return 0;
    }
    double mean = m->a / (double)n, var = m->b / (double)n - mean * mean;
    double sigma = sqrt(var > 0.0 ? var : 0.0);
    float thr = (float)(cc * sigma);
    *clip = thr;
    *s = maxabs < thr ? maxabs : thr;
    return 0;
}

static int tg_local(float *clip, float *s, double cc, const float *x, size_t n) {
    GpuSums m = {0.0, 0.0, 0.0, 0};
    if (cc <= 0.0 || n == 0) m.m = gcx_absmax_bits(x, n);
    else m = block_sums(x, n, 0);
    return tg_from_sums(clip, s, cc, &m, n);
}

/* side->local's statistics (codec_local_stats_cuda) where given, else tg_local's */
static int tg_prepare(TgQ *q, const Codec *c, const float *x, size_t n, const CodecSide *side) {
    int rc = 0;
    if (side->local) {
        q->clip = side->local[0];
        q->s = side->local[1];
        if (isnan(q->clip) || isnan(q->s)) rc = -GC_ERR_PARAM;
    } else {
        rc = tg_local(&q->clip, &q->s, c->spec.v[0], x, n);
    }
    if (rc) return rc;
    if (side->scalar) { /* scalar sharing (TernGrad 3.1, eq. 4) */
        float sh = *side->scalar;
        if (!(sh >= 0.0f) || f2bits(sh) > DENSE_FINITE_MAX_GPU) return -GC_ERR_PARAM;
        q->s = sh;
    }
    /* compress/dense.h dense_seed */
    q->seed = side->seed ^ ((uint64_t)c->spec.v[1] * 0x9E3779B97F4A7C15ULL);
    return 0;
}

/* 0 for 0, 1 for +1, 2 for -1 (compress/terngrad.c tg_code) */
__device__ __forceinline__ uint32_t d_tg_code(float v, uint64_t i, TgQ q) {
    float a = fabsf(v);
    a = a < q.clip ? a : q.clip;
    uint32_t b = __fmul_rn(rng_hash_uniform(q.seed, i), q.s) < a;
    return b ? (v < 0.0f ? 2u : 1u) : 0u;
}

__device__ __forceinline__ float d_tg_value(uint32_t code, float s) {
    return __fmul_rn((float)((int32_t)(code & 1u) - (int32_t)(code >> 1)), s);
}


/* base-3^5 digit (t + 1) of value i (compress/terngrad.c stoch3_digit) */
__device__ __forceinline__ uint32_t d_stoch3_digit(float v, uint64_t i, TgQ q) {
    uint32_t code = d_tg_code(v, i, q);
    return code == 1 ? 2u : code == 2 ? 0u : 1u;
}


/* dequantize base-3^5 bytes (no run codes): value (digit - 1) * m; stoch3's bytes (DK_B3_DEC),
 * and 3lc's after run expansion (k_zre_dec, d_tlc_one_dec) */
/* the values of byte b, byte j of L: out[j], out[L + j], ... out[4 L + j] below n */
__device__ __forceinline__ void d_b3_out(float *out, uint32_t b, size_t j, size_t n, size_t L, float m, float weight,
                                         int acc) {
    uint32_t pw = 81;
    for (int k = 0; k < 5; k++, pw /= 3) {
        size_t i = (size_t)k * L + j;
        if (i >= n) continue;
        float v = __fmul_rn((float)((int32_t)((b / pw) % 3) - 1), m);
        store_out(out, i, v, weight, acc);
    }
}

static int64_t terngrad_enc(Codec *c, uint8_t *pay, size_t cap, const float *x, size_t n, const CodecSide *side) {
    size_t nb = n / 4 + (n % 4 != 0);
    if (cap < 4 + nb) return -GC_ERR_NOSPACE;
    TgQ q;
    int rc = tg_prepare(&q, c, x, n, side);
    if (rc) return rc;
    uint8_t hdr[4];
    put_f32(hdr, q.s);
    DenseJob j = dense_enc(DK_TERN_ENC, pay, hdr, 4, side->repr, x, n, nb);
    j.a = q.clip, j.b = q.s, j.seed = q.seed;
    dense_run(j);
    return (int64_t)(4 + nb);
}

static int terngrad_dec(float *out, size_t n, float weight, int acc, const Pay *p, uint16_t flags) {
    size_t len = p->len;
    if (flags) return -GC_ERR_CORRUPT;
    size_t nb = n / 4 + (n % 4 != 0);
    if (len < 4 || len - 4 < nb) return -GC_ERR_TRUNCATED;
    if (len - 4 > nb) return -GC_ERR_OVERSIZED;
    uint32_t sb = get_u32(p->head);
    if (sb > DENSE_FINITE_MAX_GPU) return -GC_ERR_CORRUPT;
    if (nb == 0) return 0;
    if (p->checked ? p->chk1 != 0 : any_bad_bytes(p->d + 4, nb, BAD_TERN)) return -GC_ERR_CORRUPT;
    if (n % 4 && (pay_tail(p, 4 + nb - 1) >> (2 * (n % 4)))) return -GC_ERR_CORRUPT; /* padding codes not 0 */
    DenseJob j = dense_dec(DK_TERN_DEC, out, p->d + 4, n, n, weight, acc);
    j.a = bits2f(sb);
    dense_run(j);
    return 0;
}

static int64_t stoch3_enc(Codec *c, uint8_t *pay, size_t cap, const float *x, size_t n, const CodecSide *side) {
    size_t L = b3_len(n);
    if (cap < 4 + L) return -GC_ERR_NOSPACE;
    TgQ q;
    int rc = tg_prepare(&q, c, x, n, side);
    if (rc) return rc;
    uint8_t hdr[4];
    put_f32(hdr, q.s);
    DenseJob j = dense_enc(DK_STOCH3_ENC, pay, hdr, 4, side->repr, x, n, L);
    j.L = L;
    j.a = q.clip, j.b = q.s, j.seed = q.seed;
    dense_run(j);
    return (int64_t)(4 + L);
}

static int stoch3_dec(float *out, size_t n, float weight, int acc, const Pay *p, uint16_t flags) {
    size_t len = p->len;
    if (flags) return -GC_ERR_CORRUPT;
    size_t L = b3_len(n), full = b3_full(n, L);
    if (len < 4 || len - 4 < L) return -GC_ERR_TRUNCATED;
    if (len - 4 > L) return -GC_ERR_OVERSIZED;
    uint32_t sb = get_u32(p->head);
    if (sb > DENSE_FINITE_MAX_GPU) return -GC_ERR_CORRUPT;
    if (L == 0) return 0;
    if (p->checked ? p->chk1 != 0 : any_bad_bytes(p->d + 4, L, BAD_B3)) return -GC_ERR_CORRUPT;
    for (size_t j = full; j < L; j++) /* at most 5 bytes, the last ones, hold padding digits */
        if (!b3_pad_ok(pay_tail(p, 4 + j), j, n, L)) return -GC_ERR_CORRUPT;
    DenseJob j = dense_dec(DK_B3_DEC, out, p->d + 4, n, L, weight, acc);
    j.L = L;
    j.a = bits2f(sb);
    dense_run(j);
    return 0;
}

/* terngrad/stoch3 local scalar (codec_local_scalar) */
static float tg_local_scalar(const Codec *c, const float *x, size_t n) {
    float clip, s;
    if (tg_local(&clip, &s, c->spec.v[0], x, n)) return NAN;
    return s;
}

/* ================================================================= 3lc ==== */

/* digit (trit + 1) of v: 1 + [2v > m] - [2v < -m] (compress/tlc.c tlc_digit) */
__device__ __forceinline__ uint32_t d_tlc_digit(float v, float m) {
    float v2 = __fadd_rn(v, v);
    return 1u + (uint32_t)(v2 > m) - (uint32_t)(v2 < -m);
}

/* What the 3LC encoder reads back, once, after its kernels: the zero-run stream's length,
 * max|x|'s bits and the scale's */
typedef struct {
    int64_t z;
    uint32_t mb, m;
} TlcBack;

/* byte j of L: the base-3^5 digits of x[j], x[L + j], ... x[4 L + j] (3LC 3.1, 3.2) with
 * the scale m (digit 0 past n), their values into repr */
__device__ __forceinline__ uint32_t d_tlc_byte(float *repr, const float *x, size_t n, size_t L, size_t j, float m) {
    uint32_t b = 0;
    for (int k = 0; k < 5; k++) {
        size_t i = (size_t)k * L + j;
        uint32_t d = 0;
        if (i < n) {
            d = d_tlc_digit(x[i], m);
            if (repr) repr[i] = __fmul_rn((float)((int32_t)d - 1), m);
        }
        b = 3 * b + d;
    }
    return b;
}

/* the scale m = max|x| * s (3LC 3.1, the float product of tlc.c) from max|x|'s bits in
 * bk->mb (into bk->m and the payload's first 4 bytes, by one thread), and with it the
 * base-3^5 bytes of the quantized x (3LC 3.1, 3.2) into dst[L], plus repr; and the zero-run
 * encoding's (3LC 3.3) step 1: R[j] = j + 1 for a byte that is not 121, else 0, whose
 * inclusive max-scan S[j] is the start of the zero run byte j is in (the position after
 * the last non-121 byte before it). Zero bytes when max|x| or the scale is not finite
 * (the encoder then fails, with repr untouched, as on the CPU) */
__global__ void k_tlc_pack(uint8_t *dst, uint32_t *R, float *repr, const float *x, size_t n, size_t L, TlcBack *bk,
                           uint8_t *pay, float s) {
    uint32_t mb = bk->mb, mm = __float_as_uint(__fmul_rn(__uint_as_float(mb), s));
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        bk->m = mm;
        d_put_u32(pay, mm);
    }
    if (mb > DENSE_FINITE_MAX_GPU || mm > DENSE_FINITE_MAX_GPU) { /* defined bytes for the kernels after */
        GRID_STRIDE(j, L) {
            dst[j] = B3_ZERO;
            R[j] = 0;
        }
        return;
    }
    float m = __uint_as_float(mm);
    GRID_STRIDE(j, L) {
        uint32_t b = d_tlc_byte(repr, x, n, L, j, m);
        dst[j] = (uint8_t)b;
        R[j] = b != B3_ZERO ? (uint32_t)(j + 1) : 0u;
    }
}

/* the code of the group of zero bytes that starts at j of B[L]: 255 for 14, 243 + (g - 2)
 * for g >= 2, a literal 121 for g = 1 */
__device__ __forceinline__ uint8_t d_zre_group(const uint8_t *B, size_t j, size_t L) {
    uint32_t g = 1;
    while (g < B3_RUNMAX && j + g < L && B[j + g] == B3_ZERO) g++;
    return (uint8_t)(g == 1 ? B3_ZERO : B3_RUN0 + g - 2);
}

/* the bytes a zero-run stream's byte b expands to: 1, or k for a run code */
__device__ __forceinline__ uint32_t d_zre_run(uint32_t b) { return b >= B3_RUN0 ? b - B3_RUN0 + 2u : 1u; }

/* step 2: every literal byte is emitted as is; a maximal run of r bytes 121 is
 * cut into groups of 14 from its start, and each group emits one byte: 255 for
 * 14, 243 + (g - 2) for g >= 2, a literal 121 for g = 1. That is exactly the
 * canonical serial encoding (floor(r/14) bytes 255, then the remainder code).
 * ob: [L] byte to emit at j; fl: [L] 1 where j emits */
__global__ void k_zre_emit(uint8_t *ob, uint8_t *fl, const uint8_t *B, const uint32_t *S, size_t L) {
    GRID_STRIDE(j, L) {
        uint32_t b = B[j];
        if (b != B3_ZERO) {
            ob[j] = (uint8_t)b;
            fl[j] = 1;
            continue;
        }
        size_t t = j - (size_t)S[j]; /* offset inside the run */
        if (t % B3_RUNMAX) {
            fl[j] = 0;
            ob[j] = 0;
            continue;
        }
        ob[j] = d_zre_group(B, j, L);
        fl[j] = 1;
    }
}

/* ---- 3lc in one block: a frame of at most TLC_ONE_L bytes (n <= 5 TLC_ONE_L values:
 * ResNet-110's largest convolution, 36,864 values, is 7,373 bytes) coded by one kernel of
 * one block instead of six kernels and CUB calls to encode and five to decode, the steps
 * of those kernels with the scans across the block's threads; each thread takes
 * TLC_ONE_ITEMS consecutive bytes. A launch costs the host a driver call, and a step of
 * ResNet-110 with 3lc over the parameter server codes 444 such frames ---- */
#define TLC_ONE_T (4 * TPB)
#define TLC_ONE_ITEMS (TPB / 32) /* 8; 2 in the emulation's blocks of 64 threads, whose tests
                                  * (at most 8,193 values) then reach both paths */
#define TLC_ONE_L ((size_t)TLC_ONE_T * TLC_ONE_ITEMS)

/* the exclusive scan of v over the block's threads in thread order, sum (op 0) or max
 * (op 1), and in *total the whole; sh: [TLC_ONE_T] shared, free again when it returns */
__device__ uint32_t d_block_scan(uint32_t v, int op, uint32_t *sh, uint32_t *total) {
    unsigned t = threadIdx.x;
    sh[t] = v;
    __syncthreads();
    for (unsigned d = 1; d < TLC_ONE_T; d <<= 1) {
        uint32_t o = t >= d ? sh[t - d] : 0;
        __syncthreads();
        if (t >= d) sh[t] = op ? (o > sh[t] ? o : sh[t]) : sh[t] + o;
        __syncthreads();
    }
    uint32_t ex = t ? sh[t - 1] : 0;
    *total = sh[TLC_ONE_T - 1];
    __syncthreads();
    return ex;
}

/* tlc_enc's kernels in one: max|x| (its bits, and the scale's, into bk, the scale into
 * pay[0..3]), the bytes (and repr; nothing when max|x| or the scale is not finite, where
 * the host fails the frame), the zero-run stream into pay + 4 and its length into bk->z */
__device__ void d_tlc_one_enc(TlcBack *bk, uint8_t *pay, float *repr, const float *x, size_t n, size_t L,
                              float s) {
    __shared__ uint32_t sh[TLC_ONE_T];
    __shared__ uint8_t B[TLC_ONE_L];
    unsigned t = threadIdx.x;
    uint32_t mx = 0, all;
    for (size_t i = t; i < n; i += TLC_ONE_T) {
        uint32_t u = __float_as_uint(x[i]) & 0x7FFFFFFFu;
        mx = u > mx ? u : mx;
    }
    d_block_scan(mx, 1, sh, &all);
    uint32_t mm = __float_as_uint(__fmul_rn(__uint_as_float(all), s));
    if (t == 0) {
        bk->mb = all;
        bk->m = mm;
        bk->z = 0;
        d_put_u32(pay, mm);
    }
    if (all > DENSE_FINITE_MAX_GPU || mm > DENSE_FINITE_MAX_GPU) return;
    float m = __uint_as_float(mm);
    size_t j0 = (size_t)t * TLC_ONE_ITEMS;
    uint32_t last = 0; /* j + 1 of this thread's last byte that is not 121 (k_tlc_pack's R) */
    for (int q = 0; q < TLC_ONE_ITEMS && j0 + q < L; q++) { /* k_tlc_pack */
        size_t j = j0 + q;
        uint32_t b = d_tlc_byte(repr, x, n, L, j, m);
        B[j] = (uint8_t)b;
        if (b != B3_ZERO) last = (uint32_t)j + 1;
    }
    uint32_t S = d_block_scan(last, 1, sh, &all); /* its barriers make B whole for every thread */
    uint8_t ob[TLC_ONE_ITEMS];
    uint32_t emit = 0, cnt = 0;
    for (int q = 0; q < TLC_ONE_ITEMS && j0 + q < L; q++) { /* k_zre_emit, S the inclusive max-scan */
        size_t j = j0 + q;
        uint32_t b = B[j];
        if (b != B3_ZERO) {
            S = (uint32_t)j + 1;
            ob[q] = (uint8_t)b;
        } else if ((j - S) % B3_RUNMAX) {
            continue;
        } else {
            ob[q] = d_zre_group(B, j, L);
        }
        emit |= 1u << q;
        cnt++;
    }
    uint32_t at = 4 + d_block_scan(cnt, 0, sh, &all);
    for (int q = 0; q < TLC_ONE_ITEMS; q++)
        if (emit >> q & 1u) pay[at++] = ob[q];
    if (t == 0) bk->z = all;
}

/* frames of the one-block encoder, a block each, CODEC_BATCH a launch, their arguments
 * going as the kernel's (a pass's staged frames, launched together at codec_batch_sizes) */
typedef struct {
    TlcBack *bk;
    uint8_t *pay;
    float *repr;
    const float *x;
    uint64_t n, L;
    float s;
} TlcJob;
typedef struct {
    TlcJob j[CODEC_BATCH];
} TlcTab;
__global__ void __launch_bounds__(TLC_ONE_T) k_tlc_one_enc(TlcTab a) {
    const TlcJob &j = a.j[blockIdx.x];
    d_tlc_one_enc(j.bk, j.pay, j.repr, j.x, (size_t)j.n, (size_t)j.L, j.s);
}

static void tlc_launch_ones(TlcJob *const *jobs, size_t k) {
    launch_tables<TlcTab>(k, [&](size_t i) { return *jobs[i]; },
                          [](const TlcTab &a, unsigned m) { k_tlc_one_enc<<<m, TLC_ONE_T>>>(a); });
}

/* the payload's length (cap bytes at most) from what the encoder read back, or its error */
static int64_t tlc_back_len(const TlcBack *hb, size_t cap) {
    if (hb->mb > DENSE_FINITE_MAX_GPU || hb->m > DENSE_FINITE_MAX_GPU) return -GC_ERR_PARAM;
    if ((size_t)hb->z > cap - 4) return -GC_ERR_NOSPACE;
    return (int64_t)(4 + (size_t)hb->z);
}

/* tlc_enc's kernels launched, the payload into pay (room for max_payload, 4 + L bytes) and
 * what the host reads back (the stream's length, the scale's validity) into bk: a frame of
 * one block's size by one kernel, a larger one by max|x|'s, the packing's (with the scale
 * and the zero runs' marks), the marks' scan, the emission and its compaction */
static void tlc_enc_launch(TlcBack *bk, uint8_t *pay, float *repr, const float *x, size_t n, float s) {
    size_t L = b3_len(n);
    if (L <= TLC_ONE_L) {
        TlcJob j = {bk, pay, repr, x, (uint64_t)n, (uint64_t)L, s}, *jp = &j;
        tlc_launch_ones(&jp, 1);
        return;
    }
    cudaCheck(cudaMemsetAsync(bk, 0, sizeof(TlcBack), 0));
    absmax_into(&bk->mb, x, n, 1); /* zeroed with bk */
    uint8_t *B = (uint8_t *)gcx_dmalloc(L), *ob = (uint8_t *)gcx_dmalloc(L), *fl = (uint8_t *)gcx_dmalloc(L);
    uint32_t *R = (uint32_t *)gcx_dmalloc(L * 4), *S = (uint32_t *)gcx_dmalloc(L * 4);
    k_tlc_pack<<<gcx_grid(L), TPB>>>(B, R, repr, x, n, L, bk, pay, s);
    cudaCheckLast();
    gcx_inclusive_max_u32(S, R, L);
    k_zre_emit<<<gcx_grid(L), TPB>>>(ob, fl, B, S, L);
    cudaCheckLast();
    select_flagged_dev(pay + 4, ob, fl, L, &bk->z); /* at most L bytes */
    gcx_dfree(S);
    gcx_dfree(R);
    gcx_dfree(fl);
    gcx_dfree(ob);
    gcx_dfree(B);
}

/* One wait: the kernels' results read back together (a staged frame's, codec_batch_stage,
 * with the pass's others at codec_batch_sizes) */
static int64_t tlc_enc(Codec *c, uint8_t *pay, size_t cap, const float *x, size_t n, const CodecSide *side) {
    if (cap < 4) return -GC_ERR_NOSPACE;
    TlcBack *bk = (TlcBack *)gcx_dmalloc(sizeof(TlcBack)), hb;
    tlc_enc_launch(bk, pay, side->repr, x, n, (float)c->spec.v[0]);
    cudaCheck(cudaMemcpy(&hb, bk, sizeof hb, cudaMemcpyDeviceToHost));
    gcx_dfree(bk);
    return tlc_back_len(&hb, cap);
}

/* what the 3LC decoder reads back, once: the stream's expansion and whether a byte was bad */
typedef struct {
    uint64_t total;
    uint32_t bad, pad;
} TlcCheck;

/* run expansion: e[i] = bytes byte i expands to (1, or k for a run code); chk->bad = 0
 * for k_zre_check, which runs next */
__global__ void k_zre_len(uint64_t *e, TlcCheck *chk, const uint8_t *z, size_t zlen) {
    if (blockIdx.x == 0 && threadIdx.x == 0) chk->bad = 0;
    GRID_STRIDE(i, zlen + 1) e[i] = i == zlen ? 0 : d_zre_run(z[i]);
}

__device__ __forceinline__ int d_b3_pad_ok(uint32_t b, size_t j, size_t n, size_t L) {
    uint32_t pw = 81;
    for (int k = 0; k < 5; k++, pw /= 3)
        if ((size_t)k * L + j >= n && (b / pw) % 3 != 0) return 0;
    return 1;
}

/* whether byte b of a zero-run stream, expanding to position j < L, is bad: a run past n, or
 * over padding digits, or padding digits that are not 0 (compress/tlc.c tlc_validate) */
__device__ __forceinline__ int d_zre_bad(uint32_t b, uint64_t j, size_t n, size_t L, size_t full) {
    uint64_t k = d_zre_run(b);
    if (b >= B3_RUN0) return k > L - j || j + k > full;
    return j >= full && !d_b3_pad_ok(b, (size_t)j, n, L);
}

/* the bytes byte b of a zero-run stream expands to, from position j of B */
__device__ __forceinline__ void d_zre_put(uint8_t *B, uint64_t j, uint32_t b) {
    if (b < B3_RUN0) B[j] = (uint8_t)b;
    else for (uint32_t t = 0, k = d_zre_run(b); t < k; t++) B[j + t] = B3_ZERO;
}

/* compress/tlc.c tlc_validate, one byte per thread: every byte that starts
 * before L (the bytes the serial walk reads) is checked. pos: exclusive scan of
 * the expansion lengths. */
/* chk->bad set (k_zre_len zeroed it) where a byte of z is bad; chk->total = pos[zlen] */
__global__ void k_zre_check(TlcCheck *chk, const uint8_t *z, const uint64_t *pos, size_t zlen, size_t n, size_t L,
                            size_t full) {
    uint32_t f = 0;
    if (blockIdx.x == 0 && threadIdx.x == 0) chk->total = pos[zlen];
    GRID_STRIDE(i, zlen) {
        uint64_t j = pos[i];
        if (j < L) f |= d_zre_bad(z[i], j, n, L, full);
    }
    if (f) atomicOr(&chk->bad, 1u);
}

/* the decoder's verdict on a stream of L base-3 bytes from its check */
__host__ __device__ static inline int tlc_verdict(const TlcCheck *hc, size_t L) {
    return hc->bad ? -GC_ERR_CORRUPT : hc->total < L ? -GC_ERR_TRUNCATED : hc->total > L ? -GC_ERR_OVERSIZED : 0;
}

/* run expansion and dequantization (d_b3_out) in one, only where the stream's check chk
 * (k_zre_check's) passed, with which no byte expands past L: byte i of z, expanding to
 * pos[i], gives the values of the base-3 bytes it stands for. With verdict (device), the
 * check's verdict (0 or GcError) into *verdict */
__global__ void k_zre_dec(float *out, int *verdict, const TlcCheck *chk, const uint8_t *z, const uint64_t *pos,
                          size_t zlen, size_t n, size_t L, float m, float weight, int acc) {
    int v = tlc_verdict(chk, L);
    if (verdict && blockIdx.x == 0 && threadIdx.x == 0) *verdict = v;
    if (v) return;
    GRID_STRIDE(i, zlen) {
        uint32_t b = z[i], k = d_zre_run(b);
        if (b >= B3_RUN0) b = B3_ZERO;
        for (uint32_t t = 0; t < k; t++) d_b3_out(out, b, (size_t)pos[i] + t, n, L, m, weight, acc);
    }
}

/* The zero-run stream z[zlen] of a frame of n values (L bytes) checked by the block as
 * k_zre_len and k_zre_check: returns whether a byte is bad (the same in every thread), *total
 * the stream's expansion; zb this thread's TLC_ONE_ITEMS bytes and *pos where the first
 * expands to. sh: [TLC_ONE_T] shared */
__device__ uint32_t d_tlc_one_check(uint8_t *zb, uint32_t *pos, uint32_t *total, const uint8_t *z, size_t zlen,
                                    size_t n, size_t L, uint32_t *sh) {
    size_t i0 = (size_t)threadIdx.x * TLC_ONE_ITEMS, full = n > 4 * L ? n - 4 * L : 0; /* b3_full */
    uint32_t e = 0, bad;
    for (int q = 0; q < TLC_ONE_ITEMS && i0 + q < zlen; q++) { /* k_zre_len */
        zb[q] = z[i0 + q];
        e += d_zre_run(zb[q]);
    }
    *pos = d_block_scan(e, 0, sh, total);
    uint32_t f = 0;
    for (uint32_t q = 0, j = *pos; q < TLC_ONE_ITEMS && i0 + q < zlen; j += d_zre_run(zb[q]), q++) /* k_zre_check */
        if (j < L) f |= d_zre_bad(zb[q], j, n, L, full);
    d_block_scan(f, 1, sh, &bad);
    return bad;
}

/* tlc_dec's kernels in one (TlcCheck defined above): the stream checked (into chk, where
 * not NULL) and, only when it is valid, expanded into B and decoded into out as k_zre_dec
 * does. sh: [TLC_ONE_T], B: [TLC_ONE_L] shared */
__device__ void d_tlc_one_dec(TlcCheck *chk, float *out, const uint8_t *z, size_t zlen, size_t n, size_t L, float m,
                              float weight, int acc, uint32_t *sh, uint8_t *B) {
    unsigned t = threadIdx.x;
    size_t i0 = (size_t)t * TLC_ONE_ITEMS;
    uint8_t zb[TLC_ONE_ITEMS];
    uint32_t pos, total, bad = d_tlc_one_check(zb, &pos, &total, z, zlen, n, L, sh);
    if (t == 0 && chk) {
        chk->bad = bad;
        chk->total = total;
    }
    if (bad || total != L) return; /* out untouched: the host returns the error */
    for (uint32_t q = 0, j = pos; q < TLC_ONE_ITEMS && i0 + q < zlen; j += d_zre_run(zb[q]), q++) /* run expansion */
        d_zre_put(B, j, zb[q]);
    __syncthreads();
    for (size_t j = t; j < L; j += TLC_ONE_T) d_b3_out(out, B[j], j, n, L, m, weight, acc);
}

__global__ void __launch_bounds__(TLC_ONE_T)
    k_tlc_one_dec(TlcCheck *chk, float *out, const uint8_t *z, size_t zlen, size_t n, size_t L, float m, float weight,
                  int acc) {
    __shared__ uint32_t sh[TLC_ONE_T];
    __shared__ uint8_t B[TLC_ONE_L];
    d_tlc_one_dec(chk, out, z, zlen, n, L, m, weight, acc, sh, B);
}

/* 3lc payloads that their probe found valid, of one block's size: a block each, CODEC_BATCH
 * a launch, queued in a CodecBatch and launched at its flush (codec_decode_cuda_batched) */
typedef struct {
    float *out;
    const uint8_t *z;       /* the zero-run stream */
    uint64_t zlen, n, L;
    float m, weight;
    int acc;
} TlcDec;
typedef struct {
    TlcDec j[CODEC_BATCH];
} TlcDecTab;
__global__ void __launch_bounds__(TLC_ONE_T) k_tlc_one_decs(TlcDecTab a) {
    __shared__ uint32_t sh[TLC_ONE_T];
    __shared__ uint8_t B[TLC_ONE_L];
    const TlcDec &j = a.j[blockIdx.x];
    d_tlc_one_dec(NULL, j.out, j.z, (size_t)j.zlen, (size_t)j.n, (size_t)j.L, j.m, j.weight, j.acc, sh, B);
}

static void tlc_launch_decs(const TlcDec *jobs, size_t k) {
    launch_tables<TlcDecTab>(k, [&](size_t i) { return jobs[i]; },
                             [](const TlcDecTab &a, unsigned m) { k_tlc_one_decs<<<m, TLC_ONE_T>>>(a); });
}

/* compress/tlc.c's checks of the payload's header and sizes: its scale m, the base-3 bytes
 * L, the zero-run stream's zlen bytes. Returns a GcError, 0 when there is nothing to
 * decode (an empty stream for an empty tensor), 1 to decode */
static int tlc_head(float *m, size_t *L, size_t *zlen, size_t n, const Pay *p, uint16_t flags) {
    if (flags) return -GC_ERR_CORRUPT;
    if (p->len < 4) return -GC_ERR_TRUNCATED;
    uint32_t mb = get_u32(p->head);
    if (mb > DENSE_FINITE_MAX_GPU) return -GC_ERR_CORRUPT;
    *m = bits2f(mb);
    *L = b3_len(n);
    *zlen = p->len - 4;
    if (*zlen == 0) return *L ? -GC_ERR_TRUNCATED : 0;
    return 1;
}

/* j for the batch (1), 0 for one decoded at once, or the error the probe found */
static int tlc_decode_job(TlcDec *j, float *out, size_t n, float weight, int acc, const Pay *p, uint16_t flags) {
    float m;
    size_t L, zlen;
    int rc = tlc_head(&m, &L, &zlen, n, p, flags);
    if (rc <= 0) return rc;
    if (!p->checked || L > TLC_ONE_L || zlen > TLC_ONE_L) return 0; /* not one for the batch */
    TlcCheck hc;
    hc.bad = p->chk1;
    hc.total = p->chk2;
    rc = tlc_verdict(&hc, L);
    if (rc) return rc;
    TlcDec d = {out, p->d + 4, (uint64_t)zlen, (uint64_t)n, (uint64_t)L, m, weight, acc};
    *j = d;
    return 1;
}

static int tlc_dec(float *out, size_t n, float weight, int acc, const Pay *p, uint16_t flags) {
    float m;
    size_t L, zlen;
    int head = tlc_head(&m, &L, &zlen, n, p, flags);
    if (head <= 0) return head;
    size_t full = b3_full(n, L);
    const uint8_t *z = p->d + 4;
    TlcCheck *chk = (TlcCheck *)gcx_dmalloc(sizeof(TlcCheck)), hc; /* read back together: one wait */
    if (L <= TLC_ONE_L && zlen <= TLC_ONE_L) { /* one kernel, which decodes only a valid stream */
        if (p->checked) { /* checked with the frame's probe: no wait, and no launch for a bad one */
            hc.bad = p->chk1;
            hc.total = p->chk2;
        }
        if (!p->checked || (!hc.bad && hc.total == L)) {
            k_tlc_one_dec<<<1, TLC_ONE_T>>>(chk, out, z, zlen, n, L, m, weight, acc);
            cudaCheckLast();
        }
        if (!p->checked) cudaCheck(cudaMemcpy(&hc, chk, sizeof hc, cudaMemcpyDeviceToHost));
        gcx_dfree(chk);
        return tlc_verdict(&hc, L);
    }
    uint64_t *e = (uint64_t *)gcx_dmalloc((zlen + 1) * 8), *pos = (uint64_t *)gcx_dmalloc((zlen + 1) * 8);
    k_zre_len<<<gcx_grid(zlen + 1), TPB>>>(e, chk, z, zlen);
    cudaCheckLast();
    gcx_exclusive_sum_u64(pos, e, zlen + 1); /* pos[zlen] = total expansion */
    k_zre_check<<<gcx_grid(zlen), TPB>>>(chk, z, pos, zlen, n, L, full);
    cudaCheckLast();
    /* out written only for a valid stream (too long: no run crosses L, checked, so bytes are
     * left over), decided on the device: the verdict read now, or left in p->verdict */
    k_zre_dec<<<gcx_grid(zlen), TPB>>>(out, p->verdict, chk, z, pos, zlen, n, L, m, weight, acc);
    cudaCheckLast();
    gcx_dfree(pos);
    gcx_dfree(e);
    if (!p->verdict) cudaCheck(cudaMemcpy(&hc, chk, sizeof hc, cudaMemcpyDeviceToHost));
    gcx_dfree(chk);
    return p->verdict ? 1 : tlc_verdict(&hc, L);
}

/* ============================================================== onebit ==== */

/* the means of the values >= 0 and < 0 from their sums (kind 1), NaN where a sum is not
 * finite (the encoder's error) */
static void onebit_means(float *pos, float *neg, const GpuSums *s, size_t n) {
    double cpos = s->c, cneg = (double)n - s->c;
    *pos = cpos > 0 ? (float)(s->a / cpos) : 0.0f;
    *neg = cneg > 0 ? (float)(s->b / cneg) : 0.0f;
    if (!isfinite(s->a) || !isfinite(s->b)) *pos = *neg = NAN;
}

static int64_t onebit_enc(uint8_t *pay, size_t cap, const float *x, size_t n, const CodecSide *side) {
    size_t nb = n / 8 + (n % 8 != 0);
    if (cap < 8 + nb) return -GC_ERR_NOSPACE;
    float pos, neg;
    if (side->local) {
        pos = side->local[0];
        neg = side->local[1];
    } else {
        GpuSums s = block_sums(x, n, 1);
        onebit_means(&pos, &neg, &s, n);
    }
    if (isnan(pos) || isnan(neg)) return -GC_ERR_PARAM;
    uint8_t hdr[8];
    put_f32(hdr, pos);
    put_f32(hdr + 4, neg);
    DenseJob j = dense_enc(DK_ONEBIT_ENC, pay, hdr, 8, side->repr, x, n, nb);
    j.a = pos, j.b = neg;
    dense_run(j);
    return (int64_t)(8 + nb);
}

static int onebit_dec(float *out, size_t n, float weight, int acc, const Pay *p, uint16_t flags) {
    size_t len = p->len;
    if (flags) return -GC_ERR_CORRUPT;
    size_t nb = n / 8 + (n % 8 != 0);
    if (len < 8 || len - 8 < nb) return -GC_ERR_TRUNCATED;
    if (len - 8 > nb) return -GC_ERR_OVERSIZED;
    uint32_t pb = get_u32(p->head), qb = get_u32(p->head + 4);
    if (pb > DENSE_FINITE_MAX_GPU) return -GC_ERR_CORRUPT;
    if (qb != 0 && (qb < 0x80000000u || qb > 0x80000000u + DENSE_FINITE_MAX_GPU)) return -GC_ERR_CORRUPT;
    if (n % 8 && (pay_tail(p, 8 + nb - 1) >> (n % 8))) return -GC_ERR_CORRUPT;
    if (n == 0) return 0;
    DenseJob j = dense_dec(DK_ONEBIT_DEC, out, p->d + 8, n, n, weight, acc);
    j.a = bits2f(pb), j.b = bits2f(qb);
    dense_run(j);
    return 0;
}

/* ============================================================ dispatch ==== */

int codec_cuda_available(void) { return 1; }

CodecCuda *codec_cuda_new(const CodecSpec *spec) {
    pool_setup();
    CodecCuda *g = (CodecCuda *)calloc(1, sizeof *g);
    if (!g) {
        fprintf(stderr, "error: out of memory at %s:%d\n", __FILE__, __LINE__);
        exit(1);
    }
    g->spec = *spec;
    g->cpu = codec_new(spec);
    if (spec->ops->id == CODEC_GCOMP) g->gp = gcx_gcomp_state_new();
    return g;
}

void codec_cuda_free(CodecCuda *g) {
    if (!g) return;
    if (g->gp) gcx_gcomp_state_free(g->gp);
    codec_free(g->cpu);
    free(g);
}

const CodecSpec *codec_cuda_spec(const CodecCuda *g) { return &g->spec; }

size_t codec_cuda_max_frame(const CodecCuda *g, size_t n) { return codec_max_frame(g->cpu, n); }

size_t codec_cuda_state_max(const CodecCuda *g) { return codec_state_max(g->cpu); }

int64_t codec_cuda_state_save(const CodecCuda *g, uint8_t *buf, size_t cap) {
    if (!g->spec.ops->state_save) return 0;
    if (g->gp) return gcx_gcomp_state_save(g, buf, cap);
    return -GC_ERR_STATE; /* a codec with CPU state and no GPU twin of it */
}

int codec_cuda_state_load(CodecCuda *g, const uint8_t *buf, size_t len) {
    if (!g->spec.ops->state_load) return len ? -GC_ERR_STATE : 0;
    if (g->gp) return gcx_gcomp_state_load(g, buf, len);
    return -GC_ERR_STATE;
}


/* ============================================================= ternsum ==== */
/* compress/ternsum.c: digits L + n of base B = 2n + 1, K per 64-bit word, one
 * thread per word; the same double arithmetic as the CPU's */

/* the digits of base B a 64-bit word holds, and B^r */
__host__ __device__ static int ts_digits(uint64_t B) {
    int K = 0;
    for (uint64_t p = 1; p <= UINT64_MAX / B; p *= B) K++;
    return K;
}

__host__ __device__ static uint64_t ts_pow(uint64_t B, size_t r) {
    uint64_t p = 1;
    for (size_t j = 0; j < r; j++) p *= B;
    return p;
}

__device__ __forceinline__ float ts_value_d(int L, float s, int n) {
    return __double2float_rn(__ddiv_rn(__dmul_rn((double)L, (double)s), (double)n));
}


/* *bad = 1 when a word is not below B^K (the last word: B^r for its r values) */
__global__ void k_ternsum_check(uint32_t *bad, const uint64_t *words, size_t nw, uint64_t full, uint64_t last) {
    uint32_t b = 0;
    GRID_STRIDE(w, nw) b |= words[w] >= (w + 1 < nw ? full : last);
    if (__any_sync(0xFFFFFFFFu, b != 0) && (threadIdx.x & 31) == 0) atomicOr(bad, 1u);
}


static int64_t ternsum_enc(Codec *c, uint8_t *pay, size_t cap, const float *x, size_t n, const CodecSide *side) {
    int tn = (int)c->spec.v[0];
    uint64_t B = 2 * (uint64_t)tn + 1;
    int K = ts_digits(B);
    size_t nw = (n + (size_t)K - 1) / (size_t)K;
    if (cap < 8 + 8 * nw) return -GC_ERR_NOSPACE;
    float s = side->local ? side->local[1] : bits2f(gcx_absmax_bits(x, n)); /* max|x| */
    if (isnan(s) || f2bits(s) > DENSE_FINITE_MAX_GPU) return -GC_ERR_PARAM;
    if (side->scalar) {
        s = *side->scalar;
        if (!(s >= 0.0f) || isinf(s)) return -GC_ERR_PARAM;
        s = s == 0.0f ? 0.0f : s;
    }
    uint8_t hdr[8];
    put_f32(hdr, s);
    put_u16(hdr + 4, (uint16_t)tn);
    put_u16(hdr + 6, 0);
    DenseJob j = dense_enc(DK_TERNSUM_ENC, pay, hdr, 8, side->repr, x, n, nw);
    j.a = s, j.tn = tn, j.B = B, j.K = K;
    dense_run(j);
    return (int64_t)(8 + 8 * nw);
}

static int ternsum_dec(const Codec *c, float *out, size_t n, float weight, int acc, const Pay *p, uint16_t flags) {
    size_t len = p->len;
    int tn = (int)c->spec.v[0];
    uint64_t B = 2 * (uint64_t)tn + 1;
    int K = ts_digits(B);
    size_t nw = (n + (size_t)K - 1) / (size_t)K;
    if (flags) return -GC_ERR_CORRUPT;
    if (len < 8 || (len - 8) / 8 < nw) return -GC_ERR_TRUNCATED;
    if (len - 8 > 8 * nw) return -GC_ERR_OVERSIZED;
    uint32_t sb = get_u32(p->head);
    if (sb > DENSE_FINITE_MAX_GPU) return -GC_ERR_CORRUPT;
    if (get_u16(p->head + 4) != tn || get_u16(p->head + 6) != 0) return -GC_ERR_CORRUPT;
    if (nw == 0) return 0;
    const uint64_t *d = (const uint64_t *)(p->d + 8);
    uint32_t h = p->chk1; /* the probe's check, where it made it */
    if (!p->checked) {
        uint32_t *bad = (uint32_t *)gcx_dmalloc(4);
        cudaCheck(cudaMemsetAsync(bad, 0, 4, 0));
        k_ternsum_check<<<gcx_grid(nw), TPB>>>(bad, d, nw, ts_pow(B, (size_t)K),
                                               ts_pow(B, n - (nw - 1) * (size_t)K));
        cudaCheckLast();
        cudaCheck(cudaMemcpy(&h, bad, 4, cudaMemcpyDeviceToHost));
        gcx_dfree(bad);
    }
    int rc = 0;
    if (h) rc = -GC_ERR_CORRUPT;
    else {
        DenseJob j = dense_dec(DK_TERNSUM_DEC, out, p->d + 8, n, nw, weight, acc);
        j.a = bits2f(sb), j.tn = tn, j.B = B, j.K = K;
        dense_run(j);
    }
    return rc;
}

/* ---- the dense jobs' loops (DenseJob above) ---- */

/* TernGrad's quantizer of a job (DK_TERN_ENC, DK_STOCH3_ENC) */
__device__ __forceinline__ TgQ tg_of(const DenseJob &j) {
    TgQ q;
    q.clip = j.a, q.s = j.b, q.seed = j.seed;
    return q;
}

/* item i of job j (the loop's body): a value, or a byte or word of the body and its values */
__device__ __forceinline__ void d_dense_item(const DenseJob &j, size_t i) {
    const float *x = (const float *)j.src;
    float *out = (float *)j.dst, *repr = j.repr;
    uint8_t *body = j.dst + j.hb;
    size_t n = (size_t)j.n;
    switch (j.kind) {
    case DK_FP16_ENC: {
        uint16_t h = d_half_from_float(x[i]);
        ((uint16_t *)body)[i] = h;
        if (repr) repr[i] = d_half_to_float(h);
        break;
    }
    case DK_FP16_DEC: store_out(out, i, d_half_to_float(((const uint16_t *)j.src)[i]), j.weight, j.acc); break;
    case DK_INT8_ENC: {
        int8_t v = d_int8_code(x[i], j.a);
        ((int8_t *)body)[i] = v;
        if (repr) repr[i] = __fmul_rn((float)v, j.a);
        break;
    }
    case DK_INT8_DEC: store_out(out, i, __fmul_rn((float)((const int8_t *)j.src)[i], j.a), j.weight, j.acc); break;
    case DK_TERN_ENC: { /* byte i: values 4i .. 4i+3 (LSB first), unused codes 0 */
        TgQ q = tg_of(j);
        uint32_t b = 0;
        for (size_t k = 0; k < 4 && 4 * i + k < n; k++) {
            uint32_t code = d_tg_code(x[4 * i + k], 4 * i + k, q);
            b |= code << (2 * k);
            if (repr) repr[4 * i + k] = d_tg_value(code, q.s);
        }
        body[i] = (uint8_t)b;
        break;
    }
    case DK_TERN_DEC:
        store_out(out, i, d_tg_value((uint32_t)(j.src[i >> 2] >> (2 * (i & 3))) & 3u, j.a), j.weight, j.acc);
        break;
    case DK_STOCH3_ENC: { /* byte i: values i, L+i, 2L+i, 3L+i, 4L+i, the first most significant; padding
                           * digits (index >= n) 0 (3LC 3.2) */
        TgQ q = tg_of(j);
        uint32_t b = 0;
        for (size_t k = 0; k < 5; k++) {
            size_t v = k * (size_t)j.L + i;
            uint32_t d = 0;
            if (v < n) {
                d = d_stoch3_digit(x[v], v, q);
                if (repr) repr[v] = __fmul_rn((float)((int32_t)d - 1), q.s);
            }
            b = 3 * b + d;
        }
        body[i] = (uint8_t)b;
        break;
    }
    case DK_B3_DEC: d_b3_out(out, j.src[i], i, n, (size_t)j.L, j.a, j.weight, j.acc); break;
    case DK_ONEBIT_ENC: { /* byte i: bits of values 8i .. 8i+7, bit k = [x >= 0] (-0 included) */
        uint32_t b = 0;
        for (size_t k = 0; k < 8 && 8 * i + k < n; k++) {
            uint32_t bit = x[8 * i + k] >= 0.0f;
            b |= bit << k;
            if (repr) repr[8 * i + k] = bit ? j.a : j.b;
        }
        body[i] = (uint8_t)b;
        break;
    }
    case DK_ONEBIT_DEC: store_out(out, i, (j.src[i >> 3] >> (i & 7)) & 1 ? j.a : j.b, j.weight, j.acc); break;
    case DK_TERNSUM_ENC: { /* word i: values iK .. iK+K-1, the first the least significant digit */
        size_t lo = i * (size_t)j.K, hi = lo + (size_t)j.K < n ? lo + (size_t)j.K : n;
        uint64_t word = 0;
        for (size_t v = hi; v-- > lo;) {
            int L = 0;
            if (j.a > 0.0f) {
                double r = rint(__ddiv_rn(__dmul_rn((double)x[v], (double)j.tn), (double)j.a));
                L = r > j.tn ? j.tn : r < -j.tn ? -j.tn : (int)r;
            }
            word = word * j.B + (uint64_t)(L + j.tn);
            if (repr) repr[v] = ts_value_d(L, j.a, j.tn);
        }
        for (int b = 0; b < 8; b++) body[8 * i + (size_t)b] = (uint8_t)(word >> (8 * b));
        break;
    }
    case DK_TERNSUM_DEC: {
        uint64_t word = ((const uint64_t *)j.src)[i];
        size_t lo = i * (size_t)j.K, hi = lo + (size_t)j.K < n ? lo + (size_t)j.K : n;
        for (size_t v = lo; v < hi; v++) {
            store_out(out, v, ts_value_d((int)(word % j.B) - j.tn, j.a, j.tn), j.weight, j.acc);
            word /= j.B;
        }
        break;
    }
    }
}

/* job j's block b of nb: the header (block 0) and its share of the items */
__device__ __forceinline__ void d_dense_blocks(const DenseJob &j, unsigned b, unsigned nb) {
    if (b == 0 && threadIdx.x == 0)
#pragma unroll
        for (unsigned k = 0; k < 8; k++) /* constant indices: the argument is not copied to local memory */
            if (k < j.hb) j.dst[k] = j.hdr[k];
    for (size_t i = (size_t)b * blockDim.x + threadIdx.x; i < j.m; i += (size_t)nb * blockDim.x) d_dense_item(j, i);
}

__global__ void k_dense_one(DenseJob j) { d_dense_blocks(j, blockIdx.x, gridDim.x); }

/* CODEC_BATCH jobs: job q takes blocks first[q] .. first[q + 1] - 1 */
typedef struct {
    DenseJob j[CODEC_BATCH];
    uint32_t first[CODEC_BATCH + 1];
} DenseTab;
__global__ void k_dense_batch(DenseTab a) {
    unsigned q = 0;
    while (blockIdx.x >= a.first[q + 1]) q++;
    d_dense_blocks(a.j[q], blockIdx.x - a.first[q], a.first[q + 1] - a.first[q]);
}

/* the blocks a job's loop takes (one for a header alone) */
static unsigned dense_blocks(const DenseJob &j) { return j.m ? gcx_grid(j.m) : 1; }

static void dense_launch(const DenseJob &j) {
    if (j.m == 0 && j.hb == 0) return;
    k_dense_one<<<dense_blocks(j), TPB>>>(j);
    cudaCheckLast();
}

/* jobs[k], CODEC_BATCH a launch, each job's blocks after the previous one's */
static void dense_launch_batch(const DenseJob *jobs, size_t k) {
    launch_tables<DenseTab>(k, [&](size_t i) { return jobs[i]; }, [](DenseTab &a, unsigned m) {
        unsigned blocks = 0;
        for (unsigned q = 0; q <= CODEC_BATCH; q++) {
            a.first[q] = blocks;
            if (q < m) blocks += dense_blocks(a.j[q]);
        }
        k_dense_batch<<<blocks, TPB>>>(a);
    });
}

/* the codec's payload into pay (device, >= max_payload(n) bytes), at most cap bytes */
static int64_t encode_payload(CodecCuda *g, uint8_t *pay, size_t cap, uint16_t *flags, const float *x, size_t n,
                              const CodecSide *side) {
    *flags = 0;
    switch (g->spec.ops->id) {
    case CODEC_FP32: return fp32_enc(pay, cap, x, n, side);
    case CODEC_FP16: return fp16_enc(pay, cap, x, n, side);
    case CODEC_INT8: return int8_enc(pay, cap, x, n, side);
    case CODEC_TERNGRAD: return terngrad_enc(g->cpu, pay, cap, x, n, side);
    case CODEC_STOCH3: return stoch3_enc(g->cpu, pay, cap, x, n, side);
    case CODEC_3LC: return tlc_enc(g->cpu, pay, cap, x, n, side);
    case CODEC_ONEBIT: return onebit_enc(pay, cap, x, n, side);
    case CODEC_TOPK:
    case CODEC_DGC:
    case CODEC_SBC: return gcx_sparse_encode(g, pay, cap, flags, x, n, side);
    case CODEC_GCOMP: return gcx_gcomp_encode(g, pay, cap, flags, x, n, side);
    case CODEC_TERNSUM: return ternsum_enc(g->cpu, pay, cap, x, n, side);
    }
    return -GC_ERR_CODEC;
}

/* the alignment the encoders' kernels need of the payload: fp16 stores halves, the dense
 * codecs' other loops bytes; the others store 16- and 32-bit words (and atomicOr 32-bit
 * words) */
static uintptr_t enc_align(const CodecCuda *g) {
    switch (g->spec.ops->id) {
    case CODEC_FP16: return 2;
    case CODEC_INT8:
    case CODEC_TERNGRAD:
    case CODEC_STOCH3:
    case CODEC_ONEBIT:
    case CODEC_TERNSUM: return 1;
    default: return 4;
    }
}

/* codec_encode_cuda_payload without its final wait: the payload is complete in stream order.
 * take: the batch whose flush runs the dense codecs' loops of a payload encoded where it
 * lies (dense_run), or NULL */
static int64_t encode_staged(CodecCuda *g, uint8_t *payload, size_t cap, uint16_t *flags, const float *x, size_t n,
                             const CodecSide *side, CodecBatch *take) {
    static const CodecSide none = CodecSide();
    if (!side) side = &none;
    if (n > CODEC_MAX_COUNT) return -GC_ERR_PARAM;
    size_t maxp = g->spec.ops->max_payload(g->cpu, n);
    /* straight into payload only when it has room for max_payload bytes and is aligned as
     * the codec's kernels store into it (enc_align): a GPU refuses a misaligned store */
    if (cap >= maxp && ((uintptr_t)payload & (enc_align(g) - 1)) == 0)
        return taken_by(take, [&] { return encode_payload(g, payload, cap, flags, x, n, side); });
    /* the kernels may use up to max_payload bytes, aligned: stage, then copy what fits */
    uint8_t *tmp = (uint8_t *)gcx_dmalloc(maxp);
    int64_t len = encode_payload(g, tmp, cap, flags, x, n, side);
    if (len > 0) cudaCheck(cudaMemcpyAsync(payload, tmp, (size_t)len, cudaMemcpyDeviceToDevice, 0));
    gcx_dfree(tmp);
    return len;
}

int64_t codec_encode_cuda_payload(CodecCuda *g, uint8_t *payload, size_t cap, uint16_t *flags, const float *x,
                                  size_t n, const CodecSide *side) {
    int64_t len = encode_staged(g, payload, cap, flags, x, n, side, NULL);
    cudaCheck(cudaStreamSynchronize(0));
    return len;
}

/* the common header (compress/codec.c codec_encode) of a payload of len bytes */
static void put_header(uint8_t *h, const CodecCuda *g, uint16_t flags, size_t n, int64_t len, uint32_t crc) {
    frame_header_write(h, (uint8_t)g->spec.ops->id, flags, (uint32_t)n, (uint32_t)len, crc);
}

int64_t codec_encode_cuda(CodecCuda *g, uint8_t *frame, size_t cap, const float *x, size_t n,
                          const CodecSide *side) {
    static const CodecSide none = CodecSide();
    if (!side) side = &none;
    if (n > CODEC_MAX_COUNT) return -GC_ERR_PARAM;
    if (cap < CODEC_HEADER_SIZE) return -GC_ERR_NOSPACE;
    size_t maxp = g->spec.ops->max_payload(g->cpu, n);
    uint8_t *pay = (uint8_t *)gcx_dmalloc(maxp);
    uint16_t flags = 0;
    int64_t len = encode_payload(g, pay, cap - CODEC_HEADER_SIZE, &flags, x, n, side);
    if (len >= 0 && (uint64_t)len > 0xFFFFFFFFu) len = -GC_ERR_NOSPACE;
    if (len > 0) cudaCheck(cudaMemcpy(frame + CODEC_HEADER_SIZE, pay, (size_t)len, cudaMemcpyDeviceToHost));
    gcx_dfree(pay);
    cudaCheck(cudaStreamSynchronize(0));
    if (len < 0) return len;
    put_header(frame, g, flags, n, len, crc32c(0, frame + CODEC_HEADER_SIZE, (size_t)len));
    return CODEC_HEADER_SIZE + len;
}

/* ---- CRC-32C on the device (common/crc32c.h's pieces) ----
 * Each thread takes CRC_PIECE bytes and computes their register from 0; each block folds
 * its TPB registers (a power of 2) pairwise with the zero-byte operators Z_(CRC_PIECE 2^k),
 * a tree of log2(TPB) levels, into the register of its CRC_SPAN bytes (d_crc_span); one
 * thread per buffer (k_put_batch, k_probe_batch, k_probe_listed) or the host (crc32c_cuda)
 * folds the blocks'. The bytes are taken as if preceded by zeros up to a whole number of
 * spans, which leaves the register from 0 unchanged, so every piece and every block has
 * its full length. One launch covers up to CODEC_BATCH buffers (a bundle's frames), each
 * its own blocks (k_crc_spans), or the frames a device walk listed in up to LIST_GROUPS
 * bundles (k_crc_listed) */
#define CRC_PIECE 1024
#define CRC_SPAN ((size_t)CRC_PIECE * TPB)
#define CRC_LEVELS 10 /* log2(TPB), and more */
typedef struct {
    uint32_t z[CRC_LEVELS][32]; /* Z_(CRC_PIECE 2^k), those with 2^k < TPB */
} CrcOps;
static_assert((1u << CRC_LEVELS) >= TPB, "CrcOps holds every level of the block's tree");

/* The buffers of one launch, passed as its argument (copied at the launch: no upload, no
 * wait, and the host's table is free at once): buffer i is p[i][len[i]], its spans the
 * blocks first[i] .. first[i + 1] - 1, whose registers go to part[] at the same indices */
typedef struct {
    const uint8_t *p[CODEC_BATCH];
    uint64_t len[CODEC_BATCH];
    uint32_t first[CODEC_BATCH + 1];
    unsigned k;
} CrcTab;

__device__ __forceinline__ uint32_t d_apply_op(const uint32_t *op, uint32_t s) {
    uint32_t r = 0;
    for (int i = 0; i < 32; i++)
        if ((s >> i) & 1u) r ^= op[i];
    return r;
}

/* *out = the register from 0 of span blk (of nb) of the buffer p[len] behind its padding
 * zeros, by the whole block. Each thread's piece is read a 32-bit word at a time where it
 * is 4-byte aligned (a byte at a time before and after) and each word goes through the
 * register in one step of slice-by-4 (tab[k][b]: byte b followed by k zero bytes): four
 * independent lookups instead of four dependent ones, and a quarter of the loads */
__device__ void d_crc_span(uint32_t *out, const uint8_t *p, size_t len, size_t nb, size_t blk, const CrcOps &ops) {
    __shared__ uint32_t tab[4][256];
    __shared__ uint32_t reg[TPB];
    for (uint32_t i = threadIdx.x; i < 256; i += TPB) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1u)));
        tab[0][i] = c;
    }
    __syncthreads();
    for (int k = 1; k < 4; k++) {
        for (uint32_t i = threadIdx.x; i < 256; i += TPB) tab[k][i] = (tab[k - 1][i] >> 8) ^ tab[0][tab[k - 1][i] & 0xFFu];
        __syncthreads();
    }
    size_t pad = nb * CRC_SPAN - len;
    size_t v0 = (blk * TPB + threadIdx.x) * CRC_PIECE, v1 = v0 + CRC_PIECE;
    size_t lo = (v0 > pad ? v0 : pad) - pad, hi = v1 > pad ? v1 - pad : 0; /* the piece's bytes of p */
    const uint8_t *q = p + lo, *e = p + (hi > lo ? hi : lo);
    uint32_t r = 0;
    while (q < e && ((uintptr_t)q & 3u)) r = (r >> 8) ^ tab[0][(r ^ *q++) & 0xFFu];
    for (; e - q >= 4; q += 4) {
        r ^= *(const uint32_t *)q; /* little-endian: the first byte in the low bits */
        r = tab[3][r & 0xFFu] ^ tab[2][(r >> 8) & 0xFFu] ^ tab[1][(r >> 16) & 0xFFu] ^ tab[0][r >> 24];
    }
    while (q < e) r = (r >> 8) ^ tab[0][(r ^ *q++) & 0xFFu];
    reg[threadIdx.x] = r;
    __syncthreads();
    for (int k = 0; (1u << k) < TPB; k++) {
        unsigned step = 1u << k;
        if ((threadIdx.x & (2 * step - 1)) == 0)
            reg[threadIdx.x] = d_apply_op(ops.z[k], reg[threadIdx.x]) ^ reg[threadIdx.x + step];
        __syncthreads();
    }
    if (threadIdx.x == 0) *out = reg[0];
}

/* part[b] = the register from 0 of block b's span of its buffer (d_crc_span) */
__global__ void k_crc_spans(uint32_t *part, CrcTab a, CrcOps ops) {
    const uint8_t *p = NULL; /* this block's buffer, found with constant indices into the argument */
    size_t len = 0, nb = 1, blk = 0;
#pragma unroll
    for (unsigned i = 0; i < CODEC_BATCH; i++)
        if (i < a.k && blockIdx.x >= a.first[i] && blockIdx.x < a.first[i + 1]) {
            p = a.p[i], len = a.len[i], nb = a.first[i + 1] - a.first[i], blk = blockIdx.x - a.first[i];
        }
    d_crc_span(part + blockIdx.x, p, len, nb, blk, ops);
}

static CrcOps crc_ops;
typedef struct {
    uint32_t op[32];
} Op32;
static Op32 crc_span_op; /* Z_(CRC_SPAN): moves a register past one block's span */
static void crc_ops_init(void) {
    for (int k = 0; (1u << k) < TPB && k < CRC_LEVELS; k++) crc32c_zeros_op(crc_ops.z[k], (uint64_t)CRC_PIECE << k);
    crc32c_zeros_op(crc_span_op.op, CRC_SPAN);
}
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

/* the spans of a buffer of len bytes */
__host__ __device__ static inline size_t crc_blocks(uint64_t len) {
    return len ? (size_t)((len - 1) / CRC_SPAN + 1) : 0;
}

/* the registers of the spans of the k <= CODEC_BATCH buffers p[i][len[i]] (device), in
 * stream order (no wait): buffer i's are at part + first[i], first[i + 1] - first[i] of
 * them (first[k] in all). NULL when there are none. gcx_dfree it after its last use */
static uint32_t *crc_parts(const uint8_t *const *p, const uint64_t *len, size_t k, uint32_t *first) {
    pthread_once(&crc_once, crc_ops_init);
    CrcTab a;
    memset(&a, 0, sizeof a);
    a.k = (unsigned)k;
    size_t nb = 0;
    for (size_t i = 0; i < k; i++) {
        a.p[i] = p[i];
        a.len[i] = len[i];
        first[i] = a.first[i] = (uint32_t)nb;
        nb += crc_blocks(len[i]);
        if (nb > 0x7FFFFFFFu) {
            fprintf(stderr, "error: a device CRC of %zu spans in one launch (at most 2^31 - 1)\n", nb);
            exit(1);
        }
    }
    first[k] = a.first[k] = (uint32_t)nb;
    if (nb == 0) return NULL;
    uint32_t *d = (uint32_t *)gcx_dmalloc(nb * sizeof(uint32_t));
    k_crc_spans<<<(unsigned)nb, TPB>>>(d, a, crc_ops);
    cudaCheckLast();
    return d;
}

/* the register from 0 of the bytes whose spans' registers are part[nb] */
__device__ uint32_t d_crc_reg(const uint32_t *part, size_t nb, const Op32 &span) {
    uint32_t r = 0;
    for (size_t b = 0; b < nb; b++) r = d_apply_op(span.op, r) ^ part[b];
    return r;
}
/* their CRC-32C; z: the register ~0 moved past all of them (crc32c_zeros(~0, len)), as
 * crc32c_cuda folds on the host */
__device__ uint32_t d_crc_fold(const uint32_t *part, size_t nb, const Op32 &span, uint32_t z) {
    return ~(z ^ d_crc_reg(part, nb, span));
}

uint32_t crc32c_cuda(uint32_t crc, const void *data, size_t len) {
    if (len == 0) return crc;
    const uint8_t *p = (const uint8_t *)data;
    uint64_t l = len;
    uint32_t first[2];
    uint32_t *d = crc_parts(&p, &l, 1, first), *h = (uint32_t *)mallocCheck(first[1] * sizeof(uint32_t));
    cudaCheck(cudaMemcpy(h, d, first[1] * sizeof(uint32_t), cudaMemcpyDeviceToHost));
    gcx_dfree(d);
    uint32_t r = 0; /* the register from 0 of the padded bytes, which is that of the bytes */
    for (size_t b = 0; b < first[1]; b++) r = crc32c_apply_op(crc_span_op.op, r) ^ h[b];
    free(h);
    return ~(crc32c_zeros(~crc, len) ^ r);
}

/* ---- batches (codec_cuda.h CodecBatch): the per-frame work the host needs no answer of,
 * launched for up to CODEC_BATCH frames at once, the tables as the kernels' arguments ---- */
#define HDR_CRC_AT 16 /* a frame header's CRC: bytes 16..19, little-endian */
#define PUT_MAX 20    /* a put's bytes: a frame's header, an entry's */

/* a small write: b[n] at dst; with crc, a frame's header (b[0..15]) whose CRC, of the
 * payload behind it (crc_len bytes), goes to dst[16..19] */
typedef struct {
    uint8_t *dst;
    uint64_t crc_len;
    uint8_t b[PUT_MAX];
    uint8_t n, crc;
} PutJob;

/* fp32's frames without a kernel each: n values from src to dst (encode: x into the
 * payload, and to repr; decode: the payload to out, or out += weight * it, acc 1); any
 * alignment of the payload. acc 2: n bytes from src to dst (a staged payload into its frame) */
typedef struct {
    const uint8_t *src;
    uint8_t *dst;
    float *repr;
    uint32_t n;
    float weight;
    uint8_t acc;
} CopyJob;

/* a staged frame (codec_batch_stage): its payload in a scratch piece (fp32: still x), its
 * length known, or pending in bk until codec_batch_sizes (3lc's: a TlcBack; topk's, dgc's
 * and sbc's: their checks or length, SPARSE_BACK bytes, and sp; the one-block frames among
 * them launched there) */
typedef struct {
    CodecCuda *g;
    const float *x;
    float *repr;
    size_t n;
    uint8_t *pay;
    void *bk;
    SparseStage sp;
    TlcJob tlc; /* 3lc's one-block frame (tlc.bk set), launched at codec_batch_sizes */
    int gp;     /* a gcomp frame whose read-back (a GpBack in bk) codec_batch_sizes has not taken */
    int ran;    /* the launch of its one-block frame (3lc's, or sp.job) made */
    int64_t len;
    uint16_t flags;
    int placed;
} StageJob;

struct CodecBatch {
    PutJob *put;
    size_t nput, cput;
    CopyJob *cp;
    size_t ncp, ccp;
    StageJob *st;
    size_t nst, cst;
    uint8_t *back;  /* page-locked: the staged frames' read-backs (codec_batch_sizes), DMA'd */
    size_t cback;   /* its bytes */
    SparseDec *dec; /* the sparsifiers' probed payloads decoded by one block each */
    size_t ndec, cdec;
    TlcDec *tdec;   /* 3lc's, the same */
    size_t ntdec, ctdec;
    DenseJob *dj;   /* the dense codecs' loops (dense_run), run first at the flush */
    size_t ndj, cdj;
    int *dverd;     /* device: the deferred frames' verdicts (codec_batch_verdicts) */
    int *hverd;     /* page-locked: the same, copied back by the flushes */
    CodecCuda **vdec; /* each one's decoder, where the frame carries a table to settle (else NULL) */
    size_t nverd, cverd, sent; /* sent: how many the flushes have copied back */
};

CodecBatch *codec_batch_new(void) { return (CodecBatch *)callocCheck(1, sizeof(CodecBatch)); }
/* the staged frames' scratch returned, after the copies that read them, in stream order;
 * top first */
static void stages_drop(CodecBatch *b) {
    for (size_t i = b->nst; i-- > 0;) {
        if (b->st[i].gp) gcx_gcomp_staged_drop(b->st[i].g); /* never read back: its plan not committed */
        gcx_sparse_drop_staged(&b->st[i].sp); /* a larger topk, dgc or sbc frame's selection, begun only */
        gcx_dfree(b->st[i].sp.job.idx); /* a one-block sbc frame's, where codec_batch_sizes did not run */
        gcx_dfree(b->st[i].bk);
        gcx_dfree(b->st[i].pay);
    }
    b->nst = 0;
}

void codec_batch_free(CodecBatch *b) {
    if (!b) return;
    stages_drop(b); /* a batch freed unflushed: its staged frames' scratch returned */
    free(b->put);
    free(b->cp);
    free(b->st);
    free(b->dec);
    free(b->tdec);
    free(b->dj);
    if (b->back) cudaCheck(cudaFreeHost(b->back));
    if (b->dverd) cudaCheck(cudaFree(b->dverd));
    if (b->hverd) cudaCheck(cudaFreeHost(b->hverd));
    free(b->vdec);
    free(b);
}

/* room for k deferred verdicts; growing waits for the device (the copies pending into the
 * old page-locked array land first) */
void codec_batch_reserve_deferred(CodecBatch *b, size_t k) {
    if (k <= b->cverd) return;
    size_t c = b->cverd ? 2 * b->cverd : 256;
    while (c < k) c *= 2;
    int *d, *h;
    cudaCheck(cudaMalloc((void **)&d, c * sizeof(int)));
    cudaCheck(cudaMallocHost((void **)&h, c * sizeof(int)));
    if (b->nverd) cudaCheck(cudaMemcpy(d, b->dverd, b->nverd * sizeof(int), cudaMemcpyDeviceToDevice));
    cudaCheck(cudaStreamSynchronize(0));
    if (b->sent) memcpy(h, b->hverd, b->sent * sizeof(int));
    if (b->dverd) cudaCheck(cudaFree(b->dverd));
    if (b->hverd) cudaCheck(cudaFreeHost(b->hverd));
    b->dverd = d;
    b->hverd = h;
    b->vdec = (CodecCuda **)reallocCheck(b->vdec, c * sizeof *b->vdec);
    b->cverd = c;
}

size_t codec_batch_deferred(const CodecBatch *b) { return b->nverd; }
int codec_cuda_defers(int id) { return id == CODEC_GCOMP || id == CODEC_TOPK || id == CODEC_SBC || id == CODEC_3LC; }

void codec_batch_verdicts(CodecBatch *b, int *rc) {
    if (b->sent != b->nverd) {
        fprintf(stderr, "internal error: codec_batch_verdicts before the flush at %s:%d\n", __FILE__, __LINE__);
        exit(1);
    }
    if (b->nverd) memcpy(rc, b->hverd, b->nverd * sizeof(int));
    for (size_t i = 0; i < b->nverd; i++) /* a carried table, the decoder's if its frame passed */
        if (b->vdec[i]) gcx_gcomp_settle(b->vdec[i], rc[i] == 0);
    b->nverd = b->sent = 0;
}

/* a new zeroed slot at the end of one of the batch's queues (arr: n used of cap) */
template <class T> static T *batch_slot(T *&arr, size_t &n, size_t &cap) {
    if (n == cap) {
        cap = cap ? 2 * cap : 64;
        arr = (T *)reallocCheck(arr, cap * sizeof *arr);
    }
    T *j = &arr[n++];
    memset(j, 0, sizeof *j);
    return j;
}

static PutJob *add_put(CodecBatch *b) { return batch_slot(b->put, b->nput, b->cput); }

static void dense_run(const DenseJob &j) {
    if (j.m == 0 && j.hb == 0) return;
    if (t_take) *batch_slot(t_take->dj, t_take->ndj, t_take->cdj) = j;
    else dense_launch(j);
}

static void add_copy(CodecBatch *b, const CopyJob *c) { *batch_slot(b->cp, b->ncp, b->ccp) = *c; }

/* fp32's frame copied at the flush: x[n] into the payload at pay (any alignment), and to repr
 * unless it is NULL or x */
static void add_fp32(CodecBatch *b, const float *x, size_t n, uint8_t *pay, float *repr) {
    CopyJob c = {(const uint8_t *)x, pay, repr != x ? repr : NULL, (uint32_t)n, 0.0f, 0};
    add_copy(b, &c);
}

/* frame's header put at the flush, with the CRC of the len payload bytes behind it */
static void add_header(CodecBatch *b, const CodecCuda *g, uint8_t *frame, uint16_t flags, size_t n, int64_t len) {
    PutJob *j = add_put(b);
    j->dst = frame;
    put_header(j->b, g, flags, n, len, 0);
    j->n = HDR_CRC_AT;
    j->crc = 1;
    j->crc_len = (uint64_t)len;
}

void codec_batch_put(CodecBatch *b, void *dst, const void *src, size_t n) {
    if (n > PUT_MAX) {
        fprintf(stderr, "error: codec_batch_put of %zu bytes (at most %d)\n", n, PUT_MAX);
        exit(1);
    }
    PutJob *j = add_put(b);
    j->dst = (uint8_t *)dst;
    j->n = (uint8_t)n;
    memcpy(j->b, src, n);
}

typedef struct {
    uint8_t *dst[CODEC_BATCH];
    uint32_t first[CODEC_BATCH], nb[CODEC_BATCH], z[CODEC_BATCH];
    uint8_t b[CODEC_BATCH][PUT_MAX];
    uint8_t n[CODEC_BATCH], crc[CODEC_BATCH];
    unsigned k;
} PutTab;

/* thread i: put i, its CRC folded from part[first[i] .. first[i] + nb[i]) */
__global__ void k_put_batch(PutTab a, const uint32_t *part, Op32 span) {
    unsigned i = threadIdx.x;
    if (i >= a.k) return;
    uint8_t *d = a.dst[i];
    for (unsigned j = 0; j < a.n[i]; j++) d[j] = a.b[i][j];
    if (!a.crc[i]) return;
    uint32_t c = d_crc_fold(part + a.first[i], a.nb[i], span, a.z[i]);
    for (int j = 0; j < 4; j++) d[HDR_CRC_AT + j] = (uint8_t)(c >> (8 * j));
}

/* puts j[0..k), k <= CODEC_BATCH: their CRCs' spans, then the writes */
static void put_chunk(const PutJob *j, size_t k) {
    const uint8_t *p[CODEC_BATCH];
    uint64_t len[CODEC_BATCH];
    uint32_t first[CODEC_BATCH + 1];
    size_t m = 0; /* the puts with a CRC */
    PutTab a;
    memset(&a, 0, sizeof a);
    for (size_t i = 0; i < k; i++)
        if (j[i].crc) p[m] = j[i].dst + CODEC_HEADER_SIZE, len[m++] = j[i].crc_len;
    uint32_t *part = crc_parts(p, len, m, first);
    m = 0;
    for (size_t i = 0; i < k; i++) {
        a.dst[i] = j[i].dst;
        memcpy(a.b[i], j[i].b, PUT_MAX);
        a.n[i] = j[i].n;
        a.crc[i] = j[i].crc;
        if (j[i].crc) {
            a.first[i] = first[m];
            a.nb[i] = first[m + 1] - first[m];
            a.z[i] = crc32c_zeros(~0u, j[i].crc_len);
            m++;
        }
    }
    a.k = (unsigned)k;
    k_put_batch<<<1, CODEC_BATCH>>>(a, part, crc_span_op);
    cudaCheckLast();
    if (part) gcx_dfree(part);
}

typedef struct {
    const uint8_t *src[CODEC_BATCH];
    uint8_t *dst[CODEC_BATCH];
    float *repr[CODEC_BATCH];
    uint32_t n[CODEC_BATCH];
    float weight[CODEC_BATCH];
    uint32_t first[CODEC_BATCH + 1]; /* copy i's blocks: first[i] .. first[i + 1] - 1 */
    uint8_t acc[CODEC_BATCH];
    unsigned k;
} CopyTab;

__device__ __forceinline__ uint32_t d_ld32(const uint8_t *p) {
    if (((uintptr_t)p & 3u) == 0) return *(const uint32_t *)p;
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
__device__ __forceinline__ void d_st32(uint8_t *p, uint32_t v) {
    if (((uintptr_t)p & 3u) == 0) {
        *(uint32_t *)p = v;
        return;
    }
    for (int k = 0; k < 4; k++) p[k] = (uint8_t)(v >> (8 * k));
}

/* each block works on one copy, found with constant indices into the argument; the bits
 * move unchanged (NaNs' included), a sum rounds as store_out */
__global__ void k_copy_batch(CopyTab a) {
    const uint8_t *src = NULL;
    uint8_t *dst = NULL;
    float *repr = NULL, w = 0.0f;
    size_t n = 0, nb = 1, blk = 0;
    int acc = 0;
#pragma unroll
    for (unsigned i = 0; i < CODEC_BATCH; i++)
        if (i < a.k && blockIdx.x >= a.first[i] && blockIdx.x < a.first[i + 1]) {
            src = a.src[i], dst = a.dst[i], repr = a.repr[i], n = a.n[i], w = a.weight[i], acc = a.acc[i];
            nb = a.first[i + 1] - a.first[i], blk = blockIdx.x - a.first[i];
        }
    if (acc == 2) { /* bytes */
        for (size_t j = blk * blockDim.x + threadIdx.x; j < n; j += nb * blockDim.x) dst[j] = src[j];
        return;
    }
    for (size_t j = blk * blockDim.x + threadIdx.x; j < n; j += nb * blockDim.x) {
        uint32_t u = d_ld32(src + 4 * j);
        if (acc) store_out((float *)dst, j, __uint_as_float(u), w, 1);
        else d_st32(dst + 4 * j, u);
        if (repr) d_st32((uint8_t *)(repr + j), u);
    }
}

static void copy_chunk(const CopyJob *j, size_t k) {
    CopyTab a;
    memset(&a, 0, sizeof a);
    size_t nb = 0;
    for (size_t i = 0; i < k; i++) {
        a.src[i] = j[i].src;
        a.dst[i] = j[i].dst;
        a.repr[i] = j[i].repr;
        a.n[i] = j[i].n;
        a.weight[i] = j[i].weight;
        a.acc[i] = j[i].acc;
        a.first[i] = (uint32_t)nb;
        size_t want = ((size_t)j[i].n + 4 * TPB - 1) / (4 * TPB); /* about 4 values a thread */
        nb += want < 1 ? 1 : want > MAX_BLOCKS ? MAX_BLOCKS : want;
    }
    a.first[k] = (uint32_t)nb;
    a.k = (unsigned)k;
    k_copy_batch<<<(unsigned)nb, TPB>>>(a);
    cudaCheckLast();
}

void codec_batch_flush(CodecBatch *b) {
    dense_launch_batch(b->dj, b->ndj); /* before the copies and CRCs that read what they write */
    b->ndj = 0;
    for (size_t i = 0; i < b->nst; i++) { /* fp32 staged and not placed: its repr all the same */
        StageJob *j = &b->st[i];
        if (!j->placed && j->x && j->repr && j->repr != j->x && j->len > 0)
            add_fp32(b, j->x, j->n, (uint8_t *)j->repr, NULL);
    }
    for (size_t i = 0; i < b->ncp; i += CODEC_BATCH)
        copy_chunk(b->cp + i, b->ncp - i < CODEC_BATCH ? b->ncp - i : CODEC_BATCH);
    for (size_t i = 0; i < b->nput; i += CODEC_BATCH)
        put_chunk(b->put + i, b->nput - i < CODEC_BATCH ? b->nput - i : CODEC_BATCH);
    gcx_sparse_launch_decs(b->dec, b->ndec);
    tlc_launch_decs(b->tdec, b->ntdec);
    b->ndec = b->ntdec = 0;
    if (b->nverd > b->sent) { /* read at codec_batch_verdicts, after the caller's wait */
        cudaCheck(cudaMemcpyAsync(b->hverd + b->sent, b->dverd + b->sent, (b->nverd - b->sent) * sizeof(int),
                                  cudaMemcpyDeviceToHost, 0));
        b->sent = b->nverd;
    }
    stages_drop(b);
    b->ncp = b->nput = 0;
}

/* the frame's payload (fp32's queued in b, every other codec's kernels launched), its
 * header and CRC queued in b */
int64_t codec_encode_cuda_batched(CodecBatch *b, CodecCuda *g, uint8_t *frame, size_t cap, const float *x, size_t n,
                                  const CodecSide *side) {
    static const CodecSide none = CodecSide();
    if (!side) side = &none;
    if (n > CODEC_MAX_COUNT) return -GC_ERR_PARAM;
    if (cap < CODEC_HEADER_SIZE) return -GC_ERR_NOSPACE;
    uint16_t flags = 0;
    int64_t len;
    if (g->spec.ops->id == CODEC_FP32) { /* fp32_enc's bytes, copied at the flush */
        len = cap - CODEC_HEADER_SIZE < 4 * n || 4 * (uint64_t)n > 0xFFFFFFFFu ? -GC_ERR_NOSPACE : (int64_t)(4 * n);
        if (len > 0) add_fp32(b, x, n, frame + CODEC_HEADER_SIZE, side->repr);
    } else {
        len = encode_staged(g, frame + CODEC_HEADER_SIZE, cap - CODEC_HEADER_SIZE, &flags, x, n, side, b);
    }
    if (len >= 0 && (uint64_t)len > 0xFFFFFFFFu) len = -GC_ERR_NOSPACE;
    if (len < 0) return len;
    add_header(b, g, frame, flags, n, len);
    return CODEC_HEADER_SIZE + len;
}

void codec_batch_stage(CodecBatch *b, CodecCuda *g, const float *x, size_t n, const CodecSide *side) {
    static const CodecSide none = CodecSide();
    if (!side) side = &none;
    StageJob *j = batch_slot(b->st, b->nst, b->cst);
    j->g = g;
    j->n = n;
    if (n > CODEC_MAX_COUNT) {
        j->len = -GC_ERR_PARAM;
        return;
    }
    size_t maxp = g->spec.ops->max_payload(g->cpu, n), L = b3_len(n);
    if (g->spec.ops->id == CODEC_FP32) { /* nothing to do before its place is known */
        j->x = x;
        j->repr = side->repr;
        j->len = 4 * (uint64_t)n;
    } else if (g->spec.ops->id == CODEC_3LC) { /* its length read at codec_batch_sizes */
        j->pay = (uint8_t *)gcx_dmalloc(maxp);
        j->bk = gcx_dmalloc(sizeof(TlcBack));
        TlcJob t = {(TlcBack *)j->bk, j->pay, side->repr, x, (uint64_t)n, (uint64_t)L, (float)g->spec.v[0]};
        if (L <= TLC_ONE_L) j->tlc = t; /* launched with the pass's others at codec_batch_sizes */
        else tlc_enc_launch(t.bk, t.pay, t.repr, x, n, t.s);
    } else if (g->spec.ops->id == CODEC_TOPK || g->spec.ops->id == CODEC_DGC || g->spec.ops->id == CODEC_SBC) {
        int64_t rc = gcx_sparse_encode_staged(g, &j->pay, x, n, side, &j->sp);
        if (rc) j->len = rc; /* an error, or a larger sbc frame's length */
        else j->bk = j->sp.bk; /* its checks or length read there */
    } else if (g->spec.ops->id == CODEC_GCOMP) { /* with a table: its read-back taken at codec_batch_sizes */
        j->pay = (uint8_t *)gcx_dmalloc(maxp);
        j->len = gcx_gcomp_encode_staged(g, j->pay, maxp, &j->bk, &j->flags, x, n, side);
        j->gp = j->bk != NULL;
    } else { /* the codec's own waits; the dense codecs' loops at the flush (the payload's scratch is
              * held until then) */
        j->pay = (uint8_t *)gcx_dmalloc(maxp);
        j->len = taken_by(b, [&] { return encode_payload(g, j->pay, maxp, &j->flags, x, n, side); });
    }
    if (j->len > 0xFFFFFFFFll) j->len = -GC_ERR_NOSPACE;
}

/* the pending lengths: the encoders' read-backs (3lc's and the sparsifiers' up to BACK_SLOT
 * bytes, gcomp's gcx_gcomp_back_size) gathered into one buffer (by value, up to CODEC_BATCH
 * a launch), a slot each, then one copy */
#define BACK_SLOT 32
static_assert(sizeof(TlcBack) <= BACK_SLOT && SPARSE_BACK <= BACK_SLOT, "a read-back fits its slot");
typedef struct {
    const uint8_t *src[CODEC_BATCH];
    uint32_t size[CODEC_BATCH];
    uint64_t at[CODEC_BATCH]; /* its slot's offset in dst */
    unsigned k;
} BackTab;
__global__ void k_gather_backs(uint8_t *dst, BackTab a) {
    unsigned i = threadIdx.x;
    if (i < a.k)
        for (uint32_t c = 0; c < a.size[i]; c++) dst[a.at[i] + c] = a.src[i][c];
}
static uint32_t back_size_of(int id) {
    size_t b = id == CODEC_3LC ? sizeof(TlcBack) : id == CODEC_GCOMP ? gcx_gcomp_back_size() : SPARSE_BACK;
    return (uint32_t)((b + 7) / 8 * 8);
}
static uint32_t back_size(const StageJob *j) { return back_size_of(j->g->spec.ops->id); }
/* the page-locked read-back buffer at least bytes long (growing it waits for the whole device) */
static void back_fit(CodecBatch *b, size_t bytes) {
    if (b->cback >= bytes) return;
    if (b->back) cudaCheck(cudaFreeHost(b->back));
    b->cback = bytes < 512 * BACK_SLOT ? 1024 * BACK_SLOT : 2 * bytes;
    cudaCheck(cudaMallocHost((void **)&b->back, b->cback));
}
void codec_batch_reserve(CodecBatch *b, const int *ids, size_t k) {
    size_t bytes = 0;
    for (size_t i = 0; i < k; i++) bytes += back_size_of(ids[i]);
    back_fit(b, bytes);
}

void codec_batch_sizes(CodecBatch *b, int64_t *lens) {
    size_t np = 0, nj = 0, nl = 0;
    SparseStage *later[b->nst + 1]; /* the larger topk, dgc and sbc frames: their counts read at once */
    for (size_t i = 0; i < b->nst; i++) {
        np += b->st[i].bk != NULL;
        if (b->st[i].sp.later) later[nl++] = &b->st[i].sp;
    }
    if (nl) gcx_sparse_finish_staged(later, nl);
    for (size_t i = 0; i < b->nst; i++) { /* sbc's larger frames: their lengths known now */
        StageJob *j = &b->st[i];
        if (!j->sp.len_later) continue;
        j->sp.len_later = 0;
        j->len = j->sp.len > 0xFFFFFFFFll ? -GC_ERR_NOSPACE : j->sp.len;
    }
    size_t nt = 0;
    SparseOne *jobs[np + 1]; /* the one-block frames, launched together, once */
    TlcJob *tjobs[np + 1];
    for (size_t i = 0; i < b->nst; i++) {
        StageJob *j = &b->st[i];
        if (j->ran) continue;
        if (j->tlc.bk) tjobs[nt++] = &j->tlc;
        else if (j->bk && j->sp.one) jobs[nj++] = &j->sp.job;
        j->ran = 1;
    }
    if (nt) tlc_launch_ones(tjobs, nt);
    if (nj) gcx_sparse_launch_ones(jobs, nj);
    if (np) {
        size_t total = 0;
        for (size_t i = 0; i < b->nst; i++)
            if (b->st[i].bk) total += back_size(&b->st[i]);
        back_fit(b, total);
        uint8_t *d = (uint8_t *)gcx_dmalloc(total), *h = b->back;
        BackTab a;
        memset(&a, 0, sizeof a);
        size_t at = 0;
        for (size_t i = 0; i <= b->nst; i++) {
            if (a.k == CODEC_BATCH || (i == b->nst && a.k)) {
                k_gather_backs<<<1, CODEC_BATCH>>>(d, a);
                cudaCheckLast();
                a.k = 0;
            }
            if (i < b->nst && b->st[i].bk) {
                a.size[a.k] = back_size(&b->st[i]);
                a.at[a.k] = at;
                at += a.size[a.k];
                a.src[a.k++] = (const uint8_t *)b->st[i].bk;
            }
        }
        cudaCheck(cudaMemcpy(h, d, total, cudaMemcpyDeviceToHost)); /* the staged frames' one wait */
        gcx_dfree(d);
        const uint8_t *hb = h;
        for (StageJob *j = b->st; j < b->st + b->nst; j++) {
            if (!j->bk) continue;
            if (j->g->spec.ops->id == CODEC_3LC) {
                TlcBack t;
                memcpy(&t, hb, sizeof t);
                j->len = tlc_back_len(&t, j->g->spec.ops->max_payload(j->g->cpu, j->n));
            } else if (j->g->spec.ops->id == CODEC_GCOMP) {
                if (j->gp) j->len = gcx_gcomp_staged_len(j->g, j->n, hb, &j->flags); /* once */
                j->gp = 0;
            } else {
                j->len = gcx_sparse_staged_len(j->g, j->n, hb, &j->sp);
            }
            if (j->len > 0xFFFFFFFFll) j->len = -GC_ERR_NOSPACE;
            hb += back_size(j);
        }
    }
    for (size_t i = 0; i < b->nst; i++) lens[i] = b->st[i].len < 0 ? b->st[i].len : CODEC_HEADER_SIZE + b->st[i].len;
}

void codec_batch_place(CodecBatch *b, size_t i, uint8_t *frame) {
    StageJob *j = &b->st[i];
    j->placed = 1;
    if (j->len < 0) {
        fprintf(stderr, "internal error: codec_batch_place of a frame that failed (%lld)\n", (long long)j->len);
        exit(1);
    }
    if (j->len > 0 && j->x) {
        add_fp32(b, j->x, j->n, frame + CODEC_HEADER_SIZE, j->repr);
    } else if (j->len > 0) { /* the staged payload's bytes */
        CopyJob c = {j->pay, frame + CODEC_HEADER_SIZE, NULL, (uint32_t)j->len, 0.0f, 2};
        add_copy(b, &c);
    }
    add_header(b, j->g, frame, j->flags, j->n, j->len);
}

int64_t codec_encode_cuda_dev(CodecCuda *g, uint8_t *frame, size_t cap, const float *x, size_t n,
                              const CodecSide *side) {
    CodecBatch b;
    memset(&b, 0, sizeof b);
    int64_t len = codec_encode_cuda_batched(&b, g, frame, cap, x, n, side);
    codec_batch_flush(&b);
    free(b.put);
    free(b.cp);
    free(b.dj);
    return len;
}

/* What the host reads of a device frame of len bytes (a CodecProbe): its first
 * min(len, 132) bytes (the header, the payload's first PAY_HEAD), the last min(len - 20, 8)
 * bytes after the header, right-aligned as Pay.tail, the CRC register from 0 of those
 * len - 20 bytes (the payload, once the header says payload_len = len - 20, which every
 * valid header does; probe_check makes it their CRC with their length), and for a payload
 * small enough the check its decoder would wait for (d_probe_check): checked the codec's id
 * (0: none), chk1 and chk2 its results (3lc: TlcCheck's bad and total; topk, dgc, sbc: the
 * return code of the decoder's device-side checks; 0 where unused, as pad) */
typedef struct {
    uint8_t hb[CODEC_HEADER_SIZE + PAY_HEAD];
    uint8_t tail[8];
    uint32_t crc;
    uint32_t checked, chk1, chk2, pad;
} Probe;
static_assert(sizeof(Probe) == sizeof(CodecProbe), "a CodecProbe holds a Probe");

typedef struct {
    const uint8_t *frame[CODEC_BATCH];
    uint64_t len[CODEC_BATCH];
    uint32_t first[CODEC_BATCH], nb[CODEC_BATCH];
    unsigned k;
} ProbeTab;

/* one thread: the edges of frame[len] and its payload's CRC register from its spans'
 * registers part[nb] into *pr */
__device__ void d_probe_edges(Probe *pr, const uint8_t *frame, size_t len, const uint32_t *part, size_t nb,
                              const Op32 &span) {
    size_t k = len < sizeof pr->hb ? len : sizeof pr->hb;
    size_t pl = len > CODEC_HEADER_SIZE ? len - CODEC_HEADER_SIZE : 0, e = pl < 8 ? pl : 8;
    for (size_t i = 0; i < sizeof pr->hb; i++) pr->hb[i] = i < k ? frame[i] : 0;
    for (size_t i = 0; i < 8; i++) pr->tail[i] = i >= 8 - e ? frame[len - (8 - i)] : 0;
    pr->crc = d_crc_reg(part, nb, span);
}

/* thread i: frame i's edges and CRC register into pr[i] */
__global__ void k_probe_batch(Probe *pr, ProbeTab a, const uint32_t *part, Op32 span) {
    unsigned f = threadIdx.x;
    if (f < a.k) d_probe_edges(&pr[f], a.frame[f], (size_t)a.len[f], part + a.first[f], a.nb[f], span);
}

/* an int8, terngrad, stoch3 or ternsum payload of up to 64 bytes a thread of the block
 * checked as its decoder checks it on the device (k_bad_bytes, k_ternsum_check, over the
 * bytes or words a payload of the right length has): the codec's id, and in *bad whether
 * a byte or word fails; or 0 where it checked nothing (another codec, a larger payload, or
 * one whose header the decoder refuses before this check: a ternsum frame whose level
 * count is 0 or whose length does not fit its count). Every thread of the block calls it;
 * flag: shared */
static __device__ int d_dense_check(const uint8_t *frame, size_t len, uint32_t *flag, uint32_t *bad) {
    if (len < CODEC_HEADER_SIZE + 4) return 0;
    int id = frame[5];
    const uint8_t *p = frame + CODEC_HEADER_SIZE;
    size_t pl = len - CODEC_HEADER_SIZE, n = d_get_u32(frame + 8);
    int what = id == CODEC_INT8 ? BAD_I8 : id == CODEC_TERNGRAD ? BAD_TERN : id == CODEC_STOCH3 ? BAD_B3 : 0;
    if ((!what && id != CODEC_TERNSUM) || pl > (size_t)blockDim.x * 64) return 0;
    uint64_t B = 0, full = 1, last = 1;
    size_t nw = 0;
    if (id == CODEC_TERNSUM) { /* ternsum_dec's K digits of base B a word */
        if (pl < 8 || (B = 2 * (uint64_t)(p[4] | (uint32_t)p[5] << 8) + 1) < 3) return 0;
        int K = ts_digits(B);
        nw = (n + (size_t)K - 1) / (size_t)K;
        if (pl != 8 + 8 * nw) return 0;
        full = ts_pow(B, (size_t)K);
        last = ts_pow(B, n - (nw ? nw - 1 : 0) * (size_t)K);
    }
    if (threadIdx.x == 0) *flag = 0;
    __syncthreads();
    uint32_t b = 0;
    if (id == CODEC_TERNSUM)
        for (size_t w = threadIdx.x; w < nw; w += blockDim.x) {
            uint64_t v = 0;
            for (int k = 7; k >= 0; k--) v = v << 8 | p[8 + 8 * w + (size_t)k];
            b |= v >= (w + 1 < nw ? full : last);
        }
    else
        for (size_t j = 4 + threadIdx.x; j < pl; j += blockDim.x) b |= d_bad_byte(p[j], what);
    if (b) atomicOr(flag, 1u);
    __syncthreads();
    *bad = *flag;
    return id;
}

/* frame[len]'s payload checked by the block as its decoder would check it on the device,
 * where the decoder waits for that check and the payload is one the probe takes (the host
 * uses the result once it has found the header valid: probe_check, the decoders): a 3lc
 * zero-run stream as k_tlc_one_dec checks it (the frame's count from its header) where its
 * header says 3lc and it is one k_tlc_one_dec takes; a topk, dgc or sbc payload as its
 * decoder (compress/sparse_check.cuh); an int8, terngrad, stoch3 or ternsum payload
 * (d_dense_check). sh, sh64: [TLC_ONE_T] shared */
__device__ void d_probe_check(Probe *pr, const uint8_t *frame, size_t len, uint32_t *sh, uint64_t *sh64) {
    size_t at = CODEC_HEADER_SIZE + 4;              /* the stream, after the scale */
    size_t n = len > at ? d_get_u32(frame + 8) : 0; /* the header's count */
    size_t L = n / 5 + (n % 5 != 0);                /* b3_len */
    uint32_t id, chk1, chk2 = 0;
    if (len <= at || frame[5] != CODEC_3LC || L > TLC_ONE_L || len - at > TLC_ONE_L) {
        int rc = 0;
        id = (uint32_t)d_sparse_check(frame, len, sh64, &rc);
        uint32_t bad = 0;
        if (!id && (id = (uint32_t)d_dense_check(frame, len, sh, &bad))) rc = (int)bad;
        chk1 = (uint32_t)rc;
    } else {
        uint8_t zb[TLC_ONE_ITEMS];
        uint32_t pos;
        id = CODEC_3LC;
        chk1 = d_tlc_one_check(zb, &pos, &chk2, frame + at, len - at, n, L, sh);
    }
    if (threadIdx.x == 0) {
        pr->checked = id;
        pr->chk1 = chk1;
        pr->chk2 = chk2;
        pr->pad = 0;
    }
}

/* block f: frame f's check (d_probe_check) into pr[f] */
__global__ void __launch_bounds__(TLC_ONE_T) k_probe_checks(Probe *pr, ProbeTab a) {
    __shared__ uint32_t sh[TLC_ONE_T];
    __shared__ uint64_t sh64[TLC_ONE_T];
    d_probe_check(&pr[blockIdx.x], a.frame[blockIdx.x], (size_t)a.len[blockIdx.x], sh, sh64);
}

void codec_cuda_probe_frames(CodecProbe *out, const uint8_t *const *frames, const size_t *lens, size_t k) {
    if (k == 0) return;
    Probe *dp = (Probe *)gcx_dmalloc(k * sizeof(Probe));
    for (size_t at = 0; at < k; at += CODEC_BATCH) {
        size_t m = k - at < CODEC_BATCH ? k - at : CODEC_BATCH;
        const uint8_t *p[CODEC_BATCH];
        uint64_t pl[CODEC_BATCH];
        uint32_t first[CODEC_BATCH + 1];
        ProbeTab a;
        memset(&a, 0, sizeof a);
        for (size_t i = 0; i < m; i++) {
            size_t len = lens[at + i];
            pl[i] = len > CODEC_HEADER_SIZE ? len - CODEC_HEADER_SIZE : 0;
            p[i] = frames[at + i] + (pl[i] ? CODEC_HEADER_SIZE : 0);
            a.frame[i] = frames[at + i];
            a.len[i] = len;
        }
        uint32_t *part = crc_parts(p, pl, m, first);
        for (size_t i = 0; i < m; i++) {
            a.first[i] = first[i];
            a.nb[i] = first[i + 1] - first[i];
        }
        a.k = (unsigned)m;
        k_probe_batch<<<1, CODEC_BATCH>>>(dp + at, a, part, crc_span_op);
        cudaCheckLast();
        k_probe_checks<<<(unsigned)m, TLC_ONE_T>>>(dp + at, a);
        cudaCheckLast();
        if (part) gcx_dfree(part);
    }
    cudaCheck(cudaMemcpy(out, dp, k * sizeof(Probe), cudaMemcpyDeviceToHost)); /* the frames' one wait */
    gcx_dfree(dp);
}

/* codec_cuda_probe_listed's groups, up to LIST_GROUPS a launch, going as the kernels'
 * argument: group g's bytes at p[g], its spans base[g] .. base[g + 1] - 1 at most (its
 * frames' as k_listed_spans lays them out) */
#define LIST_GROUPS 32
typedef struct {
    const uint8_t *p[LIST_GROUPS];
    uint64_t base[LIST_GROUPS + 1];
    unsigned k;
} ListTab;
/* group g's bytes, found with constant indices into the argument */
__device__ __forceinline__ const uint8_t *d_list_bytes(const ListTab &a, size_t g) {
    const uint8_t *p = a.p[0];
#pragma unroll
    for (unsigned q = 1; q < LIST_GROUPS; q++)
        if (q == g) p = a.p[q];
    return p;
}

/* one thread a group: its frames' CRC spans, from base[g] on in order */
__global__ void k_listed_spans(CodecFrameRef *refs, const uint32_t *count, size_t per, ListTab a) {
    CodecFrameRef *r = refs + blockIdx.x * per;
    uint64_t at = a.base[blockIdx.x];
    for (uint32_t i = 0, c = count[blockIdx.x]; i < c; i++) {
        uint64_t pl = r[i].len > CODEC_HEADER_SIZE ? r[i].len - CODEC_HEADER_SIZE : 0;
        uint32_t nb = (uint32_t)crc_blocks(pl);
        r[i].first = (uint32_t)at;
        r[i].nb = nb;
        at += nb;
    }
}

/* block b: span b of the payload of the frame of its group whose spans hold it
 * (d_crc_span), nothing past the group's last one */
__global__ void k_crc_listed(uint32_t *part, const CodecFrameRef *refs, const uint32_t *count, size_t per, ListTab a,
                             CrcOps ops) {
    uint64_t b = blockIdx.x;
    unsigned g = 0; /* the group, found with constant indices into the argument */
#pragma unroll
    for (unsigned q = 1; q < LIST_GROUPS; q++)
        if (q < a.k && a.base[q] <= b) g = q;
    const CodecFrameRef *r = refs + g * per;
    uint32_t c = count[g], lo = 0;
    if (c == 0) return;
    uint32_t hi = c - 1;
    while (lo < hi) { /* the last frame whose spans begin at b or before */
        uint32_t mid = lo + (hi - lo + 1) / 2;
        if (r[mid].first <= b) lo = mid;
        else hi = mid - 1;
    }
    const CodecFrameRef f = r[lo];
    if (f.first > b || b - f.first >= f.nb) return;
    d_crc_span(part + b, d_list_bytes(a, g) + f.at + CODEC_HEADER_SIZE, (size_t)f.len - CODEC_HEADER_SIZE, f.nb,
               b - f.first, ops);
}

/* block f: frame f % per of group f / per, where there is one: its probe into pr[f] */
__global__ void __launch_bounds__(TLC_ONE_T)
    k_probe_listed(Probe *pr, const CodecFrameRef *refs, const uint32_t *count, size_t per, const uint32_t *part,
                   Op32 span, ListTab a) {
    __shared__ uint32_t sh[TLC_ONE_T];
    __shared__ uint64_t sh64[TLC_ONE_T];
    size_t f = blockIdx.x, g = f / per;
    if (f % per >= count[g]) return;
    const CodecFrameRef r = refs[f];
    const uint8_t *frame = d_list_bytes(a, g) + r.at;
    if (threadIdx.x == 0) d_probe_edges(&pr[f], frame, (size_t)r.len, part + r.first, r.nb, span);
    d_probe_check(&pr[f], frame, (size_t)r.len, sh, sh64);
}

void codec_cuda_probe_listed(CodecProbe *out, CodecFrameRef *refs, const uint32_t *count, size_t k, size_t per,
                             const uint8_t *const *gbase, const size_t *glen, void *extra_host, const void *extra_dev,
                             size_t extra_bytes) {
    pthread_once(&crc_once, crc_ops_init);
    Probe *dp = (Probe *)gcx_dmalloc(k * per * sizeof(Probe)); /* held past the wait, as the others below it */
    for (size_t c0 = 0; per && c0 < k; c0 += LIST_GROUPS) {
        size_t m = k - c0 < LIST_GROUPS ? k - c0 : LIST_GROUPS;
        ListTab a;
        memset(&a, 0, sizeof a);
        a.k = (unsigned)m;
        uint64_t nb = 0;
        for (size_t g = 0; g < m; g++) { /* disjoint frames in glen bytes: at most this many spans */
            a.p[g] = gbase[c0 + g];
            a.base[g] = nb;
            nb += crc_blocks(glen[c0 + g]) + per;
        }
        a.base[m] = nb;
        if (nb > 0x7FFFFFFFu || m * per > 0x7FFFFFFFu) {
            fprintf(stderr, "error: a device probe of %llu spans, %zu frames in one launch (at most 2^31 - 1)\n",
                    (unsigned long long)nb, m * per);
            exit(1);
        }
        uint32_t *part = (uint32_t *)gcx_dmalloc(nb * sizeof(uint32_t));
        CodecFrameRef *r = refs + c0 * per;
        k_listed_spans<<<(unsigned)m, 1>>>(r, count + c0, per, a);
        cudaCheckLast();
        k_crc_listed<<<(unsigned)nb, TPB>>>(part, r, count + c0, per, a, crc_ops);
        cudaCheckLast();
        k_probe_listed<<<(unsigned)(m * per), TLC_ONE_T>>>(dp + c0 * per, r, count + c0, per, part, crc_span_op, a);
        cudaCheckLast();
        gcx_dfree(part);
    }
    if (extra_bytes) cudaCheck(cudaMemcpyAsync(extra_host, extra_dev, extra_bytes, cudaMemcpyDeviceToHost, 0));
    if (k * per) cudaCheck(cudaMemcpyAsync(out, dp, k * per * sizeof(Probe), cudaMemcpyDeviceToHost, 0));
    cudaCheck(cudaStreamSynchronize(0)); /* the one wait for both */
    gcx_dfree(dp);
}

/* the payload decoded by the codec from pay (device); gcomp parses its headers on the
 * host: from host (a host frame, pay->len bytes, not uploaded) or a copy of them */
static int decode_payload(CodecCuda *g, float *out, size_t n, float weight, int acc, const Pay *pay,
                          const uint8_t *host, uint16_t flags) {
    int rc;
    switch (g->spec.ops->id) {
    case CODEC_FP32: rc = fp32_dec(out, n, weight, acc, pay, flags); break;
    case CODEC_FP16: rc = fp16_dec(out, n, weight, acc, pay, flags); break;
    case CODEC_INT8: rc = int8_dec(out, n, weight, acc, pay, flags); break;
    case CODEC_TERNGRAD: rc = terngrad_dec(out, n, weight, acc, pay, flags); break;
    case CODEC_STOCH3: rc = stoch3_dec(out, n, weight, acc, pay, flags); break;
    case CODEC_3LC: rc = tlc_dec(out, n, weight, acc, pay, flags); break;
    case CODEC_ONEBIT: rc = onebit_dec(out, n, weight, acc, pay, flags); break;
    case CODEC_TOPK:
    case CODEC_DGC:
    case CODEC_SBC: rc = gcx_sparse_decode(g, out, n, weight, acc, pay, flags); break;
    case CODEC_GCOMP: rc = gcx_gcomp_decode(g, out, n, weight, acc, pay, host, flags, NULL); break;
    case CODEC_TERNSUM: rc = ternsum_dec(g->cpu, out, n, weight, acc, pay, flags); break;
    default: rc = -GC_ERR_CODEC;
    }
    return rc; /* the output complete in stream order */
}


/* the alignment the decoders' kernels need of the payload: fp32 loads floats, fp16
 * halves, ternsum 64-bit words at offset 8; the others read bytes */
static uintptr_t pay_align(const CodecCuda *g) {
    switch (g->spec.ops->id) {
    case CODEC_FP32: return 4;
    case CODEC_FP16: return 2;
    case CODEC_TERNSUM: return 8;
    default: return 1;
    }
}

/* a host frame: the payload uploaded once for the device decoders (gcomp uploads it
 * itself, once its headers have passed) */
static int decode_frame(CodecCuda *g, float *out, size_t n, float weight, int acc, const uint8_t *frame,
                        size_t len) {
    FrameHeader h;
    int rc = frame_header_expect(&h, frame, len, (uint8_t)g->spec.ops->id, n);
    if (rc) return rc;
    const uint8_t *p = frame + CODEC_HEADER_SIZE;
    size_t pl = h.payload_len, e = pl < 8 ? pl : 8;
    if (crc32c(0, p, pl) != h.crc) return -GC_ERR_CHECKSUM;
    Pay pay;
    memset(&pay, 0, sizeof pay);
    pay.len = pl;
    memcpy(pay.head, p, pl < PAY_HEAD ? pl : PAY_HEAD);
    memcpy(pay.tail + 8 - e, p + pl - e, e);
    uint8_t *d = g->spec.ops->id == CODEC_GCOMP ? NULL : gcx_upload(p, pl);
    pay.d = d;
    rc = decode_payload(g, out, n, weight, acc, &pay, p, h.flags);
    if (d) gcx_dfree(d);
    return rc;
}

/* a device frame's header and CRC checked on the host with its probe, *pay describing its
 * payload (pay->d where it lies) and *flags the header's; 0 or the decoders' error */
static int probe_check(const CodecCuda *g, size_t n, const uint8_t *frame, size_t len, const CodecProbe *probe,
                       Pay *pay, uint16_t *flags) {
    Probe pr;
    memcpy(&pr, probe, sizeof pr);
    FrameHeader h;
    int rc = frame_header_expect(&h, pr.hb, len, (uint8_t)g->spec.ops->id, n);
    if (rc) return rc;
    size_t pl = len - CODEC_HEADER_SIZE;                 /* = h.payload_len */
    if (~(crc32c_zeros(~0u, pl) ^ pr.crc) != h.crc) return -GC_ERR_CHECKSUM; /* the CRC from its register */
    memset(pay, 0, sizeof *pay);
    pay->d = frame + CODEC_HEADER_SIZE;
    pay->len = pl;
    memcpy(pay->head, pr.hb + CODEC_HEADER_SIZE, pl < PAY_HEAD ? pl : PAY_HEAD);
    memcpy(pay->tail, pr.tail, 8);
    pay->checked = pr.checked == (uint32_t)g->spec.ops->id ? (int)pr.checked : 0;
    pay->chk1 = pr.chk1;
    pay->chk2 = pr.chk2;
    *flags = h.flags;
    return 0;
}

/* the payload pay (probe_check's) decoded where it lies, the dense codecs' loops queued in
 * take (when not NULL), or moved first when it is not aligned as the codec's kernels need
 * (pay_align), then decoded at once */
static int decode_probed(CodecCuda *g, float *out, size_t n, float weight, int acc, Pay pay, uint16_t flags,
                         CodecBatch *take) {
    uint8_t *moved = NULL;
    if ((uintptr_t)pay.d & (pay_align(g) - 1)) {
        moved = (uint8_t *)gcx_dmalloc(pay.len);
        if (pay.len) cudaCheck(cudaMemcpyAsync(moved, pay.d, pay.len, cudaMemcpyDeviceToDevice, 0));
        pay.d = moved;
    }
    int rc = taken_by(moved ? NULL : take, [&] { return decode_payload(g, out, n, weight, acc ? 1 : 0, &pay, NULL, flags); });
    if (moved) gcx_dfree(moved);
    return rc;
}

/* a device frame with its probe: the header and the CRC checked on the host, the payload
 * read in place (decode_probed) */
int codec_decode_cuda_dev_probed(CodecCuda *g, float *out, size_t n, float weight, int acc, const uint8_t *frame,
                                 size_t len, const CodecProbe *probe) {
    Pay pay;
    uint16_t flags = 0;
    int rc = probe_check(g, n, frame, len, probe, &pay, &flags);
    return rc ? rc : decode_probed(g, out, n, weight, acc, pay, flags, NULL);
}

/* fp32's copy or sum queued in b (read where it lies, any alignment), a sparsifier's
 * payload that its probe checked, of a tensor of up to 65,535 values, and a 3lc payload its
 * probe checked, of one block's size; every other frame decoded now */
int codec_decode_cuda_batched(CodecBatch *b, CodecCuda *g, float *out, size_t n, float weight, int acc,
                              const uint8_t *frame, size_t len, const CodecProbe *probe) {
    int id = g->spec.ops->id, sparse = id == CODEC_TOPK || id == CODEC_DGC || id == CODEC_SBC;
    Pay pay;
    uint16_t flags = 0;
    int rc = probe_check(g, n, frame, len, probe, &pay, &flags);
    if (rc) return rc;
    if (id == CODEC_FP32) {
        rc = fp32_check(n, pay.len, flags);
        if (rc || n == 0) return rc;
        CopyJob c = {pay.d, (uint8_t *)out, NULL, (uint32_t)n, weight, (uint8_t)(acc ? 1 : 0)};
        add_copy(b, &c);
        return 0;
    }
    if (id == CODEC_GCOMP) { /* its bytes read where they lie; its verdict deferred where it can be */
        codec_batch_reserve_deferred(b, b->nverd + 1);
        rc = gcx_gcomp_decode(g, out, n, weight, acc ? 1 : 0, &pay, NULL, flags, b->dverd + b->nverd);
        if (rc == 1 || rc == 2) b->vdec[b->nverd++] = rc == 2 ? g : NULL; /* 2: its table to settle */
        return rc > 0 ? 0 : rc;
    }
    SparseDec sj;
    TlcDec tj;
    rc = sparse ? gcx_sparse_decode_job(&sj, g, out, n, weight, acc ? 1 : 0, &pay, flags)
         : id == CODEC_3LC ? tlc_decode_job(&tj, out, n, weight, acc ? 1 : 0, &pay, flags)
                           : 0;
    if (rc < 0) return rc;
    if (rc == 0) { /* dense: at the flush; topk's, sbc's and 3lc's general decoders with their verdicts deferred */
        if (codec_cuda_defers(id)) {
            codec_batch_reserve_deferred(b, b->nverd + 1);
            pay.verdict = b->dverd + b->nverd;
        }
        rc = decode_probed(g, out, n, weight, acc, pay, flags, b);
        if (rc != 1) return rc;
        b->vdec[b->nverd++] = NULL;
        return 0;
    }
    if (sparse) *batch_slot(b->dec, b->ndec, b->cdec) = sj;
    else *batch_slot(b->tdec, b->ntdec, b->ctdec) = tj;
    return 0;
}

/* a device frame: probed (its header, CRC and edge bytes in one copy), then decoded where
 * it lies (moved when it is not aligned as the codec's kernels need, pay_align) */
static int decode_frame_dev(CodecCuda *g, float *out, size_t n, float weight, int acc, const uint8_t *frame,
                            size_t len) {
    CodecProbe pr;
    codec_cuda_probe_frames(&pr, &frame, &len, 1);
    return codec_decode_cuda_dev_probed(g, out, n, weight, acc, frame, len, &pr);
}

int codec_decode_cuda(CodecCuda *g, float *out, size_t n, const uint8_t *frame, size_t len) {
    return decode_frame(g, out, n, 1.0f, 0, frame, len);
}

int codec_decode_acc_cuda(CodecCuda *g, float *out, size_t n, float weight, const uint8_t *frame, size_t len) {
    return decode_frame(g, out, n, weight, 1, frame, len);
}

int codec_decode_cuda_dev(CodecCuda *g, float *out, size_t n, const uint8_t *frame, size_t len) {
    return decode_frame_dev(g, out, n, 1.0f, 0, frame, len);
}

int codec_decode_acc_cuda_dev(CodecCuda *g, float *out, size_t n, float weight, const uint8_t *frame, size_t len) {
    return decode_frame_dev(g, out, n, weight, 1, frame, len);
}

int codec_cuda_local_stats_of(const CodecCuda *g) {
    CodecId id = g->spec.ops->id;
    return id == CODEC_TERNGRAD || id == CODEC_STOCH3 || id == CODEC_TERNSUM || id == CODEC_INT8 || id == CODEC_ONEBIT;
}

float codec_local_scalar_cuda(CodecCuda *g, const float *x, size_t n) {
    CodecId id = g->spec.ops->id;
    if (id != CODEC_TERNGRAD && id != CODEC_STOCH3) return NAN;
    return tg_local_scalar(g->cpu, x, n);
}

void codec_local_stats_cuda(CodecCuda *const *g, const float *const *x, const size_t *n, size_t k, float *local) {
    uint8_t *kind = (uint8_t *)callocCheck(k ? k : 1, 1);
    GpuSums *sums = (GpuSums *)mallocCheck((k ? k : 1) * sizeof(GpuSums));
    for (size_t i = 0; i < k; i++) kind[i] = g[i]->spec.ops->id == CODEC_ONEBIT; /* onebit's kind 1 */
    sums_of(x, n, kind, k, sums);
    for (size_t i = 0; i < k; i++) {
        const GpuSums m = sums[i];
        CodecId id = g[i]->spec.ops->id;
        float clip = NAN, s = NAN;
        if (id == CODEC_TERNGRAD || id == CODEC_STOCH3) {
            if (tg_from_sums(&clip, &s, g[i]->cpu->spec.v[0], &m, n[i])) clip = s = NAN;
        } else if ((id == CODEC_TERNSUM || id == CODEC_INT8) && m.m <= DENSE_FINITE_MAX_GPU) {
            clip = s = bits2f(m.m);
        } else if (id == CODEC_ONEBIT) {
            onebit_means(&clip, &s, &m, n[i]);
        }
        local[2 * i] = clip;
        local[2 * i + 1] = s;
    }
    free(kind);
    free(sums);
}
