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

Dask functions that take a Dask array (``da.map_blocks``, ``da.map_overlap``, ``da.blockwise``,
``da.cumsum``...) cannot see through an arrayad value: use arrayad's functions on it (they run
on Dask chunk by chunk), or call the Dask function outside the transform on
``x.to_backend_array()``.
"""

from ._core._core import bind
from ._ops._namespace import ops
from ._ops._rules import batch_size_of, materialize_batch, primitive, shape_of
from ._ops.chunks import _is_dask, rechunk, rechunk_p

__all__ = ["map_blocks", "rechunk"]


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
        def pull(gb, *bs, i=i):
            return vjp(f, *bs)[1](gb)[i]
        outs.append(bind(map_blocks_p, g, *xs, f=pull))
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
    if not arrays:
        raise ValueError("arrayad.dask.map_blocks: give at least one array")
    shapes = {tuple(shape_of(a)) for a in arrays}
    if len(shapes) > 1:
        raise ValueError(f"arrayad.dask.map_blocks: the arrays differ in shape ({sorted(shapes)}); "
                         f"give arrays of one shape (broadcast_to them first).")
    return bind(map_blocks_p, *arrays, f=f)
