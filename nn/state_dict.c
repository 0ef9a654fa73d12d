/* A Model as PyTorch's state_dict in safetensors (see state_dict.h). One list
 * of entries, built from the parameter table, serves both directions: export
 * writes it, import checks the file against it and then copies. */
#include "nn/state_dict.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { E_PARAM, E_MEAN, E_VAR, E_COUNT, E_TIED };

typedef struct {
    char name[PARAM_NAME_MAX + 24];
    int what;    /* E_* */
    int ndim;
    uint64_t shape[PARAM_MAX_DIMS];
    float *data; /* into params or state (E_COUNT: none) */
    size_t numel;
} Entry;

/* the state_dict of m: *out malloc'ed, count returned; -1 with a message when
 * the table does not have the layout this file knows (state not covered) */
static int entries(const Model *m, Entry **out, char *err, size_t errlen) {
    const ParamTable *pt = &m->pt;
    Entry *e = calloc((size_t)pt->n * 4 + 2, sizeof *e);
    if (!e) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    int n = 0, bn = -1, has_enc = -1, has_dec_w = 0;
    size_t st = 0;
    for (int i = 0; i < pt->n; i++) {
        const ParamInfo *p = &pt->t[i];
        if (!strcmp(p->name, "encoder.weight") && p->kind == PK_EMBEDDING) has_enc = i;
        if (!strcmp(p->name, "decoder.weight")) has_dec_w = 1;
        /* a tied decoder's weight, before its bias as in the module */
        if (!strcmp(p->name, "decoder.bias") && has_enc >= 0 && !has_dec_w) {
            const ParamInfo *q = &pt->t[has_enc];
            Entry *x = &e[n++];
            snprintf(x->name, sizeof x->name, "decoder.weight");
            x->what = E_TIED, x->ndim = 2, x->shape[0] = (uint64_t)q->shape[0], x->shape[1] = (uint64_t)q->shape[1];
            x->data = m->params + q->offset, x->numel = q->numel;
        }
        Entry *x = &e[n++];
        snprintf(x->name, sizeof x->name, "%s", p->name);
        x->what = E_PARAM, x->ndim = p->ndim;
        for (int d = 0; d < p->ndim; d++) x->shape[d] = (uint64_t)p->shape[d];
        x->data = m->params + p->offset, x->numel = p->numel;
        if (p->kind == PK_BN_WEIGHT) bn = i;
        if (p->kind != PK_BN_BIAS) continue;
        /* "<bn>.bias" right after "<bn>.weight": the running statistics follow */
        size_t L = strlen(p->name);
        if (bn < 0 || L < 5 || strcmp(p->name + L - 5, ".bias") || strncmp(pt->t[bn].name, p->name, L - 4) ||
            strcmp(pt->t[bn].name + L - 4, "weight") || pt->t[bn].numel != p->numel) {
            snprintf(err, errlen, "batch-norm bias %s does not follow its weight in the parameter table", p->name);
            free(e);
            return -1;
        }
        size_t C = p->numel;
        if (st + 2 * C > m->nstate) break; /* said below */
        for (int k = 0; k < 3; k++) {
            Entry *s = &e[n++];
            static const char *suffix[3] = {"running_mean", "running_var", "num_batches_tracked"};
            snprintf(s->name, sizeof s->name, "%.*s%s", (int)(L - 4), p->name, suffix[k]);
            s->what = E_MEAN + k;
            s->ndim = k < 2 ? 1 : 0, s->shape[0] = C;
            s->data = k < 2 ? m->state + st + (size_t)k * C : NULL;
            s->numel = k < 2 ? C : 1;
        }
        st += 2 * C;
        bn = -1;
    }
    if (st != m->nstate) {
        snprintf(err, errlen, "the model's state holds %zu values, its batch norms' running statistics %zu: this "
                 "model's state is not exportable as a state_dict", m->nstate, st);
        free(e);
        return -1;
    }
    *out = e;
    return n;
}

