"""Statistical and utility reductions: sum, prod, max, min, mean, var, std, cumulative_*, all, any,
argmax, argmin, count_nonzero, diff.

``mean``, ``var``, ``std`` and ``diff`` are composites of differentiable primitives, so they need
no rules of their own (listed in ``COMPOSITES``).
"""

import arrayad as ad

from .._core._core import bind, shape_of
from .. import _dtypes
from ._rules import (arange_like, batch_axis_params, defjvp, defvjp, move_to_front, ndim_of, normalize_axes,
                     normalize_axis, nondifferentiable, primitive)

__all__ = ["sum", "prod", "max", "min", "mean", "var", "std", "cumulative_sum", "cumulative_prod",
           "all", "any", "argmax", "argmin", "count_nonzero", "diff"]
PRIMS = {}
COMPOSITES = {"mean", "var", "std", "diff"}


def expand_reduced(g, x, axis, keepdims):
    """Broadcast the cotangent of a reduction back to the shape of its input."""
    shape = shape_of(x)
    if not keepdims and axis is not None:   # (a full reduction's 0-d g broadcasts as it is)
        axes = normalize_axes(axis, len(shape))
        if axes:
            g = ad.expand_dims(g, axis=axes)
    return ad.broadcast_to(g, shape)


def _reduce_impl(name):
    def impl(xp, x, axis=None, keepdims=False, dtype=None):
        if dtype is None:
            return getattr(xp, name)(x, axis=axis, keepdims=keepdims)
        return getattr(xp, name)(x, axis=axis, keepdims=keepdims,
                                 dtype=_dtypes.to_backend(dtype, xp))
    return impl


# -- sum: linear ----------------------------------------------------------------------------------
sum_p = primitive("sum", _reduce_impl("sum"))
sum_p.batch = batch_axis_params(sum_p)
defvjp(sum_p, lambda g, ans, x, axis=None, keepdims=False, dtype=None:
       ad.astype(expand_reduced(g, x, axis, keepdims), x.dtype) if dtype is not None
       else expand_reduced(g, x, axis, keepdims),
       reads=[""])   # (x's shape and dtype only, which a Meta keeps)
defjvp(sum_p, lambda t, ans, x, **params: bind(sum_p, t, **params))
PRIMS["sum"] = sum_p


def sum(x, /, *, axis=None, dtype=None, keepdims=False):
    """Sum of ``x`` over ``axis`` (all axes by default)."""
    if dtype is None:
        return bind(sum_p, x, axis=axis, keepdims=keepdims)
    return bind(sum_p, x, axis=axis, keepdims=keepdims, dtype=dtype)


# -- prod: the gradient is the product of all the other elements, computed with exclusive
#    cumulative products so that zeros in x are handled exactly (no division by x).
prod_p = primitive("prod", _reduce_impl("prod"))
prod_p.batch = batch_axis_params(prod_p)


def _others_product(x, axis):
    """For each element, the product of the other elements over the reduced axes."""
    nd = ndim_of(x)
    axes = normalize_axes(axis, nd)
    if not axes:
        return ad.ones_like(x)
    kept = tuple(a for a in range(nd) if a not in axes)
    shape = shape_of(x)
    moved = ad.permute_dims(x, kept + axes)
    flat = ad.reshape(moved, tuple(shape[a] for a in kept) + (-1,))
    left = ad.cumulative_prod(flat, axis=-1, include_initial=True)[..., :-1]
    right = ad.flip(ad.cumulative_prod(ad.flip(flat, axis=-1), axis=-1, include_initial=True)[..., :-1],
                    axis=-1)
    others = ad.reshape(left * right, tuple(shape[a] for a in kept + axes))
    inverse = [0] * nd
    for i, a in enumerate(kept + axes):
        inverse[a] = i
    return ad.permute_dims(others, tuple(inverse))


defvjp(prod_p, lambda g, ans, x, axis=None, keepdims=False, dtype=None:
       expand_reduced(g, x, axis, keepdims) * _others_product(x, axis))
defjvp(prod_p, lambda t, ans, x, axis=None, keepdims=False, dtype=None:
       sum(t * _others_product(x, axis), axis=axis, keepdims=keepdims))
PRIMS["prod"] = prod_p


def prod(x, /, *, axis=None, dtype=None, keepdims=False):
    """Product of ``x`` over ``axis``."""
    if dtype is None:
        return bind(prod_p, x, axis=axis, keepdims=keepdims)
    return bind(prod_p, x, axis=axis, keepdims=keepdims, dtype=dtype)


