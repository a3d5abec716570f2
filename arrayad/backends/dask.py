"""Dask arrays (lazy, chunked), through array-api-compat's dask namespace.

Rules run on dask arrays as on any other: gradients are built lazily, computed with ``.compute()``.
Nothing computes while a gradient graph is built, except what has a data-dependent shape: a
boolean mask used as an index (its selection's size) is computed once, where it is used.

NOTE [lazy broadcasts]
----------------------
The cotangent of a reduction is its (small) cotangent broadcast back to the input's shape. Dask's
``broadcast_to`` makes every new axis one chunk, and an elementwise operation with the chunked
input then re-splits that chunk: each piece is a copy, and Dask's scheduler computes all the
pieces at once to release the big chunk, so the whole array is held in memory (a loss summed
over an n x d array was not out of core). A rule cannot say "chunked like x": it sees x's shape
only (NOTE [saved values] in the core). So a broadcast made here remembers its source
(``_BROADCAST``), and the namespace's elementwise functions (and Python's operators on it) work on
that source instead: Dask broadcasts it per chunk against the chunks of the other operands (no
task, no re-split, no copy), and a result still smaller than the full shape is a lazy broadcast
again (``-g``, ``g / 2``). Ones (``ones_like``, the seed of a backward pass) times an array is
that array. Left alone, a broadcast's new axes get Dask's automatic chunk size, never one
whole-array chunk.
"""
import collections
import operator
import threading

import dask.array as da
import numpy as np
from array_api_compat import dask as _compat_dask  # noqa: F401  (registers the namespace)
from array_api_compat.dask import array as compat_dask
from dask.array.core import normalize_chunks

from . import Backend, _has_negative_step, _is_basic_key, _is_index_array, _numel, generic_getitem
from ._adapter import set_complex_part

_BROADCAST = "_arrayad_broadcast_of"   # attribute of a lazy broadcast: its source array
_ONES = "_arrayad_ones"   # attribute of ones_like's arrays (the seed of a backward pass) and of
                          # their lazy broadcasts: all ones
_EYE = "_arrayad_eye"   # attribute of eye's square identities and their transposes
_ONE_CHUNK_BYTES = 1 << 20   # ones_like of an array this small is one chunk
_ZEROS = "_arrayad_zeros"   # attribute of zeros_like's arrays (the base of a gradient's scatter)
_PADDED = "_arrayad_padded"   # attribute of a slice's padded cotangent: (axis, start, v), where
                              # the array is v at [start, start + len) of axis and zero elsewhere
_SCALED = "_arrayad_scaled"   # attribute of a product by a small factor: (factor, base, their
                              # graph names), where the array is base * factor (see _multiply)
_SMALL = 16   # a factor is small when it has at most 1/_SMALL of the other operand's elements


def _mark(out, tag, value=True):
    """Tag the Dask array ``out`` with what is known of its values (``_ONES``, ``_ZEROS``,
    ``_EYE``, a lazy broadcast's source) and return it. Dask's own ``out[key] = v`` keeps the
    Python object and gives it a new graph, with a new ``name`` (a user may do it on
    ``to_backend_array()``'s result): the tag holds the name it was made for, and lapses with it."""
    setattr(out, tag, (out.name, value))
    return out


def _marked(x, tag):
    """The value ``x`` was tagged with (``_mark``) while its graph is the one tagged, else None."""
    t = getattr(x, tag, None)
    return t[1] if t is not None and t[0] == getattr(x, "name", None) else None


class _Broadcast(da.Array):
    """A lazy broadcast. Rules apply Python's operators to raw cotangents (``-g``, ``g / x``): on
    a lazy broadcast they go through the namespace's functions, as the array API calls do. (A
    subclass of Dask's Array, so that Python tries its reflected operators first: ``x * g``
    comes here too. What Dask makes from it is a plain Array, pickles included.)"""

    __slots__ = ()

    def __neg__(self):
        return _NAMESPACE.negative(self)

    def __add__(self, other):
        return _NAMESPACE.add(self, other)

    def __radd__(self, other):
        return _NAMESPACE.add(other, self)

    def __sub__(self, other):
        return _NAMESPACE.subtract(self, other)

    def __rsub__(self, other):
        return _NAMESPACE.subtract(other, self)

    def __mul__(self, other):
        return _NAMESPACE.multiply(self, other)

    def __rmul__(self, other):
        return _NAMESPACE.multiply(other, self)

    def __truediv__(self, other):
        return _NAMESPACE.divide(self, other)

    def __rtruediv__(self, other):
        return _NAMESPACE.divide(other, self)


