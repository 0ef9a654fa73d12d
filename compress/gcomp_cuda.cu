/* GPU path of gcomp (Li et al., SoCC 2024; CPU twin compress/gcomp.c, format
 * docs/FORMAT.md section 10), byte-identical frames.
 *
 * Encode, as the CPU's two passes (Section 6.1, 6.2):
 *   1. one thread block per chunk: the exponent histogram (shared-memory
 *      atomics, aggregated per warp with __match_any_sync), the sum of applied
 *      levels, whether a zero/denormal has its sign bit set, invalid levels;
 *   2. the host sums the histograms, runs the table schedule of Section 4.4
 *      (bootstrap from the first tensor, rebuild every K encodes, carry the
 *      table when it changes: the CPU's rules, the CPU's Huffman code builder
 *      compress/huffman.c), and one block per chunk computes the chunk's
 *      exponent-segment bits from its histogram; the host lays out the chunk
 *      headers and segment offsets exactly as the CPU;
 *   3. one block of 256 threads per chunk writes the three segments: each
 *      thread owns a contiguous run of the chunk's values, a block-wide
 *      exclusive scan of the per-thread bit counts gives each thread its bit
 *      position in every segment, and bits are ORed into the zeroed payload
 *      32 bits at a time (atomicOr of big-endian-ordered words, so threads that
 *      share a word at the edges of their runs never lose bits).
 * Decode: the host parses and validates the block header, the table section
 * and the chunk headers (the CPU's checks in the CPU's order), builds the
 * lookup table (Section 4.5) and uploads it; one GPU thread per chunk walks
 * the chunk's three segments (a chunk is sequential by construction: a
 * Huffman code's length is known only once decoded) with the CPU's checks,
 * into a device scratch of n floats; the host collects the per-chunk results
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

#define GP_THREADS 256

static void *host_alloc(size_t bytes) {
    void *p = malloc(bytes ? bytes : 1);
    if (!p) {
        fprintf(stderr, "error: out of memory allocating %zu bytes at %s:%d\n", bytes, __FILE__, __LINE__);
        exit(1);
    }
    return p;
}

static inline size_t bytes_of(uint64_t bits) { return (size_t)((bits + 7) >> 3); }
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
    uint16_t *dlut; /* device copy */
    uint8_t *dlen;  /* device copy of hc.len [256] */
} GpTab;

typedef struct {
    GcompEnc enc; /* encoder (compress/gcomp.c GcompState) */
    /* decoder */
    GpTab cur, pend;
} GpState;

static void tab_free(GpTab *t) {
    free(t->lut);
    if (t->dlut) cudaCheck(cudaFree(t->dlut));
    if (t->dlen) cudaCheck(cudaFree(t->dlen));
}

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
    free(st);
}

/* ---------------------------------------------------------------- encode */

/* pass 1, one block per chunk: histogram of exponents, applied level sum
 * (exponents 1..254 only), negative zero seen, level > 3 seen.
 * chist: [nch][256]; levsum, neg0: [nch]; bad: [1]; x: [n]; lv: [n] or NULL */
