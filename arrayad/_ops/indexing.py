"""Indexing: ``x[key]`` (getitem), functional ``x[key] = v`` (setitem), the scatter-add that is
getitem's transpose (index_add), and take / take_along_axis.

A key may hold arrays (integer or boolean index arrays, possibly tracers). Those are passed to the
primitive as positional arguments, so that transforms see them, and the rest of the key travels as
a template with ``Slot(i)`` placeholders. Keys follow NumPy's semantics (which the standard's
integer-array and boolean-mask indexing are subsets of); the backend adapters lower them to what
each library supports (``Backend.getitem``/``index_set``/``index_add``).

Batching (see ``_batched_key``): a batched ``x`` with unbatched indices gets a leading full slice;
batched index arrays get their batch dimension in front and, when ``x`` is batched too, an extra
``arange(B)`` index placed next to them, so one gather serves the whole batch. Only a batched
boolean mask has no rule: its result shape depends on the data (except ``x[mask] = scalar``,
which is a ``where``).
"""

import numbers

from ._namespace import ops

from .._core._core import Tensor, bind, dtype_of, shape_of, structural_zeros, zeros_mask
from .._dtypes import from_backend
from ..backends import backend_of, can_stand_for
from ._rules import (PY_SCALARS, Declarations, arange_like, constant_like,
                     materialize_batch, move_to_front, ndim_of, normalize_axis, per_primitive,
                     unbroadcast)

decl = Declarations(globals())


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


def _is_int(k):
    return isinstance(k, int) and not isinstance(k, bool)


def split_key(key, x=None):
    """``key`` -> (template, index_arrays). Lists become arrays on the backend of ``x``."""
    if not isinstance(key, tuple):
        key = (key,)
    template = []
    arrays = []
    for k in key:
        if k is None or k is Ellipsis or isinstance(k, (slice, bool)) or _is_int(k):
            template.append(k)
        elif isinstance(k, numbers.Integral) and not hasattr(k, "shape"):
            template.append(int(k))
        elif hasattr(k, "dtype") and not hasattr(k, "shape"):   # NumPy scalars
            template.append(bool(k) if k.dtype.kind == "b" else int(k))
        else:
            if isinstance(k, (list, tuple)):
                k = (constant_like(x, lambda xp, k=k: xp.asarray(k)) if x is not None
                     else ops.asarray(k))
            elif type(k) is Tensor and type(k._value).__module__ == "numpy" and x is not None \
                    and k._value.dtype.kind in "iub" \
                    and not can_stand_for(backend_of(k._value), backend_of(x)):
                # An eager Tensor of NumPy positions (ad.asarray([0, 2]) on the default backend)
                # indexing another backend's array: host data as a NumPy array is, below
                k = constant_like(x, lambda xp, k=k._value: xp.asarray(k))
            elif type(k).__module__ == "numpy" and x is not None and k.dtype.kind in "iub" \
                    and not can_stand_for(backend_of(k), backend_of(x)):
                # NumPy positions or a NumPy mask indexing another backend's array: host data
                # like a list (scikit-learn's cross-validation splits; torch takes them too)
                k = constant_like(x, lambda xp, k=k: xp.asarray(k))
            elif type(k).__module__.split(".")[0] == "numpy" and hasattr(k, "shape") and \
                    not shape_of(k) and x is not None and dtype_of(k).kind in "iu":
                # A NumPy 0-d integer array (e.g. from an int loop) indexing another backend.
                template.append(int(k))
                continue
            template.append(Slot(len(arrays)))
            arrays.append(k)
    return tuple(template), tuple(arrays)


def fill_key(template, arrays):
    return tuple(arrays[k.i] if isinstance(k, Slot) else k for k in template)


def _is_basic(template):
    return not any(isinstance(k, Slot) or isinstance(k, bool) for k in template)


def _consumed(k, arrays):
    """How many axes of the indexed array one key entry consumes."""
    if k is None or k is Ellipsis or isinstance(k, bool):
        return 0
    if isinstance(k, Slot):
        a = arrays[k.i]
        return ndim_of(a) if dtype_of(a).kind == "b" else 1
    return 1


