/* GPU path of gcomp (Li et al., SoCC 2024; CPU twin compress/gcomp.c, format
 * docs/FORMAT.md section 10), byte-identical frames.
 *
 * Encode, as the CPU's two passes (Section 6.1, 6.2), with one wait at the end:
 *   0. the host runs the table schedule of Section 4.4 (bootstrap from the first tensor,
 *      rebuild every K encodes from what was encoded since the last rebuild, carry the
 *      table when it changes: the CPU's rules and Huffman code builder, compress/huffman.c).
 *      Once a table is held the schedule needs nothing of this frame, so its code is known
 *      before pass 1; the bootstrap alone reads the frame's histogram first (a second wait);
 *   1. one thread block per chunk: the exponent histogram (shared-memory atomics,
 *      aggregated per warp with __match_any_sync), the sum of applied levels, the levels'
 *      counts, whether a zero/denormal has its sign bit set, invalid levels, and the
 *      exponent segment's bits (histogram times code lengths);
 *   2. one block lays out the chunk headers and segment offsets exactly as the CPU (a
 *      block scan of the chunks' sizes) and writes the headers, the table section and the
 *      total bits; it leaves the frame's histogram, length, flags and size breakdown for
 *      the host's one read;
 *   3. one block of 256 threads per chunk writes the three segments: each thread owns a
 *      contiguous run of the chunk's values, a block-wide exclusive scan of the per-thread
 *      bit counts gives each thread its bit position in every segment, and bits are ORed
 *      into the chunk's zeroed bytes 32 bits at a time (atomicOr of big-endian-ordered
 *      words, so threads that share a word at the edges of their runs never lose bits);
 *      then a copy to the payload. A frame refused on the device (a level above 3, too
 *      small a buffer) writes nothing: no payload byte, no repr.
 * Decode: the host parses and validates the block header, the table section
 * and the chunk headers (the CPU's checks in the CPU's order), builds the
 * lookup table (Section 4.5) and uploads it; one block per chunk decodes the
 * chunk's three segments with the CPU's checks (k_gp_dec: where the Huffman codes
 * start is known only by decoding them, so each thread's share of the exponent
 * segment is decoded from each of its possible entries, and the CPU's path is
 * followed through those tables), into a device scratch of n floats; the host
 * collects the per-chunk results
 * in chunk order, and only when the whole frame is valid are the values
 * copied (or added) to out and a carried table made the held one: a refused
 * frame leaves out and the state untouched, as on the CPU.
 * The encoder's and the decoder's tables are kept separately per CodecCuda,
 * as the CPU keeps them per Codec.
 */
#define GC_CODEC_CUDA_INTERNAL
extern "C" {
#include "common/errors.h"
#include "compress/codec.h"
#include "compress/gcomp.h"
#include "compress/gcomp_state.h"
#include "compress/huffman.h"
}
#include "compress/codec_cuda.h"

#include <stdlib.h>
#include <string.h>

#include <cub/cub.cuh>

#include "common/cuda_check.h"
#include "compress/sparse_check.cuh"

#define GP_THREADS 256
#define TPB 256

static void *host_alloc(size_t bytes) {
    void *p = malloc(bytes ? bytes : 1);
    if (!p) {
        fprintf(stderr, "error: out of memory allocating %zu bytes at %s:%d\n", bytes, __FILE__, __LINE__);
        exit(1);
    }
    return p;
}

__host__ __device__ static inline unsigned long long bytes_of(unsigned long long bits) { return (bits + 7) >> 3; }
static void put_u64(uint8_t *p, uint64_t v) {
    put_u32(p, (uint32_t)v);
    put_u32(p + 4, (uint32_t)(v >> 32));
}

/* ---------------------------------------------------------------- state */

typedef struct {
    int have;
    uint32_t id;
    HuffCode hc;
    uint16_t *lut; /* host [1 << ntheta] */
    int lut_n;
} GpTab;

typedef struct {
    GcompEnc enc;       /* encoder (compress/gcomp.c GcompState) */
    GcompParts parts;   /* the size breakdown of its last frame, bytes aside */
    int parts_ok;       /* whether its last encode wrote one */
    GcompTablePlan staged; /* a staged frame's table plan (staging set), committed at its read-back */
    int staging;
    /* decoder */
    GpTab cur, pend;   /* the table in use, and the one a frame carries until it has passed */
    uint8_t *dtabs;    /* device: room for two tables of n_theta up to dtabs_n (tab_bytes each) */
    int dtabs_n;
    uint8_t *dtab;     /* in dtabs: cur's lookup table, then its code lengths */
    uint8_t *dnext;    /* in dtabs: a frame's carried table (pend's), dtab's once it has passed */
    int pending;       /* a frame's table awaits its verdict (gcx_gcomp_settle) */
} GpState;

static void tab_free(GpTab *t) { free(t->lut); }

void *gcx_gcomp_state_new(void) {
    GpState *st = (GpState *)calloc(1, sizeof(GpState));
    if (!st) {
        fprintf(stderr, "error: out of memory at %s:%d\n", __FILE__, __LINE__);
        exit(1);
    }
    return st;
}

void gcx_gcomp_state_free(void *p) {
    GpState *st = (GpState *)p;
    if (!st) return;
    tab_free(&st->cur);
    tab_free(&st->pend);
    if (st->dtabs) cudaCheck(cudaFree(st->dtabs));
    free(st);
}

/* ---------------------------------------------------------------- encode */

/* what pass 1 finds in chunk k (GpScan), and what the encoder reads back at its end in
 * one copy (GpBack). flags: GP_NEG0 (an exponent-0 value has its sign bit set), GP_BAD
 * (a level above 3) */
#define GP_NEG0 1u
#define GP_BAD 2u
typedef struct {
    unsigned long long levsum;   /* applied levels (exponents 1..254) */
    unsigned long long ebits;    /* exponent-segment bits: pass 1's when the code is known, else k_gp_ebits' */
    unsigned long long level[4]; /* nonzero exponents by applied level (the size breakdown) */
    uint32_t z0, flags;          /* exponent-0 values; GP_NEG0 | GP_BAD */
} GpScan;

typedef struct {
    unsigned long long fh[HUFF_NSYM]; /* the frame's exponent histogram (the table schedule's) */
    unsigned long long off;           /* the payload's bytes */
    unsigned long long zeros, ebits, lbits, mbits, level[4]; /* the size breakdown (GcompParts) */
    uint32_t flags, nospace, err;     /* GP_NEG0 | GP_BAD over the chunks; off > cap; off > the scratch */
    uint32_t werr;                    /* the writer's bit counts disagree with the layout */
} GpBack;

/* the code's emitted words, code | length << 24 (HuffCode emit, emit_len), and the block
 * header with the table section when carried: kernel arguments, so no upload waits */
struct GpEmit {
    uint32_t e[HUFF_NSYM];
};
struct GpHead {
    uint8_t b[GCOMP_BLOCK_HDR + GCOMP_TABLE_MAX];
    uint32_t len;
};

/* bits of chunk k's exponent segment from its histogram h (shared), every thread of a
 * block of HUFF_NSYM (GP_THREADS) threads taking part; thread 0's result */
typedef cub::BlockReduce<unsigned long long, HUFF_NSYM> EbitsReduce;
__device__ __forceinline__ unsigned long long d_ebits(typename EbitsReduce::TempStorage &tmp, const uint32_t *h,
                                                      const GpEmit &emit) {
    int s = threadIdx.x;
    return EbitsReduce(tmp).Sum((unsigned long long)h[s] * (emit.e[s] >> 24));
}

/* pass 1, one block of GP_THREADS per chunk: the exponent histogram into chist[k] ([nch][256]),
 * and into cs[k] the applied level sum, the level counts, the exponent-0 count, the flags and,
 * when the code is known (known), the exponent-segment bits. x: [n]; lv: [n] or NULL */
