/* safetensors reader and writer (see safetensors.h for the format and what the
 * reader accepts). The header parser is a strict JSON parser for exactly this
 * subset: one object whose values are tensor entries or the __metadata__
 * object of strings. It keeps a position into the header and never reads past
 * its end; every failure sets a message and unwinds. */
#include "common/safetensors.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const struct {
    const char *name;
    size_t size;
} dtypes[ST_DTYPE_COUNT] = {
#define ST_X_TABLE(name, size) {#name, size},
    ST_DTYPE_LIST(ST_X_TABLE)
#undef ST_X_TABLE
};

const char *st_dtype_name(StDtype d) { return (unsigned)d < ST_DTYPE_COUNT ? dtypes[d].name : "?"; }
size_t st_dtype_size(StDtype d) { return (unsigned)d < ST_DTYPE_COUNT ? dtypes[d].size : 0; }

void st_shape_str(char *buf, size_t n, const uint64_t *shape, int ndim) {
    size_t k = (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < ndim && k < n; i++)
        k += (size_t)snprintf(buf + k, n - k, "%s%llu", i ? ", " : "", (unsigned long long)shape[i]);
    if (k < n) snprintf(buf + k, n - k, "]");
}

/* ------------------------------------------------------------- reader ---- */
typedef struct {
    const uint8_t *s; /* the header */
    size_t n, at;
    const char *name; /* the file, for messages */
    char *err;
    size_t errlen;
    int failed;
} Parser;

static int fail(Parser *p, const char *fmt, ...) {
    if (p->failed) return -1;
    p->failed = 1;
    char what[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    snprintf(p->err, p->errlen, "%s: safetensors header: %s (at byte %zu of the header)", p->name, what, p->at);
    return -1;
}

static void ws(Parser *p) {
    while (p->at < p->n && (p->s[p->at] == ' ' || p->s[p->at] == '\t' || p->s[p->at] == '\n' || p->s[p->at] == '\r'))
        p->at++;
}

static int expect(Parser *p, char c) {
    ws(p);
    if (p->at >= p->n) return fail(p, "expected '%c', found the end of the header", c);
    if (p->s[p->at] != (uint8_t)c) return fail(p, "expected '%c', found '%c'", c, p->s[p->at] >= 0x20 && p->s[p->at] < 0x7f ? p->s[p->at] : '?');
    p->at++;
    return 0;
}

/* the next non-space byte, or -1 at the end (not consumed) */
static int peek(Parser *p) {
    ws(p);
    return p->at < p->n ? p->s[p->at] : -1;
}

/* length of a well-formed UTF-8 sequence at s (of at most n bytes), or 0 */
static size_t utf8_len(const uint8_t *s, size_t n) {
    uint8_t c = s[0];
    size_t len;
    uint32_t min, cp;
    if (c < 0x80) return 1;
    if ((c & 0xE0) == 0xC0) len = 2, min = 0x80, cp = c & 0x1F;
    else if ((c & 0xF0) == 0xE0) len = 3, min = 0x800, cp = c & 0x0F;
    else if ((c & 0xF8) == 0xF0) len = 4, min = 0x10000, cp = c & 0x07;
    else return 0;
    if (len > n) return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (s[i] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    return len;
}

static size_t put_utf8(char *o, uint32_t cp) {
    if (cp < 0x80) return o[0] = (char)cp, 1;
    if (cp < 0x800) return o[0] = (char)(0xC0 | (cp >> 6)), o[1] = (char)(0x80 | (cp & 0x3F)), 2;
    if (cp < 0x10000)
        return o[0] = (char)(0xE0 | (cp >> 12)), o[1] = (char)(0x80 | ((cp >> 6) & 0x3F)),
               o[2] = (char)(0x80 | (cp & 0x3F)), 3;
    o[0] = (char)(0xF0 | (cp >> 18)), o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3F)), o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

static int hex4(Parser *p, uint32_t *v) {
    if (p->n - p->at < 4) return fail(p, "a \\u escape needs 4 hex digits");
    *v = 0;
    for (int i = 0; i < 4; i++) {
        uint8_t c = p->s[p->at++];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) return fail(p, "bad hex digit in a \\u escape");
        *v = (*v << 4) | (uint32_t)d;
    }
    return 0;
}

/* a JSON string, decoded into a malloc'ed NUL-terminated *out (len in *len);
 * the decoded form is never longer than the raw one */
