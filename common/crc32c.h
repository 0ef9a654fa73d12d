/* CRC-32C (Castagnoli): checksums of codec frames, checkpoints and logs. */
#ifndef GC_CRC32C_H
#define GC_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* crc32c(0, data, len) is the standard CRC-32C; pass a previous result as crc to continue */
uint32_t crc32c(uint32_t crc, const void *data, size_t len);
/* the same from tables, without the processor's crc32 instruction (what crc32c falls
 * back to where there is none; tests compare the two) */
uint32_t crc32c_sw(uint32_t crc, const void *data, size_t len);

/* ---- the algebra of a CRC computed in pieces (compress/codec_cuda.cu's device CRC) ----
 * The register after bytes M, starting from register s (no inversions), is
 * R(s, M) = Z_|M|(s) ^ R(0, M): Z_k, the register pushed through k zero bytes, is linear
 * over GF(2), and R(0, M) does not change when zero bytes are put in front of M. So
 * pieces computed independently from 0 fold into one CRC: s = Z_|B|(s) ^ R(0, B) for each
 * piece B in order, and crc32c(crc, M) = ~(Z_|M|(~crc) ^ R(0, M)). */

/* Z_nbytes(s) */
uint32_t crc32c_zeros(uint32_t s, uint64_t nbytes);
/* Z_nbytes as a matrix: column i (op[i]) is the image of register bit i */
void crc32c_zeros_op(uint32_t op[32], uint64_t nbytes);
/* op applied to register s */
uint32_t crc32c_apply_op(const uint32_t op[32], uint32_t s);
/* R(0, data): the register after data from 0, without the inversions */
uint32_t crc32c_raw(const void *data, size_t len);

#endif
