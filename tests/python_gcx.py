"""The Python package python/gcx against the gcx tool (run by tests/test_python.sh from the
repository root, after `make` and `make lib`):

 - the package loads build/lib/libgcx.so, or $GCX_LIB (a file or folder), and a GCX_LIB naming
   no library fails at import with what to do;
 - gcx.codecs() is the list `./gcx --help` prints;
 - for EVERY codec (defaults, and specs with parameters) and several seeds, gcx.encode's frame
   is byte for byte frame 0 of `./gcx encode --seed S`, a gcx.Codec encoding chunks in order
   with seed S + k gives every frame of `./gcx encode --frame-values F` (gcomp's state
   included), and decoding those frames in order gives the bytes of `./gcx decode`;
 - gcx.stats prints as `./gcx stats` does (bits/value, ratio, errors);
 - the seed matters for terngrad and stoch3 (other seeds, other frames);
 - torch tensors and non-contiguous arrays give the same frames as contiguous numpy;
 - gcomp's state saved and loaded continues the same frames;
 - bad input (a corrupt, truncated or foreign frame, a wrong size, a wrong dtype, NaN, a bad
   spec, random bytes) raises a Python exception: TypeError for types, gcx.GcxError (a
   ValueError) for the rest.
Ends with "RESULT passed failed" (tests/run.sh).
"""
import atexit
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import gcx  # noqa: E402

GCX = os.environ.get("GCX_BIN", "./gcx")
from checks import check, raises, result  # noqa: E402  (tests/checks.py)


