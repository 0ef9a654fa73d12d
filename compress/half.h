/* IEEE 754 binary16 <-> binary32 conversions, portable scalar versions.
 *
 * half_from_float rounds to nearest, ties to even, exactly like the x86 F16C
 * instruction vcvtps2ph with rounding mode 0 (and like torch's .half()):
 *   - |x| >= 65520 (the midpoint between the largest half 65504 and 2^16)
 *     becomes +-inf;
 *   - values below 2^-14 become subnormal halves (multiples of 2^-24),
 *     rounded to nearest even, down to +-0;
 *   - NaN stays NaN: sign kept, quiet bit (0x0200) set, the top 9 payload
 *     bits kept (as vcvtps2ph does); infinities stay infinities.
 * half_to_float is exact (every half is a float).
 *
 * The subnormal path uses the float adder to round (Fabian Giesen's
 * float_to_half_fast3_rtne): it needs the default rounding mode and no
 * flush-to-zero, which is how this project is built (no -ffast-math).
 */
#ifndef GC_HALF_H
#define GC_HALF_H

#include <stdint.h>
#include <string.h>

static inline uint16_t half_from_float(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    uint32_t sign = (u >> 16) & 0x8000u;
    uint32_t a = u & 0x7FFFFFFFu;
    uint32_t h;
    if (a >= 0x47800000u) {                 /* >= 2^16, inf or NaN */
        if (a > 0x7F800000u) h = 0x7E00u | ((a >> 13) & 0x3FFu); /* NaN, quieted */
        else h = 0x7C00u;                   /* overflow -> inf */
    } else if (a < 0x38800000u) {           /* < 2^-14: subnormal half or zero */
        /* adding 0.5 aligns the 10 mantissa bits of a 2^-24 grid at the
         * bottom of the float; the float adder rounds to nearest even */
        const uint32_t magic = ((127 - 15) + (23 - 10) + 1) << 23; /* 0.5f */
        float fa, fm;
        memcpy(&fa, &a, 4);
        memcpy(&fm, &magic, 4);
        fa += fm;
        uint32_t r;
        memcpy(&r, &fa, 4);
        h = r - magic;
    } else {                                /* normal half (may round up to inf) */
        uint32_t odd = (a >> 13) & 1u;
        h = (a + ((uint32_t)(15 - 127) << 23) + 0xFFFu + odd) >> 13;
    }
    return (uint16_t)(sign | h);
}

static inline float half_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1Fu, m = h & 0x3FFu, u;
    if (e == 0) {
        float f = (float)m * (1.0f / 16777216.0f); /* m * 2^-24, exact */
        memcpy(&u, &f, 4);
        u |= sign;
    } else if (e == 31) {
        /* inf, or NaN made quiet as the F16C instruction does, so a value
         * decodes the same whichever path converts it */
        u = sign | 0x7F800000u | (m << 13) | (m ? 0x00400000u : 0u);
    } else {
        u = sign | ((e + 112) << 23) | (m << 13);
    }
    float f;
    memcpy(&f, &u, 4);
    return f;
}

#endif
