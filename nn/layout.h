/* Layout conversion between NCHW (what datasets and PyTorch use) and CNHW (what
 * the CPU image ops use): both are "swap the two leading axes" of an
 * [A, B, S] array. Its backward is the same op with A and B exchanged. */
#ifndef GC_NN_LAYOUT_H
#define GC_NN_LAYOUT_H

/* out[b, a, s] = inp[a, b, s]   (NCHW -> CNHW: A=N, B=C, S=H*W; CNHW -> NCHW: A=C, B=N) */
void swap01(float *out /*B,A,S*/, const float *inp /*A,B,S*/, int A, int B, int S);

#endif
