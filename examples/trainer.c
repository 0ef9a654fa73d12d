/* The shared training loop and CLI (see trainer.h). */
#include "examples/trainer.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

#ifdef HAVE_OPENMP
#include <omp.h>
#endif

#include "common/blas.h"
#include "common/check.h"
#include "common/ckpt.h"
#include "common/clock.h"
#include "common/crc32c.h"
#include "common/units.h"
#if defined(__has_include)
#if __has_include("gcx_version.h")
#include "gcx_version.h"
#endif
#endif
#ifndef GCX_VERSION
#define GCX_VERSION "unknown"
#endif
#include "dist/comm_nccl.h"
#include "dist/exchange_cuda.h"
#include "nn/state_dict.h"
#ifdef HAVE_CUDA
#include "nn/cuda_ops.h"
#include <cuda_runtime.h>

#include "common/cuda_check.h"
#include "nn/model_cuda.h"
#include "optim/optim_cuda.h"
#endif

/* ------------------------------------------------------------ options ---- */
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
        if (strcmp(arg, "heuristic") && strcmp(arg, "find")) return bad("cudnn", arg, "heuristic or find");
        o->cudnn_find = arg[0] == 'f';
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
static int parse_optim_sched(const TrainOpts *o, OptConfig *oc, LrSched *sched) {
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
            "                       parameters on the GPU; fp32 and allgathers of stateless codecs keep the\n"
            "                       whole step there (docs/GPU.md; written, not yet run on a GPU)\n"
            "  --cudnn heuristic|find\n"
            "                       with --device cuda: convolution algorithms by cuDNN's heuristic (default:\n"
            "                       the same choice in every process on the same GPU model and cuDNN, so\n"
            "                       runs and --resume repeat bit for bit) or by timing them on the GPU\n"
            "                       (find: possibly faster, not reproducible across processes)\n"
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

/* ------------------------------------------------------------ helpers ---- */
/* shared by the workers of one process */
typedef struct {
    TrainOpts *o;
    Task *task;
    OptConfig oc;
    LrSched sched;        /* as parsed: each worker runs its own copy */
    FILE *log;
    FILE *layers;         /* --log-layers (rank 0) */
    int log_json;
    int log_failed;       /* a write to --log failed: said once, the log closed, the exit status 1 */
    int log_fresh;        /* the log was empty when opened: it gets the CSV header */
    int stopped;          /* the workers agreed to stop on a SIGINT/SIGTERM after this many steps (0: not) */
    char command[2048];   /* the command line, for the log's first record */
    int status;           /* exit status (any worker sets it, after the workers agreed) */
    LocalGroup *group;
    int threads_per_worker;
    int world;
} Shared;

/* sections of a worker's state -> one blob for a gather */
static void sections_pack(ByteBuf *b, const CkptSection *s, int n) {
    size_t total = 4;
    for (int i = 0; i < n; i++) total += CKPT_NAME_MAX + 8 + s[i].len;
    bytebuf_reserve(b, total);
    uint8_t *p = b->p;
    put_u32(p, (uint32_t)n);
    p += 4;
    for (int i = 0; i < n; i++) {
        memset(p, 0, CKPT_NAME_MAX);
        memcpy(p, s[i].name, strnlen(s[i].name, CKPT_NAME_MAX - 1));
        uint64_t len = s[i].len;
        memcpy(p + CKPT_NAME_MAX, &len, 8);
        p += CKPT_NAME_MAX + 8;
        if (s[i].len) memcpy(p, s[i].data, s[i].len);
        p += s[i].len;
    }
    b->len = total;
}

/* parse one packed blob, appending sections (pointing into the blob) */
static int sections_unpack(CkptSection *out, int cap, const uint8_t *p, size_t len) {
    if (len < 4) return -1;
    uint32_t n = get_u32(p);
    size_t at = 4;
    int k = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (len - at < CKPT_NAME_MAX + 8 || k >= cap) return -1;
        memcpy(out[k].name, p + at, CKPT_NAME_MAX);
        out[k].name[CKPT_NAME_MAX - 1] = 0;
        uint64_t l;
        memcpy(&l, p + at + CKPT_NAME_MAX, 8);
        at += CKPT_NAME_MAX + 8;
        if (l > len - at) return -1;
        out[k].data = p + at;
        out[k].len = (size_t)l;
        at += (size_t)l;
        k++;
    }
    return k;
}

typedef struct {
    Shared *sh;
    Comm *comm;
    int rank;
    Model *m;
    Optim opt;
    /* the learning-rate schedule: every worker (thread or process) sets its
     * length, observes the evaluations and loads it, so all have the same */
    LrSched sched;
    Exchange *ex;
    DataIter *train, *eval;
    long step;
    long replicas_checked; /* the step after which replicas_differ last found none (-1: none yet) */
    long saved_step;       /* the step of the last checkpoint this run wrote or resumed from (-1: none) */
    int resumed_untold;    /* the resumed checkpoint's description does not record the topology and memory */
    int saved_workers;     /* the resumed checkpoint's worker count (another than this run's: reshard_checkpoint) */
    char reshard_note[2560]; /* what a resume on another worker count did, for rank 0 to say */
    int64_t pos_epoch;
    /* eval scratch */
    float *backup_params, *backup_state;
    float *ema; /* --ema: the moving average of the parameters (NULL: off) */
    /* --device cuda where the step can stay on the GPU (dist/exchange_cuda.h): the device
     * exchange and a GPU optimizer; NULL where the step goes through the host */
    ExchangeCuda *dx;
    Optim dopt;
    float *d_ema;        /* --ema on the device (the master while w->dev; w->ema then stale) */
    int dev;             /* 1 while the device holds the master parameters and optimizer state */
    const char *dev_why; /* --device cuda: why the step goes through the host (NULL: it does not) */
} Worker;

/* The device-resident step: while w->dev, the parameters, the optimizer state and
 * the exchange's residual live on the GPU (the model in device-master mode, nn/model_cuda.h) and the host
 * copies are stale; they are brought to the host for what reads them there (an
 * evaluation, a checkpoint, the end of the run) and back after. */
static void dev_to_host(Worker *w) {
#ifdef HAVE_CUDA
    if (!w->dev) return;
    model_cuda_set_device_master(w->m, 0);
    optim_cuda_download(&w->opt, &w->dopt);
    exchange_cuda_download(w->dx);
    if (w->d_ema) cudaCheck(cudaMemcpy(w->ema, w->d_ema, w->m->pt.total * sizeof(float), cudaMemcpyDeviceToHost));
    w->dev = 0;
#else
    (void)w;
#endif
}

static void dev_from_host(Worker *w) {
#ifdef HAVE_CUDA
    if (!w->dx || w->dev) return;
    model_cuda_set_device_master(w->m, 1);
    optim_cuda_upload(&w->dopt, &w->opt);
    exchange_cuda_upload(w->dx);
    if (w->ema && !w->d_ema && cuda_dev_alloc((void **)&w->d_ema, w->m->pt.total * sizeof(float), "the --ema average"))
        gc_fatal("error: --ema on the GPU: no device memory\n");
    if (w->d_ema) cudaCheck(cudaMemcpy(w->d_ema, w->ema, w->m->pt.total * sizeof(float), cudaMemcpyHostToDevice));
    w->dev = 1;
#else
    (void)w;
#endif
}

#define MAX_SECTIONS 32

static int worker_sections(Worker *w, CkptSection *s, int cap, uint8_t *pos_buf) {
    int n = 0;
    snprintf(s[n].name, CKPT_NAME_MAX, "params");
    s[n].data = w->m->params;
    s[n++].len = w->m->pt.total * sizeof(float);
    snprintf(s[n].name, CKPT_NAME_MAX, "state");
    s[n].data = w->m->state;
    s[n++].len = w->m->nstate * sizeof(float);
    if (w->ema) {
        snprintf(s[n].name, CKPT_NAME_MAX, "ema");
        s[n].data = w->ema;
        s[n++].len = w->m->pt.total * sizeof(float);
    }
    if (w->m->ops->ckpt_sections) {
        CkptSection ms[8];
        int k = w->m->ops->ckpt_sections(w->m, ms, 8);
        for (int i = 0; i < k && n < cap; i++, n++) {
            s[n] = ms[i];
            snprintf(s[n].name, CKPT_NAME_MAX, "m.%.28s", ms[i].name);
        }
    }
    int k = optim_ckpt_sections(&w->opt, s + n, cap - n, "opt.");
    if (k > 0) n += k;
    n += exchange_ckpt_sections(w->ex, s + n, cap - n, "ex.");
    LoaderPos pos = w->train->get_pos(w->train);
    loader_pos_pack(pos_buf, &pos);
    snprintf(s[n].name, CKPT_NAME_MAX, "data");
    s[n].data = pos_buf;
    s[n++].len = LOADER_POS_BYTES;
    return n;
}

#define META_MAX 4096 /* 32 rules of 128-byte patterns and their specs fit */

/* what a resume must repeat. The current form (resolved: the codec as its
 * canonical spec, so "topk" and "topk:ratio=0.05" are one codec; every
 * --layer-codec rule; the exchange's settings) ends with " rules=". Older
 * checkpoints hold the --codec text as typed, then the topology and memory as
 * resolved (exchange = 1) or, older still, end at the delay and resume under
 * any: form 0 writes those (exchange as said). */