static int string(Parser *p, char **out, size_t *len) {
    *out = NULL;
    if (expect(p, '"')) return -1;
    size_t start = p->at;
    /* the raw extent first, for the allocation */
    size_t e = start;
    while (e < p->n && p->s[e] != '"') e += p->s[e] == '\\' ? 2 : 1;
    if (e >= p->n) return fail(p, "unterminated string");
    char *o = malloc(e - start + 1);
    if (!o) return fail(p, "out of memory");
    size_t k = 0;
    while (p->s[p->at] != '"') {
        uint8_t c = p->s[p->at];
        if (c < 0x20) {
            free(o);
            return fail(p, "raw control character 0x%02x in a string", c);
        }
        if (c != '\\') {
            size_t u = utf8_len(p->s + p->at, p->n - p->at);
            if (!u) {
                free(o);
                return fail(p, "invalid UTF-8 in a string");
            }
            memcpy(o + k, p->s + p->at, u);
            k += u, p->at += u;
            continue;
        }
        p->at++; /* a backslash is never the header's last byte: the raw scan found the closing quote after it */
        uint8_t x = p->s[p->at++];
        const char *simple = strchr("\"\\/bfnrt", x);
        if (x && simple) {
            static const char map[] = "\"\\/\b\f\n\r\t";
            o[k++] = map[simple - "\"\\/bfnrt"];
            continue;
        }
        if (x != 'u') {
            free(o);
            return fail(p, "unknown escape \\%c", x >= 0x20 && x < 0x7f ? x : '?');
        }
        uint32_t cp, lo;
        if (hex4(p, &cp)) {
            free(o);
            return -1;
        }
        if (cp >= 0xDC00 && cp <= 0xDFFF) {
            free(o);
            return fail(p, "lone low surrogate \\u%04x", cp);
        }
        if (cp >= 0xD800 && cp <= 0xDBFF) {
            if (p->n - p->at < 2 || p->s[p->at] != '\\' || p->s[p->at + 1] != 'u') {
                free(o);
                return fail(p, "high surrogate \\u%04x without its low half", cp);
            }
            p->at += 2;
            if (hex4(p, &lo) || lo < 0xDC00 || lo > 0xDFFF) {
                free(o);
                return fail(p, "high surrogate \\u%04x without its low half", cp);
            }
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
        }
        if (cp == 0) {
            free(o);
            return fail(p, "\\u0000 in a string");
        }
        k += put_utf8(o + k, cp);
    }
    p->at++; /* the closing quote */
    o[k] = 0;
    *out = o;
    *len = k;
    return 0;
}

/* a non-negative integer below 2^53: digits only, no leading zero */
static int uint_value(Parser *p, uint64_t *v) {
    ws(p);
    if (p->at >= p->n || p->s[p->at] < '0' || p->s[p->at] > '9') return fail(p, "expected a non-negative integer");
    if (p->s[p->at] == '0' && p->at + 1 < p->n && p->s[p->at + 1] >= '0' && p->s[p->at + 1] <= '9')
        return fail(p, "integer with a leading zero");
    *v = 0;
    while (p->at < p->n && p->s[p->at] >= '0' && p->s[p->at] <= '9') {
        *v = *v * 10 + (uint64_t)(p->s[p->at++] - '0');
        if (*v >= (1ull << 53)) return fail(p, "integer too large (2^53 or more)");
    }
    if (p->at < p->n && (p->s[p->at] == '.' || p->s[p->at] == 'e' || p->s[p->at] == 'E'))
        return fail(p, "expected an integer, found a fraction or an exponent");
    return 0;
}

/* [u, u, ...] with at most max values */
static int uint_array(Parser *p, uint64_t *v, int max, int *count, const char *what) {
    *count = 0;
    if (expect(p, '[')) return -1;
    if (peek(p) == ']') {
        p->at++;
        return 0;
    }
    for (;;) {
        if (*count == max) return fail(p, "%s has more than %d values", what, max);
        if (uint_value(p, &v[(*count)++])) return -1;
        int c = peek(p);
        if (c == ']') {
            p->at++;
            return 0;
        }
        if (c != ',') return fail(p, "expected ',' or ']' in %s", what);
        p->at++;
    }
}

