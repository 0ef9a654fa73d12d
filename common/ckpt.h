/* Checkpoint files: named binary sections, a magic number, a version and a
 * CRC-32C, written atomically (temporary file, fsync, rename).
 *
 *   offset  size  field
 *   0       8     magic "GCXCKPT\0"
 *   8       4     version (1), little-endian
 *   12      4     number of sections S
 *   16      ...   S sections: name (32 bytes, NUL-padded), length L (u64), L bytes
 *   end-4   4     CRC-32C of every byte before it
 *
 * Sections hold raw little-endian data (float arenas, counters, text). The
 * reader validates everything before returning and reports problems with the
 * expected value and a hint; it never reads past the file. */
#ifndef GC_CKPT_H
#define GC_CKPT_H

#include <stddef.h>
#include <stdint.h>

#define CKPT_MAGIC "GCXCKPT"
#define CKPT_VERSION 1
#define CKPT_NAME_MAX 32

typedef struct {
    char name[CKPT_NAME_MAX];
    const void *data;
    size_t len;
} CkptSection;

typedef struct {
    uint8_t *file; /* the whole file */
    size_t size;
    int n;
    CkptSection *sec; /* data pointers into file */
} Ckpt;

/* returns 0, or -1 with a message in err */
int ckpt_write(const char *path, const CkptSection *sections, int n, char *err, size_t errlen);
/* removes the temporary file of a ckpt_write under way, if any: async-signal-safe,
 * for a signal handler that ends the process (no partial file is left) */
void ckpt_remove_partial(void);
int ckpt_read(Ckpt *ck, const char *path, char *err, size_t errlen);
/* the part of ckpt_read after the file is in memory: ck->file (malloc'ed, owned by
 * ck from here) holds ck->size bytes; checks magic, version, CRC-32C and the section
 * table, and fills ck->sec (pointers into ck->file). name is for messages. 0, or -1
 * with a message and ck freed. Never reads outside ck->file. */
int ckpt_parse(Ckpt *ck, const char *name, char *err, size_t errlen);
void ckpt_free(Ckpt *ck);
/* section data or NULL */
const void *ckpt_find(const Ckpt *ck, const char *name, size_t *len);
/* copy a section that must exist with exactly len bytes; -1 with a message otherwise */
int ckpt_load(const Ckpt *ck, const char *name, void *out, size_t len, char *err, size_t errlen);

#endif
