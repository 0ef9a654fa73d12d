/* NCCL backend: one GPU per process, bootstrapped through MPI (dist/comm_nccl.h);
 * a process not started by an MPI launcher is a communicator of one rank without MPI.
 *
 * Every call takes host buffers, copies them to device staging buffers on the
 * backend's stream, runs the NCCL collective or grouped point-to-point
 * operations, copies the result back and synchronizes the stream before it
 * returns, so the Comm behaves like the local and MPI backends. A ByteBuf in
 * device memory (its allocator's device flag: the device exchange's bundles,
 * dist/exchange_cuda.c) is sent from and received into where it lies, with
 * no staging and no copy through the host:
 *   allreduce  ncclAllReduce in place (float / double, sum or max)
 *   allgatherv ncclAllGather of every rank's length (u64), then grouped
 *              ncclSend/ncclRecv of the frames between every pair of ranks
 *              (exact sizes, no padding); own frame copied on the host
 *   gatherv    the lengths as above, then every rank sends its frame to root
 *   bcast      ncclBroadcast of the length, then of the bytes
 *   sendrecv   grouped send/recv of the lengths, then of the bytes (the ring)
 * Zero-byte transfers are skipped on both sides (both know every length).
 * Byte accounting is the model of comm_local.c / comm_mpi.c: the same numbers
 * on every backend.
 */
#include <stdlib.h>
#include <string.h>

#include "common/check.h"
#include "dist/comm.h"
#include "dist/comm_nccl.h"

#if defined(HAVE_NCCL) && defined(HAVE_MPI) && defined(HAVE_CUDA)
#include <mpi.h>

#include "common/cuda_check.h"

/* A failed call ends the whole job: under MPI with MPI_Abort, so that the other
 * ranks do not wait forever inside an NCCL operation (the communicator is blocking
 * and nothing polls ncclCommGetAsyncError); a single process just exits. */
static void job_abort(void) {
    int inited = 0, fin = 0;
    MPI_Initialized(&inited);
    MPI_Finalized(&fin);
    if (inited && !fin) MPI_Abort(MPI_COMM_WORLD, 1);
    exit(1);
}

static void fail_(const char *lib, const char *msg, const char *call, const char *file, int line) {
    fprintf(stderr, "error: nccl backend: %s error: %s in %s at %s:%d\n", lib, msg, call, file, line);
    job_abort();
}

