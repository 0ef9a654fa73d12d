#!/usr/bin/env python3
"""Compare two gcx checkpoints (--save) section by section.

    scripts/ckpt_diff.py A.ckpt B.ckpt

Prints each section whose bytes differ, with how many 32-bit words differ and
the largest difference when both hold floats of the same size, and the sections
only one file has. Exit status 0 when the files hold the same sections with the
same bytes, 1 when they differ, 2 on a file that is not a readable checkpoint.
The format is common/ckpt.h's: magic "GCXCKPT\\0", u32 version, u32 section
count, per section a 32-byte name, a u64 length and the bytes, a CRC-32C.
"""
import math
import signal
import struct
import sys

MAGIC = b"GCXCKPT\0"


def sections(path):
    try:
        with open(path, "rb") as f:
            b = f.read()
    except OSError as e:
        print("ckpt_diff: cannot read %s: %s" % (path, e.strerror), file=sys.stderr)
        sys.exit(2)
    if len(b) < 20 or b[:8] != MAGIC:
        print("ckpt_diff: %s is not a gcx checkpoint (no magic %r)" % (path, MAGIC), file=sys.stderr)
        sys.exit(2)
    (n,) = struct.unpack_from("<I", b, 12)
    at, end, out = 16, len(b) - 4, {}
    for _ in range(n):
        if end - at < 40:
            break
        name = b[at:at + 32].split(b"\0")[0].decode("utf-8", "replace")
        (length,) = struct.unpack_from("<Q", b, at + 32)
        at += 40
        if length > end - at:
            break
        out[name] = b[at:at + length]
        at += length
    if at != end or len(out) != n:
        print("ckpt_diff: %s: the section table does not match the file size (truncated?)" % path, file=sys.stderr)
        sys.exit(2)
    return out


def main():
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    if len(sys.argv) != 3 or sys.argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        sys.exit(0 if len(sys.argv) == 2 else 2)
    a, b = sections(sys.argv[1]), sections(sys.argv[2])
    differ = 0
    for name in list(a) + [k for k in b if k not in a]:
        if name not in b or name not in a:
            print("%-32s only in %s" % (name, sys.argv[1] if name in a else sys.argv[2]))
            differ = 1
            continue
        x, y = a[name], b[name]
        if x == y:
            continue
        differ = 1
        if len(x) != len(y) or len(x) % 4:
            print("%-32s %d bytes against %d" % (name, len(x), len(y)))
            continue
        n = len(x) // 4
        fx, fy = struct.unpack("<%df" % n, x), struct.unpack("<%df" % n, y)
        words = sum(1 for i in range(n) if x[4 * i:4 * i + 4] != y[4 * i:4 * i + 4])
        diffs = [abs(p - q) for p, q in zip(fx, fy) if math.isfinite(p) and math.isfinite(q)]
        print("%-32s %d of %d words differ; as floats, largest difference %.3g" %
              (name, words, n, max(diffs) if diffs else float("nan")))
    if not differ:
        print("same sections, same bytes")
    sys.exit(differ)


if __name__ == "__main__":
    main()
