/* The host side that the GPU models share (see nn/model_cuda.h); their device side is
 * nn/model_cuda.cu. */
#include "nn/model_cuda.h"

#include <stdlib.h>

#ifdef HAVE_CUDA

void cuda_model_free_host(Model *m) {
    cuda_host_arena_free(m->params);
    cuda_host_arena_free(m->grads);
    cuda_host_arena_free(m->state);
    param_table_free(&m->pt);
    free(m);
}

#endif
