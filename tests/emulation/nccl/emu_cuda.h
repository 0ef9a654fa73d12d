/* The emulator header with two devices (one per MPI rank of the NCCL tests). */
#define EMU_DEVICE_COUNT 2
#include "../emu_cuda.h"
