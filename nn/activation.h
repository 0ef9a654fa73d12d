/* Elementwise ops: ReLU and the residual add. Layout-agnostic (n values).
 * No parameters; input gradients are OVERWRITTEN. In-place use (out == inp,
 * dinp == dout) is allowed. */
#ifndef GC_NN_ACTIVATION_H
#define GC_NN_ACTIVATION_H

#include <stddef.h>

/* out = max(inp, 0) */
void relu_forward(float *out /*n*/, const float *inp /*n*/, size_t n);
/* dinp = dout * [out > 0]  (out: the forward OUTPUT) */
void relu_backward(float *dinp /*n*/, const float *dout /*n*/, const float *out /*n*/, size_t n);

/* out = a + b. Backward is the identity into both inputs: da = db = dout
 * (callers add dout to each input's gradient themselves). */
void add_forward(float *out /*n*/, const float *a /*n*/, const float *b /*n*/, size_t n);
/* acc += x: accumulate one gradient into another (the residual's second path) */
void add_inplace(float *acc /*n*/, const float *x /*n*/, size_t n);

#endif
