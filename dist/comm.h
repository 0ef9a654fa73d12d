/* The communicator interface: what a topology needs from an engine.
 *
 * Backends: local (N workers as threads of one process, comm_local.c), mpi
 * (one worker per process, comm_mpi.c, built when MPI is found), nccl (one GPU
 * per process, CUDA builds). A topology only ever talks to a Comm; it never
 * knows which backend is behind it, and never looks inside a frame.
 *
 * Every call is collective over all ranks unless it says otherwise, and every
 * rank must make the same sequence of calls. Byte counts are counted per rank
 * in sent/received (what this rank put on and took off the wire).
 *
 * Variable-size results go into a ByteBuf that the call grows as needed.
 */
#ifndef GC_COMM_H
#define GC_COMM_H

#include <stddef.h>
#include <stdint.h>

typedef enum { COMM_SUM, COMM_MAX } CommOp;

/* Where a ByteBuf's bytes live. NULL (a zeroed ByteBuf's) is malloc's memory; the
 * device exchange (dist/exchange_cuda.c) keeps its bundles in device memory (device = 1)
 * over nccl and local, where the frames are encoded, moved and decoded, or else in
 * page-locked host memory, so that its frames' copies to and from the GPU go straight
 * by DMA. */
typedef struct {
    void *(*alloc)(size_t bytes); /* NULL when out of memory */
    void (*free)(void *p);
    /* bytes from and to this allocator's blocks or host memory, either way (NULL: memcpy);
     * with settle set it may return before the copy has run */
    void (*copy)(void *dst, const void *src, size_t bytes);
    int device; /* GPU memory: the nccl and local backends take such buffers (the data of
                 * the same call is then GPU memory too), the mpi backend does not */
    void (*settle)(void); /* waits for the calling thread's copies (NULL: each is complete when it returns) */
} ByteAlloc;

typedef struct {
    uint8_t *p;
    size_t len, cap;
    const ByteAlloc *mem; /* NULL: malloc and free */
} ByteBuf;

/* n bytes to dst from src, one of them in b's memory and the other there or in host
 * memory (b's allocator's copy, or memcpy), complete when it returns */
void bytebuf_copy(const ByteBuf *b, void *dst, const void *src, size_t n);
/* the same, complete only after bytebuf_settle(b): several copies, one wait (the local
 * backend's collectives, device to device) */
void bytebuf_copy_start(const ByteBuf *b, void *dst, const void *src, size_t n);
void bytebuf_settle(const ByteBuf *b);
/* grows b to at least cap bytes, keeping its bytes; ends the program when out of memory */
void bytebuf_reserve(ByteBuf *b, size_t cap);
/* the same for a buffer about to be overwritten (a collective's receive buffer): its
 * bytes are not kept, and a larger one is not filled with them */
void bytebuf_reserve_fresh(ByteBuf *b, size_t cap);
/* frees b's bytes; b is then empty, with the same allocator */
void bytebuf_free(ByteBuf *b);

typedef struct Comm Comm;

typedef struct {
    const char *name;
    void (*barrier)(Comm *c);
    /* in place, element-wise over all ranks; the sum is taken in rank order on
     * the local backend (deterministic), in MPI's order on mpi */
    void (*allreduce_f32)(Comm *c, float *buf, size_t n, CommOp op);
    void (*allreduce_f64)(Comm *c, double *buf, size_t n, CommOp op);
    /* every rank contributes len bytes (len may differ per rank); out receives
     * all contributions concatenated in rank order, lens[r] their sizes */
    void (*allgatherv)(Comm *c, ByteBuf *out, size_t *lens /*size*/, const uint8_t *data, size_t len);
    /* root receives all contributions concatenated in rank order (lens on root) */
    void (*gatherv)(Comm *c, ByteBuf *out, size_t *lens /*size*/, const uint8_t *data, size_t len, int root);
    /* root's buf (len bytes) is copied to every rank's buf */
    void (*bcast)(Comm *c, ByteBuf *buf, int root);
    /* send data to rank dst while receiving from rank src into out (grown);
     * collective: every rank calls it in the same step (the ring pattern) */
    void (*sendrecv)(Comm *c, ByteBuf *out, int src, const uint8_t *data, size_t len, int dst);
    void (*free)(Comm *c);
} CommOps;

