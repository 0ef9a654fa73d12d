/* Image file decoding through stb_image, with guards for inputs that the
 * Debian stb_image 2.27 decoders mishandle.
 *
 * stb_image 2.27 (libstb-dev 0.0~git20220908) overflows heap buffers on two
 * kinds of damaged files, both fixed upstream in 2.28:
 *  - a JPEG DHT segment whose 16 code counts sum to more than 256 (writes past
 *    the 257-entry Huffman size table; a single flipped bit in a count byte is
 *    enough). decode walks the JPEG marker structure exactly as stb_image reads
 *    it (byte-wise resynchronization between segments, DHT tables read with
 *    stb's own length accounting, entropy-coded data up to the first real
 *    marker) and refuses such a table;
 *  - a 16-bit PNM (maxval > 255) loaded as 8-bit RGB (reads twice the buffer,
 *    CVE-2021-42716). The PNM header is parsed here; maxval must be 1..255.
 * A PNG chunk whose length exceeds the file is refused too (stb_image would
 * allocate the claimed size first). Formats: JPEG, PNG, BMP, PNM (P5/P6); the
 * decoder is chosen by content, as stb_image does.
 * Images above IMAGE_MAX_PIXELS pixels or files above 1 GiB are refused. */
#ifndef GC_DECODE_H
#define GC_DECODE_H

#include <stddef.h>
#include <stdint.h>

#define IMAGE_MAX_PIXELS ((int64_t)1 << 28)

/* Decode buf into *rgb (malloc'd by stb: free with image_free), H x W x 3
 * interleaved. Returns 0, or a negative GcError with a message in err
 * (`what` names the source, e.g. the path). */
int image_decode_memory(uint8_t **rgb /* [H, W, 3] */, int *H, int *W, const uint8_t *buf /* [len] */, size_t len,
                        const char *what, char *err /* [errlen] */, size_t errlen);
/* Read and decode a file */
int image_decode_file(uint8_t **rgb /* [H, W, 3] */, int *H, int *W, const char *path, char *err /* [errlen] */,
                      size_t errlen);
void image_free(uint8_t *rgb);

/* The checks alone: 0 when stb_image may be given buf, else a negative GcError */
int image_precheck(const uint8_t *buf /* [len] */, size_t len, const char *what, char *err /* [errlen] */,
                   size_t errlen);

#endif