static void meta_string_for(char *buf, size_t n, const Worker *w, int workers, int exchange, int form) {
    const TrainOpts *o = w->sh->o;
    const DistConfig *c = exchange_config(w->ex);
    if (form) {
        char spec[200];
        codec_spec_str(spec, sizeof spec, &c->policy.global);
        size_t k = (size_t)snprintf(buf, n,
                                    "task=%.100s params=%zu workers=%d batch=%d codec=%s delay=%d topology=%s memory=%s "
                                    "dgc=%g,%g share=%d min=%ld last=%d ema=%g rules=",
                                    w->sh->task->name, param_table_count(&w->m->pt), workers, o->batch, spec,
                                    o->dist.delay, topology_name(c->topology), memory_name(c->memory), c->dgc_warmup,
                                    c->dgc_clip, c->scalar_sharing, c->policy.min_compress, c->policy.keep_last_fp32,
                                    o->ema);
        for (int r = 0; r < c->policy.nrules && k < n; r++) {
            codec_spec_str(spec, sizeof spec, &c->policy.rules[r].spec);
            k += (size_t)snprintf(buf + k, n - k, "%s%s=%s", r ? ";" : "", c->policy.rules[r].pattern, spec);
        }
        if (!c->policy.nrules && k < n) snprintf(buf + k, n - k, "none");
        return;
    }
    int k = snprintf(buf, n, "task=%.100s params=%zu workers=%d batch=%d codec=%.300s delay=%d", w->sh->task->name,
                     param_table_count(&w->m->pt), workers, o->batch, o->codec_text, o->dist.delay);
    if (exchange && k > 0 && (size_t)k < n)
        snprintf(buf + k, n - (size_t)k, " topology=%s memory=%s", topology_name(c->topology), memory_name(c->memory));
}

/* this run's description */
static void meta_string(char *buf, size_t n, const Worker *w, int exchange, int form) {
    meta_string_for(buf, n, w, w->comm->size, exchange, form);
}

/* Collective: whether any worker failed. The lowest worker that failed says
 * why ("<prefix>: <err>"; nothing when err is "": it has said it), with
 * name_self naming itself unless it is worker 0: under mpirun a node may lack
 * what the others have (the dataset). */
static int agree_failed(Worker *w, int failed, const char *prefix, const char *err, int name_self) {
    int world = w->comm->size;
    double f = failed ? world - w->rank : 0;
    uint64_t s0 = w->comm->sent, r0 = w->comm->received;
    comm_allreduce_f64(w->comm, &f, 1, COMM_MAX);
    w->comm->sent = s0;
    w->comm->received = r0;
    if (failed && f == world - w->rank && err[0]) {
        if (name_self && w->rank) fprintf(stderr, "%s: worker %d: %s\n", prefix, w->rank, err);
        else fprintf(stderr, "%s: %s\n", prefix, err);
    }
    return f > 0;
}

/* What the exchange keeps bit-identical on every worker (exchange_replicas:
 * the shared model, and the optimizer state where every worker runs the
 * optimizer alike) must be, or a worker would train apart from the others
 * unseen. The workers share the CRC-32C of their copies of each section; rank
 * 0 names the first section and worker whose copy differs from the one most
 * workers hold, or says no copy is held by most. After a --resume
 * (at_resume) the file is damaged; during the run (before every evaluation
 * and checkpoint) a worker's memory was, or the exchange has a bug.
 * Collective; 1 when they differ. */
static int replicas_differ(Worker *w, int at_resume) {
    int world = w->comm->size;
    if (!at_resume && w->replicas_checked == w->step) return 0; /* an evaluation and a save after one step */
    CkptSection s[2 + OPT_MAX_STATE];
    int n = exchange_replicas(w->ex, w->m->params, &w->opt, s, 2 + OPT_MAX_STATE);
    if (n == 0) return 0;
    uint64_t s0 = w->comm->sent, r0 = w->comm->received;
    double *crc = callocCheck((size_t)n * (size_t)world, sizeof *crc);
    for (int i = 0; i < n; i++) crc[(size_t)i * world + w->rank] = (double)crc32c(0, s[i].data, s[i].len);
    comm_allreduce_f64(w->comm, crc, (size_t)n * (size_t)world, COMM_SUM);
    w->comm->sent = s0;
    w->comm->received = r0;
    int differ = 0;
    for (int k = 0; k < n && !differ; k++) {
        const double *c = crc + (size_t)k * world;
        int best = 0, votes = 0, first = -1;
        for (int i = 0; i < world; i++) { /* the most common value (the lowest worker's on a tie) */
            int v = 0;
            for (int j = 0; j < world; j++) v += c[j] == c[i];
            if (v > votes) best = i, votes = v;
        }
        for (int i = 0; i < world; i++)
            if (c[i] != c[best]) {
                differ++;
                if (first < 0) first = i;
            }
        if (!differ || w->rank != 0) continue;
        char what[80], why[200];
        if (at_resume) {
            snprintf(what, sizeof what, "--resume: checkpoint:");
            snprintf(why, sizeof why, "%s", w->resumed_untold ? "the file is damaged, or it was written under another "
                     "--topology or --memory, which its description (from an older gcx) does not record"
                     : "the file is damaged");
        } else {
            snprintf(what, sizeof what, "step %ld:", w->step);
            snprintf(why, sizeof why, "a worker's memory was damaged, or the exchange has a bug; the run stops "
                     "(without saving)");
        }
        if (2 * votes > world)
            fprintf(stderr, "error: %s w%d.%s%s differs from the copy that %d of %d workers hold, which the exchange "
                    "keeps identical on every worker: %s\n", what, first, s[k].name,
                    differ > 1 ? " (and others)" : "", votes, world, why);
        else
            fprintf(stderr, "error: %s the workers' copies of %s differ (no copy is held by more than half of the %d "
                    "workers), which the exchange keeps identical on every worker: %s\n", what, s[k].name, world, why);
    }
    free(crc);
    if (!differ) w->replicas_checked = w->step;
    return differ > 0;
}

/* every worker's sections gathered to rank 0, written with "w<r>." prefixes */
/* what --save holds now, for messages */
static const char *describe_saved(const Worker *w) {
    static char buf[96];
    if (w->saved_step >= 0) snprintf(buf, sizeof buf, "its checkpoint of step %ld (resume from it)", w->saved_step);
    else snprintf(buf, sizeof buf, "what it held before this run (no checkpoint was written)");
    return buf;
}

static int save_checkpoint(Worker *w, const char *path) {
    if (replicas_differ(w, 0)) return -1; /* the last good checkpoint is kept */
    /* a diverged model is not saved over the last good one */
    size_t total = w->m->pt.total, bad = 0;
    for (size_t i = 0; i < total; i++) bad += !isfinite(w->m->params[i]);
    char why[200] = "";
    if (bad) snprintf(why, sizeof why, "%zu of the %zu parameters are not finite at step %ld", bad, total, w->step);
    if (agree_failed(w, bad > 0, "error", why, 1)) {
        if (w->rank == 0) fprintf(stderr, "error: the training diverged; %s keeps %s\n", path, describe_saved(w));
        return -1;
    }
    CkptSection s[MAX_SECTIONS];
    uint8_t pos_buf[LOADER_POS_BYTES];
    int n = worker_sections(w, s, MAX_SECTIONS, pos_buf);
    ByteBuf mine = {0}, all = {0};
    sections_pack(&mine, s, n);
    size_t *lens = callocCheck((size_t)w->comm->size, sizeof *lens);
    uint64_t s0 = w->comm->sent, r0 = w->comm->received;
    comm_gatherv(w->comm, &all, lens, mine.p, mine.len, 0);
    w->comm->sent = s0;
    w->comm->received = r0;
    int rc = 0;
    if (w->rank == 0) {
        int cap = MAX_SECTIONS * w->comm->size + 8;
        CkptSection *out = callocCheck((size_t)cap, sizeof *out);
        int k = 0;
        char meta[META_MAX];
        meta_string(meta, sizeof meta, w, 1, 1);
        int64_t step = w->step;
        snprintf(out[k].name, CKPT_NAME_MAX, "meta");
        out[k].data = meta;
        out[k++].len = strlen(meta);
        snprintf(out[k].name, CKPT_NAME_MAX, "step");
        out[k].data = &step;
        out[k++].len = sizeof step;
        lr_sched_ckpt_section(&w->sched, &out[k++], "");
        size_t at = 0;
        for (int r = 0; r < w->comm->size; r++) {
            int got = sections_unpack(out + k, cap - k, all.p + at, lens[r]);
            for (int i = 0; i < got; i++) {
                char name[CKPT_NAME_MAX];
                if (snprintf(name, sizeof name, "w%d.%s", r, out[k + i].name) >= (int)sizeof name) {
                    fprintf(stderr, "error: checkpoint section w%d.%s: name longer than %d characters\n", r,
                            out[k + i].name, CKPT_NAME_MAX - 1);
                    rc = -1;
                }
                memcpy(out[k + i].name, name, CKPT_NAME_MAX);
            }
            k += got > 0 ? got : 0;
            at += lens[r];
        }
        char err[600];
        if (rc == 0 && ckpt_write(path, out, k, err, sizeof err)) {
            fprintf(stderr, "error: %s\n", err);
            rc = -1;
        }
        free(out);
    }
    free(lens);
    bytebuf_free(&mine);
    bytebuf_free(&all);
    if (agree_failed(w, rc != 0, "error", "", 0)) return -1; /* rank 0 said why */
    w->saved_step = w->step;
    return 0;
}

/* the worker count in a run description ("... workers=N ..."), or -1 */
static long saved_worker_count(const char *meta) {
    const char *p = strstr(meta, " workers=");
    if (!p) return -1;
    p += 9;
    long n = 0;
    int digits = 0;
    for (; *p >= '0' && *p <= '9' && digits < 7; p++, digits++) n = 10 * n + (*p - '0');
    return digits && digits < 7 && *p == ' ' && n > 0 ? n : -1;
}