struct Comm {
    const CommOps *ops;
    int rank, size;
    uint64_t sent, received; /* bytes this rank sent / received through this Comm */
    void *impl;
    /* Stall detection (--timeout): a collective that has not completed after
     * timeout seconds (0: wait forever) ends the whole job with a message naming
     * the step, the operation and the ranks that did not arrive. step is the
     * caller's training step, for that message. */
    double timeout;
    long step;
};

static inline void comm_barrier(Comm *c) { c->ops->barrier(c); }
static inline void comm_allreduce_f32(Comm *c, float *buf, size_t n, CommOp op) { c->ops->allreduce_f32(c, buf, n, op); }
static inline void comm_allreduce_f64(Comm *c, double *buf, size_t n, CommOp op) { c->ops->allreduce_f64(c, buf, n, op); }
static inline void comm_allgatherv(Comm *c, ByteBuf *out, size_t *lens, const uint8_t *data, size_t len) {
    c->ops->allgatherv(c, out, lens, data, len);
}
static inline void comm_gatherv(Comm *c, ByteBuf *out, size_t *lens, const uint8_t *data, size_t len, int root) {
    c->ops->gatherv(c, out, lens, data, len, root);
}
static inline void comm_bcast(Comm *c, ByteBuf *buf, int root) { c->ops->bcast(c, buf, root); }
static inline void comm_sendrecv(Comm *c, ByteBuf *out, int src, const uint8_t *data, size_t len, int dst) {
    c->ops->sendrecv(c, out, src, data, len, dst);
}
static inline void comm_free(Comm *c) {
    if (c) c->ops->free(c);
}

/* Traffic that is not the exchange's (agreement on failures, the step's statistics,
 * evaluation, checkpoints, the network model's input) leaves sent and received as
 * they were: an allreduce of doubles in one call, any other collective between
 * comm_uncounted_begin and comm_uncounted_end. */
typedef struct {
    uint64_t sent, received;
} CommMark;
static inline CommMark comm_uncounted_begin(const Comm *c) {
    CommMark m = {c->sent, c->received};
    return m;
}
static inline void comm_uncounted_end(Comm *c, CommMark m) {
    c->sent = m.sent;
    c->received = m.received;
}
static inline void comm_allreduce_uncounted(Comm *c, double *buf, size_t n, CommOp op) {
    CommMark m = comm_uncounted_begin(c);
    comm_allreduce_f64(c, buf, n, op);
    comm_uncounted_end(c, m);
}

/* ---- local backend: N threads of this process ----
 * comm_local_group_new creates the shared state for size workers; each worker
 * thread then calls comm_local_new(group, rank) for its own Comm. */
typedef struct LocalGroup LocalGroup;
LocalGroup *comm_local_group_new(int size);
void comm_local_group_free(LocalGroup *g);
Comm *comm_local_new(LocalGroup *g, int rank);
/* run fn(rank, arg) on size threads (rank 0 on the calling thread) and join */
void comm_local_run(int size, void (*fn)(int rank, void *arg), void *arg);

/* ---- mpi backend (HAVE_MPI) ----
 * comm_mpi_available() is 0 when built without MPI. comm_mpi_new initializes
 * MPI if needed (MPI_Init_thread), and comm_mpi_finalize ends it. */
int comm_mpi_available(void);
Comm *comm_mpi_new(int *argc, char ***argv);
void comm_mpi_finalize(void);
/* true when this process was started by mpirun/mpiexec (env probe, no MPI call) */
int comm_mpi_launched(void);

#endif