__global__ void k_gp_scan(uint32_t *chist, unsigned long long *levsum, uint32_t *neg0, uint32_t *bad,
                          const float *x, const uint8_t *lv, size_t n, size_t chunk) {
    __shared__ uint32_t h[HUFF_NSYM];
    __shared__ unsigned long long ls;
    __shared__ uint32_t ng, bd;
    const size_t k = blockIdx.x, lo = k * chunk, cnt = n - lo < chunk ? n - lo : chunk;
    for (int s = threadIdx.x; s < HUFF_NSYM; s += blockDim.x) h[s] = 0;
    if (threadIdx.x == 0) {
        ls = 0;
        ng = 0;
        bd = 0;
    }
    __syncthreads();
    unsigned long long lsum = 0;
    uint32_t neg = 0, b = 0;
    const int lane = threadIdx.x & 31;
    for (size_t base = 0; base < cnt; base += blockDim.x) { /* uniform trip count: whole warps match */
        size_t i = base + threadIdx.x;
        uint32_t e = 0x100u; /* no symbol */
        if (i < cnt) {
            uint32_t u = __float_as_uint(x[lo + i]);
            e = (u >> 23) & 0xFFu;
            neg |= (e == 0) & (u >> 31);
            if (lv) {
                uint32_t l = lv[lo + i];
                b |= l > 3;
                lsum += (e - 1u < 254u) ? l : 0u;
            }
        }
        uint32_t same = __match_any_sync(0xFFFFFFFFu, e);
        if (e < 0x100u && lane == __ffs(same) - 1) atomicAdd(&h[e], (uint32_t)__popc(same));
    }
    atomicAdd(&ls, lsum);
    if (neg) atomicOr(&ng, 1u);
    if (b) atomicOr(&bd, 1u);
    __syncthreads();
    for (int s = threadIdx.x; s < HUFF_NSYM; s += blockDim.x) chist[k * HUFF_NSYM + s] = h[s];
    if (threadIdx.x == 0) {
        levsum[k] = ls;
        neg0[k] = ng;
        if (bd) atomicOr(bad, 1u);
    }
}

/* fh[s] = sum over chunks of chist[k][s]. One thread per symbol. */
__global__ void k_gp_hist_sum(unsigned long long *fh, const uint32_t *chist, size_t nch) {
    int s = threadIdx.x;
    if (s >= HUFF_NSYM) return;
    unsigned long long v = 0;
    for (size_t k = 0; k < nch; k++) v += chist[k * HUFF_NSYM + s];
    fh[s] = v;
}

/* exponent-segment bits of chunk k (from its histogram) and its exponent-0 count.
 * One block of HUFF_NSYM threads per chunk. elen: [256] emitted lengths */