def run(*args):
    p = subprocess.run([GCX] + list(args), capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError("%s %s: exit %d: %s" % (GCX, " ".join(args), p.returncode, p.stderr.strip()))
    return p.stdout


def gcf_frames(path):
    """the codec frames of a .gcf file (docs/FORMAT.md: 24 bytes, the spec, a CRC, frames)"""
    b = open(path, "rb").read()
    assert b[:7] == b"GCXFILE", path
    s = struct.unpack_from("<H", b, 20)[0]
    at, frames = 24 + s + 4, []
    while at < len(b):
        plen = struct.unpack_from("<I", b, at + 12)[0]
        frames.append(b[at:at + 20 + plen])
        at += 20 + plen
    return frames


tmp = tempfile.mkdtemp()
atexit.register(shutil.rmtree, tmp, ignore_errors=True)
rng = np.random.default_rng(7)
n = 5000
x = (rng.standard_normal(n) * 0.01).astype(np.float32)
x[::13] = 0  # zeros (gcomp prunes them, the sparsifiers never pick them)
x[100:140] *= 50  # a few large values
fin = os.path.join(tmp, "x.f32")
x.tofile(fin)

# ---- the codec list ----
help_text = run("--help")
cli = re.findall(r"^  (\S+) +\S", help_text.split("Codecs (--codec")[1], re.M)
check(len(cli) >= 12 and sorted(cli) == sorted(gcx.codecs()),
      "gcx.codecs() %s is the CLI's list %s" % (gcx.codecs(), cli))
check(gcx.help().strip() in help_text and "Codecs (--codec" in gcx.help(), "gcx.help() is the CLI's codec list")

# ---- where the library is found: $GCX_LIB (file or folder), else the repository's build ----
check(os.path.samefile(gcx.library_path, os.path.join("build", "lib", "libgcx.so")),
      "without GCX_LIB the package loads build/lib/libgcx.so (%s)" % gcx.library_path)


def load_with(lib):
    env = dict(os.environ, GCX_LIB=lib, PYTHONPATH="python")
    return subprocess.run([sys.executable, "-c", "import gcx; print(gcx.library_path)"], env=env,
                          capture_output=True, text=True)


p = load_with(os.path.join(tmp, "nowhere.so"))
check(p.returncode != 0 and "ImportError" in p.stderr and "make lib" in p.stderr and "nowhere.so" in p.stderr,
      "GCX_LIB naming no library: ImportError saying what to do (%s)" % p.stderr.strip()[-300:])
p = load_with(os.path.abspath(os.path.join("build", "lib")))
check(p.returncode == 0 and p.stdout.strip().endswith("build/lib/libgcx.so"), "GCX_LIB as a folder: %s%s"
      % (p.stdout, p.stderr))

# ---- frames byte-identical to ./gcx encode, for every codec ----
specs = list(cli) + ["sbc:p=0.01", "3lc:s=1.0", "terngrad:seed=5", "stoch3:c=2.5", "topk:ratio=0.01",
                     "dgc:density=0.01", "gcomp:every=2", "int8", "ternsum:n=8"]
seeds = {name: [0, 1, 12345678901234] for name in cli}
fout, fdec = os.path.join(tmp, "x.gcf"), os.path.join(tmp, "y.f32")
for spec in specs:
    name = spec.split(":")[0]
    for seed in seeds[name] if spec == name else [3]:
        run("encode", "--codec", spec, "--seed", str(seed), fin, fout)
        cli_frames = gcf_frames(fout)
        ours = gcx.encode(spec, x, seed=seed)
        check(len(cli_frames) == 1 and ours == cli_frames[0],
              "%s seed %d: gcx.encode is ./gcx encode's frame (%d vs %s bytes)"
              % (spec, seed, len(ours), [len(f) for f in cli_frames]))
        run("decode", fout, fdec)
        y = gcx.decode(spec, ours, n)
        check(y.tobytes() == open(fdec, "rb").read(), "%s seed %d: gcx.decode is ./gcx decode" % (spec, seed))
        check(gcx.frame_info(ours) == (name, n), "%s: frame_info %s" % (spec, gcx.frame_info(ours)))
    # several frames: one instance in order, frame k with seed + k
    F, seed = 1500, 42
    run("encode", "--codec", spec, "--seed", str(seed), "--frame-values", str(F), fin, fout)
    cli_frames = gcf_frames(fout)
    enc, dec = gcx.Codec(spec), gcx.Codec(spec)
    ours = [enc.encode(x[at:at + F], seed=seed + k) for k, at in enumerate(range(0, n, F))]
    check(ours == cli_frames, "%s: %d frames of %d values equal ./gcx encode --frame-values's %d"
          % (spec, len(ours), F, len(cli_frames)))
    run("decode", fout, fdec)
    y = np.concatenate([dec.decode(f) for f in ours])
    check(y.tobytes() == open(fdec, "rb").read(), "%s: frames decoded in order are ./gcx decode's" % spec)

# the seed reaches the stochastic codecs (and only those)
for spec in ["terngrad", "stoch3"]:
    check(gcx.encode(spec, x, seed=0) != gcx.encode(spec, x, seed=1), "%s: another seed, another frame" % spec)
check(gcx.encode("sbc", x, seed=0) == gcx.encode("sbc", x, seed=1), "sbc does not depend on the seed")

# ---- round trips ----
for spec in ["fp32", "gcomp"]:
    check(np.array_equal(gcx.decode(spec, gcx.encode(spec, x)), x), "%s round-trips exactly" % spec)
y = gcx.decode("fp16", gcx.encode("fp16", x), x.shape)
check(y.shape == x.shape and np.max(np.abs(y - x)) < 1e-3 * np.max(np.abs(x)), "fp16 round trip within 2^-11")
x2 = x[:4000].reshape(40, 100)
f, rep = gcx.Codec("sbc:p=0.01").encode(x2, return_repr=True)
y2 = gcx.decode("sbc:p=0.01", f, (40, 100))
check(y2.shape == (40, 100) and np.array_equal(rep, y2), "repr is the decoded frame, in x's shape")
check(np.array_equal(gcx.decode("sbc:p=0.01", f, 4000), y2.reshape(-1)), "decode takes n for the shape")
acc = np.ones(4000, dtype=np.float32)
gcx.Codec("sbc:p=0.01").decode_acc(f, acc, weight=0.5)
check(np.array_equal(acc, np.float32(1) + np.float32(0.5) * y2.reshape(-1)), "decode_acc adds weight * decoded")
check(gcx.encode("int8", x[::2]) == gcx.encode("int8", np.ascontiguousarray(x[::2])),
      "a strided array encodes as its contiguous copy")
check(gcx.encode("fp32", [1.0, 2.5, -3.0]) == gcx.encode("fp32", np.array([1, 2.5, -3], np.float32)),
      "a list of numbers is float32")
check(len(gcx.decode("sbc", gcx.encode("sbc", np.zeros(0, np.float32)))) == 0, "zero values")

# ---- gcomp's state: saved after 3 frames, loaded into a new instance, the same 4th frame ----
parts = [x[i * 1000:(i + 1) * 1000] for i in range(4)]
a = gcx.Codec("gcomp:every=2")
fa = [a.encode(p) for p in parts[:3]]
blob = a.state_save()
b = gcx.Codec("gcomp:every=2")
b.state_load(blob)
check(len(blob) > 0 and b.encode(parts[3]) == a.encode(parts[3]), "gcomp state save/load continues the frames")
raises(lambda: gcx.Codec("gcomp").state_load(b"\x00" * 7), gcx.GcxError, "a bad state blob", "does not load")
check(gcx.Codec("sbc").state_save() == b"", "stateless codecs save no state")

# ---- stats as ./gcx stats prints them ----
for spec in ["sbc:p=0.01", "3lc", "terngrad", "gcomp"]:
    out = run("stats", "--codec", spec, "--seed", "9", "--frame-values", "2000", fin)
    row = [l for l in out.splitlines() if l.startswith(spec.split(":")[0])][0].split()
    s = gcx.stats(spec, x, seed=9, frame_values=2000)
    mine = ["%.4f" % s["bits_per_value"], "%.2f" % s["ratio"], "%.4g" % s["max_err"], "%.4g" % s["rms_err"],
            "%.4g" % s["rel_rms"]]
    check(row[1:6] == mine and s["frames"] == 3 and s["values"] == n,
          "%s: gcx.stats %s is ./gcx stats' %s" % (spec, mine, row[1:6]))
raises(lambda: gcx.stats("sbc", x.astype(np.float64)), TypeError, "stats of float64", "float32")
raises(lambda: gcx.stats("nope", x), gcx.GcxError, "stats with a bad spec", "unknown codec 'nope'")

# ---- torch ----
try:
    import torch
except ImportError:
    torch = None
    print("torch not importable: the torch checks skipped")
if torch is not None:
    t = torch.from_numpy(x.copy()).reshape(50, 100)
    check(gcx.encode("3lc", t) == gcx.encode("3lc", x), "a torch tensor encodes as the numpy array")
    check(gcx.encode("3lc", t.t()) == gcx.encode("3lc", np.ascontiguousarray(x.reshape(50, 100).T)),
          "a transposed tensor encodes in its logical order")
    f, rep = gcx.Codec("terngrad").encode(t, seed=4, return_repr=True)
    check(isinstance(rep, torch.Tensor) and rep.shape == t.shape, "repr of a tensor is a tensor of its shape")
    o = torch.zeros(50, 100)
    r = gcx.decode("terngrad", f, out=o)
    check(r is o and torch.equal(o, rep), "decode into a torch tensor")
    raises(lambda: gcx.encode("sbc", t.double()), TypeError, "a float64 tensor", "float32")
    raises(lambda: gcx.encode("sbc", t.half()), TypeError, "a float16 tensor", "x.float()")
    raises(lambda: gcx.decode("terngrad", f, out=torch.zeros(50, 100, dtype=torch.float64)), TypeError,
           "decode into a float64 tensor", "float32")
    raises(lambda: gcx.decode("terngrad", f, out=torch.zeros(10)), gcx.GcxError,
           "decode into a tensor of another size", "holds 5000 values, 10 were asked for")

# ---- bad input raises, never crashes ----
good = gcx.encode("sbc:p=0.01", x)
bad = bytearray(good)
bad[-1] ^= 0x10
raises(lambda: gcx.decode("sbc:p=0.01", bytes(bad)), gcx.GcxError, "a corrupt frame", "checksum")
raises(lambda: gcx.decode("sbc:p=0.01", bytes(bad), n), gcx.GcxError, "a corrupt frame with n", "checksum")
raises(lambda: gcx.decode("sbc:p=0.01", good[:-3], n), gcx.GcxError, "a truncated frame", "truncated")
raises(lambda: gcx.decode("sbc:p=0.01", good + b"\0", n), gcx.GcxError, "trailing bytes", "longer than declared")
raises(lambda: gcx.decode("sbc:p=0.01", good, n + 1), gcx.GcxError, "the wrong size", "holds 5000 values")
raises(lambda: gcx.decode("sbc:p=0.01", good, (7, 7)), gcx.GcxError, "the wrong shape", "49 were asked for")
raises(lambda: gcx.decode("fp32", good), gcx.GcxError, "a frame of another codec", "of codec sbc")
raises(lambda: gcx.decode("sbc", b"GCXF"), gcx.GcxError, "a 4-byte frame", "truncated")
raises(lambda: gcx.decode("sbc", "text"), TypeError, "a str frame", "bytes")
raises(lambda: gcx.decode("sbc", good, -1), ValueError, "a negative size", "negative")
raises(lambda: gcx.encode("sbc", x.astype(np.float64)), TypeError, "float64 input", "float64")
raises(lambda: gcx.encode("sbc", np.arange(10)), TypeError, "integer input", "float32")
raises(lambda: gcx.encode("sbc", "abc"), TypeError, "a string as input", "float32 numpy array")
raises(lambda: gcx.encode("sbc", ["a", "b"]), TypeError, "a list of strings", "not numbers")
raises(lambda: gcx.encode("int8", np.array([1, np.nan], np.float32)), gcx.GcxError, "NaN input", "value 1 is NaN")
raises(lambda: gcx.encode("int8", np.array([np.inf], np.float32)), gcx.GcxError, "inf input", "infinite")
raises(lambda: gcx.encode("sbc:p=2", x), gcx.GcxError, "a value out of range", "out of range")
raises(lambda: gcx.encode("nope", x), gcx.GcxError, "an unknown codec", "unknown codec 'nope'")
raises(lambda: gcx.encode(3, x), TypeError, "a spec that is not a string", "string")
raises(lambda: gcx.encode("terngrad", x, seed=-1), ValueError, "a negative seed", "seed")
raises(lambda: gcx.frame_info(bad), gcx.GcxError, "frame_info of a corrupt frame", "checksum")
# random bytes and damaged frames of every codec: refused with GcxError, and the process lives;
# with the CRC fixed up the codec's own decoder judges the payload: GcxError or values
_T = []
for _i in range(256):
    _c = _i
    for _ in range(8):
        _c = (_c >> 1) ^ (0x82F63B78 if _c & 1 else 0)
    _T.append(_c)


def crc32c(b):
    c = 0xFFFFFFFF
    for v in b:
        c = _T[(c ^ v) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


check(struct.unpack_from("<I", good, 16)[0] == crc32c(good[20:]), "the test's CRC-32C is the frames'")
refused = tries = other = touched = 0
for name in gcx.codecs():
    f = bytearray(gcx.encode(name, x[:300], seed=1))
    for i in range(90):
        if i < 30:  # random bytes, half of them behind a real header start
            g = bytearray(rng.integers(0, 256, int(rng.integers(0, 80)), dtype=np.uint8).tobytes())
            if i % 2:
                g[:6] = f[:6]
        else:  # one to three flipped bits in the header or payload
            g = bytearray(f)
            for _ in range(int(rng.integers(1, 4))):
                g[int(rng.integers(0, len(g)))] ^= 1 << int(rng.integers(0, 8))
            if g == f:
                continue
        fixed = i >= 60 and len(g) > 20
        if fixed:
            g[16:20] = struct.pack("<I", crc32c(bytes(g[20:])))
        o = np.full(300, 7, dtype=np.float32)
        try:
            if i % 3:
                gcx.decode(name, bytes(g), out=o)
            else:
                gcx.Codec(name).decode_acc(bytes(g), o, weight=0.5)
            other += not fixed  # a damaged frame without a fixed CRC must be refused
        except gcx.GcxError:
            refused += not fixed
            touched += not np.all(o == 7)
        except Exception as e:  # noqa: BLE001
            other += 1
            print("%s: %s: %s" % (name, type(e).__name__, e))
        tries += not fixed
check(other == 0 and refused == tries,
      "damaged frames of every codec: %d of %d refused with GcxError, %d other outcomes" % (refused, tries, other))
check(touched == 0, "a refused frame leaves out untouched (%d wrote to it)" % touched)

sys.exit(result())
