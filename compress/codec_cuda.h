/* Codecs on the GPU: the same frames as the CPU codecs (compress/codec.h),
 * byte for byte, from float tensors in device memory.
 *
 * A CodecCuda is the GPU twin of a Codec: built from the same CodecSpec, it
 * keeps the GPU-side state a codec carries across calls (gcomp's encoder and
 * decoder Huffman tables, docs/FORMAT.md section 10 "table schedule") next to a CPU
 * Codec of the same spec. The functions mirror codec_encode / codec_decode /
 * codec_decode_acc / codec_local_scalar / codec_max_frame argument for argument,
 * with CodecCuda in place of Codec and device pointers for the tensors:
 *
 *   frame (encode out, decode in)  HOST memory, [cap] / [len] bytes
 *   x (encode in), out (decode)    DEVICE memory, [n] floats
 *   CodecSide.repr, CodecSide.mask DEVICE memory ([n] floats / [n] bytes), or NULL
 *   CodecSide.levels               DEVICE memory ([n] bytes, gcomp), or NULL
 *   CodecSide.scalar               HOST pointer to one float (terngrad/stoch3 sharing)
 *   CodecSide.local                HOST pointer to two floats (codec_local_stats_cuda), or NULL
 *   CodecSide.seed, .density       as on the CPU; .threads is ignored
 *
 * For the same input, seed, levels and call sequence a CodecCuda produces
 * exactly the bytes its CPU twin produces (every scalar, e.g. max|x|,
 * TernGrad's sigma, the 1-bit means, SBC's means, is reduced in the CPU's
 * summation order), and decodes into exactly the floats the CPU decoder
 * writes, returning the same error codes for bad frames. Return conventions
 * are the CPU's: encode returns the frame length or a negative GcError, decode
 * 0 or a negative GcError.
 *
 * Work runs on the calling thread's default stream (the build's per-thread default
 * streams, docs/GPU.md "Streams"). A host frame is complete when the call returns; what
 * a call leaves in device memory (out, repr, mask, a device frame) is complete in stream
 * order: for the kernels and copies the same thread issues next, and for the host or
 * another stream after cudaStreamSynchronize(0) (codec_encode_cuda_payload waits itself).
 * Likewise a call's device inputs (x, side->levels, a device frame) and the CodecCuda's own
 * device tables may still be read after it returns: until cudaStreamSynchronize(0) on the
 * calling thread, another stream, thread or the host must not overwrite them, nor may
 * another thread use the CodecCuda.
 * The calls wait for the device only where the host needs a result (a frame's length, a
 * scale, a count, whether a frame is valid): every wait leaves the GPU idle until the host
 * launches more, and the frames of a step are many and small (docs/GPU.md, "Waits and launches").
 * Scratch memory comes from an arena per thread, reused in stream order (gcx_dmalloc in
 * compress/codec_cuda.cu), and from the stream-ordered allocator (cudaMallocAsync) where it
 * does not fit.
 * CUDA failures (out of memory, a bad pointer) print file and line and exit,
 * like every other checking macro of the project. Not thread-safe per
 * CodecCuda; different CodecCuda objects may be used from different threads.
 *
 * Every codec of the registry has a GPU path: fp32, fp16, int8, terngrad,
 * stoch3, 3lc, onebit, topk, dgc, sbc, gcomp, ternsum. docs/GPU.md ("Codecs and NCCL") describes the kernels.
 *
 * Only built with CUDA (HAVE_CUDA): without it codec_cuda_available() is 0 and
 * codec_cuda_new returns NULL with a message.
 */
#ifndef GC_CODEC_CUDA_H
#define GC_CODEC_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "compress/codec.h"
#include "compress/gcomp.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct CodecCuda CodecCuda;

