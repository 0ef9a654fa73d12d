/* Calibration: the "GPU" model is the CPU model with every parameter scaled by
 * (1 + PERTURB * u), u uniform in [-1, 1]; the "GPU" ops are the CPU ops. */
#include <stdint.h>
#include <stdlib.h>
#include "common/rng.h"
#include "nn/dropout.h"
#include "nn/embedding.h"
#include "nn/lstm.h"
#include "nn/lstm_lm.h"
static void perturb(Model *m) {
    double eps = getenv("PERTURB") ? atof(getenv("PERTURB")) : 1e-6;
    Rng r; rng_init(&r, 99, 0);
    for (size_t i = 0; i < m->pt.total; i++) m->params[i] *= (float)(1.0 + eps * (2.0 * rng_uniform(&r) - 1.0));
}
Model *lstm_lm_create_cuda(const LstmLmConfig *cfg, int mb, int T) { Model *m = lstm_lm_create(cfg, mb, T); if (m) perturb(m); return m; }
void lstm_lm_init_params_cuda(Model *m, uint64_t seed) { lstm_lm_init_params(m, seed); }
void lstm_lm_set_dropout_seed_cuda(Model *m, uint64_t seed, uint64_t step) { lstm_lm_set_dropout_seed(m, seed, step); }
const LstmLmConfig *lstm_lm_config_cuda(const Model *m) { return lstm_lm_config(m); }
int lstm_lm_carried_state_cuda(const Model *m, int l, const float **h, const float **c, int *n) { return lstm_lm_carried_state(m, l, h, c, n); }
int nn_cuda_device_count(void) { return 1; }
void nn_cuda_release(void) {}
int embedding_forward_cuda(float *out, const int *tokens, const float *w, int N, int V, int E) { return embedding_forward(out, tokens, w, N, V, E); }
int embedding_backward_cuda(float *dw, const float *dout, const int *tokens, int N, int V, int E) { return embedding_backward(dw, dout, tokens, N, V, E); }
int dropout_forward_cuda(float *out, const float *inp, float p, uint64_t s, size_t n) { return dropout_forward(out, inp, p, s, n); }
int dropout_backward_cuda(float *out, const float *inp, float p, uint64_t s, size_t n) { return dropout_backward(out, inp, p, s, n); }
void lstm_forward_cuda(float *hs, float *cs, float *gates, float *tanhc, const float *x, const float *w_ih, const float *w_hh, const float *b_ih, const float *b_hh, int T, int N, int In, int H) { lstm_forward(hs, cs, gates, tanhc, x, w_ih, w_hh, b_ih, b_hh, T, N, In, H); }
void lstm_backward_cuda(float *dx, float *dh0, float *dc0, float *dw_ih, float *dw_hh, float *db_ih, float *db_hh, float *dgates, float *dstate, const float *dhs, const float *hs, const float *cs, const float *gates, const float *tanhc, const float *x, const float *w_ih, const float *w_hh, int T, int N, int In, int H) { lstm_backward(dx, dh0, dc0, dw_ih, dw_hh, db_ih, db_hh, dgates, dstate, dhs, hs, cs, gates, tanhc, x, w_ih, w_hh, T, N, In, H); }
/* device-master mode: the "device" arenas are the host ones, the optimizer the CPU's
 * (so the refusal of a CPU model and the copy statistics fail by construction) */
#include "nn/model_cuda.h"
#include "optim/optim.h"
int model_cuda_set_device_master(Model *m, int on) { (void)m; (void)on; return 0; }
float *model_cuda_device_params(Model *m) { return m->params; }
float *model_cuda_device_grads(Model *m) { return m->grads; }
const ModelCudaCopyStats *model_cuda_copy_stats(const Model *m) { (void)m; return NULL; }
void model_cuda_copy_stats_reset(Model *m) { (void)m; }
int optim_init_cuda(Optim *o, const OptConfig *cfg, size_t n) { return optim_init(o, cfg, n); }
void optim_free_cuda(Optim *o) { optim_free(o); }
int optim_update_cuda(Optim *o, float *p, const float *g, double lr, size_t off, size_t n) { return optim_update(o, p, g, lr, off, n); }
