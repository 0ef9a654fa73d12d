/* Open MPI under AddressSanitizer's leak check. Open MPI leaves allocations
 * behind at exit (its runtime, its event loop and the plugins it loads), which
 * LeakSanitizer would report in every process that called MPI_Init. A binary
 * that runs MPI includes this header once: the leaks whose stack passes through
 * Open MPI's libraries are suppressed, and every other leak (the project's own,
 * MPI code paths included) is still reported. Those libraries are built without
 * frame pointers, so the allocation stacks are unwound in full
 * (fast_unwind_on_malloc=0) for the suppressions to see them; ASAN_OPTIONS set
 * in the environment still apply on top of this default. Nothing without ASan.
 *
 * The suppressions would also hide an MPI object that the program creates and
 * never frees (a communicator from MPI_Comm_dup, a datatype, a group, an
 * operation): its memory is allocated inside libmpi. So with MPI, this header
 * also wraps the calls that create and free them (the MPI profiling interface:
 * MPI_X here calls the library's PMPI_X). Each object created gets a small
 * token allocated from a function named after its kind, which the matching
 * free releases; the table of tokens hides their addresses from the leak
 * scan, so an object never freed is reported as a leak of its token, with
 * the stack where the object was created. Wrapped: the constructors and frees
 * of the LSAN_MPI_WRAP and LSAN_MPI_WRAP_FREE lines at the end (every one the
 * project calls, and more). Not checked: objects from any other constructor
 * (MPI_Comm_idup, MPI_Intercomm_create, the topology constructors, the group set
 * operations, ...), which the project does not call, and objects beyond the 256th
 * live at once. */
#ifndef GC_LSAN_MPI_H
#define GC_LSAN_MPI_H
/* ASan on: GCC says so with __SANITIZE_ADDRESS__, clang before 16 only through __has_feature */
#if defined(__SANITIZE_ADDRESS__)
#define LSAN_MPI_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define LSAN_MPI_ASAN 1
#endif
#endif
#if defined(LSAN_MPI_ASAN)
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
#if defined(HAVE_MPI)
#include <mpi.h>
#include <stdint.h>
#include <stdlib.h>
#define LSAN_MPI_MAX 256
#define LSAN_MPI_MASK ((uintptr_t)0xa5a5a5a5a5a5a5a5ull) /* not a heap address: LSan does not see the token */
static struct {
    uintptr_t handle, token;
    unsigned long serial;
} lsan_mpi_live[LSAN_MPI_MAX];
static unsigned long lsan_mpi_serial;
static void lsan_mpi_track(uintptr_t handle, void *token) {
    for (int i = 0; i < LSAN_MPI_MAX; i++)
        if (!lsan_mpi_live[i].token) {
            lsan_mpi_live[i].handle = handle;
            lsan_mpi_live[i].token = (uintptr_t)token ^ LSAN_MPI_MASK;
            lsan_mpi_live[i].serial = ++lsan_mpi_serial;
            return;
        }
    free(token); /* more than LSAN_MPI_MAX live objects: this one goes unchecked */
}
/* A handle can be live more than once: Open MPI's MPI_Comm_group returns the same
 * reference-counted group on each call, to be freed once per call. A free releases
 * the token of the latest call, so an unmatched call is reported with the stack of
 * the earliest (the count of leaks is right either way). */
static void lsan_mpi_untrack(uintptr_t handle) {
    int at = -1;
    for (int i = 0; i < LSAN_MPI_MAX; i++)
        if (lsan_mpi_live[i].token && lsan_mpi_live[i].handle == handle &&
            (at < 0 || lsan_mpi_live[i].serial > lsan_mpi_live[at].serial))
            at = i;
    if (at < 0) return;
    free((void *)(lsan_mpi_live[at].token ^ LSAN_MPI_MASK));
    lsan_mpi_live[at].token = 0;
}
/* the names a leak report shows: each keeps its frame (no tail call to malloc, which at
 * -O2 would leave it out of the stack), and each token has a size of its own, so that
 * the compiler cannot fold the four into one function of one name */
#define LSAN_MPI_TOKEN_FN(kind, size)                                         \
    __attribute__((noinline)) static void *mpi_##kind##_never_freed(void) {   \
        void *p = malloc(size);                                               \
        __asm__ volatile("" : : "r"(p) : "memory");                           \
        return p;                                                             \
    }
