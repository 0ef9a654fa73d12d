/* libFuzzer target: the checkpoint container reader (common/ckpt.c ckpt_parse),
 * which a --resume runs on a file from outside. The input is parsed twice: as it
 * is (the CRC-32C stops most changes), and with its last 4 bytes replaced by the
 * CRC of the rest, so that what lies behind the checksum (version, section
 * count, section table) is what the fuzzer explores. The parser must return 0
 * or -1 and never read outside the buffer (ASan); a table it accepts covers the
 * file exactly, and ckpt_find finds every section it lists.
 *
 * The seed corpus tests/fuzz/corpus/fuzz_ckpt/ is written by this file built
 * with -DCKPT_GEN_CORPUS, from the root:
 *   cc -std=c11 -D_GNU_SOURCE -I. -O1 -DCKPT_GEN_CORPUS tests/fuzz/fuzz_ckpt.c build/libgcx.a -lm -lz -fopenmp \
 *      -o build/gen_ckpt_corpus && build/gen_ckpt_corpus
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/ckpt.h"
#include "common/crc32c.h"

static void parse(const uint8_t *data, size_t size) {
    Ckpt ck;
    memset(&ck, 0, sizeof ck);
    ck.file = malloc(size ? size : 1);
    if (size) memcpy(ck.file, data, size);
    ck.size = size;
    char err[512];
    int rc = ckpt_parse(&ck, "fuzz", err, sizeof err);
    if (rc != 0 && rc != -1) abort();
    if (rc == 0) {
        size_t total = 16 + 4;
        for (int i = 0; i < ck.n; i++) {
            const uint8_t *d = ck.sec[i].data;
            if (ck.sec[i].len && (d < ck.file || d + ck.sec[i].len > ck.file + ck.size)) abort();
            total += 32 + 8 + ck.sec[i].len;
            size_t len = 0;
            if (!ckpt_find(&ck, ck.sec[i].name, &len)) abort();
        }
        if (total != ck.size) abort();
        ckpt_free(&ck);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    parse(data, size);
    if (size >= 4) {
        uint8_t *fixed = malloc(size);
        memcpy(fixed, data, size);
        uint32_t crc = crc32c(0, fixed, size - 4);
        for (int b = 0; b < 4; b++) fixed[size - 4 + (size_t)b] = (uint8_t)(crc >> (8 * b));
        parse(fixed, size);
        free(fixed);
    }
    return 0;
}

#ifdef CKPT_GEN_CORPUS
/* a few small, valid checkpoints: no section, one, several (an empty one among them) */
int main(void) {
    static float w[6] = {1, 2, 3, 4, 5, 6};
    static const char meta[] = "gcx run: model=test workers=2";
    int64_t step = 7;
    CkptSection s[4];
    memset(s, 0, sizeof s);
    snprintf(s[0].name, sizeof s[0].name, "meta");
    s[0].data = meta;
    s[0].len = sizeof meta - 1;
    snprintf(s[1].name, sizeof s[1].name, "step");
    s[1].data = &step;
    s[1].len = sizeof step;
    snprintf(s[2].name, sizeof s[2].name, "w0.params");
    s[2].data = w;
    s[2].len = sizeof w;
    snprintf(s[3].name, sizeof s[3].name, "w0.empty");
    const int counts[3] = {0, 1, 4};
    for (int k = 0; k < 3; k++) {
        char path[128], err[256];
        snprintf(path, sizeof path, "tests/fuzz/corpus/fuzz_ckpt/sections%d.bin", counts[k]);
        if (ckpt_write(path, s, counts[k], err, sizeof err)) {
            fprintf(stderr, "%s\n", err);
            return 1;
        }
        printf("  %s\n", path);
    }
    return 0;
}
#endif
