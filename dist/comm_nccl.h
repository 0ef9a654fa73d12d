/* NCCL backend of the communicator (dist/comm.h): one GPU per process, the
 * processes started by mpirun and bootstrapped through MPI (rank 0 makes the
 * ncclUniqueId and broadcasts it; each process uses the GPU of its local rank
 * on its node). The Comm works on HOST buffers like every backend (the
 * distributed layer keeps host arenas): each call stages through device
 * buffers and runs ncclAllReduce, ncclAllGather (frame sizes), grouped
 * ncclSend/ncclRecv (frames, ring hops) and ncclBroadcast on its own stream.
 * The frame calls (allgatherv, gatherv, bcast, sendrecv) also take ByteBufs in
 * DEVICE memory (dist/comm.h ByteAlloc.device, with the call's data on the
 * device too): the device exchange's bundles go from and into them directly.
 * Byte accounting is identical to comm_local.c / comm_mpi.c (docs/DIST.md).
 *
 * Built with CUDA, NCCL and MPI (HAVE_CUDA, HAVE_NCCL, HAVE_MPI); otherwise
 * comm_nccl_available() is 0 and comm_nccl_new prints how to rebuild and exits.
 */
#ifndef GC_COMM_NCCL_H
#define GC_COMM_NCCL_H

#include "dist/comm.h"

/* 1 when this build has the NCCL backend */
int comm_nccl_available(void);
/* Under an MPI launcher (or with MPI already initialized): initializes MPI if
 * needed (MPI_Init_thread), selects the GPU of the process's local rank on its node
 * (the only GPU when each process is shown just one) and creates the NCCL
 * communicator over MPI_COMM_WORLD. Otherwise (a plain process): a communicator of
 * one rank on GPU 0, without MPI. Exits with a message (MPI_Abort under MPI) when a
 * rank has no GPU of its own; any CUDA, NCCL or MPI error in a later call also
 * ends the whole job. Free with comm_free; finalize MPI with comm_mpi_finalize
 * (harmless without MPI). */
Comm *comm_nccl_new(int *argc, char ***argv);
/* The sum over all ranks of a DEVICE buffer, in place (ncclAllReduce on it, no
 * staging; the device exchange of dist/exchange_cuda.h): collective, counted
 * as comm_allreduce_f32. Synchronizes the device first (the caller's kernels
 * on its own stream) and its stream after. 0, or -1 when c is not
 * an NCCL Comm (nothing done).  dbuf: [n] device */
int comm_nccl_allreduce_dev(Comm *c, float *dbuf, size_t n);

#endif