/* 1 when this build has the GPU codecs (a GPU may still be missing at run time) */
int codec_cuda_available(void);
/* a GPU twin of codec spec; NULL (message on stderr) without CUDA */
CodecCuda *codec_cuda_new(const CodecSpec *spec);
void codec_cuda_free(CodecCuda *g);
/* the spec it was built from */
const CodecSpec *codec_cuda_spec(const CodecCuda *g);
/* worst-case frame bytes (header included) for n values, as codec_max_frame */
size_t codec_cuda_max_frame(const CodecCuda *g, size_t n);

/* the state it keeps between calls (gcomp's tables and exponent counts) as
 * the blob of its CPU twin's codec_state_save, byte for byte (docs/FORMAT.md
 * section 10, Checkpointed state), and back: a checkpoint written by either resumes on either.
 * As codec_state_max / codec_state_save / codec_state_load (compress/codec.h):
 * state_max 0 and save 0 for a codec without state; load leaves the state as
 * it was on a bad blob.  buf: host memory */
size_t codec_cuda_state_max(const CodecCuda *g);
int64_t codec_cuda_state_save(const CodecCuda *g, uint8_t *buf, size_t cap);
int codec_cuda_state_load(CodecCuda *g, const uint8_t *buf, size_t len);

/* Encode x[n] (device) into frame (host, cap bytes): the frame codec_encode
 * gives for the same values. Returns the frame length or a negative GcError.
 *   frame: [cap] host out;  x: [n] device;  side: see above (may be NULL) */
int64_t codec_encode_cuda(CodecCuda *g, uint8_t *frame, size_t cap, const float *x, size_t n,
                          const CodecSide *side);

/* The payload only (no 20-byte header, no CRC), left in DEVICE memory: what
 * the kernels produce before the copy to the host (benchmarks, device-resident
 * pipelines). *flags receives the header flags. Returns the payload length or a
 * negative GcError. The kernels write straight into payload when it is aligned as their
 * stores need (int8, terngrad, stoch3, onebit and ternsum store bytes: any alignment;
 * fp16 halves: 2 bytes; the others 16- and 32-bit words: 4 bytes) and cap >=
 * max_payload(n); otherwise (a misaligned payload pointer, whose stores would fault on a
 * GPU, or a smaller cap) they write into an aligned temporary device buffer of
 * max_payload(n) bytes, copied device to device into payload.
 *   payload: [cap] device out, any alignment;  x: [n] device */
int64_t codec_encode_cuda_payload(CodecCuda *g, uint8_t *payload, size_t cap, uint16_t *flags, const float *x,
                                  size_t n, const CodecSide *side);

/* Decode a whole frame (host, len bytes) holding n values into out (device),
 * as codec_decode; out unchanged on error, as on the CPU.
 *   out: [n] device;  frame: [len] host */
int codec_decode_cuda(CodecCuda *g, float *out, size_t n, const uint8_t *frame, size_t len);
/* out += weight * decode(frame), as codec_decode_acc.  out: [n] device */
int codec_decode_acc_cuda(CodecCuda *g, float *out, size_t n, float weight, const uint8_t *frame, size_t len);

/* The same with the whole frame in DEVICE memory (the exchange's bundles over NCCL,
 * dist/exchange_cuda.c): the same bytes and the same results and error codes as the
 * host-frame calls. Encoding writes the payload in place and a kernel writes the 20-byte
 * header with the CRC computed on the device; decoding computes the CRC on the device,
 * copies it down in one copy with the header and the payload's first 16 and last 8 bytes,
 * checks them on the host and decodes the payload where it lies (moved first, device to
 * device, when it is not aligned for the codec's loads: 4 bytes for fp32, 2 for fp16, 8
 * for ternsum). Every codec validates and decodes on the device; the host reads only those
 * bytes, and gcomp's block header, table section and chunk headers (a prefix of 28 + at
 * most 514 + 20 per chunk bytes), which it parses there.
 *   frame: [cap] / [len] device, any alignment */
int64_t codec_encode_cuda_dev(CodecCuda *g, uint8_t *frame, size_t cap, const float *x, size_t n,
                              const CodecSide *side);
