#include "errors.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "check.h"

static const char *const gc_error_messages[] = {
#define GC_X_MSG(name, msg) msg,
    GC_ERROR_LIST(GC_X_MSG)
#undef GC_X_MSG
};

const char *gc_strerror(int code) {
    if (code < 0) code = -code;
    if (code >= GC_ERR_COUNT_) return "unknown error";
    return gc_error_messages[code];
}

/* ---- fatal errors, once per process (common/check.h) ---- */
void gc_fatal(const char *fmt, ...) {
    static atomic_flag ending = ATOMIC_FLAG_INIT;
    if (atomic_flag_test_and_set(&ending))
        for (;;) pause(); /* another thread is ending the process */
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    exit(1);
}
