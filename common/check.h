/* Checking macros that report file and line, in the style of llm.c.
 * Every call into libc I/O, the allocator, CUDA, cuDNN, cuBLAS, NCCL and MPI
 * that can fail goes through one of these; failure prints where and exits 1. */
#ifndef GC_CHECK_H
#define GC_CHECK_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>

static inline void *malloc_check(size_t size, const char *file, int line) {
    void *p = malloc(size ? size : 1);
    if (p == NULL) {
        fprintf(stderr, "error: out of memory allocating %zu bytes at %s:%d\n", size, file, line);
        exit(1);
    }
    return p;
}
#define mallocCheck(size) malloc_check((size), __FILE__, __LINE__)

static inline void *calloc_check(size_t n, size_t size, const char *file, int line) {
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (p == NULL) {
        fprintf(stderr, "error: out of memory allocating %zu x %zu bytes at %s:%d\n", n, size, file, line);
        exit(1);
    }
    return p;
}
#define callocCheck(n, size) calloc_check((n), (size), __FILE__, __LINE__)

static inline FILE *fopen_check(const char *path, const char *mode, const char *file, int line) {
    FILE *fp = fopen(path, mode);
    if (fp == NULL) {
        fprintf(stderr, "error: cannot open '%s' (mode %s): %s\n  at %s:%d\n", path, mode,
                strerror(errno), file, line);
        exit(1);
    }
    return fp;
}
#define fopenCheck(path, mode) fopen_check((path), (mode), __FILE__, __LINE__)

static inline void fread_check(void *ptr, size_t size, size_t n, FILE *fp, const char *file, int line) {
    size_t got = fread(ptr, size, n, fp);
    if (got != n) {
        fprintf(stderr, "error: short read (%zu of %zu items of %zu bytes)%s at %s:%d\n", got, n, size,
                feof(fp) ? ": unexpected end of file" : "", file, line);
        exit(1);
    }
}
#define freadCheck(ptr, size, n, fp) fread_check((ptr), (size), (n), (fp), __FILE__, __LINE__)

static inline void fwrite_check(const void *ptr, size_t size, size_t n, FILE *fp, const char *file, int line) {
    if (fwrite(ptr, size, n, fp) != n) {
        fprintf(stderr, "error: write failed: %s at %s:%d\n", strerror(errno), file, line);
        exit(1);
    }
}
#define fwriteCheck(ptr, size, n, fp) fwrite_check((ptr), (size), (n), (fp), __FILE__, __LINE__)

static inline void fclose_check(FILE *fp, const char *file, int line) {
    if (fclose(fp) != 0) {
        fprintf(stderr, "error: close failed: %s at %s:%d\n", strerror(errno), file, line);
        exit(1);
    }
}
#define fcloseCheck(fp) fclose_check((fp), __FILE__, __LINE__)

#ifdef __CUDACC__
#include <cuda_runtime.h>
static inline void cuda_check(cudaError_t e, const char *file, int line) {
    if (e != cudaSuccess) {
        fprintf(stderr, "CUDA error: %s at %s:%d\n", cudaGetErrorString(e), file, line);
        exit(1);
    }
}
#define cudaCheck(x) cuda_check((x), __FILE__, __LINE__)
#endif

#endif
