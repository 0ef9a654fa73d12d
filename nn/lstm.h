/* One LSTM layer over a time-major sequence, exactly as torch.nn.LSTM (one
 * layer, batch_first=False). Stack layers by feeding one layer's outputs
 * hs[1..T] to the next (see nn/lstm_lm.c).
 *
 * Shape letters: T time steps, N batch, In input features, H hidden units.
 * Weights in PyTorch's layout, gate blocks in PyTorch's order i, f, g, o:
 *   w_ih [4H, In], w_hh [4H, H], b_ih [4H], b_hh [4H]
 * For t = 0..T-1, with x_t = x[t] and (h_{t-1}, c_{t-1}) = (hs[t], cs[t]):
 *   a   = x_t @ w_ih^T + b_ih + h_{t-1} @ w_hh^T + b_hh          [N, 4H]
 *   i = sigmoid(a[:, 0:H])   f = sigmoid(a[:, H:2H])
 *   g = tanh(a[:, 2H:3H])    o = sigmoid(a[:, 3H:4H])
 *   c_t = f * c_{t-1} + i * g
 *   h_t = o * tanh(c_t)                                         -> hs[t+1], cs[t+1]
 *
 * The state arrays hold T+1 slots: slot 0 is the initial state (h0, c0), which
 * the caller writes before the forward (zeros, or the final state of the
 * previous batch for truncated backpropagation through time); slots 1..T are
 * the outputs. hs[T], cs[T] is the final state to carry into the next batch.
 *
 * Gradients: dw_ih, dw_hh, db_ih, db_hh ACCUMULATE (+=); dx, dh0, dc0 are
 * OVERWRITTEN. The backward takes the gradient of the loss with respect to the
 * outputs h_1..h_T only: the gradient with respect to the final state is zero,
 * so nothing flows back from a later batch (truncated BPTT). dh0/dc0 (optional)
 * return the gradient with respect to the initial state.
 */
#ifndef GC_NN_LSTM_H
#define GC_NN_LSTM_H

/* hs[0], cs[0] are inputs (the initial state); everything else is written.
 * gates and tanhc are caches for the backward. */
void lstm_forward(float *hs /*T+1,N,H*/, float *cs /*T+1,N,H*/, float *gates /*T,N,4H: i,f,g,o after nonlinearity*/,
                  float *tanhc /*T,N,H: tanh(c_t)*/, const float *x /*T,N,In*/, const float *w_ih /*4H,In*/,
                  const float *w_hh /*4H,H*/, const float *b_ih /*4H*/, const float *b_hh /*4H*/, int T, int N,
                  int In, int H);

/* dgates and dstate are scratch. dhs is the gradient with respect to the
 * outputs h_1..h_T (hs[1..T]). */
void lstm_backward(float *dx /*T,N,In, overwritten; NULL = skip*/, float *dh0 /*N,H, overwritten; NULL = skip*/,
                   float *dc0 /*N,H, overwritten; NULL = skip*/, float *dw_ih /*4H,In, +=*/, float *dw_hh /*4H,H, +=*/,
                   float *db_ih /*4H, +=*/, float *db_hh /*4H, +=*/, float *dgates /*T,N,4H scratch*/,
                   float *dstate /*2,N,H scratch*/, const float *dhs /*T,N,H*/, const float *hs /*T+1,N,H*/,
                   const float *cs /*T+1,N,H*/, const float *gates /*T,N,4H*/, const float *tanhc /*T,N,H*/,
                   const float *x /*T,N,In*/, const float *w_ih /*4H,In*/, const float *w_hh /*4H,H*/, int T, int N,
                   int In, int H);

#endif
