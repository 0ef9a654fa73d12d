/* The NCCL communicator (dist/comm_nccl.h) against the MPI one: this binary
 * starts itself under `mpirun -np 2`; each child creates both a NCCL Comm and
 * an MPI Comm and runs the same sequence on each: allreduce f32/f64 (sum,
 * max), allgatherv (unequal, zero and multi-megabyte contributions), gatherv to
 * each root, bcast from each root (empty too), ring sendrecv (empty too),
 * barrier. Results must be identical (with 2 ranks every sum is a + b, so
 * even the floating-point sums agree bit for bit) and equal the values
 * computed from the known inputs, and the byte counters of the two Comms must
 * match exactly (the shared accounting model). Then the frame calls again with
 * ByteBufs in device memory (the device exchange's bundles): the same bytes and
 * counts as with host buffers, and (on the emulation, which counts them) no
 * copy between host and device but the lengths'. Each child prints its RESULT
 * line; the parent adds them up.
 * First, in this process without MPI, the same sequence on a NCCL communicator of
 * one rank against the local backend of one worker (NCCL init, allreduce,
 * allgather, broadcast, the staging copies and teardown on one GPU).
 * Skipped with a note without CUDA/NCCL/MPI or without a GPU; the 2-rank part is
 * skipped (and says so) without mpirun or with fewer than 2 GPUs (NCCL does not
 * allow two ranks on one GPU). */
#include <stdint.h>
#include <unistd.h>

#include "tests/test.h"

#if defined(HAVE_CUDA) && defined(HAVE_NCCL) && defined(HAVE_MPI)
#include <cuda_runtime.h>

#include "common/rng.h"
#include "dist/comm.h"
#include "dist/comm_nccl.h"

/* the frame calls' rounds: rank r contributes lens_r[round][r % 2] + r / 2 bytes (unequal,
 * zero and multi-megabyte) */
static const size_t lens_r[5][2] = {{10, 3}, {0, 5}, {7, 0}, {0, 0}, {5u << 20, 3u << 20}};

static void fill_bytes(uint8_t *p, size_t n, int rank, int round) {
    for (size_t i = 0; i < n; i++) p[i] = (uint8_t)(i * 31 + (size_t)rank * 7 + (size_t)round * 13);
}

