/* 2-D convolution (torch.nn.Conv2d, groups = 1, dilation = 1), fp32, CPU.
 *
 * Layout: activations are CNHW ("channel-major across the batch": element
 * (c, n, h, w) at c*ld + (n*H + h)*W + w, with channel stride ld = N*H*W when
 * dense, or more: see ldi/ldo below), which makes the whole batch ONE matrix
 * per tensor:
 *     out[OC, N*OH*OW] = w[OC, C*KH*KW] x col[C*KH*KW, N*OH*OW]
 * (im2col). Weights keep PyTorch's layout [OC, C, KH, KW]. The batch is cut
 * into work items of whole images that threads take on demand; a thread builds
 * the columns of a chunk of output rows that fits in cache and calls a
 * single-threaded sgemm on it. Each item sums its own weight gradient and the
 * items are added in order, so every result is the same for any number of
 * threads (and run to run). A 1x1
 * stride-1 unpadded convolution reads the input directly (no im2col), and a
 * 3x3 stride-1 "same" convolution uses direct AVX-512 kernels (nn/conv3x3.h).
 *
 * Gradients: dw and db ACCUMULATE (+=); dinp is OVERWRITTEN.
 *
 * Shape letters: N batch, C input channels, H,W input size, OC output channels,
 * KH,KW kernel, OH,OW output size.
 */
#ifndef GC_NN_CONV2D_H
#define GC_NN_CONV2D_H

#include <stddef.h>

typedef struct {
    int N, C, H, W;   /* input */
    int OC, KH, KW;   /* output channels, kernel */
    int stride, pad;  /* same in both directions */
    int OH, OW;       /* derived: (H + 2*pad - KH) / stride + 1 */
    int threads;      /* team size the scratch is sized for: omp_get_max_threads()
                         when conv2d_shape ran; forward/backward never use more */
    int chunk;        /* output rows (n, oh) per im2col chunk, fixed when the shape is made */
    size_t ldi, ldo;  /* channel strides (floats) of inp/dinp and out/dout: conv2d_shape sets the
                         dense N*H*W and N*OH*OW; a caller may raise them (padded channel rows,
                         which avoid cache-set conflicts between channels 4 KiB apart) */
} Conv2dShape;

/* Fills s; returns 0, or -GC_ERR_PARAM (and prints why) for an impossible
 * shape (non-positive sizes, kernel larger than the padded input, ...). */
int conv2d_shape(Conv2dShape *s, int N, int C, int H, int W, int OC, int KH, int KW, int stride, int pad);

/* floats of scratch that conv2d_forward/backward need for this shape */
size_t conv2d_work_floats(const Conv2dShape *s);

void conv2d_forward(float *out /*OC,ldo*/, float *work /*conv2d_work_floats*/,
                    const float *inp /*C,ldi*/, const float *w /*OC,C,KH,KW*/,
                    const float *b /*OC or NULL*/, const Conv2dShape *s);

void conv2d_backward(float *dinp /*C,ldi, overwritten; NULL = skip*/, float *dw /*OC,C,KH,KW, +=*/,
                     float *db /*OC, +=, NULL = skip*/, float *work /*conv2d_work_floats*/,
                     const float *dout /*OC,ldo*/, const float *inp /*C,ldi*/,
                     const float *w /*OC,C,KH,KW*/, const Conv2dShape *s);

/* Tuning knob for benchmarks: target floats per im2col chunk (default 48K);
 * affects shapes made after the call. */
void conv2d_set_chunk_floats(size_t floats);
/* 1 (default): 3x3 stride-1 pad-1 convolutions with H*W a multiple of 16 use
 * the direct AVX-512 kernels of nn/conv3x3.h when the build has AVX-512;
 * 0: everything goes through im2col + sgemm (tests compare the two). */
void conv2d_set_direct(int enable);

#endif