def normalize_template(template, arrays, ndim):
    """Expand the Ellipsis into full slices and add trailing slices, so that every entry sits at
    a known axis (an Ellipsis that expands to nothing is kept: NumPy counts it as a separator
    between advanced indices)."""
    used = sum(_consumed(k, arrays) for k in template)
    n_ell = sum(1 for k in template if k is Ellipsis)
    if n_ell > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    if used > ndim:
        raise IndexError(f"too many indices for array: array is {ndim}-dimensional, but {used} "
                         f"were indexed")
    fill = (slice(None),) * (ndim - used)
    if n_ell == 0:
        return tuple(template) + fill
    out = []
    for k in template:
        if k is Ellipsis:
            out.extend(fill if fill else (Ellipsis,))
        else:
            out.append(k)
    return tuple(out)


class _Layout:
    """Where the dimensions of ``x[key]`` come from, for a normalized template (NumPy rules:
    ints count as advanced indices when there are index arrays; the broadcast index dimensions
    replace the advanced block when it is contiguous, else they go first)."""

    def __init__(self, template, arrays, dims=None):
        # ``dims``: the batch dims of the arrays under vmap (their per-example rank is one less)
        dims = dims or (None,) * len(arrays)
        has_arrays = any(isinstance(k, Slot) for k in template)
        self.adv = [p for p, k in enumerate(template)
                    if isinstance(k, Slot) or (has_arrays and _is_int(k))]
        self.contiguous = not self.adv or self.adv == list(range(self.adv[0], self.adv[-1] + 1))
        ranks = [0]
        self.bool_masks = []
        for k in template:
            if isinstance(k, Slot):
                a = arrays[k.i]
                if dtype_of(a).kind == "b":
                    self.bool_masks.append(k.i)
                    ranks.append(1)
                else:
                    ranks.append(ndim_of(a) - (dims[k.i] is not None))
        self.adv_rank = max(ranks) if self.adv else 0
        first = self.adv[0] if self.adv else len(template)
        self.n_before = sum(1 for k in template[:first]
                            if k is None or isinstance(k, (slice, bool)))
        basic_out = sum(1 for p, k in enumerate(template)
                        if p not in self.adv and (k is None or isinstance(k, (slice, bool))))
        self.rank = basic_out + self.adv_rank
        # x's axis of the first advanced entry (where a batch dimension must sit to join them)
        self.first_axis = sum(_consumed(k, arrays) for k in template[:first])
        # the position of the advanced block in the result
        self.adv_out = self.n_before if self.contiguous else 0
        self.python_bools = any(isinstance(k, bool) for k in template)


# -- getitem ---------------------------------------------------------------------------------------
def _getitem_impl(xp, x, *idx, key):
    return backend_of(x).getitem(x, fill_key(key, idx))


# NOTE [strong zeros] in the core: the rules below say which zeros of the cotangents (tangents)
# they make are zero by construction (outside the key of a scatter, inside the key of an
# overwrite), so that a product with an inf or nan derivative stays zero there. A mask of the
# indexed part combines with the written value's own mask only for keys without index arrays
# (an index array may repeat a position, which then takes several values).

def _full_mask(mask, like):
    """A mask (callable or None: no structural zero) as a bool array of ``like``'s shape."""
    m = mask() if mask is not None else ops.zeros_like(like, dtype=bool)
    return ops.broadcast_to(m, shape_of(like)) if shape_of(m) != shape_of(like) else m


def _key_zeros(out, like, idx, key, outside, inside):
    """Register ``out`` (shaped like ``like``) as zero by construction where ``outside``
    (None: nowhere, True: everywhere, or a mask) says, outside ``key``, and where ``inside``
    says within it."""
    if idx and inside is not True:
        inside = None
    if outside is None and inside is None:
        return out

    def mask():
        if outside is True:
            base = ops.ones_like(like, dtype=bool)
        else:
            base = _full_mask(outside, like)
        if inside is None or inside is True:
            part = inside is True
        else:
            part = _full_mask(inside, bind(getitem_p, like, *idx, key=key))
        return bind(setitem_p, base, part, *idx, key=key)

    return structural_zeros(out, mask)


