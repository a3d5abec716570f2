"""Dask arrays (lazy, chunked), through array-api-compat's dask namespace.

Rules run on dask arrays as on any other: gradients are built lazily, computed with ``.compute()``.
"""
import dask.array as da
from array_api_compat import dask as _compat_dask  # noqa: F401  (registers the namespace)
from array_api_compat.dask import array as compat_dask

from . import Backend, _is_basic_key, _is_index_array, generic_getitem


def _concrete_masks(key):
    key = key if isinstance(key, tuple) else (key,)
    out = []
    for k in key:
        if _is_index_array(k) and not isinstance(k, bool) and str(k.dtype) == "bool":
            import numpy as np
            out.extend(da.from_array(i) for i in np.nonzero(np.asarray(k.compute())))
        else:
            out.append(k)
    return tuple(out)


def _single_array(key):
    key = key if isinstance(key, tuple) else (key,)
    arrays = [k for k in key if _is_index_array(k)]
    return len(arrays) == 1 and not any(isinstance(k, int) or k is None for k in key) and \
        getattr(arrays[0], "ndim", 0) == 1


class DaskBackend(Backend):
    name = "dask"
    xp = compat_dask
    array_types = (da.Array,)

    def _from_numpy(self, a, dtype, device):
        return da.from_array(a.astype(dtype) if dtype is not None else a)

    def getitem(self, x, key):
        # dask indexes natively with basic keys and one integer array; masks are computed
        # (their selection has a data-dependent size, which dask cannot broadcast lazily)
        key = _concrete_masks(key)
        if _is_basic_key(key) or _single_array(key):
            return x[key]
        return generic_getitem(self.xp, x, key)

    def index_set(self, x, key, v):
        return super().index_set(x, _concrete_masks(key), v)

    def index_add(self, base, key, v):
        return super().index_add(base, _concrete_masks(key), v)

    def to_numpy(self, x):
        import numpy as np
        return np.asarray(x.compute())

    def default_device(self):
        return "cpu"

    def device_of(self, x):
        return "cpu"


def make():
    return DaskBackend()
