#include "common/crc32c.h"

#include <pthread.h>
#include <string.h>

static inline uint32_t rd_u32(const uint8_t *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

/* ---- CRC-32C (Castagnoli), reflected polynomial 0x82F63B78 ----
 * The x86 crc32 instruction (SSE4.2) where the processor has it, chosen at run time
 * unless the compiler targets it anyway (a build without -march=native, such as the
 * sanitizer build, still gets it), else slicing-by-8 tables. Both give identical
 * results (tests/test_codec_core.c compares them). */
static uint32_t crc_table[8][256];
static void crc_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1)));
        crc_table[0][i] = c;
    }
    for (int t = 1; t < 8; t++)
        for (int i = 0; i < 256; i++) crc_table[t][i] = (crc_table[t - 1][i] >> 8) ^ crc_table[0][crc_table[t - 1][i] & 0xFF];
}
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;
uint32_t crc32c_sw(uint32_t crc, const void *data, size_t len) {
    pthread_once(&crc_once, crc_init); /* codecs run on several threads at once */
    const uint8_t *p = data;
    uint32_t c = ~crc;
    while (len >= 8) {
        uint32_t lo = c ^ rd_u32(p), hi = rd_u32(p + 4);
        c = crc_table[7][lo & 0xFF] ^ crc_table[6][(lo >> 8) & 0xFF] ^ crc_table[5][(lo >> 16) & 0xFF] ^
            crc_table[4][lo >> 24] ^ crc_table[3][hi & 0xFF] ^ crc_table[2][(hi >> 8) & 0xFF] ^
            crc_table[1][(hi >> 16) & 0xFF] ^ crc_table[0][hi >> 24];
        p += 8;
        len -= 8;
    }
    while (len--) c = (c >> 8) ^ crc_table[0][(c ^ *p++) & 0xFF];
    return ~c;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <nmmintrin.h>
__attribute__((target("sse4.2"))) static uint32_t crc_hw(uint32_t crc, const void *data, size_t len) {
    const uint8_t *p = data;
    uint64_t c = ~crc;
    while (len && ((uintptr_t)p & 7)) {
        c = _mm_crc32_u8((uint32_t)c, *p++);
        len--;
    }
    while (len >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        c = _mm_crc32_u64(c, v);
        p += 8;
        len -= 8;
    }
    while (len--) c = _mm_crc32_u8((uint32_t)c, *p++);
    return ~(uint32_t)c;
}
uint32_t crc32c(uint32_t crc, const void *data, size_t len) {
#if defined(__SSE4_2__)
    return crc_hw(crc, data, len);
#else
    return __builtin_cpu_supports("sse4.2") ? crc_hw(crc, data, len) : crc32c_sw(crc, data, len);
#endif
}
#else
uint32_t crc32c(uint32_t crc, const void *data, size_t len) { return crc32c_sw(crc, data, len); }
#endif

/* ---- pieces (common/crc32c.h) ---- */

uint32_t crc32c_raw(const void *data, size_t len) { return ~crc32c(~0u, data, len); }

uint32_t crc32c_apply_op(const uint32_t op[32], uint32_t s) {
    uint32_t r = 0;
    for (int i = 0; s; i++, s >>= 1)
        if (s & 1) r ^= op[i];
    return r;
}

static uint32_t zpow[64][32]; /* Z_(2^k): one zero byte, then squared */
static void zpow_init(void) {
    const uint8_t zero = 0;
    for (int i = 0; i < 32; i++) zpow[0][i] = ~crc32c(~(1u << i), &zero, 1); /* R(bit i, one zero byte) */
    for (int k = 1; k < 64; k++)
        for (int i = 0; i < 32; i++) zpow[k][i] = crc32c_apply_op(zpow[k - 1], zpow[k - 1][i]);
}
static pthread_once_t zpow_once = PTHREAD_ONCE_INIT;

uint32_t crc32c_zeros(uint32_t s, uint64_t nbytes) {
    pthread_once(&zpow_once, zpow_init);
    for (int k = 0; nbytes; k++, nbytes >>= 1)
        if (nbytes & 1) s = crc32c_apply_op(zpow[k], s);
    return s;
}

void crc32c_zeros_op(uint32_t op[32], uint64_t nbytes) {
    for (int i = 0; i < 32; i++) op[i] = crc32c_zeros(1u << i, nbytes);
}