def _gathered(out, g, idx, key):
    """``out = g[key]``, zero by construction where ``g`` was."""
    mg = zeros_mask(g)
    if mg is None:
        return out
    return structural_zeros(out, lambda: bind(getitem_p, _full_mask(mg, g), *idx, key=key))


def getitem_vjp(g, ans, x, *idx, key):
    out = bind(index_add_p, ops.zeros_like(x), g, *idx, key=key)
    return _key_zeros(out, x, idx, key, True, zeros_mask(g))


def _getitem_jvp(t, ans, x, *idx, key):
    return _gathered(bind(getitem_p, t, *idx, key=key), t, idx, key)


def _mask_error(what):
    return RuntimeError(
        f"vmap: {what} with a batched boolean mask: the number of selected elements (so the "
        f"shape of the result) can differ between batch elements. We do not support batching "
        f"operators that can output dynamic shape. Use where(mask, x, 0) to keep the shape (or "
        f"x[mask] = value, which works under vmap).")


def _batched_key(args, dims, key, size):
    """Rewrite a batched indexing call as one unbatched call on the whole batch.

    Returns (x, idx, key, out_dim, layout): the indexed array with its batch dimension placed,
    the index arrays, the new template and the batch dimension of the result. ``args`` is
    (x, *idx) with ``dims`` their batch dims (the x of setitem/index_add is the base).
    """
    x, idx = args[0], list(args[1:])
    xd, idims = dims[0], list(dims[1:])
    lay = _Layout(key, idx, idims)
    if not any(d is not None for d in idims):
        # Unbatched indices: a leading full slice keeps the batch dimension of x. Advanced
        # indices that are not contiguous put their broadcast dimensions first, before it.
        x = materialize_batch(x, xd, size)
        out_dim = 0 if lay.contiguous else lay.adv_rank
        return x, idx, (slice(None),) + key, out_dim, lay
    for i, d in enumerate(idims):
        if d is not None and dtype_of(idx[i]).kind == "b":
            raise _mask_error("indexing")
    if lay.python_bools:
        return None
    # Batched index arrays: batch dimension in front, padded to the broadcast rank of the
    # indices, so that it becomes the first dimension of their broadcast shape.
    for i, d in enumerate(idims):
        if d is not None:
            a = move_to_front(idx[i], d)
            s = shape_of(a)
            missing = lay.adv_rank - (len(s) - 1)
            if missing:
                a = ops.reshape(a, s[:1] + (1,) * missing + s[1:])
            idx[i] = a
    if xd is not None:
        # x batched too: its batch axis joins the advanced block, indexed by arange(B).
        x = ops.moveaxis(x, xd, lay.first_axis)
        ar = ops.reshape(arange_like(x, size), (size,) + (1,) * lay.adv_rank)
        first = lay.adv[0]
        key = key[:first] + (Slot(len(idx)),) + key[first:]
        idx.append(ar)
    return x, idx, key, lay.adv_out, lay


def _getitem_batch(args, dims, key):
    if dims[0] is not None and _is_basic(key):
        return bind(getitem_p, move_to_front(args[0], dims[0]), *args[1:],
                    key=(slice(None),) + key), 0
    size = next(shape_of(a)[d] for a, d in zip(args, dims) if d is not None)
    r = _batched_key(args, dims, key, size)
    if r is None:
        from ._rules import batch_fallback
        return batch_fallback(getitem_p, list(args), list(dims), {"key": key}, None)
    x, idx, key2, out_dim, _ = r
    return bind(getitem_p, x, *idx, key=key2), out_dim


def _masked(x, *idx, **params):
    # (a boolean mask selects as many elements as it has True values: a shape of the values)
    return any(hasattr(i, "dtype") and dtype_of(i).kind == "b" for i in idx)


