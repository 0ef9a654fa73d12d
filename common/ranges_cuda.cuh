/* Several ranges of an arena in one launch. A pass of the device exchange touches the
 * same few values of every tensor (DGC's memory, the residual, the optimizer on the
 * tensors of one kind), and a launch per tensor costs the host a driver call each:
 * ResNet-110 has 329 tensors. So a launch takes a table of up to RANGES_MAX ranges as its
 * argument (copied at the launch: nothing to upload, no wait), each range its own blocks,
 * and a kernel walks its block's range with RANGE_STRIDE where it would walk [0, n) with
 * a grid-stride loop.
 *
 *   ranges_launch(off, n, k, [&](const RangeTab &r, unsigned blocks) {
 *       k_mine<<<blocks, TPB>>>(r, ...);
 *   });
 *   __global__ void k_mine(RangeTab r, float *a, ...) { RANGE_STRIDE(j, r) a[j] = ...; }
 *
 * j is an index into the whole arena (off[i] + the offset in the range). Adjacent ranges
 * are merged; empty ones are skipped. */
#ifndef GC_RANGES_CUDA_CUH
#define GC_RANGES_CUDA_CUH

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define RANGES_MAX 32
#define RANGES_TPB 256 /* the threads of a block that ranges_launch's block counts assume */

/* range i is [off[i], off[i] + n[i]), its blocks first[i] .. first[i + 1] - 1 */
typedef struct {
    uint64_t off[RANGES_MAX], n[RANGES_MAX];
    uint32_t first[RANGES_MAX + 1];
    unsigned k;
} RangeTab;

/* this block's range: the first index of this thread, the end, the stride. The table is
 * read with constant indices only (an unrolled loop), so that it stays in the kernel's
 * parameter space instead of being copied to local memory */
__device__ __forceinline__ size_t range_first(const RangeTab &r, size_t *end, size_t *step) {
    size_t off = 0, n = 0, nb = 1, blk = 0;
#pragma unroll
    for (unsigned i = 0; i < RANGES_MAX; i++)
        if (i < r.k && blockIdx.x >= r.first[i] && blockIdx.x < r.first[i + 1])
            off = r.off[i], n = r.n[i], nb = r.first[i + 1] - r.first[i], blk = blockIdx.x - r.first[i];
    *end = off + n;
    *step = nb * blockDim.x;
    return off + blk * blockDim.x + threadIdx.x;
}
#define RANGE_STRIDE(j, r) for (size_t j##_end, j##_step, j = range_first(r, &j##_end, &j##_step); j < j##_end; j += j##_step)

/* launch(table, blocks) for every RANGES_MAX of the k ranges (off, n: host), about four
 * values a thread of RANGES_TPB, at most 1,024 blocks a range */
template <class F> static void ranges_launch(const size_t *off, const size_t *n, size_t k, F launch) {
    RangeTab r;
    memset(&r, 0, sizeof r); /* all defined bytes: the launch's argument */
    for (size_t i = 0; i <= k; i++) {
        if (i < k && n[i] && r.k > 0 && r.off[r.k - 1] + r.n[r.k - 1] == off[i]) { /* adjacent: merged */
            r.n[r.k - 1] += n[i];
            continue;
        }
        if (r.k == RANGES_MAX || (i == k && r.k)) { /* a full table, or the last: launch it */
            size_t blocks = 0;
            for (unsigned j = 0; j < r.k; j++) {
                r.first[j] = (uint32_t)blocks;
                size_t want = (r.n[j] + 4 * RANGES_TPB - 1) / (4 * RANGES_TPB);
                blocks += want < 1 ? 1 : want > 1024 ? 1024 : want;
            }
            r.first[r.k] = (uint32_t)blocks;
            for (unsigned j = r.k; j < RANGES_MAX; j++) r.off[j] = r.n[j] = 0, r.first[j + 1] = (uint32_t)blocks;
            launch(r, (unsigned)blocks);
            r.k = 0;
        }
        if (i < k && n[i]) {
            r.off[r.k] = off[i];
            r.n[r.k++] = n[i];
        }
    }
}

#endif
