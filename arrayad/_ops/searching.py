"""Searching, sorting and set functions (argmax/argmin live with the reductions; where with the
manipulation functions).

Only ``sort`` is differentiable: it is a gather at the sorting indices (``take_along_axis``), so its
derivative comes from indexing. The rest return indices, counts or booleans.

``nonzero`` and the ``unique_*`` functions have data-dependent output shapes: under ``vmap`` each
batch element would have a different shape, so their batching rule raises (as torch.func does),
naming a fixed-size alternative. ``searchsorted`` and ``isin`` have static shapes and real rules.
"""

from collections import namedtuple

from ._namespace import ops

from .._core._core import bind, dtype_of, shape_of
from ._rules import (PY_SCALARS, Declarations, axis_batch, constant_like, materialize_batch,
                     move_to_front, ndim_of)
from .._dtypes import is_inexact, to_backend
from ..backends import backend_of

decl = Declarations(globals())


def dynamic_shape_error(name, alternative):
    """The error of a batching rule for an operation whose output shape depends on the data."""
    def rule(args, dims, of=None, **params):
        raise RuntimeError(
            f"vmap: {of or name} returns an array whose shape depends on the values of its input, "
            f"which can differ between batch elements. We do not support batching operators "
            f"that can output dynamic shape. {alternative}")
    return rule


# -- argsort / sort --------------------------------------------------------------------------------
def _argsort_impl(xp, x, axis=-1, descending=False, stable=True):
    return xp.argsort(x, axis=axis, descending=descending, stable=stable)


argsort_p = decl.primitive("argsort", _argsort_impl, batch=axis_batch(),
                           api="x, /, *, axis=-1, descending=False, stable=True",
                           doc="Indices that sort ``x`` along ``axis``.")


@decl.composite
def sort(x, /, *, axis=-1, descending=False, stable=True):
    """``x`` sorted along ``axis`` (differentiable: a gather at the sorting indices)."""
    idx = argsort(ops.stop_gradient(x), axis=axis, descending=descending, stable=stable)
    return ops.take_along_axis(x, idx, axis=axis)


# -- nonzero ---------------------------------------------------------------------------------------
def nonzero(x, /):
    """Indices of the non-zero elements of ``x``: one index array per axis."""
    if ndim_of(x) == 0:
        raise ValueError("nonzero: x must have at least one dimension")
    return bind(nonzero_p, x)


nonzero_p = decl.primitive(
    "nonzero", lambda xp, x: tuple(xp.nonzero(x)), multiple_results=True, public=nonzero,
    batch=dynamic_shape_error(
        "nonzero", "Use a fixed-size alternative: where(x != 0, ...) to select elementwise, or "
        "argsort(x == 0, stable=True) to put the indices of the non-zero elements first."))


# -- unique_* --------------------------------------------------------------------------------------
UniqueAllResult = namedtuple("UniqueAllResult", ["values", "indices", "inverse_indices", "counts"])
UniqueCountsResult = namedtuple("UniqueCountsResult", ["values", "counts"])
UniqueInverseResult = namedtuple("UniqueInverseResult", ["values", "inverse_indices"])

_UNIQUE_ALTERNATIVE = (
    "Use a fixed-size alternative: sort(x) and a mask of the first occurrences "
    "(concat([[True], diff(sorted) != 0])), then where() with that mask.")


def _unique(public, n_out):
    name = public.__name__

    def impl(xp, x, of=None):   # (of: the public function that asked, for the vmap error)
        out = getattr(backend_of(x), name)(x)
        return tuple(out) if n_out > 1 else (out,)
    return decl.primitive(name, impl, multiple_results=True, public=public,
                          batch=dynamic_shape_error(name, _UNIQUE_ALTERNATIVE))


# The unique values are elements of x: for float and complex input they are gathered from x at
# their first occurrences (unique_all's indices), so that they carry x's derivative (a value
# moves with the element it is; torch refuses, JAX returns zeros). Integer input, which has no
# derivative, takes each function's own primitive.

def _inexact(x):
    return is_inexact(dtype_of(x))


def _gathered(x, indices):
    return ops.take(ops.reshape(x, (-1,)), indices)


def unique_all(x, /):
    """Unique elements of ``x`` with the index of their first occurrence, the inverse indices
    (shaped like ``x``) and their counts. NaNs are distinct from each other."""
    values, indices, inverse, counts = bind(unique_all_p, x)
    if _inexact(x):
        values = _gathered(x, indices)
    return UniqueAllResult(values, indices, inverse, counts)


def unique_counts(x, /):
    """Unique elements of ``x`` and how often each occurs."""
    if _inexact(x):
        _, indices, _, counts = bind(unique_all_p, x, of="unique_counts")
        return UniqueCountsResult(_gathered(x, indices), counts)
    return UniqueCountsResult(*bind(unique_counts_p, x))


def unique_inverse(x, /):
    """Unique elements of ``x`` and, for each element of ``x``, its index among them."""
    if _inexact(x):
        _, indices, inverse, _ = bind(unique_all_p, x, of="unique_inverse")
        return UniqueInverseResult(_gathered(x, indices), inverse)
    return UniqueInverseResult(*bind(unique_inverse_p, x))


