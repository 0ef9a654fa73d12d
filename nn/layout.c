/* Leading-axes swap for layout conversion (see layout.h). */
#include "nn/layout.h"

#include <string.h>

#include "nn/parallel.h"

void swap01_ld(float *out /*B,ldo*/, const float *inp /*A,ldi*/, int A, int B, int S, size_t ldo, size_t ldi) {
    OMP_FOR2
    for (int b = 0; b < B; b++)
        for (int a = 0; a < A; a++)
            memcpy(out + (size_t)b * ldo + (size_t)a * S, inp + (size_t)a * ldi + (size_t)b * S, sizeof(float) * S);
}

void swap01(float *out /*B,A,S*/, const float *inp /*A,B,S*/, int A, int B, int S) {
    swap01_ld(out, inp, A, B, S, (size_t)A * S, (size_t)B * S);
}
