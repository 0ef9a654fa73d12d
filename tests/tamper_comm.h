/* A communicator for the tests that sees, and may corrupt, what an exchange sends.
 *
 * tamper_comm_new(inner, fn, arg) wraps a Comm: every exchange bundle that this
 * worker originates (dist/bundle.h: "GCXB", version, step, entries) is given to
 * fn(bundle, len, rank, step, arg) before it goes to inner, which carries it.
 * fn may change the bytes (a corrupt or hostile peer) or keep a copy. A bundle
 * that a ring hop forwards unchanged (the exact bytes that arrived on the last
 * sendrecv) is not this worker's, and is passed on as it is. Anything else (the
 * allreduces, the device exchange's published addresses) goes to inner
 * untouched. The byte counts are inner's, added to this Comm's as they grow, so
 * the uncounted collectives (dist/comm.h) stay uncounted. Bundles in device
 * memory (the device exchange's, a ByteBuf whose allocator says so) are copied to
 * the host for fn and back (the allocator's copy).
 *
 * The exchange itself has no test hook: a test puts this communicator between it
 * and the backend. It owns inner: comm_free frees both. */
#ifndef GC_TEST_TAMPER_COMM_H
#define GC_TEST_TAMPER_COMM_H

#include <stdlib.h>
#include <string.h>

#include "common/check.h"
#include "compress/codec.h"
#include "dist/bundle.h"
#include "dist/comm.h"

typedef void (*TamperFn)(uint8_t *bundle, size_t len, int rank, long step, void *arg);

typedef struct {
    Comm c;
    CommOps ops; /* inner's name, these functions */
    Comm *inner;
    TamperFn fn;
    void *arg;
    ByteBuf copy;    /* the outgoing bundle fn was given (host memory) */
    ByteBuf dcopy;   /* ... as it goes out, where the bundles live (device memory) */
    ByteBuf arrived; /* what the last sendrecv received (a ring hop may forward it; host memory) */
    ByteBuf view;    /* the outgoing bytes, seen from the host */
    uint64_t s0, r0;
} TamperComm;

static TamperComm *tc_of(Comm *c) { return (TamperComm *)c->impl; }

/* inner's counters and settings around one of its collectives */
static Comm *tc_begin(Comm *c) {
    TamperComm *t = tc_of(c);
    t->inner->timeout = c->timeout;
    t->inner->step = c->step;
    t->s0 = t->inner->sent;
    t->r0 = t->inner->received;
    return t->inner;
}
static void tc_end(Comm *c) {
    TamperComm *t = tc_of(c);
    c->sent += t->inner->sent - t->s0;
    c->received += t->inner->received - t->r0;
}

/* data as fn leaves it: a copy when it is a bundle of this worker's, else data.
 * where: the ByteBuf of the call, whose memory data is in (device or host) */
static const uint8_t *tc_outgoing(TamperComm *t, const ByteBuf *where, const uint8_t *data, size_t len) {
    int dev = where->mem && where->mem->device;
    const uint8_t *h = data;
    if (dev) { /* seen from the host */
        bytebuf_reserve(&t->view, len ? len : 1);
        bytebuf_copy(where, t->view.p, data, len);
        h = t->view.p;
    }
    if (len < BUNDLE_HDR || memcmp(h, "GCXB", 4)) return data;
    if (t->arrived.len == len && !memcmp(t->arrived.p, h, len)) return data; /* forwarded */
    bytebuf_reserve(&t->copy, len);
    memcpy(t->copy.p, h, len);
    t->copy.len = len;
    long step = (long)get_u32(h + 8);
    t->fn(t->copy.p, len, t->c.rank, step, t->arg);
    if (!dev) return t->copy.p;
    t->dcopy.mem = where->mem;
    bytebuf_reserve(&t->dcopy, len);
    bytebuf_copy(where, t->dcopy.p, t->copy.p, len);
    return t->dcopy.p;
}

static void tc_barrier(Comm *c) {
    comm_barrier(tc_begin(c));
    tc_end(c);
}
static void tc_allreduce_f32(Comm *c, float *buf, size_t n, CommOp op) {
    comm_allreduce_f32(tc_begin(c), buf, n, op);
    tc_end(c);
}
static void tc_allreduce_f64(Comm *c, double *buf, size_t n, CommOp op) {
    comm_allreduce_f64(tc_begin(c), buf, n, op);
    tc_end(c);
}
static void tc_allgatherv(Comm *c, ByteBuf *out, size_t *lens, const uint8_t *data, size_t len) {
    data = tc_outgoing(tc_of(c), out, data, len);
    comm_allgatherv(tc_begin(c), out, lens, data, len);
    tc_end(c);
}
static void tc_gatherv(Comm *c, ByteBuf *out, size_t *lens, const uint8_t *data, size_t len, int root) {
    data = tc_outgoing(tc_of(c), out, data, len);
    comm_gatherv(tc_begin(c), out, lens, data, len, root);
    tc_end(c);
}
static void tc_bcast(Comm *c, ByteBuf *buf, int root) {
    /* the root's buffer is also what it keeps (the parameter server's pull) */
    if (c->rank == root) {
        const uint8_t *p = tc_outgoing(tc_of(c), buf, buf->p, buf->len);
        if (p != buf->p) bytebuf_copy(buf, buf->p, p, buf->len);
    }
    comm_bcast(tc_begin(c), buf, root);
    tc_end(c);
}
static void tc_sendrecv(Comm *c, ByteBuf *out, int src, const uint8_t *data, size_t len, int dst) {
    TamperComm *t = tc_of(c);
    data = tc_outgoing(t, out, data, len);
    comm_sendrecv(tc_begin(c), out, src, data, len, dst);
    tc_end(c);
    bytebuf_reserve(&t->arrived, out->len);
    bytebuf_copy(out, t->arrived.p, out->p, out->len);
    t->arrived.len = out->len;
}
static void tc_free(Comm *c) {
    TamperComm *t = tc_of(c);
    bytebuf_free(&t->copy);
    bytebuf_free(&t->dcopy);
    bytebuf_free(&t->arrived);
    bytebuf_free(&t->view);
    comm_free(t->inner);
    free(t);
}

/* the memory of its host-side copies (NULL, the default: malloc's); a test that counts
 * the copies through pageable memory gives page-locked memory here */
static inline void tamper_comm_host_memory(Comm *c, const ByteAlloc *mem) {
    TamperComm *t = tc_of(c);
    t->copy.mem = t->arrived.mem = t->view.mem = mem;
}

static inline Comm *tamper_comm_new(Comm *inner, TamperFn fn, void *arg) {
    TamperComm *t = callocCheck(1, sizeof *t);
    t->ops = (CommOps){inner->ops->name, tc_barrier,  tc_allreduce_f32, tc_allreduce_f64, tc_allgatherv,
                       tc_gatherv,       tc_bcast,    tc_sendrecv,      tc_free};
    t->inner = inner;
    t->fn = fn;
    t->arg = arg;
    t->c.ops = &t->ops;
    t->c.rank = inner->rank;
    t->c.size = inner->size;
    t->c.impl = t;
    return &t->c;
}

#endif
