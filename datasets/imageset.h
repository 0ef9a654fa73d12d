/* In-memory uint8 image sets (CIFAR-10, MNIST) and their ImageLoader.
 *
 * Shape letters: N samples, C channels, H height, W width.
 *
 * The set keeps the raw bytes (N*C*H*W uint8, planar CHW per sample, as the
 * CIFAR-10 binary and MNIST IDX files store them) and byte labels; the loader
 * converts a batch to normalized float NCHW on the fly:
 *     x = (u / 255 - mean[c]) / std[c]         (torchvision ToTensor + Normalize, in float)
 * Training augmentation (when the set enables it and opts.augment != 0):
 *     random crop HxW from the image zero-padded by `pad` pixels on each side
 *     (torchvision RandomCrop(H, padding=pad): the pad is pixel value 0, i.e.
 *     black BEFORE normalization), then a horizontal flip with probability 1/2.
 * Offsets dy, dx (uniform in [0, 2*pad]) and the flip bit are draws 0, 1, 2 of
 * the sample's key data_aug_key(seed, epoch, index, worker). */
#ifndef GC_IMAGESET_H
#define GC_IMAGESET_H

#include <stdint.h>

#include "datasets/data.h"

typedef struct {
    uint8_t *x;       /* [N, C, H, W] */
    uint8_t *y;       /* [N] labels < num_classes */
    int64_t n;
    int C, H, W;
    int num_classes;
    float mean[3], std[3]; /* per channel (C <= 3) */
    int pad;          /* training augmentation: zero pad for the random crop (0 = no crop) */
    int flip;         /* training augmentation: random horizontal flip */
    char name[32];
} ImageSet;

void imageset_free(ImageSet *s);

/* Loader over s. With own = 1 the loader takes s over (frees it and its data);
 * with own = 0 it borrows s, which must outlive it (several workers' loaders can
 * share one set). */
int imageset_loader(ImageLoader **out, ImageSet *s, int own, const LoaderOpts *o, char *err /* [errlen] */,
                    size_t errlen);

/* Per-channel mean and std of the pixel values u/255 over the whole set
 * (population std), in double. */
void imageset_stats(double *mean /* [C] */, double *std /* [C] */, const ImageSet *s);

#endif
