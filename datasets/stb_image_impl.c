/* The one translation unit that compiles stb_image (Debian libstb-dev,
 * /usr/include/stb/stb_image.h). Only the decoders the image-folder loader
 * accepts are built: JPEG, PNG, BMP, PNM (ppm/pgm). The failure reason is
 * thread-local (STBI_THREAD_LOCAL), so background decoders may call it. */
#define STB_IMAGE_IMPLEMENTATION
#define STBI_ONLY_JPEG
#define STBI_ONLY_PNG
#define STBI_ONLY_BMP
#define STBI_ONLY_PNM
#define STBI_NO_HDR
#define STBI_NO_LINEAR
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wunused-parameter"
#pragma GCC diagnostic ignored "-Wsign-compare"
#pragma GCC diagnostic ignored "-Wimplicit-fallthrough"
#pragma GCC diagnostic ignored "-Wmisleading-indentation"
#include <stb/stb_image.h>
#pragma GCC diagnostic pop
