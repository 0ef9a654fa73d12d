/* ReLU and residual add (see activation.h). No parameters; input gradients
 * are OVERWRITTEN. */
#include "nn/activation.h"

#include "nn/parallel.h"

void relu_forward(float *out /*n*/, const float *inp /*n*/, size_t n) {
    OMP_FOR
    for (size_t i = 0; i < n; i++) out[i] = inp[i] > 0.0f ? inp[i] : 0.0f;
}

void relu_backward(float *dinp /*n*/, const float *dout /*n*/, const float *out /*n*/, size_t n) {
    /* forward: out = max(inp, 0)  =>  dinp = dout where out > 0, else 0 */
    OMP_FOR
    for (size_t i = 0; i < n; i++) dinp[i] = out[i] > 0.0f ? dout[i] : 0.0f;
}

void add_forward(float *out /*n*/, const float *a /*n*/, const float *b /*n*/, size_t n) {
    OMP_FOR
    for (size_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}

void add_inplace(float *acc /*n*/, const float *x /*n*/, size_t n) {
    OMP_FOR
    for (size_t i = 0; i < n; i++) acc[i] += x[i];
}
