#!/usr/bin/env python3
"""Copy a parameter-server checkpoint into one where the workers and the server hold
the same model and the server's pull memory is zero, to evaluate the server's global
model against the workers' models.

    dev/ckpt_global.py global|worker IN.ckpt OUT.ckpt

global: every worker's parameters := the server's global model; worker: the server's
global model := worker 0's parameters. With model-delta pulls (3LC section 3.1) each
worker's model is the global model minus what the server's pull memory
(w0.ex.pullres) has not yet sent. The batch-norm running statistics stay each
worker's own, computed on its own model, so recompute them before evaluating: resume
OUT.ckpt with the run's flags and --lr 0 for some steps (the models then stay as
they are: the server's steps are zero, its pull memory stays zero and its pulls
send zeros), e.g. --steps S+50 --eval-every 0. The format is common/ckpt.h's
(scripts/ckpt_diff.py reads it).
"""
import os
import struct
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))
import ckpt_diff  # noqa: E402

POLY = 0x82F63B78
TABLE = []
for i in range(256):
    c = i
    for _ in range(8):
        c = (c >> 1) ^ POLY if c & 1 else c >> 1
    TABLE.append(c)


def crc32c(b):
    c = 0xFFFFFFFF
    t = TABLE
    for x in b:
        c = t[(c ^ x) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def main():
    if len(sys.argv) != 4 or sys.argv[1] not in ("global", "worker"):
        print(__doc__.strip())
        sys.exit(2)
    mode, src, dst = sys.argv[1:]
    with open(src, "rb") as f:
        version = struct.unpack_from("<I", f.read(12), 8)[0]
    s = ckpt_diff.sections(src)
    if "w0.ex.global" not in s or "w0.ex.pullres" not in s:
        print("ckpt_global: %s has no w0.ex.global (not a parameter server with model-delta pulls)" % src,
              file=sys.stderr)
        sys.exit(1)
    model = s["w0.ex.global"] if mode == "global" else s["w0.params"]
    n = 0
    for name in s:
        if name.endswith(".params"):
            s[name] = model
            n += 1
    s["w0.ex.global"] = model
    s["w0.ex.pullres"] = bytes(len(s["w0.ex.pullres"]))
    out = bytearray(ckpt_diff.MAGIC + struct.pack("<II", version, len(s)))
    for name, data in s.items():
        out += name.encode().ljust(32, b"\0") + struct.pack("<Q", len(data)) + data
    out += struct.pack("<I", crc32c(out))
    with open(dst, "wb") as f:
        f.write(out)
    print("%s: the server and %d workers hold %s, the pull memory is zero" % (dst, n,
          "the server's global model" if mode == "global" else "worker 0's model"))


if __name__ == "__main__":
    main()
