/* The trainer's --log files (examples/train_log.c): every row of the CSV has
 * the header's columns, every JSON line is an object with the same keys, and a
 * non-finite value (the perplexity of a diverged evaluation) is written as
 * nan/inf in CSV but as null in JSON, which has no such numbers. Through the
 * real trainer loop with a tiny ResNet-8 on the synthetic image set, driven to
 * divergence by a huge learning rate: the losses become finite but far above
 * log(DBL_MAX), so their perplexities overflow. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "examples/image_task.h"
#include "examples/trainer.h"
#include "tests/synth_task.h"
#include "tests/test.h"

static const char *const keys[] = {"kind", "step", "epoch", "loss", "acc", "ppl", "lr",
                                   "up_bytes", "down_bytes", "bits_up", "bits_down", "ratio",
                                   "ratio_compressed", "density", "compute_s", "codec_s", "comm_model_s",
                                   "step_s", "total_s", "samples_per_s", "data_s", "comp_up_bytes",
                                   "comp_down_bytes", "comp_raw_bytes", "wire_max_bytes", "hops",
                                   "gcomp_values", "gcomp_zeros", "gcomp_lv0", "gcomp_lv1", "gcomp_lv2",
                                   "gcomp_lv3", "gcomp_exp_bits", "gcomp_level_bits", "gcomp_man_bits",
                                   "gcomp_bytes", "h2d_bytes", "d2h_bytes", "copy_s"};
#define NKEYS (int)(sizeof keys / sizeof keys[0])

static int run(const char *log, int eval_every) {
    TrainOpts o;
    train_opts_default(&o);
    o.steps = 4;
    o.batch = 8;
    o.workers = 1;
    o.threads = 1;
    o.lr = 1e4; /* diverges: from step 2 the loss is above 1e6 */
    o.print_every = 1;
    o.quiet = 1;
    o.seed = 5;
    o.eval_every = eval_every;
    snprintf(o.backend, sizeof o.backend, "local");
    snprintf(o.log, sizeof o.log, "%s", log);
    return synth_train(&o, 32, 16, 3, NULL, NULL);
}

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    return buf;
}

/* the value text after "key": in a JSON line, copied into out */
static int json_value(const char *line, const char *key, char *out, size_t cap) {
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = strstr(line, pat);
    if (!p) return -1;
    p += strlen(pat);
    size_t n = strcspn(p, ",}");
    if (n >= cap) return -1;
    memcpy(out, p, n);
    out[n] = 0;
    return 0;
}

static void check_csv(const char *path) {
    char *s = slurp(path);
    CHECK(s != NULL, "CSV log %s written", path);
    if (!s) return;
    int line = 0, diverged = 0;
    char *l = strtok(s, "\n");
    /* the first record: what produced the log, as a JSON object behind "# run: " */
    CHECK(l && !strncmp(l, "# run: {\"command\":", strlen("# run: {\"command\":")) && strstr(l, "\"version\":") && strstr(l, "\"machine\":") &&
              strstr(l, "\"seed\":5") && strstr(l, "\"policy\":") && l[strlen(l) - 1] == '}',
          "CSV: the first line is the run record: %.200s", l ? l : "(none)");
    for (l = strtok(NULL, "\n"); l; l = strtok(NULL, "\n"), line++) {
        int fields = 1;
        for (char *p = l; *p; p++) fields += *p == ',';
        CHECK(fields == NKEYS, "CSV line %d has %d fields (header %d)", line, fields, NKEYS);
        if (line == 0) {
            char head[1024] = "";
            for (int i = 0; i < NKEYS; i++) {
                strcat(head, i ? "," : "");
                strcat(head, keys[i]);
            }
            CHECK(!strcmp(l, head), "CSV header: %s", l);
            continue;
        }
        /* the 4th and 6th fields: loss, ppl */
        char *f = l;
        double loss = 0, ppl = 0;
        for (int i = 0; i < 6 && f; i++, f = strchr(f, ',') ? strchr(f, ',') + 1 : NULL) {
            if (i == 3) loss = strtod(f, NULL);
            if (i == 5) ppl = strtod(f, NULL);
        }
        if (isfinite(loss) && loss > 710) {
            diverged++;
            CHECK(isinf(ppl), "CSV line %d: loss %g, the perplexity reads back as infinite (%g)", line, loss, ppl);
        }
    }
    CHECK(line == 6, "CSV: header, 4 step rows, 1 evaluation (%d lines)", line);
    CHECK(diverged >= 1, "CSV: a row with a finite loss whose perplexity overflows (%d)", diverged);
}

