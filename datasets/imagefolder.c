/* Image-folder scanning and the threaded decoding loader (imagefolder.h). */
#include "datasets/imagefolder.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/rng.h"
#include "datasets/decode.h"
#include "datasets/transform.h"

#define FOLDER_HINT                                                                                              \
    "image folders are expected as ROOT/train/<class>/<images> and ROOT/val/<class>/<images> (jpg, png, bmp, " \
    "ppm, pgm); for ImageNet extract ILSVRC2012 train and sort the validation images into class folders"
#define FOLDER_MAX_DEPTH 16

/* ------------------------------------------------------------ string lists */

typedef struct {
    char **s;
    int64_t n, cap;
} StrList;

static int sl_push(StrList *l, const char *s) {
    if (l->n == l->cap) {
        int64_t cap = l->cap ? 2 * l->cap : 64;
        char **ns = realloc(l->s, sizeof(char *) * (size_t)cap);
        if (!ns) return -GC_ERR_NOMEM;
        l->s = ns;
        l->cap = cap;
    }
    char *d = strdup(s);
    if (!d) return -GC_ERR_NOMEM;
    l->s[l->n++] = d;
    return 0;
}

static void sl_free(StrList *l) {
    for (int64_t i = 0; i < l->n; i++) free(l->s[i]);
    free(l->s);
    memset(l, 0, sizeof *l);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int is_image_name(const char *name) {
    static const char *ext[] = {".jpg", ".jpeg", ".png", ".bmp", ".ppm", ".pgm"};
    size_t n = strlen(name);
    for (size_t i = 0; i < sizeof ext / sizeof ext[0]; i++) {
        size_t e = strlen(ext[i]);
        if (n > e && strcasecmp(name + n - e, ext[i]) == 0) return 1;
    }
    return 0;
}

/* entries of dir: dirs (want_dirs = 1) or image files, names only, sorted */
static int list_dir(StrList *out, const char *dir, int want_dirs, char *err, size_t errlen) {
    DIR *d = opendir(dir);
    if (!d) {
        snprintf(err, errlen, "cannot open directory '%s': %s. " FOLDER_HINT, dir, strerror(errno));
        return -GC_ERR_IO;
    }
    struct dirent *e;
    char path[DATA_PATH_MAX];
    int rc = 0;
    while ((e = readdir(d)) != NULL && rc == 0) {
        if (e->d_name[0] == '.') continue;
        int w = snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (w < 0 || (size_t)w >= sizeof path) continue;
        struct stat st;
        if (stat(path, &st) != 0) continue; /* dangling link */
        if (want_dirs ? S_ISDIR(st.st_mode) : (S_ISREG(st.st_mode) && is_image_name(e->d_name)))
            rc = sl_push(out, e->d_name);
    }
    closedir(d);
    if (rc) {
        snprintf(err, errlen, "out of memory listing '%s'", dir);
        return rc;
    }
    if (out->n > 1) qsort(out->s, (size_t)out->n, sizeof(char *), cmp_str);
    return 0;
}

/* every directory under (and including) dir, as full paths */
static int walk_dirs(StrList *out, const char *dir, int depth, char *err, size_t errlen) {
    int rc = sl_push(out, dir);
    if (rc || depth >= FOLDER_MAX_DEPTH) return rc;
    StrList sub = {0};
    rc = list_dir(&sub, dir, 1, err, errlen);
    char path[DATA_PATH_MAX];
    for (int64_t i = 0; i < sub.n && rc == 0; i++) {
        int w = snprintf(path, sizeof path, "%s/%s", dir, sub.s[i]);
        if (w < 0 || (size_t)w >= sizeof path) continue;
        rc = walk_dirs(out, path, depth + 1, err, errlen);
    }
    sl_free(&sub);
    return rc;
}

/* image files of one class directory, torchvision order */
static int class_files(StrList *files, const char *cdir, char *err, size_t errlen) {
    StrList dirs = {0};
    int rc = walk_dirs(&dirs, cdir, 0, err, errlen);
    if (rc == 0) qsort(dirs.s, (size_t)dirs.n, sizeof(char *), cmp_str);
    char path[DATA_PATH_MAX];
    for (int64_t i = 0; i < dirs.n && rc == 0; i++) {
        StrList f = {0};
        rc = list_dir(&f, dirs.s[i], 0, err, errlen);
        for (int64_t j = 0; j < f.n && rc == 0; j++) {
            int w = snprintf(path, sizeof path, "%s/%s", dirs.s[i], f.s[j]);
            if (w < 0 || (size_t)w >= sizeof path) continue;
            rc = sl_push(files, path);
        }
        sl_free(&f);
    }
    sl_free(&dirs);
    return rc;
}

void folderset_free(FolderSet *s) {
    if (!s) return;
    for (int i = 0; i < s->num_classes && s->classes; i++) free(s->classes[i]);
    free(s->classes);
    free(s->paths);
    free(s->offsets);
    free(s->labels);
    memset(s, 0, sizeof *s);
}

int folderset_scan(FolderSet *s, const char *root, int train, char *err, size_t errlen) {
    memset(s, 0, sizeof *s);
    char tdir[DATA_PATH_MAX], sdir[DATA_PATH_MAX], cdir[DATA_PATH_MAX];
    if (strlen(root) + 8 >= sizeof tdir) {
        snprintf(err, errlen, "image folder root '%.64s...' is too long", root);
        return -GC_ERR_PARAM;
    }
    snprintf(tdir, sizeof tdir, "%s/train", root);
    snprintf(sdir, sizeof sdir, "%s/%s", root, train ? "train" : "val");
    StrList classes = {0}, files = {0};
    int64_t *cls_end = NULL;
    int rc = list_dir(&classes, tdir, 1, err, errlen);
    if (rc == 0 && classes.n == 0) {
        snprintf(err, errlen, "'%s' has no class directories. " FOLDER_HINT, tdir);
        rc = -GC_ERR_COUNT;
    }
    if (rc == 0 && classes.n > 0x7FFFFFFF) rc = -GC_ERR_OVERSIZED;
    if (rc == 0 && !train) {
        /* every val directory must be a training class */
        StrList vd = {0};
        rc = list_dir(&vd, sdir, 1, err, errlen);
        for (int64_t i = 0; i < vd.n && rc == 0; i++)
            if (!bsearch(&vd.s[i], classes.s, (size_t)classes.n, sizeof(char *), cmp_str)) {
                snprintf(err, errlen, "'%s/%s' is not a class of '%s' (validation classes must be training classes)",
                         sdir, vd.s[i], tdir);
                rc = -GC_ERR_CORRUPT;
            }
        sl_free(&vd);
    }
    if (rc == 0) {
        cls_end = malloc(sizeof(int64_t) * (size_t)classes.n);
        if (!cls_end) rc = -GC_ERR_NOMEM;
    }
    for (int64_t c = 0; c < classes.n && rc == 0; c++) {
        int w = snprintf(cdir, sizeof cdir, "%s/%s", sdir, classes.s[c]);
        if (w < 0 || (size_t)w >= sizeof cdir) {
            snprintf(err, errlen, "path of class '%s' under '%s' is too long", classes.s[c], sdir);
            rc = -GC_ERR_PARAM;
            break;
        }
        struct stat st;
        int64_t before = files.n;
        if (train || stat(cdir, &st) == 0) rc = class_files(&files, cdir, err, errlen);
        if (rc == 0 && train && files.n == before) {
            snprintf(err, errlen, "class directory '%s' holds no image (jpg, jpeg, png, bmp, ppm, pgm)", cdir);
            rc = -GC_ERR_COUNT;
        }
        if (rc == 0) cls_end[c] = files.n;
    }
    if (rc == 0 && files.n == 0) {
        snprintf(err, errlen, "'%s' holds no image. " FOLDER_HINT, sdir);
        rc = -GC_ERR_COUNT;
    }
    if (rc == 0 && files.n > 0x7FFFFFFF) {
        snprintf(err, errlen, "'%s': %lld images, more than this loader indexes", sdir, (long long)files.n);
        rc = -GC_ERR_OVERSIZED;
    }
    if (rc == 0) {
        size_t total = 0;
        for (int64_t i = 0; i < files.n; i++) total += strlen(files.s[i]) + 1;
        s->paths = malloc(total);
        s->offsets = malloc(sizeof(int64_t) * (size_t)files.n);
        s->labels = malloc(sizeof(int) * (size_t)files.n);
        s->classes = calloc((size_t)classes.n, sizeof(char *));
        if (!s->paths || !s->offsets || !s->labels || !s->classes) {
            rc = -GC_ERR_NOMEM;
        } else {
            size_t off = 0;
            int64_t c = 0;
            for (int64_t i = 0; i < files.n; i++) {
                while (i >= cls_end[c]) c++;
                size_t len = strlen(files.s[i]) + 1;
                memcpy(s->paths + off, files.s[i], len);
                s->offsets[i] = (int64_t)off;
                s->labels[i] = (int)c;
                off += len;
            }
            s->n = files.n;
            s->num_classes = (int)classes.n;
            for (int64_t k = 0; k < classes.n; k++) {
                s->classes[k] = classes.s[k];
                classes.s[k] = NULL;
            }
        }
    }
    if (rc == -GC_ERR_NOMEM) snprintf(err, errlen, "out of memory scanning '%s'", sdir);
    if (rc == -GC_ERR_OVERSIZED && err[0] == '\0') snprintf(err, errlen, "'%s': too many classes", tdir);
    free(cls_end);
    sl_free(&files);
    sl_free(&classes);
    if (rc) folderset_free(s);
    return rc;
}

/* ------------------------------------------------------------ threaded loader */

typedef struct {
    float *x;       /* [batch, 3, S, S] */
    int *y;         /* [batch] */
    int *idx;       /* [batch] dataset indices */
    int64_t seq;    /* batch sequence number held, -1: none */
    int64_t epoch;  /* epoch of that batch */
    int n;          /* samples */
    int claimed;    /* samples handed to decoders */
    int done;       /* samples finished */
    int err_k;      /* lowest failed sample, n if none */
    int err_rc;
    char errmsg[DATA_ERR_LEN];
} Slot;

typedef struct {
    FolderSet *s;
    int own;
    int S;        /* output size */
    int augment;  /* random-resized-crop + flip */
    int nthreads, Q;
    pthread_t *th;
    int started;
    pthread_mutex_t mu;
    pthread_cond_t cv_work, cv_done;
    int stop;
    Slot *slots;
    /* producer: the batch sequence from the start position */
    int64_t prod_seq, prod_epoch, prod_cursor;
    int *order, *scratch;
    int64_t order_epoch;
    Slot *open; /* batch whose samples are being handed out */
    /* consumer */
    int64_t cons_seq, cons_epoch;
    ImageLoader *l;
} FolderImpl;

static int64_t epoch_limit(const ImageLoader *l) {
    return l->opts.train ? l->steps_per_epoch * l->opts.batch : l->samples_per_epoch;
}

/* decode + transform one sample into out; 0 or an error with msg */
static int make_sample(float *out /* [3, S, S] */, const FolderImpl *m, int64_t idx, int64_t epoch, char *msg,
                       size_t msglen) {
    const ImageLoader *l = m->l;
    const char *path = folderset_path(m->s, idx);
    int W, H;
    uint8_t *img;
    int rc = image_decode_file(&img, &H, &W, path, msg, msglen);
    if (rc) return rc;
    int S = m->S;
    if (m->augment) {
        uint64_t key = data_aug_key(l->opts.seed, epoch, idx, l->opts.worker);
        int y0, x0, h, w;
        random_resized_crop_params(&y0, &x0, &h, &w, H, W, key);
        int flip = (int)(rng_hash64(key, 40) >> 63);
        rc = resize_crop_normalize(out, img, H, W, 3, y0, x0, h, w, S, S, 0, 0, S, S, flip, imagenet_mean,
                                   imagenet_std);
    } else {
        int OH, OW, top, left;
        eval_resize_params(&OH, &OW, &top, &left, H, W, eval_short_side(S), S);
        rc = resize_crop_normalize(out, img, H, W, 3, 0, 0, H, W, OH, OW, top, left, S, S, 0, imagenet_mean,
                                   imagenet_std);
    }
    image_free(img);
    if (rc) snprintf(msg, msglen, "cannot transform image '%s' (%dx%d): %s", path, W, H, gc_strerror(rc));
    return rc;
}

/* under mu: open the next batch into its slot; 0 if none may be opened now */
static int open_batch(FolderImpl *m) {
    ImageLoader *l = m->l;
    int64_t limit = epoch_limit(l);
    if (m->prod_cursor >= limit) {
        m->prod_epoch++;
        m->prod_cursor = 0;
    }
    if (m->prod_seq >= m->cons_seq + m->Q) return 0;        /* ring full */
    if (!l->opts.train && m->prod_epoch != m->cons_epoch) return 0; /* eval: one pass at a time */
    Slot *sl = &m->slots[m->prod_seq % m->Q];
    if (m->order_epoch != m->prod_epoch) {
        data_epoch_order(m->order, m->scratch, l->n, &l->opts, m->prod_epoch);
        m->order_epoch = m->prod_epoch;
    }
    int64_t nb = limit - m->prod_cursor;
    if (nb > l->opts.batch) nb = l->opts.batch;
    sl->seq = m->prod_seq;
    sl->epoch = m->prod_epoch;
    sl->n = (int)nb;
    sl->claimed = sl->done = 0;
    sl->err_k = sl->n;
    sl->err_rc = 0;
    sl->errmsg[0] = '\0';
    for (int k = 0; k < sl->n; k++) {
        sl->idx[k] = m->order[m->prod_cursor + k];
        sl->y[k] = m->s->labels[sl->idx[k]];
    }
    m->prod_cursor += nb;
    m->prod_seq++;
    m->open = sl;
    return 1;
}

static void *decoder_main(void *arg) {
    FolderImpl *m = arg;
    int64_t chw = 3 * (int64_t)m->S * m->S;
    char msg[DATA_ERR_LEN];
    pthread_mutex_lock(&m->mu);
    while (!m->stop) {
        if (!m->open || m->open->claimed == m->open->n) {
            m->open = NULL;
            if (!open_batch(m)) {
                pthread_cond_wait(&m->cv_work, &m->mu);
                continue;
            }
        }
        Slot *sl = m->open;
        int k = sl->claimed++;
        int64_t idx = sl->idx[k], epoch = sl->epoch;
        pthread_mutex_unlock(&m->mu);
        msg[0] = '\0';
        int rc = make_sample(sl->x + k * chw, m, idx, epoch, msg, sizeof msg);
        pthread_mutex_lock(&m->mu);
        if (rc && k < sl->err_k) {
            sl->err_k = k;
            sl->err_rc = rc;
            snprintf(sl->errmsg, sizeof sl->errmsg, "%s", msg);
        }
        if (++sl->done == sl->n) pthread_cond_broadcast(&m->cv_done);
    }
    pthread_mutex_unlock(&m->mu);
    return NULL;
}

static void stop_threads(FolderImpl *m) {
    if (!m->started) return;
    pthread_mutex_lock(&m->mu);
    m->stop = 1;
    pthread_cond_broadcast(&m->cv_work);
    pthread_mutex_unlock(&m->mu);
    for (int i = 0; i < m->nthreads; i++) pthread_join(m->th[i], NULL);
    m->started = 0;
}

static int start_threads(FolderImpl *m) {
    ImageLoader *l = m->l;
    m->stop = 0;
    m->prod_seq = m->cons_seq = 0;
    m->prod_epoch = m->cons_epoch = l->epoch;
    m->prod_cursor = l->cursor;
    m->open = NULL;
    for (int q = 0; q < m->Q; q++) m->slots[q].seq = -1;
    for (int i = 0; i < m->nthreads; i++) {
        if (pthread_create(&m->th[i], NULL, decoder_main, m) != 0) {
            int started = i;
            pthread_mutex_lock(&m->mu);
            m->stop = 1;
            pthread_cond_broadcast(&m->cv_work);
            pthread_mutex_unlock(&m->mu);
            for (int j = 0; j < started; j++) pthread_join(m->th[j], NULL);
            snprintf(l->err, sizeof l->err, "folder loader: cannot start decoder threads");
            return -GC_ERR_NOMEM;
        }
    }
    m->started = 1;
    return 0;
}

static int folder_next(ImageLoader *l, float *x, int *y) {
    FolderImpl *m = l->impl;
    if (l->cursor >= epoch_limit(l)) {
        pthread_mutex_lock(&m->mu);
        l->epoch++;
        l->cursor = 0;
        m->cons_epoch = l->epoch;
        pthread_cond_broadcast(&m->cv_work);
        pthread_mutex_unlock(&m->mu);
        return 0;
    }
    if (!m->started) {
        int rc = start_threads(m);
        if (rc) return rc;
    }
    pthread_mutex_lock(&m->mu);
    Slot *sl = &m->slots[m->cons_seq % m->Q];
    while (!(sl->seq == m->cons_seq && sl->done == sl->n)) pthread_cond_wait(&m->cv_done, &m->mu);
    pthread_mutex_unlock(&m->mu);
    int n = sl->n;
    if (sl->err_k < n) {
        int rc = sl->err_rc;
        snprintf(l->err, sizeof l->err, "%s", sl->errmsg);
        /* the position stays on this batch; the next call would fail again */
        stop_threads(m);
        return rc;
    }
    memcpy(x, sl->x, sizeof(float) * (size_t)n * 3 * m->S * m->S);
    memcpy(y, sl->y, sizeof(int) * (size_t)n);
    pthread_mutex_lock(&m->mu);
    m->cons_seq++;
    l->cursor += n;
    pthread_cond_broadcast(&m->cv_work);
    pthread_mutex_unlock(&m->mu);
    return n;
}

static void folder_seek(ImageLoader *l) { stop_threads(l->impl); }

static void folder_free(ImageLoader *l) {
    FolderImpl *m = l->impl;
    if (m) {
        stop_threads(m);
        pthread_mutex_destroy(&m->mu);
        pthread_cond_destroy(&m->cv_work);
        pthread_cond_destroy(&m->cv_done);
        for (int q = 0; q < m->Q && m->slots; q++) {
            free(m->slots[q].x);
            free(m->slots[q].y);
            free(m->slots[q].idx);
        }
        free(m->slots);
        free(m->th);
        free(m->order);
        free(m->scratch);
        if (m->own) {
            folderset_free(m->s);
            free(m->s);
        }
        free(m);
    }
    free(l);
}

static const ImageLoaderOps folder_ops = {folder_next, folder_seek, folder_free};

int folder_loader(ImageLoader **out, FolderSet *s, int own, const LoaderOpts *o, char *err, size_t errlen) {
    *out = NULL;
    int rc = loader_opts_check(o, err, errlen);
    if (rc) return rc;
    if (s->n <= 0) {
        snprintf(err, errlen, "folder loader: empty image set");
        return -GC_ERR_PARAM;
    }
    int S = o->image_size ? o->image_size : 224;
    int64_t Sn = data_samples_per_epoch(s->n, o);
    int64_t steps = o->train ? Sn / o->batch : (Sn + o->batch - 1) / o->batch;
    if (o->train && steps == 0) {
        snprintf(err, errlen,
                 "image folder: a worker's shard has %lld images (%lld / %d workers), fewer than one batch of %d",
                 (long long)Sn, (long long)s->n, o->nworkers, o->batch);
        return -GC_ERR_PARAM;
    }
    int nthreads = o->threads;
    if (nthreads == 0) {
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        nthreads = cpus < 1 ? 1 : cpus > 16 ? 16 : (int)cpus;
    }
    int Q = o->prefetch ? o->prefetch : 2;
    ImageLoader *l = calloc(1, sizeof *l);
    FolderImpl *m = calloc(1, sizeof *m);
    if (!l || !m) {
        free(l);
        free(m);
        snprintf(err, errlen, "folder loader: out of memory");
        return -GC_ERR_NOMEM;
    }
    m->s = s;
    m->S = S;
    m->augment = o->train && o->augment != 0;
    m->nthreads = nthreads;
    m->Q = Q;
    m->th = calloc((size_t)nthreads, sizeof(pthread_t));
    m->slots = calloc((size_t)Q, sizeof(Slot));
    m->order = malloc(sizeof(int) * (size_t)(Sn > 0 ? Sn : 1));
    m->scratch = malloc(sizeof(int) * (size_t)s->n);
    m->order_epoch = -1;
    m->l = l;
    int ok = m->th && m->slots && m->order && m->scratch;
    size_t bytes = sizeof(float) * (size_t)o->batch * 3 * (size_t)S * S;
    for (int q = 0; q < Q && ok; q++) {
        m->slots[q].x = malloc(bytes);
        m->slots[q].y = malloc(sizeof(int) * (size_t)o->batch);
        m->slots[q].idx = malloc(sizeof(int) * (size_t)o->batch);
        ok = m->slots[q].x && m->slots[q].y && m->slots[q].idx;
    }
    pthread_mutex_init(&m->mu, NULL);
    pthread_cond_init(&m->cv_work, NULL);
    pthread_cond_init(&m->cv_done, NULL);
    l->ops = &folder_ops;
    l->impl = m;
    if (!ok) {
        folder_free(l);
        snprintf(err, errlen, "folder loader: out of memory for %d prefetch slots of %zu bytes", Q, bytes);
        return -GC_ERR_NOMEM;
    }
    m->own = own;
    snprintf(l->name, sizeof l->name, "folder");
    l->C = 3;
    l->H = S;
    l->W = S;
    l->num_classes = s->num_classes;
    l->opts = *o;
    l->n = s->n;
    l->samples_per_epoch = Sn;
    l->steps_per_epoch = steps;
    uint64_t h = 0xCBF29CE484222325ULL;
    h = data_mix(h, (uint64_t)s->n);
    h = data_mix(h, ((uint64_t)s->num_classes << 32) ^ (uint64_t)S);
    h = data_mix(h, (uint64_t)o->batch);
    h = data_mix(h, (uint64_t)o->train);
    h = data_mix(h, o->seed);
    h = data_mix(h, ((uint64_t)o->worker << 32) ^ (uint64_t)o->nworkers);
    h = data_mix(h, ((uint64_t)o->shard << 8) ^ (uint64_t)m->augment);
    l->fingerprint = h;
    *out = l;
    return 0;
}