__global__ void k_gp_scan(GpScan *cs, uint32_t *chist, const float *x, const uint8_t *lv, size_t n, size_t chunk,
                          GpEmit emit, int known) {
    __shared__ uint32_t h[HUFF_NSYM];
    __shared__ unsigned long long ls, lc[4];
    __shared__ uint32_t fl;
    __shared__ typename EbitsReduce::TempStorage tmp;
    const size_t k = blockIdx.x, lo = k * chunk, cnt = n - lo < chunk ? n - lo : chunk;
    for (int s = threadIdx.x; s < HUFF_NSYM; s += blockDim.x) h[s] = 0;
    if (threadIdx.x < 4) lc[threadIdx.x] = 0;
    if (threadIdx.x == 0) {
        ls = 0;
        fl = 0;
    }
    __syncthreads();
    unsigned long long lsum = 0, c0 = 0, c1 = 0, c2 = 0, c3 = 0;
    uint32_t f = 0;
    const int lane = threadIdx.x & 31;
    for (size_t base = 0; base < cnt; base += blockDim.x) { /* uniform trip count: whole warps match */
        size_t i = base + threadIdx.x;
        uint32_t e = 0x100u; /* no symbol */
        if (i < cnt) {
            uint32_t u = __float_as_uint(x[lo + i]);
            e = (u >> 23) & 0xFFu;
            if (e == 0 && (u >> 31)) f |= GP_NEG0;
            uint32_t L = 0;
            if (lv) {
                uint32_t l = lv[lo + i];
                if (l > 3) f |= GP_BAD;
                L = (e - 1u < 254u) ? l : 0u;
                lsum += L;
            }
            if (e) { /* registers, not an indexed array */
                c0 += L == 0;
                c1 += L == 1;
                c2 += L == 2;
                c3 += L == 3;
            }
        }
        uint32_t same = __match_any_sync(0xFFFFFFFFu, e);
        if (e < 0x100u && lane == __ffs(same) - 1) atomicAdd(&h[e], (uint32_t)__popc(same));
    }
    atomicAdd(&ls, lsum);
    if (c0) atomicAdd(&lc[0], c0);
    if (c1) atomicAdd(&lc[1], c1);
    if (c2) atomicAdd(&lc[2], c2);
    if (c3) atomicAdd(&lc[3], c3);
    if (f) atomicOr(&fl, f);
    __syncthreads();
    for (int s = threadIdx.x; s < HUFF_NSYM; s += blockDim.x) chist[k * HUFF_NSYM + s] = h[s];
    unsigned long long eb = known ? d_ebits(tmp, h, emit) : 0;
    if (threadIdx.x == 0) {
        GpScan r = {ls, eb, {lc[0], lc[1], lc[2], lc[3]}, h[0], fl};
        cs[k] = r;
    }
}

/* fh[s] = sum over chunks of chist[k][s]. One thread per symbol of a block */
__device__ __forceinline__ void d_hist_sum(unsigned long long *fh, const uint32_t *chist, size_t nch) {
    for (int s = threadIdx.x; s < HUFF_NSYM; s += blockDim.x) {
        unsigned long long v = 0;
        for (size_t k = 0; k < nch; k++) v += chist[k * HUFF_NSYM + s];
        fh[s] = v;
    }
}
__global__ void k_gp_hist_sum(unsigned long long *fh, const uint32_t *chist, size_t nch) { d_hist_sum(fh, chist, nch); }

/* a table built from this frame's histogram (the bootstrap): each chunk's exponent-segment
 * bits, one block of HUFF_NSYM threads per chunk */
__global__ void k_gp_ebits(GpScan *cs, const uint32_t *chist, GpEmit emit) {
    __shared__ typename EbitsReduce::TempStorage tmp;
    unsigned long long eb = d_ebits(tmp, chist + (size_t)blockIdx.x * HUFF_NSYM, emit);
    if (threadIdx.x == 0) cs[blockIdx.x].ebits = eb;
}

/* MSB-first bit writer over 32-bit words: bits go to stream position pos,
 * which is bit 7 - pos%8 of byte pos/8 of the buffer; a word is collected in
 * big-endian order and ORed into memory byte-swapped (little-endian words). */
struct BitOut {
    uint32_t *w;
    unsigned long long pos, cur;
    uint32_t acc;
};

__device__ __forceinline__ void bo_init(BitOut &b, uint32_t *w, unsigned long long pos) {
    b.w = w;
    b.pos = pos;
    b.cur = pos >> 5;
    b.acc = 0;
}

__device__ __forceinline__ void bo_flush(BitOut &b) {
    if (b.acc) atomicOr(&b.w[b.cur], __byte_perm(b.acc, 0, 0x0123));
    b.acc = 0;
}

/* append the nb (0..32) low bits of v, most significant first; v < 2^nb */
__device__ __forceinline__ void bo_put(BitOut &b, uint32_t v, int nb) {
    while (nb > 0) {
        unsigned long long W = b.pos >> 5;
        int room = 32 - (int)(b.pos & 31);
        int take = nb < room ? nb : room;
        uint32_t bits = v >> (nb - take); /* nb - take < 32 */
        if (take < 32) bits &= (1u << take) - 1u;
        if (W != b.cur) {
            bo_flush(b);
            b.cur = W;
        }
        b.acc |= bits << (room - take);
        b.pos += (unsigned)take;
        nb -= take;
    }
}

typedef struct {
    unsigned long long e, l, m;
} Bits3;

struct Bits3Sum {
    __device__ Bits3 operator()(const Bits3 &a, const Bits3 &b) const {
        Bits3 r = {a.e + b.e, a.l + b.l, a.m + b.m};
        return r;
    }
};

struct U64Sum {
    __device__ unsigned long long operator()(const unsigned long long &a, const unsigned long long &b) const {
        return a + b;
    }
};

/* per-chunk layout for the writer. bit positions are absolute in the buffer */
typedef struct {
    unsigned long long epos, lpos, mpos; /* first bit of each segment */
    unsigned long long ebits, lbits, mbits;
} GpWrite;

/* the layout, in one block of GP_THREADS: the CPU's (compress/gcomp.c) chunk headers and
 * segment offsets from the chunks' scans, written with the block header (head, and the
 * total bits) into buf; lay[k] for the writer; into bk the frame's histogram, its length and
 * whether it fits cap, its flags and size breakdown. buf: [max(room, hdr end) + 8] */
