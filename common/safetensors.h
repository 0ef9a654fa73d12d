/* safetensors files (the format of Hugging Face's safetensors library, which
 * PyTorch models are commonly shared in): the reader validates everything
 * before returning, the writer writes atomically (temporary file, rename).
 *
 *   offset  size  field
 *   0       8     N: length of the header, u64 little-endian (1 .. ST_HEADER_MAX)
 *   8       N     header: one JSON object, UTF-8, optionally padded with spaces
 *                   {"<name>": {"dtype": "F32", "shape": [d0, d1, ...],
 *                               "data_offsets": [begin, end]},
 *                    ...,
 *                    "__metadata__": {"<key>": "<value>", ...}}   (optional)
 *   8+N   ...     the data buffer: every tensor's raw little-endian values,
 *                 row-major (C order), at [begin, end) of the buffer
 *
 * What the reader accepts (strict JSON, and the rules of the reference
 * implementation):
 *   - the header is exactly one object; whitespace only between tokens and as
 *     trailing padding; no duplicate keys; strings with the JSON escapes
 *     (\uXXXX decoded to UTF-8, surrogate pairs included), no raw control
 *     characters; numbers in shape and data_offsets are non-negative integers
 *     without sign, fraction, exponent or leading zeros, below 2^53;
 *   - a tensor entry holds exactly dtype, shape and data_offsets; dtype is one of
 *     ST_DTYPE_LIST; at most ST_MAX_DIMS dimensions; names of 1 .. ST_NAME_MAX-1
 *     bytes without NUL;
 *   - end - begin == product(shape) x the dtype's size (no overflow);
 *   - sorted by begin, the tensors tile the data buffer exactly: the first
 *     begins at 0, each begins where the previous one ends, the last ends at
 *     the end of the file (no gap, no overlap, no trailing bytes);
 *   - __metadata__, if present, maps strings to strings.
 * The host must be little-endian (every platform gcx builds on); st_parse
 * refuses to run elsewhere rather than return swapped values.
 */
#ifndef GC_SAFETENSORS_H
#define GC_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#define ST_HEADER_MAX (100u << 20) /* 100 MiB: the reference implementation's limit */
#define ST_MAX_DIMS 8
#define ST_NAME_MAX 256
#define ST_MAX_TENSORS 1000000

/* name, bytes per value */
#define ST_DTYPE_LIST(X) \
    X(BOOL, 1)           \
    X(U8, 1)             \
    X(I8, 1)             \
    X(I16, 2)            \
    X(U16, 2)            \
    X(F16, 2)            \
    X(BF16, 2)           \
    X(I32, 4)            \
    X(U32, 4)            \
    X(F32, 4)            \
    X(I64, 8)            \
    X(U64, 8)            \
    X(F64, 8)

typedef enum {
#define ST_X_ENUM(name, size) ST_##name,
    ST_DTYPE_LIST(ST_X_ENUM)
#undef ST_X_ENUM
    ST_DTYPE_COUNT
} StDtype;

const char *st_dtype_name(StDtype d);
size_t st_dtype_size(StDtype d);

typedef struct {
    char *name; /* NUL-terminated (owned by the StFile) */
    StDtype dtype;
    int ndim;   /* 0 for a scalar */
    uint64_t shape[ST_MAX_DIMS];
    uint64_t numel;
    const uint8_t *data; /* into the file */
    size_t nbytes;
} StTensor;

typedef struct {
    uint8_t *file; /* the whole file */
    size_t size;
    int n;
    StTensor *t; /* in the order of the header */
    int nmeta;
    char **meta_key, **meta_val;
} StFile;

/* reads and validates path; 0, or -1 with a message naming path and the problem */
int st_read(StFile *sf, const char *path, char *err, size_t errlen);
/* the part of st_read after the file is in memory: sf->file (malloc'ed, owned by
 * sf from here, freed on failure) holds sf->size bytes. name is for messages.
 * Never reads outside sf->file. */
int st_parse(StFile *sf, const char *name, char *err, size_t errlen);
void st_free(StFile *sf);
/* the tensor of that name, or NULL */
const StTensor *st_find(const StFile *sf, const char *name);
/* "[3, 16, 3, 3]" into buf */
void st_shape_str(char *buf, size_t n, const uint64_t *shape, int ndim);

/* one tensor to write: data holds numel values of dtype, little-endian */
typedef struct {
    const char *name;
    StDtype dtype;
    int ndim;
    uint64_t shape[ST_MAX_DIMS];
    const void *data;
} StWriteTensor;

/* the whole file in memory (*out malloc'ed): tensors in the given order,
 * __metadata__ from nmeta key/value pairs (may be 0), the header padded with
 * spaces to a multiple of 8 bytes. 0, or -1 with a message (a bad name or dtype). */
int st_encode(uint8_t **out, size_t *len, const StWriteTensor *t, int n, const char *const *meta_kv, int nmeta,
              char *err, size_t errlen);
/* st_encode written to path atomically (path.tmp.<pid>, fsync, rename) */
int st_write(const char *path, const StWriteTensor *t, int n, const char *const *meta_kv, int nmeta, char *err,
             size_t errlen);

#endif