static void mpi_check_(int err, const char *call, const char *file, int line) {
    if (err != MPI_SUCCESS) {
        char msg[MPI_MAX_ERROR_STRING];
        int len = 0;
        MPI_Error_string(err, msg, &len);
        fail_("MPI", msg, call, file, line);
    }
}
#define mpiCheckN(x) mpi_check_((x), #x, __FILE__, __LINE__)
#define cudaCheckN(x)                                                                   \
    do {                                                                                \
        cudaError_t e_ = (x);                                                           \
        if (e_ != cudaSuccess) fail_("CUDA", cudaGetErrorString(e_), #x, __FILE__, __LINE__); \
    } while (0)
#define ncclCheckN(x)                                                                   \
    do {                                                                                \
        ncclResult_t r_ = (x);                                                          \
        if (r_ != ncclSuccess) fail_("NCCL", ncclGetErrorString(r_), #x, __FILE__, __LINE__); \
    } while (0)

typedef struct {
    ncclComm_t nccl;
    cudaStream_t stream;
    int device;
    int mpi; /* bootstrapped through MPI (0: one process on its own, no MPI) */
    uint8_t *dsend, *drecv; /* staging, grown on demand */
    size_t send_cap, recv_cap;
    uint64_t *dlen; /* [2 + size] lengths */
    uint64_t *hlen; /* host copy [size] */
} NcclImpl;

int comm_nccl_available(void) { return 1; }

static NcclImpl *impl(Comm *c) { return (NcclImpl *)c->impl; }

static void grow(uint8_t **p, size_t *cap, size_t need) {
    if (need <= *cap) return;
    size_t nc = *cap ? *cap : 1 << 16;
    while (nc < need) nc *= 2;
    if (*p) cudaCheckN(cudaFree(*p));
    cudaCheckN(cudaMalloc((void **)p, nc));
    *cap = nc;
}

static void sync_stream(NcclImpl *m) { cudaCheckN(cudaStreamSynchronize(m->stream)); }

static void n_barrier(Comm *c) {
    sync_stream(impl(c));
    if (impl(c)->mpi) mpiCheckN(MPI_Barrier(MPI_COMM_WORLD));
}

static void count_allreduce(Comm *c, size_t bytes) {
    int N = c->size;
    uint64_t b = N > 1 ? (uint64_t)(2.0 * (N - 1) / N * (double)bytes) : 0;
    c->sent += b;
    c->received += b;
}

static void allreduce_any(Comm *c, void *buf, size_t n, size_t esize, ncclDataType_t type, CommOp op) {
    NcclImpl *m = impl(c);
    size_t bytes = n * esize;
    if (n) {
        grow(&m->dsend, &m->send_cap, bytes);
        cudaCheckN(cudaMemcpyAsync(m->dsend, buf, bytes, cudaMemcpyHostToDevice, m->stream));
        ncclCheckN(ncclAllReduce(m->dsend, m->dsend, n, type, op == COMM_SUM ? ncclSum : ncclMax, m->nccl, m->stream));
        cudaCheckN(cudaMemcpyAsync(buf, m->dsend, bytes, cudaMemcpyDeviceToHost, m->stream));
        sync_stream(m);
    }
    count_allreduce(c, bytes);
}

int comm_nccl_allreduce_dev(Comm *c, float *dbuf, size_t n) {
    if (strcmp(c->ops->name, "nccl") != 0) return -1;
    NcclImpl *m = impl(c);
    if (n) {
        /* the caller's kernels ran on its own stream, which this non-blocking
         * stream does not wait for */
        cudaCheckN(cudaDeviceSynchronize());
        ncclCheckN(ncclAllReduce(dbuf, dbuf, n, ncclFloat32, ncclSum, m->nccl, m->stream));
        sync_stream(m);
    }
    count_allreduce(c, n * sizeof(float));
    return 0;
}

static void n_allreduce_f32(Comm *c, float *buf, size_t n, CommOp op) {
    allreduce_any(c, buf, n, sizeof(float), ncclFloat32, op);
}
static void n_allreduce_f64(Comm *c, double *buf, size_t n, CommOp op) {
    allreduce_any(c, buf, n, sizeof(double), ncclFloat64, op);
}

/* every rank's length into m->hlen[0..size) */
static void gather_lengths(Comm *c, size_t len) {
    NcclImpl *m = impl(c);
    uint64_t mine = len;
    cudaCheckN(cudaMemcpyAsync(m->dlen, &mine, sizeof mine, cudaMemcpyHostToDevice, m->stream));
    ncclCheckN(ncclAllGather(m->dlen, m->dlen + 2, 1, ncclUint64, m->nccl, m->stream));
    cudaCheckN(cudaMemcpyAsync(m->hlen, m->dlen + 2, (size_t)c->size * sizeof(uint64_t), cudaMemcpyDeviceToHost,
                              m->stream));
    sync_stream(m);
}

/* A ByteBuf in device memory (dist/comm.h ByteAlloc.device; the device exchange's bundles):
 * the call's data is device memory too, and the frames go from it and into the buffer
 * with no staging. The caller's kernels and copies ran on its own stream, which this one
 * does not wait for: the device is synchronized first (as comm_nccl_allreduce_dev). */
static int on_device(const ByteBuf *b) {
    if (!b->mem || !b->mem->device) return 0;
    cudaCheckN(cudaDeviceSynchronize());
    return 1;
}

/* the bytes to send: data itself (device) or its copy in the send staging */
static const uint8_t *send_from(NcclImpl *m, int dev, const uint8_t *data, size_t len) {
    if (dev || !len) return data;
    grow(&m->dsend, &m->send_cap, len);
    cudaCheckN(cudaMemcpyAsync(m->dsend, data, len, cudaMemcpyHostToDevice, m->stream));
    return m->dsend;
}

/* where received bytes land: the buffer itself (device) or the receive staging */
static uint8_t *recv_into(NcclImpl *m, int dev, ByteBuf *out, size_t total) {
    if (dev) return out->p;
    grow(&m->drecv, &m->recv_cap, total);
    return m->drecv;
}

/* the received bytes from the staging into out (host buffers), then the stream synchronized */
static void recv_done(NcclImpl *m, int dev, ByteBuf *out, const uint8_t *staged, size_t total) {
    if (!dev && total) cudaCheckN(cudaMemcpyAsync(out->p, staged, total, cudaMemcpyDeviceToHost, m->stream));
    sync_stream(m);
}

/* this rank's own bytes into its place in out: not sent through NCCL */
static void copy_own(NcclImpl *m, int dev, uint8_t *dst, const uint8_t *data, size_t len) {
    if (!len) return;
    if (dev) {
        cudaCheckN(cudaMemcpyAsync(dst, data, len, cudaMemcpyDeviceToDevice, m->stream));
        sync_stream(m);
    } else {
        memcpy(dst, data, len);
    }
}

static void n_allgatherv(Comm *c, ByteBuf *out, size_t *lens, const uint8_t *data, size_t len) {
    NcclImpl *m = impl(c);
    int N = c->size, r = c->rank, dev = on_device(out);
    gather_lengths(c, len);
    size_t total = 0, at_mine = 0;
    for (int k = 0; k < N; k++) {
        lens[k] = (size_t)m->hlen[k];
        if (k == r) at_mine = total;
        total += lens[k];
        if (k != r) c->received += m->hlen[k];
    }
    bytebuf_reserve_fresh(out, total);
    out->len = total;
    if (total > len || len) { /* something comes from a peer, or ours goes to them */
        const uint8_t *src = send_from(m, dev, data, len);
        uint8_t *dst = total > len ? recv_into(m, dev, out, total) : NULL;
        ncclCheckN(ncclGroupStart());
        size_t at = 0;
        for (int k = 0; k < N; k++) {
            if (k != r) {
                if (len) ncclCheckN(ncclSend(src, len, ncclUint8, k, m->nccl, m->stream));
                if (lens[k]) ncclCheckN(ncclRecv(dst + at, lens[k], ncclUint8, k, m->nccl, m->stream));
            }
            at += lens[k];
        }
        ncclCheckN(ncclGroupEnd());
        recv_done(m, dev, out, dst, total > len ? total : 0);
    }
    copy_own(m, dev, out->p + at_mine, data, len); /* own frame: not staged back */
    c->sent += (uint64_t)len * (uint64_t)(N - 1);
}

static void n_gatherv(Comm *c, ByteBuf *out, size_t *lens, const uint8_t *data, size_t len, int root) {
    NcclImpl *m = impl(c);
    int N = c->size, r = c->rank, dev = on_device(out);
    gather_lengths(c, len);
    size_t total = 0, at_root = 0;
    for (int k = 0; k < N; k++) {
        lens[k] = (size_t)m->hlen[k];
        if (k == root) at_root = total;
        total += lens[k];
    }
    if (r == root) {
        bytebuf_reserve_fresh(out, total);
        out->len = total;
        if (total > len) {
            uint8_t *dst = recv_into(m, dev, out, total);
            ncclCheckN(ncclGroupStart());
            size_t at = 0;
            for (int k = 0; k < N; k++) {
                if (k != r && lens[k]) ncclCheckN(ncclRecv(dst + at, lens[k], ncclUint8, k, m->nccl, m->stream));
                at += lens[k];
            }
            ncclCheckN(ncclGroupEnd());
            recv_done(m, dev, out, dst, total);
        }
        copy_own(m, dev, out->p + at_root, data, len);
        for (int k = 0; k < N; k++)
            if (k != root) c->received += m->hlen[k];
    } else {
        if (len) {
            ncclCheckN(ncclSend(send_from(m, dev, data, len), len, ncclUint8, root, m->nccl, m->stream));
            sync_stream(m);
        }
        c->sent += len;
    }
}

static void n_bcast(Comm *c, ByteBuf *buf, int root) {
    NcclImpl *m = impl(c);
    int dev = on_device(buf);
    uint64_t len = c->rank == root ? buf->len : 0;
    cudaCheckN(cudaMemcpyAsync(m->dlen, &len, sizeof len, cudaMemcpyHostToDevice, m->stream));
    ncclCheckN(ncclBroadcast(m->dlen, m->dlen, 1, ncclUint64, root, m->nccl, m->stream));
    cudaCheckN(cudaMemcpyAsync(&len, m->dlen, sizeof len, cudaMemcpyDeviceToHost, m->stream));
    sync_stream(m);
    bytebuf_reserve_fresh(buf, (size_t)len);
    buf->len = (size_t)len;
    if (len) {
        uint8_t *d = buf->p;
        if (!dev) {
            grow(&m->dsend, &m->send_cap, (size_t)len);
            d = m->dsend;
            if (c->rank == root)
                cudaCheckN(cudaMemcpyAsync(d, buf->p, (size_t)len, cudaMemcpyHostToDevice, m->stream));
        }
        ncclCheckN(ncclBroadcast(d, d, (size_t)len, ncclUint8, root, m->nccl, m->stream));
        if (!dev && c->rank != root)
            cudaCheckN(cudaMemcpyAsync(buf->p, d, (size_t)len, cudaMemcpyDeviceToHost, m->stream));
        sync_stream(m);
    }
    if (c->rank == root) c->sent += len * (uint64_t)(c->size - 1);
    else c->received += len;
}

static void n_sendrecv(Comm *c, ByteBuf *out, int src, const uint8_t *data, size_t len, int dst) {
    NcclImpl *m = impl(c);
    int r = c->rank, dev = on_device(out);
    uint64_t theirs = 0;
    if (src == r && dst == r) { /* a ring of one */
        theirs = len;
        bytebuf_reserve_fresh(out, len);
        if (len && dev) copy_own(m, dev, out->p, data, len);
        else if (len) memmove(out->p, data, len);
    } else {
        uint64_t mine = len;
        cudaCheckN(cudaMemcpyAsync(m->dlen, &mine, sizeof mine, cudaMemcpyHostToDevice, m->stream));
        ncclCheckN(ncclGroupStart());
        ncclCheckN(ncclSend(m->dlen, 1, ncclUint64, dst, m->nccl, m->stream));
        ncclCheckN(ncclRecv(m->dlen + 1, 1, ncclUint64, src, m->nccl, m->stream));
        ncclCheckN(ncclGroupEnd());
        cudaCheckN(cudaMemcpyAsync(&theirs, m->dlen + 1, sizeof theirs, cudaMemcpyDeviceToHost, m->stream));
        sync_stream(m);
        bytebuf_reserve_fresh(out, (size_t)theirs);
        if (len || theirs) {
            const uint8_t *from = send_from(m, dev, data, len);
            uint8_t *into = theirs ? recv_into(m, dev, out, (size_t)theirs) : NULL;
            ncclCheckN(ncclGroupStart());
            if (len) ncclCheckN(ncclSend(from, len, ncclUint8, dst, m->nccl, m->stream));
            if (theirs) ncclCheckN(ncclRecv(into, (size_t)theirs, ncclUint8, src, m->nccl, m->stream));
            ncclCheckN(ncclGroupEnd());
            recv_done(m, dev, out, into, (size_t)theirs);
        }
    }
    out->len = (size_t)theirs;
    c->sent += len;
    c->received += theirs;
}

static void n_free(Comm *c) {
    if (!c) return;
    NcclImpl *m = impl(c);
    if (m) {
        sync_stream(m);
        ncclCheckN(ncclCommDestroy(m->nccl));
        if (m->dsend) cudaCheckN(cudaFree(m->dsend));
        if (m->drecv) cudaCheckN(cudaFree(m->drecv));
        if (m->dlen) cudaCheckN(cudaFree(m->dlen));
        cudaCheckN(cudaStreamDestroy(m->stream));
        free(m->hlen);
        free(m);
    }
    free(c);
}

static const CommOps nccl_ops = {
    .name = "nccl",
    .barrier = n_barrier,
    .allreduce_f32 = n_allreduce_f32,
    .allreduce_f64 = n_allreduce_f64,
    .allgatherv = n_allgatherv,
    .gatherv = n_gatherv,
    .bcast = n_bcast,
    .sendrecv = n_sendrecv,
    .free = n_free,
};

/* the GPU of this process, its rank among the processes of its node being local of
 * nlocal: the local-th visible GPU; or the only one, when the launcher shows each
 * process just its own (per-rank CUDA_VISIBLE_DEVICES) or there is one process */
static int pick_device(int rank, int local, int nlocal) {
    int ndev = 0;
    cudaError_t e = cudaGetDeviceCount(&ndev);
    if (e != cudaSuccess || ndev < 1) {
        fprintf(stderr, "error: nccl backend: rank %d sees no GPU (%s)\n", rank,
                e == cudaSuccess ? "cudaGetDeviceCount reports none" : cudaGetErrorString(e));
        job_abort();
    }
    if (ndev == 1) return 0;
    if (local >= ndev) {
        fprintf(stderr,
                "error: nccl backend: rank %d is process %d of %d on its node, which shows it %d GPUs; NCCL needs "
                "one GPU per process: start at most %d processes on this node\n",
                rank, local + 1, nlocal, ndev, ndev);
        job_abort();
    }
    return local;
}

Comm *comm_nccl_new(int *argc, char ***argv) {
    Comm *c = callocCheck(1, sizeof *c);
    c->ops = &nccl_ops;
    NcclImpl *m = callocCheck(1, sizeof *m);
    int inited = 0, local = 0, nlocal = 1;
    MPI_Initialized(&inited);
    m->mpi = inited || comm_mpi_launched();
    if (m->mpi) {
        if (!inited) {
            int provided = 0;
            mpiCheckN(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided));
        }
        MPI_Comm_rank(MPI_COMM_WORLD, &c->rank);
        MPI_Comm_size(MPI_COMM_WORLD, &c->size);
        MPI_Comm node;
        mpiCheckN(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, c->rank, MPI_INFO_NULL, &node));
        mpiCheckN(MPI_Comm_rank(node, &local));
        mpiCheckN(MPI_Comm_size(node, &nlocal));
        mpiCheckN(MPI_Comm_free(&node));
    } else { /* not started by an MPI launcher: a communicator of one rank, no MPI */
        c->rank = 0;
        c->size = 1;
    }
    m->device = pick_device(c->rank, local, nlocal);
    cudaCheckN(cudaSetDevice(m->device));
    cudaCheckN(cudaStreamCreateWithFlags(&m->stream, cudaStreamNonBlocking));
    cudaCheckN(cudaMalloc((void **)&m->dlen, (size_t)(c->size + 2) * sizeof(uint64_t)));
    m->hlen = callocCheck((size_t)c->size, sizeof *m->hlen);
    ncclUniqueId id;
    if (c->rank == 0) ncclCheckN(ncclGetUniqueId(&id));
    if (m->mpi) mpiCheckN(MPI_Bcast(&id, (int)sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD));
    ncclResult_t r = ncclCommInitRank(&m->nccl, c->size, id, c->rank);
    if (r != ncclSuccess) {
        /* NCCL refuses two ranks on one GPU ("Duplicate GPU detected": invalid usage) */
        fprintf(stderr, "error: nccl backend: rank %d: ncclCommInitRank on GPU %d failed: %s%s\n", c->rank,
                m->device, ncclGetErrorString(r),
                nlocal > 1 ? "; if processes of one node share a GPU, start at most one process per GPU" : "");
        job_abort();
    }
    c->impl = m;
    return c;
}

#else /* no NCCL, MPI or CUDA */

int comm_nccl_available(void) { return 0; }

int comm_nccl_allreduce_dev(Comm *c, float *dbuf, size_t n) {
    (void)c;
    (void)dbuf;
    (void)n;
    return -1;
}

Comm *comm_nccl_new(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    gc_fatal("error: this build has no NCCL backend (it needs CUDA, NCCL and MPI: `make deps`, a CUDA "
                    "toolkit with NCCL, then `make clean all`)\n");
}

#endif
