"""Statistical and utility reductions: sum, prod, max, min, mean, var, std, cumulative_*, all, any,
argmax, argmin, count_nonzero, diff.

``mean``, ``var``, ``std`` and ``diff`` are composites of differentiable primitives, so they need
no rules of their own (``decl.composite``).
"""

from ._namespace import ops

from .._core._core import conj_if_complex, bind, shape_of
from .._dtypes import to_backend
from ._docfill import paragraph
from ._rules import (LINEAR, Declarations, arange_like, axis_batch, move_to_front, ndim_of,
                     normalize_axes, normalize_axis, per_primitive)

decl = Declarations(globals())


def expand_reduced(g, x, axis, keepdims):
    """Broadcast the cotangent of a reduction back to the shape of its input."""
    shape = shape_of(x)
    if not keepdims and axis is not None:   # (a full reduction's 0-d g broadcasts as it is)
        axes = normalize_axes(axis, len(shape))
        if axes:
            g = ops.expand_dims(g, axis=axes)
    return ops.broadcast_to(g, shape)


def _reduce_impl(name):
    def impl(xp, x, axis=None, keepdims=False, dtype=None):
        if dtype is None:
            return getattr(xp, name)(x, axis=axis, keepdims=keepdims)
        return getattr(xp, name)(x, axis=axis, keepdims=keepdims,
                                 dtype=to_backend(dtype, xp))
    return impl


# -- docstrings: the sections the reductions share, written once -----------------------------------
_REDUCTION_DOC = """{summary}

Parameters
----------
x : array
    Input array.
axis : {axis_type}, optional
{axis}
{params}keepdims : bool, optional
    Keep the reduced axes as axes of length one, so that the result broadcasts against ``x``.

Returns
-------
array
{returns}

Raises
------
TypeError
    If ``x`` is not an array (``None``, a string; lists and Python scalars are converted), or
    for a keyword the signature lacks (``dim=``: use ``axis=``).
IndexError
    If an axis is out of range for ``x`` (NumPy raises its ``AxisError``, which is both an
    ``IndexError`` and a ``ValueError``).
{raises}
Examples
--------
{example}
"""

_DTYPE_DOC = """dtype : dtype, optional
    The dtype of the result. By default a floating or complex ``x`` keeps its dtype, and
    integers and bools are widened to the default integer dtype of their signedness (int64,
    or uint64 for unsigned input).
"""


def reduction_doc(name, summary, *, returns, example, dtype=False, params="", raises="",
                  axis_type="int or tuple of ints",
                  axis="The axes to reduce (negative values count from the end); None, the "
                       "default, reduces all of them."):
    """The docstring of reduction ``name``: its own summary, result (with its derivative) and
    example around the parameter and error sections every reduction shares."""
    axis += (f" torch's ``dim=``/``keepdim=`` are accepted by the method form "
             f"(``x.{name}(dim=0, keepdim=True)``), not by this function.")
    returns += (" An array of the backend of ``x`` (inside a transform, a value of that "
                "transform), shaped like ``x`` without the reduced axes (with them of length "
                "one if ``keepdims``).")
    return _REDUCTION_DOC.format(summary=summary, example=example, raises=raises,
                                 params=(_DTYPE_DOC if dtype else "") + params,
                                 axis_type=axis_type,
                                 axis=paragraph(axis), returns=paragraph(returns))



def reduction(name, *, vjp=None, jvp=None, reads=None, with_dtype=True, doc=None,
              impl=None, batch=None):
    """A reduction over ``axis`` with the standard's signature; no ``vjp``: nondifferentiable.
    ``doc``: the keyword arguments of ``reduction_doc`` (or a finished docstring)."""
    if isinstance(doc, dict):
        doc = reduction_doc(name, dtype=with_dtype, **doc)
    return decl.primitive(
        name, impl or _reduce_impl(name), vjp=vjp, reads=reads, jvp=jvp,
        batch=batch or axis_batch(), differentiable=vjp is not None, doc=doc,
        api="x, /, *, axis=None, dtype=None, keepdims=False" if with_dtype
        else "x, /, *, axis=None, keepdims=False", omit_none=("dtype",) if with_dtype else (),
        fresh=impl is None)   # (the backend's reduction makes a new array)


