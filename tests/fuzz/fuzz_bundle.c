/* libFuzzer target: the exchange's bundle reader (dist/bundle.c), which every
 * worker runs on the messages of its peers.
 *
 * Input layout:
 *   byte 0      T: tensors the receiver expects, 1 + byte % 16
 *   byte 1      chunk index every entry must carry (byte % 4; the ring's chunks)
 *   bytes 2..   the bundle, read as the bundle of step 5
 * The reader takes entries 0..T-1 until one fails, then checks the end. It must
 * return 0 or a negative GcError, and every frame it hands out must lie inside
 * the bundle (ASan catches the reads).
 *
 * The seed corpus tests/fuzz/corpus/fuzz_bundle/ is written by this file built
 * with -DBUNDLE_GEN_CORPUS, from the root:
 *   cc -std=c11 -D_GNU_SOURCE -I. -O1 -DBUNDLE_GEN_CORPUS tests/fuzz/fuzz_bundle.c build/libgcx.a -lm -lz \
 *      -fopenmp -o build/gen_bundle_corpus && build/gen_bundle_corpus
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/errors.h"
#include "compress/codec.h"
#include "dist/bundle.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2) return 0;
    int T = 1 + data[0] % 16, chunk = data[1] % 4;
    const uint8_t *b = data + 2;
    size_t len = size - 2;
    BundleReader r;
    int rc = bundle_open(&r, b, len, 5);
    for (int t = 0; t < T && rc == 0; t++) {
        const uint8_t *f = NULL;
        size_t flen = 0;
        rc = bundle_next(&r, t, chunk, &f, &flen);
        if (rc == 0) {
            if (f < b || f + flen > b + len) abort();
            volatile uint8_t sum = 0;
            for (size_t i = 0; i < flen; i++) sum ^= f[i]; /* every byte handed out is readable */
            (void)sum;
        }
    }
    if (rc == 0) rc = bundle_close(&r);
    if (rc > 0 || rc <= -GC_ERR_COUNT_) abort();
    return 0;
}

#ifdef BUNDLE_GEN_CORPUS
/* valid bundles of step 5: T tensors, chunk c, frames of a few bytes */
int main(void) {
    for (int k = 0; k < 4; k++) {
        int T = 1 + 3 * k, chunk = k % 4;
        ByteBuf bb = {0};
        bundle_begin(&bb, 5);
        for (int t = 0; t < T; t++) {
            size_t flen = (size_t)(t * 7 % 13);
            bytebuf_reserve(&bb, bb.len + ENTRY_HDR + flen);
            put_u32(bb.p + bb.len, (uint32_t)t);
            put_u32(bb.p + bb.len + 4, (uint32_t)chunk);
            put_u32(bb.p + bb.len + 8, (uint32_t)flen);
            for (size_t i = 0; i < flen; i++) bb.p[bb.len + ENTRY_HDR + i] = (uint8_t)(i * 31 + (size_t)t);
            bb.len += ENTRY_HDR + flen;
        }
        put_u32(bb.p + 12, (uint32_t)T);
        char path[128];
        snprintf(path, sizeof path, "tests/fuzz/corpus/fuzz_bundle/t%d_c%d.bin", T, chunk);
        FILE *f = fopen(path, "wb");
        uint8_t pre[2] = {(uint8_t)(T - 1), (uint8_t)chunk};
        if (!f || fwrite(pre, 1, 2, f) != 2 || fwrite(bb.p, 1, bb.len, f) != bb.len || fclose(f)) return 1;
        printf("  %s\n", path);
        bytebuf_free(&bb);
    }
    return 0;
}
#endif