def _broadcast(x, shape):
    """``x`` broadcast to ``shape`` as a lazy broadcast (NOTE [lazy broadcasts]): chunked as x
    on the axes it has, with Dask's automatic chunk size on the new ones."""
    x = da.asarray(x)
    shape = tuple(shape)
    lead = len(shape) - x.ndim
    chunks = normalize_chunks(
        tuple("auto" if i < lead or x.shape[i - lead] != s else x.chunks[i - lead]
              for i, s in enumerate(shape)), shape, dtype=x.dtype)
    out = da.broadcast_to(x, shape, chunks=chunks)
    out = _mark(_Broadcast(out.dask, out.name, out.chunks, meta=out._meta), _BROADCAST, x)
    return _mark(out, _ONES) if _marked(x, _ONES) else out


def _source(a):
    """A lazy broadcast's source array, or ``a`` itself."""
    src = _marked(a, _BROADCAST)
    return a if src is None else src


def _lazy(fn):
    """The elementwise function ``fn`` on the sources of the lazy broadcasts among its
    arguments: Dask broadcasts them per chunk, against the chunks of the other operands; a
    result still smaller than the full shape is a lazy broadcast again."""
    def call(*args, **kwargs):
        if not any(_marked(a, _BROADCAST) is not None for a in args):
            return fn(*args, **kwargs)
        shapes = [tuple(a.shape) for a in args if isinstance(a, (da.Array, np.ndarray))]
        if any(s != s for shape in shapes for s in shape):   # (unknown sizes: nan)
            return fn(*args, **kwargs)
        shape = np.broadcast_shapes(*shapes)
        out = fn(*(_source(a) for a in args), **kwargs)
        return out if tuple(out.shape) == shape else _broadcast(out, shape)
    call.__name__ = getattr(fn, "__name__", "elementwise")
    call.__doc__ = fn.__doc__
    return call


def _multiply(x1, x2, /):
    # ones * b is b: the seed of a backward pass times a derivative (the VJP of sum(x * w) for
    # w is then sum(x), as by hand, with no product array held beside each chunk of x)
    for a, b in ((x1, x2), (x2, x1)):
        if _marked(a, _ONES) and isinstance(b, da.Array) and \
                np.broadcast_shapes(a.shape, b.shape) == b.shape and \
                np.result_type(a.dtype, b.dtype) == b.dtype:
            return b
    # A large array times a small factor (a Python number, a per-row scale, a lazy broadcast's
    # source) keeps the factor and its base (_SCALED): a matrix product of it scales the small
    # product instead (_DaskNamespace.matmul), as a hand-written gradient does. The VJP of
    # mean((X @ W - y) ** 2) multiplies the (n, B) residual by 2 and by the mean's 1 / n, two
    # passes over it and 1.35x the hand-written time of per-sample gradients under vmap; the
    # products left unused are never computed.
    for a, b in ((x1, x2), (x2, x1)):
        f = _small_factor(a, b)
        if f is not None:
            out = _lazy_multiply(x1, x2)
            if tuple(out.shape) == tuple(b.shape) and out.dtype == b.dtype:
                _mark(out, _SCALED, (f, b, _names(f, b)))
            return out
    return _lazy_multiply(x1, x2)


def _small_factor(a, b):
    """``a`` (a lazy broadcast's source for one) when ``b * a`` scales the Dask array ``b`` by a
    small factor of its dtype (see _multiply), else None."""
    if type(b) is not da.Array or any(s != s for s in b.shape):
        return None
    if type(a) in (int, float):
        return a if b.dtype.kind in "fc" else None
    if not isinstance(a, (da.Array, np.ndarray)):
        return None
    src = _source(a)
    shape = tuple(src.shape)
    if any(s != s for s in shape) or src.dtype != b.dtype or \
            _SMALL * _numel(src) > _numel(b) or \
            np.broadcast_shapes(shape, tuple(b.shape)) != tuple(b.shape):
        return None
    return src


def _names(*arrays):
    return tuple(getattr(a, "name", None) for a in arrays)


def _unscaled(x, axis):
    """``x`` as ``base * f1 * f2 ...`` (its _SCALED factors, each of size one along ``axis``):
    (base, [f1, f2, ...])."""
    factors = []
    while True:
        tag = _marked(x, _SCALED)
        if tag is None or _names(*tag[:2]) != tag[2]:   # (a factor or the base written since)
            return x, factors
        f, base, _ = tag
        shape = (1,) * (x.ndim - np.ndim(f)) + tuple(np.shape(f))
        if shape[axis] != 1:
            return x, factors
        factors.append(f)
        x = base


