/* gcomp: near-lossless gradient compression (Li et al., "Near-Lossless
 * Gradient Compression for Data-Parallel Distributed DNN Training", SoCC 2024).
 *
 * Each float32 value is split into its 8-bit exponent and its mantissa with
 * the sign incorporated (Section 6.1):
 *  - the exponent is Huffman coded with codes of at most n_theta bits; an
 *    exponent whose native code is longer is sent as an n_theta-bit escape
 *    code (the first overly long code truncated to n_theta bits) followed by
 *    its raw 8 bits (Section 4.3, compress/huffman.c); decoding uses a
 *    2^n_theta-entry lookup table (Section 4.5, Figure 5);
 *  - the Huffman table is built from observed exponent frequencies and rebuilt
 *    every K encodes (`every`, default 50, Section 4.4) from the values
 *    encoded since the last rebuild; a frame carries the table whenever it
 *    changes and names the table it uses by id (CRC-32C of the table bytes),
 *    so a decoder instance keeps the last table it saw and rejects a frame
 *    that needs a table it does not have (GC_ERR_STATE). Bootstrap: the paper
 *    builds the first table from prior knowledge; we build it from the
 *    histogram of the first tensor encoded and carry it in that frame;
 *  - the mantissa with its sign (24 bits) is truncated toward zero by 0, 6, 12
 *    or 18 low bits as given per value by CodecSide.levels (0..3), and the
 *    2-bit level is stored per value (Section 5.1, multi-level quantization);
 *  - zero and denormal values (exponent 0) are pruned to the exponent code
 *    alone and decode as zero (Section 5.2). Extension: if some exponent-0
 *    value of the tensor has its sign bit set, the frame sets flag ZSIGN and
 *    every exponent-0 value carries 1 sign bit, so -0.0 round-trips and a
 *    denormal becomes a zero of its own sign; otherwise they cost nothing;
 *  - inf and NaN (exponent 255) are coded like any exponent but always at
 *    level 0, so they round-trip bit-exactly (NaN payload included).
 * With levels all 0 the round trip is bit-exact for every float except
 * denormals (flushed to a zero of the same sign). CodecSide.repr receives
 * exactly what decoding the frame gives.
 *
 * Layout (Section 6.1, Figure 7): a block header, the table when carried, one
 * header per chunk, then the chunks. Chunks hold `chunk` consecutive values
 * and are encoded and decoded in parallel by OpenMP threads; sizes are
 * computed in a first pass, so the bytes do not depend on the thread count.
 * Each chunk has three byte-aligned segments: exponent codes, 2-bit levels
 * (for values with a nonzero exponent), mantissas. Full byte layout:
 * docs/FORMAT.md section 10.
 *
 * Decoding writes nothing before the whole frame is known to be valid: the
 * chunks are decoded in parallel into a scratch array of n floats, and only
 * when every chunk has passed its checks are the values copied (or added) to
 * the output and a carried table made the held one. A refused frame leaves
 * the output and the decoder's state as they were (docs/FORMAT.md section 10).
 *
 * State: an encoder table + exponent histogram since the last rebuild, and a
 * decoder table, kept separately so one instance may both encode and decode. */
#include <stdlib.h>
#include <string.h>
#ifdef HAVE_OPENMP
#include <omp.h>
#endif

#include "codec.h"
#include "common/check.h"
#include "gcomp.h"
#include "gcomp_state.h"
#include "huffman.h"

static const CodecParamDesc gcomp_params[] = {
    {"ntheta", 8, 1, HUFF_MAX_NTHETA, 1,
     "max Huffman code length n_theta; longer codes -> escape + raw exponent (4.3, Table 1 uses 8)", 0},
    {"every", 50, 1, 1e9, 1, "rebuild the Huffman table every K encodes (4.4)", 0},
    {"chunk", 16384, 64, 1 << 24, 1, "values per chunk; chunks are coded in parallel (6.1, 6.2)", 0},
};

typedef GcompChunk GpChunk;

typedef struct {
    int have;
    uint32_t id;
    HuffCode hc;
    uint16_t *lut; /* [1 << hc.ntheta] */
    int lut_n;     /* n_theta the lut was allocated for */
} GpDecTable;

typedef struct {
    GcompEnc enc; /* encoder: table, exponent counts and encodes since the last rebuild */
    /* decoder */
    GpDecTable cur, pend;
    /* scratch, grown on demand */
    uint32_t *chist; /* [nchunks][256] */
    size_t chist_cap;
    GpChunk *ck;
    int *rc;
    size_t ck_cap;
    uint8_t *scr; /* encoder: one gp_scratch_size region per thread */
    size_t scr_cap;
    float *dec; /* decoder: [n] the frame's values, before they reach the output */
    size_t dec_cap;
} GcompState;