# -- sum: linear ----------------------------------------------------------------------------------
sum_p = reduction(
    "sum", doc=dict(
        summary="Sum of the elements of ``x`` over ``axis`` (all axes by default).",
        returns="The sums; an empty axis sums to 0. The gradient is ones shaped like ``x`` "
                "(cast back to ``x``'s dtype when ``dtype`` differs).",
        example=">>> ad.sum(ad.asarray([1., 2., 3.]))\n"
                "tensor(6.)\n"
                ">>> ad.sum(ad.asarray([[1., 2.], [3., 4.]]), axis=0)\n"
                "tensor([4., 6.])\n"
                ">>> ad.func.grad(ad.sum)(ad.asarray([1., 2., 3.]))\n"
                "tensor([1., 1., 1.])"),
    vjp=(lambda g, ans, x, axis=None, keepdims=False, dtype=None:
         ops.astype(expand_reduced(g, x, axis, keepdims), x.dtype) if dtype is not None
         else expand_reduced(g, x, axis, keepdims),),
    reads=[""],   # (x's shape and dtype only, which a Meta keeps)
    jvp=LINEAR)


# -- prod: the gradient is the product of all the other elements, computed with exclusive
#    cumulative products so that zeros in x are handled exactly (no division by x).


def _others_product(x, axis):
    """For each element, the product of the other elements over the reduced axes."""
    nd = ndim_of(x)
    axes = normalize_axes(axis, nd)
    if not axes:
        return ops.ones_like(x)
    kept = tuple(a for a in range(nd) if a not in axes)
    shape = shape_of(x)
    moved = ops.permute_dims(x, kept + axes)
    flat = ops.reshape(moved, tuple(shape[a] for a in kept) + (-1,))
    left = ops.cumulative_prod(flat, axis=-1, include_initial=True)[..., :-1]
    right = ops.flip(
        ops.cumulative_prod(ops.flip(flat, axis=-1), axis=-1, include_initial=True)[..., :-1],
        axis=-1)
    others = ops.reshape(left * right, tuple(shape[a] for a in kept + axes))
    inverse = [0] * nd
    for i, a in enumerate(kept + axes):
        inverse[a] = i
    return ops.permute_dims(others, tuple(inverse))


prod_p = reduction(
    "prod", doc=dict(
        summary="Product of the elements of ``x`` over ``axis`` (all axes by default).",
        returns="The products; an empty axis gives 1. The derivative with respect to each "
                "element is the product of the others, computed without dividing by ``x``, "
                "so that it is exact where ``x`` has zeros.",
        example=">>> ad.prod(ad.asarray([2., 3., 4.]))\n"
                "tensor(24.)\n"
                ">>> ad.func.grad(ad.prod)(ad.asarray([2., 0., 3.]))\n"
                "tensor([0., 6., 0.])"),
    vjp=(lambda g, ans, x, axis=None, keepdims=False, dtype=None:
         # (g * conj(d): the holomorphic convention of every other rule, as torch)
         expand_reduced(g, x, axis, keepdims) * conj_if_complex(_others_product(x, axis)),),
    jvp=(lambda t, ans, x, axis=None, keepdims=False, dtype=None:
         sum(t * _others_product(x, axis), axis=axis, keepdims=keepdims),))


# -- max/min: ties share the gradient equally (as torch's amax) -----------------------------------
def _share(ans, x, axis, keepdims):
    mask = ops.astype(x == expand_reduced(ans, x, axis, keepdims), x.dtype)
    return mask / expand_reduced(sum(mask, axis=axis, keepdims=keepdims), x, axis, keepdims)


def _extremum(name, doc):
    """max or min; ``doc``: the keyword arguments of ``reduction_doc`` that differ."""
    doc = dict(doc, raises="ValueError\n    If a reduced axis is empty (no identity to return).\n")
    return reduction(
        name, with_dtype=False, doc=doc,
        vjp=(lambda g, ans, x, axis=None, keepdims=False:
             expand_reduced(g, x, axis, keepdims) * _share(ans, x, axis, keepdims),),
        jvp=(lambda t, ans, x, axis=None, keepdims=False:
             sum(t * _share(ans, x, axis, keepdims), axis=axis, keepdims=keepdims),))


_TIES = ("Where several elements tie for the {0}, they share the gradient equally (as torch's "
         "``amax``/``amin``; JAX does the same).")
