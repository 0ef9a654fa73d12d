/* What the BLAS library can serve. The trainers' local workers are threads of one
 * process, and each calls cblas_sgemm from its own thread. OpenBLAS keeps a fixed
 * table of work buffers, one per thread calling it at once: NUM_BUFFERS = 2 x
 * MAX_THREADS of the library build (Debian's: MAX_THREADS=64, so 128). Past
 * it, OpenBLAS 0.3.21 falls back to an "auxiliary array" and corrupts memory
 * (a crash in blas_memory_alloc), so the trainers refuse more local workers
 * than the build serves. */
#ifndef GC_BLAS_H
#define GC_BLAS_H

/* the most threads that may call the BLAS at once, or 0 when the library does
 * not say (not OpenBLAS, or a build whose configuration string has no
 * MAX_THREADS) */
int blas_max_callers(void);

/* the same from an OpenBLAS configuration string (openblas_get_config()): 2 x
 * the number after "MAX_THREADS=", or 0; for tests */
int blas_max_callers_from(const char *config);

#endif
