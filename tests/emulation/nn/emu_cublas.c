#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include "cublas_v2.h"
#include "cuda_runtime.h"
/* C[m,n] = alpha op(A)[m,k] op(B)[k,n] + beta C, column-major; checks the leading dimensions */
cublasStatus_t cublasSgemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                           const float *alpha, const float *A, int lda, const float *B, int ldb, const float *beta,
                           float *C, int ldc) {
    (void)h;
    int arows = ta == CUBLAS_OP_N ? m : k, brows = tb == CUBLAS_OP_N ? k : n;
    if (m < 0 || n < 0 || k < 0 || lda < (arows > 1 ? arows : 1) || ldb < (brows > 1 ? brows : 1) || ldc < (m > 1 ? m : 1)) {
        fprintf(stderr, "emu cublasSgemm: bad sizes m %d n %d k %d lda %d ldb %d ldc %d (ta %d tb %d)\n", m, n, k, lda, ldb, ldc, ta, tb);
        exit(1);
    }
    emu_dev_check(A, "cublasSgemm's A"), emu_dev_check(B, "cublasSgemm's B"), emu_dev_check(C, "cublasSgemm's C");
    EMU_DEV_OPEN(A, B, C);
    for (int j = 0; j < n; j++)
        for (int i = 0; i < m; i++) {
            float s = 0.0f;
            for (int l = 0; l < k; l++) {
                float a = ta == CUBLAS_OP_N ? A[i + (size_t)l * lda] : A[l + (size_t)i * lda];
                float b = tb == CUBLAS_OP_N ? B[l + (size_t)j * ldb] : B[j + (size_t)l * ldb];
                s = fmaf(a, b, s);
            }
            float *c = &C[i + (size_t)j * ldc];
            *c = *beta == 0.0f ? *alpha * s : fmaf(*beta, *c, *alpha * s);
        }
    emu_dev_close();
    return 0;
}