__global__ void k_gp_layout(GpWrite *lay, GpBack *bk, uint8_t *buf, const GpScan *cs, const uint32_t *chist,
                            size_t n, size_t chunk, size_t nch, size_t cap, size_t room, GpHead head) {
    typedef cub::BlockScan<unsigned long long, GP_THREADS> Scan;
    __shared__ typename Scan::TempStorage tmp;
    __shared__ unsigned long long sum[9]; /* zeros, ebits, lbits, mbits, level[4], off */
    __shared__ uint32_t fl;
    const int t = threadIdx.x;
    d_hist_sum(bk->fh, chist, nch);
    if (t < 9) sum[t] = 0;
    if (t == 0) fl = 0;
    __syncthreads();
    uint32_t f = 0;
    for (size_t k = t; k < nch; k += blockDim.x) f |= cs[k].flags;
    if (f) atomicOr(&fl, f);
    __syncthreads();
    const uint32_t zsign = (fl & GP_NEG0) != 0;
    unsigned long long at = head.len + nch * GCOMP_CHUNK_HDR, mine[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (size_t base = 0; base < nch; base += blockDim.x) {
        size_t k = base + t;
        unsigned long long size = 0, before, tile;
        GpScan c;
        uint64_t count = 0, nnz = 0, mbits = 0;
        if (k < nch) {
            c = cs[k];
            count = n - k * chunk < chunk ? n - k * chunk : chunk;
            nnz = count - c.z0;
            mbits = (uint64_t)GCOMP_MAN_BITS * nnz - GCOMP_LEVEL_SHIFT * c.levsum + (zsign ? c.z0 : 0);
            size = bytes_of(c.ebits) + bytes_of(2 * nnz) + bytes_of(mbits);
        }
        Scan(tmp).ExclusiveScan(size, before, 0ull, U64Sum(), tile);
        if (k < nch) {
            unsigned long long o = at + before;
            GpWrite w = {8ull * o, 8ull * (o + bytes_of(c.ebits)), 8ull * (o + bytes_of(c.ebits) + bytes_of(2 * nnz)),
                         c.ebits, 2 * nnz, mbits};
            lay[k] = w;
            uint8_t *q = buf + head.len + k * GCOMP_CHUNK_HDR;
            d_put_u32(q, (uint32_t)(k * chunk));
            d_put_u32(q + 4, (uint32_t)count);
            d_put_u32(q + 8, (uint32_t)(c.ebits + 2 * nnz + mbits));
            d_put_u32(q + 12, (uint32_t)c.ebits);
            d_put_u32(q + 16, (uint32_t)nnz);
            mine[0] += count - nnz;
            mine[1] += c.ebits;
            mine[2] += 2 * nnz;
            mine[3] += mbits;
            for (int l = 0; l < 4; l++) mine[4 + l] += c.level[l];
        }
        at += tile;
        __syncthreads(); /* tmp reused */
    }
    for (int i = 0; i < 8; i++)
        if (mine[i]) atomicAdd(&sum[i], mine[i]);
    __syncthreads();
    const unsigned long long totbits = sum[1] + sum[2] + sum[3];
    for (uint32_t i = t; i < head.len; i += blockDim.x) /* the total bits at 12..19 */
        buf[i] = i - 12u < 8u ? (uint8_t)(totbits >> (8 * (i - 12))) : head.b[i];
    if (t == 0) {
        bk->off = at;
        bk->zeros = sum[0];
        bk->ebits = sum[1];
        bk->lbits = sum[2];
        bk->mbits = sum[3];
        for (int l = 0; l < 4; l++) bk->level[l] = sum[4 + l];
        bk->flags = fl;
        bk->nospace = at > cap;
        bk->err = !bk->nospace && at > room; /* longer than max_payload */
        bk->werr = 0;
    }
}

/* whether the frame is written: its levels valid, its length within cap and the scratch
 * (all fixed before k_gp_write, so every thread of a block takes the same branch) */
__device__ __forceinline__ int d_gp_writes(const GpBack *bk) {
    return !(bk->flags & GP_BAD) && !bk->nospace && !bk->err;
}

/* what value u (level lv0 from the levels, 0..3) contributes: its exponent
 * code, level, mantissa (compress/gcomp.c gp_write_values) */
__device__ __forceinline__ void gp_value_bits(uint32_t *eb, uint32_t *lb, uint32_t *mb, uint32_t u, uint32_t lv0,
                                              const uint32_t *emit, uint32_t zsign) {
    uint32_t e = (u >> 23) & 0xFFu;
    uint32_t L = (e - 1u < 254u) ? lv0 : 0u;
    *eb = emit[e] >> 24;
    *lb = e != 0 ? 2u : 0u;
    *mb = e != 0 ? (uint32_t)(GCOMP_MAN_BITS - GCOMP_LEVEL_SHIFT * (int)L) : zsign;
}

/* bytes [b0, b1) of the 32-bit words w zeroed by a block: the words wholly inside by
 * stores, the edge words' own bytes by atomicAnd (another block may be ORing its bits into
 * the rest of such a word) */
__device__ __forceinline__ void d_zero_bytes(uint32_t *w, unsigned long long b0, unsigned long long b1) {
    for (unsigned long long i = ((b0 + 3) >> 2) + threadIdx.x; i < (b1 >> 2); i += blockDim.x) w[i] = 0;
    if (threadIdx.x != 0 || b1 <= b0) return;
    unsigned long long edge[2] = {b0 >> 2, (b1 - 1) >> 2};
    for (int j = 0; j < 2 && (j == 0 || edge[1] != edge[0]); j++) {
        uint32_t mask = 0;
        for (unsigned long long i = 4 * edge[j]; i < 4 * edge[j] + 4; i++)
            if (i >= b0 && i < b1) mask |= 0xFFu << (8 * (i & 3));
        if (mask != 0xFFFFFFFFu) atomicAnd(&w[edge[j]], ~mask);
    }
}

/* pass 2, one block of GP_THREADS per chunk, nothing written for a frame k_gp_layout
 * refused: the block zeroes its chunk's bytes of buf (its segments and their padding; the
 * neighbours' bytes of a shared word are theirs), then each thread ORs in the bits of its
 * run of values. repr: [n] or NULL */
__global__ void k_gp_write(uint32_t *buf32, GpBack *bk, float *repr, const float *x, const uint8_t *lv, size_t n,
                           size_t chunk, GpEmit emit_a, const GpWrite *lay) {
    typedef cub::BlockScan<Bits3, GP_THREADS> Scan;
    __shared__ typename Scan::TempStorage tmp;
    __shared__ uint32_t emit[HUFF_NSYM];
    if (!d_gp_writes(bk)) return;
    const uint32_t zsign = (bk->flags & GP_NEG0) != 0;
    const size_t k = blockIdx.x, lo = k * chunk, cnt = n - lo < chunk ? n - lo : chunk;
    GpWrite L = lay[k];
    d_zero_bytes(buf32, L.epos >> 3, (L.mpos >> 3) + bytes_of(L.mbits));
    for (int s = threadIdx.x; s < HUFF_NSYM; s += blockDim.x) emit[s] = emit_a.e[s];
    __syncthreads();
    const size_t per = (cnt + GP_THREADS - 1) / GP_THREADS;
    size_t a = (size_t)threadIdx.x * per, bnd = a + per;
    if (a > cnt) a = cnt;
    if (bnd > cnt) bnd = cnt;
    const float *xc = x + lo;
    const uint8_t *lc = lv ? lv + lo : NULL;
    Bits3 mine = {0, 0, 0};
    for (size_t i = a; i < bnd; i++) {
        uint32_t eb, lb, mb;
        gp_value_bits(&eb, &lb, &mb, __float_as_uint(xc[i]), lc ? lc[i] : 0u, emit, zsign);
        mine.e += eb;
        mine.l += lb;
        mine.m += mb;
    }
    Bits3 zero = {0, 0, 0}, before, total;
    Scan(tmp).ExclusiveScan(mine, before, zero, Bits3Sum(), total);
    if (threadIdx.x == 0 && (total.e != L.ebits || total.l != L.lbits || total.m != L.mbits)) atomicOr(&bk->werr, 1u);
    BitOut oe, ol, om;
    bo_init(oe, buf32, L.epos + before.e);
    bo_init(ol, buf32, L.lpos + before.l);
    bo_init(om, buf32, L.mpos + before.m);
    for (size_t i = a; i < bnd; i++) {
        uint32_t u = __float_as_uint(xc[i]), e = (u >> 23) & 0xFFu, c = emit[e];
        uint32_t nz = e != 0;
        uint32_t Lv = (lc && e - 1u < 254u) ? lc[i] : 0u;
        int sh = GCOMP_LEVEL_SHIFT * (int)Lv;
        bo_put(oe, c & 0xFFFFFFu, (int)(c >> 24)); /* step (1): code, or escape + raw exponent */
        if (nz) bo_put(ol, Lv, 2);                  /* step (2): the level, nonzero exponents only */
        uint32_t sm24 = (((u >> 31) << 23) | (u & 0x7FFFFFu)) >> sh;
        if (nz) bo_put(om, sm24, GCOMP_MAN_BITS - sh); /* step (3): truncated mantissa with sign */
        else if (zsign) bo_put(om, u >> 31, 1);     /* exponent 0: the sign in ZSIGN frames only */
        if (repr) repr[lo + i] = __uint_as_float(nz ? (u & ~((1u << sh) - 1u)) : (u & 0x80000000u));
    }
    bo_flush(oe);
    bo_flush(ol);
    bo_flush(om);
}

/* the frame's bytes from buf to pay, when it was written and came out right */
__global__ void k_gp_copy(uint8_t *pay, const uint8_t *buf, const GpBack *bk) {
    if (!d_gp_writes(bk) || bk->werr) return; /* nor one whose sizes disagree (k_gp_write) */
    GRID_STRIDE(i, bk->off) pay[i] = buf[i];
}

static void gp_emit(GpEmit *m, const HuffCode *hc) {
    for (int s = 0; s < HUFF_NSYM; s++) m->e[s] = hc->emit[s] | (uint32_t)hc->emit_len[s] << 24;
}

/* All on the device but the table schedule, and one wait, at the end, for the frame's length,
 * checks, histogram and size breakdown; two when the table is built from this frame (the
 * bootstrap), whose histogram the host reads first. When a table is held, the schedule
 * (Section 4.4) knows this frame's code before pass 1: a rebuild uses what was encoded
 * before it. gp_launch: the frame's kernels (n > 0), its table plan in *plan, its
 * read-back (a GpBack) left at the start of the scratch it returns (gcx_dfree after the
 * read); gp_finish: the frame's length or GcError from the read-back, and once the frame is
 * complete the encoder's table state, its size breakdown and the frame's flags */
/* the block header's magic, type and n_theta into h[0..3] (the rest is the frame's) */
static void gp_head_start(uint8_t *h, int ntheta) {
    h[0] = GCOMP_MAGIC0;
    h[1] = GCOMP_MAGIC1;
    h[2] = GCOMP_DTYPE_FP32;
    h[3] = (uint8_t)ntheta;
}

static GpBack *gp_launch(CodecCuda *g, GcompTablePlan *plan, uint8_t *pay, size_t cap, const float *x, size_t n,
                         const CodecSide *side) {
    GpState *st = (GpState *)g->gp;
    int ntheta = (int)codec_param(&g->spec, "ntheta");
    uint64_t every = (uint64_t)codec_param(&g->spec, "every");
    size_t chunk = (size_t)codec_param(&g->spec, "chunk");
    GpHead head;
    memset(&head, 0, sizeof head);
    uint8_t *h = head.b;
    gp_head_start(h, ntheta);
    const size_t nch = (n + chunk - 1) / chunk;
    const uint8_t *lv = side->levels;
    /* one piece of scratch: the read-back, the chunks' scans, histograms and layout */
    size_t sb = sizeof(GpBack), cb = nch * sizeof(GpScan), hb = nch * HUFF_NSYM * 4;
    uint8_t *ws = (uint8_t *)gcx_dmalloc(sb + cb + hb + nch * sizeof(GpWrite));
    GpBack *bk = (GpBack *)ws;
    GpScan *cs = (GpScan *)(ws + sb);
    uint32_t *chist = (uint32_t *)(ws + sb + cb);
    GpWrite *lay = (GpWrite *)(ws + sb + cb + hb);
    GpEmit emit;
    memset(&emit, 0, sizeof emit);
    const int known = st->enc.have;
    if (known) {
        gcomp_table_plan(plan, &st->enc, NULL, ntheta, every);
        gp_emit(&emit, plan->code);
    }
    k_gp_scan<<<(unsigned)nch, GP_THREADS>>>(cs, chist, x, lv, n, chunk, emit, known);
    cudaCheckLast();
    if (!known) {
        k_gp_hist_sum<<<1, HUFF_NSYM>>>(bk->fh, chist, nch);
        cudaCheckLast();
        uint64_t fh[HUFF_NSYM];
        cudaCheck(cudaMemcpy(fh, bk->fh, sizeof fh, cudaMemcpyDeviceToHost));
        gcomp_table_plan(plan, &st->enc, fh, ntheta, every);
        gp_emit(&emit, plan->code);
        k_gp_ebits<<<(unsigned)nch, HUFF_NSYM>>>(cs, chist, emit);
        cudaCheckLast();
    }
    put_u32(h + 4, plan->id);
    put_u32(h + 8, (uint32_t)nch);
    put_u64(h + 20, 32ull * n);
    if (plan->carry) memcpy(h + GCOMP_BLOCK_HDR, plan->tab, plan->tablen);
    head.len = (uint32_t)(GCOMP_BLOCK_HDR + plan->tablen);
    /* the frame is ORed into a scratch with a word of slack, then copied: pay itself may end
     * inside a word. A frame takes at most max_payload bytes (the CPU's bound; the layout
     * calls a longer one an internal error), so a larger cap needs no more scratch */
    size_t hdr_end = head.len + nch * GCOMP_CHUNK_HDR, maxp = g->spec.ops->max_payload(g->cpu, n);
    size_t room = cap < maxp ? cap : maxp;
    if (room < hdr_end) room = hdr_end;
    uint8_t *buf = (uint8_t *)gcx_dmalloc(room + 8);
    k_gp_layout<<<1, GP_THREADS>>>(lay, bk, buf, cs, chist, n, chunk, nch, cap, room, head);
    cudaCheckLast();
    k_gp_write<<<(unsigned)nch, GP_THREADS>>>((uint32_t *)buf, bk, side->repr, x, lv, n, chunk, emit, lay);
    cudaCheckLast();
    k_gp_copy<<<gcx_grid(room), TPB>>>(pay, buf, bk);
    cudaCheckLast();
    gcx_dfree(buf); /* in stream order, after the copy */
    return bk;
}

static int64_t gp_finish(GpState *st, const GcompTablePlan *plan, const GpBack *r, size_t n, uint16_t *flags) {
    if (r->flags & GP_BAD) return -GC_ERR_PARAM; /* a level above 3 */
    if (r->nospace) return -GC_ERR_NOSPACE;
    if (r->err || r->werr) return -GC_ERR_NOSPACE; /* sizes disagree with the histograms or the bound: internal error */
    /* commit the state only once the frame is complete */
    gcomp_table_commit(&st->enc, plan, (const uint64_t *)r->fh);
    GcompParts *p = &st->parts;
    memset(p, 0, sizeof *p);
    p->values = n;
    p->zeros = r->zeros;
    p->exp_bits = r->ebits;
    p->level_bits = r->lbits;
    p->man_bits = r->mbits;
    for (int l = 0; l < 4; l++) p->level[l] = r->level[l];
    st->parts_ok = 1;
    *flags = (uint16_t)((plan->carry ? GCOMP_FLAG_TABLE : 0) | (r->flags & GP_NEG0 ? GCOMP_FLAG_ZSIGN : 0));
    return (int64_t)r->off;
}

static void staging_check(const GpState *st) {
    if (!st->staging) return;
    fprintf(stderr, "internal error: a gcomp encoder used again before its staged frame's read-back\n");
    exit(1);
}
/* the decoder's counterpart: a frame's table not yet settled (a deferred verdict) */
static void pending_check(const GpState *st) {
    if (!st->pending) return;
    fprintf(stderr, "internal error: a gcomp decoder used again before its deferred frame's verdict\n");
    exit(1);
}

int64_t gcx_gcomp_encode(CodecCuda *g, uint8_t *pay, size_t cap, uint16_t *flags, const float *x, size_t n,
                         const CodecSide *side) {
    GpState *st = (GpState *)g->gp;
    staging_check(st);
    *flags = 0;
    st->parts_ok = 0;
    if (cap < GCOMP_BLOCK_HDR) return -GC_ERR_NOSPACE;
    if (n == 0) { /* no table, no chunks, state untouched */
        uint8_t h[GCOMP_BLOCK_HDR];
        memset(h, 0, sizeof h);
        gp_head_start(h, (int)codec_param(&g->spec, "ntheta"));
        cudaCheck(cudaMemcpy(pay, h, GCOMP_BLOCK_HDR, cudaMemcpyHostToDevice));
        memset(&st->parts, 0, sizeof st->parts);
        st->parts_ok = 1;
        return GCOMP_BLOCK_HDR;
    }
    GcompTablePlan plan;
    GpBack *bk = gp_launch(g, &plan, pay, cap, x, n, side), r;
    cudaCheck(cudaMemcpy(&r, bk, sizeof r, cudaMemcpyDeviceToHost));
    gcx_dfree(bk);
    return gp_finish(st, &plan, &r, n, flags);
}

int64_t gcx_gcomp_encode_staged(CodecCuda *g, uint8_t *pay, size_t cap, void **bk, uint16_t *flags, const float *x,
                                size_t n, const CodecSide *side) {
    GpState *st = (GpState *)g->gp;
    *bk = NULL;
    if (n == 0 || !st->enc.have || cap < GCOMP_BLOCK_HDR) return gcx_gcomp_encode(g, pay, cap, flags, x, n, side);
    staging_check(st);
    *flags = 0;
    st->parts_ok = 0;
    *bk = gp_launch(g, &st->staged, pay, cap, x, n, side);
    st->staging = 1;
    return 0;
}

size_t gcx_gcomp_back_size(void) { return sizeof(GpBack); }

int64_t gcx_gcomp_staged_len(CodecCuda *g, size_t n, const void *hb, uint16_t *flags) {
    GpState *st = (GpState *)g->gp;
    GpBack r;
    memcpy(&r, hb, sizeof r);
    st->staging = 0;
    return gp_finish(st, &st->staged, &r, n, flags);
}

void gcx_gcomp_staged_drop(CodecCuda *g) { ((GpState *)g->gp)->staging = 0; }

/* ---------------------------------------------------------------- decode */

typedef GcompChunk GpChunkD;

/* the 64 bits at bit pos of buf[len], MSB-aligned; bytes past len read as 0 (gp_peek) */
__device__ __forceinline__ unsigned long long d_peek(const uint8_t *buf, size_t len, unsigned long long pos) {
    unsigned long long byte = pos >> 3, v = 0;
    for (unsigned long long i = byte; i < byte + 8; i++) v = (v << 8) | (i < len ? buf[i] : 0u);
    return v << (pos & 7);
}

/* a segment's padding bits after `bits` bits are zero. p: segment start */
__device__ __forceinline__ int d_pad_ok(const uint8_t *p, unsigned long long bits) {
    int r = (int)(bits & 7);
    return r == 0 || (p[bits >> 3] & ((1u << (8 - r)) - 1)) == 0;
}

/* the code at bit pos (compress/gcomp.c GP_DECODE_LOOP's step (1)): its length, and the
 * exponent into *e; 0 where no code starts there or an escaped symbol has a code of its own
 * (the CPU's two failures) */
__device__ __forceinline__ uint32_t d_gp_code(uint32_t *e, const uint8_t *pay, size_t len, unsigned long long pos,
                                              const uint16_t *lut, const uint8_t *hclen, int nth) {
    unsigned long long bits = d_peek(pay, len, pos);
    uint32_t ent = lut[bits >> (64 - nth)], l = HUFF_LUT_LEN(ent);
    *e = HUFF_LUT_SYM(ent);
    if (l && (ent & HUFF_LUT_ESC)) { /* escape + raw exponent (Section 4.3) */
        *e = (uint32_t)(bits >> (64 - nth - HUFF_RAW_BITS)) & 0xFFu;
        l = hclen[*e] ? 0 : l + HUFF_RAW_BITS;
    }
    return l;
}

#define GP_MAXL (HUFF_MAX_NTHETA + HUFF_RAW_BITS) /* the longest code: escape + raw exponent */
#define GP_DEAD 0xFFu

/* where the codes that start in [a, b) lead, from each of the M entries a + o (o < M; the
 * first code at or after a starts below a + M, the code across a being at most M long): the
 * first code start at or after b, as its offset from b (below M), or GP_DEAD where a code
 * fails first. The M walks go in step, the one furthest behind first, and a walk that lands
 * where another stands joins it, so no bit position is decoded twice (at most b - a + M
 * codes). The walks still going lie within M (at most 24) bits of the one furthest behind,
 * so a 32-bit mask of their positions modulo 32 (and who[], which walk stands there) gives
 * the next one and a join in a step each. to: [M]; w: the thread's column of GP_WALK rows
 * of shared bytes, GP_THREADS apart (consecutive threads, consecutive bytes): st[o] (0
 * walking, 1 failed, 2 joined), link[o] (the walk it joined; its own exit once it ends
 * past b), who[32] */
#define GP_WALK (2 * GP_MAXL + 32)
__device__ void d_gp_entries(uint8_t *to, uint8_t *w, const uint8_t *pay, size_t len, unsigned long long a,
                             unsigned long long b, int M, const uint16_t *lut, const uint8_t *hclen, int nth) {
    uint8_t *st = w, *link = w + GP_MAXL * GP_THREADS, *who = w + 2 * GP_MAXL * GP_THREADS;
#define GP_W(arr, i) arr[(size_t)(i) * GP_THREADS]
    uint32_t mask = 0;
    for (int o = 0; o < M; o++) {
        GP_W(st, o) = 0;
        GP_W(who, (a + (unsigned)o) & 31) = (uint8_t)o;
        mask |= 1u << ((a + (unsigned)o) & 31);
    }
    unsigned long long at = a; /* the walk furthest behind */
    while (mask && at < b) {
        const unsigned s = (unsigned)(at & 31);
        const int j = GP_W(who, s);
        uint32_t e, l = d_gp_code(&e, pay, len, at, lut, hclen, nth);
        mask &= ~(1u << s);
        if (!l) {
            GP_W(st, j) = 1;
        } else {
            const unsigned s2 = (unsigned)((at + l) & 31);
            if ((mask >> s2) & 1u) GP_W(st, j) = 2, GP_W(link, j) = GP_W(who, s2);
            else mask |= 1u << s2, GP_W(who, s2) = (uint8_t)j;
        }
        if (mask) at += (unsigned)__ffs(s ? (mask >> s) | (mask << (32 - s)) : mask) - 1;
    }
    for (unsigned q = 0; q < 32; q++) /* every walk still going is at or past b */
        if ((mask >> q) & 1u) GP_W(link, GP_W(who, q)) = (uint8_t)(at + ((q - (unsigned)(at & 31)) & 31) - b);
    for (int o = 0; o < M; o++) {
        int r = o;
        while (GP_W(st, r) == 2) r = GP_W(link, r);
        to[o] = GP_W(st, r) == 1 ? (uint8_t)GP_DEAD : GP_W(link, r);
    }
#undef GP_W
}

/* the levels and the mantissa bits of values [v0, v1) of a chunk whose exponents are in
 * ex (as uint32): the levels from bit pl (nzb nonzero exponents before v0), mantissas from
 * bit pm; write: the values into out as floats (over their exponents), else only the
 * mantissa bits into *mbits. *bad: a level on exponent 255; *neg: a negative exponent-0 value */
__device__ void d_gp_values(float *out, uint32_t *ex, size_t v0, size_t v1, const uint8_t *pay, size_t len,
                            unsigned long long pl, unsigned long long pm, uint32_t zs, int write,
                            unsigned long long *mbits, uint32_t *bad, uint32_t *neg) {
    unsigned long long mb = 0;
    for (size_t i = v0; i < v1; i++) {
        uint32_t e = ex[i], nzm = 0u - (uint32_t)(e != 0);
        uint32_t L = (uint32_t)(d_peek(pay, len, pl) >> 62) & nzm;
        pl += 2 & nzm;
        *bad |= (e == 0xFFu) & (L != 0);
        int sh = GCOMP_LEVEL_SHIFT * (int)L;
        int nb = (int)(((uint32_t)(GCOMP_MAN_BITS - sh) & nzm) | (zs & ~nzm));
        if (write) {
            uint32_t mv = (uint32_t)((d_peek(pay, len, pm + mb) >> 1) >> (63 - nb));
            uint32_t sm = mv << sh;
            uint32_t u = ((((sm >> 23) << 31) | (e << 23) | (sm & 0x7FFFFFu)) & nzm) | ((mv << 31) & ~nzm);
            *neg |= u & ~nzm;
            out[i] = __uint_as_float(u);
        }
        mb += (unsigned long long)nb;
    }
    *mbits = mb;
}

/* the chunk headers of a device frame without a table (nch of them from payload byte at),
 * checked and laid out on the device as compress/gcomp_state.c gcomp_chunks_parse does on
 * the host (the same checks; each failing chunk's is GC_ERR_CORRUPT): each chunk's
 * descriptor into ck[nch], written whatever the checks find, and gcomp_chunks_parse's
 * return into *status, so that the host needs none of the headers. One block of
 * GP_THREADS, a chunk a thread, tile after tile: the counts, the chunks' bytes and their
 * bits scanned (where each chunk must start and where its data lies, and the totals) */
__global__ void __launch_bounds__(GP_THREADS) k_gp_chunks(GcompChunk *ck, int *status, const uint8_t *pay, size_t len,
                                                          unsigned long long at, unsigned long long nch,
                                                          unsigned long long n, unsigned long long cbits, int nth,
                                                          int zsign) {
    typedef cub::BlockScan<Bits3, GP_THREADS> Scan;
    __shared__ typename Scan::TempStorage tmp;
    __shared__ Bits3 carry; /* the tiles before: values, bytes, bits */
    __shared__ uint32_t bad;
    const unsigned t = threadIdx.x;
    if (t == 0) carry.e = carry.l = carry.m = 0, bad = 0;
    __syncthreads();
    const unsigned long long data = at + nch * GCOMP_CHUNK_HDR; /* the first chunk's data */
    for (unsigned long long k0 = 0; k0 < nch; k0 += GP_THREADS) {
        const unsigned long long k = k0 + t;
        unsigned long long start = 0, count = 0, bits = 0, ebits = 0, nnz = 0, mbits = 0;
        int ok = 1;
        Bits3 mine = {0, 0, 0};
        if (k < nch) {
            const uint8_t *q = pay + at + k * GCOMP_CHUNK_HDR;
            start = d_get_u32(q), count = d_get_u32(q + 4), bits = d_get_u32(q + 8), ebits = d_get_u32(q + 12);
            nnz = d_get_u32(q + 16);
            ok = count != 0 && nnz <= count && ebits >= count && ebits <= count * (unsigned long long)(nth + HUFF_RAW_BITS) &&
                 bits >= ebits + 2 * nnz;
            mbits = ok ? bits - ebits - 2 * nnz : 0;
            ok = ok && mbits >= (unsigned long long)(GCOMP_MAN_BITS - 3 * GCOMP_LEVEL_SHIFT) * nnz &&
                 mbits <= (unsigned long long)GCOMP_MAN_BITS * nnz + (zsign ? count - nnz : 0);
            mine.e = count;
            mine.l = ((ebits + 7) >> 3) + ((2 * nnz + 7) >> 3) + ((mbits + 7) >> 3);
            mine.m = bits;
        }
        Bits3 before, total, zero = {0, 0, 0};
        Scan(tmp).ExclusiveScan(mine, before, zero, Bits3Sum(), total);
        if (k < nch) {
            const unsigned long long expect = carry.e + before.e; /* where the chunk must start */
            ok = ok && start == expect && count <= n - start;
            GcompChunk c;
            c.start = (uint32_t)start, c.count = (uint32_t)count, c.nnz = (uint32_t)nnz;
            c.ebits = ebits, c.mbits = mbits, c.off = data + carry.l + before.l, c.levsum = 0, c.neg0 = 0;
            ck[k] = c;
            if (!ok) atomicOr(&bad, 1u);
        }
        __syncthreads(); /* carry read, tmp free */
        if (t == 0) carry.e += total.e, carry.l += total.l, carry.m += total.m;
        __syncthreads();
    }
    if (t == 0) {
        const unsigned long long end = data + carry.l;
        *status = bad || carry.e != n || carry.m != cbits ? -GC_ERR_CORRUPT
                  : end > len                             ? -GC_ERR_TRUNCATED
                  : end < len                             ? -GC_ERR_OVERSIZED
                                                          : 0;
    }
}

/* the chunks' descriptors: in device memory (p), or, p NULL, up to GP_ARG_CHUNKS of them in
 * the launch's argument (v: no upload) */
#define GP_ARG_CHUNKS 4
typedef struct {
    const GpChunkD *p;
    GpChunkD v[GP_ARG_CHUNKS];
} GpChunks;
/* one block of GP_THREADS per chunk: compress/gcomp.c gp_decode_chunk, its result the
 * CPU's for every input (each failure is GC_ERR_CORRUPT). out: [n] scratch (a chunk may
 * fail after writing values); rc: [nch]; neg: [nch], whether a decoded exponent-0 value is
 * negative (0 for a chunk that fails).
 *   1. the exponent codes: thread t's share [a, b) of the segment, d_gp_entries from each
 *      of its M possible entries; thread 0 follows the entries from the segment's start
 *      (the path the CPU walks) through the threads' tables, which must end exactly at
 *      the segment's end; each thread then decodes its codes from its true entry, counted
 *      (a block scan: where its values go; the chunk's count must match), and writes their
 *      exponents into out;
 *   2. the values: thread t's run of them; its nonzero exponents counted and scanned (the
 *      levels' positions: the chunk's nonzero count must match), its mantissa bits counted
 *      and scanned (their positions: the segment's bits must match), then each value. */
__global__ void __launch_bounds__(GP_THREADS) k_gp_dec(float *out, int *rc, uint32_t *neg, const uint8_t *pay,
                                                       size_t len, const uint16_t *lut, const uint8_t *hclen, int nth,
                                                       uint32_t zs, GpChunks ck, const int *status) {
    typedef cub::BlockScan<unsigned long long, GP_THREADS> Scan;
    __shared__ typename Scan::TempStorage tmp;
    __shared__ uint8_t ent[GP_THREADS][GP_MAXL];
    __shared__ uint8_t walks[GP_WALK * GP_THREADS];
    __shared__ uint8_t from[GP_THREADS];
    __shared__ uint32_t fail, negs;
    const unsigned t = threadIdx.x, T = GP_THREADS;
    const size_t k = blockIdx.x;
    if (status && *status) { /* the chunk headers failed their checks (k_gp_chunks): nothing to decode */
        if (threadIdx.x == 0) rc[k] = 0, neg[k] = 0;
        return;
    }
    const GpChunkD c = ck.p ? ck.p[k] : ck.v[k];
    const unsigned long long lbits = 2ull * c.nnz, E0 = 8ull * c.off;
    const unsigned long long pl0 = E0 + 8ull * ((c.ebits + 7) >> 3), pm0 = pl0 + 8ull * ((lbits + 7) >> 3);
    const int M = nth + HUFF_RAW_BITS;
    const unsigned long long S = (c.ebits + T - 1) / T;
    const unsigned long long a = E0 + (t * S < c.ebits ? t * S : c.ebits);
    const unsigned long long b = E0 + ((t + 1) * S < c.ebits ? (t + 1) * S : c.ebits);
    uint32_t *ex = (uint32_t *)(out + c.start);
    if (t == 0) fail = 0, negs = 0;
    d_gp_entries(ent[t], walks + t, pay, len, a, b, M, lut, hclen, nth);
    __syncthreads();
    if (t == 0) { /* the CPU's path: from the segment's start, to exactly its end */
        unsigned o = 0;
        for (unsigned u = 0; u < T && o != GP_DEAD; u++) {
            from[u] = (uint8_t)o;
            o = ent[u][o];
        }
        fail = o != 0;
    }
    __syncthreads();
    unsigned long long codes = 0, before, total;
    if (!fail) {
        for (unsigned long long p = a + from[t]; p < b; codes++) {
            uint32_t e, l = d_gp_code(&e, pay, len, p, lut, hclen, nth);
            if (!l) { /* none on the path fails (d_gp_entries found it whole); were one to, */
                codes = 1ull << 40; /* a total no chunk has, not a loop without end */
                break;
            }
            p += l;
        }
    }
    Scan(tmp).ExclusiveScan(codes, before, 0ull, U64Sum(), total);
    if (fail || total != c.count) { /* too few or too many codes fill the segment */
        if (t == 0) rc[k] = -GC_ERR_CORRUPT, neg[k] = 0;
        return;
    }
    unsigned long long p = a + from[t];
    for (unsigned long long q = before; q < before + codes; q++) {
        uint32_t e;
        p += d_gp_code(&e, pay, len, p, lut, hclen, nth);
        ex[q] = e;
    }
    __syncthreads();
    const size_t per = ((size_t)c.count + T - 1) / T, v0 = t * per < c.count ? t * per : c.count;
    const size_t v1 = v0 + per < c.count ? v0 + per : c.count;
    unsigned long long nz = 0, nzb, nzall;
    for (size_t i = v0; i < v1; i++) nz += ex[i] != 0;
    __syncthreads(); /* tmp reused */
    Scan(tmp).ExclusiveScan(nz, nzb, 0ull, U64Sum(), nzall);
    uint32_t bad = 0, anyneg = 0;
    unsigned long long mb, mbb, mball;
    d_gp_values(NULL, ex, v0, v1, pay, len, pl0 + 2 * nzb, 0, zs, 0, &mb, &bad, &anyneg);
    __syncthreads();
    Scan(tmp).ExclusiveScan(mb, mbb, 0ull, U64Sum(), mball);
    if (bad) atomicOr(&fail, 1u);
    __syncthreads();
    /* every segment consumed exactly, their padding zero */
    const uint8_t *pc = pay + c.off;
    size_t eb = (size_t)((c.ebits + 7) >> 3), lb = (size_t)((lbits + 7) >> 3);
    if (fail || nzall != c.nnz || mball != c.mbits || !d_pad_ok(pc, c.ebits) || !d_pad_ok(pc + eb, lbits) ||
        !d_pad_ok(pc + eb + lb, c.mbits)) {
        if (t == 0) rc[k] = -GC_ERR_CORRUPT, neg[k] = 0;
        return;
    }
    d_gp_values(out + c.start, ex, v0, v1, pay, len, pl0 + 2 * nzb, pm0 + mbb, zs, 1, &mb, &bad, &anyneg);
    if (anyneg) atomicOr(&negs, 1u);
    __syncthreads();
    if (t == 0) rc[k] = 0, neg[k] = negs;
}

/* the frame's verdict from its chunks' results (rc, neg: [nch], k_gp_dec's), as the host
 * reads them: the first chunk's error, or a ZSIGN frame without a negative zero */
__device__ __host__ static inline int gp_verdict(const int *rc, const uint32_t *neg, size_t nch, int zsign) {
    int r = 0, anyneg = 0;
    for (size_t k = 0; k < nch && !r; k++) {
        r = rc[k];
        anyneg |= neg[k] != 0;
    }
    return !r && zsign && !anyneg ? -GC_ERR_CORRUPT : r;
}

/* the verdict of a frame of more than GP_ARG_CHUNKS chunks whose result the host has not
 * read, reduced once, by one block, into *verdict: the chunk headers' check (status,
 * k_gp_chunks'), else gp_verdict's (the first failing chunk's code; ZSIGN without a
 * negative zero) */
__global__ void __launch_bounds__(GP_THREADS) k_gp_verdict(int *verdict, const int *rc, const uint32_t *neg,
                                                           size_t nch, int zsign, const int *status) {
    __shared__ unsigned long long first; /* the first failing chunk, or nch */
    __shared__ uint32_t anyneg;
    if (threadIdx.x == 0) first = nch, anyneg = 0;
    __syncthreads();
    for (size_t k = threadIdx.x; k < nch; k += blockDim.x) {
        if (rc[k]) atomicMin(&first, (unsigned long long)k);
        if (neg[k]) atomicOr(&anyneg, 1u);
    }
    __syncthreads();
    if (threadIdx.x == 0)
        *verdict = status && *status ? *status : first < nch ? rc[first] : zsign && !anyneg ? -GC_ERR_CORRUPT : 0;
}

/* out[i] = v[i] or (acc) out[i] + weight * v[i], rounded as the CPU's. out, v: [n]. With
 * verdict (a frame whose result the host has not read): out written only when the frame's
 * verdict is 0, which k_gp_verdict has put in *verdict for more than GP_ARG_CHUNKS chunks,
 * and which for fewer every thread takes from the chunks' results (the chunk headers'
 * check where k_gp_chunks made one, status, else gp_verdict), block 0 writing it there */
__global__ void k_gp_out(float *out, const float *v, size_t n, float weight, int acc, const int *rc,
                         const uint32_t *neg, size_t nch, int zsign, const int *status, int *verdict) {
    if (verdict) {
        int inl = nch <= GP_ARG_CHUNKS;
        int r = !inl ? *verdict : status && *status ? *status : gp_verdict(rc, neg, nch, zsign);
        if (inl && blockIdx.x == 0 && threadIdx.x == 0) *verdict = r;
        if (r) return;
    }
    GRID_STRIDE(i, n) store_out(out, i, v[i], weight, acc);
}

/* A table on the device: its lookup table [1 << ntheta] (u16), then its code lengths
 * [HUFF_NSYM], padded to 16 bytes */
static size_t tab_bytes(int ntheta) { return ((sizeof(uint16_t) << ntheta) + HUFF_NSYM + 15) & ~(size_t)15; }

/* A lookup table is made of runs of one entry: each code's range of n_theta-bit indices
 * (compress/huffman.c huff_lut_build), the escape's one index, and 0 in the gaps between
 * them, at most 2 (HUFF_NSYM + 1) + 1 runs; so a table crosses to the device as its runs
 * and code lengths in a kernel's argument (3 KB, also for the 128 KiB lookup table of
 * n_theta 16), in stream order, with no host memory to keep until a copy has run */
#define GP_RUNS (2 * (HUFF_NSYM + 1) + 1)
typedef struct {
    uint32_t start[GP_RUNS + 1]; /* run k: indices start[k] .. start[k + 1] - 1 */
    uint16_t val[GP_RUNS];
    uint8_t len[HUFF_NSYM];
    uint32_t nruns, ntheta;
} GpTabRuns;

/* the table's device form (tab_bytes) into d from its runs: each index finds its run */
__global__ void k_gp_table(uint8_t *d, const GpTabRuns r) {
    const size_t nl = (size_t)1 << r.ntheta;
    GRID_STRIDE(i, nl + HUFF_NSYM) {
        if (i < nl) {
            uint32_t lo = 0, hi = r.nruns - 1; /* the last run that starts at or before i */
            while (lo < hi) {
                const uint32_t mid = (lo + hi + 1) / 2;
                if (r.start[mid] <= i) lo = mid;
                else hi = mid - 1;
            }
            ((uint16_t *)d)[i] = r.val[lo];
        } else {
            d[2 * nl + (i - nl)] = r.len[i - nl];
        }
    }
}

/* t's lookup table and code lengths into the device table d (sized by tabs_fit), by
 * k_gp_table: no wait */
static void tab_upload(uint8_t *d, const GpTab *t) {
    GpTabRuns r;
    memset(&r, 0, sizeof r); /* the runs past nruns defined too: the argument is copied whole, and the
                              * emulation reads a device address in any of its words */
    const size_t nl = (size_t)1 << t->hc.ntheta;
    r.nruns = 0, r.ntheta = (uint32_t)t->hc.ntheta;
    for (size_t i = 0; i < nl; i++) {
        if (i > 0 && t->lut[i] == t->lut[i - 1]) continue;
        if (r.nruns == GP_RUNS) {
            fprintf(stderr, "internal error: a gcomp lookup table of more than %d runs at %s:%d\n", GP_RUNS,
                    __FILE__, __LINE__);
            exit(1);
        }
        r.start[r.nruns] = (uint32_t)i;
        r.val[r.nruns++] = t->lut[i];
    }
    r.start[r.nruns] = (uint32_t)nl;
    memcpy(r.len, t->hc.len, HUFF_NSYM);
    k_gp_table<<<gcx_grid(nl + HUFF_NSYM), TPB>>>(d, r);
    cudaCheckLast();
}

/* compress/gcomp.c gp_table_set: the code and its lookup table, on the host */
static void gp_table_set(GpTab *t, const HuffCode *hc, uint32_t id) {
    int ntheta = hc->ntheta;
    t->hc = *hc;
    if (t->lut_n != ntheta || !t->lut) {
        free(t->lut);
        t->lut = (uint16_t *)host_alloc(sizeof(uint16_t) << ntheta);
        t->lut_n = ntheta;
    }
    huff_lut_build(t->lut, &t->hc);
    t->id = id;
    t->have = 1;
}

/* compress/gcomp.c gp_table_read: a table section (gcomp_table_parse) into t */
static int gp_table_read(GpTab *t, size_t *used, const uint8_t *p, size_t len, int ntheta, uint32_t id) {
    HuffCode hc;
    int rc = gcomp_table_parse(&hc, used, p, len, ntheta, id);
    if (rc) return rc;
    gp_table_set(t, &hc, id);
    return 0;
}

/* the decoder's two device tables with room for tables of up to n_theta ntheta: one
 * allocation a decoder, made with its first table and again (a whole-device wait) only for
 * a table of a larger n_theta, the table in use then uploaded into it again; returns
 * whether it was */
static int tabs_fit(GpState *st, int ntheta) {
    if (st->dtabs && st->dtabs_n >= ntheta) return 0;
    if (st->dtabs) cudaCheck(cudaFree(st->dtabs));
    const size_t tb = tab_bytes(ntheta);
    cudaCheck(cudaMalloc((void **)&st->dtabs, 2 * tb));
    st->dtabs_n = ntheta;
    st->dtab = st->dtabs, st->dnext = st->dtabs + tb;
    if (st->cur.have) tab_upload(st->dtab, &st->cur);
    return 1;
}

/* a frame's carried table (st->pend) to the device, into st->dnext (tab_upload: no wait);
 * it becomes dtab at gcx_gcomp_settle if the frame passed */
static const uint8_t *next_upload(GpState *st, int ntheta) {
    tabs_fit(st, ntheta);
    tab_upload(st->dnext, &st->pend);
    st->pending = 1;
    return st->dnext;
}

void gcx_gcomp_settle(CodecCuda *g, int ok) {
    GpState *st = (GpState *)g->gp;
    if (!st->pending) return;
    st->pending = 0;
    if (!ok) return; /* pend discarded: the decoder's table as it was */
    uint8_t *d = st->dtab;
    st->dtab = st->dnext, st->dnext = d;
    GpTab tmp = st->cur;
    st->cur = st->pend;
    st->pend = tmp;
}

/* The payload's parts the host parses (block header, table section, chunk headers: a
 * prefix of at most 28 + GCOMP_TABLE_MAX + 20 C bytes) are read from host (a host frame),
 * from the probe's copy of the payload's first PAY_HEAD bytes (p->head: a device frame
 * without a table, its block header and up to 4 chunk headers), or copied down from p->d
 * (a device frame with a table: in one copy for up to GP_PREFIX_CHUNKS chunks, the rest of
 * the chunk headers in a second). A device frame with more than GP_ARG_CHUNKS chunks
 * (without a table, or with verdict) has its chunk headers checked and laid out on the
 * device instead (k_gp_chunks), so that none of them is copied down. The chunks are
 * decoded on the device, from p->d, or from one upload of host once the headers have
 * passed; up to GP_ARG_CHUNKS chunks' descriptors parsed on the host travel in the
 * kernel's argument, more are uploaded from page-locked memory (no wait). A table the
 * frame carries goes up into the decoder's st->dnext (next_upload) and becomes its own at
 * gcx_gcomp_settle if the frame passed. The chunks' results are then read back in one
 * copy, the output written and the table settled if they passed (one wait; two for a
 * frame with a table, whose headers were copied down), or, with verdict, for a device
 * frame, not read at all: k_gp_out (after k_gp_verdict, for more than GP_ARG_CHUNKS
 * chunks) writes the frame's verdict into *verdict on the device and the output only when
 * it is 0, and the call returns without a wait for the chunks: 1 for a frame without a
 * table (it changes no state), 2 for one that carries a table, settled when the batch
 * reads the verdicts (until then the decoder takes no other frame) */
#define GP_PREFIX_CHUNKS 64

int gcx_gcomp_decode(CodecCuda *g, float *out, size_t n, float weight, int acc, const Pay *p, const uint8_t *host,
                     uint16_t flags, int *verdict) {
    GpState *st = (GpState *)g->gp;
    pending_check(st);
    size_t len = p->len;
    uint8_t *pre = NULL; /* the prefix copied down from a device frame, first bytes */
    size_t first = 0;
    const uint8_t *payload = host;
    if (!host && (len < GCOMP_BLOCK_HDR || !(flags & GCOMP_FLAG_TABLE)))
        payload = p->head; /* the block header, and up to GP_ARG_CHUNKS chunk headers (len permitting) */
    if (!payload) {
        const size_t most = GCOMP_BLOCK_HDR + GCOMP_TABLE_MAX + GP_PREFIX_CHUNKS * GCOMP_CHUNK_HDR;
        first = len < most ? len : most;
        pre = (uint8_t *)host_alloc(first ? first : 1);
        if (first) cudaCheck(cudaMemcpy(pre, p->d, first, cudaMemcpyDeviceToHost));
        payload = pre;
    }
    GcompBlock b;
    int rc = gcomp_block_parse(&b, payload, len, n, flags);
    if (rc || n == 0) {
        free(pre);
        return rc;
    }
    int ntheta = b.ntheta, zsign = b.zsign;
    size_t nch = (size_t)b.nch, at = GCOMP_BLOCK_HDR;
    if (b.table) {
        size_t used = 0;
        rc = gp_table_read(&st->pend, &used, payload + at, len - at, ntheta, b.id); /* < 2 + 2 * 256 bytes */
        if (rc) {
            free(pre);
            return rc;
        }
        at += used;
    } else {
        if (!st->cur.have || st->cur.id != b.id || st->cur.hc.ntheta != ntheta) rc = -GC_ERR_STATE;
    }
    if (!rc) rc = gcomp_chunks_fit(len, at, &b); /* before the per-chunk memory */
    int defer = verdict && !host; /* its verdict left on the device */
    /* its chunk headers checked on the device (those of a table frame decoded at once on the host) */
    int devck = !host && nch > GP_ARG_CHUNKS && (!b.table || defer);
    if (!rc && pre && !devck && at + nch * GCOMP_CHUNK_HDR > first) { /* the rest of the chunk headers */
        pre = (uint8_t *)reallocCheck(pre, at + nch * GCOMP_CHUNK_HDR);
        payload = pre;
        cudaCheck(cudaMemcpy(pre + first, p->d + first, at + nch * GCOMP_CHUNK_HDR - first, cudaMemcpyDeviceToHost));
    }
    if (rc) {
        free(pre);
        return rc;
    }
    GpChunks ck;
    memset(&ck, 0, sizeof ck);
    int inarg = !devck && nch <= GP_ARG_CHUNKS;
    size_t up = inarg || devck ? 0 : nch * sizeof(GpChunkD); /* the descriptors' upload */
    uint8_t *stage = up ? (uint8_t *)gcx_pinned(up) : NULL, *dup = NULL; /* the upload waits for nothing */
    if (!devck) rc = gcomp_chunks_parse(inarg ? ck.v : (GpChunkD *)stage, payload, len, at, &b, n);
    if (!rc) {
        const uint8_t *dpay = host ? gcx_upload(host, len) : p->d;
        /* each chunk's result, then its sign flag, then the chunk headers' check (devck) */
        int *dres = (int *)gcx_dmalloc((2 * nch + 1) * sizeof(int)), *dstat = devck ? dres + 2 * nch : NULL;
        float *dv = (float *)gcx_dmalloc(n * sizeof(float)); /* the values, before they reach out */
        GpChunkD *dck = NULL;
        if (devck) {
            dck = (GpChunkD *)gcx_dmalloc(nch * sizeof(GpChunkD));
            k_gp_chunks<<<1, GP_THREADS>>>(dck, dstat, dpay, len, at, nch, n, b.cbits, ntheta, zsign);
            cudaCheckLast();
            ck.p = dck;
        }
        if (up) {
            dup = (uint8_t *)gcx_dmalloc(up);
            cudaCheck(cudaMemcpyAsync(dup, stage, up, cudaMemcpyHostToDevice, 0));
            ck.p = (const GpChunkD *)dup;
        }
        const uint8_t *dtab = b.table ? next_upload(st, ntheta) : st->dtab;
        k_gp_dec<<<(unsigned)nch, GP_THREADS>>>(dv, dres, (uint32_t *)dres + nch, dpay, len, (const uint16_t *)dtab,
                                                dtab + (sizeof(uint16_t) << ntheta), ntheta, (uint32_t)zsign, ck,
                                                dstat);
        cudaCheckLast();
        if (defer) { /* the verdict stays on the device */
            if (nch > GP_ARG_CHUNKS) {
                k_gp_verdict<<<1, GP_THREADS>>>(verdict, dres, (const uint32_t *)dres + nch, nch, zsign, dstat);
                cudaCheckLast();
            }
            k_gp_out<<<gcx_grid(n), GP_THREADS>>>(out, dv, n, weight, acc, dres, (const uint32_t *)dres + nch, nch,
                                                  zsign, dstat, verdict);
            cudaCheckLast();
            rc = b.table ? 2 : 1;
        } else {
            int *hres = (int *)host_alloc((2 * nch + 1) * sizeof(int));
            cudaCheck(cudaMemcpy(hres, dres, (2 * nch + (devck ? 1 : 0)) * sizeof(int), cudaMemcpyDeviceToHost));
            rc = devck && hres[2 * nch] ? hres[2 * nch] : gp_verdict(hres, (const uint32_t *)hres + nch, nch, zsign);
            free(hres);
            if (!rc) { /* the frame is valid: only now the output */
                k_gp_out<<<gcx_grid(n), GP_THREADS>>>(out, dv, n, weight, acc, NULL, NULL, 0, 0, NULL, NULL);
                cudaCheckLast();
            }
            gcx_gcomp_settle(g, rc == 0);
        }
        if (host) gcx_dfree((void *)dpay);
        if (dup) gcx_dfree(dup);
        if (dck) gcx_dfree(dck);
        gcx_dfree(dres);
        gcx_dfree(dv);
    }
    free(pre);
    return rc;
}

/* ------------------------------------------------ size breakdown (device) */

/* the level segments of a frame, as gcomp_frame_parts_headers reads them */
struct GpSeg {
    unsigned long long off, nnz;
};
typedef struct {
    GpSeg *seg;
    size_t n, cap;
} GpSegs;
static void gp_seg_add(void *ctx, uint64_t off, uint64_t nnz) {
    GpSegs *s = (GpSegs *)ctx;
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 16;
        s->seg = (GpSeg *)reallocCheck(s->seg, s->cap * sizeof(GpSeg));
    }
    s->seg[s->n].off = off;
    s->seg[s->n++].nnz = nnz;
}

