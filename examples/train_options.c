/* The trainers' shared command line (see trainer.h): the flags, their
 * validation and the shared part of --help. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/blas.h"
#include "common/units.h"
#include "examples/trainer_internal.h"


enum {
    O_EPOCHS = TRAIN_OPT_BASE, O_STEPS, O_BATCH, O_LR, O_OPTIM, O_MOMENTUM, O_WD, O_NESTEROV, O_SCHEDULE, O_SEED,
    O_THREADS, O_EVAL_EVERY, O_PRINT_EVERY, O_LOG, O_SAVE, O_SAVE_EVERY, O_RESUME, O_WORKERS, O_BACKEND, O_CODEC,
    O_LAYER_CODEC, O_MIN_COMPRESS, O_TOPOLOGY, O_MEMORY, O_DELAY, O_BANDWIDTH, O_LATENCY, O_CODEC_THREADS, O_QUIET,
    O_DATA_DIR, O_KEEP_LAST, O_STOP_AT, O_DEVICE, O_CUDNN, O_EMA, O_TIMEOUT, O_SHOW_POLICY, O_LOG_LAYERS, O_EXPORT,
    O_INIT_FROM
};

const struct option train_long_options[] = {
    {"epochs", required_argument, 0, O_EPOCHS},
    {"steps", required_argument, 0, O_STEPS},
    {"stop-at", required_argument, 0, O_STOP_AT},
    {"batch", required_argument, 0, O_BATCH},
    {"lr", required_argument, 0, O_LR},
    {"optim", required_argument, 0, O_OPTIM},
    {"momentum", required_argument, 0, O_MOMENTUM},
    {"wd", required_argument, 0, O_WD},
    {"nesterov", no_argument, 0, O_NESTEROV},
    {"schedule", required_argument, 0, O_SCHEDULE},
    {"seed", required_argument, 0, O_SEED},
    {"threads", required_argument, 0, O_THREADS},
    {"eval-every", required_argument, 0, O_EVAL_EVERY},
    {"print-every", required_argument, 0, O_PRINT_EVERY},
    {"log", required_argument, 0, O_LOG},
    {"save", required_argument, 0, O_SAVE},
    {"save-every", required_argument, 0, O_SAVE_EVERY},
    {"resume", required_argument, 0, O_RESUME},
    {"export", required_argument, 0, O_EXPORT},
    {"init-from", required_argument, 0, O_INIT_FROM},
    {"workers", required_argument, 0, O_WORKERS},
    {"backend", required_argument, 0, O_BACKEND},
    {"device", required_argument, 0, O_DEVICE},
    {"cudnn", required_argument, 0, O_CUDNN},
    {"ema", required_argument, 0, O_EMA},
    {"codec", required_argument, 0, O_CODEC},
    {"layer-codec", required_argument, 0, O_LAYER_CODEC},
    {"min-compress", required_argument, 0, O_MIN_COMPRESS},
    {"keep-last-fp32", required_argument, 0, O_KEEP_LAST},
    {"topology", required_argument, 0, O_TOPOLOGY},
    {"memory", required_argument, 0, O_MEMORY},
    {"delay", required_argument, 0, O_DELAY},
    {"bandwidth", required_argument, 0, O_BANDWIDTH},
    {"latency", required_argument, 0, O_LATENCY},
    {"codec-threads", required_argument, 0, O_CODEC_THREADS},
    {"data-dir", required_argument, 0, O_DATA_DIR},
    {"quiet", no_argument, 0, O_QUIET},
    {"show-policy", no_argument, 0, O_SHOW_POLICY},
    {"log-layers", required_argument, 0, O_LOG_LAYERS},
    {"timeout", required_argument, 0, O_TIMEOUT},
    {0, 0, 0, 0},
};

void train_opts_default(TrainOpts *o) {
    memset(o, 0, sizeof *o);
    o->epochs = 10;
    o->batch = 128;
    o->lr = 0.1;
    snprintf(o->optim, sizeof o->optim, "sgd");
    o->momentum = -1;
    o->wd = -1;
    o->nesterov = -1;
    o->cudnn_find = -1;
    snprintf(o->schedule, sizeof o->schedule, "constant");
    o->eval_every = 1;
    o->print_every = 20;
    o->workers = 4;
    o->timeout = TRAIN_DEFAULT_TIMEOUT;
    snprintf(o->backend, sizeof o->backend, "auto");
    dist_config_default(&o->dist);
    o->memory_flag = -1;
    snprintf(o->codec_text, sizeof o->codec_text, "fp32");
}

void train_options_merge(struct option *out, int cap, const struct option *own) {
    int n = 0;
    for (const struct option *p = own; p && p->name && n < cap - 1; p++) out[n++] = *p;
    for (const struct option *p = train_long_options; p->name && n < cap - 1; p++) out[n++] = *p;
    memset(&out[n], 0, sizeof out[n]);
}

/* the last line of every command-line error */
static void usage_hint_exit(const char *prog) {
    fprintf(stderr, "Try '%s --help' for the usage.\n", prog);
    exit(2);
}

