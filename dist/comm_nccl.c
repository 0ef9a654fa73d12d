/* NCCL backend: one GPU per process, bootstrapped through MPI (dist/comm_nccl.h).
 *
 * Every call takes host buffers, copies them to device staging buffers on the
 * backend's stream, runs the NCCL collective or grouped point-to-point
 * operations, copies the result back and synchronizes the stream before it
 * returns, so the Comm behaves like the local and MPI backends:
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

static void mpi_check_(int err, const char *file, int line) {
    if (err != MPI_SUCCESS) {
        char msg[MPI_MAX_ERROR_STRING];
        int len = 0;
        MPI_Error_string(err, msg, &len);
        fprintf(stderr, "MPI error: %s at %s:%d\n", msg, file, line);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
}
#define mpiCheckN(x) mpi_check_((x), __FILE__, __LINE__)

typedef struct {
    ncclComm_t nccl;
    cudaStream_t stream;
    int device;
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
    if (*p) cudaCheck(cudaFree(*p));
    cudaCheck(cudaMalloc((void **)p, nc));
    *cap = nc;
}

static void sync_stream(NcclImpl *m) { cudaCheck(cudaStreamSynchronize(m->stream)); }

static void n_barrier(Comm *c) {
    sync_stream(impl(c));
    mpiCheckN(MPI_Barrier(MPI_COMM_WORLD));
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
        cudaCheck(cudaMemcpyAsync(m->dsend, buf, bytes, cudaMemcpyHostToDevice, m->stream));
        ncclCheck(ncclAllReduce(m->dsend, m->dsend, n, type, op == COMM_SUM ? ncclSum : ncclMax, m->nccl, m->stream));
        cudaCheck(cudaMemcpyAsync(buf, m->dsend, bytes, cudaMemcpyDeviceToHost, m->stream));
        sync_stream(m);
    }
    count_allreduce(c, bytes);
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
    cudaCheck(cudaMemcpyAsync(m->dlen, &mine, sizeof mine, cudaMemcpyHostToDevice, m->stream));
    ncclCheck(ncclAllGather(m->dlen, m->dlen + 2, 1, ncclUint64, m->nccl, m->stream));
    cudaCheck(cudaMemcpyAsync(m->hlen, m->dlen + 2, (size_t)c->size * sizeof(uint64_t), cudaMemcpyDeviceToHost,
                              m->stream));
    sync_stream(m);
}

static void n_allgatherv(Comm *c, ByteBuf *out, size_t *lens, const uint8_t *data, size_t len) {
    NcclImpl *m = impl(c);
    int N = c->size, r = c->rank;
    gather_lengths(c, len);
    size_t total = 0, at_mine = 0;
    for (int k = 0; k < N; k++) {
        lens[k] = (size_t)m->hlen[k];
        if (k == r) at_mine = total;
        total += lens[k];
        if (k != r) c->received += m->hlen[k];
    }
    bytebuf_reserve(out, total);
    out->len = total;
    if (total > len) { /* something comes from a peer */
        grow(&m->drecv, &m->recv_cap, total);
        if (len) {
            grow(&m->dsend, &m->send_cap, len);
            cudaCheck(cudaMemcpyAsync(m->dsend, data, len, cudaMemcpyHostToDevice, m->stream));
        }
        ncclCheck(ncclGroupStart());
        size_t at = 0;
        for (int k = 0; k < N; k++) {
            if (k != r) {
                if (len) ncclCheck(ncclSend(m->dsend, len, ncclUint8, k, m->nccl, m->stream));
                if (lens[k]) ncclCheck(ncclRecv(m->drecv + at, lens[k], ncclUint8, k, m->nccl, m->stream));
            }
            at += lens[k];
        }
        ncclCheck(ncclGroupEnd());
        cudaCheck(cudaMemcpyAsync(out->p, m->drecv, total, cudaMemcpyDeviceToHost, m->stream));
        sync_stream(m);
    } else if (len) { /* every peer sends nothing, still everybody must send ours */
        grow(&m->dsend, &m->send_cap, len);
        cudaCheck(cudaMemcpyAsync(m->dsend, data, len, cudaMemcpyHostToDevice, m->stream));
        ncclCheck(ncclGroupStart());
        for (int k = 0; k < N; k++)
            if (k != r) ncclCheck(ncclSend(m->dsend, len, ncclUint8, k, m->nccl, m->stream));
        ncclCheck(ncclGroupEnd());
        sync_stream(m);
    }
    if (len) memcpy(out->p + at_mine, data, len); /* own frame: not staged back */
    c->sent += (uint64_t)len * (uint64_t)(N - 1);
}