/* one block per segment: its 2-bit levels (MSB-first) counted into cnt[4] */
__global__ void k_gp_levels(unsigned long long *cnt, const uint8_t *pl, const GpSeg *seg) {
    GpSeg s = seg[blockIdx.x];
    unsigned long long c0 = 0, c1 = 0, c2 = 0, c3 = 0;
    for (unsigned long long i = threadIdx.x; i < s.nnz; i += blockDim.x) {
        uint32_t v = (pl[s.off + i / 4] >> (6 - 2 * (i % 4))) & 3;
        c0 += v == 0;
        c1 += v == 1;
        c2 += v == 2;
        c3 += v == 3;
    }
    if (c0) atomicAdd(&cnt[0], c0);
    if (c1) atomicAdd(&cnt[1], c1);
    if (c2) atomicAdd(&cnt[2], c2);
    if (c3) atomicAdd(&cnt[3], c3);
}

int codec_cuda_gcomp_parts(GcompParts *p, const uint8_t *frame, size_t len) {
    /* the headers to the host: the common and block headers and the table's count first,
     * then as far as the chunk headers reach (at most the frame) */
    size_t at = CODEC_HEADER_SIZE + GCOMP_BLOCK_HDR, have = len < at + 2 ? len : at + 2, need = have;
    uint8_t *h = (uint8_t *)host_alloc(have);
    if (have) cudaCheck(cudaMemcpy(h, frame, have, cudaMemcpyDeviceToHost));
    if (have == at + 2) {
        if (get_u16(h + 6) & GCOMP_FLAG_TABLE) at += 2 + 2 * (size_t)get_u16(h + at);
        uint64_t end = (uint64_t)at + GCOMP_CHUNK_HDR * (uint64_t)get_u32(h + CODEC_HEADER_SIZE + 8);
        need = end < len ? (size_t)end : len;
    }
    if (need > have) {
        h = (uint8_t *)reallocCheck(h, need);
        cudaCheck(cudaMemcpy(h + have, frame + have, need - have, cudaMemcpyDeviceToHost));
    }
    GpSegs segs = {NULL, 0, 0};
    int rc = gcomp_frame_parts_headers(p, h, len, gp_seg_add, &segs); /* all but the levels, on success */
    free(h);
    if (!rc && segs.n) {
        GpSeg *dseg = (GpSeg *)gcx_dmalloc(segs.n * sizeof(GpSeg));
        unsigned long long *dcnt = (unsigned long long *)gcx_dmalloc(4 * sizeof(unsigned long long)), cnt[4];
        cudaCheck(cudaMemcpy(dseg, segs.seg, segs.n * sizeof(GpSeg), cudaMemcpyHostToDevice));
        cudaCheck(cudaMemsetAsync(dcnt, 0, sizeof cnt, 0));
        k_gp_levels<<<(unsigned)segs.n, GP_THREADS>>>(dcnt, frame + CODEC_HEADER_SIZE, dseg);
        cudaCheckLast();
        cudaCheck(cudaMemcpy(cnt, dcnt, sizeof cnt, cudaMemcpyDeviceToHost));
        for (int l = 0; l < 4; l++) p->level[l] += cnt[l];
        gcx_dfree(dseg);
        gcx_dfree(dcnt);
    }
    free(segs.seg);
    return rc;
}

