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


def _matrices_whole(x):
    """``x`` rechunked so that each block holds whole matrices (the last two axes unsplit)."""
    return x.rechunk({x.ndim - 2: -1, x.ndim - 1: -1})


def _per_block(fn, x, *, drop=0, dtype=None):
    """Apply the NumPy linear-algebra function ``fn`` to every block of whole matrices, lazily;
    ``drop`` is how many trailing axes the result loses (det: 2, eigenvalues: 1)."""
    x = _matrices_whole(x)
    nd = x.ndim
    kw = {"drop_axis": list(range(nd - drop, nd))} if drop else {}
    return da.map_blocks(fn, x, dtype=dtype or x.dtype, **kw)


class _DaskLinalg:
    """dask's linalg, completed: dask.array.linalg has no det, slogdet, eigh or eig, returns the
    upper Cholesky factor, handles only 2-d arrays, and needs SciPy for solve, inv and cholesky.
    These run NumPy's functions on blocks of whole matrices (each block still lazy); the rest is
    dask's own."""

    def __getattr__(self, name):
        return getattr(compat_dask.linalg, name)

    def det(self, x):
        import numpy as np
        return _per_block(np.linalg.det, x, drop=2)

    def slogdet(self, x):
        import numpy as np
        from collections import namedtuple
        sign = _per_block(lambda b: np.linalg.slogdet(b)[0], x, drop=2)
        logabs = _per_block(lambda b: np.linalg.slogdet(b)[1], x, drop=2,
                            dtype=np.empty(0, x.dtype).real.dtype)
        return namedtuple("SlogdetResult", "sign logabsdet")(sign, logabs)

    def eigh(self, x):
        import numpy as np
        from collections import namedtuple
        w = _per_block(lambda b: np.linalg.eigh(b)[0], x, drop=1,
                       dtype=np.empty(0, x.dtype).real.dtype)
        v = _per_block(lambda b: np.linalg.eigh(b)[1], x)
        return namedtuple("EighResult", "eigenvalues eigenvectors")(w, v)

    def eigvalsh(self, x):
        return self.eigh(x)[0]

    def eig(self, x):
        import numpy as np
        from collections import namedtuple
        cdt = np.result_type(x.dtype, np.complex64)
        w = _per_block(lambda b: np.linalg.eig(b)[0].astype(cdt), x, drop=1, dtype=cdt)
        v = _per_block(lambda b: np.linalg.eig(b)[1].astype(cdt), x, dtype=cdt)
        return namedtuple("EigResult", "eigenvalues eigenvectors")(w, v)

    def eigvals(self, x):
        return self.eig(x)[0]

    def cholesky(self, x, upper=False):
        import numpy as np
        lower = _per_block(np.linalg.cholesky, x)
        return da.swapaxes(lower, -1, -2).conj() if upper else lower

    def inv(self, x):
        import numpy as np
        return _per_block(np.linalg.inv, x)

    def pinv(self, x, rtol=None):
        import numpy as np
        return _per_block(lambda b: np.linalg.pinv(b, rcond=rtol if rtol is not None else
                                                   max(b.shape[-2:]) * np.finfo(b.dtype).eps),
                          x.rechunk({x.ndim - 2: -1, x.ndim - 1: -1}))

    def matrix_rank(self, x, rtol=None):
        import numpy as np
        return _per_block(lambda b: np.linalg.matrix_rank(b, rtol=rtol), x, drop=2,
                          dtype=np.int64)

    def solve(self, a, b):
        import numpy as np
        vec = b.ndim == 1
        if vec:
            b = b[:, None]
        shape = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
        a = _matrices_whole(da.broadcast_to(a, shape + a.shape[-2:]))
        b = da.broadcast_to(b, shape + b.shape[-2:]).rechunk(a.chunks[:-2] + (-1, -1))
        out = da.map_blocks(np.linalg.solve, a, b, dtype=np.result_type(a.dtype, b.dtype),
                            chunks=b.chunks)
        return out[..., 0] if vec else out

    def qr(self, x, mode="reduced"):
        import numpy as np
        from collections import namedtuple
        m, n = x.shape[-2:]
        k = min(m, n) if mode == "reduced" else m
        xw = _matrices_whole(x)
        q = da.map_blocks(lambda b: np.linalg.qr(b, mode=mode)[0], xw, dtype=x.dtype,
                          chunks=xw.chunks[:-2] + ((m,), (k,)))
        r = da.map_blocks(lambda b: np.linalg.qr(b, mode=mode)[1], xw, dtype=x.dtype,
                          chunks=xw.chunks[:-2] + ((k,), (n,)))
        return namedtuple("QRResult", "Q R")(q, r)

    def svd(self, x, full_matrices=True):
        import numpy as np
        from collections import namedtuple
        m, n = x.shape[-2:]
        k = min(m, n)
        xw = _matrices_whole(x)
        um, vn = (m, n) if full_matrices else (k, k)
        real = np.empty(0, x.dtype).real.dtype
        u = da.map_blocks(lambda b: np.linalg.svd(b, full_matrices=full_matrices)[0], xw,
                          dtype=x.dtype, chunks=xw.chunks[:-2] + ((m,), (um,)))
        s = da.map_blocks(lambda b: np.linalg.svd(b, compute_uv=False), xw, dtype=real,
                          drop_axis=[x.ndim - 1], chunks=xw.chunks[:-2] + ((k,),))
        vh = da.map_blocks(lambda b: np.linalg.svd(b, full_matrices=full_matrices)[2], xw,
                           dtype=x.dtype, chunks=xw.chunks[:-2] + ((vn,), (n,)))
        return namedtuple("SVDResult", "U S Vh")(u, s, vh)

    def svdvals(self, x):
        return self.svd(x, full_matrices=False)[1]


class _DaskNamespace:
    """array-api-compat's dask namespace with ``linalg`` completed (see _DaskLinalg)."""

    linalg = _DaskLinalg()

    def __getattr__(self, name):
        return getattr(compat_dask, name)


class DaskBackend(Backend):
    name = "dask"
    xp = _DaskNamespace()
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
