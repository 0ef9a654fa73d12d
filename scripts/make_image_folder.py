#!/usr/bin/env python3
"""A small image folder for training without a real dataset:
ROOT/{train,val}/class<c>/<i>.ppm, 10 classes of 32x32 RGB images (class-coloured
stripes plus uniform noise), the same bytes for the same arguments.

    scripts/make_image_folder.py ROOT [TRAIN_PER_CLASS [VAL_PER_CLASS]]   (default 64 16)
"""
import os
import random
import sys


def main():
    if len(sys.argv) < 2 or len(sys.argv) > 4:
        sys.exit(__doc__.strip())
    root = sys.argv[1]
    try:
        counts = [int(a) for a in sys.argv[2:]] + [64, 16][len(sys.argv) - 2:]
    except ValueError:
        sys.exit("make_image_folder: the counts must be integers\n\n" + __doc__.strip())
    rng = random.Random(0)
    for split, count in zip(("train", "val"), counts):
        for c in range(10):
            d = os.path.join(root, split, "class%d" % c)
            os.makedirs(d, exist_ok=True)
            for i in range(count):
                px = bytearray()
                for y in range(32):
                    for x in range(32):
                        on = ((x + c * y) // 4) % 2
                        base = (40 + 20 * c, 200 - 15 * c, 120) if on else (30, 30, 30)
                        px += bytes(max(0, min(255, v + rng.randint(-25, 25))) for v in base)
                with open(os.path.join(d, "%03d.ppm" % i), "wb") as f:
                    f.write(b"P6\n32 32\n255\n" + bytes(px))


if __name__ == "__main__":
    main()
