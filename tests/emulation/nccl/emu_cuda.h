/* The emulator header with two devices (one per MPI rank of the NCCL tests). */
#define EMU_DEVICE_COUNT 2
#define EMU_COUNT_COPIES 1
/* dist/comm_nccl.c's copies may touch the trainers' tracked device memory (the device
 * exchange's bundles): fake_nccl.c opens it around them */
#include <stddef.h>
void *emu_nccl_memmove(void *d, const void *s, size_t n);
#define EMU_MEMMOVE emu_nccl_memmove
#include "../emu_cuda.h"