/* the sequence on nc (NCCL) and mc (the reference backend of the same world) */
static void sequence(Comm *nc, Comm *mc) {
    int r = nc->rank, N = nc->size;
    CHECK(N == mc->size && r == mc->rank, "rank %d: same world", r);
    /* allreduce f32 / f64 */
    size_t n = 1000003;
    float *a = malloc(n * sizeof(float)), *b = malloc(n * sizeof(float));
    for (int op = 0; op < 2; op++) {
        for (size_t i = 0; i < n; i++) a[i] = b[i] = (float)((i * 7 + (size_t)r * 13) % 1000) * 0.5f - 100.0f;
        comm_allreduce_f32(nc, a, n, op ? COMM_MAX : COMM_SUM);
        comm_allreduce_f32(mc, b, n, op ? COMM_MAX : COMM_SUM);
        CHECK(memcmp(a, b, n * sizeof(float)) == 0, "rank %d: allreduce f32 op %d equals MPI", r, op);
        int ok = 1;
        for (size_t i = 0; i < n && ok; i++) {
            float want = op ? -1e30f : 0.0f;
            for (int k = 0; k < N; k++) {
                float v = (float)((i * 7 + (size_t)k * 13) % 1000) * 0.5f - 100.0f;
                want = op ? (v > want ? v : want) : want + v;
            }
            ok = a[i] == want;
        }
        CHECK(ok, "rank %d: allreduce f32 op %d values", r, op);
    }
    double *da = malloc(1000 * sizeof(double)), *db = malloc(1000 * sizeof(double));
    for (int i = 0; i < 1000; i++) da[i] = db[i] = (double)i * 0.25 + r;
    comm_allreduce_f64(nc, da, 1000, COMM_SUM);
    comm_allreduce_f64(mc, db, 1000, COMM_SUM);
    CHECK(memcmp(da, db, 1000 * sizeof(double)) == 0 && da[4] == N * 1.0 + N * (N - 1) / 2.0,
          "rank %d: allreduce f64", r);
    comm_allreduce_f32(nc, a, 0, COMM_SUM); /* empty */
    comm_allreduce_f32(mc, b, 0, COMM_SUM);
    /* allgatherv: rounds with unequal, zero and large contributions */
    ByteBuf on = {0}, om = {0};
    for (int round = 0; round < 5; round++) {
        size_t len = lens_r[round][r % 2] + (size_t)(r / 2);
        uint8_t *d = malloc(len ? len : 1);
        fill_bytes(d, len, r, round);
        size_t ln[8], lm[8];
        comm_allgatherv(nc, &on, ln, d, len);
        comm_allgatherv(mc, &om, lm, d, len);
        CHECK(on.len == om.len && memcmp(ln, lm, (size_t)N * sizeof(size_t)) == 0 &&
                  (on.len == 0 || memcmp(on.p, om.p, on.len) == 0),
              "rank %d: allgatherv round %d equals MPI (%zu bytes)", r, round, on.len);
        size_t at = 0;
        int ok = 1;
        for (int k = 0; k < N; k++) {
            uint8_t *e = malloc(ln[k] ? ln[k] : 1);
            fill_bytes(e, ln[k], k, round);
            ok &= ln[k] == lens_r[round][k % 2] + (size_t)(k / 2) && memcmp(on.p + at, e, ln[k]) == 0;
            at += ln[k];
            free(e);
        }
        CHECK(ok, "rank %d: allgatherv round %d contents", r, round);
        /* gatherv to every root */
        for (int root = 0; root < N; root++) {
            ByteBuf gn = {0}, gm = {0};
            size_t gl[8] = {0}, gml[8] = {0};
            comm_gatherv(nc, &gn, gl, d, len, root);
            comm_gatherv(mc, &gm, gml, d, len, root);
            if (r == root)
                CHECK(gn.len == gm.len && memcmp(gl, gml, (size_t)N * sizeof(size_t)) == 0 &&
                          (gn.len == 0 || memcmp(gn.p, gm.p, gn.len) == 0),
                      "rank %d: gatherv round %d root %d", r, round, root);
            bytebuf_free(&gn);
            bytebuf_free(&gm);
        }
        /* bcast from every root */
        for (int root = 0; root < N; root++) {
            ByteBuf bn = {0}, bm = {0};
            if (r == root) {
                bytebuf_reserve(&bn, len + 1);
                bytebuf_reserve(&bm, len + 1);
                memcpy(bn.p, d, len);
                memcpy(bm.p, d, len);
                bn.len = bm.len = len;
            }
            comm_bcast(nc, &bn, root);
            comm_bcast(mc, &bm, root);
            CHECK(bn.len == bm.len && (bn.len == 0 || memcmp(bn.p, bm.p, bn.len) == 0),
                  "rank %d: bcast round %d root %d", r, round, root);
            bytebuf_free(&bn);
            bytebuf_free(&bm);
        }
        /* ring sendrecv */
        ByteBuf sn = {0}, sm = {0};
        int dst = (r + 1) % N, src = (r + N - 1) % N;
        comm_sendrecv(nc, &sn, src, d, len, dst);
        comm_sendrecv(mc, &sm, src, d, len, dst);
        size_t want = lens_r[round][src % 2] + (size_t)(src / 2);
        uint8_t *e = malloc(want ? want : 1);
        fill_bytes(e, want, src, round);
        CHECK(sn.len == sm.len && sn.len == want && (want == 0 || (memcmp(sn.p, sm.p, want) == 0 &&
                                                                    memcmp(sn.p, e, want) == 0)),
              "rank %d: sendrecv round %d (%zu bytes)", r, round, sn.len);
        free(e);
        bytebuf_free(&sn);
        bytebuf_free(&sm);
        free(d);
    }
    comm_barrier(nc);
    comm_barrier(mc);
    CHECK(nc->sent == mc->sent && nc->received == mc->received,
          "rank %d: byte accounting nccl %llu/%llu mpi %llu/%llu", r, (unsigned long long)nc->sent,
          (unsigned long long)nc->received, (unsigned long long)mc->sent, (unsigned long long)mc->received);
    CHECK(nc->sent > 0 && nc->received > 0, "rank %d: bytes counted", r);
    bytebuf_free(&on);
    bytebuf_free(&om);
    free(a);
    free(b);
    free(da);
    free(db);
}

