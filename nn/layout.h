/* Layout conversion between NCHW (what datasets and PyTorch use) and CNHW (what
 * the CPU image ops use): both are "swap the two leading axes" of an
 * [A, B, S] array. Its backward is the same op with A and B exchanged. */
#ifndef GC_NN_LAYOUT_H
#define GC_NN_LAYOUT_H

#include <stddef.h>

/* out[b, a, s] = inp[a, b, s]   (NCHW -> CNHW: A=N, B=C, S=H*W; CNHW -> NCHW: A=C, B=N) */
void swap01(float *out /*B,A,S*/, const float *inp /*A,B,S*/, int A, int B, int S);
/* the same with row strides: out[b*ldo + a*S + s] = inp[a*ldi + b*S + s]
 * (ldo >= A*S, ldi >= B*S; e.g. NCHW -> CNHW with a padded channel stride ldo) */
void swap01_ld(float *out /*B,ldo*/, const float *inp /*A,ldi*/, int A, int B, int S, size_t ldo, size_t ldi);

#endif