max_p = _extremum("max", dict(
    summary="Largest element of ``x`` over ``axis`` (all axes by default).",
    returns="The maxima: the standard's ``max``, values only. Unlike ``torch.max(x, dim)``, "
            "which returns ``(values, indices)``, there is no tuple here (nor from "
            "``x.max(dim=0)``): use ``argmax`` for the indices. " + _TIES.format("maximum"),
    example=">>> ad.max(ad.asarray([[1., 5.], [3., 4.]]), axis=1)\n"
            "tensor([5., 4.])\n"
            ">>> ad.func.grad(ad.max)(ad.asarray([1., 3., 3.]))\n"
            "tensor([0.0000, 0.5000, 0.5000])"))
min_p = _extremum("min", dict(
    summary="Smallest element of ``x`` over ``axis`` (all axes by default).",
    returns="The minima: the standard's ``min``, values only (no ``(values, indices)`` "
            "tuple as from ``torch.min(x, dim)``; use ``argmin`` for the indices). "
            + _TIES.format("minimum"),
    example=">>> ad.min(ad.asarray([[1., 5.], [3., 4.]]), axis=1)\n"
            "tensor([1., 3.])\n"
            ">>> ad.func.grad(ad.min)(ad.asarray([2., 2., 3.]))\n"
            "tensor([0.5000, 0.5000, 0.0000])"))


# -- composites -----------------------------------------------------------------------------------
def _count(x, axis):
    n = 1
    shape = shape_of(x)
    for a in normalize_axes(axis, len(shape)):
        n *= shape[a]
    return n


@decl.composite
def mean(x, /, *, axis=None, keepdims=False):
    return sum(x, axis=axis, keepdims=keepdims) / _count(x, axis)


mean.__doc__ = reduction_doc(
    "mean", "Arithmetic mean of ``x`` over ``axis`` (all axes by default).",
    returns="The means, in the default floating dtype for integer ``x``; an empty axis gives "
            "nan. The gradient is ``1 / n`` for each of the ``n`` elements averaged.",
    example=">>> ad.mean(ad.asarray([1., 2., 3., 6.]))\n"
            "tensor(3.)\n"
            ">>> ad.func.grad(ad.mean)(ad.asarray([1., 2., 3., 4.]))\n"
            "tensor([0.2500, 0.2500, 0.2500, 0.2500])")


@decl.composite
def var(x, /, *, axis=None, correction=0.0, keepdims=False):
    centered = x - mean(x, axis=axis, keepdims=True)
    sq = ops.real(centered * ops.conj(centered)) if ops.isdtype(x.dtype, "complex floating") \
        else centered * centered
    return sum(sq, axis=axis, keepdims=keepdims) / (_count(x, axis) - correction)


def safe_sqrt(s):
    """sqrt with a zero (not nan) derivative at 0, as torch's norms and std: the derivative of
    a spread or a length that is 0 is taken as the subgradient 0 (the norms use it too)."""
    zero = s == 0
    return ops.where(zero, 0.0, ops.sqrt(ops.where(zero, 1.0, s)))


@decl.composite
def std(x, /, *, axis=None, correction=0.0, keepdims=False):
    return safe_sqrt(var(x, axis=axis, correction=correction, keepdims=keepdims))


_CORRECTION = """correction : float, optional
    Subtracted from the number of elements ``n`` in the divisor: 0, the default, gives the
    population statistic (divisor ``n``), 1 the sample one (divisor ``n - 1``, torch's default
    ``unbiased=True``, which only the method form ``x.{0}(unbiased=True)`` accepts).
"""
var.__doc__ = reduction_doc(
    "var", "Variance of ``x`` over ``axis``: the mean squared deviation from the mean.",
    params=_CORRECTION.format("var"),
    returns="The variances (of ``abs(x - mean) ** 2`` for complex ``x``: real). With "
            "``n - correction <= 0`` the divisor is zero or negative (inf or nan, no error).",
    example=">>> ad.var(ad.asarray([1., 3.]))\n"
            "tensor(1.)\n"
            ">>> ad.var(ad.asarray([1., 3.]), correction=1)\n"
            "tensor(2.)\n"
            ">>> ad.func.grad(ad.var)(ad.asarray([1., 3.]))\n"
            "tensor([-1.,  1.])")
std.__doc__ = reduction_doc(
    "std", "Standard deviation of ``x`` over ``axis``: the square root of ``var``.",
    params=_CORRECTION.format("std"),
    returns="The standard deviations. Where all the elements are equal (``std == 0``, "
            "where it is not differentiable) the gradient is 0, as torch's (JAX's is nan).",
    example=">>> ad.std(ad.asarray([1., 3.]))\n"
            "tensor(1.)")


