/* The logits gcx computes for one batch, for tests/test_torch_interop.py:
 *
 *   tool_logits resnet H W  weights.safetensors in.f32 N out.f32
 *   tool_logits lenet  H W  weights.safetensors in.f32 N out.f32
 *   tool_logits lstm   TIE  weights.safetensors tokens.i32 T N out.f32
 *
 * The model is built from the shapes in the file (ResNet: depth from the blocks
 * of layer1, width, input channels, classes, shortcut B when layer2.0 has a
 * downsample; LeNet: input channels and classes; LSTM: vocabulary, embedding,
 * hidden size and layers; TIE 0|1 says whether the decoder is tied), loaded with
 * model_import_safetensors (what --init-from runs) and run in evaluation mode
 * (BN running statistics; no dropout; the LSTM from a zero state).
 * in.f32: N images NCHW, float32; tokens.i32: T*N int32 tokens, time-major
 * (tokens[t*N + n]). out.f32: the logits, float32 row-major [N, classes] or
 * [T*N, V]. Exit status 0, or 1 with a message. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/safetensors.h"
#include "nn/lenet.h"
#include "nn/lstm_lm.h"
#include "nn/resnet.h"
#include "nn/state_dict.h"

static void *read_all(const char *path, size_t want) {
    FILE *f = fopen(path, "rb");
    void *p = malloc(want ? want : 1);
    if (!f || !p || fread(p, 1, want, f) != want || fgetc(f) != EOF) {
        fprintf(stderr, "tool_logits: %s: cannot read exactly %zu bytes\n", path, want);
        exit(1);
    }
    fclose(f);
    return p;
}

static int dim(const StFile *sf, const char *name, int d) {
    const StTensor *t = st_find(sf, name);
    if (!t || t->ndim <= d) {
        fprintf(stderr, "tool_logits: the file has no tensor %s with %d dimensions\n", name, d + 1);
        exit(1);
    }
    return (int)t->shape[d];
}

int main(int argc, char **argv) {
    if (argc != 8) {
        fprintf(stderr, "usage: see tests/tool_logits.c\n");
        return 1;
    }
    const char *kind = argv[1], *wpath = argv[4 - !strcmp(argv[1], "lstm")];
    StFile sf;
    char err[1024];
    if (st_read(&sf, wpath, err, sizeof err)) {
        fprintf(stderr, "tool_logits: %s\n", err);
        return 1;
    }
    Model *m = NULL;
    size_t nin = 0, nout = 0;
    int N = 0, T = 0, lm = !strcmp(kind, "lstm");
    if (!strcmp(kind, "resnet")) {
        int n = 0;
        char name[64];
        for (;; n++) {
            snprintf(name, sizeof name, "layer1.%d.conv1.weight", n);
            if (!st_find(&sf, name)) break;
        }
        ResNetConfig c = resnet_cifar_config(6 * n + 2);
        c.width = dim(&sf, "conv1.weight", 0), c.in_channels = dim(&sf, "conv1.weight", 1);
        c.num_classes = dim(&sf, "fc.weight", 0);
        c.in_h = atoi(argv[2]), c.in_w = atoi(argv[3]);
        c.shortcut = st_find(&sf, "layer2.0.downsample.0.weight") ? RESNET_SHORTCUT_B : RESNET_SHORTCUT_A;
        N = atoi(argv[6]);
        m = resnet_cifar_create(&c, N);
        nin = (size_t)N * c.in_channels * c.in_h * c.in_w, nout = (size_t)N * c.num_classes;
    } else if (!strcmp(kind, "lenet")) {
        LeNetConfig c = lenet_config();
        c.in_channels = dim(&sf, "conv1.weight", 1), c.num_classes = dim(&sf, "fc2.weight", 0);
        c.in_h = atoi(argv[2]), c.in_w = atoi(argv[3]);
        N = atoi(argv[6]);
        m = lenet_create(&c, N);
        nin = (size_t)N * c.in_channels * c.in_h * c.in_w, nout = (size_t)N * c.num_classes;
    } else if (lm) {
        LstmLmConfig c = lstm_lm_config_sbc_char();
        c.vocab = dim(&sf, "encoder.weight", 0), c.emb = dim(&sf, "encoder.weight", 1);
        c.hidden = dim(&sf, "rnn.weight_hh_l0", 1);
        char name[64];
        for (c.layers = 0;; c.layers++) {
            snprintf(name, sizeof name, "rnn.weight_hh_l%d", c.layers);
            if (!st_find(&sf, name)) break;
        }
        c.tie_weights = atoi(argv[2]);
        T = atoi(argv[5]), N = atoi(argv[6]);
        m = lstm_lm_create(&c, N, T);
        nin = (size_t)T * N, nout = (size_t)T * N * c.vocab;
    }
    st_free(&sf);
    if (!m || N < 1) {
        fprintf(stderr, "tool_logits: cannot build the %s model\n", kind);
        return 1;
    }
    if (model_import_safetensors(m, wpath, err, sizeof err)) {
        fprintf(stderr, "tool_logits: %s\n", err);
        return 1;
    }
    const char *inpath = argv[lm ? 4 : 5];
    void *in = read_all(inpath, nin * 4);
    int *y = calloc((size_t)(T ? T : 1) * N, sizeof *y);
    Batch b = {.N = N, .T = T, .y = y};
    if (lm) b.tokens = in;
    else b.x = in;
    if (m->ops->reset_state) m->ops->reset_state(m);
    model_forward(m, &b, 0, NULL);
    const float *z = lm ? lstm_lm_eval_logits(m) : !strcmp(kind, "resnet") ? resnet_logits(m) : lenet_logits(m);
    FILE *f = fopen(argv[7], "wb");
    if (!z || !f || fwrite(z, 4, nout, f) != nout || fclose(f) != 0) {
        fprintf(stderr, "tool_logits: cannot write %s\n", argv[7]);
        return 1;
    }
    free(in);
    free(y);
    model_free(m);
    return 0;
}