static void gp_state_free(Codec *c) {
    GcompState *st = c->state;
    if (!st) return;
    free(st->cur.lut);
    free(st->pend.lut);
    free(st->chist);
    free(st->ck);
    free(st->rc);
    free(st->scr);
    free(st->dec);
}

static void gp_grow(GcompState *st, size_t nch, int need_hist) {
    if (nch > st->ck_cap) {
        free(st->ck);
        free(st->rc);
        st->ck = mallocCheck(nch * sizeof *st->ck);
        st->rc = mallocCheck(nch * sizeof *st->rc);
        st->ck_cap = nch;
    }
    if (need_hist && nch > st->chist_cap) {
        free(st->chist);
        st->chist = mallocCheck(nch * HUFF_NSYM * sizeof *st->chist);
        st->chist_cap = nch;
    }
}

/* threads for n values: CodecSide.threads when set, else the OpenMP default,
 * except that small tensors stay on the calling thread (a parallel region
 * costs more than coding them); the bytes are the same either way */
#define GP_PAR_MIN 65536
static int gp_threads(int want, size_t n) {
#ifdef HAVE_OPENMP
    if (want > 0) return want;
    return n < GP_PAR_MIN ? 1 : omp_get_max_threads();
#else
    (void)want, (void)n;
    return 1;
#endif
}

