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
from ._ops._rules import (batch_size_of, defvjp, materialize_batch, move_to_front, primitive,
                          shape_of)

__all__ = ["map_blocks", "rechunk"]


def _is_dask(x):
    try:
        import dask.array as da
    except ImportError:   # (no Dask installed: no Dask array either)
        return False
    return isinstance(x, da.Array)


def _spec(chunks):
    """``chunks`` as Dask accepts them for ``x.rechunk``, made hashable: a tuple of
    ``(axis, chunks of that axis)`` pairs, or the value itself for one spec of every axis."""
    if isinstance(chunks, dict):
        return ("axes",) + tuple(sorted((int(k), _frozen(v)) for k, v in chunks.items()))
    if isinstance(chunks, (tuple, list)):
        return ("axes",) + tuple((i, _frozen(c)) for i, c in enumerate(chunks))
    return ("all", chunks)


def _frozen(c):
    return tuple(c) if isinstance(c, list) else c


def _dask_chunks(spec, ndim):
    if spec[0] == "all":
        return spec[1]
    return {k % ndim if ndim else k: v for k, v in spec[1:]}


def _impl(xp, x, *, chunks):
    if not _is_dask(x):
        return x
    return x.rechunk(_dask_chunks(chunks, x.ndim))


def _vjp(g, ans, x, *, chunks):
    # the identity; a raw Dask cotangent goes back to the input's chunks (what a hand-written
    # gradient would get), any other (a tracer of an outer transform) is returned as it is
    if _is_dask(g) and _is_dask(x):
        return g.rechunk(x.chunks)
    return g


def _jvp(tangents, ans, x, *, chunks):
    t = tangents[0]
    return None if t is None else bind(rechunk_p, t, chunks=chunks)


def _batch(args, dims, *, chunks):
    x = move_to_front(args[0], dims[0])
    nd = len(x.shape) - 1
    if chunks[0] == "all":   # (the same spec for every axis but the batch axis)
        spec = ("axes",) + tuple((i + 1, chunks[1]) for i in range(nd))
    else:
        spec = ("axes",) + tuple(((k % nd if nd else k) + 1, v) for k, v in chunks[1:])
    return bind(rechunk_p, x, chunks=spec), 0


rechunk_p = primitive("rechunk", _impl)
defvjp(rechunk_p, _vjp, reads=["x"])   # (a Dask input is a lazy graph: keeping it costs nothing)
rechunk_p.jvp = _jvp
rechunk_p.batch = _batch


def rechunk(x, chunks):
    """``x`` cut into new Dask chunks, differentiably (``x.rechunk(chunks)`` as a method).

    Parameters
    ----------
    x : array
        An arrayad array (an eager tensor or a value inside a transform) on any backend.
    chunks : int, tuple, dict or str
        The chunks, as Dask's ``Array.rechunk`` takes them (``{0: 1000}``, ``(1000, -1)``,
        ``"auto"``).

    Returns
    -------
    array
        The same values chunked as asked on Dask; on another backend, ``x`` itself. The
        gradient is the cotangent in ``x``'s chunks.

    Examples
    --------
    >>> import dask.array as da
    >>> x = ad.asarray(da.ones(6, chunks=3))
    >>> x.rechunk(2).to_backend_array().chunks
    ((2, 2, 2),)
    """
    return bind(rechunk_p, x, chunks=_spec(chunks))


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
