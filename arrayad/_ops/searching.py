"""Searching, sorting and set functions (argmax/argmin live with the reductions; where with the
manipulation functions).

Only ``sort`` is differentiable: the backend's sort, whose derivatives are those of a gather at
the sorting indices (``take_along_axis``). The rest return indices, counts or booleans.

``nonzero`` and the ``unique_*`` functions have data-dependent output shapes: under ``vmap`` each
batch element would have a different shape, so their batching rule raises (as torch.func does),
naming a fixed-size alternative. ``searchsorted`` and ``isin`` have static shapes and real rules.
"""

from collections import namedtuple

from ._docfill import reflow
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


_SORT_PARAMETERS = """Parameters
----------
x : array
    Input array (real; complex values sort by real part, then imaginary part, on NumPy).
axis : int, optional
    The axis to sort along (default: the last). torch's ``dim=`` is not accepted.
descending : bool, optional
    Sort from the largest to the smallest (default False).
stable : bool, optional
    Keep equal elements in their order in ``x`` (default True; False allows a faster sort
    where the backend has one)."""

_SORT_RAISES = """Raises
------
IndexError
    If ``axis`` is out of range for ``x`` (NumPy raises its ``AxisError``, which is both an
    ``IndexError`` and a ``ValueError``)."""

argsort_p = decl.primitive("argsort", _argsort_impl, batch=axis_batch(),
                           api="x, /, *, axis=-1, descending=False, stable=True", doc=f"""\
Indices that sort ``x`` along ``axis``: ``take_along_axis(x, argsort(x), axis=axis)`` is
``sort(x)``.

{_SORT_PARAMETERS}

Returns
-------
array
    Shaped like ``x``, of the default integer dtype (int64), on the backend of ``x`` (inside
    a transform, a value of that transform). With ``stable=True``, ties keep their order
    (also when descending). Not differentiable: integer results are constants to the
    transforms.

{_SORT_RAISES}

Examples
--------
>>> ad.argsort(ad.asarray([3., 1., 2.]))
tensor([1, 2, 0])
>>> ad.argsort(ad.asarray([3., 1., 2.]), descending=True)
tensor([0, 2, 1])
""")


def _sort_impl(xp, x, axis=-1, descending=False, stable=True):
    return xp.sort(x, axis=axis, descending=descending, stable=stable)


def _sort_order(x, axis, descending, stable):
    """The sorting indices of ``x`` (constants): the permutation the derivatives follow."""
    return ops.argsort(ops.stop_gradient(x), axis=axis, descending=descending, stable=stable)


# The values come from the backend's own sort, and only a derivative asks for the sorting
# indices: array-api-strict's no_x64 test device sorts floats but has no int64 for indices.
# The derivatives are those of a gather at the indices: the tangent gathered as x is, the
# cotangent sent back through the inverse permutation (a gather too, no scatter).
def _sort_jvp(t, ans, x, axis=-1, descending=False, stable=True):
    return ops.take_along_axis(t, _sort_order(x, axis, descending, stable), axis=axis)


def _sort_vjp(g, ans, x, axis=-1, descending=False, stable=True):
    inverse = ops.argsort(_sort_order(x, axis, descending, stable), axis=axis)
    return ops.take_along_axis(g, inverse, axis=axis)


def sort(x, /, *, axis=-1, descending=False, stable=True):
    return bind(sort_p, x, axis=axis, descending=descending, stable=stable)


sort_p = decl.primitive("sort", _sort_impl, vjp=(_sort_vjp,), reads=("x",), jvp=(_sort_jvp,),
                        batch=axis_batch(), public=sort)


sort.__doc__ = f"""``x`` sorted along ``axis``.

{_SORT_PARAMETERS}

Returns
-------
array
    Shaped like ``x``, of its backend and dtype (inside a transform, a value of that
    transform): the values only (torch's ``sort`` returns ``(values, indices)``; use
    ``argsort`` for the indices). Differentiable: a gather of ``x`` at the sorting indices,
    so each element's gradient is the cotangent at the place it was sorted to. Tied elements
    do not share the gradient (unlike ``max``'s): each output's cotangent goes to the one
    element sorted into its place (with ``stable=True``, equal elements keep their order).

{_SORT_RAISES}
ValueError
    If ``x`` is 0-d.

Examples
--------
>>> ad.sort(ad.asarray([3., 1., 2.]))
tensor([1., 2., 3.])
>>> ad.func.grad(lambda x: ad.sort(x)[0])(ad.asarray([3., 1., 2.]))
tensor([0., 1., 0.])
"""


# -- nonzero ---------------------------------------------------------------------------------------
def nonzero(x, /):
    """Indices of the non-zero (true) elements of ``x``, in row-major order.

    Returns
    -------
    tuple of arrays
        One 1-d index array per axis of ``x`` (``x[nonzero(x)]`` picks the elements), of the
        default integer dtype (int64), on the backend of ``x``. Their length depends on the
        data, so ``nonzero`` is not differentiable and cannot be batched.

    Raises
    ------
    ValueError
        If ``x`` is 0-d.
    RuntimeError
        Under ``vmap`` (the output shape would differ between batch elements); the message
        names fixed-size alternatives (``where``, ``argsort(x == 0, stable=True)``).

    Examples
    --------
    >>> ad.nonzero(ad.asarray([0., 1., 0., 2.]))
    (tensor([1, 3]),)
    """
    if ndim_of(x) == 0:
        raise ValueError("nonzero: x must have at least one dimension")
    return bind(nonzero_p, x)


