/* MNIST (http://yann.lecun.com/exdb/mnist/) in IDX format, gzipped or plain.
 *
 * dir/train-images-idx3-ubyte[.gz], dir/train-labels-idx1-ubyte[.gz] (60000)
 * dir/t10k-images-idx3-ubyte[.gz],  dir/t10k-labels-idx1-ubyte[.gz]  (10000)
 * (the gzipped name is tried first; zlib reads plain files too).
 *
 * IDX: big-endian header: 2 zero bytes, type byte (0x08 = unsigned byte),
 * number of dimensions, then one u32 per dimension, then the data. Images are
 * 0x00000803 [N, rows, cols], labels 0x00000801 [N]. The reader checks the
 * magic, the dimensions, that the data length is exactly what the header says
 * (no truncation, no trailing bytes), that both files agree on N and that labels
 * are 0..9. Samples are 1 x rows x cols (28 x 28), normalized with the usual
 * MNIST statistics mean 0.1307, std 0.3081 (constants, not recomputed); no
 * training augmentation. */
#ifndef GC_MNIST_H
#define GC_MNIST_H

#include "datasets/imageset.h"

#define MNIST_MEAN 0.1307f
#define MNIST_STD 0.3081f

/* train = 1: train-*, 0: t10k-*; dir NULL: $DATA_DIR/mnist */
int mnist_load(ImageSet *s, const char *dir, int train, char *err /* [errlen] */, size_t errlen);

/* Parse one IDX file held in memory: on success *data points into buf at the
 * first data byte and dims[0..*ndim) hold the dimensions. expect_ndim is 1 or 3.
 * Returns 0 or a negative GcError with a message naming `what`. */
int mnist_parse_idx(const uint8_t **data, uint32_t *dims /* [3] */, const uint8_t *buf /* [len] */, size_t len,
                    int expect_ndim, const char *what, char *err /* [errlen] */, size_t errlen);

#endif