void train_usage_error(const char *prog, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", prog);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    usage_hint_exit(prog);
}

static int bad(const char *flag, const char *arg, const char *want) {
    fprintf(stderr, "error: --%s %s: expected %s\n", flag, arg, want);
    return -1;
}

static int get_long(const char *flag, const char *arg, long lo, long hi, long *out) {
    long v;
    if (parse_long(arg, &v) || v < lo || v > hi) {
        char want[96];
        snprintf(want, sizeof want, "an integer in [%ld, %ld]", lo, hi);
        return bad(flag, arg, want);
    }
    *out = v;
    return 0;
}

static int get_double(const char *flag, const char *arg, double lo, double hi, double *out) {
    double v;
    if (parse_double(arg, &v) || v < lo || v > hi) {
        char want[96];
        snprintf(want, sizeof want, "a number in [%g, %g]", lo, hi);
        return bad(flag, arg, want);
    }
    *out = v;
    return 0;
}

static int copy_str(char *dst, size_t cap, const char *flag, const char *arg) {
    if (!arg[0]) return bad(flag, "''", "a value (an empty one would be ignored)");
    if (strlen(arg) >= cap) return bad(flag, arg, "a shorter value");
    snprintf(dst, cap, "%s", arg);
    return 0;
}

int train_opts_handle(TrainOpts *o, int id, const char *arg) {
    long v;
    char err[512];
    switch (id) {
    case O_EPOCHS: o->epochs_flag = 1; return get_long("epochs", arg, 1, 100000, &o->epochs) ? -1 : 1;
    case O_STEPS:
        o->steps_flag = 1;
        if (get_long("steps", arg, 0, 1000000000L, &o->steps)) return -1;
        o->no_steps = o->steps == 0; /* 0: no step (the schedule's length then comes from --epochs) */
        return 1;
    case O_STOP_AT: return get_long("stop-at", arg, 1, 1000000000L, &o->stop_at) ? -1 : 1;
    case O_EMA: return get_double("ema", arg, 0, 0.999999, &o->ema) ? -1 : 1;
    case O_BATCH:
        if (get_long("batch", arg, 1, 65536, &v)) return -1;
        o->batch = (int)v;
        return 1;
    case O_LR: return get_double("lr", arg, 0, 1e3, &o->lr) ? -1 : 1;
    case O_OPTIM: return copy_str(o->optim, sizeof o->optim, "optim", arg) ? -1 : 1;
    case O_MOMENTUM: return get_double("momentum", arg, 0, 0.9999, &o->momentum) ? -1 : 1;
    case O_WD: return get_double("wd", arg, 0, 1, &o->wd) ? -1 : 1;
    case O_NESTEROV: o->nesterov = 1; return 1;
    case O_SCHEDULE: return copy_str(o->schedule, sizeof o->schedule, "schedule", arg) ? -1 : 1;
    case O_SEED:
        if (get_long("seed", arg, 0, 0x7FFFFFFFFFFFFFFFL, &v)) return -1;
        o->seed = (uint64_t)v;
        return 1;
    case O_THREADS:
        if (get_long("threads", arg, 1, 1024, &v)) return -1;
        o->threads = (int)v;
        return 1;
    case O_EVAL_EVERY:
        if (get_long("eval-every", arg, -1, 100000, &v)) return -1;
        o->eval_every = (int)v;
        return 1;
    case O_PRINT_EVERY: return get_long("print-every", arg, 1, 1000000000L, &o->print_every) ? -1 : 1;
    case O_LOG: return copy_str(o->log, sizeof o->log, "log", arg) ? -1 : 1;
    case O_LOG_LAYERS: return copy_str(o->log_layers, sizeof o->log_layers, "log-layers", arg) ? -1 : 1;
    case O_SAVE: return copy_str(o->save, sizeof o->save, "save", arg) ? -1 : 1;
    case O_SAVE_EVERY: return get_long("save-every", arg, 0, 1000000000L, &o->save_every) ? -1 : 1;
    case O_RESUME: return copy_str(o->resume, sizeof o->resume, "resume", arg) ? -1 : 1;
    case O_EXPORT: return copy_str(o->export_path, sizeof o->export_path, "export", arg) ? -1 : 1;
    case O_INIT_FROM: return copy_str(o->init_from, sizeof o->init_from, "init-from", arg) ? -1 : 1;
    case O_WORKERS:
        if (get_long("workers", arg, 1, 256, &v)) return -1;
        o->workers = (int)v;
        o->workers_given = 1;
        return 1;
    case O_BACKEND:
        if (strcmp(arg, "auto") && strcmp(arg, "local") && strcmp(arg, "mpi") && strcmp(arg, "nccl"))
            return bad("backend", arg, "auto, local, mpi or nccl");
        snprintf(o->backend, sizeof o->backend, "%s", arg);
        return 1;
    case O_DEVICE:
        if (strcmp(arg, "cpu") && strcmp(arg, "cuda")) return bad("device", arg, "cpu or cuda");
        o->cuda = arg[0] == 'c' && arg[1] == 'u';
        return 1;
    case O_CUDNN:
        if (!strcmp(arg, "heuristic")) o->cudnn_find = 0;
        else if (!strcmp(arg, "find")) o->cudnn_find = 1;
        else if (!strcmp(arg, "fast")) o->cudnn_find = 2;
        else return bad("cudnn", arg, "heuristic, find or fast");
        return 1;
    case O_CODEC:
        if (dist_parse_codec(&o->dist, arg, err, sizeof err)) {
            fprintf(stderr, "error: %s\n", err);
            return -1;
        }
        return copy_str(o->codec_text, sizeof o->codec_text, "codec", arg) ? -1 : 1;
    case O_LAYER_CODEC:
        if (o->dist.policy.nrules >= TRAIN_MAX_RULES) return bad("layer-codec", arg, "at most 32 rules");
        if (policy_parse_rule(&o->dist.policy.rules[o->dist.policy.nrules], arg, err, sizeof err)) {
            fprintf(stderr, "error: %s\n", err);
            return -1;
        }
        o->dist.policy.nrules++;
        return 1;
    case O_MIN_COMPRESS: return get_long("min-compress", arg, 0, 1L << 40, &o->dist.policy.min_compress) ? -1 : 1;
    case O_KEEP_LAST:
        if (strcmp(arg, "0") && strcmp(arg, "1")) return bad("keep-last-fp32", arg, "0 or 1");
        o->dist.policy.keep_last_fp32 = arg[0] == '1';
        return 1;
    case O_TOPOLOGY:
        if ((o->dist.topology = topology_parse(arg)) < 0) return bad("topology", arg, "allreduce, allgather, ps or ring");
        return 1;
    case O_MEMORY:
        if ((o->memory_flag = memory_parse(arg)) < 0) return bad("memory", arg, "none, residual or dgc");
        return 1;
    case O_DELAY:
        if (get_long("delay", arg, 1, 1000000, &v)) return -1;
        o->dist.delay = (int)v;
        return 1;
    case O_BANDWIDTH:
        if (parse_bandwidth(arg, &o->dist.bandwidth)) return bad("bandwidth", arg, "a rate such as 100mbit, 1gbit, 10MB/s");
        return 1;
    case O_LATENCY:
        if (parse_duration(arg, &o->dist.latency)) return bad("latency", arg, "a duration such as 0.5ms, 20us");
        return 1;
    case O_CODEC_THREADS:
        if (get_long("codec-threads", arg, 0, 1024, &v)) return -1;
        o->dist.codec_threads = (int)v;
        return 1;
    case O_DATA_DIR:
        if (!arg[0]) return bad("data-dir", "''", "a folder (an empty one would be ignored)");
        setenv("DATA_DIR", arg, 1);
        return 1;
    case O_QUIET: o->quiet = 1; return 1;
    case O_SHOW_POLICY: o->show_policy = 1; return 1;
    case O_TIMEOUT:
        if (parse_duration(arg, &o->timeout) || o->timeout > 1e7)
            return bad("timeout", arg, "a duration such as 600, 90s, 15min (0: wait forever)");
        return 1;
    }
    return 0;
}

