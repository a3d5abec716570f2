"""arrayad's dtype objects.

A tensor's ``.dtype`` is an arrayad ``DType`` whatever the backend, so ``x.dtype == ad.float64``
holds on NumPy, torch and array-api-strict alike. Each DType knows its backend twin by name
(``to_backend``); backend dtypes map back through a cache (``from_backend``).
"""

__all__ = [
    # (the dtypes are made in a loop below, which pyflakes cannot follow)
    "DType", "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",  # noqa: F822
    "float32", "float64", "complex64", "complex128", "from_backend", "to_backend", "by_name",  # noqa: F822
]

import builtins


class DType:
    __slots__ = ("name", "kind", "bits")

    def __init__(self, name, kind, bits):
        self.name = name
        self.kind = kind  # 'b' bool, 'i' signed, 'u' unsigned, 'f' real float, 'c' complex
        self.bits = bits

    def __repr__(self):
        return f"arrayad.{self.name}"

    def __eq__(self, other):
        if isinstance(other, DType):
            return other is self
        # Accept a backend's own dtype (np.float64, torch.float64, ...) for convenience; None
        # is no dtype (NumPy would read it as float64).
        if other is None or isinstance(other, (int, float, complex)):
            return False
        try:
            return from_backend(other) is self
        except (TypeError, ValueError, KeyError, AttributeError):
            return NotImplemented

    def __hash__(self):
        return hash(("arrayad", self.name))

    @property
    def dtype(self):
        """NumPy's dtype of the same name, so that ``numpy.dtype(ad.float64)`` is
        ``numpy.float64`` (NumPy reads a ``dtype`` attribute; JAX's dtypes are NumPy's)."""
        import numpy
        return numpy.dtype(self.name)

    def __reduce__(self):
        return (by_name, (self.name,))


_BY_NAME = {}
for _name, _kind, _bits in [
    ("bool", "b", 8), ("int8", "i", 8), ("int16", "i", 16), ("int32", "i", 32),
    ("int64", "i", 64), ("uint8", "u", 8), ("uint16", "u", 16), ("uint32", "u", 32),
    ("uint64", "u", 64), ("float32", "f", 32), ("float64", "f", 64),
    ("complex64", "c", 64), ("complex128", "c", 128),
]:
    _BY_NAME[_name] = DType(_name, _kind, _bits)
globals().update(_BY_NAME)

# Python scalar types, as the array API's weak "kinds" (used for scalars mixed into an operation).
_PY = {builtins.bool: _BY_NAME["bool"], builtins.int: _BY_NAME["int64"],
       builtins.float: _BY_NAME["float64"], builtins.complex: _BY_NAME["complex128"]}

_FROM_BACKEND = {}


def is_inexact(dtype):
    """Whether ``dtype`` is floating-point or complex: the dtypes that carry derivatives."""
    return dtype.kind in ("f", "c")


def by_name(name):
    return _BY_NAME[name]


def from_backend(dt):
    """The arrayad DType of a backend dtype (numpy dtype, torch.dtype, strict dtype...)."""
    # Keyed by type too: comparing dtypes of two libraries is not meaningful (strict warns).
    key = (type(dt), dt)
    try:
        return _FROM_BACKEND[key]
    except KeyError:
        pass
    if isinstance(dt, DType):
        return dt
    if dt in _PY:
        return _PY[dt]
    name = getattr(dt, "name", None)
    if not isinstance(name, str):
        name = str(dt).rsplit(".", 1)[-1]   # torch.float64, array_api_strict.float64
    if name == "bool_":
        name = "bool"
    if name not in _BY_NAME:
        # numpy scalar types (np.float64) and dtype-like objects
        import numpy
        try:
            name = numpy.dtype(dt).name
        except (TypeError, ValueError):
            name = None
    if name not in _BY_NAME:
        raise TypeError(
            f"arrayad: unsupported dtype {dt!r}. arrayad has the array API standard's dtypes "
            f"({', '.join(_BY_NAME)}); convert first, e.g. x.astype(numpy.float32) for float16 "
            f"data.")
    result = _BY_NAME[name]
    _FROM_BACKEND[key] = result
    return result


def to_backend(dtype, xp):
    """The backend namespace ``xp``'s dtype for an arrayad DType (or a backend dtype, or None)."""
    if dtype is None:
        return None
    if not isinstance(dtype, DType):
        dtype = from_backend(dtype)
    return getattr(xp, dtype.name)
