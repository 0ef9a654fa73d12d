#include "fake_nccl.h"