static void n_gatherv(Comm *c, ByteBuf *out, size_t *lens, const uint8_t *data, size_t len, int root) {
    NcclImpl *m = impl(c);
    int N = c->size, r = c->rank;
    gather_lengths(c, len);
    size_t total = 0, at_root = 0;
    for (int k = 0; k < N; k++) {
        lens[k] = (size_t)m->hlen[k];
        if (k == root) at_root = total;
        total += lens[k];
    }
    if (r == root) {
        bytebuf_reserve(out, total);
        out->len = total;
        if (total > len) {
            grow(&m->drecv, &m->recv_cap, total);
            ncclCheck(ncclGroupStart());
            size_t at = 0;
            for (int k = 0; k < N; k++) {
                if (k != r && lens[k]) ncclCheck(ncclRecv(m->drecv + at, lens[k], ncclUint8, k, m->nccl, m->stream));
                at += lens[k];
            }
            ncclCheck(ncclGroupEnd());
            cudaCheck(cudaMemcpyAsync(out->p, m->drecv, total, cudaMemcpyDeviceToHost, m->stream));
            sync_stream(m);
        }
        if (len) memcpy(out->p + at_root, data, len);
        for (int k = 0; k < N; k++)
            if (k != root) c->received += m->hlen[k];
    } else {
        if (len) {
            grow(&m->dsend, &m->send_cap, len);
            cudaCheck(cudaMemcpyAsync(m->dsend, data, len, cudaMemcpyHostToDevice, m->stream));
            ncclCheck(ncclSend(m->dsend, len, ncclUint8, root, m->nccl, m->stream));
            sync_stream(m);
        }
        c->sent += len;
    }
}

static void n_bcast(Comm *c, ByteBuf *buf, int root) {
    NcclImpl *m = impl(c);
    uint64_t len = c->rank == root ? buf->len : 0;
    cudaCheck(cudaMemcpyAsync(m->dlen, &len, sizeof len, cudaMemcpyHostToDevice, m->stream));
    ncclCheck(ncclBroadcast(m->dlen, m->dlen, 1, ncclUint64, root, m->nccl, m->stream));
    cudaCheck(cudaMemcpyAsync(&len, m->dlen, sizeof len, cudaMemcpyDeviceToHost, m->stream));
    sync_stream(m);
    bytebuf_reserve(buf, (size_t)len);
    buf->len = (size_t)len;
    if (len) {
        grow(&m->dsend, &m->send_cap, (size_t)len);
        if (c->rank == root)
            cudaCheck(cudaMemcpyAsync(m->dsend, buf->p, (size_t)len, cudaMemcpyHostToDevice, m->stream));
        ncclCheck(ncclBroadcast(m->dsend, m->dsend, (size_t)len, ncclUint8, root, m->nccl, m->stream));
        if (c->rank != root)
            cudaCheck(cudaMemcpyAsync(buf->p, m->dsend, (size_t)len, cudaMemcpyDeviceToHost, m->stream));
        sync_stream(m);
    }
    if (c->rank == root) c->sent += len * (uint64_t)(c->size - 1);
    else c->received += len;
}

