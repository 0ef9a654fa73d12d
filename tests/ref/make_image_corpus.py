#!/usr/bin/python3
"""Writes the seed corpus of tests/fuzz/fuzz_image.c: tiny valid images in every
format the folder loader reads (PNG gray/RGB/RGBA/palette, baseline and
progressive JPEG, PPM/PGM, BMP, GIF). Needs PIL (Debian python3-pil)."""
import io
import os

from PIL import Image

out = os.path.join(os.path.dirname(__file__), "..", "fuzz", "corpus", "fuzz_image")
os.makedirs(out, exist_ok=True)


def img(mode, w, h):
    im = Image.new("RGB", (w, h))
    for y in range(h):
        for x in range(w):
            im.putpixel((x, y), ((x * 37) % 256, (y * 59) % 256, ((x + y) * 23) % 256))
    return im.convert(mode)


cases = [
    ("gray.png", img("L", 5, 4), "PNG", {}),
    ("rgb.png", img("RGB", 7, 3), "PNG", {}),
    ("rgba.png", img("RGBA", 4, 4), "PNG", {}),
    ("palette.png", img("P", 6, 5), "PNG", {}),
    ("baseline.jpg", img("RGB", 16, 9), "JPEG", {"quality": 80}),
    ("progressive.jpg", img("RGB", 9, 17), "JPEG", {"quality": 60, "progressive": True}),
    ("gray.jpg", img("L", 8, 8), "JPEG", {}),
    ("rgb.ppm", img("RGB", 3, 2), "PPM", {}),
    ("gray.pgm", img("L", 3, 3), "PPM", {}),
    ("rgb.bmp", img("RGB", 5, 3), "BMP", {}),
    ("pal.gif", img("P", 4, 4), "GIF", {}),
]
for name, im, fmt, kw in cases:
    b = io.BytesIO()
    im.save(b, fmt, **kw)
    with open(os.path.join(out, name), "wb") as f:
        f.write(b.getvalue())
print("wrote", len(cases), "files to", out)
