"""Manipulation functions: reshape, permute_dims, broadcast_to, concat, flip, roll, where, astype,
repeat, tile, tril/triu, and the composites built on them (expand_dims, squeeze, moveaxis, stack,
unstack, broadcast_arrays, matrix_transpose)."""

import numpy as np

from ._namespace import ops

from .._core import _core
from .._core._core import Array, Tensor, Tracer, bind, dtype_of, shape_of
from .._core._core import structural_zeros, zeros_mask
from .._dtypes import from_backend, is_inexact, to_backend
from ._rules import (ELEMENTWISE, MOVING, Declarations, axis_batch, batch_size_of, broadcast_like,
                     materialize_batch, move_to_front, moves_zeros, ndim_of, normalize_axes,
                     normalize_axis, per_primitive, unbroadcast)
from .views import View, make_view, reshapes_without_copy

decl = Declarations(globals())


# -- reshape ---------------------------------------------------------------------------------------
def _reshape_impl(xp, x, shape, copy=None):
    if copy is None:
        return xp.reshape(x, shape)
    return xp.reshape(x, shape, copy=copy)


def reshape(x, /, shape, *, copy=None):
    """``x`` with a new shape: the same elements in the same (row-major) order.

    Parameters
    ----------
    x : array
        Input array.
    shape : int or tuple of ints
        The new shape, with as many elements as ``x``; one entry may be -1, inferred from
        the others.
    copy : bool, optional
        True: always copy; False: never copy (the backend raises if it would have to); None,
        the default: copy only if needed.

    Returns
    -------
    array
        The reshaped array, of the backend and dtype of ``x`` (inside a transform, a value of
        that transform). Linear: its gradient is the cotangent reshaped back to ``x``'s shape.
        A view of ``x`` where NumPy would not copy (``x`` is not a transposed or strided view):
        an in-place update of either is seen by the other.

    Raises
    ------
    ValueError
        If ``shape`` does not have as many elements as ``x``, or ``copy=False`` and the
        backend cannot reshape without copying (e.g. a transposed NumPy array).

    Examples
    --------
    >>> ad.reshape(ad.arange(6.), (2, 3))
    tensor([[0., 1., 2.],
            [3., 4., 5.]])
    >>> ad.reshape(ad.arange(6.), (-1, 2)).shape
    (3, 2)
    """
    if isinstance(shape, int):
        shape = (shape,)
    shape = tuple(shape)
    if copy is True or not isinstance(x, Array):
        return bind(reshape_p, x, shape=shape, copy=copy)
    out = bind(reshape_p, x, shape=shape)
    if reshapes_without_copy(x, tuple(out.shape)):
        return make_view(out, x, Reshape(tuple(out.shape)))
    if copy is False:
        raise ValueError(
            f"reshape: cannot reshape an array of shape {tuple(x.shape)} to {shape} without "
            f"copying (it is a transposed or strided view of another array); pass copy=None "
            f"or copy=True")
    return out


class Reshape(View):
    """A reshape that moves no data."""
    __slots__ = ("shape",)
    name = "reshape"

    def __init__(self, shape):
        self.shape = shape

    def read(self, base):
        return bind(reshape_p, base, shape=self.shape)

    def write(self, base, value):
        return bind(reshape_p, value, shape=tuple(base.shape))

    def layout(self, a):
        return a.reshape(self.shape)