/* {"dtype": ..., "shape": [...], "data_offsets": [b, e]} */
static int tensor_entry(Parser *p, StTensor *t, uint64_t off[2]) {
    int seen[3] = {0, 0, 0};
    if (expect(p, '{')) return -1;
    if (peek(p) == '}') return fail(p, "tensor \"%s\": empty entry (needs dtype, shape, data_offsets)", t->name);
    for (;;) {
        char *key;
        size_t klen;
        if (string(p, &key, &klen)) return -1;
        int which = !strcmp(key, "dtype") ? 0 : !strcmp(key, "shape") ? 1 : !strcmp(key, "data_offsets") ? 2 : -1;
        if (which < 0) {
            fail(p, "tensor \"%s\": unknown key \"%.40s\" (expected dtype, shape, data_offsets)", t->name, key);
            free(key);
            return -1;
        }
        free(key);
        if (seen[which]++) return fail(p, "tensor \"%s\": duplicate key", t->name);
        if (expect(p, ':')) return -1;
        if (which == 0) {
            char *d;
            size_t dlen;
            if (string(p, &d, &dlen)) return -1;
            int k = 0;
            while (k < ST_DTYPE_COUNT && strcmp(d, dtypes[k].name)) k++;
            if (k == ST_DTYPE_COUNT) {
                fail(p, "tensor \"%s\": unknown dtype \"%.20s\"", t->name, d);
                free(d);
                return -1;
            }
            free(d);
            t->dtype = (StDtype)k;
        } else if (which == 1) {
            if (uint_array(p, t->shape, ST_MAX_DIMS, &t->ndim, "shape")) return -1;
        } else {
            int c;
            if (uint_array(p, off, 2, &c, "data_offsets")) return -1;
            if (c != 2) return fail(p, "tensor \"%s\": data_offsets needs 2 values, has %d", t->name, c);
            if (off[1] < off[0]) return fail(p, "tensor \"%s\": data_offsets end before they begin", t->name);
        }
        int c = peek(p);
        if (c == '}') {
            p->at++;
            break;
        }
        if (c != ',') return fail(p, "expected ',' or '}' in tensor \"%s\"", t->name);
        p->at++;
    }
    if (!seen[0] || !seen[1] || !seen[2])
        return fail(p, "tensor \"%s\": missing %s", t->name, !seen[0] ? "dtype" : !seen[1] ? "shape" : "data_offsets");
    return 0;
}

static int metadata(Parser *p, StFile *sf) {
    if (expect(p, '{')) return -1;
    if (peek(p) == '}') {
        p->at++;
        return 0;
    }
    for (;;) {
        char *k, *v;
        size_t kl, vl;
        if (string(p, &k, &kl)) return -1;
        if (expect(p, ':') || peek(p) != '"') {
            free(k);
            return fail(p, "__metadata__ values must be strings");
        }
        if (string(p, &v, &vl)) {
            free(k);
            return -1;
        }
        for (int i = 0; i < sf->nmeta; i++)
            if (!strcmp(sf->meta_key[i], k)) {
                fail(p, "duplicate __metadata__ key \"%.60s\"", k);
                free(k), free(v);
                return -1;
            }
        char **nk = realloc(sf->meta_key, (size_t)(sf->nmeta + 1) * sizeof *nk);
        if (nk) sf->meta_key = nk;
        char **nv = realloc(sf->meta_val, (size_t)(sf->nmeta + 1) * sizeof *nv);
        if (nv) sf->meta_val = nv;
        if (!nk || !nv) {
            free(k), free(v);
            return fail(p, "out of memory");
        }
        sf->meta_key[sf->nmeta] = k;
        sf->meta_val[sf->nmeta++] = v;
        int c = peek(p);
        if (c == '}') {
            p->at++;
            return 0;
        }
        if (c != ',') return fail(p, "expected ',' or '}' in __metadata__");
        p->at++;
    }
}

typedef struct {
    uint64_t begin, end;
    int i;
} Span;

static int by_begin(const void *a, const void *b) {
    const Span *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return x->i - y->i;
}

/* names compared through pointers to them: no state outside the array, so workers may
 * parse files at the same time */
static int by_name(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

static uint64_t rd64(const uint8_t *b) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | b[i];
    return v;
}