int codec_decode_cuda_dev(CodecCuda *g, float *out, size_t n, const uint8_t *frame, size_t len);
int codec_decode_acc_cuda_dev(CodecCuda *g, float *out, size_t n, float weight, const uint8_t *frame, size_t len);

/* Decoding device frames with one wait for many: what codec_decode_cuda_dev reads of a
 * frame on the host (its header, its payload's CRC register computed on the device, the
 * payload's first 16 and last 8 bytes) computed for k frames and copied to the host at
 * once (codec_cuda_probe_frames: the kernels of each frame launched, then one copy),
 * then each frame decoded with its probe: the same results and error codes as
 * codec_decode_cuda_dev (weight and acc as codec_decode_acc_cuda_dev's; acc 0 decodes
 * into out). A probe describes the frame it was made from only while those bytes stay
 * unchanged.
 *   frames[k]: device, any alignment, lens[k] bytes each;  out: [k] host */
typedef struct {
    uint8_t b[160]; /* the header and the payload's first PAY_HEAD bytes, its last 8, its CRC's register,
                     * and for a payload small enough its decoder's check */
} CodecProbe;
void codec_cuda_probe_frames(CodecProbe *out, const uint8_t *const *frames, const size_t *lens, size_t k);
/* The same for frames listed in DEVICE memory by work queued before it (the walk of a
 * device bundle's entries, dist/exchange_cuda.h exchange_cuda_read_bundles), whose
 * number the host does not know yet: k groups of at most per frames, group g's count[g]
 * frames (device) at refs + g per, lying in its bytes gbase[g][glen[g]] (device) without
 * overlapping (which bounds their CRC's spans); their probes into out + g per (host, k per
 * of them; those past a group's count undefined), and extra_bytes from extra_dev to
 * extra_host (what the listing computed with them), with one wait for both (out and
 * extra_host page-locked) */
typedef struct {
    uint64_t at, len;   /* the frame: at bytes into its group's, len bytes */
    uint32_t first, nb; /* its payload's CRC spans, set by codec_cuda_probe_listed */
} CodecFrameRef;
void codec_cuda_probe_listed(CodecProbe *out, CodecFrameRef *refs, const uint32_t *count, size_t k, size_t per,
                             const uint8_t *const *gbase, const size_t *glen, void *extra_host, const void *extra_dev,
                             size_t extra_bytes);
int codec_decode_cuda_dev_probed(CodecCuda *g, float *out, size_t n, float weight, int acc, const uint8_t *frame,
                                 size_t len, const CodecProbe *probe);

/* Batches: a bundle's frames with a few launches instead of a few per frame. A step's
 * frames are many and small (ResNet-110: 329 a bundle), and every launch costs the host a
 * driver call of microseconds whatever its size. A CodecBatch gathers the work of device
 * frames that needs no answer on the host: each frame's header with its CRC (computed on
 * the device), small writes next to them (a bundle's entry headers), and fp32's frames
 * whole (the copy of x into the payload and to side->repr; decoding, the copy or sum of the
 * payload into out), the sparsifiers' small probed payloads' decoding, and the dense
 * codecs' loops (fp16, int8, terngrad, stoch3, onebit, ternsum: a payload's quantizing
 * and packing with its header, or its unpacking into out).
 * codec_batch_flush launches it, up to CODEC_BATCH frames a launch, the tables going as
 * the kernels' arguments (no upload, no wait): the bytes and floats are those of the
 * unbatched calls.
 * Until the flush the queued work has not run: the frame's header and fp32's and the dense
 * codecs' payloads are not written, their x is still to be read and side->repr or out
 * still to be written; the
 * caller changes none of them and reads none of those results before it. After the flush
 * they are complete in stream order, and b may be filled again at once. A frame's bytes
 * also have to stay where they are until then (the CRC is computed at the flush). */
