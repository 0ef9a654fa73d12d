/* Fuzz target: image decoding (datasets/decode.c: the pre-checks that guard
 * stb_image against malformed JPEG/PNG/PNM input, then stb_image itself). Any
 * input must give either a decoded image or an error, never a crash or an
 * out-of-bounds access. */
#include <stdint.h>
#include <stdlib.h>

#include "datasets/decode.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    uint8_t *rgb = NULL;
    int H = 0, W = 0;
    char err[256];
    if (image_decode_memory(&rgb, &H, &W, data, size, "fuzz", err, sizeof err) == 0) {
        /* touch every pixel: the buffer must really hold H x W x 3 bytes */
        unsigned sum = 0;
        for (size_t i = 0; i < (size_t)H * (size_t)W * 3; i++) sum += rgb[i];
        (void)sum;
        image_free(rgb);
    }
    return 0;
}
