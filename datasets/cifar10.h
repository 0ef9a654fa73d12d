/* CIFAR-10, binary version (https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz).
 *
 * dir/data_batch_1.bin .. data_batch_5.bin (training, 50000 images) and
 * dir/test_batch.bin (10000); each file is a sequence of 3073-byte records:
 * 1 label byte (0..9), then 1024 red, 1024 green, 1024 blue bytes (32x32,
 * row-major). The reader accepts any positive whole number of records per
 * file (tests use tiny files) and rejects a size that is not a multiple of
 * 3073 or a label above 9, naming the file and the offending record.
 *
 * Normalization: the usual published CIFAR-10 training-set statistics
 *     mean (0.4914, 0.4822, 0.4465), std (0.2470, 0.2435, 0.2616)
 * (fixed constants, NOT recomputed from the loaded files; imageset_stats()
 * computes them and the real-data test checks they agree to 1e-3).
 * Training augmentation: 4-pixel zero pad, random 32x32 crop, random flip. */
#ifndef GC_CIFAR10_H
#define GC_CIFAR10_H

#include "datasets/imageset.h"

#define CIFAR10_RECORD 3073
#define CIFAR10_TRAIN_FILES 5

extern const float cifar10_mean[3];
extern const float cifar10_std[3];

/* Load the training (train = 1: data_batch_1..5.bin) or test (test_batch.bin)
 * split from dir (NULL: $DATA_DIR/cifar-10-batches-bin). */
int cifar10_load(ImageSet *s, const char *dir, int train, char *err /* [errlen] */, size_t errlen);

#endif