static void check_json(const char *path) {
    char *s = slurp(path);
    CHECK(s != NULL, "JSON log %s written", path);
    if (!s) return;
    int line = 0, nulls = 0, diverged = 0;
    char *l = strtok(s, "\n");
    CHECK(l && !strncmp(l, "{\"kind\":\"run\",\"command\":", strlen("{\"kind\":\"run\",\"command\":")) && strstr(l, "\"run\":\"task=") &&
              l[strlen(l) - 1] == '}',
          "JSON: the first line is the run record: %.200s", l ? l : "(none)");
    for (l = strtok(NULL, "\n"); l; l = strtok(NULL, "\n"), line++) {
        size_t n = strlen(l);
        CHECK(n > 2 && l[0] == '{' && l[n - 1] == '}', "JSON line %d is an object", line);
        int found = 0;
        for (int i = 0; i < NKEYS; i++) {
            char v[64];
            if (json_value(l, keys[i], v, sizeof v)) continue;
            found++;
            if (i == 0) continue; /* kind: a string */
            char *end;
            double x = strtod(v, &end);
            if (!strcmp(v, "null")) {
                nulls++;
                continue;
            }
            /* strtod reads inf/nan too: JSON must not hold them */
            CHECK(*end == 0 && isfinite(x) && strpbrk(v, "infaINFA") == NULL,
                  "JSON line %d: %s is a finite number (%s)", line, keys[i], v);
            if (i >= NKEYS - 3) /* a CPU model copies nothing between host and device */
                CHECK(x == 0, "JSON line %d: %s is 0 on the CPU (%s)", line, keys[i], v);
        }
        CHECK(found == NKEYS, "JSON line %d has all %d keys (%d)", line, NKEYS, found);
        char loss[64], ppl[64];
        if (!json_value(l, "loss", loss, sizeof loss) && !json_value(l, "ppl", ppl, sizeof ppl) &&
            strcmp(loss, "null") && strtod(loss, NULL) > 710) {
            diverged++;
            CHECK(!strcmp(ppl, "null"), "JSON line %d: loss %s, the perplexity is written as null (%s)", line, loss, ppl);
        }
    }
    CHECK(line == 5, "JSON: 4 step rows, 1 evaluation (%d lines)", line);
    CHECK(diverged >= 1, "JSON: a row with a finite loss whose perplexity overflows (%d)", diverged);
    CHECK(nulls >= 1, "JSON: a non-finite value was written as null (%d)", nulls);
}

int main(void) {
    char csv[64], json[64];
    snprintf(csv, sizeof csv, "/tmp/gcx_log_%d.csv", (int)getpid());
    snprintf(json, sizeof json, "/tmp/gcx_log_%d.jsonl", (int)getpid());
    CHECK(run(csv, 1) == 0, "training run with a CSV log");
    check_csv(csv);
    CHECK(run(json, 1) == 0, "training run with a JSON log");
    check_json(json);
    /* --eval-every -1: the training rows and no evaluation */
    CHECK(run(json, -1) == 0, "training run without evaluation");
    char *s = slurp(json);
    int rows = 0, evals = 0;
    for (char *l = s ? strtok(s, "\n") : NULL; l; l = strtok(NULL, "\n")) {
        rows++;
        evals += strstr(l, "\"kind\":\"train\"") == NULL;
    }
    CHECK(rows == 5 && evals == 1, "--eval-every -1: the run record and 4 training rows, no evaluation (%d rows, %d others)",
          rows, evals);
    unlink(csv);
    unlink(json);
    TEST_END();
}