#define CODEC_BATCH 32
typedef struct CodecBatch CodecBatch;
CodecBatch *codec_batch_new(void);
void codec_batch_free(CodecBatch *b);
/* The queued jobs of a batch must not overlap: no two write the same bytes, and none writes
 * what another reads (a launch runs its jobs at once; a bundle's frames and the distinct
 * tensors they decode into qualify). */
/* codec_encode_cuda_dev with the header, its CRC, and fp32's and the dense codecs' payloads
 * left to the flush: the same return (the frame's length, or a negative GcError with
 * nothing queued) */
int64_t codec_encode_cuda_batched(CodecBatch *b, CodecCuda *g, uint8_t *frame, size_t cap, const float *x, size_t n,
                                  const CodecSide *side);
/* codec_decode_cuda_dev_probed, its checks made now (the same return), fp32's copy or sum
 * into out left to the flush, and so is the decoding of a topk, dgc or sbc payload that the
 * probe found valid, of a tensor of up to 65,535 values (one block each,
 * CODEC_BATCH a launch), and the dense codecs' unpacking of a payload aligned as they read
 * it; the other frames decode now. A gcomp frame is decoded now but not waited for: what
 * the host checks of it is checked (the return, 0 when it passed; a frame that carries a
 * table has its headers and table copied down for it), and the rest (the chunks' checks,
 * and those of the chunk headers where the probe does not hold them: more than 4 chunks)
 * decides on the device whether out is written; that verdict is deferred:
 * codec_batch_deferred counts it, and codec_batch_verdicts gives it, and makes a table the
 * frame carries its decoder's if it passed. Until then that decoder takes no other frame.
 * A topk or sbc payload too large for the probe's check, and a 3lc frame larger than one
 * block takes (more than 40,960 values, or a stream above 8 KiB), is decoded by the
 * general decoder, whose checks (topk: the bitmap's count, its padding, the values; sbc:
 * the Rice codes' walk; 3lc: the zero-run stream's expansion) decide on the device whether
 * out is written, their verdict deferred as gcomp's */
int codec_decode_cuda_batched(CodecBatch *b, CodecCuda *g, float *out, size_t n, float weight, int acc,
                              const uint8_t *frame, size_t len, const CodecProbe *probe);
/* Deferred verdicts (gcomp's, topk's, sbc's and 3lc's, codec_decode_cuda_batched): codec_batch_deferred, how many
 * frames the batch holds whose verdict is deferred (since the last codec_batch_verdicts);
 * codec_batch_verdicts, once the caller has flushed b and waited for the stream: each one's
 * return (0 or a GcError), in the order decoded, into rc[codec_batch_deferred(b)], the
 * count then 0, and each valid frame's carried table its decoder's (gcx_gcomp_settle). The
 * verdicts come back in the flush's copies, so a pass of frames reads all of them in its
 * one wait. Room for k of them
 * is made by codec_batch_reserve_deferred (growing it waits for the device) */
size_t codec_batch_deferred(const CodecBatch *b);
/* whether codec_decode_cuda_batched may defer the verdicts of codec id's frames (gcomp's,
 * topk's, sbc's, 3lc's) */
int codec_cuda_defers(int id);
void codec_batch_verdicts(CodecBatch *b, int *rc);
void codec_batch_reserve_deferred(CodecBatch *b, size_t k);
/* n <= 20 bytes of host memory written to dev (device memory) at the flush; src is free
 * at once */
void codec_batch_put(CodecBatch *b, void *dev, const void *src, size_t n);
/* launches what b holds (the dense codecs' loops, then the copies, then the CRCs, then the
 * headers and puts, then the sparsifiers' decoding) and copies the deferred verdicts back, in stream order after
 * everything issued before it, and returns the staged frames' memory; b is empty after it
 * but for the deferred verdicts */
