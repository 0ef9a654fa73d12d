"""gcx: the gradient codecs of gcx from Python (ctypes over libgcx.so, lib/gcx.h).

    make lib                        # build/lib/libgcx.so
    PYTHONPATH=python python3
    >>> import numpy as np, gcx
    >>> x = np.random.randn(10000).astype(np.float32)
    >>> frame = gcx.encode("sbc:p=0.01", x)        # bytes: the frame ./gcx encode writes
    >>> y = gcx.decode("sbc:p=0.01", frame, x.shape)
    >>> gcx.stats("sbc:p=0.01", x)["ratio"]

What maps to what (lib/gcx.h):

    gcx.codecs(), gcx.help()        gcx_codec_count/name, gcx_codec_help
    gcx.encode(spec, x, seed)       gcx_encode: one frame, byte-identical to frame 0 of
                                    `gcx encode --codec SPEC --seed SEED`
    gcx.decode(spec, frame, shape)  gcx_decode; shape (or n) defaults to the frame's count
    gcx.stats(spec, x, ...)         gcx_stats: what `gcx stats` prints, as a dict
    gcx.frame_info(frame)           gcx_frame_info: (codec name, count), header and CRC checked
    gcx.Codec(spec)                 one instance (gcx_codec_new): encode/decode many frames in
                                    order, for the codecs with state (gcomp), and state_save/load

Input: numpy arrays and torch tensors (CPU or GPU, copied to the host) of float32, any
shape (flattened in C order), or lists of numbers. Other dtypes raise TypeError (no silent
rounding: convert with x.astype(np.float32) / x.float()). Output: numpy float32; decode(...,
out=t) fills a float32 numpy array or CPU torch tensor in place, and Codec.encode returns
repr in the input's kind. Failures raise gcx.GcxError (a ValueError) with the library's
message; bad input never crashes the interpreter.

gcx.ddp (import gcx.ddp; needs torch) is a PyTorch DistributedDataParallel communication
hook that compresses every gradient bucket with a codec: see its docstring.

The library is found at $GCX_LIB (a file, or a folder holding libgcx.so), then at the
repository's build/lib/libgcx.so beside this package (python/../build/lib), then on the
system's library path (libgcx.so.1 from `make install`).
"""

import ctypes
import ctypes.util
import os

import numpy as np

# (help is left out of *: it would hide the builtin)
__all__ = ["GcxError", "Codec", "codecs", "encode", "decode", "stats", "frame_info", "version", "library_path"]

API_VERSION = 1
_STAT_KEYS = ["values", "frames", "bytes", "bits_per_value", "ratio", "max_err", "rms_err", "rel_rms", "rms",
              "enc_seconds", "dec_seconds"]
_ERR_PARAM = 9


class GcxError(ValueError):
    """A failure of libgcx: .code is the (negative) GCX_ERR_* code, str() the message."""

    def __init__(self, message, code=-_ERR_PARAM):
        super().__init__(message)
        self.code = code


# ---- the library ----

def _candidates():
    env = os.environ.get("GCX_LIB")
    if env:
        yield os.path.join(env, "libgcx.so") if os.path.isdir(env) else env
        return  # asked for one library: no fallback that would hide a wrong path
    here = os.path.dirname(os.path.abspath(__file__))
    yield os.path.normpath(os.path.join(here, "..", "..", "build", "lib", "libgcx.so"))
    yield ctypes.util.find_library("gcx") or "libgcx.so.1"


def _load():
    tried = []
    for path in _candidates():
        try:
            return ctypes.CDLL(path), path
        except OSError as e:
            tried.append("%s (%s)" % (path, e))
    raise ImportError("gcx: libgcx.so not found; build it with `make lib` in the gcx repository, or set "
                      "GCX_LIB=/path/to/libgcx.so. Tried: " + "; ".join(tried))


_lib, library_path = _load()

