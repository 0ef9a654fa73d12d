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
static inline int gc_num_threads(void) { return omp_get_max_threads(); }
#else
#define OMP_FOR
#define OMP_FOR2
static inline int gc_num_threads(void) { return 1; }
#endif

#endif
