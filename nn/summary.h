/* Printing a model's parameter table and count, for any Model (nn/model.h). */
#ifndef GC_NN_SUMMARY_H
#define GC_NN_SUMMARY_H

#include <stdio.h>

#include "nn/model.h"

/* "<name>: 269722 parameters (0.27M) in 65 tensors, 1216 state floats";
 * with per_tensor, one line per tensor (name, kind, shape, numel) first. */
void model_print_summary(FILE *f, const Model *m, int per_tensor);

#endif