_c = ctypes
_P = _c.c_void_p
_sz = _c.c_size_t
for _name, _res, _args in [
    ("gcx_strerror", _c.c_char_p, [_c.c_int]),
    ("gcx_api_version", _c.c_int, []),
    ("gcx_version", _c.c_char_p, []),
    ("gcx_codec_count", _c.c_int, []),
    ("gcx_codec_name", _c.c_char_p, [_c.c_int]),
    ("gcx_codec_summary", _c.c_char_p, [_c.c_int]),
    ("gcx_codec_help", _sz, [_c.c_char_p, _sz]),
    ("gcx_codec_new", _P, [_c.c_char_p, _c.c_char_p, _sz]),
    ("gcx_codec_free", None, [_P]),
    ("gcx_codec_spec", _sz, [_P, _c.c_char_p, _sz]),
    ("gcx_codec_name_of", _c.c_char_p, [_P]),
    ("gcx_codec_error", _c.c_char_p, [_P]),
    ("gcx_codec_set_threads", _c.c_int, [_P, _c.c_int]),
    ("gcx_max_frame", _sz, [_P, _sz]),
    ("gcx_encode", _c.c_int64, [_P, _P, _sz, _P, _sz, _c.c_uint64, _P]),
    ("gcx_frame_info", _c.c_int, [_P, _sz, _c.POINTER(_c.c_char_p), _c.POINTER(_c.c_uint32)]),
    ("gcx_decode", _c.c_int, [_P, _P, _sz, _P, _sz]),
    ("gcx_decode_acc", _c.c_int, [_P, _P, _sz, _c.c_float, _P, _sz]),
    ("gcx_state_max", _sz, [_P]),
    ("gcx_state_save", _c.c_int64, [_P, _P, _sz]),
    ("gcx_state_load", _c.c_int, [_P, _P, _sz]),
    ("gcx_stats", _c.c_int, [_c.c_char_p, _P, _sz, _sz, _c.c_uint64, _c.c_int, _P, _sz, _c.c_char_p, _sz]),
]:
    _f = getattr(_lib, _name)
    _f.restype = _res
    _f.argtypes = _args

if _lib.gcx_api_version() != API_VERSION:
    raise ImportError("gcx: %s has API version %d, this package wants %d (rebuild with `make lib`)"
                      % (library_path, _lib.gcx_api_version(), API_VERSION))


# ---- argument checks ----

def _is_torch(x):
    return type(x).__module__.split(".")[0] == "torch"


def _floats(x, what="x"):
    """x as a C-contiguous 1-D float32 numpy array (no copy when it already is one)."""
    if _is_torch(x):
        if str(x.dtype) != "torch.float32":
            raise TypeError("gcx: %s is a torch tensor of %s; the codecs take float32 (use %s.float())"
                            % (what, x.dtype, what))
        x = x.detach().cpu().contiguous().numpy()
    elif isinstance(x, np.ndarray):
        if x.dtype != np.float32:
            raise TypeError("gcx: %s is a numpy array of %s; the codecs take float32 (use %s.astype(np.float32))"
                            % (what, x.dtype, what))
    elif isinstance(x, (list, tuple)):
        try:
            x = np.asarray(x, dtype=np.float32)
        except (TypeError, ValueError) as e:
            raise TypeError("gcx: %s is a list that is not numbers: %s" % (what, e)) from None
    else:
        raise TypeError("gcx: %s must be a float32 numpy array or torch tensor, not %s" % (what, type(x).__name__))
    return np.ascontiguousarray(x).reshape(-1)


def _frame_bytes(frame):
    if isinstance(frame, (bytes, bytearray, memoryview)):
        return bytes(frame)
    if isinstance(frame, np.ndarray) and frame.dtype == np.uint8:
        return frame.tobytes()
    raise TypeError("gcx: a frame is bytes (or bytearray, memoryview, uint8 array), not %s" % type(frame).__name__)


def _spec_bytes(spec):
    if not isinstance(spec, str):
        raise TypeError("gcx: the codec spec is a string like 'sbc:p=0.01', not %s" % type(spec).__name__)
    return spec.encode()


def _seed(seed):
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or not 0 <= int(seed) < 2 ** 64:
        raise ValueError("gcx: seed must be an integer in [0, 2^64), got %r" % (seed,))
    return int(seed)


def _ptr(a):
    return a.ctypes.data_as(_P)


# ---- the codec list ----

def version():
    """The gcx version libgcx was built from (git describe)."""
    return _lib.gcx_version().decode()


def codecs():
    """The codec names, as specs take them."""
    return [_lib.gcx_codec_name(i).decode() for i in range(_lib.gcx_codec_count())]


