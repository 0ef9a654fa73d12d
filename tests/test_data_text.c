/* Language-model text: tokenization, vocabulary, batchify/get_batch windows
 * and the character corpus against PyTorch word_language_model references
 * (tests/fixtures/data_ref.bin from tests/ref/data_fixtures.py); LM loader
 * resume, epochs and errors; real-data checks when $DATA_DIR/ptb and
 * $DATA_DIR/shakespeare exist. */
#include "datasets/data.h"
#include "datasets/text.h"
#include "tests/test.h"
#include "tests/test_data.h"

static int same_ints(const int *a, const int *b, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        if (a[i] != b[i]) return 0;
    return 1;
}

static void test_words(void) {
    uint32_t ntt, nvt, ntr, nva;
    const uint8_t *tt = fix_get("lm.train_text", 2, &ntt);
    const uint8_t *vt = fix_get("lm.valid_text", 2, &nvt);
    const int *tr = fix_get("lm.train_ids", 0, &ntr);
    const int *va = fix_get("lm.valid_ids", 0, &nva);
    const int *V = fix_get("lm.V", 0, NULL);
    write_file(tpath("train.txt"), tt, ntt);
    write_file(tpath("valid.txt"), vt, nvt);
    char err[DATA_ERR_LEN];
    TextCorpus c;
    int rc = word_corpus_load(&c, tpath("train.txt"), tpath("valid.txt"), NULL, err, sizeof err);
    CHECK(rc == 0, "word corpus: %s", err);
    if (rc) return;
    CHECK(c.vocab.V == *V, "vocabulary size %d, PyTorch %d", c.vocab.V, *V);
    CHECK(c.ntrain == ntr && same_ints(c.train, tr, ntr), "training ids equal PyTorch's (%lld vs %u tokens)",
          (long long)c.ntrain, ntr);
    CHECK(c.nvalid == nva && same_ints(c.valid, va, nva), "validation ids (OOV -> <unk>) equal the reference");
    CHECK(c.test == NULL && c.ntest == 0, "no test file, no test stream");
    int eos = vocab_find(&c.vocab, "<eos>", 5);
    CHECK(eos == c.vocab.eos && eos >= 0 && c.train[c.ntrain - 1] == eos, "stream ends with <eos>");
    CHECK(c.vocab.unk == vocab_find(&c.vocab, "<unk>", 5), "unk id");
    /* id -> word -> id */
    int ok = 1;
    for (int i = 0; i < c.vocab.V; i++) ok &= vocab_find(&c.vocab, c.vocab.words[i], c.vocab.lens[i]) == i;
    CHECK(ok, "vocabulary lookups invert ids");
    CHECK(vocab_find(&c.vocab, "zzz", 3) == -1, "validation words do not enter the vocabulary");

    /* batchify + get_batch windows for each (W, w, B, T) */
    const int *ncfg = fix_get("lm.ncfg", 0, NULL);
    for (int k = 0; k < *ncfg; k++) {
        char name[32];
        snprintf(name, sizeof name, "lm.c%d.cfg", k);
        const int *cfg = fix_get(name, 0, NULL);
        uint32_t nx, nl;
        snprintf(name, sizeof name, "lm.c%d.x", k);
        const int *rx = fix_get(name, 0, &nx);
        snprintf(name, sizeof name, "lm.c%d.y", k);
        const int *ry = fix_get(name, 0, NULL);
        snprintf(name, sizeof name, "lm.c%d.lens", k);
        const int *rl = fix_get(name, 0, &nl);
        int W = cfg[0], w = cfg[1], B = cfg[2], T = cfg[3];
        LmLoader l;
        rc = lm_loader_init(&l, c.train, c.ntrain, B, T, w, W, err, sizeof err);
        CHECK(rc == 0, "lm loader W=%d B=%d T=%d: %s", W, B, T, err);
        if (rc) continue;
        CHECK(l.steps_per_epoch == (int64_t)nl, "windows per epoch %lld, PyTorch %u", (long long)l.steps_per_epoch, nl);
        int *x = malloc(sizeof(int) * (size_t)(T * B)), *y = malloc(sizeof(int) * (size_t)(T * B));
        int good = 1;
        size_t off = 0;
        for (uint32_t s = 0; s < nl; s++) {
            int t = lm_loader_next(&l, x, y);
            if (t != rl[s] || off + (size_t)t * B > nx) {
                good = 0;
                break;
            }
            if (!same_ints(x, rx + off, (int64_t)t * B) || !same_ints(y, ry + off, (int64_t)t * B)) good = 0;
            off += (size_t)t * B;
        }
        CHECK(good && off == nx, "windows of W=%d w=%d B=%d T=%d equal batchify/get_batch", W, w, B, T);
        CHECK(lm_loader_next(&l, x, y) == 0 && l.epoch == 1 && l.cursor == 0, "epoch end after the last window");
        int t0 = lm_loader_next(&l, x, y);
        CHECK(t0 == rl[0] && same_ints(x, rx, (int64_t)t0 * B), "second epoch starts over");
        free(x);
        free(y);
        lm_loader_free(&l);
    }
    text_corpus_free(&c);
}

