"""Manipulation functions: reshape, permute_dims, broadcast_to, concat, flip, roll, where, astype,
repeat, tile, tril/triu, and the composites built on them (expand_dims, squeeze, moveaxis, stack,
unstack, broadcast_arrays, matrix_transpose)."""

from ._namespace import ops

from .._core._core import bind, dtype_of, shape_of
from .._dtypes import from_backend, is_inexact, to_backend
from ._rules import (ELEMENTWISE, LINEAR, Declarations, axis_batch, batch_size_of, broadcast_like,
                     materialize_batch, move_to_front, ndim_of, normalize_axes, normalize_axis,
                     per_primitive, unbroadcast)

decl = Declarations(globals())


# -- reshape ---------------------------------------------------------------------------------------
def _reshape_impl(xp, x, shape, copy=None):
    if copy is None:
        return xp.reshape(x, shape)
    return xp.reshape(x, shape, copy=copy)


def reshape(x, /, shape, *, copy=None):
    """``x`` with a new shape (one entry may be -1)."""
    if isinstance(shape, int):
        shape = (shape,)
    return bind(reshape_p, x, shape=tuple(shape), copy=copy)


reshape_p = decl.primitive(
    "reshape", _reshape_impl, public=reshape, jvp=LINEAR,
    vjp=(lambda g, ans, x, shape, copy=None: reshape(g, shape_of(x)),),
    batch=lambda args, dims, shape, copy=None: (
        bind(reshape_p, move_to_front(args[0], dims[0]),
             shape=(shape_of(args[0])[dims[0]],) + tuple(shape), copy=copy), 0))


# -- permute_dims ----------------------------------------------------------------------------------
def _inverse_perm(axes):
    inv = [0] * len(axes)
    for i, a in enumerate(axes):
        inv[a] = i
    return tuple(inv)


def permute_dims(x, /, axes):
    """Permute the axes of ``x`` (negative axes allowed)."""
    nd = ndim_of(x)
    return bind(permute_p, x, axes=tuple(normalize_axis(a, nd) for a in axes))


permute_p = decl.primitive(
    "permute_dims", lambda xp, x, axes: xp.permute_dims(x, axes), public=permute_dims,
    jvp=LINEAR, vjp=(lambda g, ans, x, axes: bind(permute_p, g, axes=_inverse_perm(axes)),),
    batch=lambda args, dims, axes: (
        bind(permute_p, move_to_front(args[0], dims[0]), axes=(0,) + tuple(a + 1 for a in axes)),
        0))


@decl.composite
def matrix_transpose(x, /):
    """Swap the last two axes of ``x``."""
    nd = ndim_of(x)
    if nd < 2:
        raise ValueError("matrix_transpose: x must have at least 2 dimensions")
    return bind(permute_p, x, axes=tuple(range(nd - 2)) + (nd - 1, nd - 2))


