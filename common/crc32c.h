/* CRC-32C (Castagnoli): checksums of codec frames, checkpoints and logs. */
#ifndef GC_CRC32C_H
#define GC_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* crc32c(0, data, len) is the standard CRC-32C; pass a previous result as crc to continue */
uint32_t crc32c(uint32_t crc, const void *data, size_t len);

#endif