void codec_batch_flush(CodecBatch *b);
/* Staged frames, for a container that can lay its frames out only once their lengths are
 * known (the exchange's bundles): codec_batch_stage encodes frame i's payload (i counting
 * the stages since the last flush) into device memory of the batch's, as
 * codec_encode_cuda_dev with cap = codec_cuda_max_frame(g, n) would, side->repr and
 * side->mask written as there (fp32 and the dense codecs: at the flush; 3lc's one-block frames, and topk, dgc
 * and sbc of up to 65,535 values: at codec_batch_sizes, by one launch a
 * CODEC_BATCH of them, the sparsifiers writing nothing for a frame that fails; larger topk,
 * dgc and sbc frames: at codec_batch_sizes too, their selections begun at the stage (the
 * candidates compacted) and finished there, also for a frame that turns out to fail, a
 * NaN among its values, so their side->repr must not alias x; larger 3lc frames: at the
 * stage). It waits for nothing where the codec need not (fp32, 3lc's and the sparsifiers'
 * frames, whose lengths come back later), the other codecs as they wait anyway. codec_batch_sizes: every
 * staged frame's length (header included) or negative GcError, in lens[i], with one wait
 * for all of them (and before it one for all of the larger sparsified frames' candidates'
 * counts, and one more for all of the larger sbc frames' sums). codec_batch_place: frame i (of a length >= 0) queued into frame, the bytes
 * codec_encode_cuda_dev would have written there. x, side->repr and side->mask stay as they
 * are until the flush (fp32 and the dense codecs read x there and write repr there, placed
 * or not; the
 * one-block frames read x and write repr and mask at codec_batch_sizes, side by side, so
 * one staged frame's x may not overlap another's repr or mask). Staging holds
 * each payload's max_payload bytes of scratch (topk and dgc: what their ratio's k values
 * can take; sbc: what its k codes can) until the flush and copies it once more, which pays where the lengths would
 * each cost a wait (3lc, topk, dgc, sbc) */
void codec_batch_stage(CodecBatch *b, CodecCuda *g, const float *x, size_t n, const CodecSide *side);
void codec_batch_sizes(CodecBatch *b, int64_t *lens);
void codec_batch_place(CodecBatch *b, size_t i, uint8_t *frame);
/* room for the read-backs of k frames of the codecs ids[] (CodecId) staged between two
 * flushes, made now: codec_batch_sizes takes page-locked memory for them, and growing it
 * waits for the whole device (the exchange reserves its passes' before the first step) */
void codec_batch_reserve(CodecBatch *b, const int *ids, size_t k);

/* compress/gcomp.h gcomp_frame_parts of a gcomp frame in DEVICE memory: the headers read on
 * the host, the level segments counted by a kernel; the same sums and return code */
int codec_cuda_gcomp_parts(GcompParts *p, const uint8_t *frame, size_t len);
/* the same for the frame g's last encode wrote (frame_len bytes in all, common header
 * included), from the encoder's own counts: no read of the frame, no wait. Returns 0, or
 * -GC_ERR_STATE when g is not gcomp or its last encode wrote no frame (p unchanged) */
int codec_cuda_gcomp_parts_last(GcompParts *p, const CodecCuda *g, size_t frame_len);


/* crc32c(crc, data, len) (common/crc32c.h) of len bytes of DEVICE memory, computed on the
 * device in pieces of 1 KiB folded with the zero-byte operators; the same value */
uint32_t crc32c_cuda(uint32_t crc, const void *data, size_t len);

/* n <= CUDA_PUT_MAX bytes of host memory written to dev (device memory) by a kernel that
 * carries them as its argument: ordered on the calling thread's default stream like the
 * kernels around it, with no wait, and src may be reused as soon as it returns. The
 * encoders' headers and the exchange's bundle and entry headers go to the device this way */
#define CUDA_PUT_MAX 64
void cuda_put_bytes(void *dev, const void *src, size_t n);

/* terngrad/stoch3: the scalar the codec would use for x (TernGrad 3.1), as
 * codec_local_scalar; NaN for other codecs or non-finite input.  x: [n] device */