# (linear in x: the JVP is the same gather of the tangent)
getitem_p = decl.primitive("getitem", _getitem_impl, vjp=(getitem_vjp,), jvp=(_getitem_jvp,),
                           batch=_getitem_batch, value_shaped=_masked)


def _prepare(x, key):
    template, arrays = split_key(key, x)
    if not _is_basic(template):
        template = normalize_template(template, arrays, ndim_of(x))
    return template, arrays


def getitem(x, key):
    """``x[key]`` for every key the standard allows (and NumPy's mixed keys)."""
    template, arrays = _prepare(x, key)
    return bind(getitem_p, x, *arrays, key=template)


# -- index_add: out = copy(base); out[key] += v (repeated indices accumulate) ----------------------
def _cast_value(xp, v, like):
    if isinstance(v, PY_SCALARS):
        return v
    return xp.astype(v, like.dtype) if v.dtype != like.dtype else v


def _written_value(xp, v, like):
    """The value of ``x[key] = v`` in the dtype of ``x`` (NumPy's rule), a real Python number of
    another kind too: 1.1 written into integers is 1 on every backend (array-api-strict refuses
    a float scalar with an integer array). A complex number into a real array stays the
    backend's error. (Not for index_add: ``x[i] += 1.1`` on integers raises, as in NumPy.)"""
    if isinstance(v, PY_SCALARS) and not isinstance(v, complex):
        kind = from_backend(like.dtype).kind
        if kind != "b" if isinstance(v, bool) else \
                kind not in "iufc" if isinstance(v, int) else kind not in "fc":
            return xp.astype(xp.asarray(v, device=backend_of(like).device_of(like)), like.dtype)
    return _cast_value(xp, v, like)


def _index_add_impl(xp, base, v, *idx, key):
    return backend_of(base).index_add(base, fill_key(key, idx), _cast_value(xp, v, base))


def _index_add_jvp(tangents, ans, base, v, *idx, key):
    tb, tv = tangents[0], tangents[1]
    if tb is None and tv is None:
        return None
    if tv is None:
        return tb
    if tb is None:   # (getitem's VJP, differentiated forward: zero outside the key)
        out = bind(index_add_p, ops.zeros_like(base), tv, *idx, key=key)
        return _key_zeros(out, base, idx, key, True, zeros_mask(tv))
    out = bind(index_add_p, tb, tv, *idx, key=key)
    mb = zeros_mask(tb)
    if mb is None or idx:
        return out
    mv = zeros_mask(tv)
    return _key_zeros(out, base, idx, key, mb,
                      None if mv is None else _both_masks(mb, mv, base, idx, key))


@per_primitive
def _setlike_batch(p):
    def rule(args, dims, key):
        base, v, idx = args[0], args[1], args[2:]
        size = next(shape_of(a)[d] for a, d in zip(args, dims) if d is not None)
        if p is setitem_p and len(idx) == 1 and dims[2] is not None and \
                dtype_of(idx[0]).kind == "b" and key[0] == Slot(0) and \
                all(k == slice(None) for k in key[1:]) and \
                ndim_of(v) - (dims[1] is not None) == 0:
            # x[mask] = scalar: an elementwise select, whatever the mask holds.
            return _masked_set_batch(base, v, idx[0], dims, key, size)
        if _is_basic(key):
            # Basic key: the batch dimension stays in front of base and of the written block.
            lay = _Layout(key, idx)
            base = materialize_batch(base, dims[0], size)
            v = _batched_value(v, dims[1], lay.rank, 0)
            return bind(p, base, v, *idx, key=(slice(None),) + key), 0
        if any(d is not None and dtype_of(a).kind == "b" for a, d in zip(idx, dims[2:])):
            raise _mask_error("x[mask] += v" if p is index_add_p else "x[mask] = v (non-scalar v)")
        # The base must carry the batch (the result does); then as for getitem.
        base = materialize_batch(base, dims[0], size)
        r = _batched_key((base,) + tuple(idx), (0,) + tuple(dims[2:]), key, size)
        if r is None:
            from ._rules import batch_fallback
            return batch_fallback(p, list(args), list(dims), {"key": key}, None)
        base2, idx2, key2, out_dim, lay = r
        # v is laid out like the per-example x[key]; place its batch dim where the batched
        # gather puts it.
        v = _batched_value(v, dims[1], lay.rank, out_dim)
        out = bind(p, base2, v, *idx2, key=key2)
        # The base's batch axis moved to x's first advanced axis (when indices are batched) or
        # stayed in front.
        base_dim = lay.first_axis if any(d is not None for d in dims[2:]) else 0
        return out, base_dim
    return rule