@decl.composite
def moveaxis(x, source, destination, /):
    """Move axes of ``x`` from ``source`` to ``destination``."""
    nd = ndim_of(x)
    src = (source,) if isinstance(source, int) else tuple(source)
    dst = (destination,) if isinstance(destination, int) else tuple(destination)
    src = [normalize_axis(a, nd) for a in src]
    dst = [normalize_axis(a, nd) for a in dst]
    order = [a for a in range(nd) if a not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    if order == list(range(nd)):
        return x
    return bind(permute_p, x, axes=tuple(order))


@decl.composite
def expand_dims(x, /, axis):
    """Insert size-one axes at ``axis`` (an int or, since 2025.12, a tuple)."""
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    shape = list(shape_of(x))
    nd = len(shape) + len(axes)
    new = sorted(normalize_axis(a, nd) for a in axes)
    if len(set(new)) != len(new):
        raise ValueError(f"expand_dims: repeated axis in {axis}")
    for a in new:
        shape.insert(a, 1)
    return reshape(x, tuple(shape))


@decl.composite
def squeeze(x, /, axis):
    """Remove the size-one axes ``axis``."""
    shape = shape_of(x)
    axes = normalize_axes(axis, len(shape))
    for a in axes:
        if shape[a] != 1:
            raise ValueError(f"squeeze: axis {a} has size {shape[a]}, not 1")
    return reshape(x, tuple(s for i, s in enumerate(shape) if i not in axes))


# -- broadcast_to ----------------------------------------------------------------------------------
def _broadcast_batch(args, dims, shape):
    x = move_to_front(args[0], dims[0])
    xs = shape_of(x)
    missing = len(shape) - (len(xs) - 1)
    if missing:
        x = reshape(x, xs[:1] + (1,) * missing + xs[1:])
    return bind(broadcast_p, x, shape=xs[:1] + tuple(shape)), 0


def broadcast_to(x, /, shape):
    """``x`` broadcast to ``shape``."""
    shape = tuple(shape)
    if shape_of(x) == shape:
        return x
    return bind(broadcast_p, x, shape=shape)


broadcast_p = decl.primitive("broadcast_to", public=broadcast_to, jvp=LINEAR,
                             vjp=(lambda g, ans, x, shape: unbroadcast(g, x),),
                             batch=_broadcast_batch)


@decl.composite(traced=False)
def broadcast_shapes(*shapes):
    """The shape that ``shapes`` broadcast to."""
    nd = max((len(s) for s in shapes), default=0)
    out = []
    for i in range(nd):
        size = 1
        for s in shapes:
            j = i - (nd - len(s))
            if j < 0:
                continue
            d = s[j]
            if d == 1:
                continue
            if size != 1 and d != size:
                raise ValueError(f"shapes {shapes} cannot be broadcast together")
            size = d
        out.append(size)
    return tuple(out)


@decl.composite
def broadcast_arrays(*arrays):
    """The arrays broadcast against each other (a tuple)."""
    shape = broadcast_shapes(*[shape_of(a) for a in arrays])
    return tuple(broadcast_to(a, shape) for a in arrays)


# -- concat / stack / unstack ----------------------------------------------------------------------
def _concat_vjp(g, ans, *arrays, axis):
    if axis is None:
        g = reshape(g, (-1,))
        ax = 0
    else:
        ax = normalize_axis(axis, ndim_of(g))
    out = []
    start = 0
    for a in arrays:
        if axis is None:
            n = 1
            for s in shape_of(a):
                n *= s
        else:
            n = shape_of(a)[ax]
        piece = g[(slice(None),) * ax + (slice(start, start + n), ...)]
        out.append(reshape(piece, shape_of(a)) if axis is None else piece)
        start += n
    return tuple(out)


def _concat_jvp(tangents, ans, *arrays, axis):
    parts = [t if t is not None else ops.zeros_like(a) for t, a in zip(tangents, arrays)]
    return bind(concat_p, *parts, axis=axis)


def _concat_batch(args, dims, axis):
    size = batch_size_of(args, dims)
    parts = [materialize_batch(a, d, size) for a, d in zip(args, dims)]
    if axis is None:
        parts = [reshape(p, (size, -1)) for p in parts]
        return bind(concat_p, *parts, axis=1), 0
    return bind(concat_p, *parts, axis=normalize_axis(axis, ndim_of(args[0]) - (dims[0] is not None)) + 1), 0


def concat(arrays, /, *, axis=0):
    """Join ``arrays`` along an existing ``axis`` (flattened first if ``axis`` is None)."""
    return bind(concat_p, *arrays, axis=axis)


concat_p = decl.primitive("concat", lambda xp, *arrays, axis: xp.concat(arrays, axis=axis),
                          public=concat, variadic_vjp=_concat_vjp, full_jvp=_concat_jvp,
                          batch=_concat_batch)


@decl.composite
def stack(arrays, /, *, axis=0):
    """Join ``arrays`` along a new ``axis``."""
    arrays = list(arrays)
    nd = ndim_of(arrays[0]) + 1
    ax = normalize_axis(axis, nd)
    return concat([expand_dims(a, axis=ax) for a in arrays], axis=ax)


@decl.composite
def unstack(x, /, *, axis=0):
    """Split ``x`` along ``axis`` into a tuple of arrays."""
    ax = normalize_axis(axis, ndim_of(x))
    return tuple(x[(slice(None),) * ax + (i, ...)] for i in range(shape_of(x)[ax]))


# -- flip / roll -----------------------------------------------------------------------------------
flip_p = decl.primitive("flip", lambda xp, x, axis=None: xp.flip(x, axis=axis),
                        vjp=(lambda g, ans, x, axis=None: bind(flip_p, g, axis=axis),),
                        jvp=LINEAR, batch=axis_batch(), api="x, /, *, axis=None",
                        doc="Reverse the order of elements along ``axis`` (all axes by default).")


def _neg_shift(shift):
    return -shift if isinstance(shift, int) else tuple(-s for s in shift)


def _roll_batch(args, dims, shift, axis=None):
    x = move_to_front(args[0], dims[0])
    if axis is None:
        shape = shape_of(x)
        flat = reshape(x, (shape[0], -1))
        return reshape(bind(roll_p, flat, shift=shift, axis=1), shape), 0
    nd = ndim_of(x) - 1
    ax = normalize_axis(axis, nd) + 1 if isinstance(axis, int) else \
        tuple(normalize_axis(a, nd) + 1 for a in axis)
    return bind(roll_p, x, shift=shift, axis=ax), 0


def roll(x, /, shift, *, axis=None):
    """Roll the elements of ``x`` by ``shift`` along ``axis`` (flattened if None)."""
    if not isinstance(shift, int):
        shift = tuple(shift)
    if axis is not None and not isinstance(axis, int):
        axis = tuple(axis)
    return bind(roll_p, x, shift=shift, axis=axis)


roll_p = decl.primitive(
    "roll", lambda xp, x, shift, axis=None: xp.roll(x, shift, axis=axis), public=roll,
    vjp=(lambda g, ans, x, shift, axis=None: bind(roll_p, g, shift=_neg_shift(shift), axis=axis),),
    jvp=LINEAR, batch=_roll_batch)


# -- where -----------------------------------------------------------------------------------------
where_p = decl.primitive(
    "where", lambda xp, c, x1, x2: xp.where(c, x1, x2),
    vjp=(None,
         lambda g, ans, c, x1, x2: unbroadcast(where(c, g, 0.0), x1),
         lambda g, ans, c, x1, x2: unbroadcast(where(c, 0.0, g), x2)),
    jvp=(None,
         lambda t, ans, c, x1, x2: broadcast_like(where(c, t, 0.0), ans),
         lambda t, ans, c, x1, x2: broadcast_like(where(c, 0.0, t), ans)),
    batch=ELEMENTWISE, api="condition, x1, x2, /",
    doc="Elements of ``x1`` where ``condition`` is true, else of ``x2``.")


# -- astype ----------------------------------------------------------------------------------------
def _astype_impl(xp, x, dtype, copy=True, device=None):
    kw = {"copy": copy}
    if device is not None:
        kw["device"] = device
    return xp.astype(x, to_backend(dtype, xp), **kw)


def _astype_vjp(g, ans, x, dtype, copy=True, device=None):
    src = dtype_of(x)
    if not (is_inexact(src) and is_inexact(dtype)):
        return None
    if src.kind == "f" and dtype_of(g).kind == "c":
        g = ops.real(g)
    return bind(astype_p, g, dtype=src, copy=True)


def _astype_jvp(t, ans, x, dtype, copy=True, device=None):
    if not (is_inexact(dtype_of(x)) and is_inexact(dtype)):
        return None
    return bind(astype_p, t, dtype=dtype, copy=True)


def astype(x, dtype, /, *, copy=True, device=None):
    """``x`` converted to ``dtype``."""
    dtype = from_backend(dtype)
    if not copy and dtype_of(x) is dtype and device is None:
        return x
    return bind(astype_p, x, dtype=dtype, copy=copy, device=device)


astype_p = decl.primitive(
    "astype", _astype_impl, public=astype, vjp=(_astype_vjp,), jvp=(_astype_jvp,),
    batch=lambda args, dims, **params: (bind(astype_p, args[0], **params), dims[0]))


# -- repeat / tile ---------------------------------------------------------------------------------
def _repeat_impl(xp, x, repeats, axis=None):
    return xp.repeat(x, repeats, axis=axis)


def _repeat_vjp(g, ans, x, repeats, axis=None):
    # Sum each run of repeated copies back onto its source element.
    if axis is None:
        x_flat_shape = (-1,)
        g = reshape(g, (-1,))
        ax = 0
        n = 1
        for s in shape_of(x):
            n *= s
    else:
        ax = normalize_axis(axis, ndim_of(x))
        n = shape_of(x)[ax]
        x_flat_shape = None
    if isinstance(repeats, int):
        gs = shape_of(g)
        g = reshape(g, gs[:ax] + (n, repeats) + gs[ax + 1:])
        out = ops.sum(g, axis=ax + 1)
    else:
        # Variable repeats: segment sums through cumulative sums at the run boundaries.
        c = ops.cumulative_sum(g, axis=ax, include_initial=True)
        ends = ops.cumulative_sum(ops.astype(repeats, ops.int64), include_initial=True)
        hi = ops.take(c, ends[1:], axis=ax)
        lo = ops.take(c, ends[:-1], axis=ax)
        out = hi - lo
    return reshape(out, shape_of(x)) if x_flat_shape else out


def _repeat_batch(args, dims, repeats, axis=None):
    x = move_to_front(args[0], dims[0])
    if axis is None:
        x = reshape(x, (shape_of(x)[0], -1))
        return bind(repeat_p, x, repeats=repeats, axis=1), 0
    return bind(repeat_p, x, repeats=repeats, axis=normalize_axis(axis, ndim_of(x) - 1) + 1), 0


repeat_p = decl.primitive(
    "repeat", _repeat_impl, vjp=(_repeat_vjp,), jvp=LINEAR, batch=_repeat_batch,
    api="x, repeats, /, *, axis=None", args=("x",),
    doc="Repeat each element of ``x`` ``repeats`` times (an int or an array of counts).")


def _tile_vjp(g, ans, x, repetitions):
    xs = shape_of(x)
    nd = max(len(xs), len(repetitions))
    xs_full = (1,) * (nd - len(xs)) + xs
    reps = (1,) * (nd - len(repetitions)) + tuple(repetitions)
    interleaved = []
    for r, s in zip(reps, xs_full):
        interleaved += [r, s]
    g = reshape(g, tuple(interleaved))
    g = ops.sum(g, axis=tuple(range(0, 2 * nd, 2)))
    return reshape(g, xs)


def _tile_batch(args, dims, repetitions):
    x = move_to_front(args[0], dims[0])
    nd = ndim_of(x) - 1
    reps = tuple(repetitions)
    full = max(nd, len(reps))
    if full > nd:
        xs = shape_of(x)
        x = reshape(x, xs[:1] + (1,) * (full - nd) + xs[1:])
    reps = (1,) * (full - len(reps)) + reps
    return bind(tile_p, x, repetitions=(1,) + reps), 0


def tile(x, repetitions, /):
    """Repeat the whole of ``x`` ``repetitions[i]`` times along each axis."""
    return bind(tile_p, x, repetitions=tuple(repetitions))


tile_p = decl.primitive("tile", lambda xp, x, repetitions: xp.tile(x, repetitions), public=tile,
                        vjp=(_tile_vjp,), jvp=LINEAR, batch=_tile_batch)


# -- tril / triu: masks on the last two axes, linear -------------------------------------------------
def _triangle(name, doc):
    return decl.primitive(
        name, lambda xp, x, k=0: getattr(xp, name)(x, k=k), jvp=LINEAR,
        vjp=(per_primitive(lambda p: lambda g, ans, x, k=0: bind(p, g, k=k)),),
        batch=per_primitive(lambda p: lambda args, dims, k=0: (
            bind(p, move_to_front(args[0], dims[0]), k=k), 0)),
        api="x, /, *, k=0", doc=doc)


tril_p = _triangle("tril",
                   "The lower triangle of the matrices in ``x`` (from diagonal ``k`` down).")
triu_p = _triangle("triu", "The upper triangle of the matrices in ``x`` (from diagonal ``k`` up).")
