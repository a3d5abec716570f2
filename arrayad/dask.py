"""Dask's own operations on arrayad values (eager tensors and the values inside transforms).

``rechunk(x, chunks)`` (also the method ``x.rechunk(chunks)``) is differentiable: rechunking
changes no value, so its derivative is the identity; the cotangent goes back to the input's
chunks, the tangent takes the new ones, and under ``vmap`` the batch axis is left as it is.
On an array of another backend it returns the array unchanged (one chunk).

``map_blocks(f, *arrays)`` runs ``f``, written with arrayad, on the matching blocks of arrays of
one shape and one chunking, each block giving the block of the result in its place (a function
elementwise in the block structure: it may mix values within a block, not across blocks). Its
derivatives are ``f``'s, block by block: the VJP maps ``f``'s VJP over the blocks of the
cotangent and the inputs, the JVP maps ``f``'s JVP, and under ``vmap`` each block holds the
whole batch and ``vmap(f)`` runs on it.

``map_overlap(f, *arrays, depth=, boundary=)`` runs ``f`` on each block extended by ``depth``
elements of its neighbours (or of the boundary: Dask's 'none', 'reflect', 'periodic', 'nearest'
or a constant) and trims the result, as Dask's ``map_overlap``; it is built from differentiable
pieces (padding, slices, rechunk, map_blocks), so its VJP adds each halo's cotangent back into
the block it was read from.

Dask functions that take a Dask array (``da.map_blocks``, ``da.map_overlap``, ``da.blockwise``,
``da.cumsum``...) cannot see through an arrayad value: those that ask it for its Dask metadata
(``da.map_blocks``, ``da.blockwise``) and the methods raise a TypeError naming the functions
above; use them, arrayad's own functions (they run on Dask chunk by chunk), or call the Dask
function outside the transform on ``x.to_backend_array()``.
"""

from ._core._core import bind
from ._ops._namespace import ops
from ._ops._rules import batch_size_of, materialize_batch, primitive, shape_of
from ._ops.chunks import _is_dask, rechunk, rechunk_p

__all__ = ["map_blocks", "map_overlap", "rechunk"]


# -- map_blocks ----------------------------------------------------------------------------------
def _raw(v):
    from ._core._core import Tensor
    return v.detach().to_backend_array() if isinstance(v, Tensor) else v


def _blocks_impl(xp, *xs, f):
    if not any(_is_dask(x) for x in xs):
        return _raw(f(*xs))   # (another backend: the whole array is one block)
    import dask.array as da
    first = next(x for x in xs if _is_dask(x))
    # the blocks of the first Dask array: the others are cut like it
    xs = [x.rechunk(first.chunks) if _is_dask(x) and x.chunks != first.chunks else x
          for x in xs]
    return da.map_blocks(lambda *bs: _raw(f(*bs)), *xs, dtype=first.dtype, meta=first._meta)


def _blocks_vjp(g, ans, *xs, f):
    from .func import vjp
    outs = []
    for i in range(len(xs)):
        def pull(*bs, i=i):
            return vjp(f, *bs[:-1])[1](bs[-1])[i]
        # (the inputs first: their blocks, as in the forward pass; the cotangent, which may come
        # chunked otherwise, is cut like them)
        outs.append(bind(map_blocks_p, *xs, g, f=pull))
    return tuple(outs)


def _blocks_jvp(tangents, ans, *xs, f):
    from .func import jvp
    if all(t is None for t in tangents):
        return None
    n = len(xs)
    ts = [ops.zeros_like(x) if t is None else t for x, t in zip(xs, tangents)]

    def push(*bs):
        return jvp(f, tuple(bs[:n]), tuple(bs[n:]))[1]
    return bind(map_blocks_p, *xs, *ts, f=push)


def _blocks_batch(args, dims, *, f):
    from .func import vmap
    size = batch_size_of(args, dims)
    xs = [materialize_batch(x, d, size) for x, d in zip(args, dims)]
    # each block holds the whole batch (its axis one chunk), and vmap(f) maps over it
    xs = [bind(rechunk_p, x, chunks=("axes", (0, -1))) for x in xs]
    return bind(map_blocks_p, *xs, f=vmap(f)), 0


map_blocks_p = primitive("map_blocks", _blocks_impl)
map_blocks_p.vjp = _blocks_vjp
map_blocks_p.jvp = _blocks_jvp
map_blocks_p.batch = _blocks_batch


def _one_shape(api, arrays):
    """The one shape of ``arrays`` (blockwise functions take arrays of one shape), else an
    error that says what to do."""
    if not arrays:
        raise ValueError(f"{api}: give at least one array")
    shapes = {tuple(shape_of(a)) for a in arrays}
    if len(shapes) > 1:
        raise ValueError(f"{api}: the arrays differ in shape ({sorted(shapes)}); give arrays of "
                         f"one shape (broadcast_to them first).")
    return shapes.pop()


