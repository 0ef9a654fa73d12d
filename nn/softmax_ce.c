/* Softmax cross-entropy (see softmax_ce.h).
 * Shape letters: N rows, V classes. No parameters; dlogits is OVERWRITTEN. */
#include "nn/softmax_ce.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/check.h"
#include "nn/parallel.h"

static void check_targets(const int *targets /*N*/, int N, int V) {
    for (int n = 0; n < N; n++) {
        if (targets[n] < 0 || targets[n] >= V) {
            gc_fatal("error: softmax_ce: target[%d] = %d outside [0, %d)\n", n, targets[n], V);
        }
    }
}

float softmax_ce_forward(float *probs /*N,V*/, long *correct, const float *logits /*N,V*/,
                         const int *targets /*N*/, int N, int V) {
    if (N <= 0) {
        if (correct) *correct = 0;
        return 0.0f;
    }
    check_targets(targets, N, V);
    double loss = 0.0;
    long hits = 0;
#ifdef HAVE_OPENMP
#pragma omp parallel for schedule(static) reduction(+ : loss, hits)
#endif
    for (int n = 0; n < N; n++) {
        const float *x = logits + (size_t)n * V;
        float *p = probs + (size_t)n * V;
        float mx = x[0];
        int arg = 0;
        for (int v = 1; v < V; v++)
            if (x[v] > mx) {
                mx = x[v];
                arg = v;
            }
        double sum = 0.0;
        for (int v = 0; v < V; v++) {
            p[v] = expf(x[v] - mx);
            sum += p[v];
        }
        float inv = (float)(1.0 / sum);
        for (int v = 0; v < V; v++) p[v] *= inv;
        /* -log softmax(x)[t] = log(sum exp(x - mx)) - (x[t] - mx) */
        loss += log(sum) - ((double)x[targets[n]] - mx);
        hits += (arg == targets[n]);
    }
    if (correct) *correct = hits;
    return (float)(loss / N);
}

void softmax_ce_backward(float *dlogits /*N,V, overwritten*/, const float *probs /*N,V*/,
                         const int *targets /*N*/, float scale /*usually 1/N*/, int N, int V) {
    if (N <= 0) return;
    check_targets(targets, N, V);
    /* forward: loss = scale * sum_n -log p[n, t_n], p = softmax(logits)
     * dlogits[n,v] = scale * (p[n,v] - [v == t_n]) */
    OMP_FOR
    for (int n = 0; n < N; n++) {
        const float *p = probs + (size_t)n * V;
        float *d = dlogits + (size_t)n * V;
        for (int v = 0; v < V; v++) d[v] = scale * p[v];
        d[targets[n]] -= scale;
    }
}