/* the worker ranges of a note: "0-3", "0" */
static void ranks_str(char *buf, size_t n, int count) {
    if (count == 1) snprintf(buf, n, "worker 0");
    else snprintf(buf, n, "workers 0-%d", count - 1);
}

/* A checkpoint of N = w->saved_workers workers resumed on this run's M
 * (docs/DIST.md, Checkpoints: "On another worker count"): *ck is replaced by
 * one holding its run-wide sections and this worker's ("w<rank>.") made from
 * the N workers' by the rule of each: the exchange's and the optimizer's by
 * exchange_ckpt_take (worker 0's, the mean over the N, or none), the model's
 * (batch-norm statistics, --ema's average, an LSTM's dropout step) worker
 * 0's, which every evaluation and export uses; the data position is left to
 * the caller. Every section taken or averaged must be there, of one size, for
 * every saved worker (but the server's own, rank 0's alone), and what the
 * exchange keeps identical must be (as replicas_differ checks after a plain
 * resume); the codecs' states and the data positions are not read. Writes what
 * was done to w->reshard_note. 0, or -1 with a message and *ck freed. */
static int reshard_checkpoint(Worker *w, Ckpt *ck, const char *path, char *err, size_t errlen) {
    int N = w->saved_workers, M = w->comm->size;
    char name[CKPT_NAME_MAX + 16];
    /* the description's worker count and the workers' sections agree */
    for (int i = 0; i <= N; i++) {
        snprintf(name, sizeof name, "w%d.params", i);
        if (!ckpt_find(ck, name, NULL) != (i == N)) {
            snprintf(err, errlen, "%.300s is damaged: its description says %d workers, but it %s a section %s", path,
                     N, i == N ? "holds" : "lacks", name);
            ckpt_free(ck);
            return -1;
        }
    }
    /* what the exchange keeps identical on every worker (as replicas_differ
     * compares after a plain resume): with weight deltas after the first
     * step, the anchor, not the parameters */
    CkptSection rep[2 + OPT_MAX_STATE];
    int nrep = exchange_replicas(w->ex, w->m->params, &w->opt, rep, 2 + OPT_MAX_STATE);
    size_t slen = 0;
    const void *sp = ckpt_find(ck, "step", &slen);
    int64_t step = 0;
    if (sp && slen == sizeof step) memcpy(&step, sp, sizeof step);
    for (int i = 0; i < nrep; i++)
        if (!strcmp(rep[i].name, "params") && exchange_ckpt_take(w->ex, "params") == CKPT_TAKE_MEAN)
            snprintf(rep[i].name, CKPT_NAME_MAX, "%s", step > 0 ? "ex.anchor" : "-");
    Ckpt out = {0};
    out.sec = callocCheck((size_t)ck->n + 1, sizeof *out.sec);
    size_t bytes = 0; /* every output is the size of a run-wide or a worker 0's section */
    for (int i = 0; i < ck->n; i++) {
        const char *nm = ck->sec[i].name;
        if (nm[0] != 'w' || nm[1] < '0' || nm[1] > '9' || !strncmp(nm, "w0.", 3)) bytes += ck->sec[i].len;
    }
    out.file = mallocCheck(bytes + 1);
    out.size = bytes;
    size_t at = 0;
    char w0s[600] = "", means[600] = "", dropped[300] = "", from[32];
    int rc = 0;
    double *acc = NULL;
    float *tmp = NULL;
    size_t acc_n = 0;
    for (int i = 0; i < ck->n && !rc; i++) {
        const CkptSection *s = &ck->sec[i];
        const char *sub = NULL;
        if (s->name[0] != 'w' || s->name[1] < '0' || s->name[1] > '9') { /* run-wide: meta, step, the schedule */
            out.sec[out.n] = *s;
            memcpy((uint8_t *)out.file + at, s->data, s->len);
            out.sec[out.n++].data = out.file + at;
            at += s->len;
            continue;
        }
        if (strncmp(s->name, "w0.", 3)) continue; /* another worker's: read with worker 0's below */
        sub = s->name + 3;
        CkptTake take = exchange_ckpt_take(w->ex, sub);
        if (take == CKPT_TAKE_OTHER) take = strcmp(sub, "data") ? CKPT_TAKE_W0 : CKPT_TAKE_NONE;
        char *list = take == CKPT_TAKE_W0 ? w0s : take == CKPT_TAKE_MEAN ? means : dropped;
        size_t size = take == CKPT_TAKE_W0 ? sizeof w0s : take == CKPT_TAKE_MEAN ? sizeof means : sizeof dropped;
        if (strcmp(sub, "data") && s->len) { /* named in the note (an empty one, LeNet's "state", is not) */
            size_t k = strlen(list);
            snprintf(list + k, size - k, "%s%s", k ? ", " : "", sub);
        }
        if (take == CKPT_TAKE_NONE) continue;
        CkptSection *o = &out.sec[out.n];
        if (snprintf(o->name, CKPT_NAME_MAX, "w%d.%s", w->rank, sub) >= CKPT_NAME_MAX) {
            snprintf(err, errlen, "checkpoint section %s: its name for worker %d is longer than %d characters", s->name,
                     w->rank, CKPT_NAME_MAX - 1);
            rc = -1;
            break;
        }
        o->data = out.file + at;
        o->len = s->len;
        if (take == CKPT_TAKE_W0) {
            /* every saved worker's copy has worker 0's size (the server's own
             * sections are rank 0's alone), and a shared one its bytes */
            int shared = 0;
            for (int k = 0; k < nrep; k++) shared |= !strcmp(rep[k].name, sub);
            for (int r = 1; r < N && !rc; r++) {
                snprintf(name, sizeof name, "w%d.%s", r, sub);
                size_t len = 0;
                const void *p = ckpt_find(ck, name, &len);
                if (!p && exchange_ckpt_server_only(sub)) continue;
                if (!p || len != s->len) {
                    snprintf(err, errlen, "%.300s is damaged: section %s %s (w0.%s holds %zu bytes)", path, name,
                             p ? "has another size" : "is missing", sub, s->len);
                    rc = -1;
                } else if (shared && memcmp(p, s->data, len)) {
                    snprintf(err, errlen, "%.300s is damaged: %s differs from w0.%s, which the exchange keeps "
                             "identical on every worker", path, name, sub);
                    rc = -1;
                }
            }
            if (rc) break;
            memcpy((uint8_t *)out.file + at, s->data, s->len);
        } else {
            size_t n = s->len / sizeof(float);
            if (s->len % sizeof(float)) {
                snprintf(err, errlen, "checkpoint section %s holds %zu bytes, not a whole number of floats", s->name,
                         s->len);
                rc = -1;
                break;
            }
            if (n > acc_n) {
                free(acc);
                free(tmp);
                acc = mallocCheck(n * sizeof *acc + 1);
                tmp = mallocCheck(n * sizeof *tmp + 1);
                acc_n = n;
            }
            for (size_t j = 0; j < n; j++) acc[j] = 0;
            for (int r = 0; r < N && !rc; r++) {
                snprintf(name, sizeof name, "w%d.%s", r, sub);
                size_t len = 0;
                const void *p = ckpt_find(ck, name, &len);
                if (!p || len != s->len) {
                    snprintf(err, errlen, "%.300s is damaged: section %s %s (w0.%s holds %zu bytes; a resume on "
                             "another worker count averages them)", path, name, p ? "has another size" : "is missing",
                             sub, s->len);
                    rc = -1;
                    break;
                }
                memcpy(tmp, p, len);
                for (size_t j = 0; j < n; j++) acc[j] += tmp[j];
            }
            /* the mean of N copies of one value is that value, bit for bit */
            for (size_t j = 0; j < n; j++) tmp[j] = (float)(acc[j] / N);
            memcpy((uint8_t *)out.file + at, tmp, s->len);
        }
        at += s->len;
        out.n++;
    }
    free(acc);
    free(tmp);
    ckpt_free(ck);
    if (rc) {
        ckpt_free(&out);
        return -1;
    }
    *ck = out;
    ranks_str(from, sizeof from, N);
    snprintf(w->reshard_note, sizeof w->reshard_note,
             "resuming a %d-worker checkpoint on %d workers (docs/DIST.md, Checkpoints):\n"
             "  as saved (worker 0's, which the workers share or the server holds): %s\n"
             "  the mean of %s on each of the %d (what the exchange averages; the update still owed is kept): %s\n"
             "  dropped, started afresh: %s", N, M, w0s[0] ? w0s : "-", from, M, means[0] ? means : "-",
             dropped[0] ? dropped : "-");
    return 0;
}