# -- max/min: ties share the gradient equally (as torch's amax) -----------------------------------
def _extremum(name):
    p = primitive(name, _reduce_impl(name))
    p.batch = batch_axis_params(p)

    def share(ans, x, axis, keepdims):
        mask = ad.astype(x == expand_reduced(ans, x, axis, keepdims), x.dtype)
        return mask / expand_reduced(sum(mask, axis=axis, keepdims=keepdims), x, axis, keepdims)

    defvjp(p, lambda g, ans, x, axis=None, keepdims=False:
           expand_reduced(g, x, axis, keepdims) * share(ans, x, axis, keepdims))
    defjvp(p, lambda t, ans, x, axis=None, keepdims=False:
           sum(t * share(ans, x, axis, keepdims), axis=axis, keepdims=keepdims))
    PRIMS[name] = p
    return p


max_p = _extremum("max")
min_p = _extremum("min")


def max(x, /, *, axis=None, keepdims=False):
    """Largest element of ``x`` over ``axis`` (the standard's max: values only, no indices)."""
    return bind(max_p, x, axis=axis, keepdims=keepdims)


def min(x, /, *, axis=None, keepdims=False):
    """Smallest element of ``x`` over ``axis``."""
    return bind(min_p, x, axis=axis, keepdims=keepdims)


# -- composites -----------------------------------------------------------------------------------
def _count(x, axis):
    n = 1
    shape = shape_of(x)
    for a in normalize_axes(axis, len(shape)):
        n *= shape[a]
    return n


def mean(x, /, *, axis=None, keepdims=False):
    """Arithmetic mean of ``x`` over ``axis``."""
    return sum(x, axis=axis, keepdims=keepdims) / _count(x, axis)


def var(x, /, *, axis=None, correction=0.0, keepdims=False):
    """Variance of ``x`` over ``axis`` with ``correction`` degrees of freedom removed."""
    centered = x - mean(x, axis=axis, keepdims=True)
    sq = ad.real(centered * ad.conj(centered)) if ad.isdtype(x.dtype, "complex floating") \
        else centered * centered
    return sum(sq, axis=axis, keepdims=keepdims) / (_count(x, axis) - correction)


def std(x, /, *, axis=None, correction=0.0, keepdims=False):
    """Standard deviation of ``x`` over ``axis``."""
    return ad.sqrt(var(x, axis=axis, correction=correction, keepdims=keepdims))


def diff(x, /, *, axis=-1, n=1, prepend=None, append=None):
    """``n``-th discrete difference along ``axis``."""
    axis = normalize_axis(axis, ndim_of(x))
    parts = [p for p in (prepend, x, append) if p is not None]
    if len(parts) > 1:
        x = ad.concat(parts, axis=axis)
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
            kw["dtype"] = _dtypes.to_backend(dtype, xp)
        return getattr(xp, name)(x, **kw)
    return impl


def _cum_axis(x, axis):
    return 0 if axis is None else normalize_axis(axis, ndim_of(x))


cumsum_p = primitive("cumulative_sum", _cum_impl("cumulative_sum"))
cumsum_p.batch = batch_axis_params(cumsum_p)


def _reverse_cumsum(g, axis):
    return ad.flip(ad.cumulative_sum(ad.flip(g, axis=axis), axis=axis), axis=axis)


def _cumsum_vjp(g, ans, x, axis=None, dtype=None, include_initial=False):
    ax = _cum_axis(x, axis)
    if include_initial:
        # out[k] = sum(x[:k]); x[j] feeds out[j+1:]
        g = g[(slice(None),) * ax + (slice(1, None), ...)]
    return _reverse_cumsum(g, ax)


defvjp(cumsum_p, _cumsum_vjp)
defjvp(cumsum_p, lambda t, ans, x, **params: bind(cumsum_p, t, **params))
PRIMS["cumulative_sum"] = cumsum_p


def cumulative_sum(x, /, *, axis=None, dtype=None, include_initial=False):
    """Cumulative sum along ``axis`` (which may be omitted only for 1-d ``x``)."""
    if axis is None and ndim_of(x) == 1:
        axis = 0   # an explicit axis, so that the batching rule shifts it (None means "all")
    return bind(cumsum_p, x, axis=axis, dtype=dtype, include_initial=include_initial)


cumprod_p = primitive("cumulative_prod", _cum_impl("cumulative_prod"))
cumprod_p.batch = batch_axis_params(cumprod_p)


def _cumprod_parts(x, ax):
    """D[..., k, j] = d out[k] / d x[j] = prod(x[:j]) * prod(x[j+1:k+1]) for j <= k, else 0.

    Written without dividing by x, so zeros in x are exact: the left factor is an exclusive
    cumulative product; the right one is, for each j, a cumulative product of x with the entries
    up to j replaced by one (O(n^2) memory along the axis).
    """
    n = shape_of(x)[ax]
    xm = ad.moveaxis(x, ax, -1)                                         # (..., n) over i
    left = ad.cumulative_prod(xm, axis=-1, include_initial=True)[..., :-1]  # (..., j)
    idx = arange_like(x, n)
    after_j = ad.reshape(idx, (1, n)) > ad.reshape(idx, (n, 1))         # [j, i]: i > j
    masked = ad.where(after_j, ad.expand_dims(xm, axis=-2), 1.0)        # (..., j, i)
    right = ad.cumulative_prod(masked, axis=-1)                         # (..., j, k)
    lower = ad.reshape(idx, (n, 1)) <= ad.reshape(idx, (1, n))          # [j, k]: j <= k
    d = ad.where(lower, ad.expand_dims(left, axis=-1) * right, 0.0)     # (..., j, k)
    return ad.matrix_transpose(d)                                       # (..., k, j)


