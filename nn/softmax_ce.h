/* Softmax cross-entropy (torch.nn.functional.cross_entropy, reduction mean).
 *
 * Shapes: N rows, V classes. Targets must lie in [0, V); a target outside that
 * range is a caller bug: it prints the row and value and exits(1).
 * softmax_ce_forward returns the MEAN loss over the N rows and stores in
 * *correct (may be NULL) the number of rows whose argmax equals the target
 * (ties go to the lowest index, as torch.argmax).
 * softmax_ce_backward OVERWRITES dlogits = (probs - onehot(target)) * scale;
 * scale is 1/N for the mean loss (the LSTM uses 1/(T*N)).
 */
#ifndef GC_NN_SOFTMAX_CE_H
#define GC_NN_SOFTMAX_CE_H

float softmax_ce_forward(float *probs /*N,V*/, long *correct, const float *logits /*N,V*/,
                         const int *targets /*N*/, int N, int V);

void softmax_ce_backward(float *dlogits /*N,V, overwritten*/, const float *probs /*N,V*/,
                         const int *targets /*N*/, float scale /*usually 1/N*/, int N, int V);

#endif
