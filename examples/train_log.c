/* The trainers' output (see trainer.h): --log (CSV or JSON lines), --log-layers,
 * the evaluation lines. */
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if defined(__has_include)
#if __has_include("gcx_version.h")
#include "gcx_version.h"
#endif
#endif
#ifndef GCX_VERSION
#define GCX_VERSION "unknown"
#endif
#include "examples/trainer_internal.h"

/* ---------------------------------------------------------------- log ---- */
/* the columns after kind and step, in order: name, printf format, the LogRow field */
#define COL(name, fmt, field) {name, fmt, offsetof(LogRow, field)}
static const struct {
    const char *name, *fmt;
    size_t off;
} log_cols[] = {
    COL("epoch", "%.4f", epoch), COL("loss", "%.6g", loss), COL("acc", "%.6g", acc), COL("ppl", "%.6g", ppl),
    COL("lr", "%.6g", lr), COL("up_bytes", "%.0f", up), COL("down_bytes", "%.0f", down),
    COL("bits_up", "%.6g", bits_up), COL("bits_down", "%.6g", bits_down), COL("ratio", "%.6g", ratio),
    COL("ratio_compressed", "%.6g", ratio_c), COL("density", "%.6g", density), COL("compute_s", "%.6g", compute_s),
    COL("codec_s", "%.6g", codec_s), COL("comm_model_s", "%.6g", comm_s), COL("step_s", "%.6g", step_s),
    COL("total_s", "%.6g", total_s), COL("samples_per_s", "%.6g", rate), COL("data_s", "%.6g", data_s),
    /* per step, as up_bytes: the compressed tensors' frames up and down and their fp32 size
     * up (so bits per value over them alone), and the network model's inputs */
    COL("comp_up_bytes", "%.1f", comp_up), COL("comp_down_bytes", "%.1f", comp_down),
    COL("comp_raw_bytes", "%.1f", comp_raw), COL("wire_max_bytes", "%.1f", wire_max), COL("hops", "%.4g", hops),
    /* per step, as up_bytes: what this worker's gcomp frames hold (compress/gcomp.h); 0 without gcomp */
    COL("gcomp_values", "%.1f", gcomp_values), COL("gcomp_zeros", "%.1f", gcomp_zeros),
    COL("gcomp_lv0", "%.1f", gcomp_lv0), COL("gcomp_lv1", "%.1f", gcomp_lv1), COL("gcomp_lv2", "%.1f", gcomp_lv2),
    COL("gcomp_lv3", "%.1f", gcomp_lv3), COL("gcomp_exp_bits", "%.1f", gcomp_exp_bits),
    COL("gcomp_level_bits", "%.1f", gcomp_level_bits), COL("gcomp_man_bits", "%.1f", gcomp_man_bits),
    COL("gcomp_bytes", "%.1f", gcomp_bytes),
    /* per step, as up_bytes: what a GPU model copied host -> device and device -> host
     * (parameters, state, gradients; not the batch, nor the LSTM's carried hidden state)
     * and the host's wall time in those copies (nn/model_cuda.h); 0 with --device cpu */
    COL("h2d_bytes", "%.0f", h2d), COL("d2h_bytes", "%.0f", d2h), COL("copy_s", "%.6g", copy_s)};
#undef COL
#define LOG_NCOLS (int)(sizeof log_cols / sizeof log_cols[0])

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
void layers_rows(Worker *w, long steps) {
    Shared *sh = w->sh;
    const LayerStats *ls = exchange_layer_stats(w->ex);
    if (!sh->layers || !ls || steps <= 0) return;
    const TensorPolicy *pol = exchange_policy(w->ex);
    for (int t = 0; t < w->m->pt.n; t++) {
        const LayerStats *x = &ls[t];
        char spec[160];
        codec_spec_str(spec, sizeof spec, &pol[t].spec);
        /* the codec in quotes: its parameters are separated by commas (gcomp:ntheta=8,every=50,...) */
        fprintf(sh->layers, "%ld,%s,%zu,\"%s\",%.4g,%.1f,", w->step, w->m->pt.t[t].name, w->m->pt.t[t].numel, spec,
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
FILE *log_open(Shared *sh, const char *path, const char *mode) {
    FILE *f = fopen(path, mode);
    if (f) sh->log_fresh = fseek(f, 0, SEEK_END) != 0 || ftell(f) <= 0;
    return f;
}

/* closes the log at the end: 0, or 1 when the last writes fail there */
int log_close(Shared *sh) {
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


/* The log's first record (and a resume's first): what produced it. A JSON object,
 * in CSV behind "# run: " (readers skip lines starting with '#'). */
void log_run_record(Worker *w, const char *optdesc, const char *sched) {
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

void log_header(Shared *sh) {
    if (!sh->log || sh->log_json) return;
    if (!sh->log_fresh) return; /* a resumed run appends to its log, which has the header already */
    fprintf(sh->log, "kind,step");
    for (int i = 0; i < LOG_NCOLS; i++) fprintf(sh->log, ",%s", log_cols[i].name);
    fprintf(sh->log, "\n");
    log_check(sh);
}

/* One row. CSV writes non-finite values as nan/inf (what strtod reads back);
 * JSON has no such numbers, so they are written as null there. */
void log_row(Shared *sh, const LogRow *r) {
    if (!sh->log) return;
    if (sh->log_json) fprintf(sh->log, "{\"kind\":\"%s\",\"step\":%ld", r->kind, r->step);
    else fprintf(sh->log, "%s,%ld", r->kind, r->step);
    for (int i = 0; i < LOG_NCOLS; i++) {
        double v = *(const double *)((const char *)r + log_cols[i].off);
        if (sh->log_json) {
            fprintf(sh->log, ",\"%s\":", log_cols[i].name);
            if (!isfinite(v)) {
                fprintf(sh->log, "null");
                continue;
            }
        } else {
            fputc(',', sh->log);
        }
        fprintf(sh->log, log_cols[i].fmt, v);
    }
    fprintf(sh->log, sh->log_json ? "}\n" : "\n");
    log_check(sh);
}

void fmt_eta(char *buf, size_t n, double s) {
    if (!isfinite(s) || s < 0) s = 0;
    long t = (long)s;
    if (t >= 3600) snprintf(buf, n, "%ldh%02ldm", t / 3600, (t / 60) % 60);
    else snprintf(buf, n, "%ldm%02lds", t / 60, t % 60);
}

void report_eval(Worker *w, const char *split, const EvalResult *e, double epoch, double total_s) {
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
