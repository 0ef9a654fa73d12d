/* train_lstm: LSTM language models on Penn Treebank (word level) or any text
 * (character level), with every distributed flag of train_resnet.
 *
 * Presets (sizes overridable):
 *   --preset sbc-word   SBC's WordLSTM: 2 x 650, dropout 0.5, PTB (TF "medium")
 *   --preset sbc-char   SBC's CharLSTM: 2 x 200, Shakespeare characters
 *                       (both: SGD lr 1, clip 5, batch 5 per client, SBC Table III)
 *   --preset dgc-ptb    DGC's PTB model: 2 x 1500, tied weights, dropout 0.65
 * Reports perplexity (word) or bits per character and perplexity (char) on the
 * validation split during training and on validation and test at the end.
 */
#include <stdlib.h>
#include <string.h>

#include "examples/lm_task.h"
#include "nn/cuda_ops.h"

enum { O_MODEL = 1, O_PRESET, O_HIDDEN, O_EMB, O_LAYERS, O_DROPOUT, O_TIE, O_BPTT, O_CLIP, O_TEXT, O_HELP };
static const struct option own_options[] = {
    {"model", required_argument, 0, O_MODEL},   {"preset", required_argument, 0, O_PRESET},
    {"hidden", required_argument, 0, O_HIDDEN}, {"emb", required_argument, 0, O_EMB},
    {"layers", required_argument, 0, O_LAYERS}, {"dropout", required_argument, 0, O_DROPOUT},
    {"tie", required_argument, 0, O_TIE},       {"bptt", required_argument, 0, O_BPTT},
    {"clip", required_argument, 0, O_CLIP},     {"text", required_argument, 0, O_TEXT},
    {"help", no_argument, 0, O_HELP},           {0, 0, 0, 0},
};

static void help(const TrainOpts *d) {
    printf("Usage: ./train_lstm [options]\n"
           "Train an LSTM language model with data-parallel workers and gradient compression.\n\n"
           "Model and data:\n"
           "  --model word|char    word level on Penn Treebank (default) or character level\n"
           "  --preset P           sbc-word (default for word): 2x650, emb 650, dropout 0.5 (TF PTB medium)\n"
           "                       sbc-char (default for char): 2x200, emb 200, dropout 0.5, Shakespeare\n"
           "                       both: SGD lr 1, clip 5, batch 5 per worker (SBC Table III)\n"
           "                       dgc-ptb: 2x1500, tied, dropout 0.65, lr 20, clip 0.25, plateau decay,\n"
           "                       batch 20 per worker\n"
           "  --hidden N --emb N --layers N --dropout P --tie 0|1   override the preset's sizes\n"
           "  --bptt T             truncated backpropagation length (default 35)\n"
           "  --clip X             gradient clipping by global norm (0 = off; DGC clips locally, x N^-1/2)\n"
           "  --text FILE          character model: train on FILE (default $DATA_DIR/shakespeare/input.txt,\n"
           "                       last 10%% held out for validation)\n\n");
    train_opts_help(stdout, d);
}

static long pos_int(const char *prog, const char *flag, const char *v, long lo, long hi) {
    char *end;
    long x = strtol(v, &end, 10);
    if (end == v || *end || x < lo || x > hi) train_usage_error(prog, "--%s %s: expected an integer in [%ld, %ld]", flag, v, lo, hi);
    return x;
}