/* ---------------------------------------------------------- checkpoints */

/* compress/gcomp.c gp_state_save / gp_state_load: the same blob through the same
 * writer and parser (compress/gcomp_state.h, docs/FORMAT.md section 10,
 * Checkpointed state) from and into the GPU state, so a checkpoint written by
 * either path resumes on either. */
int64_t gcx_gcomp_state_save(const CodecCuda *g, uint8_t *buf, size_t cap) {
    const GpState *st = (const GpState *)g->gp;
    staging_check(st); /* the state without the staged frame's plan would not be the encoder's */
    pending_check(st); /* nor without the deferred frame's table the decoder's */
    return gcomp_state_write(buf, cap, &st->enc, st->cur.have, &st->cur.hc, st->cur.id);
}

/* the whole blob is checked before anything is written: a refused load
 * changes nothing */
int gcx_gcomp_state_load(CodecCuda *g, const uint8_t *buf, size_t len) {
    GpState *st = (GpState *)g->gp;
    staging_check(st); /* a staged frame's plan would be committed onto the loaded state */
    pending_check(st);
    GcompStateBlob b;
    int rc = gcomp_state_parse(&b, buf, len, (int)codec_param(&g->spec, "ntheta"));
    if (rc) return rc;
    st->enc = b.enc;
    st->parts_ok = 0; /* no frame since */
    if (b.dec_have) { /* builds and uploads its lookup table */
        gp_table_set(&st->cur, &b.dec, b.dec_id);
        if (!tabs_fit(st, b.dec.ntheta)) tab_upload(st->dtab, &st->cur);
    }
    st->cur.have = b.dec_have;
    return 0;
}

int codec_cuda_gcomp_parts_last(GcompParts *p, const CodecCuda *g, size_t frame_len) {
    const GpState *st = (const GpState *)g->gp;
    if (!st || !st->parts_ok) return -GC_ERR_STATE;
    const GcompParts *q = &st->parts;
    p->values += q->values;
    p->zeros += q->zeros;
    for (int l = 0; l < 4; l++) p->level[l] += q->level[l];
    p->exp_bits += q->exp_bits;
    p->level_bits += q->level_bits;
    p->man_bits += q->man_bits;
    p->bytes += frame_len;
    return 0;
}