float codec_local_scalar_cuda(CodecCuda *g, const float *x, size_t n);
/* k tensors' local statistics at once, from one launch of their sums for every
 * CODEC_BATCH tensors and one read, as each one's encoder would compute them: terngrad
 * and stoch3 (TernGrad 3.1 and 3.3) local[2i] the clipping threshold and local[2i + 1]
 * the codec's own scalar of x[i]; ternsum and int8 max|x[i]| twice; onebit the means of
 * the values >= 0 and < 0. NaN for non-finite input and for other codecs. Given to the
 * encoder of the same x as CodecSide.local, they spare it a wait.  g, x (device), n: [k];
 * local: [2k] host */
void codec_local_stats_cuda(CodecCuda *const *g, const float *const *x, const size_t *n, size_t k, float *local);
/* 1 where g's encoder takes such statistics (terngrad, stoch3, ternsum, int8, onebit) */
int codec_cuda_local_stats_of(const CodecCuda *g);

/* ---- internal: shared by the compress .cu files only (define GC_CODEC_CUDA_INTERNAL) ----
 * Plain C types, so this header stays includable from C. */
#ifdef GC_CODEC_CUDA_INTERNAL
struct CodecCuda {
    CodecSpec spec;
    Codec *cpu; /* CPU twin of the same spec: max_payload, parameters */
    void *gp;   /* gcomp: GPU-side encoder/decoder tables (compress/gcomp_cuda.cu) */
};
/* A frame's payload as the GPU decoders read it: on the device, aligned as the codec's
 * kernels need, with host copies of its first and last bytes, the only ones read on the
 * host (counts, scales, means, Rice parameters, the padding of the last byte). */
#define PAY_HEAD 112 /* gcomp's block header and up to 4 chunk headers (28 + 4 * 20 bytes) */
typedef struct {
    const uint8_t *d; /* [len] device */
    size_t len;
    uint8_t head[PAY_HEAD]; /* bytes 0 .. min(len, PAY_HEAD) - 1 */
    uint8_t tail[8];        /* the last min(len, 8) bytes, right-aligned: tail[8 - k] is byte len - k */
    int checked;            /* the payload's device-side check made with its probe (Probe.checked): the
                             * codec's id, or 0 without one; chk1, chk2 its results */
    uint32_t chk1, chk2;
    int *verdict;           /* device, or NULL: where a decoder that would wait for its checks
                             * (topk's, sbc's and 3lc's general ones) leaves its 0 or GcError instead, writing
                             * out only where it is 0, and returns 1 (a deferred verdict) */
} Pay;
/* device scratch (never NULL; at least 16 bytes, 256-byte aligned): a piece of the calling
 * thread's arena (a stack), or from the stream-ordered pool where it does not fit. A piece
 * is used on the taking thread's default stream only (never handed to NCCL's stream or
 * another thread), returned by the thread that took it, and not pointed at by work queued
 * in a CodecBatch after it is returned (the next pieces reuse its bytes); a piece held
 * long holds the arena below it, so few are (a batch's staged frames, until its flush) */
void *gcx_dmalloc(size_t bytes);
void gcx_dfree(void *p);
/* a device copy (gcx_dmalloc) of len host bytes */
uint8_t *gcx_upload(const uint8_t *p, size_t len);
/* the calling thread's page-locked host buffer of at least bytes (its contents kept only
 * up to the next call), for copies that then wait for nothing or go by DMA: one buffer a
 * thread however many codecs it runs, freed when the thread ends. A copy into or out of
 * it must be complete before the thread's next call (each user waits for its own before
 * it returns) */
void *gcx_pinned(size_t bytes);
/* n as CUB's item count; exits with a message when this CUB cannot count that
 * far (CUB before 3.0 may take int counts: at most 2^31 - 1) */