@decl.composite
def diff(x, /, *, axis=-1, n=1, prepend=None, append=None):
    """The ``n``-th discrete difference of ``x`` along ``axis``: ``x[1:] - x[:-1]``, ``n`` times.

    Parameters
    ----------
    x : array
        Input array, at least 1-d.
    axis : int, optional
        The axis along which to take differences (default: the last).
    n : int, optional
        How many times to take differences (default 1; ``n <= 0`` returns ``x`` unchanged).
    prepend, append : array, optional
        Arrays joined to ``x`` along ``axis`` before differencing (their other axes must match
        those of ``x``).

    Returns
    -------
    array
        Shaped like ``x`` with ``axis`` shorter by ``n`` (empty once ``n`` reaches its length),
        of the backend and dtype of ``x`` (inside a transform, a value of that transform). A
        composite of slicing and subtraction: its derivatives come from theirs.

    Raises
    ------
    IndexError
        If ``axis`` is out of range for ``x`` (a 0-d ``x`` has no axis to difference).
    ValueError
        If ``prepend`` or ``append`` does not match the shape of ``x`` off ``axis`` (NumPy's
        ``AxisError`` if its number of dimensions differs).

    Examples
    --------
    >>> ad.diff(ad.asarray([1., 4., 9., 16.]))
    tensor([3., 5., 7.])
    >>> ad.diff(ad.asarray([1., 4., 9., 16.]), n=2)
    tensor([2., 2.])
    """
    axis = normalize_axis(axis, ndim_of(x))
    parts = [p for p in (prepend, x, append) if p is not None]
    if len(parts) > 1:
        x = ops.concat(parts, axis=axis)
    for _ in range(n):
        length = shape_of(x)[axis]
        lo = (slice(None),) * axis + (slice(1, length), ...)
        hi = (slice(None),) * axis + (slice(0, length - 1), ...)
        x = x[lo] - x[hi]
    return x


# -- cumulative sums and products -----------------------------------------------------------------
def _cum_impl(name):
    def impl(xp, x, axis=None, dtype=None, include_initial=False):
        kw = {"axis": axis, "include_initial": include_initial}
        if dtype is not None:
            kw["dtype"] = to_backend(dtype, xp)
        return getattr(xp, name)(x, **kw)
    return impl


def _cum_axis(x, axis):
    return 0 if axis is None else normalize_axis(axis, ndim_of(x))




def _reverse_cumsum(g, axis):
    return ops.flip(ops.cumulative_sum(ops.flip(g, axis=axis), axis=axis), axis=axis)


def _cumsum_vjp(g, ans, x, axis=None, dtype=None, include_initial=False):
    ax = _cum_axis(x, axis)
    if include_initial:
        # out[k] = sum(x[:k]); x[j] feeds out[j+1:]
        g = g[(slice(None),) * ax + (slice(1, None), ...)]
    return _reverse_cumsum(g, ax)


def cumulative_sum(x, /, *, axis=None, dtype=None, include_initial=False):
    if axis is None and ndim_of(x) == 1:
        axis = 0   # an explicit axis, so that the batching rule shifts it (None means "all")
    return bind(cumsum_p, x, axis=axis, dtype=dtype, include_initial=include_initial)


cumsum_p = decl.primitive("cumulative_sum", _cum_impl("cumulative_sum"), vjp=(_cumsum_vjp,),
                          jvp=LINEAR, batch=axis_batch(), public=cumulative_sum)




def _cumprod_parts(x, ax):
    """D[..., k, j] = d out[k] / d x[j] = prod(x[:j]) * prod(x[j+1:k+1]) for j <= k, else 0.

    Written without dividing by x, so zeros in x are exact: the left factor is an exclusive
    cumulative product; the right one is, for each j, a cumulative product of x with the entries
    up to j replaced by one (O(n^2) memory along the axis).
    """
    n = shape_of(x)[ax]
    xm = ops.moveaxis(x, ax, -1)                                         # (..., n) over i
    left = ops.cumulative_prod(xm, axis=-1, include_initial=True)[..., :-1]  # (..., j)
    idx = arange_like(x, n)
    after_j = ops.reshape(idx, (1, n)) > ops.reshape(idx, (n, 1))         # [j, i]: i > j
    masked = ops.where(after_j, ops.expand_dims(xm, axis=-2), 1.0)        # (..., j, i)
    right = ops.cumulative_prod(masked, axis=-1)                         # (..., j, k)
    lower = ops.reshape(idx, (n, 1)) <= ops.reshape(idx, (1, n))          # [j, k]: j <= k
    d = ops.where(lower, ops.expand_dims(left, axis=-1) * right, 0.0)     # (..., j, k)
    return ops.matrix_transpose(d)                                       # (..., k, j)