nonzero_p = decl.primitive(
    "nonzero", lambda xp, x: tuple(xp.nonzero(x)), multiple_results=True, public=nonzero,
    value_shaped=True,
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
    return decl.primitive(name, impl, multiple_results=True, public=public, value_shaped=True,
                          batch=dynamic_shape_error(name, _UNIQUE_ALTERNATIVE))


# The unique values are elements of x: for float and complex input they are gathered from x at
# their first occurrences (unique_all's indices), so that they carry x's derivative (a value
# moves with the element it is; torch refuses, JAX returns zeros). Integer input, which has no
# derivative, takes each function's own primitive.

def _inexact(x):
    return is_inexact(dtype_of(x))


def _gathered(x, indices):
    return ops.take(ops.reshape(x, (-1,)), indices)


_UNIQUE_DOC = """{summary}

Parameters
----------
x : array
    Input array, of any shape (it is flattened).

Returns
-------
{returns}
    The unique values are sorted and 1-d (NaNs are distinct from each other and come last);
    indices and counts are of the default integer dtype (int64); all on the backend of ``x``.
    For a floating or complex ``x`` the values are gathered from ``x`` at their first
    occurrences, so they carry ``x``'s derivative there (torch refuses to differentiate
    ``unique``; JAX returns zeros).

Raises
------
RuntimeError
    Under ``vmap``: the number of unique values depends on the data (the message names a
    fixed-size alternative).

Examples
--------
{example}
"""


def _unique_doc(**parts):
    return reflow(_UNIQUE_DOC.format(**parts))


def unique_all(x, /):
    values, indices, inverse, counts = bind(unique_all_p, x)
    if _inexact(x):
        values = _gathered(x, indices)
    return UniqueAllResult(values, indices, inverse, counts)


def unique_counts(x, /):
    if _inexact(x):
        _, indices, _, counts = bind(unique_all_p, x, of="unique_counts")
        return UniqueCountsResult(_gathered(x, indices), counts)
    return UniqueCountsResult(*bind(unique_counts_p, x))


def unique_inverse(x, /):
    if _inexact(x):
        _, indices, inverse, _ = bind(unique_all_p, x, of="unique_inverse")
        return UniqueInverseResult(_gathered(x, indices), inverse)
    return UniqueInverseResult(*bind(unique_inverse_p, x))


def unique_values(x, /):
    if _inexact(x):
        return _gathered(x, bind(unique_all_p, x, of="unique_values")[1])
    return bind(unique_values_p, x)[0]


unique_all.__doc__ = _unique_doc(
    summary="The unique elements of ``x``, where each first occurs, where each element of ``x`` "
            "is among them, and how often each occurs.",
    returns="UniqueAllResult\n    A named tuple ``(values, indices, inverse_indices, counts)``: "
            "``x.reshape(-1)[indices]``\n    is ``values``, ``values[inverse_indices]`` (shaped "
            "like ``x``) is ``x``.",
    example=">>> r = ad.unique_all(ad.asarray([3., 1., 3., 2.]))\n"
            ">>> r.values, r.indices, r.counts\n"
            "(tensor([1., 2., 3.]), tensor([1, 3, 0]), tensor([1, 1, 2]))\n"
            ">>> r.inverse_indices\n"
            "tensor([2, 0, 2, 1])")
unique_counts.__doc__ = _unique_doc(
    summary="The unique elements of ``x`` and how often each occurs.",
    returns="UniqueCountsResult\n    A named tuple ``(values, counts)``.",
    example=">>> ad.unique_counts(ad.asarray([3., 1., 3., 2.]))\n"
            "UniqueCountsResult(values=tensor([1., 2., 3.]), counts=tensor([1, 1, 2]))")
unique_inverse.__doc__ = _unique_doc(
    summary="The unique elements of ``x`` and, for each element of ``x``, its index among them.",
    returns="UniqueInverseResult\n    A named tuple ``(values, inverse_indices)``: "
            "``values[inverse_indices]`` (shaped like ``x``) is ``x``.",
    example=">>> ad.unique_inverse(ad.asarray([3., 1., 3., 2.]))\n"
            "UniqueInverseResult(values=tensor([1., 2., 3.]), "
            "inverse_indices=tensor([2, 0, 2, 1]))")
unique_values.__doc__ = _unique_doc(
    summary="The unique elements of ``x``.",
    returns="array",
    example=">>> ad.unique_values(ad.asarray([3., 1., 3., 2.]))\n"
            "tensor([1., 2., 3.])\n"
            ">>> ad.func.grad(lambda x: ad.sum(ad.unique_values(x)))(ad.asarray([3., 1., 3.]))\n"
            "tensor([1., 1., 0.])")

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
    if backend_of(x1).name == "numpy" or not xp.isdtype(x1.dtype, "real floating"):
        return xp.searchsorted(x1, x2, **kw)
    # NaNs: the standard leaves their place unspecified; arrayad gives NumPy's answer on every
    # backend, NaN after +inf (where every backend's sort puts it). torch's binary search does
    # not: it puts a NaN value, and +inf with side='right', after the NaNs of x1. So x1's NaNs
    # become +inf for the search, and the values NaN and +inf are placed here.
    nans = xp.isnan(x1)
    x1 = xp.where(nans, xp.full_like(x1, float("inf")), x1)
    out = xp.searchsorted(x1, x2, **kw)
    if not xp.isdtype(x2.dtype, "real floating"):
        return out
    numbers = xp.zeros_like(out) + (x1.shape[-1] - xp.sum(xp.astype(nans, out.dtype)))
    if side == "left":                  # a NaN goes after every number of x1
        return xp.where(xp.isnan(x2), numbers, out)
    out = xp.where(x2 == float("inf"), numbers, out)    # +inf after the numbers, before NaNs
    return xp.where(xp.isnan(x2), xp.full_like(out, x1.shape[-1]), out)


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
    counts = ops.sum(ops.astype(below, ops.int64), axis=-1)               # (B, M)
    if dtype_of(v).kind == "f":     # a NaN value goes after the numbers of x1 (as unbatched)
        numbers = ops.sum(ops.astype(~ops.isnan(s), ops.int64), axis=-1, keepdims=True)
        after = numbers if side == "left" else ops.full_like(numbers, shape_of(s)[1])
        counts = ops.where(ops.isnan(flat[..., 0]), after, counts)
    return ops.reshape(counts, vshape), 0


def searchsorted(x1, x2, /, *, side="left", sorter=None):
    """Indices where the elements of ``x2`` would be inserted into the sorted 1-d ``x1`` to keep
    it sorted.

    Parameters
    ----------
    x1 : array
        A 1-d array, sorted ascending (or put in order by ``sorter``).
    x2 : array or Python scalar
        The values to place (a Python scalar since the 2025.12 standard).
    side : {'left', 'right'}, optional
        For a value equal to elements of ``x1``: 'left' (default) gives the index of the first
        of them, 'right' the index after the last.
    sorter : array, optional
        Integer indices that sort ``x1`` (``argsort(x1)``), for an unsorted ``x1``.

    Returns
    -------
    array
        Shaped like ``x2``, of the default integer dtype (int64), on the backend of ``x1``
        (inside a transform, a value of that transform). Not differentiable: integer results
        are constants to the transforms.

    Raises
    ------
    ValueError
        If ``side`` is neither 'left' nor 'right', or ``x1`` is not 1-d.
    TypeError
        If ``x1`` and ``x2`` are arrays of two backends.

    Examples
    --------
    >>> ad.searchsorted(ad.asarray([1., 2., 3.]), ad.asarray([2.5, 0.]))
    tensor([2, 0])
    >>> ad.searchsorted(ad.asarray([1., 2., 3.]), 2.0, side="right")
    tensor(2)
    """
    if side not in ("left", "right"):
        raise ValueError(f"searchsorted: side must be 'left' or 'right', not {side!r}")
    if isinstance(x2, PY_SCALARS):
        x2 = _scalar_like(x2, x1)
    args = (x1, x2) if sorter is None else (x1, x2, sorter)
    return bind(searchsorted_p, *args, side=side)


searchsorted_p = decl.primitive("searchsorted", _searchsorted_impl, batch=_searchsorted_batch,
                                public=searchsorted)


# -- isin: output shaped like x1 -------------------------------------------------------------------
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
    """Whether each element of ``x1`` occurs in ``x2``.

    Parameters
    ----------
    x1 : array or Python scalar
        The elements to look up.
    x2 : array or Python scalar
        The elements to look among (any shape: it is searched as a whole).
    invert : bool, optional
        Return whether each element does *not* occur (default False).

    Returns
    -------
    array
        A bool array shaped like ``x1``, on the arguments' backend (inside a transform, a value
        of that transform). Not differentiable.

    Raises
    ------
    TypeError
        If both arguments are Python scalars, or they are arrays of two backends.

    Examples
    --------
    >>> ad.isin(ad.asarray([1, 2, 3]), ad.asarray([2, 5]))
    tensor([False,  True, False])
    >>> ad.isin(ad.asarray([1, 2, 3]), 2, invert=True)
    tensor([ True, False,  True])
    """
    if isinstance(x1, PY_SCALARS) and isinstance(x2, PY_SCALARS):
        raise TypeError("isin: at least one of x1 and x2 must be an array")
    if isinstance(x1, PY_SCALARS):
        x1 = _scalar_like(x1, x2)
    if isinstance(x2, PY_SCALARS):
        x2 = _scalar_like(x2, x1)
    return bind(isin_p, x1, x2, invert=invert)


isin_p = decl.primitive("isin", _isin_impl, batch=_isin_batch, public=isin)
