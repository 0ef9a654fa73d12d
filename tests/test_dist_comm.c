/* Local backend collectives: results, determinism and byte accounting, with 4
 * worker threads. (The MPI backend is checked against these by
 * test_dist_mpi.) And stall detection: with a timeout, a worker that never
 * arrives ends the process with one message naming it (in a child process).
 * And a ByteBuf with its own allocator (the device exchange's page-locked
 * bundles): grown through it, its bytes kept, freed through it. */
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

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

/* worker 2 never comes to its second allreduce (asleep far longer than the timeout) */
static void staller(int rank, void *arg) {
    (void)arg;
    Comm *c = comm_local_new(group, rank);
    c->timeout = 0.5;
    c->step = 7;
    double v = 1;
    comm_allreduce_f64(c, &v, 1, COMM_SUM);
    if (rank == 2) sleep(30);
    comm_allreduce_f64(c, &v, 1, COMM_SUM);
    comm_free(c);
}

static void test_stall(void) {
    int fd[2];
    if (pipe(fd) != 0) return;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fd[1], 2);
        group = comm_local_group_new(W);
        comm_local_run(W, staller, NULL);
        _exit(0); /* not reached: the stall ends the process */
    }
    close(fd[1]);
    char err[1024];
    ssize_t n = read(fd[0], err, sizeof err - 1), m;
    while (n >= 0 && n < (ssize_t)sizeof err - 1 && (m = read(fd[0], err + n, sizeof err - 1 - (size_t)n)) > 0) n += m;
    err[n > 0 ? n : 0] = 0;
    close(fd[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    int lines = 0;
    for (char *p = err; *p; p++) lines += *p == '\n';
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 1 && lines == 1 &&
              strstr(err, "step 7: allreduce: worker 2 did not arrive within 0.5 s") && secs < 10,
          "a stalled worker: exit 1 after %.1f s with one message naming it (status %d): %s", secs, st, err);
}

/* the whole process stopped (SIGSTOP, as by Ctrl-Z) for longer than the timeout while
 * workers 0-2 wait for worker 3, then continued: not a stall; the run goes on */
static void paused(int rank, void *arg) {
    (void)arg;
    Comm *c = comm_local_new(group, rank);
    c->timeout = 0.5;
    double v = 1;
    if (rank == W - 1) nanosleep(&(struct timespec){0, 300000000L}, NULL);
    comm_allreduce_f64(c, &v, 1, COMM_SUM);
    if (v != W) _exit(3);
    comm_free(c);
}

static void test_pause(void) {
    int fd[2];
    if (pipe(fd) != 0) return;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fd[1], 2);
        group = comm_local_group_new(W);
        comm_local_run(W, paused, NULL);
        comm_local_group_free(group);
        _exit(0);
    }
    close(fd[1]);
    nanosleep(&(struct timespec){0, 100000000L}, NULL);
    kill(pid, SIGSTOP);
    sleep(2);
    kill(pid, SIGCONT);
    char err[1024];
    ssize_t n = read(fd[0], err, sizeof err - 1);
    err[n > 0 ? n : 0] = 0;
    close(fd[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0 && !err[0],
          "stopped for 2 s with a 0.5 s timeout, then continued: the run goes on (status %d): %s", st, err);
}

/* an allocator that counts its live blocks and marks them, as cudaMallocHost's stand-in */
static int live_blocks, allocs;
static void *count_alloc(size_t bytes) {
    live_blocks++;
    allocs++;
    uint8_t *p = malloc(bytes + 1);
    p[0] = 0xB5;
    return p + 1;
}
static void count_free(void *p) {
    if (!p) return;
    live_blocks--;
    CHECK(((uint8_t *)p)[-1] == 0xB5, "the allocator frees only its own blocks");
    free((uint8_t *)p - 1);
}

static void test_allocator(void) {
    static const ByteAlloc counting = {.alloc = count_alloc, .free = count_free};
    ByteBuf b = {0};
    b.mem = &counting;
    bytebuf_reserve(&b, 10);
    for (int i = 0; i < 10; i++) b.p[i] = (uint8_t)(i * 3);
    b.len = 10;
    bytebuf_reserve(&b, 5000); /* beyond the first block (4096): a new one, the bytes copied */
    int kept = 1;
    for (int i = 0; i < 10; i++) kept &= b.p[i] == (uint8_t)(i * 3);
    CHECK(kept && b.len == 10 && b.cap >= 5000, "growing through the allocator keeps the bytes (cap %zu)", b.cap);
    CHECK(allocs == 2 && live_blocks == 1, "both blocks from the allocator, the old one freed (%d made, %d live)",
          allocs, live_blocks);
    bytebuf_free(&b);
    CHECK(live_blocks == 0 && b.p == NULL && b.cap == 0 && b.mem == &counting,
          "freed through the allocator, which the empty buffer keeps (%d live)", live_blocks);
    bytebuf_reserve(&b, 1);
    CHECK(allocs == 3 && live_blocks == 1, "and used again");
    bytebuf_free(&b);
}

int main(void) {
    test_allocator();
    group = comm_local_group_new(W);
    comm_local_run(W, worker, NULL);
    comm_local_group_free(group);
    for (int r = 0; r < W; r++) CHECK(fails[r] == 0, "rank %d had %d failed expectations", r, fails[r]);
    test_stall();
    test_pause();
    TEST_END();
}
