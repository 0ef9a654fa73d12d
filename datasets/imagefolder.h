/* Image folders in the ImageNet layout, decoded by stb_image in background threads.
 *
 *   ROOT/train/<class>/[subdirectories/]NAME.{jpg,jpeg,png,bmp,ppm,pgm}
 *   ROOT/val/<class>/[subdirectories/]NAME.{...}       (extensions case-insensitive)
 *
 * As torchvision's ImageFolder: classes are the sub-directories of ROOT/train
 * sorted by name (byte order), label = rank; the files of a class are found
 * recursively (directories sorted by path, files sorted by name) and other
 * extensions are skipped; a class without images is an error. ROOT/val uses the
 * classes of ROOT/train (a val directory naming an unknown class is an error).
 * Names starting with '.' are ignored.
 *
 * Samples are 3 x S x S, S = opts.image_size (224), normalized with the
 * ImageNet mean/std; training: RandomResizedCrop + flip, evaluation: resize the
 * shorter side to round(S * 256/224) + center crop (datasets/transform.h).
 * Grayscale and RGBA files are converted to RGB.
 *
 * Threads: opts.threads decoders (0: one per online CPU, at most 16) fill a ring
 * of opts.prefetch (default 2) batch slots ahead of the trainer; a sample's
 * pixels are a pure function of (seed, epoch, index, worker) and its place in
 * the batch is fixed by the sample order, so the output is bit-identical for
 * any thread count or timing. A file that cannot be read or decoded makes
 * next() return a negative GcError (-GC_ERR_CORRUPT for a damaged image) with
 * l->err naming it (the first failing sample of the batch); decoding goes
 * through datasets/decode.h, which refuses the damaged files stb_image 2.27
 * would overflow a buffer on. */
#ifndef GC_IMAGEFOLDER_H
#define GC_IMAGEFOLDER_H

#include <stdint.h>

#include "datasets/data.h"

typedef struct {
    int64_t n;
    int num_classes;
    char **classes;   /* [num_classes] class directory names */
    char *paths;      /* all file paths, NUL-separated */
    int64_t *offsets; /* [n] start of path i in paths */
    int *labels;      /* [n] */
} FolderSet;

/* Scan ROOT/train (train = 1) or ROOT/val. For val the classes come from
 * ROOT/train. Returns 0 or a negative GcError with a message. */
int folderset_scan(FolderSet *s, const char *root, int train, char *err /* [errlen] */, size_t errlen);
void folderset_free(FolderSet *s);
static inline const char *folderset_path(const FolderSet *s, int64_t i) { return s->paths + s->offsets[i]; }

/* Loader over s (own = 1: the loader frees s; 0: s must outlive it). */
int folder_loader(ImageLoader **out, FolderSet *s, int own, const LoaderOpts *o, char *err /* [errlen] */,
                  size_t errlen);

#endif
