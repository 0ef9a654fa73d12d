/* train_resnet: ResNet on CIFAR-10 (or ResNet-50 on image folders), with any
 * number of data-parallel workers and any gradient codec.
 *
 *   ./train_resnet --depth 20 --epochs 10 --schedule cosine --workers 1
 *   ./train_resnet --codec=sbc --delay=10          (SBC's setting: 4 workers)
 *   mpirun -np 4 ./train_resnet --codec 3lc        (one worker per process)
 */
#include <stdlib.h>
#include <string.h>

#include "common/units.h"
#include "examples/image_task.h"
#include "examples/trainer.h"
#include "nn/resnet.h"
#include "nn/cuda_ops.h"
#include "nn/resnet_cuda.h"

typedef struct {
    ImageData data; /* first: image_data_iter reads it */
    int arch50;
    ResNetConfig cfg;
    ResNet50Config cfg50;
    char name[64];
} ResNetTask;

static Model *resnet_new(Task *t, int rank, int max_batch) {
    (void)rank;
    ResNetTask *rt = t->ctx;
    if (t->cuda)
        return rt->arch50 ? resnet50_create_cuda(&rt->cfg50, max_batch) : resnet_cifar_create_cuda(&rt->cfg, max_batch);
    return rt->arch50 ? resnet50_create(&rt->cfg50, max_batch) : resnet_cifar_create(&rt->cfg, max_batch);
}

enum { O_DEPTH = 1, O_ARCH, O_SHORTCUT, O_DATASET, O_IMAGE_SIZE, O_SHARD, O_HELP };
static const struct option own_options[] = {
    {"depth", required_argument, 0, O_DEPTH},
    {"arch", required_argument, 0, O_ARCH},
    {"shortcut", required_argument, 0, O_SHORTCUT},
    {"dataset", required_argument, 0, O_DATASET},
    {"image-size", required_argument, 0, O_IMAGE_SIZE},
    {"shard", required_argument, 0, O_SHARD},
    {"help", no_argument, 0, O_HELP},
    {0, 0, 0, 0},
};

static void help(const TrainOpts *d) {
    printf("Usage: ./train_resnet [options]\n"
           "Train a ResNet with data-parallel workers and gradient compression.\n\n"
           "Model and data:\n"
           "  --arch A             resnet (CIFAR ResNet, He et al. 4.2; default) or resnet50 (ImageNet layout)\n"
           "  --depth N            CIFAR ResNet depth 6n+2: 20, 32, 44, 56, 110, ... (default 20)\n"
           "  --shortcut A|B       A: identity + zero padding (default), B: 1x1 projection\n"
           "  --dataset D          cifar10 (default) or folder:ROOT (ROOT/train/<class>/*.jpg, ROOT/val/...)\n"
           "  --image-size N       folder datasets: crop size (default 224)\n"
           "  --shard epoch|fixed  worker shards: a new split each epoch, or SBC's fixed split (default:\n"
           "                       fixed with --codec sbc, else epoch)\n\n");
    train_opts_help(stdout, d);
}

int main(int argc, char **argv) {
    TrainOpts o;
    train_opts_default(&o);
    int shard = -1; /* --shard: -1 = the codec's paper setting */
    o.epochs = 10;
    o.batch = 128;
    o.lr = 0.1;
    snprintf(o.optim, sizeof o.optim, "sgd:momentum=0.9,weight_decay=0.0001");
    snprintf(o.schedule, sizeof o.schedule, "cosine");
    TrainOpts defaults = o;
    ResNetTask rt;
    memset(&rt, 0, sizeof rt);
    int depth = 20, arch50 = 0, shortcut = RESNET_SHORTCUT_A;
    char dataset[1100] = "cifar10";
    struct option opts[96];
    train_options_merge(opts, 96, own_options);
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        long v;
        switch (c) {
        case O_HELP: help(&defaults); return 0;
        case O_DEPTH:
            if (parse_long(optarg, &v) || v < 8 || (v - 2) % 6 != 0 || v > 1202) train_usage_error(argv[0], "--depth %s: expected 6n+2 (20, 32, 44, 56, 110)", optarg);
            depth = (int)v;
            break;
        case O_ARCH:
            if (!strcmp(optarg, "resnet50")) arch50 = 1;
            else if (!strcmp(optarg, "resnet")) arch50 = 0;
            else train_usage_error(argv[0], "--arch %s: expected resnet or resnet50", optarg);
            break;
        case O_SHORTCUT:
            if (!strcmp(optarg, "A") || !strcmp(optarg, "a")) shortcut = RESNET_SHORTCUT_A;
            else if (!strcmp(optarg, "B") || !strcmp(optarg, "b")) shortcut = RESNET_SHORTCUT_B;
            else train_usage_error(argv[0], "--shortcut %s: expected A or B", optarg);
            break;
        case O_DATASET:
            if (strlen(optarg) >= sizeof dataset) train_usage_error(argv[0], "--dataset: path too long");
            snprintf(dataset, sizeof dataset, "%s", optarg);
            break;
        case O_IMAGE_SIZE:
            if (parse_long(optarg, &v) || v < 32 || v > 1024)
                train_usage_error(argv[0], "--image-size %s: expected 32..1024", optarg);
            rt.data.image_size = (int)v;
            break;
        case O_SHARD:
            if (!strcmp(optarg, "fixed")) shard = 1;
            else if (!strcmp(optarg, "epoch")) shard = 0;
            else train_usage_error(argv[0], "--shard %s: expected epoch or fixed", optarg);
            break;
        default: train_opts_getopt(&o, c, argv);
        }
    }
    train_opts_done(&o, argc, argv);
    /* SBC section IV-A splits the data once ("split the training data randomly
     * into 4 shards ... assign one shard to every one of the 4 clients") */
    rt.data.shard_fixed = shard >= 0 ? shard : o.dist.policy.global.ops->id == CODEC_SBC;
    char err[1024];
    if (image_data_open(&rt.data, dataset, err, sizeof err)) {
        fprintf(stderr, "error: %s\n", err);
        return 1;
    }
    rt.arch50 = arch50;
    if (arch50) {
        rt.cfg50 = resnet50_config();
        rt.cfg50.num_classes = rt.data.num_classes;
        rt.cfg50.in_channels = rt.data.C;
        rt.cfg50.in_h = rt.data.H;
        rt.cfg50.in_w = rt.data.W;
        rt.cfg50.seed = o.seed;
        snprintf(rt.name, sizeof rt.name, "resnet50 on %.40s", dataset);
    } else {
        rt.cfg = resnet_cifar_config(depth);
        rt.cfg.shortcut = shortcut;
        rt.cfg.num_classes = rt.data.num_classes;
        rt.cfg.in_channels = rt.data.C;
        rt.cfg.in_h = rt.data.H;
        rt.cfg.in_w = rt.data.W;
        rt.cfg.seed = o.seed;
        snprintf(rt.name, sizeof rt.name, "resnet%d%s on %.40s", depth, shortcut == RESNET_SHORTCUT_B ? "-B" : "", dataset);
    }
    Task task = {0};
    task.name = rt.name;
    task.model_new = resnet_new;
#ifdef HAVE_CUDA
    task.thread_release = nn_cuda_release;
#endif
    task.data_new = image_data_iter;
    task.ctx = &rt;
    int status = train_run(&o, &task, &argc, &argv);
    image_data_close(&rt.data);
    return status;
}