/* --optim with the shorthand flags over it, and --schedule; 0, or -1 after printing the error */
int parse_optim_sched(const TrainOpts *o, OptConfig *oc, LrSched *sched) {
    char err[512];
    if (opt_config_parse(oc, o->optim, err, sizeof err)) {
        fprintf(stderr, "error: --optim: %s\n", err);
        return -1;
    }
    /* a shorthand flag the optimizer has no use for is an error, not ignored */
    const char *unused = o->momentum >= 0 && !opt_key_applies(oc->kind, "momentum") ? "--momentum"
                         : o->nesterov > 0 && !opt_key_applies(oc->kind, "nesterov") ? "--nesterov"
                                                                                       : NULL;
    if (unused) {
        fprintf(stderr, "error: %s does not apply to --optim %s\n", unused, opt_kind_name(oc->kind));
        return -1;
    }
    if (o->momentum >= 0) oc->momentum = o->momentum;
    if (o->wd >= 0) oc->weight_decay = o->wd;
    if (o->nesterov > 0) oc->nesterov = 1;
    if (opt_config_validate(oc, err, sizeof err)) {
        fprintf(stderr, "error: optimizer: %s\n", err);
        return -1;
    }
    if (lr_sched_parse(sched, o->schedule, o->lr, err, sizeof err)) {
        fprintf(stderr, "error: --schedule: %s\n", err);
        return -1;
    }
    return 0;
}

