/* Edits of gcomp payloads that only decoding the chunks shows (the tests' corrupt frames,
 * compress/gcomp_state.h's layout, docs/FORMAT.md section 10); the caller makes the frame's
 * CRC right afterwards. */
#ifndef GCX_TESTS_CUDA_GCOMP_EDIT_H
#define GCX_TESTS_CUDA_GCOMP_EDIT_H

#include <stdint.h>

#include "compress/codec.h" /* get_u32, put_u32 */

/* a gcomp payload's block header: its total chunk bits moved by d */
static inline void gcomp_cbits_add(uint8_t *pay, int64_t d) {
    uint64_t cbits = ((uint64_t)get_u32(pay + 12) | (uint64_t)get_u32(pay + 16) << 32) + (uint64_t)d;
    put_u32(pay + 12, (uint32_t)cbits);
    put_u32(pay + 16, (uint32_t)(cbits >> 32));
}

/* the chunk header h of payload pay: its nonzero count one off, the levels' bytes kept as
 * many and the chunk's and the block's bits moved with it; 0 where no such edit exists */
static inline int gcomp_nnz_off_by_one(uint8_t *pay, uint8_t *h) {
    uint32_t count = get_u32(h + 4), nnz = get_u32(h + 16);
    int d = nnz < count && nnz % 4 != 0 ? 1 : nnz > 0 && nnz % 4 != 1 ? -1 : 0;
    if (!d) return 0;
    put_u32(h + 16, nnz + (uint32_t)d);
    put_u32(h + 8, get_u32(h + 8) + (uint32_t)(2 * d));
    gcomp_cbits_add(pay, 2 * d);
    return 1;
}

#endif
