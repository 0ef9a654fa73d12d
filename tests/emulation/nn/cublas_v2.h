/* host emulation of the cuBLAS calls used by nn/: a column-major reference sgemm */
#ifndef EMU_CUBLAS_H
#define EMU_CUBLAS_H
typedef void *cublasHandle_t;
typedef int cublasStatus_t;
typedef enum { CUBLAS_OP_N, CUBLAS_OP_T } cublasOperation_t;
enum { CUBLAS_STATUS_SUCCESS = 0, CUBLAS_POINTER_MODE_HOST = 0, CUBLAS_DEFAULT_MATH = 0, CUBLAS_TF32_TENSOR_OP_MATH = 3 };
#ifdef __cplusplus
extern "C" {
#endif
cublasStatus_t cublasSgemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                           const float *alpha, const float *A, int lda, const float *B, int ldb, const float *beta,
                           float *C, int ldc);
#ifdef __cplusplus
}
#endif
static inline cublasStatus_t cublasCreate(cublasHandle_t *h) { *h = (void *)1; return 0; }
static inline cublasStatus_t cublasDestroy(cublasHandle_t h) { (void)h; return 0; }
static inline cublasStatus_t cublasSetStream(cublasHandle_t h, void *s) { (void)h; (void)s; return 0; }
static inline cublasStatus_t cublasSetPointerMode(cublasHandle_t h, int m) { (void)h; (void)m; return 0; }
static inline cublasStatus_t cublasSetMathMode(cublasHandle_t h, int m) { (void)h; (void)m; return 0; }
static inline const char *cublasGetStatusString(cublasStatus_t s) { (void)s; return "emulated cublas error"; }
#endif
