/* safetensors files (common/safetensors.c) and models as state_dicts
 * (nn/state_dict.c):
 *  - round trip of st_encode / st_parse (several dtypes, a scalar, an empty
 *    tensor, metadata, a name that needs JSON escapes), the header padded to 8;
 *  - every rule of the reader, one malformed file each, refused with its own
 *    message (checked by a word of it, so a missing check shows as an accepted
 *    file or another message); every truncation of a valid file refused;
 *  - a ResNet-8, a ResNet-50 and a tied LSTM exported and imported into fresh models: the
 *    parameters and running statistics come back bit for bit; a missing, extra,
 *    mis-shaped or float64 tensor is refused naming it, and leaves the model as
 *    it was. */
#include "common/safetensors.h"
#include "nn/lstm_lm.h"
#include "nn/resnet.h"
#include "nn/state_dict.h"
#include "tests/test.h"

static char err[1024];

/* st_parse of an 8-byte length + header + data */
static int parse_raw(const char *header, const void *data, size_t dlen, StFile *sf) {
    size_t hn = strlen(header);
    sf->size = 8 + hn + dlen;
    sf->file = malloc(sf->size);
    for (int i = 0; i < 8; i++) sf->file[i] = (uint8_t)((uint64_t)hn >> (8 * i));
    memcpy(sf->file + 8, header, hn);
    if (dlen) memcpy(sf->file + 8 + hn, data, dlen);
    return st_parse(sf, "t", err, sizeof err);
}

/* the header must be refused with a message containing want */
static void bad(const char *header, size_t dlen, const char *want) {
    static uint8_t zeros[256];
    StFile sf;
    memset(&sf, 0, sizeof sf);
    int rc = parse_raw(header, zeros, dlen, &sf);
    CHECK(rc == -1 && strstr(err, want) != NULL, "refused with '%s': %.120s -> rc %d, %s", want, header, rc,
          rc ? err : "accepted");
    if (rc == 0) st_free(&sf);
}

static void good(const char *header, size_t dlen) {
    static uint8_t zeros[256];
    StFile sf;
    memset(&sf, 0, sizeof sf);
    int rc = parse_raw(header, zeros, dlen, &sf);
    CHECK(rc == 0, "accepted: %.120s (%s)", header, rc ? err : "");
    if (rc == 0) st_free(&sf);
}

#define T1 "{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}"