/* whether path (--flag) cannot be written: its folder missing or read-only, or a folder
 * itself; says why */
static int unwritable(const char *flag, const char *path) {
    char dir[1100];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash) slash[slash == dir ? 1 : 0] = 0;
    else snprintf(dir, sizeof dir, ".");
    struct stat st;
    const char *why = stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)  ? "its folder does not exist"
                      : access(dir, W_OK | X_OK) != 0               ? "its folder is not writable"
                      : stat(path, &st) == 0 && S_ISDIR(st.st_mode) ? "it is a folder"
                                                                    : NULL;
    if (why) fprintf(stderr, "error: cannot write --%s %s: %s\n", flag, path, why);
    return why != NULL;
}

/* checks across options, before any data is read: the caller exits with status 2 */
int train_opts_finish(TrainOpts *o) {
    if (o->memory_flag >= 0) o->dist.memory = o->memory_flag; /* after every --codec, whatever the order */
    if (o->epochs_flag && !o->steps_flag) o->steps = 0;     /* train_lenet's default of 2000 steps gives way */
    if (o->dist.bandwidth == 0 && o->dist.latency > 0) {
        fprintf(stderr, "error: --latency needs --bandwidth\n");
        return -1;
    }
    if (o->save_every > 0 && !o->save[0]) {
        fprintf(stderr, "error: --save-every needs --save\n");
        return -1;
    }
    /* a file that cannot be written is said before the run, not after it (and the logs
     * are created only once the data and the model are there) */
    if (o->init_from[0] && o->resume[0]) {
        fprintf(stderr, "error: --init-from and --resume exclude each other (a checkpoint holds the weights already)\n");
        return -1;
    }
    const char *outs[4][2] = {{"save", o->save}, {"log", o->log}, {"log-layers", o->log_layers},
                              {"export", o->export_path}};
    for (int i = 0; i < 4; i++)
        if (outs[i][1][0] && unwritable(outs[i][0], outs[i][1])) return -1;
    /* local workers are threads that each call the BLAS (common/blas.h) */
    int local = !strcmp(o->backend, "local") || (!strcmp(o->backend, "auto") && !comm_mpi_launched());
    int most = blas_max_callers();
    if (local && most > 0 && o->workers > most) {
        fprintf(stderr, "error: --workers %d: this build's OpenBLAS serves at most %d threads calling it at once "
                "(its MAX_THREADS is %d); run at most %d local workers, or one worker per process with mpirun\n",
                o->workers, most, most / 2, most);
        return -1;
    }
    if (o->cudnn_find >= 0 && !o->cuda) {
        fprintf(stderr, "error: --cudnn applies to --device cuda only\n");
        return -1;
    }
    OptConfig oc;
    LrSched sched;
    if (parse_optim_sched(o, &oc, &sched)) return -1;
    /* what the exchange cannot run (DGC's constraints, a codec on allreduce), said now */
    DistConfig dc = o->dist;
    char err[512];
    if (dist_config_resolve(&dc, oc.kind, err, sizeof err)) {
        fprintf(stderr, "error: %s\n", err);
        return -1;
    }
    return 0;
}