_lazy_multiply = _lazy(compat_dask.multiply)


def _add(x1, x2, /):
    # A slice's cotangent padded with zeros (_padded) plus another cotangent of the same array
    # (concat([x[:1], x, x[-1:]]): the edge's values twice) is the other one with the slice's
    # values added where they land, the chunks they miss passing through. Adding the padded
    # array itself is a pass over its zeros (and, its chunks cut at the slice, a re-split of
    # both): 2.5x the tasks and 1.35x the time of the hand-written gradient of edge padding.
    for a, b in ((x1, x2), (x2, x1)):
        pad = _marked(a, _PADDED)
        if pad is not None and type(b) is da.Array and tuple(a.shape) == tuple(b.shape) and \
                a.dtype == b.dtype:
            axis, start, v = pad
            stop = start + v.shape[axis]
            if stop == start or 2 * (stop - start) > b.shape[axis]:
                continue   # (most chunks get values, as for x[1:] or a moving average's
                           # slices: slicing b around them only adds tasks; an empty slice's
                           # zeros, chunked like x, chunk the sum like x, as they always did)

            def part(lo, hi):
                return b[(slice(None),) * axis + (slice(lo, hi),)]
            parts = [part(0, start), part(start, stop) + v, part(stop, b.shape[axis])]
            return da.concatenate([p for p in parts if p.shape[axis] > 0], axis=axis)
    return _lazy_add(x1, x2)


_lazy_add = _lazy(compat_dask.add)

# the elementwise functions that rules apply to cotangents: of one array (and parameters) and
# of several, where a cotangent meets the values
_ELEMENTWISE = frozenset(
    "negative positive conj real imag astype abs square sign "
    "add subtract divide pow maximum minimum atan2 hypot copysign logaddexp "
    "floor_divide remainder where equal not_equal less less_equal greater greater_equal "
    "nextafter clip".split())


_MASKS = collections.OrderedDict()   # dask name of a mask -> the positions it selects
_MASKS_KEPT = 16
_MASKS_LOCK = threading.Lock()


def _mask_positions(k):
    """The integer index arrays of the boolean dask mask ``k``: computed once per mask (the
    forward and the backward pass of ``x[mask]`` share them). A dask array's name identifies
    its computation, so a few recent masks are kept by name."""
    with _MASKS_LOCK:
        hit = _MASKS.get(k.name)
        if hit is not None:
            _MASKS.move_to_end(k.name)
            return hit
    hit = tuple(da.from_array(i) for i in np.nonzero(np.asarray(k.compute())))
    with _MASKS_LOCK:
        _MASKS[k.name] = hit
        while len(_MASKS) > _MASKS_KEPT:
            _MASKS.popitem(last=False)
    return hit


def _concrete_masks(key):
    """``key`` with its boolean masks replaced by the positions they select: their number is
    data-dependent, so this is the one place where building a graph computes something."""
    key = key if isinstance(key, tuple) else (key,)
    out = []
    for k in key:
        if _is_index_array(k) and not isinstance(k, bool) and str(k.dtype) == "bool":
            if isinstance(k, da.Array):
                out.extend(_mask_positions(k))
            else:
                out.extend(da.from_array(i) for i in np.nonzero(np.asarray(k)))
        else:
            out.append(k)
    return tuple(out)


def _flat_positions(shape, key):
    """The flat positions (into an array of ``shape``) that ``key`` selects, shaped like the
    selection, when the key is one integer array per axis (take_along_axis, the derivatives
    of sort): the broadcast index arrays' flat index, no gather. Else None."""
    key = key if isinstance(key, tuple) else (key,)
    if len(key) != len(shape) or not all(_is_index_array(k) and not isinstance(k, bool)
                                         and np.issubdtype(k.dtype, np.integer) for k in key):
        return None
    arrays = da.broadcast_arrays(*[da.asarray(k).astype(np.int64) for k in key])
    flat = None
    for a, s in zip(arrays, shape):
        a = da.where(a < 0, a + s, a)
        flat = a if flat is None else flat * s + a
    return flat


def _single_array(key):
    key = key if isinstance(key, tuple) else (key,)
    arrays = [k for k in key if _is_index_array(k)]
    return len(arrays) == 1 and not any(isinstance(k, int) or k is None for k in key) and \
        getattr(arrays[0], "ndim", 0) == 1