def _batched_value(v, vd, rank, at):
    """The written value, laid out for a batched block of rank ``rank``+1 whose batch dimension
    is at ``at`` (an unbatched value gets a size-one axis there unless broadcasting from the
    right already lines it up)."""
    if vd is None:
        if at == 0 or ndim_of(v) == 0:
            return v
        s = shape_of(v)
        v = ops.reshape(v, (1,) * (rank - len(s)) + s)
        return ops.expand_dims(v, axis=at)
    v = move_to_front(v, vd)
    s = shape_of(v)
    missing = rank - (len(s) - 1)
    if missing > 0:
        v = ops.reshape(v, s[:1] + (1,) * missing + s[1:])
    return ops.moveaxis(v, 0, at) if at else v


def _masked_set_batch(base, v, mask, dims, key, size):
    base = materialize_batch(base, dims[0], size)
    m = move_to_front(mask, dims[2])
    ms = shape_of(m)
    nd = ndim_of(base)
    m = ops.reshape(m, ms + (1,) * (nd - len(ms)))
    if dims[1] is not None:
        v = ops.reshape(move_to_front(v, dims[1]), (size,) + (1,) * (nd - 1))
    return ops.where(m, v, base), 0


def _both_masks(mb, mv, base, idx, key):
    """Within ``key``: structural in the base's mask ``mb`` and in ``mv``."""
    return lambda: ops.logical_and(bind(getitem_p, _full_mask(mb, base), *idx, key=key), mv())


def _gather_vjp(g, ans, base, v, *idx, key):
    return unbroadcast(_gathered(bind(getitem_p, g, *idx, key=key), g, idx, key), v)


index_add_p = decl.primitive(
    "index_add", _index_add_impl,
    vjp=(lambda g, ans, base, v, *idx, key: g, _gather_vjp),
    full_jvp=_index_add_jvp, batch=_setlike_batch)


# -- setitem (functional) --------------------------------------------------------------------------
def _setitem_impl(xp, x, v, *idx, key):
    return backend_of(x).index_set(x, fill_key(key, idx), _written_value(xp, v, x))


def _setitem_jvp(tangents, ans, x, v, *idx, key):
    tx, tv = tangents[0], tangents[1]
    if tx is None and tv is None:
        return None
    # (a missing tangent is zero by construction: the zeros standing in for it too)
    outside = True if tx is None else zeros_mask(tx)
    inside = True if tv is None else zeros_mask(tv)
    tx = ops.zeros_like(x) if tx is None else tx
    tv = 0.0 if tv is None else tv
    return _key_zeros(bind(setitem_p, tx, tv, *idx, key=key), x, idx, key, outside, inside)


def _overwritten_vjp(g, ans, x, v, *idx, key):
    # the old array's cotangent: zero by construction where it was overwritten
    out = bind(setitem_p, g, 0.0, *idx, key=key)
    return _key_zeros(out, x, idx, key, zeros_mask(g), True)


setitem_p = decl.primitive(
    "setitem", _setitem_impl,
    vjp=(_overwritten_vjp, _gather_vjp),
    full_jvp=_setitem_jvp, batch=_setlike_batch)


