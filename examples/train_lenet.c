/* train_lenet: LeNet5-Caffe on MNIST, SBC's setup (Adam, lr 0.001, batch 128,
 * 2000 iterations; SBC section IV-A and Table II), with every distributed flag
 * of train_resnet.
 *
 *   ./train_lenet                                  (baseline, 4 workers)
 *   ./train_lenet --codec sbc:p=0.01 --delay 10    (SBC (2))
 */
#include <string.h>

#include "common/units.h"
#include "examples/image_task.h"
#include "examples/trainer.h"
#include "nn/lenet.h"
#include "nn/cuda_ops.h"
#include "nn/lenet_cuda.h"

typedef struct {
    ImageData data; /* first: image_data_iter reads it */
    LeNetConfig cfg;
} LeNetTask;

static Model *lenet_new(Task *t, int rank, int max_batch) {
    (void)rank;
    const LeNetConfig *cfg = &((LeNetTask *)t->ctx)->cfg;
    return t->cuda ? lenet_create_cuda(cfg, max_batch) : lenet_create(cfg, max_batch);
}

enum { O_DATASET = 1, O_SHARD, O_IMAGE_SIZE, O_HELP };
static const struct option own_options[] = {
    {"dataset", required_argument, 0, O_DATASET},
    {"shard", required_argument, 0, O_SHARD},
    {"image-size", required_argument, 0, O_IMAGE_SIZE},
    {"help", no_argument, 0, O_HELP},
    {0, 0, 0, 0},
};

int main(int argc, char **argv) {
    TrainOpts o;
    train_opts_default(&o);
    o.steps = 2000;
    o.batch = 128;
    o.lr = 0.001;
    o.eval_every = 0;
    o.print_every = 100;
    snprintf(o.optim, sizeof o.optim, "adam");
    snprintf(o.schedule, sizeof o.schedule, "constant");
    TrainOpts defaults = o;
    LeNetTask lt;
    memset(&lt, 0, sizeof lt);
    lt.data.shard_fixed = 1; /* SBC IV-A: "split the training data randomly into 4 shards" */
    lt.data.image_size = 32; /* folder datasets (the loader's own default, 224, is ResNet-50's) */
    char dataset[1100] = "mnist";
    struct option opts[96];
    train_options_merge(opts, 96, own_options);
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case O_HELP:
            printf("Usage: ./train_lenet [options]\n"
                   "Train LeNet5-Caffe (conv5x5 20, pool, conv5x5 50, pool, fc 500, relu, fc 10) on MNIST,\n"
                   "SBC's protocol by default: Adam, lr 0.001, batch 128 per worker, 2000 iterations, 4 workers\n"
                   "each holding one fixed random quarter of the training set.\n\n"
                   "Data:\n"
                   "  --dataset D          mnist (default) or folder:ROOT\n"
                   "  --image-size N       folder datasets: images resized and cropped to N x N (default 32)\n"
                   "  --shard fixed|epoch  SBC's fixed split (default) or a new split every epoch\n\n");
            train_opts_help(stdout, &defaults);
            return 0;
        case O_DATASET:
            if (strlen(optarg) >= sizeof dataset) train_usage_error(argv[0], "--dataset: path too long");
            snprintf(dataset, sizeof dataset, "%s", optarg);
            break;
        case O_IMAGE_SIZE: {
            long v;
            if (parse_long(optarg, &v) || v < 28 || v > 1024)
                train_usage_error(argv[0], "--image-size %s: expected 28..1024", optarg);
            lt.data.image_size = (int)v;
            break;
        }
        case O_SHARD:
            if (!strcmp(optarg, "epoch")) lt.data.shard_fixed = 0;
            else if (strcmp(optarg, "fixed")) train_usage_error(argv[0], "--shard %s: expected fixed or epoch", optarg);
            break;
        default: train_opts_getopt(&o, c, argv);
        }
    }
    train_opts_done(&o, argc, argv);
    char err[1024];
    if (image_data_open(&lt.data, dataset, err, sizeof err)) {
        fprintf(stderr, "error: %s\n", err);
        return 1;
    }
    lt.cfg = lenet_config();
    lt.cfg.num_classes = lt.data.num_classes;
    lt.cfg.in_channels = lt.data.C;
    lt.cfg.in_h = lt.data.H;
    lt.cfg.in_w = lt.data.W;
    lt.cfg.seed = o.seed;
    char name[128];
    snprintf(name, sizeof name, "lenet5-caffe on %.60s", dataset);
    Task task = {0};
    task.name = name;
    task.model_new = lenet_new;
#ifdef HAVE_CUDA
    task.thread_release = nn_cuda_release;
#endif
    task.data_new = image_data_iter;
    task.ctx = &lt;
    int status = train_run(&o, &task, &argc, &argv);
    image_data_close(&lt.data);
    return status;
}
