/* Token embedding (see embedding.h).
 * Shape letters: N tokens, V vocabulary, E embedding size.
 * The parameter gradient dw ACCUMULATES (+=). */
#include "nn/embedding.h"

#include <string.h>

#include "common/errors.h"
#include "nn/parallel.h"

int embedding_check_tokens(const int *tokens /*N*/, int N, int V) {
    for (int n = 0; n < N; n++)
        if (tokens[n] < 0 || tokens[n] >= V) return n;
    return -1;
}

int embedding_forward(float *out /*N,E*/, const int *tokens /*N*/, const float *w /*V,E*/, int N, int V, int E) {
    if (N < 0 || V <= 0 || E <= 0) return -GC_ERR_PARAM;
    if (embedding_check_tokens(tokens, N, V) >= 0) return -GC_ERR_PARAM;
    OMP_FOR
    for (int n = 0; n < N; n++) memcpy(out + (size_t)n * E, w + (size_t)tokens[n] * E, (size_t)E * sizeof(float));
    return 0;
}

int embedding_backward(float *dw /*V,E, +=*/, const float *dout /*N,E*/, const int *tokens /*N*/, int N, int V,
                       int E) {
    if (N < 0 || V <= 0 || E <= 0) return -GC_ERR_PARAM;
    if (embedding_check_tokens(tokens, N, V) >= 0) return -GC_ERR_PARAM;
    /* forward: out[n, e] = w[tokens[n], e]
     * => dw[v, e] += sum over n with tokens[n] == v of dout[n, e].
     * Rows of one token collide, so parallelise over the E columns instead of
     * the N rows: each thread owns a column range of every row of dw, and the
     * sum over n runs in token order whatever the thread count (deterministic). */
#ifdef HAVE_OPENMP
#pragma omp parallel if ((long)N * E > 65536)
#endif
    {
        int nt = 1, id = 0;
#ifdef HAVE_OPENMP
        nt = omp_get_num_threads();
        id = omp_get_thread_num();
#endif
        int e0 = (int)((long)E * id / nt), e1 = (int)((long)E * (id + 1) / nt);
        for (int n = 0; n < N; n++) {
            float *d = dw + (size_t)tokens[n] * E;
            const float *g = dout + (size_t)n * E;
            for (int e = e0; e < e1; e++) d[e] += g[e];
        }
    }
    return 0;
}
