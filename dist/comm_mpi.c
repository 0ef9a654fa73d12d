/* MPI backend: one worker per process (Open MPI). Built when the Makefile finds
 * mpicc (HAVE_MPI); otherwise comm_mpi_available() is 0 and the trainers say
 * how to rebuild. Byte accounting follows the same model as comm_local.c, so
 * the two backends report identical traffic. */
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <time.h>

#include "common/check.h"
#include "common/clock.h"
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

/* ---- waiting with a deadline (--timeout) ----
 * Every collective is started non-blocking and waited for here. Without a
 * timeout that is MPI_Waitall. With one, the requests are polled; past the
 * deadline, the ranks that are still running find out which did not arrive:
 * each sends its step and collective count to rank 0, which names the ranks
 * that did not answer (stopped, stuck or gone) or are behind, and aborts the
 * job. If rank 0 is the one missing, the others say so and abort. */
#define TAG_STALL 7001

static void nap(long usec) {
    struct timespec ts = {0, usec * 1000L};
    nanosleep(&ts, NULL);
}

static unsigned long long ncalls; /* collectives this process has started (one worker per process) */

static void stall_report(Comm *c, const char *op) {
    long long me[2] = {c->step, (long long)ncalls};
    if (c->rank != 0) {
        MPI_Request r;
        MPI_Isend(me, 2, MPI_LONG_LONG, 0, TAG_STALL, MPI_COMM_WORLD, &r);
        double until = mono_seconds() + 5.0; /* rank 0 aborts the job meanwhile, unless it is the one missing */
        while (mono_seconds() < until) nap(10000);
        fprintf(stderr, "error: worker %d: step %ld: %s did not complete within %g s (--timeout), and worker 0 did not "
                "answer: worker 0 is stalled, stuck or gone; stopping the job\n", c->rank, c->step, op, c->timeout);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    int N = c->size;
    int *ok = callocCheck((size_t)N, sizeof *ok); /* 0: no answer, 1: in this collective, 2: in another */
    ok[0] = 1;
    double until = mono_seconds() + 2.0;
    while (mono_seconds() < until) {
        int flag = 0;
        MPI_Status st;
        MPI_Iprobe(MPI_ANY_SOURCE, TAG_STALL, MPI_COMM_WORLD, &flag, &st);
        if (!flag) {
            nap(1000);
            continue;
        }
        long long them[2];
        MPI_Recv(them, 2, MPI_LONG_LONG, st.MPI_SOURCE, TAG_STALL, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        if (st.MPI_SOURCE > 0 && st.MPI_SOURCE < N) ok[st.MPI_SOURCE] = them[1] == me[1] ? 1 : 2;
    }
    /* a rank that answered from another collective is alive but waits on the missing
     * ones (a tree collective's leaf whose data comes through a stopped rank): named
     * apart, so that the stalled rank is the one the message blames */
    char who[2][512] = {"", ""};
    int count[2] = {0, 0};
    for (int k = 0; k < 2; k++) {
        size_t at = 0;
        for (int r = 0; r < N && at < sizeof who[k] - 16; r++)
            if (ok[r] == 2 * k) at += (size_t)snprintf(who[k] + at, sizeof who[k] - at, "%s%d", count[k]++ ? ", " : "", r);
    }
    char missing[640] = "every worker answered (the network?)", also[640] = "";
    if (count[0])
        snprintf(missing, sizeof missing, "worker%s %s did not arrive (stalled, stuck or gone)", count[0] > 1 ? "s" : "",
                 who[0]);
    if (count[1])
        snprintf(also, sizeof also, "; worker%s %s answered from another collective (waiting on %s)",
                 count[1] > 1 ? "s" : "", who[1], count[0] ? "them" : "each other");
    fprintf(stderr, "error: step %ld: %s did not complete within %g s (--timeout): %s%s; stopping the job\n", c->step,
            op, c->timeout, missing, also);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

/* waits for n started requests */
static void wait_reqs(Comm *c, MPI_Request *req, int n, const char *op) {
    ncalls++;
    if (c->timeout <= 0) {
        mpiCheck(MPI_Waitall(n, req, MPI_STATUSES_IGNORE));
        return;
    }
    WaitClock w; /* (polled every 1 ms at most; a pause of the process is not a stall: common/clock.h) */
    wait_clock_start(&w, 0.1);
    long naptime = 0;
    for (;;) {
        int done = 0;
        mpiCheck(MPI_Testall(n, req, &done, MPI_STATUSES_IGNORE));
        if (done) return;
        double waited = wait_clock_poll(&w);
        if (waited > c->timeout) stall_report(c, op);
        /* poll busily at first, yielding the core to a rank that shares it (a collective
         * usually completes within a step), after a second back off to 1 ms naps */
        if (waited > 1.0) naptime = naptime < 1000 ? naptime + 50 : 1000;
        if (naptime) nap(naptime);
        else sched_yield();
    }
}

static void m_barrier(Comm *c) {
    MPI_Request r;
    mpiCheck(MPI_Ibarrier(MPI_COMM_WORLD, &r));
    wait_reqs(c, &r, 1, "barrier");
}

static void count_allreduce(Comm *c, size_t bytes) {
    int N = c->size;
    uint64_t b = N > 1 ? (uint64_t)(2.0 * (N - 1) / N * (double)bytes) : 0;
    c->sent += b;
    c->received += b;
}

/* MPI counts are int: move large buffers in pieces */
#define MPI_PIECE ((size_t)1 << 30)

/* Open MPI's non-blocking allreduce (coll/libnbc) runs a binomial reduce and
 * broadcast whenever the send buffer is MPI_IN_PLACE: every value crosses the
 * root's link twice each way, one hop after another. With a separate send
 * buffer of 64 KiB or more it picks a ring or reduce-scatter + allgather
 * schedule, the 2 (N-1)/N x bytes that count_allreduce (and the network
 * model, docs/DIST.md) assume. Measured on 4 hosts at 10 Mbit/s
 * (scripts/netlab.sh, ResNet-20 fp32, docs/DIST.md "Measured on links"):
 * in place 4.4 s a step, from a copy 1.7-1.8 s. So large buffers are sent
 * from a copy; small ones (scalars, TernGrad's shared maxima) stay in place,
 * where the binomial tree's log N hops are the faster. */
#define COPY_FROM ((size_t)64 << 10)
static void *sendcopy; /* one worker per process */
static size_t sendcopy_cap;

static const void *send_buffer(const void *buf, size_t bytes) {
    if (bytes < COPY_FROM) return MPI_IN_PLACE;
    if (bytes > sendcopy_cap) {
        free(sendcopy);
        sendcopy = mallocCheck(bytes);
        sendcopy_cap = bytes;
    }
    memcpy(sendcopy, buf, bytes);
    return sendcopy;
}

static void m_allreduce_f32(Comm *c, float *buf, size_t n, CommOp op) {
    for (size_t at = 0; at < n; at += MPI_PIECE / 4) {
        size_t k = n - at < MPI_PIECE / 4 ? n - at : MPI_PIECE / 4;
        MPI_Request r;
        mpiCheck(MPI_Iallreduce(send_buffer(buf + at, k * 4), buf + at, (int)k, MPI_FLOAT,
                                op == COMM_SUM ? MPI_SUM : MPI_MAX, MPI_COMM_WORLD, &r));
        wait_reqs(c, &r, 1, "allreduce");
    }
    count_allreduce(c, n * sizeof(float));
}

static void m_allreduce_f64(Comm *c, double *buf, size_t n, CommOp op) {
    for (size_t at = 0; at < n; at += MPI_PIECE / 8) {
        size_t k = n - at < MPI_PIECE / 8 ? n - at : MPI_PIECE / 8;
        MPI_Request r;
        mpiCheck(MPI_Iallreduce(send_buffer(buf + at, k * 8), buf + at, (int)k, MPI_DOUBLE,
                                op == COMM_SUM ? MPI_SUM : MPI_MAX, MPI_COMM_WORLD, &r));
        wait_reqs(c, &r, 1, "allreduce");
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
    MPI_Request r;
    mpiCheck(MPI_Iallgather(&mine, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T, MPI_COMM_WORLD, &r));
    wait_reqs(c, &r, 1, "allgather");
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
    bytebuf_reserve_fresh(out, total);
    mpiCheck(MPI_Iallgatherv(data, (int)len, MPI_BYTE, out->p, counts, displs, MPI_BYTE, MPI_COMM_WORLD, &r));
    wait_reqs(c, &r, 1, "allgather");
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
    MPI_Request r;
    mpiCheck(MPI_Igather(&mine, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T, root, MPI_COMM_WORLD, &r));
    wait_reqs(c, &r, 1, "gather");
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
        bytebuf_reserve_fresh(out, total);
        out->len = total;
    } else {
        c->sent += len;
    }
    mpiCheck(MPI_Igatherv(data, (int)len, MPI_BYTE, c->rank == root ? out->p : NULL, counts, displs, MPI_BYTE, root,
                          MPI_COMM_WORLD, &r));
    wait_reqs(c, &r, 1, "gather");
    free(all);
    free(counts);
    free(displs);
}

static void m_bcast(Comm *c, ByteBuf *buf, int root) {
    uint64_t len = buf->len;
    MPI_Request r;
    mpiCheck(MPI_Ibcast(&len, 1, MPI_UINT64_T, root, MPI_COMM_WORLD, &r));
    wait_reqs(c, &r, 1, "broadcast");
    check_int_size(len, "broadcast");
    bytebuf_reserve_fresh(buf, len);
    buf->len = len;
    mpiCheck(MPI_Ibcast(buf->p, (int)len, MPI_BYTE, root, MPI_COMM_WORLD, &r));
    wait_reqs(c, &r, 1, "broadcast");
    if (c->rank == root) c->sent += len * (uint64_t)(c->size - 1);
    else c->received += len;
}

static void m_sendrecv(Comm *c, ByteBuf *out, int src, const uint8_t *data, size_t len, int dst) {
    uint64_t mine = len, theirs = 0;
    check_int_size(len, "send");
    MPI_Request r[2];
    mpiCheck(MPI_Irecv(&theirs, 1, MPI_UINT64_T, src, 1, MPI_COMM_WORLD, &r[0]));
    mpiCheck(MPI_Isend(&mine, 1, MPI_UINT64_T, dst, 1, MPI_COMM_WORLD, &r[1]));
    wait_reqs(c, r, 2, "send/receive");
    check_int_size(theirs, "receive");
    bytebuf_reserve_fresh(out, theirs);
    mpiCheck(MPI_Irecv(out->p, (int)theirs, MPI_BYTE, src, 2, MPI_COMM_WORLD, &r[0]));
    mpiCheck(MPI_Isend(data, (int)len, MPI_BYTE, dst, 2, MPI_COMM_WORLD, &r[1]));
    wait_reqs(c, r, 2, "send/receive");
    out->len = theirs;
    c->sent += len;
    c->received += theirs;
}

static void m_free(Comm *c) {
    free(sendcopy);
    sendcopy = NULL;
    sendcopy_cap = 0;
    free(c);
}

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