static void test_chars(void) {
    uint32_t ntt, ntr, nva;
    const uint8_t *tt = fix_get("lm.train_text", 2, &ntt);
    const int *tr = fix_get("ch.train", 0, &ntr);
    const int *va = fix_get("ch.valid", 0, &nva);
    const int *V = fix_get("ch.V", 0, NULL);
    char err[DATA_ERR_LEN];
    TextCorpus c;
    int rc = char_corpus_load(&c, tpath("train.txt"), 0.1, err, sizeof err);
    CHECK(rc == 0, "char corpus: %s", err);
    if (rc) return;
    CHECK(c.vocab.V == *V && c.vocab.is_char, "character vocabulary %d, reference %d", c.vocab.V, *V);
    CHECK(c.ntrain == ntr && same_ints(c.train, tr, ntr), "character training ids and 90%% split");
    CHECK(c.nvalid == nva && same_ints(c.valid, va, nva), "character validation ids (last 10%%)");
    int ok = 1;
    for (int i = 1; i < c.vocab.V; i++) ok &= c.vocab.bytes[i - 1] < c.vocab.bytes[i];
    for (uint32_t i = 0; i < ntr; i++) ok &= c.vocab.bytes[c.train[i]] == tt[i];
    CHECK(ok, "ids decode to the text, vocabulary sorted");
    text_corpus_free(&c);
}

static void test_resume_and_errors(void) {
    enum { N = 1000, B = 4, T = 9 };
    int stream[N];
    for (int i = 0; i < N; i++) stream[i] = (int)(trand() % 50);
    char err[DATA_ERR_LEN];
    LmLoader a, b;
    int rc = lm_loader_init(&a, stream, N, B, T, 1, 2, err, sizeof err);
    CHECK(rc == 0, "%s", err);
    /* part = 500 tokens, L = 125 per column; windows of 9: ceil(124/9) = 14 */
    CHECK(a.L == 125 && a.steps_per_epoch == 14, "L %lld steps %lld", (long long)a.L, (long long)a.steps_per_epoch);
    /* next-token property against the raw stream: column b of worker 1 is stream[500 + b*125 ...] */
    int x[T * B], y[T * B], ok = 1;
    int t = lm_loader_next(&a, x, y);
    for (int s = 0; s < t; s++)
        for (int c = 0; c < B; c++) {
            ok &= x[s * B + c] == stream[500 + c * 125 + s];
            ok &= y[s * B + c] == stream[500 + c * 125 + s + 1];
        }
    CHECK(ok && t == T, "tokens and next-token targets come from worker 1's quarter");
    for (int i = 0; i < 16; i++) lm_loader_next(&a, x, y); /* crosses the epoch end */
    LoaderPos p = lm_loader_get_pos(&a);
    uint8_t rec[LOADER_POS_BYTES];
    loader_pos_pack(rec, &p);
    int xa[20][T * B], ya[20][T * B], ta[20];
    for (int i = 0; i < 20; i++) ta[i] = lm_loader_next(&a, xa[i], ya[i]);
    lm_loader_init(&b, stream, N, B, T, 1, 2, err, sizeof err);
    LoaderPos q;
    loader_pos_unpack(&q, rec, sizeof rec, err, sizeof err);
    rc = lm_loader_set_pos(&b, &q);
    CHECK(rc == 0, "set pos: %s", b.err);
    int same = 1;
    for (int i = 0; i < 20; i++) {
        int tb = lm_loader_next(&b, x, y);
        same &= tb == ta[i] && (tb == 0 || (same_ints(x, xa[i], tb * B) && same_ints(y, ya[i], tb * B)));
    }
    CHECK(same && p.epoch == 1, "resumed LM loader continues exactly (epoch %lld cursor %lld)", (long long)p.epoch,
          (long long)p.cursor);
    lm_loader_free(&b);
    lm_loader_init(&b, stream, N, B, T + 1, 1, 2, err, sizeof err);
    CHECK(lm_loader_set_pos(&b, &q) == -GC_ERR_STATE, "other window length refuses the position: %s", b.err);
    lm_loader_free(&b);
    lm_loader_free(&a);

    CHECK(lm_loader_init(&a, stream, N, 600, T, 0, 1, err, sizeof err) == -GC_ERR_PARAM, "too many columns: %s", err);
    CHECK(lm_loader_init(&a, stream, N, B, 0, 0, 1, err, sizeof err) == -GC_ERR_PARAM, "T = 0 refused");
    CHECK(lm_loader_init(&a, stream, N, B, T, 2, 2, err, sizeof err) == -GC_ERR_PARAM, "worker out of range refused");

    TextCorpus c;
    rc = ptb_load(&c, tpath("noptb"), err, sizeof err);
    CHECK(rc == -GC_ERR_IO && strstr(err, "noptb/ptb.train.txt") && strstr(err, "simple-examples.tgz"),
          "missing PTB names the file and the download: %s", err);
    rc = char_corpus_load(&c, tpath("none.txt"), 0.1, err, sizeof err);
    CHECK(rc == -GC_ERR_IO && strstr(err, "none.txt") && strstr(err, "input.txt"), "missing text: %s", err);
    write_file(tpath("empty.txt"), "", 0);
    rc = word_corpus_load(&c, tpath("empty.txt"), NULL, NULL, err, sizeof err);
    CHECK(rc == -GC_ERR_TRUNCATED, "empty training file refused: %s", err);
    rc = char_corpus_load(&c, tpath("empty.txt"), 0.1, err, sizeof err);
    CHECK(rc == -GC_ERR_TRUNCATED, "empty character file refused: %s", err);
    rc = char_corpus_load(&c, tpath("train.txt"), 1.0, err, sizeof err);
    CHECK(rc == -GC_ERR_PARAM, "validation fraction 1 refused: %s", err);
    rc = word_corpus_load(&c, tdir_, NULL, NULL, err, sizeof err);
    CHECK(rc == -GC_ERR_IO, "a directory is not a text file: %s", err);
    /* binary junk (NUL bytes, high bytes) is just text: no crash, consistent ids */
    uint8_t junk[4096];
    for (size_t i = 0; i < sizeof junk; i++) junk[i] = (uint8_t)trand();
    write_file(tpath("junk.txt"), junk, sizeof junk);
    rc = word_corpus_load(&c, tpath("junk.txt"), tpath("junk.txt"), NULL, err, sizeof err);
    CHECK(rc == 0 && c.ntrain == c.nvalid && same_ints(c.train, c.valid, c.ntrain), "binary file tokenizes: %s", err);
    if (rc == 0) text_corpus_free(&c);
}

