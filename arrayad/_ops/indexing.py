"""Indexing: ``x[key]`` (getitem), functional ``x[key] = v`` (setitem), the scatter-add that is
getitem's transpose (index_add), and take / take_along_axis.

A key may hold arrays (integer or boolean index arrays, possibly tracers). Those are passed to the
primitive as positional arguments, so that transforms see them, and the rest of the key travels as
a template with ``Slot(i)`` placeholders.
"""

import arrayad as ad

from .._core._core import bind, shape_of
from ._rules import (arange_like, defjvp, defvjp, materialize_batch, move_to_front, ndim_of,
                     normalize_axis, primitive, unbroadcast)

__all__ = ["take", "take_along_axis"]
PRIMS = {}


class Slot:
    """Stands in a key template for the i-th index array."""
    __slots__ = ("i",)

    def __init__(self, i):
        self.i = i

    def __repr__(self):
        return f"Slot({self.i})"

    def __eq__(self, other):
        return isinstance(other, Slot) and other.i == self.i

    def __hash__(self):
        return hash(("Slot", self.i))


def split_key(key):
    """``key`` -> (template, index_arrays)."""
    if not isinstance(key, tuple):
        key = (key,)
    template = []
    arrays = []
    for k in key:
        if isinstance(k, (slice, type(None), type(Ellipsis), int)) and not isinstance(k, bool):
            template.append(k)
        elif isinstance(k, bool):
            template.append(k)
        elif isinstance(k, (list, tuple)):
            template.append(Slot(len(arrays)))
            arrays.append(ad.asarray(k))
        else:
            template.append(Slot(len(arrays)))
            arrays.append(k)
    return tuple(template), tuple(arrays)


def fill_key(template, arrays):
    return tuple(arrays[k.i] if isinstance(k, Slot) else k for k in template)


def _is_basic(template):
    return not any(isinstance(k, Slot) or isinstance(k, bool) for k in template)


# -- getitem ---------------------------------------------------------------------------------------
def _getitem_impl(xp, x, *idx, key):
    return x[fill_key(key, idx)]


getitem_p = primitive("getitem", _getitem_impl)


def getitem_vjp(g, ans, x, *idx, key):
    return bind(index_add_p, ad.zeros_like(x), g, *idx, key=key)


getitem_p.vjp = (getitem_vjp,)
defjvp(getitem_p, lambda t, ans, x, *idx, key: bind(getitem_p, t, *idx, key=key))


def _getitem_batch(args, dims, key):
    x, idx = args[0], args[1:]
    if dims[0] is not None and not any(d is not None for d in dims[1:]) and _is_basic(key):
        return bind(getitem_p, move_to_front(x, dims[0]), *idx, key=(slice(None),) + key), 0
    if dims[0] is not None and not any(d is not None for d in dims[1:]):
        # Advanced indices: placed after a leading full slice they stay together, so the batch
        # dimension stays in front when they are adjacent; otherwise loop.
        slots = [i for i, k in enumerate(key) if isinstance(k, (Slot, bool))]
        if slots == list(range(slots[0], slots[-1] + 1)) and Ellipsis not in key:
            return bind(getitem_p, move_to_front(x, dims[0]), *idx, key=(slice(None),) + key), 0
    from ._rules import batch_fallback
    return batch_fallback(getitem_p, list(args), list(dims), {"key": key}, None)


getitem_p.batch = _getitem_batch
PRIMS["getitem"] = getitem_p


def getitem(x, key):
    template, arrays = split_key(key)
    return bind(getitem_p, x, *arrays, key=template)


# -- index_add: out = copy(base); out[key] += v (repeated indices accumulate) ----------------------
def _index_add_impl(xp, base, v, *idx, key):
    from ..backends import backend_of
    return backend_of(base).index_add(base, fill_key(key, idx), v)


index_add_p = primitive("index_add", _index_add_impl)
index_add_p.vjp = (lambda g, ans, base, v, *idx, key: g,
                   lambda g, ans, base, v, *idx, key:
                   unbroadcast(bind(getitem_p, g, *idx, key=key), v))


def _index_add_jvp(tangents, ans, base, v, *idx, key):
    tb, tv = tangents[0], tangents[1]
    if tb is None and tv is None:
        return None
    tb = ad.zeros_like(base) if tb is None else tb
    if tv is None:
        return tb
    return bind(index_add_p, tb, tv, *idx, key=key)


index_add_p.jvp = _index_add_jvp


def _setlike_batch(p):
    def rule(args, dims, key):
        base, v, idx = args[0], args[1], args[2:]
        if any(d is not None for d in dims[2:]) or not _is_basic(key):
            from ._rules import batch_fallback
            return batch_fallback(p, list(args), list(dims), {"key": key}, None)
        size = shape_of(base)[dims[0]] if dims[0] is not None else shape_of(v)[dims[1]]
        base = materialize_batch(base, dims[0], size)
        if dims[1] is not None:
            v = move_to_front(v, dims[1])
            target = ndim_of(bind(getitem_p, base, key=(slice(None),) + key))
            missing = target - ndim_of(v)
            if missing > 0:
                vs = shape_of(v)
                v = ad.reshape(v, vs[:1] + (1,) * missing + vs[1:])
        return bind(p, base, v, *idx, key=(slice(None),) + key), 0
    return rule


index_add_p.batch = _setlike_batch(index_add_p)
PRIMS["index_add"] = index_add_p


# -- setitem (functional) --------------------------------------------------------------------------
def _setitem_impl(xp, x, v, *idx, key):
    from ..backends import backend_of
    return backend_of(x).index_set(x, fill_key(key, idx), v)


setitem_p = primitive("setitem", _setitem_impl)
setitem_p.vjp = (lambda g, ans, x, v, *idx, key: bind(setitem_p, g, 0.0, *idx, key=key),
                 lambda g, ans, x, v, *idx, key:
                 unbroadcast(bind(getitem_p, g, *idx, key=key), v))


def _setitem_jvp(tangents, ans, x, v, *idx, key):
    tx, tv = tangents[0], tangents[1]
    if tx is None and tv is None:
        return None
    tx = ad.zeros_like(x) if tx is None else tx
    tv = 0.0 if tv is None else tv
    return bind(setitem_p, tx, tv, *idx, key=key)


setitem_p.jvp = _setitem_jvp
setitem_p.batch = _setlike_batch(setitem_p)
PRIMS["setitem"] = setitem_p


def setitem(x, key, value):
    """The array ``x`` with ``x[key] = value`` applied, as a new value (the caller rebinds)."""
    template, arrays = split_key(key)
    return bind(setitem_p, x, value, *arrays, key=template)


# -- take / take_along_axis ------------------------------------------------------------------------
def take(x, indices, /, *, axis=None):
    """Elements of ``x`` at integer ``indices`` along ``axis`` (x must be 1-d if axis is None)."""
    if axis is None:
        if ndim_of(x) != 1:
            raise ValueError("take: axis may be omitted only for a one-dimensional x")
        axis = 0
    axis = normalize_axis(axis, ndim_of(x))
    return getitem(x, (slice(None),) * axis + (indices,))


def take_along_axis(x, indices, /, *, axis=-1):
    """Elements of ``x`` at ``indices``, which has the shape of x but along ``axis``."""
    nd = ndim_of(x)
    axis = normalize_axis(axis, nd)
    key = []
    ishape = shape_of(indices)
    for a in range(nd):
        if a == axis:
            key.append(indices)
        else:
            shape = [1] * nd
            shape[a] = ishape[a]
            key.append(ad.reshape(arange_like(x, ishape[a]), tuple(shape)))
    return getitem(x, tuple(key))


