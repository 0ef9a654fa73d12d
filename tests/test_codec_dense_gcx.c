/* The ./gcx tool (examples/gcx.c, built by `make` before `make test`): every
 * registered codec round-trips through a multi-frame .gcf file and gives the
 * same values as the library called directly (one instance over the frames,
 * seed + k for frame k); bad command lines exit 2 with the usage; bad files
 * exit 1 with a message naming the file. Run from the repository root. */
#include "tests/test.h"

#include <stdarg.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/check.h"
#include "common/rng.h"
#include "compress/codec.h"

static char dir[64];

/* run a shell command, capture stdout+stderr into out (truncated), return the exit status */
static int run(char *out, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int run(char *out, size_t cap, const char *fmt, ...) {
    char cmd[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    char full[1100];
    snprintf(full, sizeof full, "%s 2>&1", cmd);
    FILE *p = popen(full, "r");
    if (!p) return -1;
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = 0;
    while (fgetc(p) != EOF) {
    }
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static mode_t current_umask(void) {
    mode_t m = umask(0);
    umask(m);
    return m;
}

static void write_f32(const char *path, const float *x, size_t n) {
    FILE *f = fopenCheck(path, "wb");
    fwriteCheck(x, 4, n, f);
    fcloseCheck(f);
}

static size_t read_all(const char *path, uint8_t **buf) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        *buf = NULL;
        return 0;
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    *buf = mallocCheck((size_t)n + 1);
    size_t got = fread(*buf, 1, (size_t)n, f);
    fclose(f);
    return got;
}

static void test_every_codec(void) {
    const size_t n = 2500, F = 1000; /* three frames: 1000, 1000, 500 */
    float x[2500], want[2500];
    Rng r;
    rng_init(&r, 77, 0);
    for (size_t i = 0; i < n; i++) x[i] = rng_normal(&r) * (rng_uniform(&r) < 0.3f ? 1.0f : 0.01f);
    char in[128], gcf[128], back[128], out[4096];
    snprintf(in, sizeof in, "%s/x.f32", dir);
    snprintf(gcf, sizeof gcf, "%s/x.gcf", dir);
    snprintf(back, sizeof back, "%s/back.f32", dir);
    write_f32(in, x, n);
    for (int k = 0; k < codec_count(); k++) {
        const CodecOps *o = codec_ops_at(k);
        int rc1 = run(out, sizeof out, "./gcx encode --codec %s --frame-values %zu --seed 5 %s %s", o->name, F, in,
                      gcf);
        int rc2 = run(out, sizeof out, "./gcx decode %s %s", gcf, back);
        uint8_t *b;
        size_t blen = read_all(back, &b);
        /* the same through the library: one encoder and one decoder instance over the frames */
        CodecSpec s;
        codec_spec_default(&s, o);
        Codec *e = codec_new(&s), *d = codec_new(&s);
        int lib_ok = 1;
        for (size_t at = 0, f = 0; at < n; at += F, f++) {
            size_t m = n - at < F ? n - at : F;
            CodecSide side;
            memset(&side, 0, sizeof side);
            side.seed = 5 + f;
            size_t cap = codec_max_frame(e, m);
            uint8_t *fr = mallocCheck(cap);
            int64_t len = codec_encode(e, fr, cap, x + at, m, &side);
            lib_ok &= len > 0 && codec_decode(d, want + at, m, fr, (size_t)len) == 0;
            free(fr);
        }
        codec_free(e);
        codec_free(d);
        CHECK(rc1 == 0 && rc2 == 0 && lib_ok && blen == 4 * n && memcmp(b, want, 4 * n) == 0,
              "gcx encode/decode %s: 3 frames == library (exit %d, %d; %zu bytes)", o->name, rc1, rc2, blen);
        free(b);
    }
    /* info and stats run */
    int rc = run(out, sizeof out, "./gcx info %s", gcf);
    CHECK(rc == 0 && strstr(out, "frame 2: 500 values"), "gcx info lists the frames");
    rc = run(out, sizeof out, "./gcx stats --codec 3lc --codec int8 --threads 1 %s", in);
    CHECK(rc == 0 && strstr(out, "3lc:s=1") && strstr(out, "int8"), "gcx stats prints a row per codec");
    rc = run(out, sizeof out, "./gcx --help");
    int all = rc == 0;
    for (int k = 0; k < codec_count(); k++) all &= strstr(out, codec_ops_at(k)->name) != NULL;
    CHECK(all, "gcx --help lists every codec");
}

/* a failed run left path as it was (holding the sentinel text) and no temporary file */
static int kept_as_it_was(const char *path) {
    uint8_t *b;
    size_t n = read_all(path, &b);
    int same = b && n == strlen("sentinel") && !memcmp(b, "sentinel", n);
    free(b);
    char out[4096];
    run(out, sizeof out, "ls -a %s", dir);
    char tmp[160];
    snprintf(tmp, sizeof tmp, "%s.", strrchr(path, '/') + 1);
    return same && !strstr(out, tmp);
}

static void put_sentinel(const char *path) {
    FILE *f = fopenCheck(path, "wb");
    fputs("sentinel", f);
    fcloseCheck(f);
}

static void test_bad_command_lines(void) {
    char out[8192], in[128];
    snprintf(in, sizeof in, "%s/x.f32", dir);
    const char *bad[] = {
        "./gcx",
        "./gcx frobnicate x",
        "./gcx encode --codec 3lc",
        "./gcx encode --codec nosuch %s %s/y.gcf",
        "./gcx encode --codec 3lc:s=7 %s %s/y.gcf",
        "./gcx encode --codec 3lc --threads -1 %s %s/y.gcf",
        "./gcx encode --codec 3lc --frame-values 0 %s %s/y.gcf",
        "./gcx encode --codec 3lc --frame-values 16777217 %s %s/y.gcf",
        "./gcx encode --codec 3lc --bogus %s %s/y.gcf",
        "./gcx encode %s %s/y.gcf",
        "./gcx decode --codec 3lc %s %s/y.f32",
        "./gcx stats %s",
        "./gcx decode onlyone",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char cmd[512];
        snprintf(cmd, sizeof cmd, bad[i], in, dir);
        int rc = run(out, sizeof out, "%s", cmd);
        CHECK(rc == 2 && strstr(out, "usage:"), "'%s' exits 2 with the usage (got %d)", cmd, rc);
    }
}

static void test_bad_files(void) {
    char out[4096], in[128], gcf[128], bad[128], y[128];
    snprintf(in, sizeof in, "%s/x.f32", dir);
    snprintf(gcf, sizeof gcf, "%s/x.gcf", dir);
    snprintf(bad, sizeof bad, "%s/bad.gcf", dir);
    snprintf(y, sizeof y, "%s/y.f32", dir);
    int rc = run(out, sizeof out, "./gcx encode --codec 3lc --frame-values 1000 %s %s", in, gcf);
    CHECK(rc == 0, "encode a reference file");
    uint8_t *g;
    size_t len = read_all(gcf, &g);
    struct {
        const char *what;
        size_t at;   /* byte to change (SIZE_MAX: none) */
        size_t keep; /* bytes to keep (0: all) */
        int extra;   /* append a byte */
    } cases[] = {
        {"bad magic", 0, 0, 0},        {"bad version", 7, 0, 0},   {"header bit flip", 9, 0, 0},
        {"spec byte", 25, 0, 0},       {"frame payload", len - 3, 0, 0}, {"frame codec id", 36, 0, 0},
        {"truncated", SIZE_MAX, len - 1, 0}, {"truncated header", SIZE_MAX, 20, 0}, {"trailing byte", SIZE_MAX, 0, 1},
        {"empty", SIZE_MAX, 0, -1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        FILE *f = fopenCheck(bad, "wb");
        size_t keep = cases[i].extra < 0 ? 0 : cases[i].keep ? cases[i].keep : len;
        uint8_t *c = mallocCheck(len + 1);
        memcpy(c, g, len);
        if (cases[i].at != SIZE_MAX && cases[i].at < len) c[cases[i].at] ^= 0x41;
        if (keep) fwriteCheck(c, 1, keep, f);
        if (cases[i].extra > 0) fputc(0, f);
        fcloseCheck(f);
        free(c);
        put_sentinel(y);
        rc = run(out, sizeof out, "./gcx decode %s %s", bad, y);
        CHECK(rc == 1 && strstr(out, bad) != NULL, "%s: exit 1 naming the file (got %d: %.200s)", cases[i].what, rc,
              out);
        rc = run(out, sizeof out, "./gcx info %s", bad);
        CHECK(rc == 1 && strstr(out, bad) != NULL, "%s: gcx info exits 1 too (got %d: %.200s)", cases[i].what, rc,
              out);
        CHECK(kept_as_it_was(y), "%s: the existing output file is unchanged, no temporary file is left",
              cases[i].what);
    }
    free(g);
    /* a folder as input, and the input as output */
    rc = run(out, sizeof out, "./gcx encode --codec fp16 %s %s/z.gcf", dir, dir);
    CHECK(rc == 1 && strstr(out, "is a folder"), "a folder as input: exit 1, 'is a folder' (got %d: %.200s)", rc, out);
    struct stat before, after;
    stat(in, &before);
    rc = run(out, sizeof out, "./gcx encode --codec fp16 %s %s", in, in);
    CHECK(rc == 1 && strstr(out, "is the input file") && stat(in, &after) == 0 && after.st_size == before.st_size &&
              after.st_mtime == before.st_mtime,
          "encode with the input as output: refused, the input intact (got %d: %.200s)", rc, out);
    rc = run(out, sizeof out, "./gcx decode %s %s", gcf, gcf);
    CHECK(rc == 1 && strstr(out, "is the input file"), "decode with the input as output: refused (got %d)", rc);
    rc = run(out, sizeof out, "./gcx decode %s/missing.gcf %s", dir, y);
    CHECK(rc == 1 && strstr(out, "missing.gcf"), "missing input: exit 1 naming it");
    FILE *f = fopenCheck(bad, "wb");
    fputs("abcdefg", f); /* 7 bytes: not float32 */
    fcloseCheck(f);
    rc = run(out, sizeof out, "./gcx encode --codec fp16 %s %s/z.gcf", bad, dir);
    CHECK(rc == 1 && strstr(out, bad) && strstr(out, "multiple of 4"), "odd-sized .f32 rejected naming it");
    float nanv[4] = {1, NAN, 2, 3};
    write_f32(bad, nanv, 4);
    char z[128];
    snprintf(z, sizeof z, "%s/z.gcf", dir);
    put_sentinel(z);
    rc = run(out, sizeof out, "./gcx encode --codec 3lc %s %s", bad, z);
    CHECK(rc == 1 && strstr(out, bad), "a codec error (NaN for 3lc) exits 1 naming the file");
    CHECK(kept_as_it_was(z), "after the codec error the existing .gcf is unchanged, no temporary file is left");
    /* a complete run replaces the file and keeps its mode; a new file gets 0666 less the umask */
    chmod(z, 0640);
    rc = run(out, sizeof out, "./gcx encode --codec fp16 %s %s", in, z);
    struct stat st;
    CHECK(rc == 0 && stat(z, &st) == 0 && st.st_size > 8 && (st.st_mode & 0777) == 0640,
          "a successful encode replaces the existing file, keeping its mode (%o)", (unsigned)(st.st_mode & 0777));
    char z2[160], link[160];
    snprintf(z2, sizeof z2, "%s/new.gcf", dir);
    rc = run(out, sizeof out, "./gcx encode --codec fp16 %s %s", in, z2);
    CHECK(rc == 0 && stat(z2, &st) == 0 && (st.st_mode & 0777) == (0666 & ~current_umask()),
          "a new file gets 0666 less the umask (%o)", (unsigned)(st.st_mode & 0777));
    /* a symbolic link stays a link: the file it names is written */
    snprintf(link, sizeof link, "%s/link.gcf", dir);
    CHECK(symlink(z2, link) == 0, "make a link");
    rc = run(out, sizeof out, "./gcx encode --codec 3lc %s %s", in, link);
    struct stat lst;
    CHECK(rc == 0 && lstat(link, &lst) == 0 && S_ISLNK(lst.st_mode) && stat(z2, &st) == 0 && st.st_size < 4000,
          "encoding to a symbolic link writes the file it names (rc %d)", rc);
    rc = run(out, sizeof out, "./gcx decode %s /dev/null", gcf);
    CHECK(rc == 0, "decoding to /dev/null writes in place (got %d: %.200s)", rc, out);
}

int main(void) {
    if (access("./gcx", X_OK) != 0) {
        printf("FAIL ./gcx not found: build it first (make gcx) and run from the repository root\n");
        printf("RESULT 0 1\n");
        return 1;
    }
    snprintf(dir, sizeof dir, "/tmp/gcx_test_XXXXXX");
    if (!mkdtemp(dir)) {
        printf("FAIL cannot make a temporary directory\nRESULT 0 1\n");
        return 1;
    }
    test_every_codec();
    test_bad_command_lines();
    test_bad_files();
    char out[256];
    run(out, sizeof out, "rm -rf %s", dir);
    TEST_END();
}
