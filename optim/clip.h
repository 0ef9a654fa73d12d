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
/* grad_norm's fixed blocks for n values: their count, each of *blk values (the
 * last one fewer); a device version sums the same blocks (dist/exchange_cuda.h) */
size_t clip_blocks(size_t n, size_t *blk);
/* clip_grad_norm's factor for a total norm (float, finite): the gradients are
 * multiplied by it when it is below 1 */
float clip_coef(float total, double max_norm);
/* clamp every gradient to [-clip_value, clip_value] (NaN stays NaN, as torch.clamp)
 *   grads: [n] in place */
void clip_grad_value(float *grads, size_t n, double clip_value);

#endif
