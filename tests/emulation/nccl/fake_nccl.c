#include "fake_nccl.h"
/* Under EMU_ASAN=1 Open MPI's own leaks are suppressed, every other one is reported */
#include "tests/lsan_mpi.h"
unsigned long long emu_host_copy_bytes; /* emu_cuda.h EMU_COUNT_COPIES */
static int group, nreq;
static MPI_Request reqs[4096];
static MPI_Datatype mt(ncclDataType_t t) { return t == ncclUint8 ? MPI_BYTE : t == ncclUint64 ? MPI_UINT64_T : t == ncclFloat32 ? MPI_FLOAT : MPI_DOUBLE; }
static size_t es(ncclDataType_t t) { return t == ncclUint8 ? 1 : t == ncclFloat32 ? 4 : 8; }
const char *ncclGetErrorString(ncclResult_t r) { (void)r; return "fake"; }
ncclResult_t ncclGetUniqueId(ncclUniqueId *id) { memset(id, 7, sizeof *id); return ncclSuccess; }
ncclResult_t ncclCommInitRank(ncclComm_t *c, int n, ncclUniqueId id, int rank) {
    for (size_t i = 0; i < sizeof id.internal; i++) if (id.internal[i] != 7) { fprintf(stderr, "bad unique id\n"); exit(1); }
    *c = malloc(sizeof **c); (*c)->rank = rank; (*c)->size = n;
    /* one rank: real NCCL needs no bootstrap, and MPI may not be initialized */
    if (n == 1) (*c)->comm = MPI_COMM_NULL;
    else MPI_Comm_dup(MPI_COMM_WORLD, &(*c)->comm);
    return ncclSuccess;
}
ncclResult_t ncclCommDestroy(ncclComm_t c) { if (c->comm != MPI_COMM_NULL) MPI_Comm_free(&c->comm); free(c); return ncclSuccess; }
/* A buffer of the trainers' emulated device (nn/emu_device.c: tracked, inaccessible outside an
 * operation; comm_nccl_allreduce_dev and the device exchange's bundles pass them) is opened
 * around the MPI call: a collective's buffers; for point-to-point calls, every device page
 * until the call (or its group) ends. Weak: the programs without tracked device memory
 * (test_comm_nccl_emu) have none. */
int emu_is_dev(const void *p) __attribute__((weak));
void emu_dev_open_ptrs(const void *const *p, int k) __attribute__((weak));
void emu_dev_open(void) __attribute__((weak));
void emu_dev_close(void) __attribute__((weak));
void emu_stream_use(const void *p, int w, cudaStream_t s) __attribute__((weak));
/* a call's operands on its stream, for the emulation's check of the streams' order:
 * what it sends read (s), what it receives written (r) */