def _padded(base, key, v):
    """``v`` added at the basic ``key`` of ``zeros_like(base)``, as ``v`` concatenated with
    zeros chunked like ``base``; None for a key with a step other than one.

    The VJP of a slice (``x[1:]``, ``diff``, ``concat``, moving averages) scatters into zeros.
    Dask's ``__setitem__`` writes into the zeros chunk by chunk (a zeros chunk, then a copy
    with the values written: 1.6-2x the time and 2-2.4x the working memory of a hand-written
    gradient); padding is what a hand-written gradient does. The zeros take ``base``'s chunks
    (``da.pad`` chunks them like ``v``: one element per chunk for the VJP of ``x[:1]``), and
    ``v`` keeps its own, which are ``base``'s cut at the key when ``v`` is the cotangent of
    ``base[key]``. (Rechunking the result to ``base``'s chunks copied every element and
    doubled the working memory of ``diff``'s gradient.)"""
    key = key if isinstance(key, tuple) else (key,)
    used = sum(1 for k in key if k is not None and k is not Ellipsis)
    rest = (slice(None),) * (base.ndim - used)
    for i, k in enumerate(key):
        if k is Ellipsis:
            key = key[:i] + rest + key[i + 1:]
            break
    else:
        key = key + rest
    target, full, pads = [], [], []
    axis = 0
    for k in key:
        if k is None:   # (a new axis of size one in v, dropped here)
            target.append(1)
            continue
        size = base.shape[axis]
        if isinstance(k, slice):
            start, stop, step = k.indices(size)
            if step != 1:
                return None
            stop = max(start, stop)
            target.append(stop - start)
            full.append(stop - start)
            pads.append((start, size - stop))
        else:   # an int: an axis of size one in the padded value
            i = operator.index(k) % size
            full.append(1)
            pads.append((i, size - i - 1))
        axis += 1
    out = core = da.reshape(da.broadcast_to(da.asarray(v, dtype=base.dtype), tuple(target)),
                            tuple(full))
    for axis, (lo, hi) in enumerate(pads):
        size = base.shape[axis]

        def zeros(a, b):
            chunks = out.chunks[:axis] + (_pieces(base.chunks[axis], a, b),) + \
                out.chunks[axis + 1:]
            shape = out.shape[:axis] + (b - a,) + out.shape[axis + 1:]
            return [da.zeros(shape, chunks=chunks, dtype=out.dtype)] if b > a else []
        parts = zeros(0, lo) + [out] + zeros(size - hi, size)
        if len(parts) > 1:
            out = da.concatenate(parts, axis=axis)
    padded = [(axis, lo) for axis, (lo, hi) in enumerate(pads) if lo or hi]
    if len(padded) == 1:   # (see _add)
        _mark(out, _PADDED, padded[0] + (core,))
    return out