def _cumprod_vjp(g, ans, x, axis=None, dtype=None, include_initial=False):
    ax = _cum_axis(x, axis)
    if include_initial:
        g = g[(slice(None),) * ax + (slice(1, None), ...)]
    d = conj_if_complex(_cumprod_parts(x, ax))          # (..., k, j), conj: as prod's
    gm = ops.expand_dims(ops.moveaxis(g, ax, -1), axis=-1)  # (..., k, 1)
    return ops.moveaxis(sum(gm * d, axis=-2), -1, ax)


def _cumprod_jvp(t, ans, x, axis=None, dtype=None, include_initial=False):
    ax = _cum_axis(x, axis)
    d = _cumprod_parts(x, ax)                           # (..., k, j)
    tm = ops.expand_dims(ops.moveaxis(t, ax, -1), axis=-2)  # (..., 1, j)
    out = ops.moveaxis(sum(d * tm, axis=-1), -1, ax)
    if include_initial:
        # a zero slab of length 1 along ax (a sum over ax: also when ax has length 0)
        zero = sum(ops.zeros_like(out), axis=ax, keepdims=True)
        out = ops.concat([zero, out], axis=ax)
    return out


def cumulative_prod(x, /, *, axis=None, dtype=None, include_initial=False):
    if axis is None and ndim_of(x) == 1:
        axis = 0   # an explicit axis, so that the batching rule shifts it (None means "all")
    return bind(cumprod_p, x, axis=axis, dtype=dtype, include_initial=include_initial)


_CUMULATIVE_DOC = """Cumulative {what} of ``x`` along ``axis``: element ``k`` is the {what} of
``x[..., :k + 1]`` along it.

Parameters
----------
x : array
    Input array.
axis : int, optional
    The axis to accumulate along; it may be omitted only for a 0-d or 1-d ``x``.
dtype : dtype, optional
    The dtype of the result; by default as ``{reduction}``'s (floating and complex ``x`` keep
    their dtype, integers and bools are widened to int64, or uint64 if unsigned).
include_initial : bool, optional
    Start with the empty {what} ({identity}), so that the result is one longer along ``axis``.

Returns
-------
array
    Shaped like ``x`` (one longer along ``axis`` if ``include_initial``; a 0-d ``x`` gives a
    1-d result), of the backend of ``x`` (inside a transform, a value of that transform).
    {derivative}

Raises
------
ValueError
    If ``axis`` is omitted for an ``x`` of more than one dimension.
IndexError
    If ``axis`` is out of range for ``x`` (NumPy raises its ``AxisError``, which is both an
    ``IndexError`` and a ``ValueError``).

Examples
--------
{example}
"""
cumulative_sum.__doc__ = _CUMULATIVE_DOC.format(
    what="sum", reduction="sum", identity="0",
    derivative="The gradient of ``sum(cumulative_sum(x))`` counts, for each element, the "
               "outputs it\n    enters: a reversed cumulative sum of the cotangent.",
    example=">>> ad.cumulative_sum(ad.asarray([1., 2., 3.]))\n"
            "tensor([1., 3., 6.])\n"
            ">>> ad.cumulative_sum(ad.asarray([1., 2., 3.]), include_initial=True)\n"
            "tensor([0., 1., 3., 6.])\n"
            ">>> ad.func.grad(lambda x: ad.sum(ad.cumulative_sum(x)))(ad.asarray([1., 2., 3.]))\n"
            "tensor([3., 2., 1.])")
cumulative_prod.__doc__ = _CUMULATIVE_DOC.format(
    what="product", reduction="prod", identity="1",
    derivative="The derivatives are products of the other elements, computed without "
               "dividing by ``x``:\n    exact where ``x`` has zeros (memory grows as the "
               "square of the axis' length).",
    example=">>> ad.cumulative_prod(ad.asarray([1., 2., 3.]))\n"
            "tensor([1., 2., 6.])\n"
            ">>> ad.func.grad(lambda x: ad.sum(ad.cumulative_prod(x)))(ad.asarray([2., 0., 3.]))\n"
            "tensor([1., 8., 0.])")