def _cumprod_vjp(g, ans, x, axis=None, dtype=None, include_initial=False):
    ax = _cum_axis(x, axis)
    if include_initial:
        g = g[(slice(None),) * ax + (slice(1, None), ...)]
    d = _cumprod_parts(x, ax)                           # (..., k, j)
    gm = ad.expand_dims(ad.moveaxis(g, ax, -1), axis=-1)  # (..., k, 1)
    return ad.moveaxis(sum(gm * d, axis=-2), -1, ax)


def _cumprod_jvp(t, ans, x, axis=None, dtype=None, include_initial=False):
    ax = _cum_axis(x, axis)
    d = _cumprod_parts(x, ax)                           # (..., k, j)
    tm = ad.expand_dims(ad.moveaxis(t, ax, -1), axis=-2)  # (..., 1, j)
    out = ad.moveaxis(sum(d * tm, axis=-1), -1, ax)
    if include_initial:
        # a zero slab of length 1 along ax (a sum over ax: also when ax has length 0)
        zero = sum(ad.zeros_like(out), axis=ax, keepdims=True)
        out = ad.concat([zero, out], axis=ax)
    return out


defvjp(cumprod_p, _cumprod_vjp)
defjvp(cumprod_p, _cumprod_jvp)
PRIMS["cumulative_prod"] = cumprod_p


def cumulative_prod(x, /, *, axis=None, dtype=None, include_initial=False):
    """Cumulative product along ``axis``."""
    if axis is None and ndim_of(x) == 1:
        axis = 0   # an explicit axis, so that the batching rule shifts it (None means "all")
    return bind(cumprod_p, x, axis=axis, dtype=dtype, include_initial=include_initial)


# -- not differentiable: boolean and index results ------------------------------------------------
def _nondiff_reduction(name, impl=None):
    p = primitive(name, impl or _reduce_impl(name))
    p.batch = batch_axis_params(p)
    nondifferentiable(p)
    PRIMS[name] = p
    return p


all_p = _nondiff_reduction("all")
any_p = _nondiff_reduction("any")


def _count_nonzero_impl(xp, x, axis=None, keepdims=False):
    if axis == ():
        # no axis to reduce (vmap of a 0-d input): array-api-compat's torch counts over all axes
        return xp.astype(x != 0, xp.int64)
    return xp.count_nonzero(x, axis=axis, keepdims=keepdims)


count_nonzero_p = _nondiff_reduction("count_nonzero", _count_nonzero_impl)


def all(x, /, *, axis=None, keepdims=False):
    """Whether every element along ``axis`` is true."""
    return bind(all_p, x, axis=axis, keepdims=keepdims)


def any(x, /, *, axis=None, keepdims=False):
    """Whether any element along ``axis`` is true."""
    return bind(any_p, x, axis=axis, keepdims=keepdims)


def count_nonzero(x, /, *, axis=None, keepdims=False):
    """Number of non-zero elements along ``axis``."""
    return bind(count_nonzero_p, x, axis=axis, keepdims=keepdims)


def _arg_impl(name):
    def impl(xp, x, axis=None, keepdims=False):
        return getattr(xp, name)(x, axis=axis, keepdims=keepdims)
    return impl


def _batch_arg(p):
    # axis=None indexes the flattened array: flatten the logical dims first.
    def rule(args, dims, axis=None, keepdims=False):
        x = move_to_front(args[0], dims[0])
        nd = ndim_of(x) - 1
        if axis is None:
            b = shape_of(x)[0]
            out = bind(p, ad.reshape(x, (b, -1)), axis=1, keepdims=False)
            if keepdims:
                out = ad.reshape(out, (b,) + (1,) * nd)
            return out, 0
        return bind(p, x, axis=normalize_axis(axis, nd) + 1, keepdims=keepdims), 0
    return rule


argmax_p = primitive("argmax", _arg_impl("argmax"))
argmin_p = primitive("argmin", _arg_impl("argmin"))
for _p in (argmax_p, argmin_p):
    nondifferentiable(_p)
    _p.batch = _batch_arg(_p)
    PRIMS[_p.name] = _p


def argmax(x, /, *, axis=None, keepdims=False):
    """Index of the largest element along ``axis`` (of the flattened array if None)."""
    return bind(argmax_p, x, axis=axis, keepdims=keepdims)


def argmin(x, /, *, axis=None, keepdims=False):
    """Index of the smallest element along ``axis`` (of the flattened array if None)."""
    return bind(argmin_p, x, axis=axis, keepdims=keepdims)