def _pieces(chunks, a, b):
    """The sizes of the chunks ``chunks`` (of one axis) cut to the range [a, b)."""
    out, start = [], 0
    for c in chunks:
        piece = min(start + c, b) - max(start, a)
        if piece > 0:
            out.append(piece)
        start += c
    return tuple(out)


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
    """array-api-compat's dask namespace with ``linalg`` completed (see _DaskLinalg) and lazy
    broadcasts (NOTE [lazy broadcasts])."""

    linalg = _DaskLinalg()

    def __getattr__(self, name):
        fn = getattr(compat_dask, name)
        if name == "multiply":
            fn = _multiply
        elif name == "add":
            fn = _add
        elif name in _ELEMENTWISE:
            fn = _lazy(fn)
        setattr(self, name, fn)   # looked up once
        return fn

    @staticmethod
    def ones_like(x, /, **kwargs):
        # A small array of ones (the seed of a backward pass, batched under vmap: one per
        # example) is one chunk: chunked like a batch in chunks of k, Dask's scheduler kept the
        # whole (n, B) residual of vmap(grad(least squares)) in memory (293 MiB against 58).
        if x.nbytes <= _ONE_CHUNK_BYTES and "chunks" not in kwargs:
            kwargs["chunks"] = -1
        return _mark(compat_dask.ones_like(x, **kwargs), _ONES)   # (see _multiply)

    @staticmethod
    def zeros_like(x, /, **kwargs):
        return _mark(compat_dask.zeros_like(x, **kwargs), _ZEROS)   # (see DaskBackend.index_add)

    # An identity (a Jacobian's whole basis: jacfwd's tangents, hessian's) times a matrix is
    # that matrix: the Hessian of least squares multiplied every chunk of X by an identity
    # (2.5x the time and memory of X.T @ X).
    @staticmethod
    def eye(n_rows, n_cols=None, /, *, k=0, **kwargs):
        out = compat_dask.eye(n_rows, n_cols, k=k, **kwargs)
        return _mark(out, _EYE) if k == 0 and n_cols in (None, n_rows) else out

    @staticmethod
    def matrix_transpose(x, /):
        out = compat_dask.matrix_transpose(x)
        return _mark(out, _EYE) if _marked(x, _EYE) else out

    @staticmethod
    def permute_dims(x, /, axes):
        out = compat_dask.permute_dims(x, axes)
        return _mark(out, _EYE) if _marked(x, _EYE) else out

    @staticmethod
    def matmul(x1, x2, /):
        dtype = np.result_type(x1.dtype, x2.dtype)
        if _marked(x2, _EYE) and x1.shape[-1] == x2.shape[0]:
            return x1 if x1.dtype == dtype else x1.astype(dtype)
        if _marked(x1, _EYE) and x2.ndim >= 1 and \
                x2.shape[-2 if x2.ndim > 1 else 0] == x1.shape[0]:
            return x2 if x2.dtype == dtype else x2.astype(dtype)
        if x1.ndim >= 2 and x2.ndim >= 2:
            # (f1 * b1) @ (b2 * f2) is (b1 @ b2) * f1 * f2 where f1 is one number per row of
            # b1 and f2 one per column of b2 (see _multiply)
            b1, f1 = _unscaled(x1, -1)
            b2, f2 = _unscaled(x2, -2)
            if f1 or f2:
                out = compat_dask.matmul(b1, b2)
                for f in f1 + f2:
                    out = out * f
                return out
        return compat_dask.matmul(x1, x2)

    @staticmethod
    def broadcast_to(x, /, shape):
        if tuple(x.shape) == tuple(shape):
            return x
        return _broadcast(x, shape)


_NAMESPACE = _DaskNamespace()


class DaskBackend(Backend):
    name = "dask"
    xp = _NAMESPACE
    array_types = (da.Array, _Broadcast)

    def _from_numpy(self, a, dtype, device):
        return da.from_array(a.astype(dtype) if dtype is not None else a)

    def with_part(self, z, v, imag):
        return da.map_blocks(set_complex_part, z, v, imag, dtype=z.dtype)

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
        # The transpose of a gather (the VJP of x[idx], take, take_along_axis): the flat
        # positions the key selects, then one bincount weighted by the values, O(n + k) (the
        # generic one-hot product is O(n * k)).
        key = _concrete_masks(key)
        if _is_basic_key(key) and not _has_negative_step(key):
            if _marked(base, _ZEROS):
                out = _padded(base, key, v)
                if out is not None:
                    return out
            return super().index_add(base, key, v)
        n = _numel(base)
        pos = _flat_positions(base.shape, key)
        if pos is None:
            pos = self._positions(base, key)[1]
        if _numel(pos) == 0 or n == 0:
            return base
        vals = da.broadcast_to(da.asarray(v, dtype=base.dtype), pos.shape)
        pos = da.reshape(pos, (-1,))
        vals = da.reshape(vals, (-1,)).rechunk(pos.chunks)

        def added(w):
            return da.bincount(pos, weights=w, minlength=n)
        if np.issubdtype(base.dtype, np.complexfloating):
            total = added(vals.real) + 1j * added(vals.imag)
        else:
            total = added(vals)
        total = da.reshape(total.astype(base.dtype), base.shape).rechunk(base.chunks)
        # (the gradient of a gather scatters into zeros: no pass to add them)
        return total if _marked(base, _ZEROS) else base + total

    def owned(self, x):
        # a gradient handed out is a plain Dask Array (a lazy broadcast's operators are arrayad's)
        if isinstance(x, _Broadcast):
            return da.Array(x.dask, x.name, x.chunks, meta=x._meta)
        return x

    def all_finite(self, x):
        return None   # (answering would compute the graph: NOTE [strong zeros] selects anyway)

    def lazy_repr(self, x):
        return repr(x)   # shape, dtype, chunks: Dask's own summary, which computes nothing

    def to_numpy(self, x):
        return np.asarray(x.compute())

    def default_device(self):
        return "cpu"

    def device_of(self, x):
        return "cpu"


def make():
    return DaskBackend()