/* the header object, then the data layout */
static int parse_header(Parser *p, StFile *sf, uint64_t **offs, size_t data_size) {
    int cap = 0, have_meta = 0;
    if (expect(p, '{')) return -1;
    if (peek(p) == '}') p->at++;
    else
        for (;;) {
            char *key;
            size_t klen;
            if (string(p, &key, &klen)) return -1;
            if (expect(p, ':')) {
                free(key);
                return -1;
            }
            if (!strcmp(key, "__metadata__")) {
                free(key);
                if (have_meta++) return fail(p, "duplicate __metadata__");
                if (metadata(p, sf)) return -1;
            } else {
                if (klen >= ST_NAME_MAX) {
                    fail(p, "tensor name of %zu bytes (at most %d): \"%.40s...\"", klen, ST_NAME_MAX - 1, key);
                    free(key);
                    return -1;
                }
                if (klen == 0) {
                    free(key);
                    return fail(p, "empty tensor name");
                }
                if (sf->n == ST_MAX_TENSORS) {
                    free(key);
                    return fail(p, "more than %d tensors", ST_MAX_TENSORS);
                }
                if (sf->n == cap) {
                    cap = cap ? 2 * cap : 64;
                    StTensor *nt = realloc(sf->t, (size_t)cap * sizeof *nt);
                    uint64_t *no = realloc(*offs, (size_t)cap * 2 * sizeof *no);
                    if (nt) sf->t = nt;
                    if (no) *offs = no;
                    if (!nt || !no) {
                        free(key);
                        return fail(p, "out of memory");
                    }
                }
                StTensor *t = &sf->t[sf->n];
                memset(t, 0, sizeof *t);
                t->name = key;
                sf->n++;
                if (tensor_entry(p, t, *offs + 2 * (sf->n - 1))) return -1;
            }
            int c = peek(p);
            if (c == '}') {
                p->at++;
                break;
            }
            if (c != ',') return fail(p, "expected ',' or '}' after an entry");
            p->at++;
        }
    ws(p);
    if (p->at != p->n) return fail(p, "bytes after the header object (only space padding may follow it)");
    /* sizes: end - begin == numel x dtype size */
    for (int i = 0; i < sf->n; i++) {
        StTensor *t = &sf->t[i];
        uint64_t numel = 1;
        for (int d = 0; d < t->ndim; d++) {
            if (t->shape[d] && numel > UINT64_MAX / t->shape[d])
                return fail(p, "tensor \"%s\": the shape's size overflows", t->name);
            numel *= t->shape[d];
        }
        uint64_t bytes = numel * dtypes[t->dtype].size, *o = *offs + 2 * i;
        if (numel && bytes / numel != dtypes[t->dtype].size)
            return fail(p, "tensor \"%s\": the shape's size overflows", t->name);
        if (o[1] - o[0] != bytes) {
            char sh[200];
            st_shape_str(sh, sizeof sh, t->shape, t->ndim);
            return fail(p, "tensor \"%s\": data_offsets [%llu, %llu] hold %llu bytes, but %s %s needs %llu", t->name,
                        (unsigned long long)o[0], (unsigned long long)o[1], (unsigned long long)(o[1] - o[0]),
                        dtypes[t->dtype].name, sh, (unsigned long long)bytes);
        }
        t->numel = numel;
    }
    /* names unique */
    const char **names = malloc((size_t)(sf->n ? sf->n : 1) * sizeof *names);
    Span *sp = malloc((size_t)(sf->n ? sf->n : 1) * sizeof *sp);
    if (!names || !sp) {
        free(names), free(sp);
        return fail(p, "out of memory");
    }
    for (int i = 0; i < sf->n; i++) names[i] = sf->t[i].name;
    qsort(names, (size_t)sf->n, sizeof *names, by_name);
    for (int i = 1; i < sf->n; i++)
        if (!strcmp(names[i], names[i - 1])) {
            fail(p, "duplicate tensor \"%s\"", names[i]);
            free(names), free(sp);
            return -1;
        }
    free(names);
    /* the tensors tile the data buffer */
    for (int i = 0; i < sf->n; i++) sp[i] = (Span){(*offs)[2 * i], (*offs)[2 * i + 1], i};
    qsort(sp, (size_t)sf->n, sizeof *sp, by_begin);
    uint64_t pos = 0;
    for (int i = 0; i < sf->n; i++) {
        if (sp[i].begin != pos) {
            int rc = fail(p, "tensor \"%s\" begins at byte %llu of the data, where %s at %llu (%s)",
                          sf->t[sp[i].i].name, (unsigned long long)sp[i].begin,
                          i ? "the previous tensor ends" : "the data begins", (unsigned long long)pos,
                          sp[i].begin > pos ? "a gap" : "an overlap");
            free(sp);
            return rc;
        }
        pos = sp[i].end;
    }
    free(sp);
    if (pos != data_size) {
        p->at = p->n;
        return fail(p, "the tensors hold %llu bytes of data, the file has %zu after the header (%s)",
                    (unsigned long long)pos, data_size, pos < data_size ? "trailing bytes" : "truncated");
    }
    return 0;
}