static int load_checkpoint(Worker *w, const char *path, char *err, size_t errlen) {
    Ckpt ck;
    if (ckpt_read(&ck, path, err, errlen)) return -1;
    char meta[META_MAX], want[META_MAX];
    size_t mlen = 0;
    const void *m = ckpt_find(&ck, "meta", &mlen);
    if (!m || mlen >= sizeof meta) {
        snprintf(err, errlen, "%.300s has no run description: not written by a gcx trainer", path);
        ckpt_free(&ck);
        return -1;
    }
    memcpy(meta, m, mlen);
    meta[mlen] = 0;
    w->resumed_untold = strstr(meta, " topology=") == NULL;
    int form = strstr(meta, " rules=") != NULL;
    meta_string(want, sizeof want, w, !w->resumed_untold, form);
    w->saved_workers = w->comm->size;
    if (strcmp(meta, want)) {
        /* the same run on another worker count resumes (reshard_checkpoint) */
        long saved = saved_worker_count(meta);
        if (saved > 0 && saved != w->comm->size) {
            meta_string_for(want, sizeof want, w, (int)saved, !w->resumed_untold, form);
            if (!strcmp(meta, want)) w->saved_workers = (int)saved;
        }
        if (w->saved_workers == w->comm->size) {
            snprintf(err, errlen, "%.150s was written by another run configuration:\n  checkpoint: %.800s\n  this run:   %.800s\n"
                     "resume with the same model, --batch, --codec, --layer-codec, --min-compress, "
                     "--keep-last-fp32, --delay, --topology and --memory (--workers may differ)", path, meta, want);
            ckpt_free(&ck);
            return -1;
        }
        if (reshard_checkpoint(w, &ck, path, err, errlen)) return -1;
    }
    int resharded = w->saved_workers != w->comm->size;
    int64_t step = 0;
    char prefix[16];
    snprintf(prefix, sizeof prefix, "w%d.", w->rank);
    CkptSection s[MAX_SECTIONS];
    uint8_t pos_buf[LOADER_POS_BYTES];
    int n = worker_sections(w, s, MAX_SECTIONS, pos_buf);
    int rc = ckpt_load(&ck, "step", &step, sizeof step, err, errlen);
    if (!rc && step < 0) {
        snprintf(err, errlen, "%.300s is damaged: its step %lld is negative", path, (long long)step);
        rc = -1;
    }
    for (int i = 0; i < n && !rc; i++) {
        /* the optimizer and the exchange load their own; on another worker
         * count the data position follows from the step (below) */
        if (!strncmp(s[i].name, "opt.", 4) || !strncmp(s[i].name, "ex.", 3)) continue;
        if (resharded && !strcmp(s[i].name, "data")) continue;
        char name[CKPT_NAME_MAX + 8];
        snprintf(name, sizeof name, "%.7s%.31s", prefix, s[i].name);
        rc = ckpt_load(&ck, name, (void *)s[i].data, s[i].len, err, errlen);
    }
    char optp[24];
    snprintf(optp, sizeof optp, "%sopt.", prefix);
    if (!rc) rc = optim_ckpt_load(&w->opt, &ck, optp, err, errlen);
    char exp_[24];
    snprintf(exp_, sizeof exp_, "%sex.", prefix);
    if (!rc) rc = exchange_ckpt_load(w->ex, &ck, exp_, (long)step, w->saved_workers, err, errlen);
    if (!rc) rc = lr_sched_ckpt_load(&w->sched, &ck, "", err, errlen);
    if (!rc && resharded) {
        /* each worker's shard of this count, where the step falls in it (the
         * trainer counts epochs as steps / steps per epoch); the model's
         * carried state (an LSTM's) belonged to another part of the data */
        long spe = w->train->steps_per_epoch;
        LoaderPos pos = w->train->get_pos(w->train); /* this configuration's fingerprint */
        pos.epoch = step / spe;
        pos.cursor = (step % spe) * w->train->pos_per_step;
        if (w->train->set_pos(w->train, &pos)) {
            snprintf(err, errlen, "%s", w->train->err);
            rc = -1;
        }
        if (w->m->ops->reset_state) w->m->ops->reset_state(w->m);
        if (!rc) {
            size_t k = strlen(w->reshard_note);
            snprintf(w->reshard_note + k, sizeof w->reshard_note - k,
                     "\n  data: each worker's shard of %d, at step %lld (epoch %lld, step %lld of %ld in it); "
                     "global batch %d (was %d)%s", w->comm->size, (long long)step, (long long)(step / spe),
                     (long long)(step % spe), spe, w->sh->o->batch * w->comm->size, w->sh->o->batch * w->saved_workers,
                     w->m->ops->ckpt_sections ? "; the model's carried state reset, as at an epoch's start" : "");
        }
    } else if (!rc) {
        LoaderPos pos;
        rc = loader_pos_unpack(&pos, pos_buf, LOADER_POS_BYTES, err, errlen) ? -1 : 0;
        if (!rc && w->train->set_pos(w->train, &pos)) {
            snprintf(err, errlen, "%s", w->train->err);
            rc = -1;
        }
    }
    w->step = step;
    ckpt_free(&ck);
    return rc ? -1 : 0;
}

/* --ema D: TernGrad section 4 evaluates "the exponential moving average of
 * parameters ... exponential decay of 0.9999" (TensorFlow's
 * ExponentialMovingAverage with the global step as num_updates: the decay is
 * min(D, (1 + t) / (10 + t)) after step t); batch-norm statistics are running
 * averages already and are used as they are */
static float ema_rate(double decay, long t) {
    double d = (1.0 + (double)t) / (10.0 + (double)t);
    return (float)(1.0 - (d < decay ? d : decay));
}

static void ema_update(float *ema, const float *params, size_t n, double decay, long t) {
    const float a = ema_rate(decay, t);
    for (size_t i = 0; i < n; i++) ema[i] -= a * (ema[i] - params[i]);
}

/* A GPU model's copy counters (nn/model_cuda.h); zeros for a CPU model */
typedef struct {
    double h2d, d2h, s;
} ModelCopies;

static ModelCopies model_copies(const Model *m) {
    ModelCopies c = {0, 0, 0};
#ifdef HAVE_CUDA
    const ModelCudaCopyStats *cs = model_cuda_copy_stats(m);
    if (cs) {
        c.h2d = (double)cs->up_bytes;
        c.d2h = (double)cs->down_bytes;
        c.s = cs->up_s + cs->down_s;
    }
#else
    (void)m;
#endif
    return c;
}

/* ----------------------------------------------------------- evaluate ---- */
typedef struct {
    double loss, acc, ppl, bpc;
    long count;
} EvalResult;

/* every worker evaluates its shard of split with rank 0's model (parameters
 * and batch-norm statistics), and the sums are combined */
static int evaluate(Worker *w, DataIter *it, EvalResult *res) {
    Model *m = w->m;
    size_t np = m->pt.total, ns = m->nstate;
    uint64_t s0 = w->comm->sent, r0 = w->comm->received;
    memcpy(w->backup_params, m->params, np * sizeof(float));
    if (ns) memcpy(w->backup_state, m->state, ns * sizeof(float));
    ByteBuf b = {0};
    bytebuf_reserve(&b, (np + ns) * sizeof(float));
    b.len = (np + ns) * sizeof(float);
    if (w->rank == 0) {
        memcpy(b.p, w->ema ? w->ema : m->params, np * sizeof(float)); /* --ema: the averaged parameters */
        if (ns) memcpy(b.p + np * sizeof(float), m->state, ns * sizeof(float));
    }
    comm_bcast(w->comm, &b, 0);
    memcpy(m->params, b.p, np * sizeof(float));
    if (ns) memcpy(m->state, b.p + np * sizeof(float), ns * sizeof(float));
    bytebuf_free(&b);
    /* training state beyond params/state (an LSTM's carried hidden state) is
     * kept aside so evaluating never changes what training continues from */
    CkptSection extra[8];
    int nextra = m->ops->ckpt_sections ? m->ops->ckpt_sections(m, extra, 8) : 0;
    size_t extra_bytes = 0;
    for (int i = 0; i < nextra; i++) extra_bytes += extra[i].len;
    uint8_t *keep = mallocCheck(extra_bytes + 1), *at = keep;
    for (int i = 0; i < nextra; i++, at += extra[i - 1].len) memcpy(at, extra[i].data, extra[i].len);
    if (m->ops->reset_state) m->ops->reset_state(m);
    double sums[4] = {0, 0, 0, 0}; /* loss * count, correct, count, error */
    Batch batch;
    int n;
    while ((n = it->next(it, &batch)) > 0) {
        BatchStats st;
        model_forward(m, &batch, 0, &st);
        sums[0] += st.loss * (double)st.count;
        sums[1] += (double)st.correct;
        sums[2] += (double)st.count;
    }
    if (n < 0) {
        fprintf(stderr, "error: worker %d: evaluation data: %s\n", w->rank, it->err);
        sums[3] = 1;
    }
    comm_allreduce_f64(w->comm, sums, 4, COMM_SUM);
    memcpy(m->params, w->backup_params, np * sizeof(float));
    if (ns) memcpy(m->state, w->backup_state, ns * sizeof(float));
    at = keep;
    for (int i = 0; i < nextra; i++, at += extra[i - 1].len) memcpy((void *)extra[i].data, at, extra[i].len);
    free(keep);
    w->comm->sent = s0;
    w->comm->received = r0;
    if (sums[3] > 0) return -1;
    res->count = (long)sums[2];
    res->loss = sums[2] > 0 ? sums[0] / sums[2] : NAN;
    res->acc = sums[2] > 0 ? sums[1] / sums[2] : NAN;
    res->ppl = exp(res->loss);
    res->bpc = res->loss / log(2.0);
    return 0;
}

/* ---------------------------------------------------------------- log ---- */
typedef struct {
    const char *kind;
    long step;
    double epoch, loss, acc, ppl, lr, up, down, bits_up, bits_down, ratio, ratio_c, density, compute_s, codec_s, comm_s,
        step_s, total_s, rate, data_s, comp_up, comp_down, comp_raw, wire_max, hops;
    double gcomp[10]; /* GcompParts in the order of the gcomp_ columns */
    double h2d, d2h, copy_s;
} LogRow;