__global__ void k_gp_ebits(unsigned long long *ebits, uint32_t *z0, const uint32_t *chist, const uint8_t *elen) {
    typedef cub::BlockReduce<unsigned long long, HUFF_NSYM> Reduce;
    __shared__ typename Reduce::TempStorage tmp;
    const size_t k = blockIdx.x;
    int s = threadIdx.x;
    unsigned long long v = (unsigned long long)chist[k * HUFF_NSYM + s] * elen[s];
    unsigned long long tot = Reduce(tmp).Sum(v);
    if (s == 0) {
        ebits[k] = tot;
        z0[k] = chist[k * HUFF_NSYM];
    }
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

/* per-chunk layout for the writer. bit positions are absolute in the buffer */
typedef struct {
    unsigned long long epos, lpos, mpos; /* first bit of each segment */
    unsigned long long ebits, lbits, mbits;
} GpWrite;

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

/* pass 2, one block of GP_THREADS per chunk.
 * buf32: the payload (zeroed chunk area); repr: [n] or NULL; emit: [256] code | len << 24 */
__global__ void k_gp_write(uint32_t *buf32, uint32_t *err, float *repr, const float *x, const uint8_t *lv, size_t n,
                           size_t chunk, const uint32_t *emit_g, uint32_t zsign, const GpWrite *lay) {
    typedef cub::BlockScan<Bits3, GP_THREADS> Scan;
    __shared__ typename Scan::TempStorage tmp;
    __shared__ uint32_t emit[HUFF_NSYM];
    for (int s = threadIdx.x; s < HUFF_NSYM; s += blockDim.x) emit[s] = emit_g[s];
    __syncthreads();
    const size_t k = blockIdx.x, lo = k * chunk, cnt = n - lo < chunk ? n - lo : chunk;
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
    GpWrite L = lay[k];
    if (threadIdx.x == 0 && (total.e != L.ebits || total.l != L.lbits || total.m != L.mbits)) atomicOr(err, 1u);
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

int64_t gcx_gcomp_encode(CodecCuda *g, uint8_t *pay, size_t cap, uint16_t *flags, const float *x, size_t n,
                         const CodecSide *side) {
    GpState *st = (GpState *)g->gp;
    int ntheta = (int)codec_param(&g->spec, "ntheta");
    uint64_t every = (uint64_t)codec_param(&g->spec, "every");
    size_t chunk = (size_t)codec_param(&g->spec, "chunk");
    *flags = 0;
    if (cap < GCOMP_BLOCK_HDR) return -GC_ERR_NOSPACE;
    uint8_t h[GCOMP_BLOCK_HDR];
    memset(h, 0, sizeof h);
    h[0] = GCOMP_MAGIC0;
    h[1] = GCOMP_MAGIC1;
    h[2] = GCOMP_DTYPE_FP32;
    h[3] = (uint8_t)ntheta;
    if (n == 0) { /* no table, no chunks, state untouched */
        cudaCheck(cudaMemcpy(pay, h, GCOMP_BLOCK_HDR, cudaMemcpyHostToDevice));
        return GCOMP_BLOCK_HDR;
    }
    const size_t nch = (n + chunk - 1) / chunk;
    const uint8_t *lv = side->levels;

    /* pass 1: per-chunk histograms */
    uint32_t *chist = (uint32_t *)gcx_dmalloc(nch * HUFF_NSYM * 4);
    unsigned long long *dlev = (unsigned long long *)gcx_dmalloc(nch * 8), *dfh = (unsigned long long *)gcx_dmalloc(
                                                                                 HUFF_NSYM * 8);
    uint32_t *dneg = (uint32_t *)gcx_dmalloc(nch * 4), *dbad = (uint32_t *)gcx_dmalloc(4);
    cudaCheck(cudaMemsetAsync(dbad, 0, 4, 0));
    k_gp_scan<<<(unsigned)nch, GP_THREADS>>>(chist, dlev, dneg, dbad, x, lv, n, chunk);
    cudaCheckLast();
    k_gp_hist_sum<<<1, HUFF_NSYM>>>(dfh, chist, nch);
    cudaCheckLast();
    uint64_t fh[HUFF_NSYM];
    uint32_t bad = 0;
    uint64_t *levsum = (uint64_t *)host_alloc(nch * 8), *ebits = (uint64_t *)host_alloc(nch * 8);
    uint32_t *neg0 = (uint32_t *)host_alloc(nch * 4), *z0 = (uint32_t *)host_alloc(nch * 4);
    cudaCheck(cudaMemcpy(fh, dfh, sizeof fh, cudaMemcpyDeviceToHost));
    cudaCheck(cudaMemcpy(&bad, dbad, 4, cudaMemcpyDeviceToHost));
    cudaCheck(cudaMemcpy(levsum, dlev, nch * 8, cudaMemcpyDeviceToHost));
    cudaCheck(cudaMemcpy(neg0, dneg, nch * 4, cudaMemcpyDeviceToHost));
    gcx_dfree(dlev);
    gcx_dfree(dfh);
    gcx_dfree(dneg);
    gcx_dfree(dbad);
    int64_t rc = 0;
    GcompTablePlan plan;
    int carry = 0, zsign = 0;
    size_t tablen = 0;
    const HuffCode *hc = &st->enc.code;
    size_t off = 0;
    uint64_t totbits = 0;
    GpWrite *lay = NULL;
    if (bad) rc = -GC_ERR_PARAM; /* a level above 3 */
    if (!rc) {
        for (size_t k = 0; k < nch; k++) zsign |= neg0[k] != 0;
        /* table (Section 4.4): bootstrap from this tensor, or rebuild every K
         * encodes from what was encoded since the last rebuild; carry it when it changes */
        gcomp_table_plan(&plan, &st->enc, fh, ntheta, every);
        hc = plan.code;
        carry = plan.carry;
        tablen = plan.tablen;
        /* sizes: every chunk's segments from its histogram alone */
        uint8_t elen[HUFF_NSYM];
        uint32_t emit[HUFF_NSYM];
        for (int s = 0; s < HUFF_NSYM; s++) {
            elen[s] = hc->emit_len[s];
            emit[s] = hc->emit[s] | (uint32_t)hc->emit_len[s] << 24;
        }
        uint8_t *delen = (uint8_t *)gcx_dmalloc(HUFF_NSYM);
        unsigned long long *deb = (unsigned long long *)gcx_dmalloc(nch * 8);
        uint32_t *dz0 = (uint32_t *)gcx_dmalloc(nch * 4);
        cudaCheck(cudaMemcpy(delen, elen, HUFF_NSYM, cudaMemcpyHostToDevice));
        k_gp_ebits<<<(unsigned)nch, HUFF_NSYM>>>(deb, dz0, chist, delen);
        cudaCheckLast();
        cudaCheck(cudaMemcpy(ebits, deb, nch * 8, cudaMemcpyDeviceToHost));
        cudaCheck(cudaMemcpy(z0, dz0, nch * 4, cudaMemcpyDeviceToHost));
        gcx_dfree(delen);
        gcx_dfree(deb);
        gcx_dfree(dz0);
        lay = (GpWrite *)host_alloc(nch * sizeof(GpWrite));
        size_t hdr_end = GCOMP_BLOCK_HDR + tablen + nch * GCOMP_CHUNK_HDR;
        off = hdr_end;
        uint8_t *hbuf = (uint8_t *)host_alloc(hdr_end);
        for (size_t k = 0; k < nch; k++) {
            uint64_t count = n - k * chunk < chunk ? n - k * chunk : chunk;
            uint64_t nnz = count - z0[k];
            uint64_t mbits = (uint64_t)GCOMP_MAN_BITS * nnz - GCOMP_LEVEL_SHIFT * levsum[k] + (zsign ? z0[k] : 0);
            uint64_t eb = ebits[k];
            lay[k].epos = 8ull * off;
            lay[k].lpos = 8ull * (off + bytes_of(eb));
            lay[k].mpos = 8ull * (off + bytes_of(eb) + bytes_of(2 * nnz));
            lay[k].ebits = eb;
            lay[k].lbits = 2 * nnz;
            lay[k].mbits = mbits;
            uint8_t *q = hbuf + GCOMP_BLOCK_HDR + tablen + k * GCOMP_CHUNK_HDR;
            put_u32(q, (uint32_t)(k * chunk));
            put_u32(q + 4, (uint32_t)count);
            put_u32(q + 8, (uint32_t)(eb + 2 * nnz + mbits));
            put_u32(q + 12, (uint32_t)eb);
            put_u32(q + 16, (uint32_t)nnz);
            off += bytes_of(eb) + bytes_of(2 * nnz) + bytes_of(mbits);
            totbits += eb + 2 * nnz + mbits;
        }
        if (off > cap) rc = -GC_ERR_NOSPACE;
        if (!rc) {
            put_u32(h + 4, plan.id);
            put_u32(h + 8, (uint32_t)nch);
            put_u64(h + 12, totbits);
            put_u64(h + 20, 32ull * n);
            memcpy(hbuf, h, GCOMP_BLOCK_HDR);
            if (carry) memcpy(hbuf + GCOMP_BLOCK_HDR, plan.tab, tablen);
            /* the chunk data is ORed into a zeroed scratch with a word of slack,
             * then copied: pay itself may end inside a word */
            uint8_t *buf = (uint8_t *)gcx_dmalloc(off + 8);
            cudaCheck(cudaMemsetAsync(buf + hdr_end, 0, off + 8 - hdr_end, 0));
            cudaCheck(cudaMemcpy(buf, hbuf, hdr_end, cudaMemcpyHostToDevice));
            uint32_t *demit = (uint32_t *)gcx_dmalloc(sizeof emit), *derr = (uint32_t *)gcx_dmalloc(4);
            GpWrite *dlay = (GpWrite *)gcx_dmalloc(nch * sizeof(GpWrite));
            cudaCheck(cudaMemcpy(demit, emit, sizeof emit, cudaMemcpyHostToDevice));
            cudaCheck(cudaMemcpy(dlay, lay, nch * sizeof(GpWrite), cudaMemcpyHostToDevice));
            cudaCheck(cudaMemsetAsync(derr, 0, 4, 0));
            k_gp_write<<<(unsigned)nch, GP_THREADS>>>((uint32_t *)buf, derr, side->repr, x, lv, n, chunk, demit,
                                                     (uint32_t)zsign, dlay);
            cudaCheckLast();
            uint32_t herr = 0;
            cudaCheck(cudaMemcpy(&herr, derr, 4, cudaMemcpyDeviceToHost));
            if (herr) rc = -GC_ERR_NOSPACE; /* sizes disagree with the histograms: internal error, as the CPU */
            else cudaCheck(cudaMemcpyAsync(pay, buf, off, cudaMemcpyDeviceToDevice, 0));
            gcx_dfree(buf);
            gcx_dfree(demit);
            gcx_dfree(derr);
            gcx_dfree(dlay);
        }
        free(hbuf);
    }
    gcx_dfree(chist);
    free(levsum);
    free(ebits);
    free(neg0);
    free(z0);
    free(lay);
    if (rc) return rc;
    /* commit the state only once the frame is complete */
    gcomp_table_commit(&st->enc, &plan, fh);
    *flags = (uint16_t)((carry ? GCOMP_FLAG_TABLE : 0) | (zsign ? GCOMP_FLAG_ZSIGN : 0));
    return (int64_t)off;
}

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

/* one thread per chunk: compress/gcomp.c gp_decode_chunk. out: [n] scratch
 * (a chunk may fail after writing values); rc: [nch]; neg: [nch] */
__global__ void k_gp_dec(float *out, int *rc, uint32_t *neg, const uint8_t *pay, size_t len, const uint16_t *lut,
                         const uint8_t *hclen, int nth, uint32_t zs, const GpChunkD *ck, size_t nch) {
    size_t k = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= nch) return;
    GpChunkD c = ck[k];
    unsigned long long lbits = 2ull * c.nnz;
    unsigned long long pe = 8ull * c.off, pl = pe + 8ull * ((c.ebits + 7) >> 3), pm = pl + 8ull * ((lbits + 7) >> 3);
    unsigned long long ee = pe + c.ebits, le = pl + lbits, me = pm + c.mbits;
    uint32_t anyneg = 0, bad = 0;
    float *o = out + c.start;
    for (uint32_t i = 0; i < c.count; i++) {
        unsigned long long bits = d_peek(pay, len, pe);
        uint32_t ent = lut[bits >> (64 - nth)], l = HUFF_LUT_LEN(ent), e = HUFF_LUT_SYM(ent);
        if (!l) {
            rc[k] = -GC_ERR_CORRUPT; /* no code starts with these bits */
            return;
        }
        pe += l;
        if (ent & HUFF_LUT_ESC) { /* escape + raw exponent (Section 4.3) */
            e = (uint32_t)(bits >> (64 - nth - HUFF_RAW_BITS)) & 0xFFu;
            pe += HUFF_RAW_BITS;
            if (hclen[e]) {
                rc[k] = -GC_ERR_CORRUPT; /* an escaped symbol that has a code */
                return;
            }
        }
        uint32_t nzm = 0u - (uint32_t)(e != 0);
        uint32_t L = (uint32_t)(d_peek(pay, len, pl) >> 62) & nzm;
        pl += 2 & nzm;
        bad |= (e == 0xFFu) & (L != 0);
        int sh = GCOMP_LEVEL_SHIFT * (int)L;
        int nb = (int)(((uint32_t)(GCOMP_MAN_BITS - sh) & nzm) | (zs & ~nzm));
        uint32_t mv = (uint32_t)((d_peek(pay, len, pm) >> 1) >> (63 - nb));
        pm += (unsigned long long)nb;
        uint32_t sm = mv << sh;
        uint32_t u = ((((sm >> 23) << 31) | (e << 23) | (sm & 0x7FFFFFu)) & nzm) | ((mv << 31) & ~nzm);
        anyneg |= u & ~nzm;
        o[i] = __uint_as_float(u);
    }
    if (bad || pe != ee || pl != le || pm != me) {
        rc[k] = -GC_ERR_CORRUPT;
        return;
    }
    const uint8_t *p = pay + c.off;
    size_t eb = (size_t)((c.ebits + 7) >> 3), lb = (size_t)((lbits + 7) >> 3);
    if (!d_pad_ok(p, c.ebits) || !d_pad_ok(p + eb, lbits) || !d_pad_ok(p + eb + lb, c.mbits)) {
        rc[k] = -GC_ERR_CORRUPT;
        return;
    }
    neg[k] = anyneg != 0;
    rc[k] = 0;
}

/* out[i] += weight * v[i], rounded as the CPU's out[i] + weight * v[i]. out, v: [n] */
__global__ void k_gp_acc(float *out, const float *v, size_t n, float weight) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        out[i] = __fadd_rn(out[i], __fmul_rn(weight, v[i]));
}

