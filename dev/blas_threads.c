/* Scratch probe: does OpenBLAS's sgemm give the same bits at 1 and 2 threads on
 * LeNet's fully connected shapes (nn/linear.c's three calls, batch 128)?
 *
 *   cc -std=c11 -O2 -fopenmp -I/usr/include/x86_64-linux-gnu/openblas-openmp dev/blas_threads.c \
 *      -L/usr/lib/x86_64-linux-gnu/openblas-openmp -Wl,-rpath,/usr/lib/x86_64-linux-gnu/openblas-openmp \
 *      -lopenblas -o build/blas_threads && build/blas_threads
 *
 * The trainer sets each worker's OpenMP threads (omp_set_num_threads, examples/trainer.c),
 * which OpenBLAS's OpenMP build follows, as this probe does. With Debian's OpenBLAS 0.3.21
 * on an AMD EPYC (2 cores), every shape differs in 8% to 79% of its outputs (largest
 * 5.3e-6): why a LeNet run whose workers have 2 threads (a rank alone on its host under
 * mpirun) leaves the bits of one whose workers have 1 (4 local workers on 2 cores);
 * docs/REPRODUCING.md, docs/DIST.md (Determinism). Inputs: uniform in [-0.5, 0.5). */
#include <cblas.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void fill(float *a /*n*/, size_t n, unsigned s) {
    for (size_t i = 0; i < n; i++) {
        s = s * 1103515245u + 12345u;
        a[i] = (float)((s >> 8) & 0xffff) / 65536.0f - 0.5f;
    }
}

/* C[M,N] = op(A) op(B), once with 1 thread and once with 2; prints how many differ */
static void probe(const char *what, int ta, int tb, int M, int N, int K) {
    float *A = malloc(sizeof(float) * (size_t)M * K), *B = malloc(sizeof(float) * (size_t)K * N);
    float *C1 = calloc((size_t)M * N, sizeof(float)), *C2 = calloc((size_t)M * N, sizeof(float));
    if (!A || !B || !C1 || !C2) exit(1);
    fill(A, (size_t)M * K, 1);
    fill(B, (size_t)K * N, 2);
    int lda = ta ? M : K, ldb = tb ? K : N;
    float *C[2] = {C1, C2};
    for (int t = 0; t < 2; t++) {
        omp_set_num_threads(t + 1);
        cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N, K, 1.0f,
                    A, lda, B, ldb, 0.0f, C[t], N);
    }
    size_t d = 0;
    float mx = 0.0f;
    for (size_t i = 0; i < (size_t)M * N; i++)
        if (memcmp(&C1[i], &C2[i], sizeof(float))) {
            d++;
            float e = C1[i] > C2[i] ? C1[i] - C2[i] : C2[i] - C1[i];
            if (e > mx) mx = e;
        }
    printf("%-18s M=%3d N=%3d K=%3d: %6zu of %6d outputs differ between 1 and 2 threads, largest %.3g\n", what, M,
           N, K, d, M * N, mx);
    free(A), free(B), free(C1), free(C2);
}

int main(void) {
    probe("fc1 forward", 0, 1, 128, 500, 800);
    probe("fc1 dw", 1, 0, 500, 800, 128);
    probe("fc1 dinp", 0, 0, 128, 800, 500);
    probe("fc2 forward", 0, 1, 128, 10, 500);
    probe("fc2 dw", 1, 0, 10, 500, 128);
    probe("fc2 dinp", 0, 0, 128, 500, 10);
    return 0;
}