static void reader_rules(void) {
    good("{\"a\":" T1 "}", 8);
    good("{}", 0);
    good(" { \"a\" : " T1 " }    ", 8);           /* whitespace and padding */
    good("{\"a\\u00e9\\ud83d\\ude00\\n\":" T1 "}", 8); /* escapes, a surrogate pair */
    good("{\"__metadata__\":{\"k\":\"v\"},\"a\":" T1 "}", 8);
    good("{\"s\":{\"dtype\":\"I64\",\"shape\":[],\"data_offsets\":[0,8]}}", 8);
    good("{\"e\":{\"dtype\":\"F32\",\"shape\":[0,3],\"data_offsets\":[8,8]},\"a\":" T1 "}", 8);
    StFile sf;
    memset(&sf, 0, sizeof sf);
    sf.file = malloc(4), sf.size = 4;
    CHECK(st_parse(&sf, "t", err, sizeof err) == -1 && strstr(err, "too short"), "4 bytes: %s", err);
    /* header length: 0, beyond the file, beyond the limit */
    bad("", 0, "not a safetensors file");
    memset(&sf, 0, sizeof sf);
    sf.file = calloc(1, 16), sf.size = 16;
    sf.file[0] = 100;
    CHECK(st_parse(&sf, "t", err, sizeof err) == -1 && strstr(err, "the file has 16"), "header past the end: %s", err);
    memset(&sf, 0, sizeof sf);
    sf.size = (size_t)ST_HEADER_MAX + 64;
    sf.file = calloc(1, sf.size); /* zero pages: not touched */
    uint64_t hn = (uint64_t)ST_HEADER_MAX + 1;
    for (int i = 0; i < 8; i++) sf.file[i] = (uint8_t)(hn >> (8 * i));
    CHECK(st_parse(&sf, "t", err, sizeof err) == -1 && strstr(err, "over the limit"), "header over the limit: %s", err);
    /* JSON */
    bad("[1]", 0, "expected '{'");
    bad("{} x", 0, "bytes after the header object");
    bad("{}{}", 0, "bytes after the header object");
    bad("{\"a\":" T1 ",}", 8, "expected '\"'");
    bad("{\"a\":" T1 " \"b\":" T1 "}", 16, "expected ',' or '}' after an entry");
    bad("{\"a\" " T1 "}", 8, "expected ':'");
    bad("{\"a", 0, "unterminated string");
    bad("{\"a\x01\":" T1 "}", 8, "raw control character");
    bad("{\"a\xff\":" T1 "}", 8, "invalid UTF-8");
    bad("{\"a\xc0\xaf\":" T1 "}", 8, "invalid UTF-8"); /* overlong */
    bad("{\"a\\x\":" T1 "}", 8, "unknown escape");
    bad("{\"a\\u12g4\":" T1 "}", 8, "bad hex digit");
    bad("{\"a\\ude00\":" T1 "}", 8, "lone low surrogate");
    bad("{\"a\\ud83d\":" T1 "}", 8, "without its low half");
    bad("{\"a\\u0000\":" T1 "}", 8, "\\u0000");
    bad("{\"\":" T1 "}", 8, "empty tensor name");
    /* tensor entries */
    bad("{\"a\":{}}", 0, "empty entry");
    bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8],\"x\":1}}", 8, "unknown key");
    bad("{\"a\":{\"dtype\":\"F32\",\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "duplicate key");
    bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[2]}}", 8, "missing data_offsets");
    bad("{\"a\":{\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "missing dtype");
    bad("{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,8]}}", 8, "missing shape");
    bad("{\"a\":{\"dtype\":\"F33\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "unknown dtype");
    bad("{\"a\":{\"dtype\":3,\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "expected '\"'");
    bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", 8, "non-negative integer");
    bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[02],\"data_offsets\":[0,8]}}", 8, "leading zero");
    bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[2.0],\"data_offsets\":[0,8]}}", 8, "fraction or an exponent");
    bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[2e0],\"data_offsets\":[0,8]}}", 8, "fraction or an exponent");
    bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[9007199254740992],\"data_offsets\":[0,8]}}", 8, "2^53");
    bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,2],\"data_offsets\":[0,8]}}", 8, "more than 8 values");
    bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[2 2],\"data_offsets\":[0,8]}}", 8, "expected ',' or ']' in shape");
    bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8,8]}}", 8, "more than 2 values");
    bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0]}}", 8, "needs 2 values");
    bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]}}", 8, "end before they begin");
    bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8, "needs 12");
    bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[4503599627370495,4503599627370495],\"data_offsets\":[0,8]}}", 8,
        "overflows");
    bad("{\"a\":{\"dtype\":\"F64\",\"shape\":[2305843009213693952],\"data_offsets\":[0,8]}}", 8, "2^53");
    bad("{\"a\":{\"dtype\":\"F64\",\"shape\":[4503599627370495,4096],\"data_offsets\":[0,8]}}", 8, "overflows");
    /* layout of the data */
    bad("{\"a\":" T1 ",\"a\":" T1 "}", 8, "duplicate tensor \"a\"");
    bad("{\"a\":" T1 ",\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[12,20]}}", 20, "a gap");
    bad("{\"a\":" T1 ",\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 12, "an overlap");
    bad("{\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 12, "where the data begins");
    bad("{\"a\":" T1 "}", 12, "trailing bytes");
    bad("{\"a\":" T1 "}", 4, "truncated");
    /* metadata */
    bad("{\"__metadata__\":{\"k\":1}}", 0, "values must be strings");
    bad("{\"__metadata__\":{\"k\":\"v\",\"k\":\"w\"}}", 0, "duplicate __metadata__ key");
    bad("{\"__metadata__\":{},\"__metadata__\":{}}", 0, "duplicate __metadata__");
    char longname[400];
    memset(longname, 'n', sizeof longname);
    snprintf(longname, sizeof longname, "{\"%0300d\":" T1 "}", 7);
    bad(longname, 8, "at most 255");
}

static void round_trip(void) {
    float a[6] = {1.5f, -2, 3, 4, 5, 6e-30f};
    int64_t s = -7;
    double d[2] = {0.25, -1e300};
    StWriteTensor t[4] = {{"layer.0 \"w\"\\", ST_F32, 2, {2, 3}, a},
                          {"count", ST_I64, 0, {0}, &s},
                          {"empty", ST_F32, 2, {0, 4}, NULL},
                          {"d", ST_F64, 1, {2}, d}};
    const char *meta[4] = {"format", "pt", "note", "tab\there"};
    uint8_t *buf;
    size_t len;
    CHECK(st_encode(&buf, &len, t, 4, meta, 2, err, sizeof err) == 0, "encode: %s", err);
    uint64_t hn = 0;
    for (int i = 7; i >= 0; i--) hn = (hn << 8) | buf[i];
    CHECK(hn % 8 == 0 && len == 8 + hn + 24 + 8 + 16, "header padded to 8 (%llu), file of %zu bytes",
          (unsigned long long)hn, len);
    /* every truncation is refused */
    int refused = 0;
    for (size_t k = 0; k < len; k++) {
        StFile sf = {0};
        sf.file = malloc(k ? k : 1), sf.size = k;
        memcpy(sf.file, buf, k);
        if (st_parse(&sf, "t", err, sizeof err) == -1) refused++;
        else st_free(&sf);
    }
    CHECK(refused == (int)len, "all %zu truncations refused (%d)", len, refused);
    StFile sf = {0};
    sf.file = buf, sf.size = len;
    CHECK(st_parse(&sf, "t", err, sizeof err) == 0, "parse: %s", err);
    const StTensor *x = st_find(&sf, "layer.0 \"w\"\\");
    CHECK(x && x->dtype == ST_F32 && x->ndim == 2 && x->shape[0] == 2 && x->shape[1] == 3 && x->numel == 6 &&
              x->nbytes == 24 && memcmp(x->data, a, 24) == 0,
          "F32 [2, 3] with an escaped name back");
    x = st_find(&sf, "count");
    CHECK(x && x->dtype == ST_I64 && x->ndim == 0 && x->numel == 1 && memcmp(x->data, &s, 8) == 0, "I64 scalar back");
    x = st_find(&sf, "empty");
    CHECK(x && x->numel == 0 && x->nbytes == 0 && x->ndim == 2, "empty tensor back");
    x = st_find(&sf, "d");
    CHECK(x && x->dtype == ST_F64 && memcmp(x->data, d, 16) == 0, "F64 back");
    CHECK(sf.n == 4 && sf.nmeta == 2 && !strcmp(sf.meta_key[1], "note") && !strcmp(sf.meta_val[1], "tab\there"),
          "metadata back");
    CHECK(!strcmp(sf.t[0].name, "layer.0 \"w\"\\") && !strcmp(sf.t[3].name, "d"), "header order kept");
    st_free(&sf);
    /* the writer refuses what the reader would */
    StWriteTensor dup[2] = {{"a", ST_F32, 1, {1}, a}, {"a", ST_F32, 1, {1}, a}};
    CHECK(st_encode(&buf, &len, dup, 2, NULL, 0, err, sizeof err) == -1 && strstr(err, "duplicate"), "writer: %s",
          err);
    StWriteTensor dims = {"a", ST_F32, 9, {1}, a};
    CHECK(st_encode(&buf, &len, &dims, 1, NULL, 0, err, sizeof err) == -1 && strstr(err, "dimensions"), "writer: %s",
          err);
}

/* export m to path, import into fresh, which must then equal m */
static void model_round_trip(const char *what, Model *m, Model *fresh, const char *path) {
    CHECK(model_export_safetensors(m, path, 42, what, err, sizeof err) == 0, "%s: export: %s", what, err);
    CHECK(model_import_safetensors(fresh, path, err, sizeof err) == 0, "%s: import: %s", what, err);
    CHECK(memcmp(m->params, fresh->params, m->pt.total * sizeof(float)) == 0, "%s: parameters bit for bit", what);
    CHECK(m->nstate == fresh->nstate && (!m->nstate || !memcmp(m->state, fresh->state, m->nstate * sizeof(float))),
          "%s: state bit for bit", what);
}

/* write tensors of sf (all but skip; one changed as said) to path, import, expect an error naming want */
static void refuse(Model *m, const StFile *sf, const char *path, const char *skip, const char *reshape,
                   const char *as_f64, const char *extra, const char *want) {
    StWriteTensor *t = calloc((size_t)sf->n + 1, sizeof *t);
    double *big = NULL;
    int n = 0;
    for (int i = 0; i < sf->n; i++) {
        const StTensor *s = &sf->t[i];
        if (skip && !strcmp(s->name, skip)) continue;
        StWriteTensor *w = &t[n++];
        w->name = s->name, w->dtype = s->dtype, w->ndim = s->ndim, w->data = s->data;
        memcpy(w->shape, s->shape, sizeof w->shape);
        if (reshape && !strcmp(s->name, reshape)) w->ndim = 1, w->shape[0] = s->numel;
        if (as_f64 && !strcmp(s->name, as_f64)) {
            big = calloc(s->numel + 1, sizeof *big);
            w->dtype = ST_F64, w->data = big;
        }
    }
    if (extra) t[n++] = (StWriteTensor){extra, ST_F32, 1, {1}, sf->t[0].data};
    CHECK(st_write(path, t, n, NULL, 0, err, sizeof err) == 0, "write: %s", err);
    float *keep = malloc(m->pt.total * sizeof(float));
    memcpy(keep, m->params, m->pt.total * sizeof(float));
    int rc = model_import_safetensors(m, path, err, sizeof err);
    CHECK(rc == -1 && strstr(err, want), "refused, naming %s: %s", want, rc ? err : "accepted");
    CHECK(memcmp(keep, m->params, m->pt.total * sizeof(float)) == 0, "a refused file leaves the model as it was");
    free(keep);
    free(big);
    free(t);
}

static void models(void) {
    char path[] = "/tmp/gcx_st_testXXXXXX";
    int fd = mkstemp(path);
    close(fd);
    ResNetConfig c = resnet_cifar_config(8);
    c.width = 4, c.in_h = c.in_w = 16;
    c.seed = 1;
    Model *a = resnet_cifar_create(&c, 2);
    c.seed = 2;
    Model *b = resnet_cifar_create(&c, 2);
    for (size_t k = 0; k < a->nstate; k++) a->state[k] = 0.5f + (float)k * 0.25f;
    model_round_trip("resnet8", a, b, path);
    StFile sf;
    CHECK(st_read(&sf, path, err, sizeof err) == 0, "read: %s", err);
    const StTensor *nbt = st_find(&sf, "layer1.0.bn2.num_batches_tracked");
    int64_t steps = 0;
    if (nbt) memcpy(&steps, nbt->data, 8);
    CHECK(nbt && nbt->dtype == ST_I64 && nbt->ndim == 0 && steps == 42, "num_batches_tracked: I64 scalar, the steps");
    const StTensor *rv = st_find(&sf, "layer1.0.bn2.running_var");
    CHECK(rv && rv->ndim == 1 && rv->shape[0] == 4, "running_var [C]");
    CHECK(sf.n == a->pt.n + 3 * 7, "%d tensors: %d parameters and 3 per BN", sf.n, a->pt.n);
    Model *d = resnet_cifar_create(&c, 2);
    refuse(d, &sf, path, "layer2.0.bn1.running_mean", NULL, NULL, NULL, "layer2.0.bn1.running_mean of this model is missing");
    refuse(d, &sf, path, NULL, NULL, NULL, "extra.weight", "extra.weight is not in this model");
    refuse(d, &sf, path, NULL, "conv1.weight", NULL, NULL, "conv1.weight has shape [108]");
    refuse(d, &sf, path, NULL, NULL, "fc.bias", NULL, "fc.bias is F64");
    refuse(d, &sf, path, NULL, NULL, "bn1.num_batches_tracked", NULL, "bn1.num_batches_tracked is F64");
    /* the counters may be left out (files written without them) */
    StWriteTensor *t = calloc((size_t)sf.n, sizeof *t);
    int n = 0;
    for (int i = 0; i < sf.n; i++) {
        if (strstr(sf.t[i].name, "num_batches_tracked")) continue;
        t[n] = (StWriteTensor){sf.t[i].name, sf.t[i].dtype, sf.t[i].ndim, {0}, sf.t[i].data};
        memcpy(t[n++].shape, sf.t[i].shape, sizeof t[0].shape);
    }
    st_write(path, t, n, NULL, 0, err, sizeof err);
    CHECK(model_import_safetensors(d, path, err, sizeof err) == 0 &&
              memcmp(d->state, a->state, a->nstate * sizeof(float)) == 0,
          "without num_batches_tracked: accepted (%s)", err);
    free(t);
    st_free(&sf);
    model_free(a), model_free(b), model_free(d);

    /* ResNet-50: bottlenecks and projection shortcuts, torchvision's names */
    ResNet50Config rc = resnet50_config();
    rc.width = 2, rc.num_classes = 3, rc.in_h = rc.in_w = 32, rc.seed = 5;
    a = resnet50_create(&rc, 1);
    rc.seed = 6;
    b = resnet50_create(&rc, 1);
    for (size_t k = 0; k < a->nstate; k++) a->state[k] = (float)k;
    model_round_trip("resnet50", a, b, path);
    CHECK(st_read(&sf, path, err, sizeof err) == 0, "read: %s", err);
    rv = st_find(&sf, "layer4.0.downsample.1.running_var");
    CHECK(rv && rv->shape[0] == 64 && st_find(&sf, "layer4.2.bn3.num_batches_tracked") &&
              sf.n == a->pt.n + 3 * 53,
          "resnet50: %d tensors (%d parameters, 3 per BN), layer4.0.downsample.1.running_var [64]", sf.n, a->pt.n);
    st_free(&sf);
    model_free(a), model_free(b);

    LstmLmConfig lc = lstm_lm_config_sbc_char();
    lc.vocab = 11, lc.emb = lc.hidden = 6, lc.layers = 2, lc.tie_weights = 1, lc.seed = 3;
    a = lstm_lm_create(&lc, 2, 4);
    lc.seed = 4;
    b = lstm_lm_create(&lc, 2, 4);
    model_round_trip("tied lstm", a, b, path);
    CHECK(st_read(&sf, path, err, sizeof err) == 0, "read: %s", err);
    const StTensor *dw = st_find(&sf, "decoder.weight"), *ew = st_find(&sf, "encoder.weight");
    CHECK(dw && ew && dw->nbytes == ew->nbytes && !memcmp(dw->data, ew->data, dw->nbytes),
          "a tied model exports decoder.weight = encoder.weight");
    refuse(b, &sf, path, "decoder.weight", NULL, NULL, NULL, "decoder.weight of this model is missing");
    /* a decoder that differs from the encoder */
    ((float *)dw->data)[3] += 1.0f;
    refuse(b, &sf, path, NULL, NULL, NULL, NULL, "decoder.weight differs from encoder.weight");
    st_free(&sf);
    model_free(a), model_free(b);
    unlink(path);
}

int main(void) {
    reader_rules();
    round_trip();
    models();
    TEST_END();
}