/* ---- the frame calls on device buffers (dist/comm.h ByteAlloc.device) ---- */
static void *gpu_alloc(size_t n) {
    void *p = NULL;
    return cudaMalloc(&p, n) == cudaSuccess ? p : NULL;
}
static void gpu_free(void *p) { cudaFree(p); }
static void gpu_copy(void *d, const void *s, size_t n) { cudaMemcpy(d, s, n, cudaMemcpyDeviceToDevice); }
static const ByteAlloc on_gpu = {.alloc = gpu_alloc, .free = gpu_free, .copy = gpu_copy, .device = 1};

static unsigned long long host_copies(void) {
#ifdef EMU_COUNT_COPIES
    return emu_host_copy_bytes;
#else
    return 0;
#endif
}

/* the device buffer's bytes equal the host buffer's */
static int same_on_device(const ByteBuf *dv, const ByteBuf *h) {
    if (dv->len != h->len) return 0;
    if (!h->len) return 1;
    uint8_t *b = malloc(h->len);
    cudaMemcpy(b, dv->p, h->len, cudaMemcpyDeviceToHost);
    int same = memcmp(b, h->p, h->len) == 0;
    free(b);
    return same;
}

static void device_sequence(Comm *nc) {
    int r = nc->rank, N = nc->size;
    unsigned long long lengths = 8 * (unsigned long long)(N + 2); /* the most a call copies: its lengths */
    for (int round = 0; round < 5; round++) {
        size_t len = lens_r[round][r % 2] + (size_t)(r / 2);
        uint8_t *h = malloc(len ? len : 1), *d = NULL;
        fill_bytes(h, len, r, round);
        cudaMalloc((void **)&d, len ? len : 1);
        cudaMemcpy(d, h, len, cudaMemcpyHostToDevice);
        ByteBuf hb = {0}, db = {0};
        db.mem = &on_gpu;
        size_t lh[8], ld[8];
        uint64_t s0 = nc->sent, r0 = nc->received;
        comm_allgatherv(nc, &hb, lh, h, len);
        uint64_t s1 = nc->sent, r1 = nc->received;
        unsigned long long c0 = host_copies();
        comm_allgatherv(nc, &db, ld, d, len);
        unsigned long long copied = host_copies() - c0;
        CHECK(same_on_device(&db, &hb) && memcmp(lh, ld, (size_t)N * sizeof(size_t)) == 0 &&
                  nc->sent - s1 == s1 - s0 && nc->received - r1 == r1 - r0,
              "rank %d: allgatherv round %d on device buffers: the host buffers' bytes and counts", r, round);
        CHECK(copied <= lengths, "rank %d: allgatherv round %d on device buffers copied %llu bytes through the host", r,
              round, copied);
        for (int root = 0; root < N; root++) {
            ByteBuf gh = {0}, gd = {0};
            gd.mem = &on_gpu;
            comm_gatherv(nc, &gh, lh, h, len, root);
            c0 = host_copies();
            comm_gatherv(nc, &gd, ld, d, len, root);
            copied = host_copies() - c0;
            CHECK(r != root || same_on_device(&gd, &gh), "rank %d: gatherv round %d root %d on device buffers", r,
                  round, root);
            CHECK(copied <= lengths, "rank %d: gatherv round %d root %d copied %llu bytes through the host", r, round,
                  root, copied);
            bytebuf_free(&gh);
            bytebuf_free(&gd);
            ByteBuf bh = {0}, bd = {0};
            bd.mem = &on_gpu;
            if (r == root) {
                bytebuf_reserve(&bh, len + 1);
                bytebuf_reserve(&bd, len + 1);
                memcpy(bh.p, h, len);
                cudaMemcpy(bd.p, d, len, cudaMemcpyDeviceToDevice);
                bh.len = bd.len = len;
            }
            comm_bcast(nc, &bh, root);
            c0 = host_copies();
            comm_bcast(nc, &bd, root);
            copied = host_copies() - c0;
            CHECK(same_on_device(&bd, &bh) && copied <= lengths,
                  "rank %d: bcast round %d root %d on device buffers (%llu bytes through the host)", r, round, root,
                  copied);
            bytebuf_free(&bh);
            bytebuf_free(&bd);
        }
        ByteBuf sh = {0}, sd = {0};
        sd.mem = &on_gpu;
        int dst = (r + 1) % N, src = (r + N - 1) % N;
        comm_sendrecv(nc, &sh, src, h, len, dst);
        c0 = host_copies();
        comm_sendrecv(nc, &sd, src, d, len, dst);
        copied = host_copies() - c0;
        CHECK(same_on_device(&sd, &sh) && copied <= lengths,
              "rank %d: sendrecv round %d on device buffers (%llu bytes through the host)", r, round, copied);
        bytebuf_free(&sh);
        bytebuf_free(&sd);
        bytebuf_free(&hb);
        bytebuf_free(&db);
        cudaFree(d);
        free(h);
    }
}

