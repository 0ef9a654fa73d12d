/* The trainers' checkpoints (see trainer.h): --save writes every worker's
 * sections into one file on rank 0, --resume loads them back (on the saved
 * worker count or another, reshard_checkpoint), and the replica check
 * (replicas_differ) votes on what the exchange keeps identical on every
 * worker. docs/DIST.md, Checkpoints, has the file's contents and rules. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/check.h"
#include "common/ckpt.h"
#include "common/crc32c.h"
#include "examples/trainer_internal.h"

#define MAX_SECTIONS 32

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
void meta_string(char *buf, size_t n, const Worker *w, int exchange, int form) {
    meta_string_for(buf, n, w, w->comm->size, exchange, form);
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
int replicas_differ(Worker *w, int at_resume) {
    int world = w->comm->size;
    if (!at_resume && w->replicas_checked == w->step) return 0; /* an evaluation and a save after one step */
    CkptSection s[2 + OPT_MAX_STATE];
    int n = exchange_replicas(w->ex, w->m->params, &w->opt, s, 2 + OPT_MAX_STATE);
    if (n == 0) return 0;
    double *crc = callocCheck((size_t)n * (size_t)world, sizeof *crc);
    for (int i = 0; i < n; i++) crc[(size_t)i * world + w->rank] = (double)crc32c(0, s[i].data, s[i].len);
    comm_allreduce_uncounted(w->comm, crc, (size_t)n * (size_t)world, COMM_SUM);
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
const char *describe_saved(const Worker *w) {
    static char buf[96];
    if (w->saved_step >= 0) snprintf(buf, sizeof buf, "its checkpoint of step %ld (resume from it)", w->saved_step);
    else snprintf(buf, sizeof buf, "what it held before this run (no checkpoint was written)");
    return buf;
}

int save_checkpoint(Worker *w, const char *path) {
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
    CommMark mark = comm_uncounted_begin(w->comm); /* a checkpoint is not the exchange's traffic */
    comm_gatherv(w->comm, &all, lens, mine.p, mine.len, 0);
    comm_uncounted_end(w->comm, mark);
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

int load_checkpoint(Worker *w, const char *path, char *err, size_t errlen) {
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
