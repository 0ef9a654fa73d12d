/* The one list of error codes returned by codec decoders, frame readers and
 * file loaders. An X-macro generates both the enum and the message table, so
 * the two can never drift. Functions return 0 (GC_OK) or a NEGATIVE code
 * (-GC_ERR_...); gc_strerror() accepts either sign. */
#ifndef GC_ERRORS_H
#define GC_ERRORS_H

#define GC_ERROR_LIST(X)                                                        \
    X(GC_OK, "ok")                                                              \
    X(GC_ERR_TRUNCATED, "input truncated: fewer bytes than the format needs")  \
    X(GC_ERR_MAGIC, "bad magic number")                                         \
    X(GC_ERR_VERSION, "unsupported format version")                             \
    X(GC_ERR_CODEC, "unknown or unexpected codec id")                           \
    X(GC_ERR_CHECKSUM, "checksum mismatch: payload corrupted")                  \
    X(GC_ERR_CORRUPT, "corrupt payload: a field holds an impossible value")     \
    X(GC_ERR_OVERSIZED, "input longer than declared (trailing bytes)")          \
    X(GC_ERR_COUNT, "element count does not match what the caller expects")    \
    X(GC_ERR_PARAM, "invalid parameter")                                        \
    X(GC_ERR_NOSPACE, "output buffer too small")                                \
    X(GC_ERR_NOMEM, "out of memory")                                            \
    X(GC_ERR_STATE, "decoder state missing or out of step")                     \
    X(GC_ERR_IO, "I/O error")

typedef enum {
#define GC_X_ENUM(name, msg) name,
    GC_ERROR_LIST(GC_X_ENUM)
#undef GC_X_ENUM
    GC_ERR_COUNT_
} GcError;

const char *gc_strerror(int code);

#endif