/* one of the ranks under mpirun: NCCL against MPI */
static int child(int *argc, char ***argv) {
    Comm *nc = comm_nccl_new(argc, argv);
    Comm *mc = comm_mpi_new(argc, argv); /* MPI is up: the same world */
    sequence(nc, mc);
    device_sequence(nc);
    comm_free(nc);
    comm_free(mc);
    comm_mpi_finalize();
    TEST_END();
}

/* this process alone (no launcher): a NCCL communicator of one rank, without MPI,
 * against the local backend of one worker */
static void single(int *argc, char ***argv) {
    Comm *nc = comm_nccl_new(argc, argv);
    LocalGroup *g = comm_local_group_new(1);
    Comm *lc = comm_local_new(g, 0);
    CHECK(nc->size == 1 && nc->rank == 0, "one process: a communicator of one rank");
    sequence(nc, lc);
    device_sequence(nc);
    comm_free(nc);
    comm_free(lc);
    comm_local_group_free(g);
}

int main(int argc, char **argv) {
    if (argc == 2 && !strcmp(argv[1], "--child")) return child(&argc, &argv);
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 1) {
        printf("NCCL comm test needs a GPU (found none): skipped\n");
        CHECK(1, "skipped");
        TEST_END();
    }
    if (comm_mpi_launched()) {
        printf("run this test without mpirun (it starts its ranks itself): skipped\n");
        CHECK(1, "skipped");
        TEST_END();
    }
    single(&argc, &argv);
    if (ndev < 2) {
        printf("the 2-rank part needs 2 GPUs (found %d; NCCL allows one rank per GPU), so the point-to-point "
               "transfers between ranks were not checked (2-rank part skipped)\n", ndev);
        TEST_END();
    }
    if (system("command -v mpirun >/dev/null 2>&1") != 0) {
        printf("mpirun missing: the 2-rank part was not checked (2-rank part skipped)\n");
        TEST_END();
    }
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) {
        CHECK(0, "cannot find own path");
        TEST_END();
    }
    self[n] = 0;
    char out[64], cmd[8192];
    snprintf(out, sizeof out, "/tmp/gcx_nccl_out_%d.txt", (int)getpid());
    snprintf(cmd, sizeof cmd,
             "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 "
             "mpirun --oversubscribe -np 2 %s --child > %s 2>&1",
             self, out);
    int rc = system(cmd);
    CHECK(rc == 0, "mpirun -np 2 of the NCCL children (exit %d)", rc);
    FILE *f = fopen(out, "r");
    int results = 0;
    if (f) {
        char line[1024];
        while (fgets(line, sizeof line, f)) {
            int p, q;
            if (sscanf(line, "RESULT %d %d", &p, &q) == 2) {
                test_passed_ += p;
                test_failed_ += q;
                results++;
            } else {
                fputs(line, stdout); /* the children's failures and messages */
            }
        }
        fclose(f);
    }
    CHECK(results == 2, "both ranks reported (%d)", results);
    unlink(out);
    TEST_END();
}

#else
int main(void) {
    printf("built without CUDA, NCCL or MPI: NCCL comm test skipped\n");
    CHECK(1, "skipped");
    TEST_END();
}
#endif
