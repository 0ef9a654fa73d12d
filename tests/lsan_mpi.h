/* Open MPI under AddressSanitizer's leak check. Open MPI leaves allocations
 * behind at exit (its runtime, its event loop and the plugins it loads), which
 * LeakSanitizer would report in every process that called MPI_Init. A binary
 * that runs MPI includes this header once: the leaks whose stack passes through
 * Open MPI's libraries are suppressed, and every other leak (the project's own,
 * MPI code paths included) is still reported. Those libraries are built without
 * frame pointers, so the allocation stacks are unwound in full
 * (fast_unwind_on_malloc=0) for the suppressions to see them; ASAN_OPTIONS set
 * in the environment still apply on top of this default. Nothing without ASan. */
#ifndef GC_LSAN_MPI_H
#define GC_LSAN_MPI_H
#if defined(__SANITIZE_ADDRESS__)
const char *__asan_default_options(void);
const char *__lsan_default_options(void);
const char *__lsan_default_suppressions(void);
const char *__asan_default_options(void) { return "fast_unwind_on_malloc=0"; }
/* (no table of the suppressions used at every exit) */
const char *__lsan_default_options(void) { return "print_suppressions=0"; }
/* Open MPI 4 (libopen-rte, libevent inside libopen-pal) and 5 (libpmix, libprrte) */
const char *__lsan_default_suppressions(void) {
    return "leak:libmpi.so\nleak:libopen-pal.so\nleak:libopen-rte.so\nleak:libevent\nleak:libpmix.so\n"
           "leak:libprrte.so\n";
}
#endif
#endif