/* the columns after kind and step, in order: name, printf format */
#define LOG_NCOLS 37
static const char *const log_cols[LOG_NCOLS][2] = {
    {"epoch", "%.4f"},      {"loss", "%.6g"},      {"acc", "%.6g"},       {"ppl", "%.6g"},
    {"lr", "%.6g"},         {"up_bytes", "%.0f"},  {"down_bytes", "%.0f"}, {"bits_up", "%.6g"},
    {"bits_down", "%.6g"},  {"ratio", "%.6g"},     {"ratio_compressed", "%.6g"}, {"density", "%.6g"},
    {"compute_s", "%.6g"},  {"codec_s", "%.6g"},   {"comm_model_s", "%.6g"}, {"step_s", "%.6g"},
    {"total_s", "%.6g"},    {"samples_per_s", "%.6g"}, {"data_s", "%.6g"},
    /* per step, as up_bytes: the compressed tensors' frames up and down and their fp32 size
     * up (so bits per value over them alone), and the network model's inputs */
    {"comp_up_bytes", "%.1f"}, {"comp_down_bytes", "%.1f"}, {"comp_raw_bytes", "%.1f"},
    {"wire_max_bytes", "%.1f"}, {"hops", "%.4g"},
    /* per step, as up_bytes: what this worker's gcomp frames hold (compress/gcomp.h); 0 without gcomp */
    {"gcomp_values", "%.1f"}, {"gcomp_zeros", "%.1f"}, {"gcomp_lv0", "%.1f"}, {"gcomp_lv1", "%.1f"},
    {"gcomp_lv2", "%.1f"}, {"gcomp_lv3", "%.1f"}, {"gcomp_exp_bits", "%.1f"}, {"gcomp_level_bits", "%.1f"},
    {"gcomp_man_bits", "%.1f"}, {"gcomp_bytes", "%.1f"},
    /* per step, as up_bytes: what a GPU model copied host -> device and device -> host
     * (parameters, state, gradients; not the batch, nor the LSTM's carried hidden state)
     * and the host's wall time in those copies (nn/model_cuda.h); 0 with --device cpu */
    {"h2d_bytes", "%.0f"}, {"d2h_bytes", "%.0f"}, {"copy_s", "%.6g"}};

/* after each write: a failed write (a full disk, a file that takes no writes) is
 * said once, the log is closed there and the run goes on (its checkpoints still
 * count), ending with exit status 1 (README: --log) */
static void log_check(Shared *sh) {
    if (!ferror(sh->log) && fflush(sh->log) == 0) return;
    int e = errno;
    fprintf(stderr, "error: writing --log %s failed: %s; the log stops here, the run goes on and will exit with "
            "status 1\n", sh->o->log, strerror(e ? e : EIO));
    fclose(sh->log);
    sh->log = NULL;
    sh->log_failed = 1;
}

/* --log-layers: one row per tensor with what worker 0 encoded since the last progress
 * line, per step; then the sums start again. A failed write is said once. */
static void layers_rows(Worker *w, long steps) {
    Shared *sh = w->sh;
    const LayerStats *ls = exchange_layer_stats(w->ex);
    if (!sh->layers || !ls || steps <= 0) return;
    const TensorPolicy *pol = exchange_policy(w->ex);
    for (int t = 0; t < w->m->pt.n; t++) {
        const LayerStats *x = &ls[t];
        char spec[160];
        codec_spec_str(spec, sizeof spec, &pol[t].spec);
        fprintf(sh->layers, "%ld,%s,%zu,%s,%.4g,%.1f,", w->step, w->m->pt.t[t].name, w->m->pt.t[t].numel, spec,
                x->frames / (double)steps, x->bytes / (double)steps);
        if (x->bytes > 0) fprintf(sh->layers, "%.6g", 4 * x->values / x->bytes);
        fputc(',', sh->layers);
        if (x->sent >= 0 && x->values > 0) fprintf(sh->layers, "%.6g", x->sent / x->values);
        fputc(',', sh->layers);
        if (x->sq_in > 0) fprintf(sh->layers, "%.6g", sqrt(x->sq_err / x->sq_in));
        fprintf(sh->layers, ",%.4g\n", 1e3 * x->seconds / (double)steps);
    }
    exchange_layer_stats_reset(w->ex);
    if (ferror(sh->layers) || fflush(sh->layers) != 0) {
        fprintf(stderr, "error: writing --log-layers %s failed: %s; it stops here, the run goes on and will exit with "
                "status 1\n", sh->o->log_layers, strerror(errno ? errno : EIO));
        fclose(sh->layers);
        sh->layers = NULL;
        sh->log_failed = 1;
    }
}

/* opens --log, noting whether it is empty (then it gets the CSV header) */
static FILE *log_open(Shared *sh, const char *path, const char *mode) {
    FILE *f = fopen(path, mode);
    if (f) sh->log_fresh = fseek(f, 0, SEEK_END) != 0 || ftell(f) <= 0;
    return f;
}

/* closes the log at the end: 0, or 1 when the last writes fail there */
static int log_close(Shared *sh) {
    int bad = ferror(sh->log) | fflush(sh->log);
    int e = errno;
    if (fclose(sh->log) != 0 && !bad) {
        bad = 1;
        e = errno;
    }
    sh->log = NULL;
    if (bad) fprintf(stderr, "error: writing --log %s failed at the end: %s\n", sh->o->log, strerror(e ? e : EIO));
    return bad != 0;
}

/* s as a JSON string, quotes included */
static void json_str(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\') fprintf(f, "\\%c", ch);
        else if (ch < 0x20) fprintf(f, "\\u%04x", ch);
        else fputc(ch, f);
    }
    fputc('"', f);
}

static int ncores(void);

/* The log's first record (and a resume's first): what produced it. A JSON object,
 * in CSV behind "# run: " (readers skip lines starting with '#'). */
static void log_run_record(Worker *w, const char *optdesc, const char *sched) {
    Shared *sh = w->sh;
    if (!sh->log) return;
    char host[256] = "?", cpu[256] = "?", line[512], desc[META_MAX];
    gethostname(host, sizeof host - 1);
    FILE *ci = fopen("/proc/cpuinfo", "r");
    while (ci && fgets(line, sizeof line, ci))
        if (!strncmp(line, "model name", 10) && strchr(line, ':')) {
            snprintf(cpu, sizeof cpu, "%s", strchr(line, ':') + 2);
            cpu[strcspn(cpu, "\n")] = 0;
            break;
        }
    if (ci) fclose(ci);
    meta_string(desc, sizeof desc, w, 1, 1);
    char policy[400];
    policy_summary(policy, sizeof policy, exchange_policy(w->ex), &w->m->pt);
    FILE *f = sh->log;
    fprintf(f, sh->log_json ? "{\"kind\":\"run\"," : "# run: {");
    fprintf(f, "\"command\":");
    json_str(f, sh->command);
    fprintf(f, ",\"version\":");
    json_str(f, GCX_VERSION);
    fprintf(f, ",\"machine\":");
    char mach[600];
    snprintf(mach, sizeof mach, "%s, %d cores, %s", host, ncores(), cpu);
    json_str(f, mach);
    fprintf(f, ",\"seed\":%llu,\"resumed_at\":%ld,\"run\":", (unsigned long long)sh->o->seed, w->step);
    json_str(f, desc);
    fprintf(f, ",\"optimizer\":");
    json_str(f, optdesc);
    fprintf(f, ",\"schedule\":");
    json_str(f, sched);
    fprintf(f, ",\"policy\":");
    json_str(f, policy);
    fprintf(f, "}\n");
    log_check(sh);
}

static void log_header(Shared *sh) {
    if (!sh->log || sh->log_json) return;
    if (!sh->log_fresh) return; /* a resumed run appends to its log, which has the header already */
    fprintf(sh->log, "kind,step");
    for (int i = 0; i < LOG_NCOLS; i++) fprintf(sh->log, ",%s", log_cols[i][0]);
    fprintf(sh->log, "\n");
    log_check(sh);
}

/* One row. CSV writes non-finite values as nan/inf (what strtod reads back);
 * JSON has no such numbers, so they are written as null there. */
static void log_row(Shared *sh, const LogRow *r) {
    if (!sh->log) return;
    const double v[LOG_NCOLS] = {r->epoch,    r->loss,      r->acc,     r->ppl,     r->lr,      r->up,     r->down,
                                 r->bits_up,  r->bits_down, r->ratio,   r->ratio_c, r->density, r->compute_s,
                                 r->codec_s,  r->comm_s,    r->step_s,  r->total_s, r->rate,    r->data_s,
                                 r->comp_up,  r->comp_down, r->comp_raw, r->wire_max, r->hops,
                                 r->gcomp[0], r->gcomp[1], r->gcomp[2], r->gcomp[3], r->gcomp[4],
                                 r->gcomp[5], r->gcomp[6], r->gcomp[7], r->gcomp[8], r->gcomp[9],
                                 r->h2d,      r->d2h,       r->copy_s};
    if (sh->log_json) fprintf(sh->log, "{\"kind\":\"%s\",\"step\":%ld", r->kind, r->step);
    else fprintf(sh->log, "%s,%ld", r->kind, r->step);
    for (int i = 0; i < LOG_NCOLS; i++) {
        if (sh->log_json) {
            fprintf(sh->log, ",\"%s\":", log_cols[i][0]);
            if (!isfinite(v[i])) {
                fprintf(sh->log, "null");
                continue;
            }
        } else {
            fputc(',', sh->log);
        }
        fprintf(sh->log, log_cols[i][1], v[i]);
    }
    fprintf(sh->log, sh->log_json ? "}\n" : "\n");
    log_check(sh);
}

