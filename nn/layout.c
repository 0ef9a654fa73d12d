/* Leading-axes swap for layout conversion (see layout.h). */
#include "nn/layout.h"

#include <string.h>

#include "nn/parallel.h"

void swap01(float *out /*B,A,S*/, const float *inp /*A,B,S*/, int A, int B, int S) {
    OMP_FOR2
    for (int b = 0; b < B; b++)
        for (int a = 0; a < A; a++)
            memcpy(out + ((size_t)b * A + a) * S, inp + ((size_t)a * B + b) * S, sizeof(float) * S);
}
