/* Checking macros that report file and line, in the style of llm.c.
 * Every call into libc I/O, the allocator, CUDA, cuDNN, cuBLAS, NCCL and MPI
 * that can fail goes through one of these; failure prints where and exits 1. */
#ifndef GC_CHECK_H
#define GC_CHECK_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>

#ifdef __cplusplus
extern "C" {
#endif
/* Prints the message (a printf format, as given: "\n" included) on stderr and
 * ends the process with status 1, once. When several threads fail together (the
 * local workers running out of memory in the same allocation), the first one
 * prints and exits and the others wait for the end: one message, and exit() is
 * never run twice at once (which crashes in the libraries' exit handlers). */
void gc_fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
#ifdef __cplusplus
}
#endif

static inline void *malloc_check(size_t size, const char *file, int line) {
    void *p = malloc(size ? size : 1);
    if (p == NULL) {
        gc_fatal("error: out of memory allocating %zu bytes at %s:%d\n", size, file, line);
    }
    return p;
}
#define mallocCheck(size) malloc_check((size), __FILE__, __LINE__)

static inline void *calloc_check(size_t n, size_t size, const char *file, int line) {
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (p == NULL) {
        gc_fatal("error: out of memory allocating %zu x %zu bytes at %s:%d\n", n, size, file, line);
    }
    return p;
}
#define callocCheck(n, size) calloc_check((n), (size), __FILE__, __LINE__)

/* realloc that ends the process when memory runs out (the old block is then lost
 * with it); grows tables and buffers whose failure no caller could recover from */
static inline void *realloc_check(void *ptr, size_t size, const char *file, int line) {
    void *p = realloc(ptr, size ? size : 1);
    if (p == NULL) {
        gc_fatal("error: out of memory growing a block to %zu bytes at %s:%d\n", size, file, line);
    }
    return p;
}
#define reallocCheck(ptr, size) realloc_check((ptr), (size), __FILE__, __LINE__)

static inline FILE *fopen_check(const char *path, const char *mode, const char *file, int line) {
    FILE *fp = fopen(path, mode);
    if (fp == NULL) {
        gc_fatal("error: cannot open '%s' (mode %s): %s\n  at %s:%d\n", path, mode,
                strerror(errno), file, line);
    }
    return fp;
}
#define fopenCheck(path, mode) fopen_check((path), (mode), __FILE__, __LINE__)

static inline void fread_check(void *ptr, size_t size, size_t n, FILE *fp, const char *file, int line) {
    size_t got = fread(ptr, size, n, fp);
    if (got != n) {
        gc_fatal("error: short read (%zu of %zu items of %zu bytes)%s at %s:%d\n", got, n, size,
                feof(fp) ? ": unexpected end of file" : "", file, line);
    }
}
#define freadCheck(ptr, size, n, fp) fread_check((ptr), (size), (n), (fp), __FILE__, __LINE__)

static inline void fwrite_check(const void *ptr, size_t size, size_t n, FILE *fp, const char *file, int line) {
    if (fwrite(ptr, size, n, fp) != n) {
        gc_fatal("error: write failed: %s at %s:%d\n", strerror(errno), file, line);
    }
}
#define fwriteCheck(ptr, size, n, fp) fwrite_check((ptr), (size), (n), (fp), __FILE__, __LINE__)

static inline void fclose_check(FILE *fp, const char *file, int line) {
    if (fclose(fp) != 0) {
        gc_fatal("error: close failed: %s at %s:%d\n", strerror(errno), file, line);
    }
}
#define fcloseCheck(fp) fclose_check((fp), __FILE__, __LINE__)

#ifdef __CUDACC__
#include <cuda_runtime.h>
static inline void cuda_check(cudaError_t e, const char *file, int line) {
    if (e != cudaSuccess) {
        gc_fatal("CUDA error: %s at %s:%d\n", cudaGetErrorString(e), file, line);
    }
}
#define cudaCheck(x) cuda_check((x), __FILE__, __LINE__)
#endif

#endif