int64_t gcx_cub_items(size_t n);
/* blocks of 256 threads for a grid-stride loop over work items (1..65536) */
unsigned gcx_grid(size_t work);
/* device prefix sums and selections (CUB), all on the default stream */
void gcx_exclusive_sum_u64(uint64_t *out, const uint64_t *in, size_t n);
void gcx_exclusive_sum_u32(uint32_t *out, const uint32_t *in, size_t n);
/* out[i] = max(in[0..i]) */
void gcx_inclusive_max_u32(uint32_t *out, const uint32_t *in, size_t n);
/* keep in[i] where flags[i] != 0, in order; returns how many */
size_t gcx_select_flagged_u8(uint8_t *out, const uint8_t *in, const uint8_t *flags, size_t n);
size_t gcx_select_flagged_u32(uint32_t *out, const uint32_t *in, const uint8_t *flags, size_t n);
/* the same with the count left on the device, in *d_num (device), for a later read-back */
void gcx_select_flagged_u32_dev(uint32_t *out, const uint32_t *in, const uint8_t *flags, size_t n, int64_t *d_num);
/* max over i of the bit pattern of |x[i]| (0 for n = 0), as compress/dense.h */
uint32_t gcx_absmax_bits(const float *x, size_t n);
/* per-codec GPU paths; pay is a device buffer of at least max_payload(n) bytes,
 * cap the payload bytes the caller allows (GC_ERR_NOSPACE beyond) */
int64_t gcx_sparse_encode(CodecCuda *g, uint8_t *pay, size_t cap, uint16_t *flags, const float *x, size_t n,
                          const CodecSide *side);
int gcx_sparse_decode(CodecCuda *g, float *out, size_t n, float weight, int acc, const Pay *p, uint16_t flags);
/* topk's, dgc's and sbc's frames staged (codec_batch_stage). It takes the payload's scratch
 * (*pay: the most the frame can take) and then the piece its checks or length are left in
 * (st->bk: SPARSE_BACK bytes). A tensor of up to 65,535 values: the one-block
 * encoder's job left in st->job (launched by codec_batch_sizes, nothing written for a frame
 * that fails). A larger topk or dgc tensor: the encoder without its final read, which writes
 * the payload and side->repr and side->mask for a frame that may yet fail (a NaN among its
 * values: found once the checks are read), and leaves in st what the host needs for its
 * length besides. A larger sbc tensor: encoded with its own waits, no st->bk. Returns 0, the
 * length known now (a larger sbc frame's), or a negative GcError known at once (nothing
 * taken). gcx_sparse_staged_len: the payload's length or GcError from what was read back
 * (hb: SPARSE_BACK bytes) */
#define SPARSE_BACK 24
/* a frame of the sparsifiers' one-block encoder (compress/sparse_cuda.cu): its arguments */
typedef struct {
    void *bk;                  /* its length or GcError, left there (SPARSE_BACK bytes) */
    uint8_t *pay, *mask;
    float *repr;
    uint32_t *idx;             /* sbc's scratch */
    const float *x;
    uint64_t n, k, cap;
    int id, rb;
} SparseOne;
typedef struct {
    void *bk;
    size_t cnt;    /* the values selected */
    int radix;     /* the selection's radix select ran: its checks are in bk */
    int one;       /* a tensor of up to ONE_N values (compress/sparse_cuda.cu: 65,535; 4,095
                    * on the emulation's blocks of 64 threads): job is
                    * left for gcx_sparse_launch_ones (codec_batch_sizes), which writes the
                    * payload, side->mask and side->repr, and its length or GcError into bk */
    SparseOne job;
    void *later;   /* a larger topk, dgc or sbc frame: its selection begun, its candidates'
                    * count read and the rest launched by gcx_sparse_finish_staged */
    int len_later; /* sbc's: its length (or GcError) left in len by gcx_sparse_finish_staged */
    int64_t len;
} SparseStage;
/* a sparsifier's payload the bundle's probe found valid, of a tensor of up to
 * 65,535 values, decoded by one block (compress/sparse_cuda.cu) */
typedef struct {
    float *out;
    const uint8_t *pay;
    uint64_t len, n, k; /* the payload's bytes, the values, the count in its header */
    float weight, mean; /* mean: sbc's */
    int acc, id, rb;    /* rb: sbc's Rice parameter */
} SparseDec;
/* 1 with *j filled for such a payload, 0 where the codec's general decoder decodes it, or
 * the decoder's error (the header's checks on the host, the probe's) */
