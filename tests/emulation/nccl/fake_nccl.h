/* NCCL emulated over MPI on host memory (the "device" is host memory) */
#ifndef FAKE_NCCL_H
#define FAKE_NCCL_H
#include <mpi.h>
#include "emu_cuda.h"
typedef enum { ncclSuccess = 0, ncclSystemError = 2 } ncclResult_t;
typedef enum { ncclUint8, ncclUint64, ncclFloat32, ncclFloat64 } ncclDataType_t;
typedef enum { ncclSum, ncclMax } ncclRedOp_t;
typedef struct { char internal[128]; } ncclUniqueId;
typedef struct FakeNccl { MPI_Comm comm; int rank, size; } *ncclComm_t;
#define cudaStreamNonBlocking 1
static inline cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, int f) { (void)f; *s = (cudaStream_t)1; return 0; }
static inline cudaError_t cudaStreamDestroy(cudaStream_t s) { (void)s; return 0; }
static inline cudaError_t cudaSetDevice(int d) { (void)d; return 0; }
static inline const char *cudaGetErrorString(cudaError_t e) { (void)e; return "emu"; }
const char *ncclGetErrorString(ncclResult_t r);
ncclResult_t ncclGetUniqueId(ncclUniqueId *id);
ncclResult_t ncclCommInitRank(ncclComm_t *c, int n, ncclUniqueId id, int rank);
ncclResult_t ncclCommDestroy(ncclComm_t c);
ncclResult_t ncclAllReduce(const void *s, void *r, size_t n, ncclDataType_t t, ncclRedOp_t op, ncclComm_t c, cudaStream_t st);
ncclResult_t ncclAllGather(const void *s, void *r, size_t n, ncclDataType_t t, ncclComm_t c, cudaStream_t st);
ncclResult_t ncclBroadcast(const void *s, void *r, size_t n, ncclDataType_t t, int root, ncclComm_t c, cudaStream_t st);
ncclResult_t ncclSend(const void *s, size_t n, ncclDataType_t t, int peer, ncclComm_t c, cudaStream_t st);
ncclResult_t ncclRecv(void *r, size_t n, ncclDataType_t t, int peer, ncclComm_t c, cudaStream_t st);
ncclResult_t ncclGroupStart(void);
ncclResult_t ncclGroupEnd(void);
#define ncclCheck(x) do { if ((x) != ncclSuccess) { fprintf(stderr, "fake nccl error %s:%d\n", __FILE__, __LINE__); exit(1); } } while (0)
#endif
