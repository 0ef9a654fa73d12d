/* Gradient clipping, as torch.nn.utils.clip_grad_norm_ / clip_grad_value_ (1.13).
 *
 * The gradient arena is one flat vector (padding between tensors is zero), so
 * clipping it whole is torch's "as if concatenated into a single vector". The
 * norm is accumulated in double over fixed blocks whose boundaries depend only
 * on n, then the blocks are summed in order: the same result for any thread
 * count. Gradients are scaled in place (overwrite). */
#ifndef GC_CLIP_H
#define GC_CLIP_H

#include <stddef.h>

/* total p-norm of grads (norm_type > 0; INFINITY for the max-norm), as float like
 * torch's result; then, as torch, coef = max_norm / (total + 1e-6) and when
 * coef < 1 every gradient is multiplied by it (float). A non-finite total
 * leaves the gradients untouched (torch would scale them by NaN) and is
 * returned so the caller can skip the step.
 *   grads: [n] in place */
double clip_grad_norm(float *grads, size_t n, double max_norm, double norm_type);
/* the p-norm alone (no clipping) */
double grad_norm(const float *grads, size_t n, double norm_type);
/* clamp every gradient to [-clip_value, clip_value] (NaN stays NaN, as torch.clamp)
 *   grads: [n] in place */
void clip_grad_value(float *grads, size_t n, double clip_value);

#endif
