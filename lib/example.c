/* A program against the installed libgcx (lib/gcx.h):
 *
 *   make install PREFIX=$HOME/.local
 *   export PKG_CONFIG_PATH=$HOME/.local/lib/pkgconfig LD_LIBRARY_PATH=$HOME/.local/lib
 *   cc lib/example.c $(pkg-config --cflags --libs gcx) -o example && ./example [SPEC ...]
 *
 * For each codec spec (default: every codec with its defaults) it encodes 10000
 * values, decodes the frame, prints the frame size and the error, and shows
 * that a damaged frame is refused with an error code. Error feedback as a
 * trainer does it: the residual x - repr is added to the next step's values.
 * Exits 1 when anything fails.
 */
#include <gcx.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define N 10000

static int run(const char *spec, const float *x) {
    char err[256];
    gcx_codec *enc = gcx_codec_new(spec, err, sizeof err);
    gcx_codec *dec = gcx_codec_new(spec, err, sizeof err);
    if (!enc || !dec) {
        fprintf(stderr, "example: %s: %s\n", spec, err);
        return 1;
    }
    size_t cap = gcx_max_frame(enc, N);
    unsigned char *frame = malloc(cap);
    float *repr = malloc(N * sizeof *repr), *y = malloc(N * sizeof *y);
    int64_t len = gcx_encode(enc, frame, cap, x, N, 7, repr);
    if (len < 0) {
        fprintf(stderr, "example: %s: encode: %s\n", spec, gcx_codec_error(enc));
        return 1;
    }
    int rc = gcx_decode(dec, y, N, frame, (size_t)len);
    if (rc) {
        fprintf(stderr, "example: %s: decode: %s\n", spec, gcx_codec_error(dec));
        return 1;
    }
    double maxe = 0, same = 1;
    for (int i = 0; i < N; i++) {
        double e = fabs((double)y[i] - x[i]);
        if (e > maxe) maxe = e;
        if (y[i] != repr[i]) same = 0; /* the residual x - repr is what error feedback keeps */
    }
    frame[len - 1] ^= 0x40; /* one flipped bit: the CRC refuses the frame */
    int bad = gcx_decode(dec, y, N, frame, (size_t)len);
    char full[256];
    gcx_codec_spec(enc, full, sizeof full);
    printf("%-32s %7lld bytes %8.4f bits/value  max|err| %-10.4g repr==decode %s  damaged frame: %s\n", full,
           (long long)len, 8.0 * (double)len / N, maxe, same ? "yes" : "NO", bad ? gcx_strerror(bad) : "ACCEPTED");
    free(frame);
    free(repr);
    free(y);
    gcx_codec_free(enc);
    gcx_codec_free(dec);
    return !same || bad == 0;
}

int main(int argc, char **argv) {
    if (gcx_api_version() != GCX_API_VERSION) {
        fprintf(stderr, "example: built against gcx.h API %d, the library has %d\n", GCX_API_VERSION,
                gcx_api_version());
        return 1;
    }
    printf("libgcx %s, %d codecs\n", gcx_version(), gcx_codec_count());
    float *x = malloc(N * sizeof *x);
    for (int i = 0; i < N; i++) x[i] = 0.01f * sinf(0.37f * (float)i) * (float)(1 + i % 7);
    int fails = 0;
    if (argc > 1)
        for (int a = 1; a < argc; a++) fails += run(argv[a], x);
    else
        for (int i = 0; i < gcx_codec_count(); i++) fails += run(gcx_codec_name(i), x);
    free(x);
    return fails ? 1 : 0;
}
