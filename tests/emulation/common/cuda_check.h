#include "emu_cuda.h"
