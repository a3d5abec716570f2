"""``rechunk``: new Dask chunks, as a differentiable primitive (``arrayad.dask.rechunk`` and the
method ``x.rechunk``). Rechunking changes no value, so its derivative is the identity; the
cotangent goes back to the input's chunks, the tangent takes the new ones, and under ``vmap`` the
batch axis is left as it is. On an array of another backend it returns the array unchanged.
"""

from .._core._core import bind
from ._rules import defvjp, move_to_front, primitive


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