static void on_stream(const void *s, const void *r, cudaStream_t st) {
    if (!emu_stream_use || !emu_is_dev) return;
    if (s && s != r && emu_is_dev(s)) emu_stream_use(s, 0, st);
    if (r && emu_is_dev(r)) emu_stream_use(r, 1, st);
}
void emu_dev_open_used(const void *const *p, int k) __attribute__((weak));
static int dev_open(const void *a, const void *b) { /* a collective's operands, recorded by on_stream */
    if (!emu_is_dev || !(emu_is_dev(a) || emu_is_dev(b))) return 0;
    const void *q[2] = {a, b};
    if (emu_dev_open_used) emu_dev_open_used(q, 2);
    else emu_dev_open_ptrs(q, 2);
    return 1;
}
static int all_open; /* every device page is open until the point-to-point call or its group ends */
void *emu_nccl_memmove(void *d, const void *s, size_t n) {
    int opened = !all_open && n && emu_is_dev && (emu_is_dev(d) || emu_is_dev(s));
    if (opened) emu_dev_open();
    memmove(d, s, n);
    if (opened) emu_dev_close();
    return d;
}
static void p2p_open(const void *p) {
    if (!all_open && emu_is_dev && emu_is_dev(p)) {
        emu_dev_open();
        all_open = 1;
    }
}
static void p2p_close(void) {
    if (all_open && !group) {
        emu_dev_close();
        all_open = 0;
    }
}
ncclResult_t ncclAllReduce(const void *s, void *r, size_t n, ncclDataType_t t, ncclRedOp_t op, ncclComm_t c, cudaStream_t st) {
    if (group) abort();
    on_stream(s, r, st);
    int opened = dev_open(s, r);
    if (c->size == 1) { if (s != r) memmove(r, s, n * es(t)); }
    else MPI_Allreduce(s == r ? MPI_IN_PLACE : s, r, (int)n, mt(t), op == ncclSum ? MPI_SUM : MPI_MAX, c->comm);
    if (opened) emu_dev_close();
    return ncclSuccess;
}
ncclResult_t ncclAllGather(const void *s, void *r, size_t n, ncclDataType_t t, ncclComm_t c, cudaStream_t st) {
    if (group) abort();
    on_stream(s, r, st);
    int opened = dev_open(s, r);
    if (c->size == 1) memmove(r, s, n * es(t));
    else { void *tmp = malloc(n * es(t)); memcpy(tmp, s, n * es(t));
           MPI_Allgather(tmp, (int)n, mt(t), r, (int)n, mt(t), c->comm); free(tmp); }
    if (opened) emu_dev_close();
    return ncclSuccess;
}
ncclResult_t ncclBroadcast(const void *s, void *r, size_t n, ncclDataType_t t, int root, ncclComm_t c, cudaStream_t st) {
    if (group) abort();
    on_stream(c->rank == root ? s : NULL, r, st);
    int opened = dev_open(s, r);
    if (c->rank == root && s != r) memmove(r, s, n * es(t));
    if (c->size > 1) MPI_Bcast(r, (int)n, mt(t), root, c->comm);
    if (opened) emu_dev_close();
    return ncclSuccess;
}
ncclResult_t ncclSend(const void *s, size_t n, ncclDataType_t t, int peer, ncclComm_t c, cudaStream_t st) {
    on_stream(s, NULL, st);
    if (c->size == 1) { fprintf(stderr, "fake nccl: send on a communicator of one rank\n"); exit(1); } if (n == 0) { fprintf(stderr, "zero-byte send\n"); }
    p2p_open(s);
    if (group) MPI_Isend(s, (int)n, mt(t), peer, 5, c->comm, &reqs[nreq++]);
    else MPI_Send(s, (int)n, mt(t), peer, 5, c->comm);
    p2p_close();
    return ncclSuccess;
}
ncclResult_t ncclRecv(void *r, size_t n, ncclDataType_t t, int peer, ncclComm_t c, cudaStream_t st) {
    on_stream(NULL, r, st);
    MPI_Status stt; int cnt;
    if (c->size == 1) { fprintf(stderr, "fake nccl: receive on a communicator of one rank\n"); exit(1); }
    p2p_open(r);
    if (group) MPI_Irecv(r, (int)n, mt(t), peer, 5, c->comm, &reqs[nreq++]);
    else { MPI_Recv(r, (int)n, mt(t), peer, 5, c->comm, &stt); MPI_Get_count(&stt, mt(t), &cnt); if ((size_t)cnt != n) { fprintf(stderr, "size mismatch\n"); exit(1); } }
    p2p_close();
    return ncclSuccess;
}
ncclResult_t ncclGroupStart(void) { group++; return ncclSuccess; }
ncclResult_t ncclGroupEnd(void) {
    if (--group == 0) {
        MPI_Status st[4096];
        if (nreq) MPI_Waitall(nreq, reqs, st); /* an empty group needs no MPI */
        for (int i = 0; i < nreq; i++) { int e = st[i].MPI_ERROR; (void)e; }
        nreq = 0;
        p2p_close();
    }
    return ncclSuccess;
}
