/* OpenMP helpers for the CPU ops. Expands to nothing when the build has no
 * OpenMP (NO_OPENMP=1), so the code stays warning-free either way. */
#ifndef GC_NN_PARALLEL_H
#define GC_NN_PARALLEL_H

#ifdef HAVE_OPENMP
#include <omp.h>
#define GC_PRAGMA_(x) _Pragma(#x)
/* parallel loop over independent iterations */
#define OMP_FOR GC_PRAGMA_(omp parallel for schedule(static))
/* same, with collapse(2) over two perfectly nested loops */
#define OMP_FOR2 GC_PRAGMA_(omp parallel for collapse(2) schedule(static))
/* vectorized reduction (lanes reassociate the sum) */
#define OMP_SIMD_REDUCE(...) GC_PRAGMA_(omp simd reduction(__VA_ARGS__))
/* a parallel region with nt threads, a barrier and a work-shared loop inside it */
#define OMP_PARALLEL(nt) GC_PRAGMA_(omp parallel num_threads(nt))
#define OMP_BARRIER GC_PRAGMA_(omp barrier)
#define OMP_FOR_IN GC_PRAGMA_(omp for schedule(static))
/* work-shared loops handing out iterations on demand: a thread slowed down by
 * other load on its core takes fewer of them (the machine may be shared) */
#define OMP_FOR_DYN_IN GC_PRAGMA_(omp for schedule(dynamic))
#define OMP_FOR_DYN_NOWAIT GC_PRAGMA_(omp for schedule(dynamic) nowait)
#define OMP_FOR_DYN GC_PRAGMA_(omp parallel for schedule(dynamic))
static inline int gc_num_threads(void) { return omp_get_max_threads(); }
static inline int gc_team_size(void) { return omp_get_num_threads(); }
static inline int gc_thread_id(void) { return omp_get_thread_num(); }
static inline int gc_in_parallel(void) { return omp_in_parallel(); }
#else
#define OMP_SIMD_REDUCE(...)
#define OMP_PARALLEL(nt) (void)(nt);
#define OMP_BARRIER
#define OMP_FOR_IN
#define OMP_FOR_DYN_IN
#define OMP_FOR_DYN_NOWAIT
#define OMP_FOR_DYN
#define OMP_FOR
#define OMP_FOR2
static inline int gc_num_threads(void) { return 1; }
static inline int gc_team_size(void) { return 1; }
static inline int gc_thread_id(void) { return 0; }
static inline int gc_in_parallel(void) { return 0; }
#endif

#endif
