/* Image transforms for the image-folder loader (torchvision's ImageNet recipe).
 *
 * Shape letters: H, W input height and width, C channels (interleaved HWC
 * input as decoded), OH, OW full resized size, oh, ow the window written.
 *
 * Resize: antialiased bilinear, the separable triangle filter of PIL's
 * BILINEAR and of torch.nn.functional.interpolate(mode="bilinear",
 * align_corners=False, antialias=True): output pixel i along an axis with
 * scale = in/out has center (i + 0.5) * scale, support max(scale, 1), weights
 * max(0, 1 - |j + 0.5 - center| / max(scale, 1)) over the input pixels j in
 * [center - support + 0.5, center + support + 0.5) clipped to the image,
 * normalized to sum 1; horizontal pass first, then vertical. When enlarging it
 * is plain bilinear with half-pixel centers and edge clamping. Computed in
 * float on the pixel values 0..255 (no intermediate rounding to uint8 as PIL
 * does), then x = (v / 255 - mean[c]) / std[c].
 *
 * Training: RandomResizedCrop(size, scale=(0.08, 1), ratio=(3/4, 4/3)) then
 * RandomHorizontalFlip(0.5). Evaluation: Resize(shorter side = round(size *
 * 256 / 224)), i.e. 256 for 224, then CenterCrop(size). */
#ifndef GC_TRANSFORM_H
#define GC_TRANSFORM_H

#include <stdint.h>

extern const float imagenet_mean[3];
extern const float imagenet_std[3];

/* Resize the crop src[y0 : y0+h, x0 : x0+w] to OH x OW and write the window
 * rows [oy0, oy0+oh) x cols [ox0, ox0+ow) of the result, mirrored left-right
 * when flip, normalized, as planar CHW. Returns 0, or -GC_ERR_NOMEM /
 * -GC_ERR_PARAM (crop or window outside the image). */
int resize_crop_normalize(float *out /* [C, oh, ow] */, const uint8_t *src /* [H, W, C] */, int H, int W, int C,
                          int y0, int x0, int h, int w, int OH, int OW, int oy0, int ox0, int oh, int ow, int flip,
                          const float *mean /* [C] */, const float *std /* [C] */);

/* torchvision RandomResizedCrop.get_params(scale=(0.08, 1), ratio=(3/4, 4/3)):
 * up to 10 tries of a random area fraction and log-uniform aspect ratio, else
 * the central crop clamped to the ratio range. Random draws k = 0..39 of key
 * (rng_hash64(key, k)); Python's round-half-even where torchvision rounds. */
void random_resized_crop_params(int *y0, int *x0, int *h, int *w, int H, int W, uint64_t key);

/* Evaluation geometry: the image resized so its shorter side is short_side
 * (the longer side int(short_side * long / short), as torchvision's Resize),
 * and the top-left corner of the centered size x size window (torchvision
 * CenterCrop: int(round((OH - size) / 2))). */
void eval_resize_params(int *OH, int *OW, int *top, int *left, int H, int W, int short_side, int size);
/* round(size * 256 / 224) */
int eval_short_side(int size);

#endif