int st_parse(StFile *sf, const char *name, char *err, size_t errlen) {
    sf->n = 0, sf->t = NULL, sf->nmeta = 0, sf->meta_key = sf->meta_val = NULL;
    const uint16_t one = 1;
    if (*(const uint8_t *)&one != 1) {
        snprintf(err, errlen, "%s: safetensors files hold little-endian data; this host is big-endian", name);
        st_free(sf);
        return -1;
    }
    if (sf->size < 8) {
        snprintf(err, errlen, "%s: %zu bytes is too short for a safetensors file (8-byte header length first)", name,
                 sf->size);
        st_free(sf);
        return -1;
    }
    uint64_t hn = rd64(sf->file);
    if (hn > ST_HEADER_MAX && hn <= sf->size - 8) {
        snprintf(err, errlen, "%s: safetensors header of %llu bytes is over the limit of %u", name,
                 (unsigned long long)hn, ST_HEADER_MAX);
        st_free(sf);
        return -1;
    }
    if (hn == 0 || hn > sf->size - 8) {
        snprintf(err, errlen,
                 "%s is not a safetensors file: its first 8 bytes give a header of %llu bytes (the file has %zu)%s",
                 name, (unsigned long long)hn, sf->size,
                 sf->size >= 8 && !memcmp(sf->file, "GCXCKPT", 7) ? "; it is a gcx checkpoint (--resume reads those)"
                                                                   : "");
        st_free(sf);
        return -1;
    }
    Parser p = {sf->file + 8, (size_t)hn, 0, name, err, errlen, 0};
    uint64_t *offs = NULL;
    size_t data_size = sf->size - 8 - (size_t)hn;
    int rc = parse_header(&p, sf, &offs, data_size);
    if (rc == 0) {
        const uint8_t *data = sf->file + 8 + hn;
        for (int i = 0; i < sf->n; i++) {
            sf->t[i].data = data + offs[2 * i];
            sf->t[i].nbytes = (size_t)(offs[2 * i + 1] - offs[2 * i]);
        }
    }
    free(offs);
    if (rc) st_free(sf);
    return rc ? -1 : 0;
}

int st_read(StFile *sf, const char *path, char *err, size_t errlen) {
    memset(sf, 0, sizeof *sf);
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "cannot open %s: %s", path, strerror(errno));
        return -1;
    }
    struct stat st = {0};
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        fclose(f);
        snprintf(err, errlen, "%s is %s, not a safetensors file", path,
                 S_ISDIR(st.st_mode) ? "a folder" : "not a regular file");
        return -1;
    }
    sf->size = (size_t)st.st_size;
    sf->file = malloc(sf->size ? sf->size : 1);
    if (!sf->file || fread(sf->file, 1, sf->size, f) != sf->size) {
        fclose(f);
        st_free(sf);
        snprintf(err, errlen, "cannot read %s", path);
        return -1;
    }
    fclose(f);
    return st_parse(sf, path, err, errlen);
}

void st_free(StFile *sf) {
    for (int i = 0; i < sf->n; i++) free(sf->t[i].name); /* n counts an entry from its name on */
    for (int i = 0; i < sf->nmeta; i++) free(sf->meta_key[i]), free(sf->meta_val[i]);
    free(sf->t);
    free(sf->meta_key);
    free(sf->meta_val);
    free(sf->file);
    memset(sf, 0, sizeof *sf);
}

const StTensor *st_find(const StFile *sf, const char *name) {
    for (int i = 0; i < sf->n; i++)
        if (!strcmp(sf->t[i].name, name)) return &sf->t[i];
    return NULL;
}

/* ------------------------------------------------------------- writer ---- */
typedef struct {
    char *p;
    size_t len, cap;
    int oom;
} Str;

static void add(Str *s, const char *fmt, ...) {
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        size_t room = s->cap - s->len;
        int k = s->p ? vsnprintf(s->p + s->len, room, fmt, ap) : -1;
        va_end(ap);
        if (k >= 0 && (size_t)k < room) {
            s->len += (size_t)k;
            return;
        }
        size_t cap = s->cap ? 2 * s->cap : 4096;
        while (k >= 0 && cap - s->len <= (size_t)k) cap *= 2;
        char *np = realloc(s->p, cap);
        if (!np) {
            s->oom = 1;
            return;
        }
        s->p = np, s->cap = cap;
    }
}