def unique_values(x, /):
    """Unique elements of ``x`` (sorted, one-dimensional)."""
    if _inexact(x):
        return _gathered(x, bind(unique_all_p, x, of="unique_values")[1])
    return bind(unique_values_p, x)[0]


unique_all_p = _unique(unique_all, 4)
unique_counts_p = _unique(unique_counts, 2)
unique_inverse_p = _unique(unique_inverse, 2)
unique_values_p = _unique(unique_values, 1)


def _scalar_like(s, x):
    """A Python scalar as a 0-d array on the backend of ``x``, with its dtype when the kinds
    agree (a float into an integer array keeps the default float dtype)."""
    dt = dtype_of(x)
    fits = (isinstance(s, bool) and dt.kind == "b") or \
        (isinstance(s, int) and not isinstance(s, bool) and dt.kind in "iufc") or \
        (isinstance(s, float) and is_inexact(dt)) or (isinstance(s, complex) and dt.kind == "c")
    return constant_like(x, lambda xp: xp.asarray(s, dtype=to_backend(dt, xp) if fits else None))


# -- searchsorted: output shaped like x2, so a real batching rule ---------------------------------
def _searchsorted_impl(xp, x1, x2, *sorter, side="left"):
    kw = {"side": side}
    if sorter:
        kw["sorter"] = sorter[0]
    return xp.searchsorted(x1, x2, **kw)


def _searchsorted_batch(args, dims, side="left"):
    x1, x2 = args[0], args[1]
    if dims[0] is None and (len(args) < 3 or dims[2] is None):
        # Only the values are batched: the output is shaped like x2, batch dim included.
        return bind(searchsorted_p, *args, side=side), dims[1]
    # Batched sorted arrays: count, per batch element, the entries below each value (strictly
    # below for side='left', at or below for 'right') - what a binary search finds, in O(n*m).
    size = shape_of(x1)[dims[0]] if dims[0] is not None else shape_of(args[2])[dims[2]]
    s = materialize_batch(x1, dims[0], size)                      # (B, n)
    if len(args) > 2:
        s = ops.take_along_axis(s, materialize_batch(args[2], dims[2], size), axis=1)
    v = materialize_batch(x2, dims[1], size)                      # (B, *S)
    vshape = shape_of(v)
    flat = ops.reshape(v, (size, -1, 1))
    below = (ops.expand_dims(s, axis=1) < flat) if side == "left" else \
        (ops.expand_dims(s, axis=1) <= flat)
    counts = ops.sum(ops.astype(below, ops.int64), axis=-1)
    return ops.reshape(counts, vshape), 0


def searchsorted(x1, x2, /, *, side="left", sorter=None):
    """Indices where the elements of ``x2`` would be inserted into the sorted 1-d ``x1`` (sorted
    by ``sorter`` when given) to keep it sorted. ``x2`` may be a Python scalar (2025.12)."""
    if side not in ("left", "right"):
        raise ValueError(f"searchsorted: side must be 'left' or 'right', not {side!r}")
    if isinstance(x2, PY_SCALARS):
        x2 = _scalar_like(x2, x1)
    args = (x1, x2) if sorter is None else (x1, x2, sorter)
    return bind(searchsorted_p, *args, side=side)


searchsorted_p = decl.primitive("searchsorted", _searchsorted_impl, batch=_searchsorted_batch,
                                public=searchsorted)


# -- isin: output shaped like x1 ---------------------------------------------------------------------
def _isin_impl(xp, x1, x2, invert=False):
    fn = getattr(xp, "isin", None)
    if fn is not None:
        return fn(x1, x2, invert=invert)
    # Standard functions only: compare every element of x1 with every element of x2.
    hit = xp.any(xp.reshape(x1, tuple(x1.shape) + (1,)) == xp.reshape(x2, (-1,)), axis=-1)
    return xp.logical_not(hit) if invert else hit


def _isin_batch(args, dims, invert=False):
    x1, x2 = args
    if dims[1] is None:
        # Elementwise in x1: its batch dimension is just another axis.
        return bind(isin_p, x1, x2, invert=invert), dims[0]
    size = shape_of(x2)[dims[1]]
    a = materialize_batch(x1, dims[0], size)                      # (B, *S)
    b = ops.reshape(move_to_front(x2, dims[1]), (size, -1))        # (B, m)
    ashape = shape_of(a)
    b = ops.reshape(b, (size,) + (1,) * (len(ashape) - 1) + (shape_of(b)[1],))
    hit = ops.any(ops.expand_dims(a, axis=-1) == b, axis=-1)
    return (ops.logical_not(hit) if invert else hit), 0


def isin(x1, x2, /, *, invert=False):
    """Whether each element of ``x1`` occurs in ``x2`` (``invert=True``: does not occur).
    Either argument may be a Python scalar."""
    if isinstance(x1, PY_SCALARS) and isinstance(x2, PY_SCALARS):
        raise TypeError("isin: at least one of x1 and x2 must be an array")
    if isinstance(x1, PY_SCALARS):
        x1 = _scalar_like(x1, x2)
    if isinstance(x2, PY_SCALARS):
        x2 = _scalar_like(x2, x1)
    return bind(isin_p, x1, x2, invert=invert)


isin_p = decl.primitive("isin", _isin_impl, batch=_isin_batch, public=isin)
