/* Constants shared by the CPU ops (nn/ C files) and their CUDA twins, so the two can
 * never drift. Batch-norm values are PyTorch's defaults (torch.nn.BatchNorm2d). */
#ifndef GC_NN_CONSTANTS_H
#define GC_NN_CONSTANTS_H

/* batch-norm: y = (x - mean) / sqrt(var + eps) * gamma + beta */
#define GC_BN_EPS 1e-5f
/* running = (1 - momentum) * running + momentum * batch_stat
 * (the running variance uses the UNBIASED batch variance, N/(N-1), as PyTorch) */
#define GC_BN_MOMENTUM 0.1f

/* LSTM cell tanh (nn/lstm.c, nn/lstm_cuda.cu): below this |x| the odd series
 * x (1 - x^2/3 + 2x^4/15 - 17x^6/315) is used, above it 1 - 2 / (e^{2x} + 1) */
#define GC_LSTM_TANH_SERIES_BELOW 0.05f

#endif