int main(int argc, char **argv) {
    const char *model = "word", *preset = NULL, *text = NULL;
    long hidden = -1, emb = -1, layers = -1, tie = -1, bptt = 35;
    double dropout = -1, clip = -1;
    TrainOpts o;
    train_opts_default(&o);
    struct option opts[96];
    train_options_merge(opts, 96, own_options);
    /* first pass: model and preset decide the defaults (getopt_long, so their
     * abbreviations and --name=value forms count as in the second pass, which
     * reports every error) */
    opterr = 0;
    optind = 1;
    for (int c; (c = getopt_long(argc, argv, "", opts, NULL)) != -1;) {
        if (c == O_MODEL) model = optarg;
        if (c == O_PRESET) preset = optarg;
    }
    if (strcmp(model, "word") && strcmp(model, "char")) train_usage_error(argv[0], "--model %s: expected word or char", model);
    if (!preset) preset = model[0] == 'w' ? "sbc-word" : "sbc-char";
    LmTask lt;
    memset(&lt, 0, sizeof lt);
    if (!strcmp(preset, "sbc-word") || !strcmp(preset, "sbc-char")) {
        lt.cfg = preset[4] == 'w' ? lstm_lm_config_sbc_word() : lstm_lm_config_sbc_char();
        o.lr = 1.0;
        /* SBC Table III: batch 5 per client; with its 4 clients the global
         * batch is TF PTB "medium"'s 20 */
        o.batch = 5;
        clip = clip < 0 ? 5.0 : clip;
        snprintf(o.schedule, sizeof o.schedule, "constant");
    } else if (!strcmp(preset, "dgc-ptb")) {
        lt.cfg = lstm_lm_config_dgc_ptb();
        o.lr = 20;
        o.batch = 20;
        clip = 0.25;
        snprintf(o.schedule, sizeof o.schedule, "plateau:factor=0.25,patience=0");
    } else {
        train_usage_error(argv[0], "--preset %s: expected sbc-word, sbc-char or dgc-ptb", preset);
    }
    o.epochs = 1;
    o.print_every = 50;
    snprintf(o.optim, sizeof o.optim, "sgd");
    /* DGC section 4.1: "The warm-up period is 1 epoch out of 40 epochs" for the
     * language model (CIFAR's 4 epochs are the exchange's default) */
    o.dist.dgc_warmup = 1;
    TrainOpts defaults = o;
    int c;
    opterr = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        char *end;
        switch (c) {
        case O_HELP: help(&defaults); return 0;
        case O_MODEL: case O_PRESET: break; /* read above */
        case O_HIDDEN: hidden = pos_int(argv[0], "hidden", optarg, 1, 65536); break;
        case O_EMB: emb = pos_int(argv[0], "emb", optarg, 1, 65536); break;
        case O_LAYERS: layers = pos_int(argv[0], "layers", optarg, 1, 64); break;
        case O_TIE: tie = pos_int(argv[0], "tie", optarg, 0, 1); break;
        case O_BPTT: bptt = pos_int(argv[0], "bptt", optarg, 1, 100000); break;
        case O_DROPOUT:
            dropout = strtod(optarg, &end);
            if (end == optarg || *end || !(dropout >= 0 && dropout < 1)) /* NaN too */ train_usage_error(argv[0], "--dropout %s: expected [0, 1)", optarg);
            break;
        case O_CLIP:
            clip = strtod(optarg, &end);
            if (end == optarg || *end || !(clip >= 0)) train_usage_error(argv[0], "--clip %s: expected a number >= 0", optarg);
            break;
        case O_TEXT:
            if (!optarg[0]) train_usage_error(argv[0], "--text '': expected a file (an empty one would be ignored)");
            text = optarg;
            break;
        default: train_opts_getopt(&o, c, argv);
        }
    }
    train_opts_done(&o, argc, argv);
    char err[1024];
    int is_char = model[0] == 'c';
    if (is_char ? char_corpus_load(&lt.corpus, text, 0.1, err, sizeof err) : ptb_load(&lt.corpus, NULL, err, sizeof err)) {
        fprintf(stderr, "error: %s\n", err);
        return 1;
    }
    if (hidden > 0) lt.cfg.hidden = (int)hidden;
    if (emb > 0) lt.cfg.emb = (int)emb;
    if (layers > 0) lt.cfg.layers = (int)layers;
    if (tie >= 0) lt.cfg.tie_weights = (int)tie;
    if (dropout >= 0) lt.cfg.dropout = (float)dropout;
    if (lt.cfg.tie_weights && emb <= 0) lt.cfg.emb = lt.cfg.hidden;
    lt.cfg.vocab = lt.corpus.vocab.V;
    lt.cfg.seed = o.seed;
    lt.seed = o.seed;
    lt.bptt = (int)bptt;
    snprintf(lt.name, sizeof lt.name, "lstm %s %dx%d emb %d%s (%s), vocab %d", is_char ? "char" : "word",
             lt.cfg.layers, lt.cfg.hidden, lt.cfg.emb, lt.cfg.tie_weights ? " tied" : "", preset, lt.cfg.vocab);
    Task task = {0};
    task.name = lt.name;
    task.lm = 1;
    task.is_char = is_char;
    task.has_valid = 1;
    task.clip_norm = clip > 0 ? clip : 0;
    task.model_new = lm_task_model;
#ifdef HAVE_CUDA
    task.thread_release = nn_cuda_release;
#endif
    task.data_new = lm_task_data;
    task.ctx = &lt;
    int status = train_run(&o, &task, &argc, &argv);
    text_corpus_free(&lt.corpus);
    return status;
}
