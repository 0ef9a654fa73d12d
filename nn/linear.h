/* Fully connected layer: out = inp @ w^T + b (torch.nn.Linear).
 *
 * Shapes: N rows (batch, or time*batch), IN input features, OUT output features.
 * Weights are PyTorch's layout [OUT, IN]. GEMMs go through CBLAS.
 * Gradients: dw and db ACCUMULATE (+=); dinp is OVERWRITTEN.
 */
#ifndef GC_NN_LINEAR_H
#define GC_NN_LINEAR_H

void linear_forward(float *out /*N,OUT*/, const float *inp /*N,IN*/, const float *w /*OUT,IN*/,
                    const float *b /*OUT or NULL*/, int N, int IN, int OUT);

void linear_backward(float *dinp /*N,IN, overwritten; NULL = skip*/, float *dw /*OUT,IN, +=*/,
                     float *db /*OUT, +=, NULL = skip*/, const float *dout /*N,OUT*/,
                     const float *inp /*N,IN*/, const float *w /*OUT,IN*/, int N, int IN, int OUT);

#endif