static inline uint32_t f2u(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
static inline float u2f(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static void put_u64(uint8_t *p, uint64_t v) {
    put_u32(p, (uint32_t)v);
    put_u32(p + 4, (uint32_t)(v >> 32));
}
static inline size_t bytes_of(uint64_t bits) { return (size_t)((bits + 7) >> 3); }

/* Hot-loop bit I/O, in the bit order of bitio.h (MSB first: the first bit is
 * bit 7 of byte 0), written for speed:
 *  - GP_PUT appends bits to a (p, acc, n) writer held in registers: the n < 8
 *    pending bits plus the new ones are stored MSB-aligned with one 8-byte
 *    store, then p advances over the complete bytes. It needs 8 writable bytes
 *    at p, so encoders write into scratch with 8 bytes of slack per segment
 *    and copy the exact bytes out.
 *  - gp_peek returns the 64 bits at any bit position of the payload with one
 *    load; bytes past the payload read as zero. Decoders read every segment
 *    through it, bounded by the payload (memory safety), and check the exact
 *    segment positions afterwards (format validity). */
#define GP_PUT(p, acc, n, v, nb)                                      \
    do {                                                              \
        (acc) = ((acc) << (nb)) | (v); /* v < 2^nb, nb <= 32 */       \
        (n) += (nb);                                                  \
        uint64_t o_ = __builtin_bswap64(((acc) << 1) << (63 - (n))); \
        memcpy((p), &o_, 8);                                          \
        (p) += (n) >> 3;                                              \
        (n) &= 7;                                                     \
    } while (0)

/* GP_PUT for low-rate streams: the pending bits stay in acc until 32 are
 * complete, then 4 bytes are stored (n < 32 between calls). */
#define GP_PUT32(p, acc, n, v, nb)                                      \
    do {                                                                \
        (acc) = ((acc) << (nb)) | (v); /* v < 2^nb, nb <= 32 */         \
        (n) += (nb);                                                    \
        if ((n) >= 32) {                                                \
            (n) -= 32;                                                  \
            uint32_t o_ = __builtin_bswap32((uint32_t)((acc) >> (n))); \
            memcpy((p), &o_, 4);                                        \
            (p) += 4;                                                   \
        }                                                               \
    } while (0)

/* flush a GP_PUT32 writer: its remaining n < 32 bits, zero-padded to bytes */
#define GP_FLUSH32(p, acc, n)                                                    \
    do {                                                                         \
        uint64_t o_ = __builtin_bswap64(((acc) << 1) << (63 - (n)));            \
        memcpy((p), &o_, 8);                                                     \
        (p) += ((n) + 7) >> 3;                                                   \
        (n) = 0;                                                                 \
    } while (0)

/* the 64 bits starting at bit pos of buf, MSB-aligned; the top 57 are valid */
static inline uint64_t gp_peek(const uint8_t *buf, size_t len, uint64_t pos) {
    uint64_t byte = pos >> 3, v = 0;
    if (__builtin_expect(byte + 8 <= len, 1)) {
        memcpy(&v, buf + byte, 8);
        v = __builtin_bswap64(v);
    } else {
        for (uint64_t i = byte; i < byte + 8; i++) v = (v << 8) | (i < len ? buf[i] : 0);
    }
    return v << (pos & 7);
}

/* the same without the bounds check: the caller guarantees byte + 8 <= len */
static inline uint64_t gp_peek_fast(const uint8_t *buf, uint64_t pos) {
    uint64_t v;
    memcpy(&v, buf + (pos >> 3), 8);
    return __builtin_bswap64(v) << (pos & 7);
}

static size_t gp_max_payload(const Codec *c, size_t n) {
    int ntheta = (int)codec_param(&c->spec, "ntheta");
    size_t chunk = (size_t)codec_param(&c->spec, "chunk");
    size_t nch = (n + chunk - 1) / chunk;
    /* per value: escape + raw exponent, level, full mantissa; 3 padded segments per chunk */
    return GCOMP_BLOCK_HDR + GCOMP_TABLE_MAX + nch * (GCOMP_CHUNK_HDR + 3) +
           (n * (size_t)(ntheta + HUFF_RAW_BITS + 2 + GCOMP_MAN_BITS) + 7) / 8;
}

/* ---------------------------------------------------------------- encode */

/* pass 1 over one chunk: exponent histogram, applied level sum, negative zeros.
 * h: [256] out; x: [count]; lv: [count] or NULL */
static int gp_scan_chunk(uint32_t *h, GpChunk *k, const float *x, const uint8_t *lv, size_t count) {
    uint32_t h2[HUFF_NSYM]; /* a second histogram breaks the increment chain on repeated exponents */
    memset(h, 0, HUFF_NSYM * sizeof *h);
    memset(h2, 0, sizeof h2);
    uint64_t levsum = 0;
    uint32_t neg0 = 0, bad = 0;
    size_t i = 0;
    for (; i + 2 <= count; i += 2) {
        uint32_t u0 = f2u(x[i]), u1 = f2u(x[i + 1]), e0 = (u0 >> 23) & 0xFF, e1 = (u1 >> 23) & 0xFF;
        h[e0]++;
        h2[e1]++;
        neg0 |= (e0 == 0) & (u0 >> 31);
        neg0 |= (e1 == 0) & (u1 >> 31);
    }
    for (; i < count; i++) {
        uint32_t u = f2u(x[i]), e = (u >> 23) & 0xFF;
        h[e]++;
        neg0 |= (e == 0) & (u >> 31);
    }
    for (int s = 0; s < HUFF_NSYM; s++) h[s] += h2[s];
    if (lv)
        for (i = 0; i < count; i++) {
            uint32_t e = (f2u(x[i]) >> 23) & 0xFF;
            bad |= lv[i] > 3;
            levsum += (e - 1u < 254u) ? lv[i] : 0; /* exponents 1..254 only */
        }
    k->levsum = levsum;
    k->neg0 = (int)neg0;
    return bad ? -GC_ERR_PARAM : 0;
}

/* scratch one thread needs for a chunk of count values: the three segments
 * at their worst case, each with 8 bytes of slack for GP_PUT */
static size_t gp_scratch_size(size_t count, int ntheta) {
    return bytes_of(count * (uint64_t)(ntheta + HUFF_RAW_BITS)) + bytes_of(2ull * count) + 3 * count + 3 * 8;
}

/* the per-value loop of pass 2, specialized on levels/repr presence.
 * Branch-free: the zero/nonzero cases are selected with masks, since zeros
 * come at random positions in gradients. */
static inline __attribute__((always_inline)) void gp_write_values(uint8_t **pe_, uint64_t *ae_, int *ne_,
                                                                  uint8_t **pl_, uint64_t *al_, int *nl_,
                                                                  uint8_t **pm_, uint64_t *am_, int *nm_,
                                                                  float *repr, const uint32_t *emit, uint32_t zsign,
                                                                  const float *x, const uint8_t *lv, size_t count,
                                                                  const int has_lv, const int has_repr) {
    uint8_t *pe = *pe_, *pl = *pl_, *pm = *pm_;
    uint64_t ae = *ae_, al = *al_, am = *am_;
    int ne = *ne_, nl = *nl_, nm = *nm_;
    for (size_t i = 0; i < count; i++) {
        uint32_t u = f2u(x[i]), e = (u >> 23) & 0xFF, c = emit[e];
        uint32_t nzm = 0u - (uint32_t)(e != 0); /* all ones for a nonzero exponent */
        /* step (1): the exponent's Huffman code, or escape + raw exponent */
        GP_PUT32(pe, ae, ne, c & 0xFFFFFF, (int)(c >> 24));
        /* step (2): the 2-bit level, for a nonzero exponent only; inf/NaN
         * (255) always level 0 so they stay exact */
        uint32_t L = has_lv ? lv[i] & (0u - (uint32_t)(e - 1u < 254u)) : 0;
        int sh = GCOMP_LEVEL_SHIFT * (int)L;
        GP_PUT32(pl, al, nl, L, (int)(nzm & 2));
        /* step (3): mantissa with the sign, truncated toward zero by 6*L bits;
         * exponent 0 is pruned to its code (Section 5.2), plus the sign when ZSIGN */
        uint32_t sm24 = (((u >> 31) << 23) | (u & 0x7FFFFF)) >> sh;
        uint32_t mv = (sm24 & nzm) | ((u >> 31) & zsign & ~nzm);
        int mnb = (int)(((uint32_t)(GCOMP_MAN_BITS - sh) & nzm) | (zsign & ~nzm));
        GP_PUT(pm, am, nm, mv, mnb);
        if (has_repr) repr[i] = u2f(u & ((~((1u << sh) - 1) & nzm) | (0x80000000u & ~nzm)));
    }
    *pe_ = pe, *pl_ = pl, *pm_ = pm;
    *ae_ = ae, *al_ = al, *am_ = am;
    *ne_ = ne, *nl_ = nl, *nm_ = nm;
}

/* pass 2 over one chunk: its three segments and its repr (Section 6.1).
 * p: [chunk bytes] out; scr: [gp_scratch_size] scratch; repr: [count] out or
 * NULL; emit: [256] code | length << 24; x: [count]; lv: [count] or NULL */
static int gp_write_chunk(uint8_t *p, uint8_t *scr, float *repr, const uint32_t *emit, const GpChunk *k,
                          uint32_t zsign, int ntheta, const float *x, const uint8_t *lv) {
    size_t count = k->count;
    uint8_t *se = scr, *sl = se + bytes_of(count * (uint64_t)(ntheta + HUFF_RAW_BITS)) + 8,
            *sm = sl + bytes_of(2ull * count) + 8;
    uint8_t *pe = se, *pl = sl, *pm = sm;
    uint64_t ae = 0, al = 0, am = 0;
    int ne = 0, nl = 0, nm = 0;
#define GP_W(a, b) gp_write_values(&pe, &ae, &ne, &pl, &al, &nl, &pm, &am, &nm, repr, emit, zsign, x, lv, count, a, b)
    if (lv && repr) GP_W(1, 1);
    else if (lv) GP_W(1, 0);
    else if (repr) GP_W(0, 1);
    else GP_W(0, 0);
#undef GP_W
    GP_FLUSH32(pe, ae, ne);
    GP_FLUSH32(pl, al, nl);
    size_t eb = (size_t)(pe - se), lb = (size_t)(pl - sl), mb = (size_t)(pm - sm) + (nm > 0);
    /* the sizes were computed from the histograms; anything else is an internal error */
    if (eb != bytes_of(k->ebits) || lb != bytes_of(2ull * k->nnz) || mb != bytes_of(k->mbits)) return -GC_ERR_NOSPACE;
    memcpy(p, se, eb);
    memcpy(p + eb, sl, lb);
    memcpy(p + eb + lb, sm, mb);
    return 0;
}

static int64_t gp_encode(Codec *c, uint8_t *payload, size_t cap, uint16_t *flags, const float *x, size_t n,
                         const CodecSide *side) {
    GcompState *st = c->state;
    int ntheta = (int)codec_param(&c->spec, "ntheta");
    uint64_t every = (uint64_t)codec_param(&c->spec, "every");
    size_t chunk = (size_t)codec_param(&c->spec, "chunk");
    *flags = 0;
    if (cap < GCOMP_BLOCK_HDR) return -GC_ERR_NOSPACE;
    uint8_t *h = payload;
    h[0] = GCOMP_MAGIC0;
    h[1] = GCOMP_MAGIC1;
    h[2] = GCOMP_DTYPE_FP32;
    h[3] = (uint8_t)ntheta;
    if (n == 0) { /* nothing to code: no table, no chunks, state untouched */
        put_u32(h + 4, 0);
        put_u32(h + 8, 0);
        put_u64(h + 12, 0);
        put_u64(h + 20, 0);
        return GCOMP_BLOCK_HDR;
    }
    size_t nch = (n + chunk - 1) / chunk;
    gp_grow(st, nch, 1);
    GpChunk *ck = st->ck;
    int *rc = st->rc;
    int T = gp_threads(side->threads, n);
    const uint8_t *lv = side->levels;

    /* pass 1: per-chunk histograms (also the bootstrap table's input) */
#ifdef HAVE_OPENMP
#pragma omp parallel for num_threads(T) schedule(dynamic, 1) if (T > 1 && nch > 1)
#endif
    for (size_t k = 0; k < nch; k++) {
        size_t lo = k * chunk, cnt = n - lo < chunk ? n - lo : chunk;
        ck[k].start = (uint32_t)lo;
        ck[k].count = (uint32_t)cnt;
        rc[k] = gp_scan_chunk(st->chist + k * HUFF_NSYM, &ck[k], x + lo, lv ? lv + lo : NULL, cnt);
    }
    uint64_t fh[HUFF_NSYM] = {0};
    int zsign = 0;
    for (size_t k = 0; k < nch; k++) {
        if (rc[k]) return rc[k];
        for (int s = 0; s < HUFF_NSYM; s++) fh[s] += st->chist[k * HUFF_NSYM + s];
        zsign |= ck[k].neg0;
    }

    /* table (Section 4.4): bootstrap from this tensor, or rebuild every K encodes
     * from what was encoded since the last rebuild; carry it when it changes */
    GcompTablePlan plan;
    gcomp_table_plan(&plan, &st->enc, fh, ntheta, every);
    const HuffCode *hc = plan.code;
    int carry = plan.carry;
    size_t tablen = plan.tablen;

    /* sizes: every chunk's segments, from its histogram alone */
    size_t off = GCOMP_BLOCK_HDR + tablen + nch * GCOMP_CHUNK_HDR;
    uint64_t totbits = 0;
    for (size_t k = 0; k < nch; k++) {
        const uint32_t *ch = st->chist + k * HUFF_NSYM;
        uint64_t eb = 0;
        for (int s = 0; s < HUFF_NSYM; s++) eb += (uint64_t)ch[s] * hc->emit_len[s];
        ck[k].nnz = ck[k].count - ch[0];
        ck[k].ebits = eb;
        ck[k].mbits = (uint64_t)GCOMP_MAN_BITS * ck[k].nnz - GCOMP_LEVEL_SHIFT * ck[k].levsum + (zsign ? ch[0] : 0);
        ck[k].off = off;
        off += bytes_of(eb) + bytes_of(2ull * ck[k].nnz) + bytes_of(ck[k].mbits);
        totbits += eb + 2ull * ck[k].nnz + ck[k].mbits;
    }
    if (off > cap) return -GC_ERR_NOSPACE;

    put_u32(h + 4, plan.id);
    put_u32(h + 8, (uint32_t)nch);
    put_u64(h + 12, totbits);
    put_u64(h + 20, 32ull * n);
    size_t at = GCOMP_BLOCK_HDR;
    if (carry) {
        memcpy(payload + at, plan.tab, tablen);
        at += tablen;
    }
    for (size_t k = 0; k < nch; k++, at += GCOMP_CHUNK_HDR) {
        put_u32(payload + at, ck[k].start);
        put_u32(payload + at + 4, ck[k].count);
        put_u32(payload + at + 8, (uint32_t)(ck[k].ebits + 2ull * ck[k].nnz + ck[k].mbits));
        put_u32(payload + at + 12, (uint32_t)ck[k].ebits);
        put_u32(payload + at + 16, ck[k].nnz);
    }

    /* pass 2: the chunks, in parallel (Section 6.2) */
    uint32_t emit[HUFF_NSYM];
    for (int s = 0; s < HUFF_NSYM; s++) emit[s] = hc->emit[s] | (uint32_t)hc->emit_len[s] << 24;
    size_t per = gp_scratch_size(nch > 1 ? chunk : n, ntheta);
    if ((size_t)T * per > st->scr_cap) {
        free(st->scr);
        st->scr_cap = (size_t)T * per;
        st->scr = mallocCheck(st->scr_cap);
    }
#ifdef HAVE_OPENMP
#pragma omp parallel for num_threads(T) schedule(dynamic, 1) if (T > 1 && nch > 1)
#endif
    for (size_t k = 0; k < nch; k++) {
        size_t lo = ck[k].start;
#ifdef HAVE_OPENMP
        uint8_t *scr = st->scr + (size_t)omp_get_thread_num() * per;
#else
        uint8_t *scr = st->scr;
#endif
        rc[k] = gp_write_chunk(payload + ck[k].off, scr, side->repr ? side->repr + lo : NULL, emit, &ck[k],
                               (uint32_t)zsign, ntheta, x + lo, lv ? lv + lo : NULL);
    }
    for (size_t k = 0; k < nch; k++)
        if (rc[k]) return rc[k];

    /* commit the state only once the frame is complete */
    gcomp_table_commit(&st->enc, &plan, fh);
    *flags = (uint16_t)((carry ? GCOMP_FLAG_TABLE : 0) | (zsign ? GCOMP_FLAG_ZSIGN : 0));
    return (int64_t)off;
}

/* ---------------------------------------------------------------- decode */

/* a segment's padding bits (after `bits` bits) must be zero. p: [bytes_of(bits)] */
static int gp_pad_ok(const uint8_t *p, uint64_t bits) {
    int r = (int)(bits & 7);
    return r == 0 || (p[bits >> 3] & ((1u << (8 - r)) - 1)) == 0;
}

/* decode values [i, i + m) of a chunk; PEEK reads a segment at a position.
 * Positions are absolute bit offsets in the payload; the zero/nonzero cases
 * are selected with masks (no data-dependent branches). Returns 0, or
 * -GC_ERR_CORRUPT at an index no code starts with or an escaped symbol that
 * has a code. */
#define GP_DECODE_LOOP(PEEK)                                                                            \
    for (; i < m; i++) {                                                                                \
        /* exponent by one table lookup (Section 4.5) */                                                \
        uint64_t bits = PEEK(pe);                                                                       \
        uint32_t ent = lut[bits >> (64 - n)], l = HUFF_LUT_LEN(ent), e = HUFF_LUT_SYM(ent);             \
        if (__builtin_expect(!l, 0)) return -GC_ERR_CORRUPT; /* no code starts with these bits */       \
        pe += l;                                                                                        \
        if (__builtin_expect((ent & HUFF_LUT_ESC) != 0, 0)) { /* escape + raw exponent (4.3) */         \
            e = (uint32_t)(bits >> (64 - n - HUFF_RAW_BITS)) & 0xFF;                                    \
            pe += HUFF_RAW_BITS;                                                                        \
            if (hc->len[e]) return -GC_ERR_CORRUPT; /* an escaped symbol that has a code */             \
        }                                                                                               \
        /* level and mantissa only for a nonzero exponent (Section 6.1) */                              \
        uint32_t nzm = 0u - (uint32_t)(e != 0);                                                         \
        uint32_t L = (uint32_t)(PEEK(pl) >> 62) & nzm;                                                  \
        pl += 2 & nzm;                                                                                  \
        bad |= (e == 0xFF) & (L != 0); /* inf/NaN are always level 0 */                                 \
        int sh = GCOMP_LEVEL_SHIFT * (int)L;                                                               \
        int nb = (int)(((uint32_t)(GCOMP_MAN_BITS - sh) & nzm) | (zs & ~nzm));                             \
        uint32_t mv = (uint32_t)((PEEK(pm) >> 1) >> (63 - nb)); /* top nb bits, nb may be 0 */          \
        pm += (uint64_t)nb;                                                                             \
        uint32_t sm = mv << sh;                                                                         \
        uint32_t u = ((((sm >> 23) << 31) | (e << 23) | (sm & 0x7FFFFF)) & nzm) | ((mv << 31) & ~nzm); \
        anyneg |= u & ~nzm;                                                                             \
        out[i] = u2f(u);                                                                                \
    }

/* the per-value loop of one chunk: blocks where every reader stays 8 bytes
 * clear of the payload end read without bounds checks (a value moves a reader
 * by at most 3 bytes) */
#define GP_BLOCK 256
static inline __attribute__((always_inline)) int gp_decode_values(float *out, uint64_t *pe_, uint64_t *pl_,
                                                                  uint64_t *pm_, uint32_t *anyneg_, uint32_t *bad_,
                                                                  const HuffCode *hc, const uint16_t *lut, uint32_t zs,
                                                                  const uint8_t *pay, size_t len, size_t count) {
    uint64_t pe = *pe_, pl = *pl_, pm = *pm_;
    uint32_t anyneg = 0, bad = 0;
    int n = hc->ntheta;
    size_t i = 0;
    while (i < count) {
        size_t m = count - i < GP_BLOCK ? count : i + GP_BLOCK;
        uint64_t far = ((pe > pl ? pe : pl) > pm ? (pe > pl ? pe : pl) : pm) >> 3;
        if (far + 3 * GP_BLOCK + 8 <= len) {
#define GP_PF(pos) gp_peek_fast(pay, (pos))
            GP_DECODE_LOOP(GP_PF)
#undef GP_PF
        } else {
#define GP_PS(pos) gp_peek(pay, len, (pos))
            GP_DECODE_LOOP(GP_PS)
#undef GP_PS
        }
    }
    *pe_ = pe, *pl_ = pl, *pm_ = pm;
    *anyneg_ = anyneg, *bad_ = bad;
    return 0;
}

/* decode one chunk whose data starts at byte k->off of the payload; out
 * receives its values even when the chunk then fails its checks, so it is
 * the decoder's scratch, never the caller's output.
 * out: [count]; pay: [len] the whole payload */
static int gp_decode_chunk(float *out, int *neg0, const GpDecTable *t, const GpChunk *k, int zsign,
                           const uint8_t *pay, size_t len) {
    uint64_t lbits = 2ull * k->nnz;
    /* absolute bit positions of the three segments and their exact ends */
    uint64_t pe = 8ull * k->off, pl = pe + 8ull * bytes_of(k->ebits), pm = pl + 8ull * bytes_of(lbits);
    uint64_t ee = pe + k->ebits, le = pl + lbits, me = pm + k->mbits;
    uint32_t anyneg = 0, bad = 0;
    int rc = gp_decode_values(out, &pe, &pl, &pm, &anyneg, &bad, &t->hc, t->lut, (uint32_t)zsign, pay, len, k->count);
    if (rc) return rc;
    /* every segment consumed exactly (this also checks the nonzero count) */
    if (bad || pe != ee || pl != le || pm != me) return -GC_ERR_CORRUPT;
    const uint8_t *p = pay + k->off;
    size_t eb = bytes_of(k->ebits), lb = bytes_of(lbits);
    if (!gp_pad_ok(p, k->ebits) || !gp_pad_ok(p + eb, lbits) || !gp_pad_ok(p + eb + lb, k->mbits))
        return -GC_ERR_CORRUPT;
    *neg0 = anyneg != 0;
    return 0;
}

/* make hc (id) t's table, its lookup table built */
static void gp_table_set(GpDecTable *t, const HuffCode *hc, uint32_t id) {
    t->hc = *hc;
    if (t->lut_n != hc->ntheta || !t->lut) {
        free(t->lut);
        t->lut = mallocCheck(sizeof(uint16_t) << hc->ntheta);
        t->lut_n = hc->ntheta;
    }
    huff_lut_build(t->lut, &t->hc);
    t->id = id;
    t->have = 1;
}

/* parse and validate a table section (gcomp_table_parse) into t.
 * p: [len]; *used: bytes consumed */
static int gp_table_read(GpDecTable *t, size_t *used, const uint8_t *p, size_t len, int ntheta, uint32_t id) {
    HuffCode hc;
    int rc = gcomp_table_parse(&hc, used, p, len, ntheta, id);
    if (rc) return rc;
    gp_table_set(t, &hc, id);
    return 0;
}

/* ------------------------------------------------------- checkpoints */

/* The state a resumed run needs to code exactly as an uninterrupted one, as
 * one blob (compress/gcomp_state.h, docs/FORMAT.md section 10, Checkpointed
 * state). */
static int64_t gp_state_save(const Codec *c, uint8_t *buf, size_t cap) {
    const GcompState *st = c->state;
    return gcomp_state_write(buf, cap, &st->enc, st->cur.have, &st->cur.hc, st->cur.id);
}

/* the whole blob is checked before anything is written: a refused load
 * changes nothing */
static int gp_state_load(Codec *c, const uint8_t *buf, size_t len) {
    GcompState *st = c->state;
    GcompStateBlob b;
    int rc = gcomp_state_parse(&b, buf, len, (int)codec_param(&c->spec, "ntheta"));
    if (rc) return rc;
    st->enc = b.enc;
    if (b.dec_have) gp_table_set(&st->cur, &b.dec, b.dec_id);
    st->cur.have = b.dec_have;
    return 0;
}

static int gp_decode(Codec *c, float *out, size_t n, float weight, int acc, const uint8_t *payload, size_t len,
                     uint16_t flags) {
    GcompState *st = c->state;
    GcompBlock b;
    int err = gcomp_block_parse(&b, payload, len, n, flags);
    if (err || n == 0) return err;
    int ntheta = b.ntheta, zsign = b.zsign;
    size_t nch = (size_t)b.nch, at = GCOMP_BLOCK_HDR;

    /* the table: carried, or the one this decoder already holds */
    GpDecTable *t;
    if (b.table) {
        size_t used = 0;
        err = gp_table_read(&st->pend, &used, payload + at, len - at, ntheta, b.id);
        if (err) return err;
        at += used;
        t = &st->pend;
    } else {
        if (!st->cur.have || st->cur.id != b.id || st->cur.hc.ntheta != ntheta) return -GC_ERR_STATE;
        t = &st->cur;
    }

    /* chunk headers (Section 6.1): contiguous, consistent, adding up */
    err = gcomp_chunks_fit(len, at, &b); /* before the per-chunk memory */
    if (err) return err;
    gp_grow(st, nch, 0);
    GpChunk *ck = st->ck;
    err = gcomp_chunks_parse(ck, payload, len, at, &b, n);
    if (err) return err;

    /* the chunks, in parallel, into the scratch: a chunk can fail after
     * others (and its own first values) have been decoded */
    if (n > st->dec_cap) {
        free(st->dec);
        st->dec = mallocCheck(n * sizeof *st->dec);
        st->dec_cap = n;
    }
    float *v = st->dec;
    int *rc = st->rc;
#ifdef HAVE_OPENMP
    int T = gp_threads(0, n);
#pragma omp parallel for num_threads(T) schedule(dynamic, 1) if (T > 1 && nch > 1)
#endif
    for (size_t k = 0; k < nch; k++) {
        int neg = 0;
        rc[k] = gp_decode_chunk(v + ck[k].start, &neg, t, &ck[k], zsign, payload, len);
        ck[k].neg0 = neg;
    }
    int anyneg = 0;
    for (size_t k = 0; k < nch; k++) {
        if (rc[k]) return rc[k];
        anyneg |= ck[k].neg0;
    }
    if (zsign && !anyneg) return -GC_ERR_CORRUPT; /* ZSIGN set without a negative zero */

    /* the frame is valid: only now the output, then the state */
#ifdef HAVE_OPENMP
#pragma omp parallel for num_threads(T) schedule(static) if (T > 1 && nch > 1)
#endif
    for (size_t k = 0; k < nch; k++) {
        float *o = out + ck[k].start;
        const float *w = v + ck[k].start;
        if (acc)
            for (size_t i = 0; i < ck[k].count; i++) o[i] = o[i] + weight * w[i];
        else
            memcpy(o, w, ck[k].count * sizeof *o);
    }
    if (t == &st->pend) { /* commit the carried table */
        GpDecTable tmp = st->cur;
        st->cur = st->pend;
        st->pend = tmp;
    }
    return 0;
}

const CodecOps codec_gcomp_ops = {
    .name = "gcomp",
    .id = CODEC_GCOMP,
    .summary = "GCOMP: Huffman exponents (cap n_theta + escape), 0/6/12/18-bit mantissa truncation per value, "
               "zero pruning (Li et al. 2024)",
    .params = gcomp_params,
    .nparams = (int)(sizeof gcomp_params / sizeof gcomp_params[0]),
    .state_size = sizeof(GcompState),
    .state_free = gp_state_free,
    .state_max = GCOMP_STATE_MAX,
    .state_save = gp_state_save,
    .state_load = gp_state_load,
    .max_payload = gp_max_payload,
    .encode = gp_encode,
    .decode = gp_decode,
};

/* the 2-bit levels (MSB-first) of a segment of the host frame: ctx is its payload */
typedef struct {
    const uint8_t *pl;
    uint64_t level[4];
} HostLevels;
static void host_levels(void *ctx, uint64_t off, uint64_t nnz) {
    HostLevels *h = ctx;
    for (uint64_t i = 0; i < nnz; i++) h->level[(h->pl[off + i / 4] >> (6 - 2 * (i % 4))) & 3]++;
}

int gcomp_frame_parts(GcompParts *p, const uint8_t *frame, size_t len) {
    HostLevels h = {frame + CODEC_HEADER_SIZE, {0, 0, 0, 0}};
    int rc = gcomp_frame_parts_headers(p, frame, len, host_levels, &h);
    if (rc) return rc;
    for (int l = 0; l < 4; l++) p->level[l] += h.level[l];
    return 0;
}

int gcomp_frame_parts_headers(GcompParts *p, const uint8_t *frame, size_t len, GcompLevelSegment level, void *ctx) {
    FrameHeader fh;
    int rc = frame_header_read(&fh, frame, len);
    if (rc) return rc;
    if (fh.codec != CODEC_GCOMP) return -GC_ERR_CODEC;
    const uint8_t *pl = frame + CODEC_HEADER_SIZE;
    size_t plen = len - CODEC_HEADER_SIZE, at = GCOMP_BLOCK_HDR;
    if (plen < GCOMP_BLOCK_HDR) return -GC_ERR_TRUNCATED;
    uint64_t nch = get_u32(pl + 8);
    if (fh.flags & GCOMP_FLAG_TABLE) {
        if (plen - at < 2) return -GC_ERR_TRUNCATED;
        at += 2 + 2 * (size_t)get_u16(pl + at);
    }
    if (at > plen || (uint64_t)(plen - at) / GCOMP_CHUNK_HDR < nch) return -GC_ERR_TRUNCATED;
    GcompParts add = {.values = fh.count, .bytes = len};
    uint64_t off = at + nch * GCOMP_CHUNK_HDR;
    for (uint64_t k = 0; k < nch; k++) {
        const uint8_t *q = pl + at + k * GCOMP_CHUNK_HDR;
        uint64_t count = get_u32(q + 4), bits = get_u32(q + 8), ebits = get_u32(q + 12), nnz = get_u32(q + 16);
        if (nnz > count || bits < ebits + 2 * nnz) return -GC_ERR_CORRUPT;
        uint64_t mbits = bits - ebits - 2 * nnz, lev = off + bytes_of(ebits);
        if (lev + bytes_of(2 * nnz) > plen) return -GC_ERR_TRUNCATED;
        level(ctx, lev, nnz);
        add.zeros += count - nnz;
        add.exp_bits += ebits;
        add.level_bits += 2 * nnz;
        add.man_bits += mbits;
        off = lev + bytes_of(2 * nnz) + bytes_of(mbits);
    }
    p->values += add.values;
    p->zeros += add.zeros;
    p->exp_bits += add.exp_bits;
    p->level_bits += add.level_bits;
    p->man_bits += add.man_bits;
    p->bytes += add.bytes;
    return 0;
}
