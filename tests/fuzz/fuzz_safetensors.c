/* libFuzzer target: the safetensors reader (common/safetensors.c st_parse),
 * which --init-from and `gcx info` run on files from outside. The parser must
 * return 0 or -1 and never read outside the buffer (ASan). A file it accepts
 * must hold what the format promises: every tensor's bytes inside the data
 * buffer, numel x dtype size of them, the tensors tiling the buffer exactly,
 * st_find finding each name; and st_encode of what was read must parse again
 * to the same names, dtypes, shapes and bytes.
 *
 * The seed corpus tests/fuzz/corpus/fuzz_safetensors/ is written by this file
 * built with -DST_GEN_CORPUS, from the root:
 *   cc -std=c11 -D_GNU_SOURCE -I. -O1 -DST_GEN_CORPUS tests/fuzz/fuzz_safetensors.c build/libgcx.a -lm -lz \
 *      -fopenmp -o build/gen_st_corpus && build/gen_st_corpus
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/safetensors.h"

static int parse(StFile *sf, const uint8_t *data, size_t size) {
    memset(sf, 0, sizeof *sf);
    sf->file = malloc(size ? size : 1);
    if (size) memcpy(sf->file, data, size);
    sf->size = size;
    char err[1024];
    int rc = st_parse(sf, "fuzz", err, sizeof err);
    if (rc != 0 && rc != -1) abort();
    if (rc && !err[0]) abort(); /* a refusal always says why */
    return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    StFile sf;
    if (parse(&sf, data, size)) return 0;
    size_t total = 0;
    for (int i = 0; i < sf.n; i++) {
        const StTensor *t = &sf.t[i];
        if (t->data < sf.file || t->nbytes > sf.size || t->data + t->nbytes > sf.file + sf.size) abort();
        if (t->nbytes != t->numel * st_dtype_size(t->dtype) || t->ndim < 0 || t->ndim > ST_MAX_DIMS) abort();
        if (st_find(&sf, t->name) != t) abort(); /* names are unique */
        total += t->nbytes;
    }
    uint64_t hn = 0;
    for (int i = 7; i >= 0; i--) hn = (hn << 8) | data[i];
    if (8 + hn + total != size) abort(); /* the tensors tile the data */
    /* what was read writes and reads back the same */
    StWriteTensor *w = calloc((size_t)sf.n + 1, sizeof *w);
    const char **meta = calloc(2 * (size_t)sf.nmeta + 1, sizeof *meta);
    for (int i = 0; i < sf.n; i++) {
        w[i] = (StWriteTensor){sf.t[i].name, sf.t[i].dtype, sf.t[i].ndim, {0}, sf.t[i].data};
        memcpy(w[i].shape, sf.t[i].shape, sizeof w[i].shape);
    }
    for (int i = 0; i < sf.nmeta; i++) meta[2 * i] = sf.meta_key[i], meta[2 * i + 1] = sf.meta_val[i];
    uint8_t *buf;
    size_t len;
    char err[1024];
    if (st_encode(&buf, &len, w, sf.n, meta, sf.nmeta, err, sizeof err)) abort();
    StFile back;
    if (parse(&back, buf, len) || back.n != sf.n || back.nmeta != sf.nmeta) abort();
    for (int i = 0; i < sf.n; i++) {
        const StTensor *a = &sf.t[i], *b = &back.t[i];
        if (strcmp(a->name, b->name) || a->dtype != b->dtype || a->ndim != b->ndim || a->nbytes != b->nbytes ||
            memcmp(a->shape, b->shape, sizeof a->shape) || (a->nbytes && memcmp(a->data, b->data, a->nbytes)))
            abort();
    }
    for (int i = 0; i < sf.nmeta; i++)
        if (strcmp(sf.meta_key[i], back.meta_key[i]) || strcmp(sf.meta_val[i], back.meta_val[i])) abort();
    free(buf);
    st_free(&back);
    free(w);
    free(meta);
    st_free(&sf);
    return 0;
}

#ifdef ST_GEN_CORPUS
/* a few small, valid files: empty, a state_dict-like set (F32, an I64 scalar, an
 * empty tensor, metadata), other dtypes and an escaped name; and a file written
 * by hand the way PyTorch users write one (spaces, keys in another order) */
int main(void) {
    static float w[6] = {1, 2, 3, 4, 5, 6}, b[2] = {-1, 0.5f};
    static int64_t nbt = 7;
    static uint16_t h[3] = {0x3c00, 0xc000, 0x7bff};
    static uint8_t u[5] = {1, 2, 3, 4, 5};
    StWriteTensor sd[5] = {{"conv1.weight", ST_F32, 4, {1, 1, 2, 3}, w},
                           {"bn1.bias", ST_F32, 1, {2}, b},
                           {"bn1.num_batches_tracked", ST_I64, 0, {0}, &nbt},
                           {"empty", ST_F32, 2, {0, 5}, NULL},
                           {"fc.weight", ST_F32, 2, {3, 2}, w}};
    StWriteTensor other[3] = {{"half", ST_F16, 1, {3}, h}, {"bytes \"q\"\\\n", ST_U8, 1, {5}, u},
                              {"bf", ST_BF16, 2, {1, 3}, h}};
    const char *meta[4] = {"format", "pt", "gcx_step", "7"};
    struct {
        const char *name;
        const StWriteTensor *t;
        int n, nmeta;
    } files[3] = {{"empty.safetensors", NULL, 0, 0}, {"state_dict.safetensors", sd, 5, 2},
                  {"dtypes.safetensors", other, 3, 1}};
    char path[256], err[512];
    for (int k = 0; k < 3; k++) {
        snprintf(path, sizeof path, "tests/fuzz/corpus/fuzz_safetensors/%s", files[k].name);
        if (st_write(path, files[k].t, files[k].n, meta, files[k].nmeta, err, sizeof err)) {
            fprintf(stderr, "%s\n", err);
            return 1;
        }
        printf("  %s\n", path);
    }
    static const char hand[] = "{ \"b\" : {\"shape\": [1], \"data_offsets\": [4, 8], \"dtype\": \"I32\"},\n"
                               "  \"a\" : {\"data_offsets\": [0, 4], \"dtype\": \"F32\", \"shape\": []},\n"
                               "  \"__metadata__\": {\"k\\u00e9\": \"\\ud83d\\ude00\"} }  ";
    snprintf(path, sizeof path, "tests/fuzz/corpus/fuzz_safetensors/hand.safetensors");
    FILE *f = fopen(path, "wb");
    uint64_t n = sizeof hand - 1;
    uint8_t len[8];
    for (int i = 0; i < 8; i++) len[i] = (uint8_t)(n >> (8 * i));
    fwrite(len, 1, 8, f);
    fwrite(hand, 1, n, f);
    fwrite(w, 1, 8, f);
    fclose(f);
    printf("  %s\n", path);
    return 0;
}
#endif
