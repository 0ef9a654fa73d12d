/* Minimal test harness. Each test binary includes this once, calls CHECK /
 * CHECK_CLOSE as often as it likes, and ends main() with TEST_END(). The last
 * line it prints is "RESULT <passed> <failed>", which tests/run.sh sums into the
 * "N passed, N failed" line of `make test`. A binary that crashes or exits
 * without a RESULT line counts as one failure. */
#ifndef GC_TEST_H
#define GC_TEST_H

#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* counted atomically: tests check from several threads (the exchange's workers) */
static int test_passed_, test_failed_;
#define TEST_COUNT_(c) __atomic_add_fetch(&(c), 1, __ATOMIC_RELAXED)

#define CHECK(cond, ...)                                                   \
    do {                                                                   \
        if (cond) {                                                        \
            TEST_COUNT_(test_passed_);                                     \
        } else {                                                           \
            TEST_COUNT_(test_failed_);                                     \
            fprintf(stdout, "FAIL %s:%d: ", __FILE__, __LINE__);           \
            fprintf(stdout, __VA_ARGS__);                                  \
            fprintf(stdout, "\n");                                         \
        }                                                                  \
    } while (0)

/* Largest |a-b| / (atol/rtol + |b|)-style comparison: passes when every element
 * satisfies |a - b| <= atol + rtol * |b|. Prints the max abs and rel difference. */
static inline int check_close_(const char *what, const float *a, const float *b, size_t n, float rtol,
                               float atol, const char *file, int line) {
    double maxabs = 0, maxrel = 0;
    size_t worst = 0, bad = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        double r = d / (fabs((double)b[i]) + 1e-12);
        if (!(d <= atol + rtol * fabs((double)b[i]))) {
            if (!bad) worst = i;
            bad++;
        }
        if (d > maxabs || d != d) maxabs = d;
        if (r > maxrel) maxrel = r;
    }
    printf("  %-40s n=%-8zu max|diff|=%.3e max rel=%.3e %s\n", what, n, maxabs, maxrel, bad ? "FAIL" : "ok");
    if (bad) {
        TEST_COUNT_(test_failed_);
        printf("FAIL %s:%d: %s: %zu of %zu elements out of tolerance; first at %zu: got %.9g want %.9g\n", file,
               line, what, bad, n, worst, a[worst], b[worst]);
        return 0;
    }
    TEST_COUNT_(test_passed_);
    return 1;
}
#define CHECK_CLOSE(what, a, b, n, rtol, atol) check_close_((what), (a), (b), (n), (rtol), (atol), __FILE__, __LINE__)

/* the file at path (its first cap - 1 bytes) as a string in text; "" when it cannot be read */
static inline void test_read_text(const char *path, char *text, size_t cap) {
    text[0] = 0;
    FILE *f = fopen(path, "r");
    if (!f) return;
    size_t n = fread(text, 1, cap - 1, f);
    text[n] = 0;
    fclose(f);
}

/* stdout and stderr go to a temporary file from test_capture_begin to
 * test_capture_end, which puts what was written in text (as test_read_text)
 * and removes the file */
typedef struct {
    int out, err;
    char path[64];
} TestCapture;

static inline void test_capture_begin(TestCapture *c) {
    snprintf(c->path, sizeof c->path, "/tmp/gcx_capture_%d.txt", (int)getpid());
    fflush(stdout);
    fflush(stderr);
    c->out = dup(1);
    c->err = dup(2);
    int fd = open(c->path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return; /* the output stays where it was */
    dup2(fd, 1);
    dup2(fd, 2);
    close(fd);
}

static inline void test_capture_end(TestCapture *c, char *text, size_t cap) {
    fflush(stdout);
    fflush(stderr);
    dup2(c->out, 1);
    dup2(c->err, 2);
    close(c->out);
    close(c->err);
    test_read_text(c->path, text, cap);
    unlink(c->path);
}

#define TEST_END()                                                          \
    do {                                                                    \
        printf("RESULT %d %d\n", test_passed_, test_failed_);               \
        return test_failed_ ? 1 : 0;                                        \
    } while (0)

#endif