/* compress/gcomp.c gp_table_set, plus the device copies of the lookup table
 * and of the code lengths */
static void gp_table_set(GpTab *t, const HuffCode *hc, uint32_t id) {
    int ntheta = hc->ntheta;
    t->hc = *hc;
    if (t->lut_n != ntheta || !t->lut) {
        free(t->lut);
        if (t->dlut) cudaCheck(cudaFree(t->dlut));
        t->lut = (uint16_t *)host_alloc(sizeof(uint16_t) << ntheta);
        cudaCheck(cudaMalloc((void **)&t->dlut, sizeof(uint16_t) << ntheta));
        t->lut_n = ntheta;
    }
    if (!t->dlen) cudaCheck(cudaMalloc((void **)&t->dlen, HUFF_NSYM));
    huff_lut_build(t->lut, &t->hc);
    cudaCheck(cudaMemcpy(t->dlut, t->lut, sizeof(uint16_t) << ntheta, cudaMemcpyHostToDevice));
    cudaCheck(cudaMemcpy(t->dlen, t->hc.len, HUFF_NSYM, cudaMemcpyHostToDevice));
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

/* The payload's parts the host parses (block header, table section, chunk headers: a
 * prefix of at most 28 + GCOMP_TABLE_MAX + 20 C bytes) are read from host (a host frame)
 * or copied down from p->d (a device frame); the chunks are decoded on the device, from
 * p->d, or from one upload of host once the headers have passed */
int gcx_gcomp_decode(CodecCuda *g, float *out, size_t n, float weight, int acc, const Pay *p, const uint8_t *host,
                     uint16_t flags) {
    GpState *st = (GpState *)g->gp;
    size_t len = p->len;
    uint8_t *pre = NULL; /* the prefix copied down from a device frame */
    const uint8_t *payload = host;
    if (!host) {
        size_t first = len < GCOMP_BLOCK_HDR + GCOMP_TABLE_MAX ? len : GCOMP_BLOCK_HDR + GCOMP_TABLE_MAX;
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
    GpTab *t;
    if (b.table) {
        size_t used = 0;
        rc = gp_table_read(&st->pend, &used, payload + at, len - at, ntheta, b.id); /* < 2 + 2 * 256 bytes */
        if (rc) {
            free(pre);
            return rc;
        }
        at += used;
        t = &st->pend;
    } else {
        t = &st->cur;
        if (!st->cur.have || st->cur.id != b.id || st->cur.hc.ntheta != ntheta) rc = -GC_ERR_STATE;
    }
    if (!rc) rc = gcomp_chunks_fit(len, at, &b); /* before the per-chunk memory */
    if (!rc && pre) { /* the chunk headers too */
        pre = (uint8_t *)reallocCheck(pre, at + nch * GCOMP_CHUNK_HDR);
        payload = pre;
        cudaCheck(cudaMemcpy(pre + at, p->d + at, nch * GCOMP_CHUNK_HDR, cudaMemcpyDeviceToHost));
    }
    if (rc) {
        free(pre);
        return rc;
    }
    GpChunkD *ck = (GpChunkD *)host_alloc(nch * sizeof(GpChunkD));
    rc = gcomp_chunks_parse(ck, payload, len, at, &b, n);
    if (!rc) {
        const uint8_t *dpay = host ? gcx_upload(host, len) : p->d;
        GpChunkD *dck = (GpChunkD *)gcx_dmalloc((size_t)nch * sizeof(GpChunkD));
        int *drc = (int *)gcx_dmalloc((size_t)nch * sizeof(int));
        uint32_t *dneg = (uint32_t *)gcx_dmalloc((size_t)nch * 4);
        float *dv = (float *)gcx_dmalloc(n * sizeof(float)); /* the values, before they reach out */
        cudaCheck(cudaMemcpy(dck, ck, (size_t)nch * sizeof(GpChunkD), cudaMemcpyHostToDevice));
        cudaCheck(cudaMemsetAsync(dneg, 0, (size_t)nch * 4, 0));
        unsigned blocks = (unsigned)((nch + 63) / 64);
        k_gp_dec<<<blocks, 64>>>(dv, drc, dneg, dpay, len, t->dlut, t->dlen, ntheta, (uint32_t)zsign, dck,
                                 (size_t)nch);
        cudaCheckLast();
        int *hrc = (int *)host_alloc((size_t)nch * sizeof(int));
        uint32_t *hneg = (uint32_t *)host_alloc((size_t)nch * 4);
        cudaCheck(cudaMemcpy(hrc, drc, (size_t)nch * sizeof(int), cudaMemcpyDeviceToHost));
        cudaCheck(cudaMemcpy(hneg, dneg, (size_t)nch * 4, cudaMemcpyDeviceToHost));
        int anyneg = 0;
        for (size_t k = 0; k < nch && !rc; k++) {
            rc = hrc[k];
            anyneg |= hneg[k] != 0;
        }
        if (!rc && zsign && !anyneg) rc = -GC_ERR_CORRUPT; /* ZSIGN set without a negative zero */
        if (!rc && acc) { /* the frame is valid: only now the output */
            k_gp_acc<<<gcx_grid(n), GP_THREADS>>>(out, dv, n, weight);
            cudaCheckLast();
        } else if (!rc) {
            cudaCheck(cudaMemcpyAsync(out, dv, n * sizeof(float), cudaMemcpyDeviceToDevice, 0));
        }
        free(hrc);
        free(hneg);
        if (host) gcx_dfree((void *)dpay);
        gcx_dfree(dck);
        gcx_dfree(drc);
        gcx_dfree(dneg);
        gcx_dfree(dv);
    }
    free(ck);
    free(pre);
    if (rc) return rc;
    if (t == &st->pend) { /* commit the carried table */
        GpTab tmp = st->cur;
        st->cur = st->pend;
        st->pend = tmp;
    }
    return 0;
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
    return gcomp_state_write(buf, cap, &st->enc, st->cur.have, &st->cur.hc, st->cur.id);
}

/* the whole blob is checked before anything is written: a refused load
 * changes nothing */
int gcx_gcomp_state_load(CodecCuda *g, const uint8_t *buf, size_t len) {
    GpState *st = (GpState *)g->gp;
    GcompStateBlob b;
    int rc = gcomp_state_parse(&b, buf, len, (int)codec_param(&g->spec, "ntheta"));
    if (rc) return rc;
    st->enc = b.enc;
    if (b.dec_have) gp_table_set(&st->cur, &b.dec, b.dec_id); /* builds and uploads its lookup table */
    st->cur.have = b.dec_have;
    return 0;
}