int gcx_sparse_decode_job(SparseDec *j, const CodecCuda *g, float *out, size_t n, float weight, int acc, const Pay *p,
                          uint16_t flags);
/* k such payloads decoded, a block each, CODEC_BATCH a launch */
void gcx_sparse_launch_decs(const SparseDec *jobs, size_t k);
/* the one-block encoder of k frames, a block each, CODEC_BATCH a launch */
void gcx_sparse_launch_ones(SparseOne *const *jobs, size_t k);
int64_t gcx_sparse_encode_staged(CodecCuda *g, uint8_t **pay, const float *x, size_t n, const CodecSide *side,
                                 SparseStage *st);
int64_t gcx_sparse_staged_len(const CodecCuda *g, size_t n, const void *hb, const SparseStage *st);
/* the staged frames sts[k] (each with later set): their candidates' counts read in one
 * copy, their selections finished and their payloads and side outputs launched, topk's and
 * dgc's checks left in their bk, sbc's sums read in one more copy and its length in len
 * (later then NULL) */
void gcx_sparse_finish_staged(SparseStage *const *sts, size_t k);
/* a staged frame's begun selection (later) returned, unfinished */
void gcx_sparse_drop_staged(SparseStage *st);
void *gcx_gcomp_state_new(void);
void gcx_gcomp_state_free(void *st);
int64_t gcx_gcomp_encode(CodecCuda *g, uint8_t *pay, size_t cap, uint16_t *flags, const float *x, size_t n,
                         const CodecSide *side);
/* gcomp's frames staged (codec_batch_stage): an encoder with a table launches the frame
 * into pay (cap bytes) and leaves its read-back in *bk (gcx_gcomp_back_size bytes at the
 * start of a scratch piece) and its table plan in the encoder, returning 0; the bootstrap
 * (no table yet, its histogram read first) and an empty tensor encode with their own waits,
 * *bk NULL, returning the length or GcError. gcx_gcomp_staged_len: from the read-back (hb),
 * the length or GcError, and for a complete frame the encoder's table state, size breakdown
 * and *flags, as gcx_gcomp_encode's end; gcx_gcomp_staged_drop: a staged frame never read
 * back (the batch flushed first), its plan not committed. An encoder with a staged frame
 * pending takes no other frame (an internal error) */
int64_t gcx_gcomp_encode_staged(CodecCuda *g, uint8_t *pay, size_t cap, void **bk, uint16_t *flags, const float *x,
                                size_t n, const CodecSide *side);
size_t gcx_gcomp_back_size(void);
int64_t gcx_gcomp_staged_len(CodecCuda *g, size_t n, const void *hb, uint16_t *flags);
void gcx_gcomp_staged_drop(CodecCuda *g);
int64_t gcx_gcomp_state_save(const CodecCuda *g, uint8_t *buf, size_t cap);
int gcx_gcomp_state_load(CodecCuda *g, const uint8_t *buf, size_t len);
/* gcomp's decoder: 0 or a GcError, the output written only for a valid frame; with verdict
 * (device memory), a device frame that passes the host's checks returns without waiting for
 * its chunks, and its 0 or GcError lands in *verdict in stream order, out written only for
 * 0: 1 for a frame without a table, 2 for one that carries a table, which becomes the
 * decoder's at gcx_gcomp_settle(g, the verdict was 0), called after a wait for the
 * stream; until then the decoder takes no other frame and no state load or save (an
 * internal error) */
int gcx_gcomp_decode(CodecCuda *g, float *out, size_t n, float weight, int acc, const Pay *p, const uint8_t *host,
                     uint16_t flags, int *verdict);
void gcx_gcomp_settle(CodecCuda *g, int ok);
#endif

#ifdef __cplusplus
}
#endif

#endif