int model_export_safetensors(const Model *m, const char *path, long steps, const char *task, char *err,
                             size_t errlen) {
    Entry *e;
    int n = entries(m, &e, err, errlen);
    if (n < 0) return -1;
    StWriteTensor *t = calloc((size_t)n + 1, sizeof *t);
    if (!t) {
        free(e);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    int64_t count = steps;
    for (int i = 0; i < n; i++) {
        t[i].name = e[i].name;
        t[i].dtype = e[i].what == E_COUNT ? ST_I64 : ST_F32;
        t[i].ndim = e[i].ndim;
        memcpy(t[i].shape, e[i].shape, sizeof e[i].shape);
        t[i].data = e[i].what == E_COUNT ? (const void *)&count : (const void *)e[i].data;
    }
    char stepbuf[32];
    snprintf(stepbuf, sizeof stepbuf, "%ld", steps);
    const char *meta[6] = {"format", "pt", "gcx_task", task ? task : "", "gcx_step", stepbuf};
    int rc = st_write(path, t, n, meta, 3, err, errlen);
    free(t);
    free(e);
    return rc;
}

int model_import_st(Model *m, const StFile *sf, const char *name, char *err, size_t errlen) {
    Entry *e;
    int n = entries(m, &e, err, errlen);
    if (n < 0) return -1;
    int rc = -1, missing = 0;
    const char *first_missing = NULL;
    const StTensor **src = calloc((size_t)n + 1, sizeof *src);
    if (!src) {
        snprintf(err, errlen, "out of memory");
        goto out;
    }
    /* every tensor of the file is one of the model's, with its dtype and shape */
    for (int i = 0; i < sf->n; i++) {
        const StTensor *t = &sf->t[i];
        int k = 0;
        while (k < n && strcmp(e[k].name, t->name)) k++;
        if (k == n) {
            snprintf(err, errlen, "%s: tensor %.200s is not in this model (%d tensors in its state_dict); wrong model "
                     "or wrong size options?", name, t->name, n);
            goto out;
        }
        StDtype want = e[k].what == E_COUNT ? ST_I64 : ST_F32;
        if (t->dtype != want) {
            snprintf(err, errlen, "%s: tensor %.200s is %s, this model needs %s%s", name, t->name,
                     st_dtype_name(t->dtype), st_dtype_name(want),
                     want == ST_F32 ? " (in PyTorch: model.float() before saving)" : "");
            goto out;
        }
        int same = t->ndim == e[k].ndim;
        for (int d = 0; same && d < t->ndim; d++) same = t->shape[d] == e[k].shape[d];
        if (!same) {
            char a[200], b[200];
            st_shape_str(a, sizeof a, t->shape, t->ndim);
            st_shape_str(b, sizeof b, e[k].shape, e[k].ndim);
            snprintf(err, errlen, "%s: tensor %.200s has shape %s, this model's is %s", name, t->name, a, b);
            goto out;
        }
        src[k] = t;
    }
    for (int k = 0; k < n; k++)
        if (!src[k] && e[k].what != E_COUNT && !missing++) first_missing = e[k].name;
    if (missing) {
        snprintf(err, errlen, "%s: tensor %.200s of this model is missing from the file (%d of its %d tensors "
                 "missing); wrong model or wrong size options?", name, first_missing, missing, n);
        goto out;
    }
    for (int k = 0; k < n; k++)
        if (e[k].what == E_TIED) { /* against the file's encoder.weight, not the model's */
            const StTensor *enc = st_find(sf, "encoder.weight");
            if (!enc || memcmp(src[k]->data, enc->data, src[k]->nbytes) != 0) {
                snprintf(err, errlen, "%s: decoder.weight differs from encoder.weight, but this model ties them "
                         "(train_lstm --tie 1); use an untied model (--tie 0) for these weights", name);
                goto out;
            }
        }
    /* every check passed: copy */
    for (int k = 0; k < n; k++)
        if (e[k].what != E_COUNT && e[k].what != E_TIED) memcpy(e[k].data, src[k]->data, src[k]->nbytes);
    rc = 0;
out:
    free(src);
    free(e);
    return rc;
}

int model_import_safetensors(Model *m, const char *path, char *err, size_t errlen) {
    StFile sf;
    if (st_read(&sf, path, err, errlen)) return -1;
    int rc = model_import_st(m, &sf, path, err, errlen);
    st_free(&sf);
    return rc;
}
