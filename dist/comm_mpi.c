/* MPI backend: one worker per process (Open MPI). Built when the Makefile finds
 * mpicc (HAVE_MPI); otherwise comm_mpi_available() is 0 and the trainers say
 * how to rebuild. Byte accounting follows the same model as comm_local.c, so
 * the two backends report identical traffic. */
#include <stdlib.h>
#include <string.h>

#include "common/check.h"
#include "dist/comm.h"

int comm_mpi_launched(void) {
    return getenv("OMPI_COMM_WORLD_SIZE") != NULL || getenv("PMI_SIZE") != NULL || getenv("PMIX_RANK") != NULL;
}

#ifdef HAVE_MPI
#include <mpi.h>

static void mpi_check(int err, const char *file, int line) {
    if (err != MPI_SUCCESS) {
        char msg[MPI_MAX_ERROR_STRING];
        int len = 0;
        MPI_Error_string(err, msg, &len);
        fprintf(stderr, "MPI error: %s at %s:%d\n", msg, file, line);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
}
#define mpiCheck(x) mpi_check((x), __FILE__, __LINE__)

int comm_mpi_available(void) { return 1; }

static void m_barrier(Comm *c) {
    (void)c;
    mpiCheck(MPI_Barrier(MPI_COMM_WORLD));
}

static void count_allreduce(Comm *c, size_t bytes) {
    int N = c->size;
    uint64_t b = N > 1 ? (uint64_t)(2.0 * (N - 1) / N * (double)bytes) : 0;
    c->sent += b;
    c->received += b;
}

/* MPI counts are int: move large buffers in pieces */
#define MPI_PIECE ((size_t)1 << 30)

static void m_allreduce_f32(Comm *c, float *buf, size_t n, CommOp op) {
    for (size_t at = 0; at < n; at += MPI_PIECE / 4) {
        size_t k = n - at < MPI_PIECE / 4 ? n - at : MPI_PIECE / 4;
        mpiCheck(MPI_Allreduce(MPI_IN_PLACE, buf + at, (int)k, MPI_FLOAT, op == COMM_SUM ? MPI_SUM : MPI_MAX,
                               MPI_COMM_WORLD));
    }
    count_allreduce(c, n * sizeof(float));
}

static void m_allreduce_f64(Comm *c, double *buf, size_t n, CommOp op) {
    for (size_t at = 0; at < n; at += MPI_PIECE / 8) {
        size_t k = n - at < MPI_PIECE / 8 ? n - at : MPI_PIECE / 8;
        mpiCheck(MPI_Allreduce(MPI_IN_PLACE, buf + at, (int)k, MPI_DOUBLE, op == COMM_SUM ? MPI_SUM : MPI_MAX,
                               MPI_COMM_WORLD));
    }
    count_allreduce(c, n * sizeof(double));
}

static void check_int_size(size_t n, const char *what) {
    if (n > (size_t)0x7FFFFFFF) {
        fprintf(stderr, "error: %s of %zu bytes exceeds the MPI backend's 2 GiB message limit\n", what, n);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
}

static void m_allgatherv(Comm *c, ByteBuf *out, size_t *lens, const uint8_t *data, size_t len) {
    int N = c->size;
    uint64_t mine = len;
    uint64_t *all = mallocCheck((size_t)N * sizeof *all);
    mpiCheck(MPI_Allgather(&mine, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T, MPI_COMM_WORLD));
    int *counts = mallocCheck((size_t)N * sizeof *counts), *displs = mallocCheck((size_t)N * sizeof *displs);
    size_t total = 0;
    for (int k = 0; k < N; k++) {
        lens[k] = (size_t)all[k];
        displs[k] = (int)total;
        counts[k] = (int)all[k];
        total += all[k];
        if (k != c->rank) c->received += all[k];
    }
    check_int_size(total, "allgather");
    bytebuf_reserve(out, total);
    mpiCheck(MPI_Allgatherv(data, (int)len, MPI_BYTE, out->p, counts, displs, MPI_BYTE, MPI_COMM_WORLD));
    out->len = total;
    c->sent += (uint64_t)len * (uint64_t)(N - 1);
    free(all);
    free(counts);
    free(displs);
}

static void m_gatherv(Comm *c, ByteBuf *out, size_t *lens, const uint8_t *data, size_t len, int root) {
    int N = c->size;
    uint64_t mine = len;
    uint64_t *all = mallocCheck((size_t)N * sizeof *all);
    mpiCheck(MPI_Gather(&mine, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T, root, MPI_COMM_WORLD));
    int *counts = NULL, *displs = NULL;
    if (c->rank == root) {
        counts = mallocCheck((size_t)N * sizeof *counts);
        displs = mallocCheck((size_t)N * sizeof *displs);
        size_t total = 0;
        for (int k = 0; k < N; k++) {
            lens[k] = (size_t)all[k];
            displs[k] = (int)total;
            counts[k] = (int)all[k];
            total += all[k];
            if (k != root) c->received += all[k];
        }
        check_int_size(total, "gather");
        bytebuf_reserve(out, total);
        out->len = total;
    } else {
        c->sent += len;
    }
    mpiCheck(MPI_Gatherv(data, (int)len, MPI_BYTE, c->rank == root ? out->p : NULL, counts, displs, MPI_BYTE, root,
                         MPI_COMM_WORLD));
    free(all);
    free(counts);
    free(displs);
}

static void m_bcast(Comm *c, ByteBuf *buf, int root) {
    uint64_t len = buf->len;
    mpiCheck(MPI_Bcast(&len, 1, MPI_UINT64_T, root, MPI_COMM_WORLD));
    check_int_size(len, "broadcast");
    bytebuf_reserve(buf, len);
    buf->len = len;
    mpiCheck(MPI_Bcast(buf->p, (int)len, MPI_BYTE, root, MPI_COMM_WORLD));
    if (c->rank == root) c->sent += len * (uint64_t)(c->size - 1);
    else c->received += len;
}

static void m_sendrecv(Comm *c, ByteBuf *out, int src, const uint8_t *data, size_t len, int dst) {
    uint64_t mine = len, theirs = 0;
    check_int_size(len, "send");
    mpiCheck(MPI_Sendrecv(&mine, 1, MPI_UINT64_T, dst, 1, &theirs, 1, MPI_UINT64_T, src, 1, MPI_COMM_WORLD,
                          MPI_STATUS_IGNORE));
    check_int_size(theirs, "receive");
    bytebuf_reserve(out, theirs);
    mpiCheck(MPI_Sendrecv(data, (int)len, MPI_BYTE, dst, 2, out->p, (int)theirs, MPI_BYTE, src, 2, MPI_COMM_WORLD,
                          MPI_STATUS_IGNORE));
    out->len = theirs;
    c->sent += len;
    c->received += theirs;
}

static void m_free(Comm *c) { free(c); }

static const CommOps mpi_ops = {
    .name = "mpi",
    .barrier = m_barrier,
    .allreduce_f32 = m_allreduce_f32,
    .allreduce_f64 = m_allreduce_f64,
    .allgatherv = m_allgatherv,
    .gatherv = m_gatherv,
    .bcast = m_bcast,
    .sendrecv = m_sendrecv,
    .free = m_free,
};

Comm *comm_mpi_new(int *argc, char ***argv) {
    int inited = 0;
    MPI_Initialized(&inited);
    if (!inited) {
        int provided = 0;
        mpiCheck(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided));
    }
    Comm *c = callocCheck(1, sizeof *c);
    c->ops = &mpi_ops;
    MPI_Comm_rank(MPI_COMM_WORLD, &c->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &c->size);
    return c;
}

void comm_mpi_finalize(void) {
    int inited = 0, fin = 0;
    MPI_Initialized(&inited);
    MPI_Finalized(&fin);
    if (inited && !fin) MPI_Finalize();
}

#else /* !HAVE_MPI */

int comm_mpi_available(void) { return 0; }

Comm *comm_mpi_new(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    gc_fatal("error: this build has no MPI backend (install openmpi: `make deps`, then rebuild: `make clean all`)\n");
}

void comm_mpi_finalize(void) {}

#endif
