/* Image-classification data for the trainers: CIFAR-10 and MNIST held once in
 * memory and shared by every local worker, or image folders decoded in
 * background threads, all behind the trainer's DataIter. */
#ifndef GC_IMAGE_TASK_H
#define GC_IMAGE_TASK_H

#include "datasets/imageset.h"
#include "examples/trainer.h"

typedef struct {
    char dataset[1100];   /* "cifar10", "mnist" or "folder:ROOT" */
    ImageSet train, test; /* in-memory sets (not used for folders) */
    int loaded;
    int shard_fixed;      /* SBC's fixed random split into worker shards */
    int image_size;       /* folders: output size */
    int C, H, W, num_classes;
} ImageData;

/* load the dataset (in-memory sets) and learn its shape; 0 or -1 with a message */
int image_data_open(ImageData *d, const char *dataset, char *err, size_t errlen);
void image_data_close(ImageData *d);
/* Task.data_new for image tasks: Task.ctx must point at a struct whose first
 * member is an ImageData */
DataIter *image_data_iter(Task *t, int split, int rank, int world, int batch, uint64_t seed, char *err,
                          size_t errlen);

#endif