reshape_p = decl.primitive(
    "reshape", _reshape_impl, public=reshape, jvp=MOVING, reads=[""],
    # (to its own shape, without a copy requested: the input itself)
    identity=lambda ins, out, params: len(ins) == 1 and not params.get("copy"),
    vjp=(moves_zeros(lambda g, ans, x, shape, copy=None:
                     bind(reshape_p, g, shape=shape_of(x))),),
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
    """``x`` with its axes reordered: axis ``i`` of the result is axis ``axes[i]`` of ``x``.

    Parameters
    ----------
    x : array
        Input array.
    axes : tuple of ints
        A permutation of the axes of ``x`` (negative values count from the end).

    Returns
    -------
    array
        The permuted array, of the backend and dtype of ``x`` (inside a transform, a value of
        that transform). Linear: the gradient is the cotangent permuted back. torch spells
        this ``x.permute(*dims)``, which the tensor method accepts too.

    Raises
    ------
    ValueError
        If ``axes`` is not a permutation of the axes of ``x`` (a missing or repeated axis).
    IndexError
        If an axis is out of range for ``x``.

    Examples
    --------
    >>> ad.permute_dims(ad.zeros((2, 3, 4)), (2, 0, 1)).shape
    (4, 2, 3)
    """
    nd = ndim_of(x)
    return _permute(x, tuple(normalize_axis(a, nd) for a in axes))


def _permute(x, axes):
    return make_view(bind(permute_p, x, axes=axes), x, Permute(axes))


class Permute(View):
    """A permutation of the axes (``.T``, ``.mT``, ``permute_dims``, ``moveaxis``)."""
    __slots__ = ("axes",)
    name = "permute_dims"

    def __init__(self, axes):
        self.axes = axes

    def read(self, base):
        return bind(permute_p, base, axes=self.axes)

    def write(self, base, value):
        return bind(permute_p, value, axes=_inverse_perm(self.axes))

    def layout(self, a):
        return a.transpose(self.axes)


permute_p = decl.primitive(
    "permute_dims", lambda xp, x, axes: xp.permute_dims(x, axes), public=permute_dims,
    identity=lambda ins, out, params: tuple(params.get("axes", ())) == tuple(
        range(len(ins[0].shape))),
    jvp=MOVING, vjp=(moves_zeros(lambda g, ans, x, axes:
                                 bind(permute_p, g, axes=_inverse_perm(axes))),),
    reads=[""],
    batch=lambda args, dims, axes: (
        bind(permute_p, move_to_front(args[0], dims[0]), axes=(0,) + tuple(a + 1 for a in axes)),
        0))


@decl.composite
def matrix_transpose(x, /):
    """The transpose of each matrix in ``x``: its last two axes swapped.

    Returns
    -------
    array
        Shaped ``(..., N, M)`` for ``x`` of shape ``(..., M, N)``, of the backend and dtype of
        ``x`` (inside a transform, a value of that transform); not conjugated for complex
        ``x``. Linear: the gradient is the cotangent transposed back.

    Raises
    ------
    ValueError
        If ``x`` has fewer than 2 dimensions.

    Examples
    --------
    >>> ad.matrix_transpose(ad.asarray([[1., 2.], [3., 4.]]))
    tensor([[1., 3.],
            [2., 4.]])
    """
    nd = ndim_of(x)
    if nd < 2:
        raise ValueError("matrix_transpose: x must have at least 2 dimensions")
    return _permute(x, tuple(range(nd - 2)) + (nd - 1, nd - 2))


@decl.composite
def moveaxis(x, source, destination, /):
    """``x`` with the axes ``source`` moved to the positions ``destination``, the other axes
    keeping their order.

    Parameters
    ----------
    x : array
        Input array.
    source, destination : int or tuple of ints
        The axes to move and where they go (as many of each; negative values count from the
        end).

    Returns
    -------
    array
        A permutation of ``x`` (``permute_dims``), of the backend and dtype of ``x`` (inside a
        transform, a value of that transform); its gradient is moved back.

    Raises
    ------
    IndexError
        If an axis is out of range for ``x``.

    Examples
    --------
    >>> ad.moveaxis(ad.zeros((2, 3, 4)), 0, -1).shape
    (3, 4, 2)
    """
    nd = ndim_of(x)
    src = (source,) if isinstance(source, int) else tuple(source)
    dst = (destination,) if isinstance(destination, int) else tuple(destination)
    for name, axes in (("source", src), ("destination", dst)):
        for a in axes:
            if not -nd <= a < max(nd, 1):   # (NumPy's words: SciPy's tests match them)
                raise IndexError(f"moveaxis: {name}: axis {a} is out of bounds for array of "
                                 f"dimension {nd}")
    src = [normalize_axis(a, nd) for a in src]
    dst = [normalize_axis(a, nd) for a in dst]
    order = [a for a in range(nd) if a not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    if order == list(range(nd)):
        return x
    return _permute(x, tuple(order))


@decl.composite
def expand_dims(x, /, axis):
    """``x`` with axes of length one inserted at ``axis``.

    Parameters
    ----------
    x : array
        Input array.
    axis : int or tuple of ints
        The positions of the new axes in the result (a tuple since the 2025.12 standard;
        negative values count from the end of the result). torch's ``x.unsqueeze(dim)`` is
        the tensor method for one axis.

    Returns
    -------
    array
        A reshape of ``x``, of its backend and dtype (inside a transform, a value of that
        transform), with ``ndim + len(axis)`` dimensions.

    Raises
    ------
    ValueError
        If ``axis`` repeats a position.
    IndexError
        If a position is out of range for the result.

    Examples
    --------
    >>> ad.expand_dims(ad.zeros((2, 3)), axis=0).shape
    (1, 2, 3)
    >>> ad.expand_dims(ad.zeros((2, 3)), axis=(0, -1)).shape
    (1, 2, 3, 1)
    """
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
    """``x`` without the axes ``axis``, which must have length one.

    Parameters
    ----------
    x : array
        Input array.
    axis : int or tuple of ints
        The axes to remove (required, as the standard has it; the tensor method
        ``x.squeeze()`` removes every axis of length one, as torch's).

    Returns
    -------
    array
        A reshape of ``x``, of its backend and dtype (inside a transform, a value of that
        transform).

    Raises
    ------
    ValueError
        If one of the axes does not have length one.
    IndexError
        If an axis is out of range for ``x``.
    TypeError
        If ``axis`` is omitted.

    Examples
    --------
    >>> ad.squeeze(ad.zeros((1, 3, 1)), axis=(0, 2)).shape
    (3,)
    """
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
    """``x`` broadcast to ``shape`` (its axes of length one repeated, new axes in front).

    Returns
    -------
    array
        An array of shape ``shape``, of the backend and dtype of ``x`` (inside a transform, a
        value of that transform); ``x`` itself when it has that shape already. A read-only view
        of ``x`` (as NumPy's: its repeated elements share memory). The gradient sums the
        cotangent over the broadcast axes.

    Raises
    ------
    ValueError
        If ``x`` cannot be broadcast to ``shape``.

    Examples
    --------
    >>> ad.broadcast_to(ad.asarray([1., 2.]), (2, 2))
    tensor([[1., 2.],
            [1., 2.]])
    >>> ad.func.grad(lambda x: ad.sum(ad.broadcast_to(x, (3, 2))))(ad.asarray([1., 2.]))
    tensor([3., 3.])
    """
    shape = tuple(shape)
    if shape_of(x) == shape:
        return x
    out = bind(broadcast_p, x, shape=shape)
    # (a raw array's broadcast is no arrayad view: nothing to record, as make_view decides)
    return make_view(out, x, Broadcast(shape)) if isinstance(x, Array) else out


class Broadcast(View):
    """``broadcast_to``/``expand``: read-only, as NumPy's."""
    __slots__ = ("shape",)
    writable = False
    name = "broadcast_to"

    def __init__(self, shape):
        self.shape = shape

    def read(self, base):
        return bind(broadcast_p, base, shape=self.shape)

    def layout(self, a):
        return np.broadcast_to(a, self.shape)


broadcast_p = decl.primitive("broadcast_to", public=broadcast_to, jvp=MOVING, reads=[""],
                             vjp=(lambda g, ans, x, shape: unbroadcast(g, x),),
                             batch=_broadcast_batch)


@decl.composite(traced=False)
def broadcast_shapes(*shapes):
    """The shape that arrays of the shapes ``shapes`` broadcast to, by the standard's rule
    (aligned from the right, an axis of length one stretching to the other).

    Parameters
    ----------
    *shapes : tuple of ints
        The shapes (tuples, not arrays).

    Returns
    -------
    tuple of ints
        The broadcast shape (``()`` for no shapes). Computed from the shapes alone: nothing
        to differentiate.

    Raises
    ------
    ValueError
        If the shapes cannot be broadcast together.

    Examples
    --------
    >>> ad.broadcast_shapes((2, 1), (3,))
    (2, 3)
    """
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
    """The arrays broadcast against each other, to their common shape.

    Returns
    -------
    tuple of arrays
        One array per argument, each of the broadcast shape (``broadcast_shapes``) and of its
        own dtype, on the arguments' backend (inside a transform, values of that transform).

    Raises
    ------
    ValueError
        If the shapes cannot be broadcast together.

    Examples
    --------
    >>> a, b = ad.broadcast_arrays(ad.asarray([1., 2.]), ad.asarray([[1.], [2.]]))
    >>> a.shape, b.shape
    ((2, 2), (2, 2))
    """
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
    axis = normalize_axis(axis, ndim_of(args[0]) - (dims[0] is not None))
    return bind(concat_p, *parts, axis=axis + 1), 0


def concat(arrays, /, *, axis=0):
    """``arrays`` joined along an existing axis.

    Parameters
    ----------
    arrays : sequence of arrays
        The arrays to join; their shapes must agree except along ``axis``.
    axis : int or None, optional
        The axis to join along (default 0); None flattens the arrays first.

    Returns
    -------
    array
        The joined array, of the arrays' backend (inside a transform, a value of that
        transform) and of their promoted dtype. Linear: each array's gradient is its slice of
        the cotangent. (torch spells it ``cat(tensors, dim)``.)

    Raises
    ------
    ValueError
        If the arrays differ in number of dimensions or in a size off ``axis``.
    IndexError
        If ``axis`` is out of range (NumPy raises its ``AxisError``, which is both an
        ``IndexError`` and a ``ValueError``).
    ValueError
        If ``arrays`` is empty.
    TypeError
        If ``arrays`` mixes arrays of two backends.

    Examples
    --------
    >>> ad.concat([ad.asarray([1., 2.]), ad.asarray([3.])])
    tensor([1., 2., 3.])
    """
    if not len(arrays):
        raise ValueError("concat: expected a non-empty sequence of arrays")
    return bind(concat_p, *arrays, axis=axis)


concat_p = decl.primitive("concat", lambda xp, *arrays, axis: xp.concat(arrays, axis=axis),
                          public=concat, variadic_vjp=_concat_vjp, full_jvp=_concat_jvp,
                          batch=_concat_batch,
                          identity=lambda ins, out, params: len(ins) == 1)


@decl.composite
def stack(arrays, /, *, axis=0):
    """``arrays``, all of one shape, joined along a new axis.

    Parameters
    ----------
    arrays : sequence of arrays
        The arrays to stack (of the same shape).
    axis : int, optional
        The position of the new axis in the result (default 0).

    Returns
    -------
    array
        One more dimension than the arrays, of their backend (inside a transform, a value of
        that transform) and promoted dtype; a composite of ``expand_dims`` and ``concat``.

    Raises
    ------
    ValueError
        If ``arrays`` is empty or the arrays do not have the same shape.
    IndexError
        If ``axis`` is out of range for the result.

    Examples
    --------
    >>> ad.stack([ad.asarray([1., 2.]), ad.asarray([3., 4.])], axis=1)
    tensor([[1., 3.],
            [2., 4.]])
    """
    arrays = list(arrays)
    if not len(arrays):
        raise ValueError("stack: expected a non-empty sequence of arrays")
    nd = ndim_of(arrays[0]) + 1
    ax = normalize_axis(axis, nd)
    return concat([expand_dims(a, axis=ax) for a in arrays], axis=ax)


@decl.composite
def unstack(x, /, *, axis=0):
    """``x`` split along ``axis`` into the arrays that ``stack`` would join back.

    Parameters
    ----------
    x : array
        Input array, at least 1-d.
    axis : int, optional
        The axis to split along (default 0).

    Returns
    -------
    tuple of arrays
        ``x.shape[axis]`` arrays without that axis, of the backend and dtype of ``x`` (inside a
        transform, values of that transform). torch spells it ``unbind(x, dim)``.

    Raises
    ------
    IndexError
        If ``axis`` is out of range for ``x`` (a 0-d ``x`` has none).

    Examples
    --------
    >>> ad.unstack(ad.asarray([[1., 2.], [3., 4.]]))
    (tensor([1., 2.]), tensor([3., 4.]))
    """
    if ndim_of(x) == 0:
        raise IndexError("unstack: x is 0-d, it has no axis to split along")
    ax = normalize_axis(axis, ndim_of(x))
    return tuple(x[(slice(None),) * ax + (i, ...)] for i in range(shape_of(x)[ax]))


FLIP_DOC = """``x`` with the order of its elements reversed along ``axis``.

Parameters
----------
x : array
    Input array.
axis : int or tuple of ints, optional
    The axes to reverse; None, the default, reverses all of them. (torch's ``flip`` takes
    ``dims``, which the tensor method accepts.)

Returns
-------
array
    Shaped like ``x``, of its backend and dtype (inside a transform, a value of that
    transform). Linear: the gradient is the cotangent flipped back.

Raises
------
IndexError
    If an axis is out of range for ``x`` (NumPy raises its ``AxisError``, which is both an
    ``IndexError`` and a ``ValueError``).

Examples
--------
>>> ad.flip(ad.asarray([1., 2., 3.]))
tensor([3., 2., 1.])
>>> ad.flip(ad.asarray([[1., 2.], [3., 4.]]), axis=0)
tensor([[3., 4.],
        [1., 2.]])
"""


# -- flip / roll -----------------------------------------------------------------------------------
flip_p = decl.primitive("flip", lambda xp, x, axis=None: xp.flip(x, axis=axis),
                        vjp=(moves_zeros(lambda g, ans, x, axis=None:
                                         bind(flip_p, g, axis=axis)),),
                        jvp=MOVING, batch=axis_batch(), api="x, /, *, axis=None",
                        doc=FLIP_DOC)


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
    """``x`` with its elements shifted cyclically by ``shift`` positions along ``axis``.

    Parameters
    ----------
    x : array
        Input array.
    shift : int or tuple of ints
        How far to shift (negative: towards the start); a tuple gives one shift per axis of
        ``axis``, or shifts one axis several times.
    axis : int or tuple of ints, optional
        The axes to roll along; None, the default, rolls the flattened array and restores
        the shape.

    Returns
    -------
    array
        Shaped like ``x``, of its backend and dtype (inside a transform, a value of that
        transform). Linear: the gradient is the cotangent rolled back by ``-shift``.

    Raises
    ------
    IndexError
        If an axis is out of range for ``x`` (NumPy raises its ``AxisError``, which is both an
        ``IndexError`` and a ``ValueError``).

    Examples
    --------
    >>> ad.roll(ad.asarray([1., 2., 3.]), 1)
    tensor([3., 1., 2.])
    """
    if not isinstance(shift, int):
        shift = tuple(shift)
    if axis is not None and not isinstance(axis, int):
        axis = tuple(axis)
    return bind(roll_p, x, shift=shift, axis=axis)


roll_p = decl.primitive(
    "roll", lambda xp, x, shift, axis=None: xp.roll(x, shift, axis=axis), public=roll,
    vjp=(moves_zeros(lambda g, ans, x, shift, axis=None:
                     bind(roll_p, g, shift=_neg_shift(shift), axis=axis)),),
    jvp=MOVING, batch=_roll_batch)


WHERE_DOC = """Elements of ``x1`` where ``condition`` is true, of ``x2`` elsewhere.

Parameters
----------
condition : array
    Where to take ``x1``: a bool array (NumPy also takes any array, non-zero as true).
x1, x2 : array or Python scalar
    The values to choose from; the three arguments broadcast together.

Returns
-------
array
    Of the broadcast shape and of the promoted dtype of ``x1`` and ``x2``, on their backend
    (inside a transform, a value of that transform). The gradient flows to ``x1`` where
    ``condition`` holds and to ``x2`` elsewhere; ``condition`` gets none. The zeros of the
    branch not taken are exact: an inf or nan in its derivative does not reach the result
    (``where(x > 0, sqrt(x), 0.0)`` has gradient 0 at ``x = 0``, where torch and JAX give nan;
    see the correctness page).

Raises
------
ValueError
    If the three shapes cannot be broadcast together.
TypeError
    If the arguments are arrays of two backends.

Examples
--------
>>> ad.where(ad.asarray([True, False]), ad.asarray([1., 2.]), ad.asarray([3., 4.]))
tensor([1., 4.])
>>> ad.where(ad.asarray([True, False]), ad.asarray([1., 2.]), 0.0)
tensor([1., 0.])
"""


# -- where -----------------------------------------------------------------------------------------
def _selected(g, c, first):
    """``where(c, g, 0)`` (``first``) or ``where(c, 0, g)``: the derivative of one branch, zero
    by construction where the other branch is taken and where ``g`` was (NOTE [strong zeros] in
    the core: a product with an inf or nan derivative stays zero there)."""
    out = ops.where(c, g, 0.0) if first else ops.where(c, 0.0, g)
    mg = zeros_mask(g)

    def mask():
        cb = c if dtype_of(c).kind == "b" else ops.astype(c, bool)
        m = ops.logical_not(cb) if first else cb
        return m if mg is None else ops.logical_or(m, mg())

    return structural_zeros(out, mask)


where_p = decl.primitive(
    "where", lambda xp, c, x1, x2: xp.where(c, x1, x2),
    vjp=(None,
         lambda g, ans, c, x1, x2: unbroadcast(_selected(g, c, True), x1),
         lambda g, ans, c, x1, x2: unbroadcast(_selected(g, c, False), x2)),
    jvp=(None,
         lambda t, ans, c, x1, x2: broadcast_like(_selected(t, c, True), ans),
         lambda t, ans, c, x1, x2: broadcast_like(_selected(t, c, False), ans)),
    batch=ELEMENTWISE, api="condition, x1, x2, /", doc=WHERE_DOC)


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
    """``x`` converted to ``dtype``.

    Parameters
    ----------
    x : array
        Input array.
    dtype : dtype
        The target: one of arrayad's dtypes (``ad.float32``...), or the backend's or NumPy's
        dtype object of the same name.
    copy : bool, optional
        True, the default: always a new array; False: ``x`` itself if it has ``dtype`` already.
    device : device, optional
        The device of the result (default: that of ``x``).

    Returns
    -------
    array
        The converted array, of the backend of ``x`` (inside a transform, a value of that
        transform). Floats to integers truncate toward zero (the backend's rule); complex to
        real keeps the real part. Between floating and complex dtypes the gradient is cast
        back to ``x``'s dtype (its real part for a real ``x``); to or from an integer or bool
        dtype no gradient flows.

    Raises
    ------
    TypeError
        If ``dtype`` is not one of the standard's dtypes (float16, strings...).

    Examples
    --------
    >>> ad.astype(ad.asarray([1.5, -2.5]), ad.int64)
    tensor([ 1, -2])
    >>> ad.astype(ad.asarray([1.5, 2.5]), ad.float32).dtype == ad.float32
    True
    """
    dtype = from_backend(dtype)
    if not copy and dtype_of(x) is dtype and device is None:
        return x
    return bind(astype_p, x, dtype=dtype, copy=copy, device=device)


astype_p = decl.primitive(
    "astype", _astype_impl, public=astype, vjp=(_astype_vjp,), jvp=(_astype_jvp,),
    batch=lambda args, dims, **params: (bind(astype_p, args[0], **params), dims[0]))


# -- repeat / tile ---------------------------------------------------------------------------------
def _repeat_impl(xp, x, repeats, axis=None):
    if isinstance(repeats, Array):
        repeats = _core.raw_value(repeats)
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


REPEAT_DOC = """``x`` with each element repeated ``repeats`` times along ``axis``.

Parameters
----------
x : array
    Input array.
repeats : int or array of ints
    How many times to repeat: one count for all, or one per element along ``axis``.
axis : int, optional
    The axis to repeat along; None, the default, repeats the flattened array.

Returns
-------
array
    Of the backend and dtype of ``x`` (inside a transform, a value of that transform), longer
    along ``axis`` (1-d if ``axis`` is None). The gradient of each element is the sum of the
    cotangent over its copies. (torch spells it ``repeat_interleave``; torch's ``repeat`` is
    ``tile``.)

Raises
------
ValueError
    If ``repeats`` is negative, or has neither one element nor one per element along ``axis``.

Examples
--------
>>> ad.repeat(ad.asarray([1., 2.]), 2)
tensor([1., 1., 2., 2.])
>>> ad.repeat(ad.asarray([1., 2.]), ad.asarray([1, 3]))
tensor([1., 2., 2., 2.])
"""


def _constant_counts(repeats, api):
    """Integer counts computed inside a transform as a constant: no derivative flows through
    integers, so their value is all the primitive needs, and a Tensor holding it cannot escape
    its transform (the backward pass reads it after grad has returned). Counts that differ
    between batch elements of vmap would give rows of different lengths: refused."""
    if not isinstance(repeats, Array) or isinstance(repeats, Tensor):
        return repeats
    if is_inexact(dtype_of(repeats)):
        raise TypeError(f"{api}: repeats must be integers, got {dtype_of(repeats)}")
    t = repeats
    while isinstance(t, Tracer):
        if t.batches and not t._is_constant():
            raise RuntimeError(
                f"vmap: {api} with repeats that differ between batch elements returns arrays of "
                f"different lengths, which vmap cannot stack. Pass repeats that are the same for "
                f"every batch element (computed outside vmap), or loop over the batch.")
        # (jit's refuses: the result's length depends on the counts' values, unknown while it
        # traces; its conversion error names the argument and the fixes)
        t = t._concrete_value("numpy")
    return Tensor(_core.raw_value(repeats))


def repeat(x, repeats, /, *, axis=None):
    return bind(repeat_p, x, repeats=_constant_counts(repeats, "repeat"), axis=axis)


repeat.__doc__ = REPEAT_DOC
repeat_p = decl.primitive(
    "repeat", _repeat_impl, vjp=(_repeat_vjp,), jvp=MOVING, batch=_repeat_batch,
    public=repeat)


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
    """``x`` repeated as a block ``repetitions[i]`` times along each axis ``i``.

    Parameters
    ----------
    x : array
        Input array.
    repetitions : tuple of ints
        The number of copies along each axis; a shorter tuple applies to the last axes of
        ``x``, a longer one adds leading axes to it.

    Returns
    -------
    array
        Of the backend and dtype of ``x`` (inside a transform, a value of that transform). The
        gradient of each element sums the cotangent over its copies.

    Raises
    ------
    TypeError
        If ``repetitions`` is not a sequence (``tile(x, 2)``: write ``tile(x, (2,))``).

    Examples
    --------
    >>> ad.tile(ad.asarray([1., 2.]), (2,))
    tensor([1., 2., 1., 2.])
    >>> ad.func.grad(lambda x: ad.sum(ad.tile(x, (2, 2))))(ad.asarray([1., 2.]))
    tensor([4., 4.])
    """
    return bind(tile_p, x, repetitions=tuple(repetitions))


tile_p = decl.primitive("tile", lambda xp, x, repetitions: xp.tile(x, repetitions), public=tile,
                        vjp=(_tile_vjp,), jvp=MOVING, batch=_tile_batch)


# -- tril / triu: masks on the last two axes, linear -----------------------------------------------
_TRIANGLE_DOC = """The {part} triangle of each matrix in ``x``: elements {where} diagonal ``k``
kept, the others zero.

Parameters
----------
x : array
    A stack of matrices ``(..., M, N)``.
k : int, optional
    The diagonal that bounds the triangle: 0, the default, is the main diagonal, ``k > 0``
    is above it, ``k < 0`` below.

Returns
-------
array
    Shaped like ``x``, of its backend and dtype (inside a transform, a value of that
    transform). Linear: the gradient is the same triangle of the cotangent.

Raises
------
ValueError
    If ``x`` has fewer than 2 dimensions, on backends that check it (array-api-strict).
    NumPy treats a 1-d ``x`` as a row repeated into a square matrix and raises ``TypeError``
    for a 0-d one.

Examples
--------
{example}
"""


def _triangle(name, doc):
    return decl.primitive(
        name, lambda xp, x, k=0: getattr(xp, name)(x, k=k), jvp=MOVING,
        vjp=(per_primitive(lambda p: moves_zeros(lambda g, ans, x, k=0: bind(p, g, k=k))),),
        batch=per_primitive(lambda p: lambda args, dims, k=0: (
            bind(p, move_to_front(args[0], dims[0]), k=k), 0)),
        api="x, /, *, k=0", doc=doc)


tril_p = _triangle("tril", _TRIANGLE_DOC.format(
    part="lower", where="on and below",
    example=">>> ad.tril(ad.ones((3, 3)))\n"
            "tensor([[1., 0., 0.],\n"
            "        [1., 1., 0.],\n"
            "        [1., 1., 1.]])"))
triu_p = _triangle("triu", _TRIANGLE_DOC.format(
    part="upper", where="on and above",
    example=">>> ad.triu(ad.ones((2, 2)), k=1)\n"
            "tensor([[0., 1.],\n"
            "        [0., 0.]])"))
