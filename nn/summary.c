/* Parameter table printing (see summary.h). */
#include "nn/summary.h"

void model_print_summary(FILE *f, const Model *m, int per_tensor) {
    const ParamTable *pt = &m->pt;
    if (per_tensor) {
        for (int i = 0; i < pt->n; i++) {
            const ParamInfo *t = &pt->t[i];
            char shape[64];
            int k = 0;
            for (int d = 0; d < t->ndim && k < (int)sizeof shape; d++)
                k += snprintf(shape + k, sizeof shape - k, d ? "x%d" : "%d", t->shape[d]);
            fprintf(f, "  %-40s %-12s %-16s %10zu\n", t->name, param_kind_name(t->kind), shape, t->numel);
        }
    }
    size_t n = param_table_count(pt);
    double mil = n / 1e6;
    fprintf(f, "%s: %zu parameters (%.*fM) in %d tensors, %zu state floats\n", m->ops->name, n,
            mil < 1.0 ? 2 : (mil < 10.0 ? 2 : 1), mil, pt->n, m->nstate);
}