static void fmt_eta(char *buf, size_t n, double s) {
    if (!isfinite(s) || s < 0) s = 0;
    long t = (long)s;
    if (t >= 3600) snprintf(buf, n, "%ldh%02ldm", t / 3600, (t / 60) % 60);
    else snprintf(buf, n, "%ldm%02lds", t / 60, t % 60);
}

static void report_eval(Worker *w, const char *split, const EvalResult *e, double epoch, double total_s) {
    Shared *sh = w->sh;
    if (w->rank != 0) return;
    double loss = isnan(e->loss) ? fabs(e->loss) : e->loss; /* "nan", not "-nan" */
    if (sh->task->lm) {
        char bpc[32] = "";
        if (sh->task->is_char) snprintf(bpc, sizeof bpc, "  bits/char %.4f", e->bpc);
        printf("eval  %-5s step %ld epoch %.2f: loss %.4f  perplexity %.2f%s  (%ld tokens)\n", split, w->step, epoch,
               loss, e->ppl, bpc, e->count);
    } else
        printf("eval  %-5s step %ld epoch %.2f: loss %.4f  accuracy %.2f%%  (%ld samples)\n", split, w->step, epoch,
               loss, 100 * e->acc, e->count);
    fflush(stdout);
    if (!isfinite(e->loss))
        fprintf(stderr, "warning: the %s loss is %s: the model has diverged (try a lower --lr or a warm-up, "
                "--schedule ...,warmup=N)\n", split, isnan(e->loss) ? "NaN" : "infinite");
    LogRow r = {0};
    r.kind = split;
    r.step = w->step;
    r.epoch = epoch;
    r.loss = e->loss;
    r.acc = e->acc;
    r.ppl = e->ppl;
    r.total_s = total_s;
    log_row(sh, &r);
}

/* ------------------------------------------------------- graceful stop ----
 * The first SIGINT or SIGTERM (Ctrl-C; what a batch scheduler sends before
 * preempting) lets the workers finish the step they are in, agree on it, save
 * --save and exit with status 128 + the signal; a second one exits at once,
 * removing a checkpoint that was being written (no temporary file is left). */
static volatile sig_atomic_t stop_signal;

static void on_stop_signal(int sig) {
    if (stop_signal) {
        ckpt_remove_partial();
        _exit(128 + sig);
    }
    stop_signal = sig;
    static const char msg[] = "\nsignal: stopping after this step (and saving --save if given); "
                              "a second signal stops at once\n";
    ssize_t ignored = write(2, msg, sizeof msg - 1);
    (void)ignored;
}