def setitem(x, key, value):
    """The array ``x`` with ``x[key] = value`` applied, as a new value (the caller rebinds)."""
    template, arrays = _prepare(x, key)
    return bind(setitem_p, x, value, *arrays, key=template)


def index_add(x, key, value):
    """``x`` with ``value`` added at ``key``; repeated indices accumulate (scatter-add)."""
    template, arrays = _prepare(x, key)
    return bind(index_add_p, x, value, *arrays, key=template)


# -- take / take_along_axis ------------------------------------------------------------------------
@decl.composite
def take(x, indices, /, *, axis=None):
    """Elements of ``x`` at integer ``indices`` along ``axis`` (NumPy's ``take``).

    Parameters
    ----------
    x : array
        The input.
    indices : 1-d integer array
        The positions along ``axis`` (negative ones count from the end).
    axis : int, optional
        The axis to take along; may be omitted only for a 1-d ``x``.

    Returns
    -------
    array
        An array of the backend and kind of ``x`` (inside a transform, its value).
        Differentiable in ``x``: the gradient is scattered back to the positions taken, summed
        where an index repeats.
        Its shape is that of ``x`` with axis ``axis`` of length ``len(indices)``.

    Raises
    ------
    ValueError
        If ``axis`` is omitted and ``x`` is not 1-d.
    IndexError
        If ``axis`` is out of range, an index is out of bounds (NumPy), or ``indices`` is not
        of an integer dtype.
    TypeError
        If ``x`` and ``indices`` are arrays of two backends.

    Examples
    --------
    >>> x = ad.tensor([10.0, 20.0, 30.0])
    >>> ad.take(x, ad.asarray([2, 0]))
    tensor([30., 10.])
    >>> ad.func.grad(lambda v: ad.take(v, ad.asarray([0, 0, 2])).sum())(np.ones(3))
    array([2., 0., 1.])
    """
    if axis is None:
        if ndim_of(x) != 1:
            raise ValueError("take: axis may be omitted only for a one-dimensional x")
        axis = 0
    axis = normalize_axis(axis, ndim_of(x))
    return getitem(x, (slice(None),) * axis + (indices,))


@decl.composite
def take_along_axis(x, indices, /, *, axis=-1):
    """Elements of ``x`` at ``indices`` along ``axis``, one choice per position of the other axes
    (NumPy's ``take_along_axis``; the companion of ``argsort``).

    Parameters
    ----------
    x : array
        The input.
    indices : integer array
        As many dimensions as ``x``; along the other axes its shape broadcasts against that
        of ``x``.
    axis : int
        The axis to take along (default: the last).

    Returns
    -------
    array
        An array of the backend and kind of ``x`` (inside a transform, its value).
        Differentiable in ``x``: the gradient is scattered back to the positions taken, summed
        where an index repeats.
        Its shape is the broadcast of ``x`` and ``indices`` outside ``axis``, and that of
        ``indices`` along it.

    Raises
    ------
    ValueError
        If ``x`` and ``indices`` have different numbers of dimensions.
    IndexError
        If ``axis`` is out of range, an index is out of bounds (NumPy), or the shapes do not
        broadcast.
    TypeError
        If ``x`` and ``indices`` are arrays of two backends.

    Examples
    --------
    >>> m = ad.tensor([[10.0, 30.0, 20.0], [60.0, 40.0, 50.0]])
    >>> ad.take_along_axis(m, ad.argsort(m, axis=1), axis=1)   # each row sorted
    tensor([[10., 20., 30.],
            [40., 50., 60.]])
    """
    nd = ndim_of(x)
    if ndim_of(indices) != nd:
        raise ValueError("take_along_axis: x and indices must have the same number of dimensions")
    axis = normalize_axis(axis, nd)
    key = []
    xshape = shape_of(x)
    for a in range(nd):
        if a == axis:
            key.append(indices)
        else:
            shape = [1] * nd
            shape[a] = xshape[a]   # broadcasts against the indices, as NumPy's does
            key.append(ops.reshape(arange_like(x, shape[a]), tuple(shape)))
    return getitem(x, tuple(key))
