"""``__array_namespace_info__``: what the namespace supports, for the default backend, and
inside transforms what works there: array-api-extra and scipy read ``capabilities()`` to choose
between a masked path and a ``where`` path."""

from ._core._core import BatchInterpreter, interpreters
from ._dtypes import by_name, complex128, float64, int64
from .backends import default_backend


class _Info:
    def capabilities(self):
        # Under vmap a boolean mask selects a different number of elements per batch element:
        # the result would have a data-dependent, ragged shape, which vmap refuses.
        batched = any(isinstance(f, BatchInterpreter) for f in interpreters())
        return {"boolean indexing": not batched, "data-dependent shapes": not batched,
                "max dimensions": 64}

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
