"""Dask arrays (lazy, chunked), through array-api-compat's dask namespace.

Rules run on dask arrays as on any other: gradients are built lazily, computed with ``.compute()``.
"""
import dask.array as da
from array_api_compat import dask as _compat_dask  # noqa: F401  (registers the namespace)
from array_api_compat.dask import array as compat_dask

from . import Backend


class DaskBackend(Backend):
    name = "dask"
    xp = compat_dask
    array_types = (da.Array,)

    def _from_numpy(self, a, dtype, device):
        return da.from_array(a.astype(dtype) if dtype is not None else a)

    def to_numpy(self, x):
        import numpy as np
        return np.asarray(x.compute())

    def default_device(self):
        return "cpu"

    def device_of(self, x):
        return "cpu"


def make():
    return DaskBackend()
