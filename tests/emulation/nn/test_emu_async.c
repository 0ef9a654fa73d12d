/* The emulation's ordering checks (emu_device.c). Asynchronous copies through page-locked
 * memory: a host that reuses a cudaMemcpyAsync's page-locked source, or touches its
 * destination, before waiting for the stream must stop the run with the copy's caller
 * named; legal uses (the wait first, pageable memory, copies in stream order) must run and
 * give the copied bytes. Two host threads' streams: an operation on memory that the other
 * thread's stream wrote (or, to write it, read) with no wait for that stream since must
 * stop the run; after the wait, or when both only read, it runs. Each case runs in a child
 * process (a caught misuse aborts it). */
#include <pthread.h>
#include <signal.h>
#include "../child.h"
#include "cuda_runtime.h"
#include "../../test.h"

#define N 64
static float *dev, *dev2;
static float *pin;

/* a failed value check in the child: its message, exit status 3 */
#define WANT(cond, ...)                                                                   \
    do {                                                                                  \
        if (!(cond)) { fprintf(stderr, "value: " __VA_ARGS__); fputc('\n', stderr); exit(3); } \
    } while (0)

static void setup(void) {
    cudaMalloc((void **)&dev, N * sizeof(float));
    cudaMalloc((void **)&dev2, N * sizeof(float));
    cudaMallocHost((void **)&pin, N * sizeof(float));
    float h[N];
    for (int i = 0; i < N; i++) h[i] = (float)i;
    cudaMemcpy(dev, h, sizeof h, cudaMemcpyHostToDevice);
    cudaStreamSynchronize(0); /* a copy from pageable memory may still run when it returns */
}

/* misuse: the source rewritten before the wait */
static void write_source_early(void) {
    for (int i = 0; i < N; i++) pin[i] = 1.0f;
    cudaMemcpyAsync(dev2, pin, N * sizeof(float), cudaMemcpyHostToDevice, 0);
    pin[3] = 2.0f;
    cudaStreamSynchronize(0);
}

/* legal: the source rewritten after the wait; the device holds what was sent */
static void write_source_after_wait(void) {
    for (int i = 0; i < N; i++) pin[i] = 1.0f;
    cudaMemcpyAsync(dev2, pin, N * sizeof(float), cudaMemcpyHostToDevice, 0);
    cudaStreamSynchronize(cudaStreamPerThread); /* the same stream as 0 */
    pin[3] = 2.0f;
    float h[N];
    cudaMemcpy(h, dev2, sizeof h, cudaMemcpyDeviceToHost);
    WANT(h[3] == 1.0f, "the device got %g, not 1", h[3]);
}

/* misuse: the destination read before the wait sees no copied bytes (0xFF: a NaN) */
static void read_destination_early(void) {
    cudaMemcpyAsync(pin, dev, N * sizeof(float), cudaMemcpyDeviceToHost, 0);
    WANT(pin[5] == 5.0f, "read %g before the wait, not 5", pin[5]);
}

/* legal: the destination read after the wait */
static void read_destination_after_wait(void) {
    cudaMemcpyAsync(pin, dev, N * sizeof(float), cudaMemcpyDeviceToHost, 0);
    cudaDeviceSynchronize();
    WANT(pin[5] == 5.0f, "read %g after the wait, not 5", pin[5]);
}

/* misuse: the destination written before the wait (the copy may land after it) */
static void write_destination_early(void) {
    cudaMemcpyAsync(pin, dev, N * sizeof(float), cudaMemcpyDeviceToHost, 0);
    pin[0] = 7.0f;
    cudaStreamSynchronize(0);
}

/* misuse: the memory freed with a copy pending */
static void free_early(void) {
    cudaMemcpyAsync(dev2, pin, N * sizeof(float), cudaMemcpyHostToDevice, 0);
    cudaFreeHost(pin);
}

/* legal: a wait on another stream does not wait for stream 0, a synchronous copy does */
static void other_stream_then_sync_copy(void) {
    cudaMemcpyAsync(pin, dev, N * sizeof(float), cudaMemcpyDeviceToHost, 0);
    cudaStreamSynchronize((cudaStream_t)0x77);
    WANT(isnan(pin[1]), "stream 0's copy landed at another stream's wait: %g", pin[1]);
    float h[N];
    cudaMemcpy(h, dev2, sizeof h, cudaMemcpyDeviceToHost);
    WANT(pin[1] == 1.0f, "a synchronous copy on the stream did not land it: %g", pin[1]);
}

/* legal: to the host, then from the same bytes to the device, in stream order */
static void stream_order(void) {
    cudaMemcpyAsync(pin, dev, N * sizeof(float), cudaMemcpyDeviceToHost, 0);
    cudaMemcpyAsync(dev2, pin, N * sizeof(float), cudaMemcpyHostToDevice, 0);
    cudaStreamSynchronize(0);
    float h[N];
    cudaMemcpy(h, dev2, sizeof h, cudaMemcpyDeviceToHost);
    WANT(h[9] == 9.0f && pin[9] == 9.0f, "got %g and %g, not 9", h[9], pin[9]);
}

/* legal: pageable memory is staged (to the device) or waited for (to the host) */
static void pageable(void) {
    float h[N];
    for (int i = 0; i < N; i++) h[i] = 3.0f;
    cudaMemcpyAsync(dev2, h, sizeof h, cudaMemcpyHostToDevice, 0);
    h[0] = 4.0f;
    cudaMemcpyAsync(h, dev, sizeof h, cudaMemcpyDeviceToHost, 0);
    WANT(h[2] == 2.0f, "pageable destination %g, not 2", h[2]);
}