def help():
    """Every codec with its parameters, defaults and ranges (as `gcx --help`)."""
    n = _lib.gcx_codec_help(None, 0)
    buf = _c.create_string_buffer(n + 1)
    _lib.gcx_codec_help(buf, n + 1)
    return buf.value.decode()


def frame_info(frame):
    """(codec name, value count) of a frame; GcxError when its header or CRC is bad."""
    b = _frame_bytes(frame)
    name, count = _c.c_char_p(), _c.c_uint32()
    rc = _lib.gcx_frame_info(b, len(b), _c.byref(name), _c.byref(count))
    if rc:
        raise GcxError("gcx: not a valid frame (%d bytes): %s" % (len(b), _lib.gcx_strerror(rc).decode()), rc)
    return name.value.decode(), count.value


# ---- instances ----

class Codec:
    """One codec instance for a spec "NAME[:key=value,...]" (gcx_codec_new).

    Stateful codecs (gcomp) need one instance that encodes the frames in order and
    another that decodes them in the same order; gcx encode/decode do the same."""

    def __init__(self, spec, threads=0):
        self._h = None
        if isinstance(threads, bool) or not isinstance(threads, (int, np.integer)) or not 0 <= threads <= 1024:
            raise ValueError("gcx: threads must be an integer in [0, 1024], got %r" % (threads,))
        err = _c.create_string_buffer(256)
        h = _lib.gcx_codec_new(_spec_bytes(spec), err, 256)
        if not h:
            raise GcxError("gcx: bad codec spec %r: %s" % (spec, err.value.decode()))
        self._h = h
        _lib.gcx_codec_set_threads(h, int(threads))

    def __del__(self):
        h, self._h = getattr(self, "_h", None), None
        if h and _lib is not None:
            _lib.gcx_codec_free(h)

    def _fail(self, rc):
        raise GcxError("gcx: %s" % _lib.gcx_codec_error(self._h).decode(), rc)

    @property
    def spec(self):
        """The full spec with every parameter, e.g. 'sbc:p=0.01' (the .gcf header's)."""
        buf = _c.create_string_buffer(1024)
        _lib.gcx_codec_spec(self._h, buf, 1024)
        return buf.value.decode()

    @property
    def name(self):
        return _lib.gcx_codec_name_of(self._h).decode()

    def __repr__(self):
        return "gcx.Codec(%r)" % self.spec

    def max_frame(self, n):
        """The most bytes a frame of n values can take."""
        m = _lib.gcx_max_frame(self._h, int(n))
        if m == 0:
            raise GcxError("gcx: %d values do not fit one frame (at most 2^32 - 1)" % n)
        return m

    def encode(self, x, seed=0, return_repr=False):
        """One frame (bytes) of x; with return_repr, (frame, repr): what the frame represents,
        shaped as x, a torch tensor when x is one (error feedback keeps x - repr)."""
        a = _floats(x)
        n = a.size
        cap = self.max_frame(n)
        frame = _c.create_string_buffer(cap)
        rep = np.empty(n, dtype=np.float32) if return_repr else None
        ln = _lib.gcx_encode(self._h, frame, cap, _ptr(a), n, _seed(seed), _ptr(rep) if return_repr else None)
        if ln < 0:
            self._fail(ln)
        out = frame.raw[:ln]
        if not return_repr:
            return out
        shape = tuple(x.shape) if hasattr(x, "shape") else (n,)
        rep = rep.reshape(shape)
        if _is_torch(x):
            import torch
            rep = torch.from_numpy(rep).to(x.device)
        return out, rep

    def _out(self, frame, shape, out):
        if out is not None:
            if _is_torch(out):
                if str(out.dtype) != "torch.float32" or out.device.type != "cpu" or not out.is_contiguous():
                    raise TypeError("gcx: out must be a contiguous float32 CPU tensor, got %s on %s"
                                    % (out.dtype, out.device))
                arr = out.detach().numpy()
            elif isinstance(out, np.ndarray):
                if out.dtype != np.float32 or not out.flags.c_contiguous or not out.flags.writeable:
                    raise TypeError("gcx: out must be a writeable C-contiguous float32 array, got %s" % out.dtype)
                arr = out
            else:
                raise TypeError("gcx: out must be a numpy array or torch tensor, not %s" % type(out).__name__)
            return arr.reshape(-1), out
        if shape is None:
            try:
                shape = (frame_info(frame)[1],)
            except GcxError as e:
                raise GcxError("gcx: %s cannot decode: %s" % (self.name, str(e)[5:]), e.code) from None
        elif isinstance(shape, (int, np.integer)) and not isinstance(shape, bool):
            shape = (int(shape),)
        else:
            try:
                shape = tuple(int(d) for d in shape)
            except TypeError:
                raise TypeError("gcx: shape must be an int or a tuple of ints, not %r" % (shape,)) from None
        if any(d < 0 for d in shape):
            raise ValueError("gcx: negative dimension in shape %r" % (shape,))
        arr = np.empty(shape, dtype=np.float32)
        return arr.reshape(-1), arr

    def decode(self, frame, shape=None, out=None):
        """The values of a frame as a float32 array of shape (an int n or a tuple; default:
        the frame's count), or into out (numpy array or CPU torch tensor), which is returned.
        GcxError for a frame of another codec, another size, or damaged."""
        b = _frame_bytes(frame)
        flat, res = self._out(b, shape, out)
        rc = _lib.gcx_decode(self._h, _ptr(flat), flat.size, b, len(b))
        if rc:
            self._fail(rc)
        return res

    def decode_acc(self, frame, out, weight=1.0):
        """out += weight * decode(frame), in place; out is unchanged when the frame is refused."""
        b = _frame_bytes(frame)
        flat, res = self._out(b, None, out)
        rc = _lib.gcx_decode_acc(self._h, _ptr(flat), flat.size, float(weight), b, len(b))
        if rc:
            self._fail(rc)
        return res

    def state_save(self):
        """The codec's state as bytes (b'' for the stateless codecs), for checkpoints."""
        cap = _lib.gcx_state_max(self._h)
        if cap == 0:
            return b""
        buf = _c.create_string_buffer(cap)
        ln = _lib.gcx_state_save(self._h, buf, cap)
        if ln < 0:
            raise GcxError("gcx: state_save: %s" % _lib.gcx_strerror(ln).decode(), ln)
        return buf.raw[:ln]

    def state_load(self, blob):
        """Restore a state_save blob; GcxError (and the codec unchanged) for a bad one."""
        b = _frame_bytes(blob)
        rc = _lib.gcx_state_load(self._h, b, len(b))
        if rc:
            self._fail(rc)


