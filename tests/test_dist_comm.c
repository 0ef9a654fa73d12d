/* Local backend collectives: results, determinism and byte accounting, with 4
 * worker threads. (The MPI backend is checked against these by
 * test_dist_mpi.) */
#include <pthread.h>

#include "dist/comm.h"
#include "tests/test.h"

#define W 4
static LocalGroup *group;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int fails[W];

#define EXPECT(cond) do { if (!(cond)) { pthread_mutex_lock(&lock); fails[rank]++; pthread_mutex_unlock(&lock); } } while (0)

static void worker(int rank, void *arg) {
    (void)arg;
    Comm *c = comm_local_new(group, rank);
    EXPECT(c->rank == rank && c->size == W);
    /* allreduce sum and max */
    float v[1001];
    for (int i = 0; i < 1001; i++) v[i] = (float)(rank + 1) * (float)i;
    comm_allreduce_f32(c, v, 1001, COMM_SUM);
    for (int i = 0; i < 1001; i++) EXPECT(v[i] == 10.0f * (float)i);
    for (int i = 0; i < 1001; i++) v[i] = (float)((rank * 7 + i) % 5);
    comm_allreduce_f32(c, v, 1001, COMM_MAX);
    for (int i = 0; i < 1001; i++) {
        float m = 0;
        for (int r = 0; r < W; r++) m = (float)((r * 7 + i) % 5) > m ? (float)((r * 7 + i) % 5) : m;
        EXPECT(v[i] == m);
    }
    double d[3] = {rank, 1, -rank};
    comm_allreduce_f64(c, d, 3, COMM_SUM);
    EXPECT(d[0] == 6 && d[1] == 4 && d[2] == -6);
    uint64_t s0 = c->sent, r0 = c->received;
    /* allgatherv of rank-dependent sizes (rank 2 sends nothing) */
    uint8_t mine[16];
    size_t len = rank == 2 ? 0 : (size_t)(rank + 3);
    for (size_t i = 0; i < len; i++) mine[i] = (uint8_t)(rank * 16 + i);
    ByteBuf out = {0};
    size_t lens[W];
    comm_allgatherv(c, &out, lens, mine, len);
    size_t at = 0, others = 0;
    for (int r = 0; r < W; r++) {
        size_t want = r == 2 ? 0 : (size_t)(r + 3);
        EXPECT(lens[r] == want);
        for (size_t i = 0; i < lens[r]; i++) EXPECT(out.p[at + i] == (uint8_t)(r * 16 + i));
        at += lens[r];
        if (r != rank) others += want;
    }
    EXPECT(out.len == at);
    EXPECT(c->sent - s0 == len * (W - 1) && c->received - r0 == others);
    /* gather to root 1 */
    s0 = c->sent;
    r0 = c->received;
    comm_gatherv(c, &out, lens, mine, len, 1);
    if (rank == 1) {
        EXPECT(out.len == 3 + 4 + 0 + 6);
        EXPECT(c->received - r0 == 3 + 0 + 6 && c->sent == s0);
    } else {
        EXPECT(c->sent - s0 == len && c->received == r0);
    }
    /* broadcast from root 3 */
    ByteBuf b = {0};
    if (rank == 3) {
        bytebuf_reserve(&b, 5);
        memcpy(b.p, "hello", 5);
        b.len = 5;
    }
    comm_bcast(c, &b, 3);
    EXPECT(b.len == 5 && memcmp(b.p, "hello", 5) == 0);
    /* ring: send to rank+1, receive from rank-1 */
    uint8_t tok = (uint8_t)(100 + rank);
    comm_sendrecv(c, &out, (rank + W - 1) % W, &tok, 1, (rank + 1) % W);
    EXPECT(out.len == 1 && out.p[0] == (uint8_t)(100 + (rank + W - 1) % W));
    comm_barrier(c);
    bytebuf_free(&out);
    bytebuf_free(&b);
    comm_free(c);
}

int main(void) {
    group = comm_local_group_new(W);
    comm_local_run(W, worker, NULL);
    comm_local_group_free(group);
    for (int r = 0; r < W; r++) CHECK(fails[r] == 0, "rank %d had %d failed expectations", r, fails[r]);
    TEST_END();
}