void train_opts_getopt(TrainOpts *o, int c, char **argv) {
    if (c == '?') train_usage_error(argv[0], "unknown or incomplete option '%s'", argv[optind - 1]);
    int r = train_opts_handle(o, c, optarg);
    if (r < 0) usage_hint_exit(argv[0]); /* train_opts_handle has said what is wrong */
    if (r == 0) train_usage_error(argv[0], "unknown option '%s'", argv[optind - 1]);
}

void train_opts_done(TrainOpts *o, int argc, char **argv) {
    if (optind < argc) train_usage_error(argv[0], "unexpected argument '%s'", argv[optind]);
    if (train_opts_finish(o)) usage_hint_exit(argv[0]);
}

void train_opts_help(FILE *fp, const TrainOpts *d) {
    char most[32] = "256";
    if (blas_max_callers() > 0 && blas_max_callers() < 256) snprintf(most, sizeof most, "%d", blas_max_callers());
    fprintf(fp,
            "Training:\n"
            "  --epochs N           epochs (default %ld)\n"
            "  --steps N            stop after N steps instead (the schedule spans N steps); 0: no step\n"
            "                       (with --export, --init-from or --resume: convert or evaluate a model)\n"
            "  --stop-at N          end this run after step N; the schedule still spans the whole\n"
            "                       run, so --save then --resume continues it (splitting long runs)\n"
            "  --batch N            batch PER WORKER (default %d); the global batch is N x workers\n"
            "  --lr X               base learning rate (default %g)\n"
            "  --optim SPEC         optimizer NAME[:key=value,...] (default %s; see below)\n"
            "  --momentum X         momentum (sgd, rmsprop), overrides the spec\n"
            "  --nesterov           Nesterov momentum (sgd)\n"
            "  --wd X               weight decay, overrides the spec\n"
            "  --schedule SPEC      learning-rate schedule (default %s; see below), counted in steps\n"
            "  --seed N             seed of initialization, data order, augmentation, codecs (default 0)\n"
            "  --threads N          compute threads in total (default: all cores; divided among local workers)\n"
            "  --eval-every N       evaluate every N epochs (default %d; 0 = at the end only, -1 = never:\n"
            "                       throughput runs)\n"
            "  --ema D              evaluate an exponential moving average of the parameters with decay D\n"
            "                       (TernGrad section 4 evaluates every run with 0.9999; default 0 = off)\n"
            "  --print-every N      progress line every N steps (default %ld)\n"
            "  --log FILE           write every progress and evaluation line as CSV (.jsonl: JSON lines);\n"
            "                       a --resume appends to it\n"
            "  --log-layers FILE    at every progress line, worker 0's frames per tensor as CSV: bytes per\n"
            "                       step, ratio, density, relative error, codec time (scripts/plot.py --layers)\n"
            "  --save FILE          checkpoint at the end\n"
            "  --save-every N       with --save: also every N steps (each replaces the last)\n"
            "  --resume FILE        continue a run from its checkpoint, exactly as if never stopped; on another\n"
            "                       --workers or mpirun -np (a lost node): each worker's state by a stated rule\n"
            "  --export FILE        at the end, write the model as PyTorch's state_dict in safetensors format\n"
            "                       (weights and batch-norm running statistics; README: PyTorch)\n"
            "  --init-from FILE     start from the weights of a safetensors state_dict (from --export or\n"
            "                       PyTorch); every tensor must be there with its shape, float32\n"
            "  --data-dir DIR       where the datasets are (default $DATA_DIR, else data/)\n"
            "  --show-policy        the per-tensor policy as a table (tensor, size, codec, why), not one line\n"
            "  --quiet              neither: only the exchange's line\n"
            "  --help               this help\n"
            "Distributed (docs/DIST.md):\n"
            "  --workers N          data-parallel workers (default %d, at most 256, and at most %s local\n"
            "                       workers here: the threads that this build's BLAS serves at once);\n"
            "                       threads of this process unless started by mpirun, where every\n"
            "                       process is one worker (and N is ignored)\n"
            "  --backend B          auto (default), local (threads), mpi, or nccl (one GPU per MPI process)\n"
            "  --device cpu|cuda    where forward and backward run (default cpu); cuda models mirror the\n"
            "                       parameters on the GPU; every codec and topology keeps the whole step\n"
            "                       there (docs/GPU.md)\n"
            "  --cudnn heuristic|find|fast\n"
            "                       with --device cuda: convolution algorithms by cuDNN's heuristic (default:\n"
            "                       the same choice in every process on the same GPU model and cuDNN, so\n"
            "                       runs and --resume repeat bit for bit), by timing them on the GPU (find:\n"
            "                       possibly faster, not reproducible across processes), or by timing every\n"
            "                       algorithm, non-deterministic, FFT and Winograd ones too (fast: ResNet-20's\n"
            "                       step took half the time on an H200; runs do not repeat bit for bit)\n"
            "  --codec SPEC         codec of every compressible tensor: NAME[:key=value,...] (default fp32);\n"
            "                       also: graddrop (Gradient Dropping), dgc:warmup=EPOCHS,clip=NORM,\n"
            "                       terngrad:share=0|1, any codec with memory=none|residual|dgc\n"
            "  --layer-codec P=SPEC codec for tensors whose name matches the glob P (repeatable)\n"
            "  --min-compress N     tensors with fewer values go uncompressed (default: none by size; batch\n"
            "                       norm always, biases except with terngrad and 3lc)\n"
            "  --keep-last-fp32 0|1 send the last layer uncompressed (default: 1 for terngrad)\n"
            "  --topology T         allreduce, allgather, ps or ring (default: the codec's paper setting)\n"
            "  --memory M           error feedback: none, residual or dgc (default: the codec's)\n"
            "  --delay N            local steps between exchanges (SBC / federated averaging; default 1);\n"
            "                       sbc's p defaults to 0.01 with N > 1 (SBC (2), (3)), else 0.001 (SBC (1))\n"
            "  --bandwidth BW       network model: link rate, e.g. 100mbit, 1gbit (default: no model)\n"
            "  --latency T          network model: per-message latency, e.g. 0.5ms\n"
            "  --codec-threads N    threads of the exchange's per-tensor passes and chunk-parallel encoders\n"
            "                       (default: OpenMP default)\n"
            "  --timeout T          a worker that waits longer than T in one exchange or collective ends the\n"
            "                       job, naming the step, the operation and the workers that did not arrive\n"
            "                       (a stalled or stuck rank); default %gs, 0 = wait forever\n",
            d->epochs, d->batch, d->lr, d->optim, d->schedule, d->eval_every, d->print_every, d->workers, most,
            d->timeout);
    fprintf(fp, "\n");
    opt_help(fp);
    fprintf(fp, "\n");
    lr_sched_help(fp);
    fprintf(fp, "\n");
    codec_print_help(fp);
}