static void test_real_data(void) {
    char err[DATA_ERR_LEN];
    TextCorpus c;
    if (real_data("ptb")) {
        int rc = ptb_load(&c, NULL, err, sizeof err);
        CHECK(rc == 0, "real PTB: %s", err);
        if (rc == 0) {
            printf("  PTB: V=%d train %lld valid %lld test %lld tokens\n", c.vocab.V, (long long)c.ntrain,
                   (long long)c.nvalid, (long long)c.ntest);
            /* the counts PyTorch's word_language_model reports for PTB */
            CHECK(c.vocab.V == 10000 && c.ntrain == 929589 && c.nvalid == 73760 && c.ntest == 82430,
                  "PTB sizes (10000 words; 929589 / 73760 / 82430 tokens)");
            LmLoader l;
            rc = lm_loader_init(&l, c.train, c.ntrain, 20, 35, 3, 4, err, sizeof err);
            CHECK(rc == 0 && l.L == 929589 / 4 / 20, "PTB worker quarter: %s", err);
            if (rc == 0) lm_loader_free(&l);
            text_corpus_free(&c);
        }
    }
    if (real_data("shakespeare/input.txt")) {
        int rc = char_corpus_load(&c, NULL, 0.1, err, sizeof err);
        CHECK(rc == 0, "real Shakespeare: %s", err);
        if (rc == 0) {
            printf("  Shakespeare: V=%d train %lld valid %lld characters\n", c.vocab.V, (long long)c.ntrain,
                   (long long)c.nvalid);
            CHECK(c.vocab.V == 65 && c.ntrain + c.nvalid == 1115394 && c.ntrain == 1003854, "tiny Shakespeare sizes");
            text_corpus_free(&c);
        }
    }
}

int main(void) {
    if (fix_load("tests/fixtures/data_ref.bin")) {
        CHECK(0, "fixture missing");
        TEST_END();
    }
    tmpdir_make();
    test_words();
    test_chars();
    test_resume_and_errors();
    test_real_data();
    tmpdir_remove();
    fix_free();
    TEST_END();
}
