"""Statistical and utility reductions: sum, prod, max, min, mean, var, std, cumulative_*, all, any,
argmax, argmin, count_nonzero, diff.

``mean``, ``var``, ``std`` and ``diff`` are composites of differentiable primitives, so they need
no rules of their own (``decl.composite``).
"""

from ._namespace import ops

from .._core._core import conj_if_complex, bind, shape_of
from .._dtypes import to_backend
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


def reduction(name, *, vjp=None, jvp=None, reads=None, with_dtype=True, doc=None,
              impl=None, batch=None):
    """A reduction over ``axis`` with the standard's signature; no ``vjp``: nondifferentiable."""
    return decl.primitive(
        name, impl or _reduce_impl(name), vjp=vjp, reads=reads, jvp=jvp,
        batch=batch or axis_batch(), differentiable=vjp is not None, doc=doc,
        api="x, /, *, axis=None, dtype=None, keepdims=False" if with_dtype
        else "x, /, *, axis=None, keepdims=False", omit_none=("dtype",) if with_dtype else ())


# -- sum: linear ----------------------------------------------------------------------------------
sum_p = reduction(
    "sum", doc="Sum of ``x`` over ``axis`` (all axes by default).",
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
    right = ops.flip(ops.cumulative_prod(ops.flip(flat, axis=-1), axis=-1, include_initial=True)[..., :-1],
                    axis=-1)
    others = ops.reshape(left * right, tuple(shape[a] for a in kept + axes))
    inverse = [0] * nd
    for i, a in enumerate(kept + axes):
        inverse[a] = i
    return ops.permute_dims(others, tuple(inverse))


prod_p = reduction(
    "prod", doc="Product of ``x`` over ``axis``.",
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
    return reduction(
        name, with_dtype=False, doc=doc,
        vjp=(lambda g, ans, x, axis=None, keepdims=False:
             expand_reduced(g, x, axis, keepdims) * _share(ans, x, axis, keepdims),),
        jvp=(lambda t, ans, x, axis=None, keepdims=False:
             sum(t * _share(ans, x, axis, keepdims), axis=axis, keepdims=keepdims),))


max_p = _extremum("max", "Largest element of ``x`` over ``axis`` (the standard's max: values "
                         "only, no indices).")
min_p = _extremum("min", "Smallest element of ``x`` over ``axis``.")


# -- composites -----------------------------------------------------------------------------------
def _count(x, axis):
    n = 1
    shape = shape_of(x)
    for a in normalize_axes(axis, len(shape)):
        n *= shape[a]
    return n


@decl.composite
def mean(x, /, *, axis=None, keepdims=False):
    """Arithmetic mean of ``x`` over ``axis``."""
    return sum(x, axis=axis, keepdims=keepdims) / _count(x, axis)


@decl.composite
def var(x, /, *, axis=None, correction=0.0, keepdims=False):
    """Variance of ``x`` over ``axis`` with ``correction`` degrees of freedom removed."""
    centered = x - mean(x, axis=axis, keepdims=True)
    sq = ops.real(centered * ops.conj(centered)) if ops.isdtype(x.dtype, "complex floating") \
        else centered * centered
    return sum(sq, axis=axis, keepdims=keepdims) / (_count(x, axis) - correction)


@decl.composite
def std(x, /, *, axis=None, correction=0.0, keepdims=False):
    """Standard deviation of ``x`` over ``axis``."""
    return ops.sqrt(var(x, axis=axis, correction=correction, keepdims=keepdims))


@decl.composite
def diff(x, /, *, axis=-1, n=1, prepend=None, append=None):
    """``n``-th discrete difference along ``axis``."""
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
    """Cumulative sum along ``axis`` (which may be omitted only for 1-d ``x``)."""
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
    """Cumulative product along ``axis``."""
    if axis is None and ndim_of(x) == 1:
        axis = 0   # an explicit axis, so that the batching rule shifts it (None means "all")
    return bind(cumprod_p, x, axis=axis, dtype=dtype, include_initial=include_initial)


cumprod_p = decl.primitive("cumulative_prod", _cum_impl("cumulative_prod"),
                           vjp=(_cumprod_vjp,), jvp=(_cumprod_jvp,), batch=axis_batch(),
                           public=cumulative_prod)


# -- not differentiable: boolean and index results ------------------------------------------------
def _count_nonzero_impl(xp, x, axis=None, keepdims=False):
    if axis == ():
        # no axis to reduce (vmap of a 0-d input): array-api-compat's torch counts over all axes
        return xp.astype(x != 0, xp.int64)
    return xp.count_nonzero(x, axis=axis, keepdims=keepdims)


all_p = reduction("all", with_dtype=False, doc="Whether every element along ``axis`` is true.")
any_p = reduction("any", with_dtype=False, doc="Whether any element along ``axis`` is true.")
count_nonzero_p = reduction("count_nonzero", impl=_count_nonzero_impl, with_dtype=False,
                            doc="Number of non-zero elements along ``axis``.")


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


argmax_p = reduction("argmax", impl=_arg_impl("argmax"), batch=_batch_arg, with_dtype=False,
                     doc="Index of the largest element along ``axis`` (of the flattened array "
                         "if None).")
argmin_p = reduction("argmin", impl=_arg_impl("argmin"), batch=_batch_arg, with_dtype=False,
                     doc="Index of the smallest element along ``axis`` (of the flattened array "
                         "if None).")