/* ---- two host threads, one after the other: a's operations, then b's ---- */
static void *run_fn(void *f) {
    ((void (*)(void))f)();
    return NULL;
}
static void two_threads(void (*a)(void), void (*b)(void)) {
    pthread_t t;
    pthread_create(&t, NULL, run_fn, (void *)a);
    pthread_join(t, NULL);
    pthread_create(&t, NULL, run_fn, (void *)b);
    pthread_join(t, NULL);
}
static float *dev3;
static void write_dev(void) { cudaMemset(dev, 0, N * sizeof(float)); }
static void write_dev_wait(void) {
    write_dev();
    cudaStreamSynchronize(0);
}
static void write_dev_read_back(void) { /* a synchronous copy to the host waits for the stream */
    write_dev();
    float h[N];
    cudaMemcpy(h, dev2, sizeof h, cudaMemcpyDeviceToHost);
}
static void read_dev(void) { cudaMemcpy(dev2, dev, N * sizeof(float), cudaMemcpyDeviceToDevice); }
static void read_dev_too(void) {
    cudaMalloc((void **)&dev3, N * sizeof(float));
    cudaMemcpy(dev3, dev, N * sizeof(float), cudaMemcpyDeviceToDevice);
}
static void sync_device_read_dev(void) {
    cudaDeviceSynchronize();
    read_dev();
}
static void free_dev(void) { cudaFreeAsync(dev, 0); }
static void write_dev_wait_other(void) { /* a wait for another stream of the thread's */
    write_dev();
    cudaStreamSynchronize((cudaStream_t)0x77);
}
static void upload_pageable(void) { /* returns once the bytes are staged, maybe before they land */
    float h[N] = {0};
    cudaMemcpy(dev, h, sizeof h, cudaMemcpyHostToDevice);
}
static void upload_pinned(void) { /* returns once the copy has run */
    cudaMemcpy(dev, pin, N * sizeof(float), cudaMemcpyHostToDevice);
}

static void streams_write_then_read(void) { two_threads(write_dev, read_dev); }
static void streams_wait_then_read(void) { two_threads(write_dev_wait, read_dev); }
static void streams_copy_back_then_read(void) { two_threads(write_dev_read_back, read_dev); }
static void streams_read_then_write(void) { two_threads(read_dev, write_dev); }
static void streams_read_both(void) { two_threads(read_dev, read_dev_too); }
static void streams_device_sync(void) { two_threads(write_dev, sync_device_read_dev); }
static void streams_free(void) { two_threads(write_dev, free_dev); }
static void streams_other_wait(void) { two_threads(write_dev_wait_other, read_dev); }
static void streams_upload_pageable(void) { two_threads(upload_pageable, read_dev); }
static void streams_upload_pinned(void) { two_threads(upload_pinned, read_dev); }

typedef struct {
    const char *name;
    void (*run)(void);
    const char *expect; /* in the abort's message; NULL: legal */
    int status;         /* a legal case's exit status, or the value check's 3 */
} Case;

static const Case cases[] = {
    {"the source rewritten before the wait", write_source_early,
     "the host wrote 256 bytes of page-locked memory", 0},
    {"the source rewritten after the wait", write_source_after_wait, NULL, 0},
    {"the destination read before the wait", read_destination_early, NULL, 3},
    {"the destination read after the wait", read_destination_after_wait, NULL, 0},
    {"the destination written before the wait", write_destination_early, "into them, issued by write_destination_early",
     0},
    {"freed with a copy pending", free_early, "the host freed 256 bytes", 0},
    {"another stream's wait, then a synchronous copy", other_stream_then_sync_copy, NULL, 0},
    {"to the host and back in stream order", stream_order, NULL, 0},
    {"pageable memory", pageable, NULL, 0},
    {"another stream reads what one wrote, with no wait", streams_write_then_read,
     "a copy on the device on host thread 2's stream uses device memory", 0},
    {"another stream reads what one wrote, after its wait", streams_wait_then_read, NULL, 0},
    {"another stream reads what one wrote, after its copy to the host", streams_copy_back_then_read, NULL, 0},
    {"another stream writes what one read, with no wait", streams_read_then_write,
     "that host thread 1's stream read in an operation the host has not waited for", 0},
    {"two streams read the same memory", streams_read_both, NULL, 0},
    {"another thread waits for the whole device, then reads", streams_device_sync, NULL, 0},
    {"another stream frees what one wrote, with no wait", streams_free, "cudaFreeAsync on host thread 2's stream", 0},
    {"another stream reads what one wrote, after a wait for a third stream", streams_other_wait,
     "that host thread 1's stream wrote", 0},
    {"another stream reads an upload from pageable memory", streams_upload_pageable,
     "that host thread 1's stream wrote", 0},
    {"another stream reads an upload from page-locked memory", streams_upload_pinned, NULL, 0},
};

static void child_body(const void *p) {
    setup();
    ((const Case *)p)->run();
}

int main(void) {
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const Case *c = &cases[i];
        char msg[4096];
        int st = emu_run_child(child_body, c, msg, sizeof msg);
        if (!c->expect)
            CHECK(WIFEXITED(st) && WEXITSTATUS(st) == c->status && (c->status || !msg[0]),
                  "%s: want exit status %d; status 0x%x, stderr: %s", c->name, c->status, st, msg);
        else
            CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT && strstr(msg, c->expect),
                  "%s: want an abort with \"%s\"; status 0x%x, stderr: %s", c->name, c->expect, st, msg);
    }
    TEST_END();
}