static void n_sendrecv(Comm *c, ByteBuf *out, int src, const uint8_t *data, size_t len, int dst) {
    NcclImpl *m = impl(c);
    int r = c->rank;
    uint64_t theirs = 0;
    if (src == r && dst == r) { /* a ring of one */
        theirs = len;
        bytebuf_reserve(out, len);
        if (len) memmove(out->p, data, len);
    } else {
        uint64_t mine = len;
        cudaCheck(cudaMemcpyAsync(m->dlen, &mine, sizeof mine, cudaMemcpyHostToDevice, m->stream));
        ncclCheck(ncclGroupStart());
        ncclCheck(ncclSend(m->dlen, 1, ncclUint64, dst, m->nccl, m->stream));
        ncclCheck(ncclRecv(m->dlen + 1, 1, ncclUint64, src, m->nccl, m->stream));
        ncclCheck(ncclGroupEnd());
        cudaCheck(cudaMemcpyAsync(&theirs, m->dlen + 1, sizeof theirs, cudaMemcpyDeviceToHost, m->stream));
        sync_stream(m);
        bytebuf_reserve(out, (size_t)theirs);
        if (len || theirs) {
            grow(&m->dsend, &m->send_cap, len);
            grow(&m->drecv, &m->recv_cap, (size_t)theirs);
            if (len) cudaCheck(cudaMemcpyAsync(m->dsend, data, len, cudaMemcpyHostToDevice, m->stream));
            ncclCheck(ncclGroupStart());
            if (len) ncclCheck(ncclSend(m->dsend, len, ncclUint8, dst, m->nccl, m->stream));
            if (theirs) ncclCheck(ncclRecv(m->drecv, (size_t)theirs, ncclUint8, src, m->nccl, m->stream));
            ncclCheck(ncclGroupEnd());
            if (theirs)
                cudaCheck(cudaMemcpyAsync(out->p, m->drecv, (size_t)theirs, cudaMemcpyDeviceToHost, m->stream));
            sync_stream(m);
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
        ncclCheck(ncclCommDestroy(m->nccl));
        if (m->dsend) cudaCheck(cudaFree(m->dsend));
        if (m->drecv) cudaCheck(cudaFree(m->drecv));
        if (m->dlen) cudaCheck(cudaFree(m->dlen));
        cudaCheck(cudaStreamDestroy(m->stream));
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

Comm *comm_nccl_new(int *argc, char ***argv) {
    int inited = 0;
    MPI_Initialized(&inited);
    if (!inited) {
        int provided = 0;
        mpiCheckN(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided));
    }
    Comm *c = callocCheck(1, sizeof *c);
    c->ops = &nccl_ops;
    MPI_Comm_rank(MPI_COMM_WORLD, &c->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &c->size);
    /* the GPU of this process: its rank among the processes of its node */
    MPI_Comm node;
    int local = 0;
    mpiCheckN(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, c->rank, MPI_INFO_NULL, &node));
    mpiCheckN(MPI_Comm_rank(node, &local));
    mpiCheckN(MPI_Comm_free(&node));
    int ndev = 0;
    cudaError_t e = cudaGetDeviceCount(&ndev);
    if (e != cudaSuccess || local >= ndev) {
        fprintf(stderr,
                "error: nccl backend: rank %d (local rank %d on its node) needs its own GPU, but the node has %d "
                "(%s); start at most one process per GPU\n",
                c->rank, local, e == cudaSuccess ? ndev : 0, e == cudaSuccess ? "ok" : cudaGetErrorString(e));
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    NcclImpl *m = callocCheck(1, sizeof *m);
    m->device = local;
    cudaCheck(cudaSetDevice(local));
    cudaCheck(cudaStreamCreateWithFlags(&m->stream, cudaStreamNonBlocking));
    cudaCheck(cudaMalloc((void **)&m->dlen, (size_t)(c->size + 2) * sizeof(uint64_t)));
    m->hlen = callocCheck((size_t)c->size, sizeof *m->hlen);
    ncclUniqueId id;
    if (c->rank == 0) ncclCheck(ncclGetUniqueId(&id));
    mpiCheckN(MPI_Bcast(&id, (int)sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD));
    ncclCheck(ncclCommInitRank(&m->nccl, c->size, id, c->rank));
    c->impl = m;
    return c;
}

#else /* no NCCL, MPI or CUDA */

int comm_nccl_available(void) { return 0; }

Comm *comm_nccl_new(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "error: this build has no NCCL backend (it needs CUDA, NCCL and MPI: `make deps`, a CUDA "
                    "toolkit with NCCL, then `make clean all`)\n");
    exit(1);
}

#endif
