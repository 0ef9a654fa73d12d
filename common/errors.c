#include "errors.h"

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
