#include "common/blas.h"

#include <stdlib.h>
#include <string.h>

/* OpenBLAS's own query; weak, so that another CBLAS links too (it is then NULL) */
extern char *openblas_get_config(void) __attribute__((weak));

int blas_max_callers_from(const char *config) {
    const char *p = config ? strstr(config, "MAX_THREADS=") : NULL;
    if (!p) return 0;
    long n = strtol(p + strlen("MAX_THREADS="), NULL, 10);
    return n > 0 && n < (1L << 20) ? (int)(2 * n) : 0;
}

int blas_max_callers(void) { return openblas_get_config ? blas_max_callers_from(openblas_get_config()) : 0; }