static void install_stop_handlers(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

/* ------------------------------------------------------------- worker ---- */
static void worker_main(Shared *sh, Comm *comm) {
    TrainOpts *o = sh->o;
    Task *task = sh->task;
    Worker W = {0}, *w = &W;
    w->replicas_checked = -1;
    w->saved_step = -1;
    w->sh = sh;
    w->comm = comm;
    comm->timeout = o->timeout;
    w->rank = comm->rank;
    w->sched = sh->sched;
    int world = comm->size;
    char err[2048]; /* a resume's two run descriptions fit */
    int fail = 0;
#ifdef HAVE_OPENMP
    omp_set_num_threads(sh->threads_per_worker);
#endif
    w->m = task->model_new(task, w->rank, o->batch);
    if (!w->m) fail = 1;
    if (!fail && optim_init(&w->opt, &sh->oc, w->m->pt.total)) fail = 1;
    DistConfig dc = o->dist;
    dc.seed = o->seed;
    dc.dgc_momentum = sh->oc.momentum;
    dc.dgc_nesterov = sh->oc.nesterov;
    dc.weight_decay = sh->oc.weight_decay;
    if (task->clip_norm > 0 && dc.dgc_clip == 0) dc.dgc_clip = task->clip_norm;
    dc.clip_norm = task->clip_norm; /* the exchange clips where the method does (exchange.h) */
    err[0] = 0; /* why, where the model and the optimizer have not said it */
    if (!fail && !(w->ex = exchange_new(&dc, comm, &w->m->pt, &sh->oc, err, sizeof err))) fail = 1;
#ifdef HAVE_CUDA
    if (!fail && o->cuda) { /* the same decision on every worker */
        const char *host = getenv("GCX_HOST_STEP");
        w->dev_why = o->log_layers[0]                       ? "--log-layers"
                     : host && host[0] && strcmp(host, "0") ? "GCX_HOST_STEP is set"
                                                            : exchange_cuda_unsupported(w->ex, &w->m->pt, comm);
        if (!w->dev_why) {
            if (optim_init_cuda(&w->dopt, &sh->oc, w->m->pt.total)) fail = 1;
            else if (!(w->dx = exchange_cuda_new(w->ex, comm, &w->m->pt, err, sizeof err))) {
                optim_free_cuda(&w->dopt);
                fail = 1;
            }
        }
    }
#endif
    if (!fail && !(w->train = task->data_new(task, SPLIT_TRAIN, w->rank, world, o->batch, o->seed, err, sizeof err)))
        fail = 1;
    int eval_split = task->has_valid ? SPLIT_VALID : SPLIT_TEST;
    if (!fail && !(w->eval = task->data_new(task, eval_split, w->rank, world, o->batch, o->seed, err, sizeof err)))
        fail = 1;
    /* a resumed run appends to its --log (a refused resume leaves it as it was) */
    if (!fail && w->rank == 0 && o->log[0] && !(sh->log = log_open(sh, o->log, o->resume[0] ? "a" : "w"))) {
        snprintf(err, sizeof err, "cannot write --log %s: %s", o->log, strerror(errno));
        fail = 1;
    }
    if (!fail && w->rank == 0 && o->log_layers[0]) { /* worker 0's frames, per tensor */
        if (!(sh->layers = fopen(o->log_layers, o->resume[0] ? "a" : "w"))) {
            snprintf(err, sizeof err, "cannot write --log-layers %s: %s", o->log_layers, strerror(errno));
            fail = 1;
        } else {
            if (fseek(sh->layers, 0, SEEK_END) != 0 || ftell(sh->layers) <= 0)
                fprintf(sh->layers, "step,tensor,numel,codec,frames_per_step,bytes_per_step,ratio,density,rel_error,"
                        "codec_ms_per_step\n");
            exchange_track_layers(w->ex, 1);
        }
    }
    /* --init-from: every worker reads the file (before the broadcast below, so the
     * parameters then agree however the file is read; the state is read alike) */
    int init_failed = !fail && o->init_from[0] && model_import_safetensors(w->m, o->init_from, err, sizeof err);
    if (agree_failed(w, fail, "error", err, 1) || agree_failed(w, init_failed, "error: --init-from", err, 1)) {
        sh->status = 1;
        goto done;
    }
    /* every worker starts from rank 0's model */
    {
        ByteBuf b = {0};
        size_t bytes = w->m->pt.total * sizeof(float);
        bytebuf_reserve(&b, bytes);
        b.len = bytes;
        if (w->rank == 0) memcpy(b.p, w->m->params, bytes);
        comm_bcast(comm, &b, 0);
        memcpy(w->m->params, b.p, bytes);
        bytebuf_free(&b);
    }
    w->backup_params = param_arena_alloc(&w->m->pt);
    if (o->ema > 0) { /* from the initial parameters; a resume loads its own */
        w->ema = param_arena_alloc(&w->m->pt);
        memcpy(w->ema, w->m->params, w->m->pt.total * sizeof(float));
    }
    w->backup_state = callocCheck(w->m->nstate + 1, sizeof(float));
    long spe = w->train->steps_per_epoch;
    if (spe <= 0) {
        if (w->rank == 0) fprintf(stderr, "error: the training set gives no full batch of %d per worker\n", o->batch);
        sh->status = 1;
        goto done;
    }
    long total = o->steps > 0 ? o->steps : o->epochs * spe;
    if (agree_failed(w, lr_sched_set_total(&w->sched, total, err, sizeof err) != 0, "error: --schedule", err, 0)) {
        sh->status = 1;
        goto done;
    }
    if (o->resume[0]) {
        /* damage to one worker's sections shows on that worker only (its
         * message names the section, w<k>.) */
        int failed = load_checkpoint(w, o->resume, err, sizeof err) != 0;
        if (agree_failed(w, failed, "error: --resume", err, 0) || replicas_differ(w, 1)) {
            sh->status = 1;
            goto done;
        }
    }
    comm_barrier(comm);
    if (w->rank == 0) {
        char pc[32], optdesc[200], sched[300];
        param_count_str(pc, sizeof pc, param_table_count(&w->m->pt));
        opt_config_describe(&sh->oc, optdesc, sizeof optdesc);
        lr_sched_describe(&w->sched, sched, sizeof sched);
        printf("model: %s, %s parameters (%zu) in %d tensors\n", task->name, pc, param_table_count(&w->m->pt),
               w->m->pt.n);
        printf("data: %ld steps per epoch, batch %d per worker x %d workers = %d global\n", spe, o->batch, world,
               o->batch * world);
        printf("optimizer: %s, lr %g, schedule %s, %ld steps%s\n", optdesc, o->lr, sched, total,
               w->step ? " (resumed)" : "");
        if (w->step) printf("resumed from %s at step %ld\n", o->resume, w->step);
        if (o->resume[0] && w->saved_workers != world) printf("%s\n", w->reshard_note);
        if (o->resume[0] && !strcmp(o->resume, o->save)) w->saved_step = w->step;
        if (!o->quiet) exchange_print(w->ex, stdout, o->show_policy);
        else {
            const DistConfig *c = exchange_config(w->ex);
            char spec[200];
            codec_spec_str(spec, sizeof spec, &c->policy.global);
            printf("exchange: %d workers, codec %s, topology %s, memory %s\n", world, spec,
                   topology_name(c->topology), memory_name(c->memory));
        }
        if (o->cuda)
            printf("device: %s%s\n", w->dx ? "the step stays on the GPU (parameters, gradients, optimizer state, residuals)"
                                          : "the step goes through the host: ", w->dx ? "" : w->dev_why);
        fflush(stdout);
        log_run_record(w, optdesc, sched);
        log_header(sh);
    }
    dev_from_host(w); /* after a --resume: the loaded parameters and optimizer state */
    /* ---- the loop ---- */
    long step0 = w->step; /* after a --resume, this process's first step */
    int stopped_here = 0; /* a signal stopped the loop */
    double t_start = mono_seconds(), t_last = t_start, ema_step = 0, t_eval = 0; /* t_eval: seconds spent evaluating */
    /* statistics of each step, summed over workers and over the steps since the last print */
    enum { S_LOSS, S_CORRECT, S_COUNT, S_COMPUTE, S_CODEC, S_UP, S_DOWN, S_RAW, S_COMM, S_DENSITY, S_COMP_RAW,
           S_COMP_BYTES, S_DATA, S_COMP_DOWN, S_WIRE_MAX, S_HOPS, S_STOP, S_H2D, S_D2H, S_COPY, S_GCOMP,
           S_N = S_GCOMP + 10 };
    double acc_sums[S_N] = {0};
    long acc_steps = 0;
    size_t nvalues = param_table_count(&w->m->pt);
    long stop = o->stop_at > 0 && o->stop_at < total ? o->stop_at : total;
    if (o->no_steps) stop = w->step; /* --steps 0: the model as it starts (initialized, --init-from, --resume) */
    while (w->step < stop) {
        comm->step = w->step; /* for a stall's message */
        Batch batch;
        ModelCopies c0 = model_copies(w->m); /* this step's host<->device copies (GPU models) */
        double td = mono_seconds();
        int n = w->train->next(w->train, &batch);
        if (n == 0) {
            if (w->m->ops->reset_state) w->m->ops->reset_state(w->m);
            n = w->train->next(w->train, &batch);
        }
        if (n < 0) {
            fprintf(stderr, "error: worker %d: training data: %s\n", w->rank, w->train->err);
            fail = 1;
        }
        double t0 = mono_seconds();
        BatchStats st = {0};
        float loss = 0;
        if (!fail) {
            loss = model_forward(w->m, &batch, 1, &st);
            if (isfinite(loss)) model_backward(w->m);
        }
        double t1 = mono_seconds();
        int nan = !isfinite(loss);
        double lr = lr_sched_lr(&w->sched, w->step);
        double epoch = (double)w->step / (double)spe;
        /* agree on failures before the exchange so no rank waits alone */
        double flags[2] = {fail, nan};
        uint64_t s0 = comm->sent, r0 = comm->received;
        comm_allreduce_f64(comm, flags, 2, COMM_MAX);
        comm->sent = s0;
        comm->received = r0;
        if (flags[0] > 0) {
            sh->status = 1;
            break;
        }
        if (flags[1] > 0) {
            if (w->rank == 0)
                fprintf(stderr, "error: the loss became %s at step %ld (epoch %.2f, lr %g); the run stops here%s%s%s%s. "
                        "Try a lower --lr or a warm-up (--schedule ...,warmup=N)\n", isnan(loss) ? "NaN" : "infinite",
                        w->step, epoch, lr, o->save[0] ? "; --save " : "", o->save[0] ? o->save : "",
                        o->save[0] ? " keeps " : "", o->save[0] ? describe_saved(w) : "");
            sh->status = 1;
            break;
        }
        ExchangeStats xs;
        int rc;
#ifdef HAVE_CUDA
        if (w->dev)
            rc = exchange_cuda_step(w->dx, model_cuda_device_params(w->m), model_cuda_device_grads(w->m), &w->dopt,
                                    lr, epoch, w->step, &xs);
        else
#endif
            rc = exchange_step(w->ex, w->m->params, w->m->grads, &w->opt, lr, epoch, w->step, &xs);
        if (rc) {
            fprintf(stderr, "error: %s\n", w->dev ? exchange_cuda_error(w->dx) : exchange_error(w->ex));
            sh->status = 1;
            break;
        }
        w->step++;
        ModelCopies c1 = model_copies(w->m);
#ifdef HAVE_CUDA
        if (w->ema && w->dev)
            exchange_cuda_ema(w->d_ema, model_cuda_device_params(w->m), ema_rate(o->ema, w->step), w->m->pt.total);
        else
#endif
            if (w->ema) ema_update(w->ema, w->m->params, w->m->pt.total, o->ema, w->step);
        /* statistics of this step over all workers (not counted as traffic) */
        double v[S_N] = {[S_LOSS] = st.loss, [S_CORRECT] = (double)st.correct, [S_COUNT] = (double)st.count,
                         [S_COMPUTE] = t1 - t0, [S_CODEC] = xs.codec_s, [S_UP] = (double)xs.up_bytes,
                         [S_DOWN] = (double)xs.down_bytes, [S_RAW] = (double)xs.raw_up, [S_COMM] = xs.comm_model_s,
                         [S_DENSITY] = xs.density, [S_COMP_RAW] = (double)xs.comp_raw,
                         [S_COMP_BYTES] = (double)xs.comp_bytes, [S_DATA] = t0 - td,
                         [S_COMP_DOWN] = (double)xs.comp_down, [S_WIRE_MAX] = (double)xs.wire_max,
                         [S_HOPS] = xs.hops, [S_STOP] = stop_signal != 0, [S_H2D] = c1.h2d - c0.h2d,
                         [S_D2H] = c1.d2h - c0.d2h, [S_COPY] = c1.s - c0.s};
        const GcompParts *gp = &xs.gcomp;
        const uint64_t gparts[10] = {gp->values,   gp->zeros,      gp->level[0], gp->level[1], gp->level[2],
                                     gp->level[3], gp->exp_bits,   gp->level_bits, gp->man_bits, gp->bytes};
        for (int i = 0; i < 10; i++) v[S_GCOMP + i] = (double)gparts[i];
        s0 = comm->sent;
        r0 = comm->received;
        comm_allreduce_f64(comm, v, S_N, COMM_SUM);
        comm->sent = s0;
        comm->received = r0;
        for (int i = 0; i < S_N; i++) acc_sums[i] += v[i];
        acc_steps++;
        double t_now = mono_seconds();
        int epoch_end = w->step % spe == 0;
        /* the first step of this process is shown too: the first seconds are not silent */
        int print = w->step % o->print_every == 0 || w->step == stop || epoch_end || w->step == step0 + 1;
        if (w->rank == 0 && print) {
            double dt = (t_now - t_last) / (double)acc_steps;
            ema_step = ema_step > 0 ? 0.7 * ema_step + 0.3 * dt : dt;
            double per = (double)world * acc_steps; /* means per worker and step */
            double mean_loss = acc_sums[S_LOSS] / per;
            double acc = acc_sums[S_COUNT] > 0 ? acc_sums[S_CORRECT] / acc_sums[S_COUNT] : 0;
            double up = acc_sums[S_UP] / per, down = acc_sums[S_DOWN] / per;
            double raw = acc_sums[S_RAW] / per;
            double ratio = up > 0 ? raw / up : 0;
            double rate = acc_sums[S_COUNT] / (double)acc_steps / dt; /* images or tokens per second */
            char eta[32], ub[32], db[32];
            fmt_eta(eta, sizeof eta, ema_step * (double)(stop - w->step));
            format_bytes(ub, sizeof ub, up);
            format_bytes(db, sizeof db, down);
            if (up == 0 && down == 0) {
                snprintf(ub, sizeof ub, "-");
                snprintf(db, sizeof db, "-");
            }
            /* a sparsifier's density (DGC's warm-up: 25% ... 0.1%), so its ratio reads right */
            char dens[40] = "";
            double dsum = acc_sums[S_DENSITY] / per;
            if (dsum > 0) snprintf(dens, sizeof dens, " at %.3g%% density", 100 * dsum);
            printf("step %6ld/%ld ep %6.2f | loss %.4f %s %6.2f%s | lr %.4g | up %s down %s /step x%.1f%s | "
                   "%.0f ms/step %.0f %s/s | eta %s\n",
                   w->step, total, (double)w->step / spe, mean_loss, task->lm ? "ppl" : "acc",
                   task->lm ? exp(mean_loss) : 100 * acc, task->lm ? "" : "%", lr, ub, db, ratio, dens, 1e3 * dt,
                   rate, task->lm ? "tok" : "img", eta);
            fflush(stdout);
            LogRow r = {"train", w->step, (double)w->step / spe, mean_loss, acc, exp(mean_loss), lr, up, down,
                        8 * up / (double)nvalues, 8 * down / (double)nvalues, ratio,
                        acc_sums[S_COMP_BYTES] > 0 ? acc_sums[S_COMP_RAW] / acc_sums[S_COMP_BYTES] : 0,
                        acc_sums[S_DENSITY] / per, acc_sums[S_COMPUTE] / per, acc_sums[S_CODEC] / per,
                        acc_sums[S_COMM] / per, dt, t_now - t_start, rate, acc_sums[S_DATA] / per,
                        acc_sums[S_COMP_BYTES] / per, acc_sums[S_COMP_DOWN] / per, acc_sums[S_COMP_RAW] / per,
                        acc_sums[S_WIRE_MAX] / per, acc_sums[S_HOPS] / per, {0}, acc_sums[S_H2D] / per,
                        acc_sums[S_D2H] / per, acc_sums[S_COPY] / per};
            for (int i = 0; i < 10; i++) r.gcomp[i] = acc_sums[S_GCOMP + i] / per;
            layers_rows(w, acc_steps);
            log_row(sh, &r);
        }
        if (print) {
            t_last = t_now;
            memset(acc_sums, 0, sizeof acc_sums);
            acc_steps = 0;
        }
        if (epoch_end && o->eval_every > 0 && (w->step / spe) % o->eval_every == 0 && w->step < stop) {
            EvalResult e;
            double te = mono_seconds();
            dev_to_host(w);
            if (replicas_differ(w, 0) || evaluate(w, w->eval, &e)) {
                sh->status = 1;
                break;
            }
            dev_from_host(w);
            t_eval += mono_seconds() - te;
            report_eval(w, task->has_valid ? "valid" : "test", &e, (double)w->step / spe, mono_seconds() - t_start);
            if (w->rank == 0)
                printf("epoch %ld: %.1f s training (%.1f s per epoch so far), %.1f s evaluating in total\n",
                       w->step / spe, mono_seconds() - t_start - t_eval, (mono_seconds() - t_start - t_eval) * spe / (double)w->step,
                       t_eval);
            lr_sched_observe(&w->sched, e.loss); /* the same loss on every worker */
            t_last = mono_seconds();
        }
        if (o->save[0] && o->save_every > 0 && w->step % o->save_every == 0 && w->step < stop) {
            dev_to_host(w);
            if (save_checkpoint(w, o->save)) {
                sh->status = 1;
                break;
            }
            dev_from_host(w);
        }
        /* a SIGINT/SIGTERM on any worker: all stop after this same step (it is in the
         * statistics every worker sums) */
        if (v[S_STOP] > 0 && w->step < stop) {
            if (w->rank == 0 || !sh->group) sh->stopped = (int)w->step; /* once per process */
            stopped_here = 1;
            break;
        }
    }
    dev_to_host(w); /* what follows reads the host's parameters and optimizer state */
    if (stopped_here && sh->status == 0) {
        /* the state after the last whole step, for --resume; no evaluation */
        if (o->save[0] && !(o->save_every > 0 && w->step % o->save_every == 0)) {
            if (save_checkpoint(w, o->save)) sh->status = 1;
        }
        if (w->rank == 0 && sh->status == 0)
        {
            if (o->save[0])
                fprintf(stderr, "stopped by a signal after step %ld of %ld; saved %s: continue with the same command "
                        "and --resume %s\n", w->step, total, o->save, o->save);
            else
                fprintf(stderr, "stopped by a signal after step %ld of %ld; nothing saved (no --save)\n", w->step, total);
        }
        goto done;
    }
    if (sh->status == 0 && replicas_differ(w, 0)) sh->status = 1;
    if (sh->status == 0) {
        EvalResult e;
        double t_train = mono_seconds() - t_start - t_eval, te = mono_seconds();
        if (o->eval_every >= 0) { /* -1: never */
            if (evaluate(w, w->eval, &e) == 0) {
                report_eval(w, task->has_valid ? "valid" : "test", &e, (double)w->step / spe, mono_seconds() - t_start);
                if (task->has_valid) {
                    char why[sizeof err + 32];
                    DataIter *test = task->data_new(task, SPLIT_TEST, w->rank, world, o->batch, o->seed, err, sizeof err);
                    snprintf(why, sizeof why, "no test evaluation: %s", test ? "" : err);
                    /* a corpus may have no test split: a note, on every worker alike */
                    if (!agree_failed(w, !test, "note", why, 1)) {
                        if (evaluate(w, test, &e) == 0) report_eval(w, "test", &e, (double)w->step / spe, mono_seconds() - t_start);
                        else sh->status = 1;
                    }
                    if (test) test->free(test);
                }
            } else {
                sh->status = 1;
            }
        }
        t_eval += mono_seconds() - te;
        if (w->rank == 0) {
            long ran = w->step - step0 > 0 ? w->step - step0 : 1;
            if (step0 > 0)
                printf("done: step %ld; %ld steps since the resume in %.1f s of training (%.3f s/step, %.1f s per epoch) "
                       "+ %.1f s evaluating\n", w->step, w->step - step0, t_train, t_train / (double)ran,
                       t_train * spe / (double)ran, t_eval);
            else
                printf("done: %ld steps in %.1f s of training (%.3f s/step, %.1f s per epoch) + %.1f s evaluating\n",
                       w->step, t_train, t_train / (double)ran, t_train * spe / (double)ran, t_eval);
        }
        if (o->save[0]) {
            if (save_checkpoint(w, o->save)) sh->status = 1;
            else if (w->rank == 0) printf("saved %s\n", o->save);
        }
        /* every worker holds the same parameters and statistics (replicas_differ above) */
        if (o->export_path[0] && w->rank == 0) {
            if (model_export_safetensors(w->m, o->export_path, w->step, task->name, err, sizeof err)) {
                fprintf(stderr, "error: --export: %s\n", err);
                sh->status = 1;
            } else {
                printf("exported %s (PyTorch state_dict, safetensors)\n", o->export_path);
            }
        }
    }
done:
    if (w->rank == 0 && sh->layers && fclose(sh->layers) != 0) {
        fprintf(stderr, "error: writing --log-layers %s failed at the end\n", o->log_layers);
        sh->log_failed = 1;
    }
    if (w->rank == 0) sh->layers = NULL;
    if (w->train) w->train->free(w->train);
    if (w->eval) w->eval->free(w->eval);
#ifdef HAVE_CUDA
    if (w->dx) { /* before the host exchange, whose policy and arenas it points at */
        exchange_cuda_free(w->dx);
        optim_free_cuda(&w->dopt);
    }
    if (w->d_ema) cudaCheck(cudaFree(w->d_ema));
#endif
    exchange_free(w->ex);
    if (w->m) optim_free(&w->opt);
    model_free(w->m);
    if (task->cuda && task->thread_release) task->thread_release();
    param_arena_free(w->backup_params);
    if (w->ema) param_arena_free(w->ema);
    free(w->backup_state);
}

static void local_entry(int rank, void *arg) {
    Shared *sh = arg;
    Comm *c = comm_local_new(sh->group, rank);
    worker_main(sh, c);
    comm_free(c);
}

static int ncores(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

int train_run(TrainOpts *o, Task *task, int *argc, char ***argv) {
    Shared sh = {0};
    install_stop_handlers();
    for (int i = 0, at = 0; i < *argc && at < (int)sizeof sh.command - 1; i++)
        at += snprintf(sh.command + at, sizeof sh.command - (size_t)at, "%s%s", i ? " " : "", (*argv)[i]);
    sh.o = o;
    sh.task = task;
    if (parse_optim_sched(o, &sh.oc, &sh.sched)) return 2;
    task->cuda = o->cuda;
#ifdef HAVE_CUDA
    /* said once here, rather than by every worker's model */
    if (o->cuda && nn_cuda_device_count() < 1) {
        fprintf(stderr, "error: --device cuda: no CUDA device is visible (cudaGetDeviceCount reports none or fails)\n");
        return 1;
    }
    /* heuristic by default: every process (a resume, each rank and worker) then
     * chooses the same convolution algorithms, so runs repeat bit for bit */
    if (o->cuda) nn_cuda_set_conv_search(o->cudnn_find > 0 ? NN_CONV_FIND : NN_CONV_HEURISTIC);
#endif
    int use_nccl = !strcmp(o->backend, "nccl");
    int use_mpi = use_nccl || !strcmp(o->backend, "mpi") || (!strcmp(o->backend, "auto") && comm_mpi_launched());
    if (o->log[0]) {
        size_t l = strlen(o->log);
        sh.log_json = l > 6 && !strcmp(o->log + l - 6, ".jsonl");
    }
    int status;
    if (use_mpi) {
        if (!comm_mpi_available() || (use_nccl && !comm_nccl_available())) {
            fprintf(stderr, "error: this build has no %s backend; rebuild with %s installed (make deps; make)\n",
                    use_nccl ? "NCCL" : "MPI", use_nccl ? "CUDA, NCCL and MPI" : "MPI");
            return 1;
        }
        Comm *c = use_nccl ? comm_nccl_new(argc, argv) : comm_mpi_new(argc, argv);
        if (o->workers_given && o->workers != c->size && c->rank == 0)
            fprintf(stderr, "note: --workers %d is ignored: the %d MPI processes are the workers\n",
                    o->workers, c->size);
        const char *ls = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
        int local = ls ? atoi(ls) : 1;
        sh.threads_per_worker = o->threads ? o->threads : (ncores() / (local > 0 ? local : 1));
        if (sh.threads_per_worker < 1) sh.threads_per_worker = 1;
        worker_main(&sh, c);
        double f = sh.status || sh.log_failed || (sh.log && log_close(&sh));
        comm_allreduce_f64(c, &f, 1, COMM_MAX);
        status = f > 0 ? 1 : 0;
        if (!status && sh.stopped) status = 128 + (stop_signal ? stop_signal : SIGTERM);
        comm_free(c);
        comm_mpi_finalize();
    } else {
        int threads = o->threads ? o->threads : ncores();
        sh.threads_per_worker = threads / o->workers > 0 ? threads / o->workers : 1;
        sh.group = comm_local_group_new(o->workers);
        comm_local_run(o->workers, local_entry, &sh);
        comm_local_group_free(sh.group);
        status = sh.status || sh.log_failed || (sh.log && log_close(&sh));
        if (!status && sh.stopped) status = 128 + stop_signal;
    }
    return status;
}
