/* Token embedding: out[n] = w[tokens[n]] (torch.nn.Embedding).
 *
 * Shape letters: N tokens (T*N for a time-major sequence batch), V vocabulary,
 * E embedding size. The table w has PyTorch's layout [V, E].
 * Gradients: dw ACCUMULATES (+=, a scatter-add: a token seen k times adds k rows).
 * Tokens outside [0, V) are rejected: both functions check every token first and
 * return -GC_ERR_PARAM without touching any output (GC_OK on success).
 */
#ifndef GC_NN_EMBEDDING_H
#define GC_NN_EMBEDDING_H

/* out[n, :] = w[tokens[n], :] */
int embedding_forward(float *out /*N,E*/, const int *tokens /*N*/, const float *w /*V,E*/, int N, int V, int E);

/* dw[tokens[n], :] += dout[n, :] for every n */
int embedding_backward(float *dw /*V,E, +=*/, const float *dout /*N,E*/, const int *tokens /*N*/, int N, int V,
                       int E);

/* index of the first token outside [0, V), or -1 when all are valid */
int embedding_check_tokens(const int *tokens /*N*/, int N, int V);

#endif