/* a JSON string of s */
static void add_json(Str *s, const char *x) {
    add(s, "\"");
    for (; *x; x++) {
        unsigned char c = (unsigned char)*x;
        if (c == '"' || c == '\\') add(s, "\\%c", c);
        else if (c < 0x20) add(s, "\\u%04x", c);
        else add(s, "%c", c);
    }
    add(s, "\"");
}

static void le64(uint8_t *b, uint64_t v) {
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)(v >> (8 * i));
}

int st_encode(uint8_t **out, size_t *len, const StWriteTensor *t, int n, const char *const *meta_kv, int nmeta,
              char *err, size_t errlen) {
    *out = NULL, *len = 0;
    Str h = {0};
    uint64_t pos = 0;
    add(&h, "{");
    if (nmeta > 0) {
        add(&h, "\"__metadata__\":{");
        for (int i = 0; i < nmeta; i++) {
            add(&h, i ? "," : "");
            add_json(&h, meta_kv[2 * i]);
            add(&h, ":");
            add_json(&h, meta_kv[2 * i + 1]);
        }
        add(&h, "}");
    }
    for (int i = 0; i < n; i++) {
        const char *why = (unsigned)t[i].dtype >= ST_DTYPE_COUNT      ? "unknown dtype"
                          : t[i].ndim < 0 || t[i].ndim > ST_MAX_DIMS    ? "too many dimensions"
                          : !t[i].name[0] || strlen(t[i].name) >= ST_NAME_MAX ? "empty or too long name"
                          : !strcmp(t[i].name, "__metadata__")          ? "reserved name"
                                                                        : NULL;
        for (int j = 0; j < i && !why; j++)
            if (!strcmp(t[i].name, t[j].name)) why = "duplicate name";
        if (why) {
            snprintf(err, errlen, "safetensors: tensor %d (\"%.80s\"): %s", i, t[i].name, why);
            free(h.p);
            return -1;
        }
        uint64_t numel = 1;
        for (int d = 0; d < t[i].ndim; d++) numel *= t[i].shape[d];
        uint64_t bytes = numel * dtypes[t[i].dtype].size;
        add(&h, "%s", nmeta > 0 || i ? "," : "");
        add_json(&h, t[i].name);
        add(&h, ":{\"dtype\":\"%s\",\"shape\":[", dtypes[t[i].dtype].name);
        for (int d = 0; d < t[i].ndim; d++) add(&h, "%s%llu", d ? "," : "", (unsigned long long)t[i].shape[d]);
        add(&h, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)pos, (unsigned long long)(pos + bytes));
        pos += bytes;
    }
    add(&h, "}");
    while (!h.oom && h.len % 8) add(&h, " ");
    if (h.oom) {
        free(h.p);
        snprintf(err, errlen, "safetensors: out of memory");
        return -1;
    }
    size_t total = 8 + h.len + (size_t)pos;
    uint8_t *b = malloc(total);
    if (!b) {
        free(h.p);
        snprintf(err, errlen, "safetensors: out of memory (%zu bytes)", total);
        return -1;
    }
    le64(b, h.len);
    memcpy(b + 8, h.p, h.len);
    size_t at = 8 + h.len;
    for (int i = 0; i < n; i++) {
        uint64_t numel = 1;
        for (int d = 0; d < t[i].ndim; d++) numel *= t[i].shape[d];
        size_t bytes = (size_t)(numel * dtypes[t[i].dtype].size);
        if (bytes) memcpy(b + at, t[i].data, bytes);
        at += bytes;
    }
    free(h.p);
    *out = b, *len = total;
    return 0;
}

int st_write(const char *path, const StWriteTensor *t, int n, const char *const *meta_kv, int nmeta, char *err,
             size_t errlen) {
    uint8_t *b;
    size_t len;
    if (st_encode(&b, &len, t, n, meta_kv, nmeta, err, errlen)) return -1;
    char tmp[4200];
    if (snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid()) >= (int)sizeof tmp) {
        free(b);
        snprintf(err, errlen, "path too long: %.200s", path);
        return -1;
    }
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        free(b);
        snprintf(err, errlen, "cannot create %s: %s", tmp, strerror(errno));
        return -1;
    }
    int bad = fwrite(b, 1, len, f) != len;
    bad |= fflush(f) != 0;
    bad |= fsync(fileno(f)) != 0;
    bad |= fclose(f) != 0;
    free(b);
    if (bad || rename(tmp, path) != 0) {
        snprintf(err, errlen, "writing %s failed: %s", path, strerror(errno));
        unlink(tmp);
        return -1;
    }
    return 0;
}