LSAN_MPI_TOKEN_FN(communicator, 8)
LSAN_MPI_TOKEN_FN(group, 16)
LSAN_MPI_TOKEN_FN(datatype, 24)
LSAN_MPI_TOKEN_FN(op, 32)
/* handles that are no object of their own */
#define LSAN_MPI_NULL_communicator(h) ((h) == MPI_COMM_NULL)
#define LSAN_MPI_NULL_group(h) ((h) == MPI_GROUP_NULL || (h) == MPI_GROUP_EMPTY)
#define LSAN_MPI_NULL_datatype(h) ((h) == MPI_DATATYPE_NULL)
#define LSAN_MPI_NULL_op(h) ((h) == MPI_OP_NULL)
/* MPI_name(params) calls PMPI_name(args) and tracks the object it made at *out */
#define LSAN_MPI_WRAP(kind, name, params, args, out)                          \
    int MPI_##name params {                                                   \
        int lsan_rc_ = PMPI_##name args;                                      \
        if (lsan_rc_ == MPI_SUCCESS) {                                        \
            __typeof__(*(out)) lsan_h_ = *(out);                              \
            if (!LSAN_MPI_NULL_##kind(lsan_h_))                               \
                lsan_mpi_track((uintptr_t)lsan_h_, mpi_##kind##_never_freed()); \
        }                                                                     \
        return lsan_rc_;                                                      \
    }
/* MPI_name(hp) calls PMPI_name(hp) and releases the token of the object *hp named */
#define LSAN_MPI_WRAP_FREE(name, type)                                        \
    int MPI_##name(type *hp) {                                                \
        uintptr_t lsan_h_ = (uintptr_t)*hp;                                   \
        int lsan_rc_ = PMPI_##name(hp);                                       \
        if (lsan_rc_ == MPI_SUCCESS) lsan_mpi_untrack(lsan_h_);               \
        return lsan_rc_;                                                      \
    }
LSAN_MPI_WRAP(communicator, Comm_dup, (MPI_Comm c, MPI_Comm *n), (c, n), n)
LSAN_MPI_WRAP(communicator, Comm_dup_with_info, (MPI_Comm c, MPI_Info info, MPI_Comm *n), (c, info, n), n)
LSAN_MPI_WRAP(communicator, Comm_split, (MPI_Comm c, int color, int key, MPI_Comm *n), (c, color, key, n), n)
LSAN_MPI_WRAP(communicator, Comm_split_type, (MPI_Comm c, int type, int key, MPI_Info info, MPI_Comm *n),
              (c, type, key, info, n), n)
LSAN_MPI_WRAP(communicator, Comm_create, (MPI_Comm c, MPI_Group g, MPI_Comm *n), (c, g, n), n)
LSAN_MPI_WRAP(communicator, Comm_create_group, (MPI_Comm c, MPI_Group g, int tag, MPI_Comm *n),
              (c, g, tag, n), n)
LSAN_MPI_WRAP_FREE(Comm_free, MPI_Comm)
LSAN_MPI_WRAP_FREE(Comm_disconnect, MPI_Comm)
LSAN_MPI_WRAP(group, Comm_group, (MPI_Comm c, MPI_Group *g), (c, g), g)
LSAN_MPI_WRAP(group, Group_incl, (MPI_Group g, int n, const int ranks[], MPI_Group *out),
              (g, n, ranks, out), out)
LSAN_MPI_WRAP(group, Group_excl, (MPI_Group g, int n, const int ranks[], MPI_Group *out),
              (g, n, ranks, out), out)
LSAN_MPI_WRAP_FREE(Group_free, MPI_Group)
LSAN_MPI_WRAP(datatype, Type_contiguous, (int count, MPI_Datatype old, MPI_Datatype *t), (count, old, t), t)
LSAN_MPI_WRAP(datatype, Type_vector, (int count, int len, int stride, MPI_Datatype old, MPI_Datatype *t),
              (count, len, stride, old, t), t)
LSAN_MPI_WRAP(datatype, Type_create_hvector,
              (int count, int len, MPI_Aint stride, MPI_Datatype old, MPI_Datatype *t),
              (count, len, stride, old, t), t)
LSAN_MPI_WRAP(datatype, Type_indexed,
              (int count, const int lens[], const int disp[], MPI_Datatype old, MPI_Datatype *t),
              (count, lens, disp, old, t), t)
LSAN_MPI_WRAP(datatype, Type_create_indexed_block,
              (int count, int len, const int disp[], MPI_Datatype old, MPI_Datatype *t),
              (count, len, disp, old, t), t)
LSAN_MPI_WRAP(datatype, Type_create_hindexed,
              (int count, const int lens[], const MPI_Aint disp[], MPI_Datatype old, MPI_Datatype *t),
              (count, lens, disp, old, t), t)
LSAN_MPI_WRAP(datatype, Type_create_struct,
              (int count, const int lens[], const MPI_Aint disp[], const MPI_Datatype types[], MPI_Datatype *t),
              (count, lens, disp, types, t), t)
LSAN_MPI_WRAP(datatype, Type_create_resized,
              (MPI_Datatype old, MPI_Aint lb, MPI_Aint extent, MPI_Datatype *t),
              (old, lb, extent, t), t)
LSAN_MPI_WRAP(datatype, Type_dup, (MPI_Datatype old, MPI_Datatype *t), (old, t), t)
LSAN_MPI_WRAP_FREE(Type_free, MPI_Datatype)
LSAN_MPI_WRAP(op, Op_create, (MPI_User_function *f, int commute, MPI_Op *op), (f, commute, op), op)
LSAN_MPI_WRAP_FREE(Op_free, MPI_Op)
#endif
#endif
#endif
