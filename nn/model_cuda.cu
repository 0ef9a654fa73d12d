/* Host/device arena mirror of the GPU models (see nn/model_cuda.h). */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "common/cuda_check.h"
#include "nn/model_cuda.h"

static double wall(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

extern "C" int cuda_dev_alloc(void **p, size_t bytes, const char *what) {
    *p = NULL;
    cudaError_t e = cudaMalloc(p, bytes ? bytes : 16);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        size_t fr = 0, tot = 0;
        (void)cudaMemGetInfo(&fr, &tot);
        (void)cudaGetLastError();
        fprintf(stderr, "error: cannot allocate %zu bytes of GPU memory for %s: %s (%zu of %zu bytes free)\n", bytes,
                what, cudaGetErrorString(e), fr, tot);
        *p = NULL;
        return -1;
    }
    cudaCheck(cudaMemset(*p, 0, bytes ? bytes : 16));
    return 0;
}

extern "C" void *cuda_host_alloc(size_t bytes) {
    void *p = NULL;
    cudaError_t e = cudaMallocHost(&p, bytes ? bytes : 1);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        fprintf(stderr, "error: cannot allocate %zu bytes of page-locked host memory: %s\n", bytes,
                cudaGetErrorString(e));
        return NULL;
    }
    return p;
}

extern "C" void cuda_host_free(void *p) {
    if (p) cudaCheck(cudaFreeHost(p));
}

extern "C" float *cuda_host_arena_alloc(size_t n) {
    size_t bytes = (n ? n : 1) * sizeof(float);
    void *p = cuda_host_alloc(bytes);
    if (p) memset(p, 0, bytes);
    return (float *)p;
}

extern "C" void cuda_host_arena_free(float *p) { cuda_host_free(p); }

extern "C" int cuda_mirror_init(CudaMirror *mr, const Model *m) {
    memset(mr, 0, sizeof *mr);
    mr->total = m->pt.total;
    mr->nstate = m->nstate;
    if (cuda_dev_alloc((void **)&mr->d_params, mr->total * sizeof(float), "the parameters") ||
        cuda_dev_alloc((void **)&mr->d_grads, mr->total * sizeof(float), "the gradients") ||
        cuda_dev_alloc((void **)&mr->d_state, mr->nstate * sizeof(float), "the model state")) {
        cuda_mirror_free(mr);
        return -1;
    }
    return 0;
}

extern "C" void cuda_mirror_upload(CudaMirror *mr, const Model *m, int with_state) {
    if (mr->device_master && !(with_state && mr->nstate)) return; /* nothing to copy, no time to count */
    double t0 = wall();
    size_t b = 0;
    if (!mr->device_master) {
        b = mr->total * sizeof(float);
        cudaCheck(cudaMemcpy(mr->d_params, m->params, b, cudaMemcpyHostToDevice));
        mr->stats.uploads++;
    }
    if (with_state && mr->nstate) {
        cudaCheck(cudaMemcpy(mr->d_state, m->state, mr->nstate * sizeof(float), cudaMemcpyHostToDevice));
        b += mr->nstate * sizeof(float);
        mr->stats.uploads++;
    }
    mr->stats.up_bytes += b;
    mr->stats.up_s += wall() - t0;
}

extern "C" void cuda_mirror_download_grads(CudaMirror *mr, Model *m) {
    if (mr->device_master) return;
    double t0 = wall();
    size_t b = mr->total * sizeof(float);
    cudaCheck(cudaMemcpy(m->grads, mr->d_grads, b, cudaMemcpyDeviceToHost));
    mr->stats.downloads++;
    mr->stats.down_bytes += b;
    mr->stats.down_s += wall() - t0;
}

extern "C" void cuda_mirror_download_state(CudaMirror *mr, Model *m) {
    if (!mr->nstate) return;
    double t0 = wall();
    size_t b = mr->nstate * sizeof(float);
    cudaCheck(cudaMemcpy(m->state, mr->d_state, b, cudaMemcpyDeviceToHost));
    mr->stats.downloads++;
    mr->stats.down_bytes += b;
    mr->stats.down_s += wall() - t0;
}

extern "C" void cuda_mirror_free(CudaMirror *mr) {
    cudaCheck(cudaFree(mr->d_params));
    cudaCheck(cudaFree(mr->d_grads));
    cudaCheck(cudaFree(mr->d_state));
    mr->d_params = mr->d_grads = mr->d_state = NULL;
}

/* GPU models of this library name their ops "<name>_cuda" and start their impl
 * with the CudaMirror */
static int is_gpu_model(const Model *m) {
    if (!m || !m->ops || !m->ops->name || !m->impl) return 0;
    size_t n = strlen(m->ops->name);
    return n > 5 && strcmp(m->ops->name + n - 5, "_cuda") == 0;
}

extern "C" const ModelCudaCopyStats *model_cuda_copy_stats(const Model *m) {
    return is_gpu_model(m) ? &((const CudaMirror *)m->impl)->stats : NULL;
}

extern "C" void model_cuda_copy_stats_reset(Model *m) {
    if (is_gpu_model(m)) memset(&((CudaMirror *)m->impl)->stats, 0, sizeof(ModelCudaCopyStats));
}

extern "C" void model_cuda_sync(void) { cudaCheck(cudaStreamSynchronize(0)); }

extern "C" int model_cuda_set_device_master(Model *m, int on) {
    if (!is_gpu_model(m)) {
        fprintf(stderr, "error: device-master mode needs a GPU model of this library (got %s)\n",
                m && m->ops && m->ops->name ? m->ops->name : "none");
        return -1;
    }
    CudaMirror *mr = (CudaMirror *)m->impl;
    on = on != 0;
    if (on == mr->device_master) return 0;
    size_t b = mr->total * sizeof(float);
    if (on) {
        cudaCheck(cudaMemcpy(mr->d_params, m->params, b, cudaMemcpyHostToDevice));
    } else {
        cudaCheck(cudaMemcpy(m->params, mr->d_params, b, cudaMemcpyDeviceToHost));
        cudaCheck(cudaMemcpy(m->grads, mr->d_grads, b, cudaMemcpyDeviceToHost));
    }
    if (mr->follow_master) mr->follow_master(m, on);
    mr->device_master = on;
    return 0;
}

extern "C" float *model_cuda_device_params(Model *m) {
    return is_gpu_model(m) ? ((CudaMirror *)m->impl)->d_params : NULL;
}

extern "C" float *model_cuda_device_grads(Model *m) {
    return is_gpu_model(m) ? ((CudaMirror *)m->impl)->d_grads : NULL;
}
