/* libFuzzer target: whole frames through codec_decode, for every registered
 * codec (the common header path: magic, version, codec id, count, payload
 * length, CRC-32C; docs/FORMAT.md).
 *
 * The input is a frame. The element count comes from its header (skipped
 * above 2^16 values, to bound memory). Then, for every codec in the registry:
 *   1. the frame as it is, decoded by a fresh instance of that codec: it must
 *      return 0 or a negative GcError (a frame of another codec: GC_ERR_CODEC);
 *   2. the frame with its codec id set to that codec and its CRC recomputed,
 *      so a mutated payload reaches the codec's decoder through the header.
 * ASan/UBSan catch any out-of-bounds access; a positive return aborts, and so
 * does a refused frame that changed the output.
 * Built with CUDA (HAVE_CUDA: the host emulation's fuzz_frame_emu,
 * tests/emulation/build.sh) and a device present, the frame of 2. is also decoded
 * from device memory by the GPU codec, alone (codec_decode_cuda_dev) and batched as the
 * exchange's bundles are (codec_decode_cuda_batched: topk's, sbc's, 3lc's and gcomp's
 * verdicts deferred), from an allocation of exactly its size: the CPU decoder's return code,
 * the same floats (any NaN for any NaN), out untouched when refused; as gcomp's
 * frame, its size breakdown read from device memory (codec_cuda_gcomp_parts) must
 * give gcomp_frame_parts's return code and sums.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "compress/codec.h"
#ifdef HAVE_CUDA
#include "compress/codec_cuda.h"
#include "tests/fuzz/fuzz_cuda.h"

/* the frame g[size] decoded by a fresh GPU codec of spec s from device memory into out
 * (starting as was[n]), alone and, by another, batched as the exchange decodes it (a
 * verdict the batch defers read after the flush), must give rc and cpu_out[n] */
static void device_decode(const CodecSpec *s, const uint8_t *g, size_t size, size_t n, const float *was,
                          const float *cpu_out, int rc) {
    uint8_t *dframe = fz_upload(g, size);
    float *dout = NULL;
    if (cudaMalloc((void **)&dout, 4 * n + 4) != cudaSuccess) abort();
    for (int batched = 0; batched < 2; batched++) {
        CodecCuda *gd = codec_cuda_new(s);
        if (!gd) abort();
        if (n) cudaMemcpy(dout, was, 4 * n, cudaMemcpyHostToDevice);
        size_t deferred = 0;
        int ret = 0, rg = batched ? fz_decode_batched(gd, dout, n, 1.0f, 0, dframe, size, &deferred, &ret)
                                  : codec_decode_cuda_dev(gd, dout, n, dframe, size);
        if (deferred > 1 || (deferred && ret != 0)) abort();
        if (rg != rc || !fz_same_floats(dout, rc ? was : cpu_out, n)) abort();
        codec_cuda_free(gd);
    }
    cudaFree(dout);
    cudaFree(dframe);
}

/* gcomp's size breakdown of the frame g[size] from device memory against the host's */
static void device_parts(const uint8_t *g, size_t size) {
    uint8_t *dframe = fz_upload(g, size);
    GcompParts want, got;
    memset(&want, 0, sizeof want);
    memset(&got, 0, sizeof got);
    int rc = gcomp_frame_parts(&want, g, size), rg = codec_cuda_gcomp_parts(&got, dframe, size);
    if (rg != rc || memcmp(&got, &want, sizeof got) != 0) abort();
    cudaFree(dframe);
}
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
#ifdef EMU_HOST_WAITS
    /* the emulation: each GPU scratch buffer an allocation of its own, whose bounds its page
     * protections see (compress/codec_cuda.cu, gcx_dmalloc) */
    setenv("GCX_DSCRATCH", "each", 0);
#endif
    if (size < CODEC_HEADER_SIZE) {
        /* still exercise the short-frame path of every codec once */
        Codec *c = NULL;
        CodecSpec s;
        codec_spec_default(&s, codec_ops_at(0));
        c = codec_new(&s);
        float out[1];
        if (codec_decode(c, out, 0, data, size) >= 0) abort();
        codec_free(c);
        return 0;
    }
    size_t n = get_u32(data + 8);
    if (n > 65536) return 0;
    float *out = malloc(4 * n + 4), *was = malloc(4 * n + 4);
    for (size_t i = 0; i < n; i++) out[i] = (float)(i % 89) * 0.5f - 11.0f;
    uint8_t *g = malloc(size);
#ifdef HAVE_CUDA
    int on_device = fz_have_device();
#endif
    for (int k = 0; k < codec_count(); k++) {
        const CodecOps *o = codec_ops_at(k);
        CodecSpec s;
        codec_spec_default(&s, o);
        Codec *c = codec_new(&s);
        int rc = codec_decode(c, out, n, data, size);
        if (rc > 0) abort();
        if (rc == 0 && data[5] != (uint8_t)o->id) abort(); /* decoded another codec's frame */
        codec_free(c);
        /* the same bytes as this codec's frame, with a valid CRC */
        memcpy(g, data, size);
        g[5] = (uint8_t)o->id;
        put_u32(g + 16, crc32c(0, g + CODEC_HEADER_SIZE, size - CODEC_HEADER_SIZE));
        c = codec_new(&s);
        memcpy(was, out, 4 * n);
        rc = codec_decode(c, out, n, g, size);
        if (rc > 0 || (rc < 0 && memcmp(out, was, 4 * n) != 0)) abort();
#ifdef HAVE_CUDA
        if (on_device) device_decode(&s, g, size, n, was, out, rc);
        if (on_device && o->id == CODEC_GCOMP) device_parts(g, size);
#endif
        memcpy(was, out, 4 * n);
        rc = codec_decode_acc(c, out, n, 0.25f, g, size); /* a second frame: stateful decoders continue */
        if (rc > 0 || (rc < 0 && memcmp(out, was, 4 * n) != 0)) abort();
        codec_free(c);
    }
    free(g);
    free(was);
    free(out);
    return 0;
}