cumprod_p = decl.primitive("cumulative_prod", _cum_impl("cumulative_prod"),
                           vjp=(_cumprod_vjp,), jvp=(_cumprod_jvp,), batch=axis_batch(),
                           public=cumulative_prod)


# -- not differentiable: boolean and index results ------------------------------------------------
def _count_nonzero_impl(xp, x, axis=None, keepdims=False):
    if axis == ():
        # no axis to reduce (vmap of a 0-d input): array-api-compat's torch counts over all axes
        return xp.astype(x != 0, xp.int64)
    return xp.count_nonzero(x, axis=axis, keepdims=keepdims)


_NOT_DIFFERENTIABLE = ("Not differentiable: {0} results are constants to the transforms (no "
                       "gradient flows through them).")
all_p = reduction("all", with_dtype=False, doc=dict(
    summary="Whether every element of ``x`` along ``axis`` is true (non-zero).",
    returns="A bool array; an empty axis gives True. " + _NOT_DIFFERENTIABLE.format("bool"),
    example=">>> ad.all(ad.asarray([True, False]))\n"
            "tensor(False)\n"
            ">>> ad.all(ad.asarray([[1., 2.], [0., 3.]]), axis=1)\n"
            "tensor([ True, False])"))
any_p = reduction("any", with_dtype=False, doc=dict(
    summary="Whether any element of ``x`` along ``axis`` is true (non-zero).",
    returns="A bool array; an empty axis gives False. " + _NOT_DIFFERENTIABLE.format("bool"),
    example=">>> ad.any(ad.asarray([True, False]))\n"
            "tensor(True)\n"
            ">>> ad.any(ad.asarray([[0., 0.], [0., 3.]]), axis=1)\n"
            "tensor([False,  True])"))
count_nonzero_p = reduction("count_nonzero", impl=_count_nonzero_impl, with_dtype=False, doc=dict(
    summary="Number of non-zero elements of ``x`` along ``axis``.",
    returns="The counts, of the default integer dtype (int64). "
            + _NOT_DIFFERENTIABLE.format("integer"),
    example=">>> ad.count_nonzero(ad.asarray([0., 1., 2.]))\n"
            "tensor(2)"))


def _arg_impl(name):
    def impl(xp, x, axis=None, keepdims=False):
        return getattr(xp, name)(x, axis=axis, keepdims=keepdims)
    return impl


@per_primitive
def _batch_arg(p):
    # axis=None indexes the flattened array: flatten the logical dims first.
    def rule(args, dims, axis=None, keepdims=False):
        x = move_to_front(args[0], dims[0])
        nd = ndim_of(x) - 1
        if axis is None:
            b = shape_of(x)[0]
            out = bind(p, ops.reshape(x, (b, -1)), axis=1, keepdims=False)
            if keepdims:
                out = ops.reshape(out, (b,) + (1,) * nd)
            return out, 0
        return bind(p, x, axis=normalize_axis(axis, nd) + 1, keepdims=keepdims), 0
    return rule


def _arg_doc(which, example):
    return dict(
        summary=f"Index of the {which} element of ``x`` along ``axis``.",
        axis_type="int",
        axis="The axis to search (negative values count from the end); None, the default, "
             "searches the flattened array and returns an index into it.",
        returns="The indices, of the default integer dtype (int64); of ties, the first. "
                + _NOT_DIFFERENTIABLE.format("integer"),
        raises="TypeError\n    If ``axis`` is a tuple (one axis only).\n"
               "ValueError\n    If the searched axis is empty.\n",
        example=example)


argmax_p = reduction("argmax", impl=_arg_impl("argmax"), batch=_batch_arg, with_dtype=False,
                     doc=_arg_doc("largest", ">>> ad.argmax(ad.asarray([1., 3., 3.]))\n"
                                             "tensor(1)\n"
                                             ">>> ad.argmax(ad.asarray([[1., 5.], [3., 4.]]), "
                                             "axis=0)\n"
                                             "tensor([1, 0])"))
argmin_p = reduction("argmin", impl=_arg_impl("argmin"), batch=_batch_arg, with_dtype=False,
                     doc=_arg_doc("smallest", ">>> ad.argmin(ad.asarray([[1., 3.], [0., 2.]]))\n"
                                              "tensor(2)"))