def map_blocks(f, *arrays):
    """``f`` on each block of ``arrays`` (Dask's ``map_blocks``), differentiably.

    Parameters
    ----------
    f : callable
        A function written with arrayad (so that transforms see through it), taking one block
        of each array and returning the block of the result: of the blocks' shape, for a
        function elementwise in the block structure (it may mix values within a block, not
        across blocks).
    *arrays : array
        Arrays of one shape; the blocks are those of the first Dask array among them (the
        others are rechunked like it).

    Returns
    -------
    array
        The blocks of ``f``'s results, chunked like the first Dask array. On another backend than
        Dask, ``f`` of the whole arrays.

    Raises
    ------
    ValueError
        If the arrays differ in shape.

    Examples
    --------
    >>> import dask.array as da
    >>> x = da.arange(6.0, chunks=3)
    >>> g = ad.func.grad(lambda x: ad.sum(ad.dask.map_blocks(lambda b: b ** 2, x)))(x)
    >>> g.compute()
    array([ 0.,  2.,  4.,  6.,  8., 10.])
    """
    _one_shape("arrayad.dask.map_blocks", arrays)
    return bind(map_blocks_p, *arrays, f=f)


# -- map_overlap ---------------------------------------------------------------------------------
# Built from differentiable pieces, so that every derivative (VJP, JVP, vmap, higher orders) is
# theirs: along each axis with a depth, the array is padded at its two ends as ``boundary`` says
# (slices, flips, copies: Dask's own rules), each block is cut out of the padded array with its
# neighbours' strips and the pieces joined and rechunked so that block i of the result is block i
# of x with its halo; map_blocks runs f on those blocks; and the halos are trimmed off again. The
# VJP of the slices adds each halo's cotangent back into the neighbour it came from (the
# reflected, wrapped or repeated elements at the ends), which is what a hand-written adjoint of
# Dask's overlap would do.

def _chunks_of(x):
    """The Dask chunks of the array a value stands for (a batch axis of vmap removed), or None."""
    from ._core._core import Tensor, Tracer
    if isinstance(x, Tracer):
        c = _chunks_of(x.value)
        if c is None or not x.batches or x._is_constant():   # (no batch axis at this level)
            return c
        return c[:x.bdim] + c[x.bdim + 1:]
    if isinstance(x, Tensor):
        return _chunks_of(x._value)
    return x.chunks if _is_dask(x) else None


def _along(ax, ndim, s):
    return (slice(None),) * ax + (s,) + (slice(None),) * (ndim - ax - 1)


def _pad(x, ax, d, boundary):
    """``x`` with ``d`` elements added at both ends of axis ``ax``, Dask's boundary rules."""
    nd, n = len(shape_of(x)), shape_of(x)[ax]
    if boundary == "reflect":        # (the edge element included, as Dask's reflect)
        lo, hi = ops.flip(x[_along(ax, nd, slice(0, d))], axis=ax), \
            ops.flip(x[_along(ax, nd, slice(n - d, n))], axis=ax)
    elif boundary == "periodic":
        lo, hi = x[_along(ax, nd, slice(n - d, n))], x[_along(ax, nd, slice(0, d))]
    elif boundary == "nearest":
        lo = ops.concat([x[_along(ax, nd, slice(0, 1))]] * d, axis=ax)
        hi = ops.concat([x[_along(ax, nd, slice(n - 1, n))]] * d, axis=ax)
    else:                            # a constant
        edge = x[_along(ax, nd, slice(0, d))]
        lo = hi = ops.full_like(edge, boundary)
    return ops.concat([lo, x, hi], axis=ax)


def _extend(x, ax, chunks, d, boundary):
    """Block i of the result: block i of ``x`` along ``ax`` (of sizes ``chunks``) with ``d``
    elements of its neighbours, or of the boundary, on each side; and for each block, where x's
    own elements sit in it: (first, count, size of the extended block)."""
    nd, n = len(shape_of(x)), shape_of(x)[ax]
    shift = 0 if boundary == "none" else d
    padded = x if shift == 0 else _pad(x, ax, d, boundary)
    pieces, layout, start = [], [], 0
    for c in chunks:
        lo, hi = max(start + shift - d, 0), min(start + shift + c + d, n + 2 * shift)
        pieces.append(padded[_along(ax, nd, slice(lo, hi))])
        layout.append((start + shift - lo, c, hi - lo))
        start += c
    out = ops.concat(pieces, axis=ax) if len(pieces) > 1 else pieces[0]
    return rechunk(out, {ax: tuple(size for _, _, size in layout)}), layout