# ---- one-shot functions ----

def encode(spec, x, seed=0):
    """One frame (bytes) of x with a fresh instance of codec spec: the bytes of frame 0 of
    `gcx encode --codec SPEC --seed SEED` for the same values (up to 2^24 of them)."""
    return Codec(spec).encode(x, seed)


def decode(spec, frame, shape=None, out=None):
    """The values of one frame with a fresh instance of codec spec (see Codec.decode)."""
    return Codec(spec).decode(frame, shape, out)


def stats(spec, x, seed=0, frame_values=0, threads=0):
    """What `gcx stats --codec SPEC --seed SEED --frame-values F` measures, as a dict: values,
    frames, bytes, bits_per_value, ratio, max_err, rms_err, rel_rms, rms, enc_seconds,
    dec_seconds (frames of frame_values values, 0 = 2^24; frame k uses seed + k)."""
    a = _floats(x)
    if isinstance(frame_values, bool) or not isinstance(frame_values, (int, np.integer)) or \
            not 0 <= frame_values <= 2 ** 32 - 1:
        raise ValueError("gcx: frame_values must be an integer in [0, 2^32), got %r" % (frame_values,))
    res = np.zeros(len(_STAT_KEYS), dtype=np.float64)
    err = _c.create_string_buffer(256)
    rc = _lib.gcx_stats(_spec_bytes(spec), _ptr(a), a.size, int(frame_values), _seed(seed), int(threads),
                        _ptr(res), res.size, err, 256)
    if rc:
        raise GcxError("gcx: stats of %r: %s" % (spec, err.value.decode()), rc)
    d = dict(zip(_STAT_KEYS, res.tolist()))
    for k in ("values", "frames", "bytes"):
        d[k] = int(d[k])
    return d
