"""``__array_namespace_info__``: what the namespace supports, for the default backend."""

from ._dtypes import by_name, complex128, float64, int64
from .backends import default_backend


class _Info:
    def capabilities(self):
        return {"boolean indexing": True, "data-dependent shapes": True, "max dimensions": 64}

    def default_device(self):
        return default_backend().default_device()

    def default_dtypes(self, *, device=None):
        return {"real floating": float64, "complex floating": complex128,
                "integral": int64, "indexing": int64}

    def devices(self):
        # a tuple since 2025.12 (a list before)
        return (self.default_device(),)

    def dtypes(self, *, device=None, kind=None):
        from ._ops.dtype_functions import isdtype
        names = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                 "float32", "float64", "complex64", "complex128"]
        out = {}
        for n in names:
            d = by_name(n)
            if kind is None or isdtype(d, kind):
                out[n] = d
        return out


def __array_namespace_info__():
    """Information about this array API namespace (devices, dtypes, capabilities)."""
    return _Info()