def _trim(y, ax, layout):
    """The inverse cut: x's own elements of each extended block, in x's chunks."""
    nd = len(shape_of(y))
    pieces, offset = [], 0
    for first, c, size in layout:
        pieces.append(y[_along(ax, nd, slice(offset + first, offset + first + c))])
        offset += size
    out = ops.concat(pieces, axis=ax) if len(pieces) > 1 else pieces[0]
    return rechunk(out, {ax: tuple(c for _, c, _ in layout)})


def _per_axis(value, ndim, name):
    if isinstance(value, dict):
        out = {a % ndim: v for a, v in value.items()}
        return [out.get(a, 0 if name == "depth" else "none") for a in range(ndim)]
    if isinstance(value, (tuple, list)):
        if len(value) != ndim:
            raise ValueError(f"arrayad.dask.map_overlap: {name} has {len(value)} entries for "
                             f"arrays of {ndim} dimensions; give one per axis, or a dict")
        return list(value)
    return [value] * ndim


_BOUNDARIES = ("none", "reflect", "periodic", "nearest")


def map_overlap(f, *arrays, depth, boundary="none"):
    """``f`` on each block of ``arrays`` extended by its neighbours' values (Dask's
    ``map_overlap``, with ``trim=True``), differentiably.

    Parameters
    ----------
    f : callable
        A function written with arrayad, taking one extended block of each array and returning
        a block of the same shape (the halos are trimmed off its result): a stencil, a moving
        window, a filter that reads at most ``depth`` elements beyond its block.
    *arrays : array
        Arrays of one shape; the blocks are those of the first Dask array among them.
    depth : int, tuple or dict
        How many elements each block takes from its neighbours, for every axis (int), per axis
        (a tuple), or for some axes (``{axis: depth}``, the others 0).
    boundary : {'none', 'reflect', 'periodic', 'nearest'} or number, tuple or dict, optional
        What the blocks at the ends of an axis get beyond the array, as in Dask: nothing
        ('none', the default: those blocks are shorter), the mirror image with the edge element
        ('reflect'), the other end ('periodic'), the edge element repeated ('nearest'), or a
        constant.

    Returns
    -------
    array
        The trimmed blocks of ``f``'s results, chunked like the first Dask array. On another
        backend, the whole array is one block. The VJP adds each halo's cotangent back into the
        block (or the boundary element) it was read from.

    Raises
    ------
    ValueError
        If the arrays differ in shape, ``depth`` is negative or larger than an axis with a
        boundary other than 'none', or ``boundary`` is unknown.

    Examples
    --------
    >>> import dask.array as da
    >>> x = da.arange(4.0, chunks=2)
    >>> smooth = lambda b: ad.concat([b[:1], (b[:-2] + b[1:-1] + b[2:]) / 3, b[-1:]])
    >>> ad.dask.map_overlap(smooth, x, depth=1, boundary="nearest").compute()
    array([0.33333333, 1.        , 2.        , 2.66666667])
    """
    shape = _one_shape("arrayad.dask.map_overlap", arrays)
    nd = len(shape)
    depths = _per_axis(depth, nd, "depth")
    bounds = _per_axis(boundary, nd, "boundary")
    for ax, (d, b) in enumerate(zip(depths, bounds)):
        if not isinstance(d, int) or d < 0:
            raise ValueError(f"arrayad.dask.map_overlap: depth along axis {ax} is {d!r}; give a "
                             f"non-negative int (Dask's asymmetric depths are not supported)")
        if not (b in _BOUNDARIES or isinstance(b, (int, float, complex)) and
                not isinstance(b, bool)):
            raise ValueError(f"arrayad.dask.map_overlap: boundary {b!r} along axis {ax}; one of "
                             f"{', '.join(map(repr, _BOUNDARIES))} or a number")
        if d > shape[ax] and b != "none":
            raise ValueError(f"arrayad.dask.map_overlap: depth {d} along axis {ax} is larger "
                             f"than the axis ({shape[ax]}): the boundary has no values to give")
    first = next((c for c in map(_chunks_of, arrays) if c is not None), None)
    chunks = first if first is not None else tuple((n,) for n in shape)
    # (a rechunk to the chunks the arrays have: nothing forward; backward, the gradient made of
    # the halos' and blocks' pieces comes back in the input's chunks)
    layouts = {}
    ext = [a if _chunks_of(a) is None else rechunk(a, chunks) for a in arrays]
    for ax, (d, b) in enumerate(zip(depths, bounds)):
        if d:
            for i, a in enumerate(ext):
                ext[i], layouts[ax] = _extend(a, ax, chunks[ax], d, b)
    if not layouts:                  # (no axis shares anything: map_blocks itself)
        return map_blocks(f, *arrays)
    y = map_blocks(f, *ext)
    for ax, layout in layouts.items():
        y = _trim(y, ax, layout)
    return y
