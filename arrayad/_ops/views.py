"""Views and in-place updates: torch's aliasing model on every backend (NOTE [views] in the core).

A view is an array that shows part (or all) of another, its base: ``x[1:3]``, ``x.T``,
``reshape`` where NumPy would not copy, ``diagonal``, ``real``, ``detach()``... What kind of view
it is (a ``View`` below) says how to compute it from its base (``read``) and how to write it back
into the base (``write``), both with differentiable arrayad operations, so that writing through a
view of a value with a history differentiates like torch's CopySlices. Every in-place update, the
operators (``x += 1``, ``x[i] = v``) and the methods (``add_``, ``zero_``, ``copy_``...) alike,
goes through ``update_in_place``: it checks the update (torch's and NumPy's rules), rebinds the
array, stamps it (the version counter that the backward pass checks) and brings its base and
every other view of the base up to date.

Whether an operation makes a view follows NumPy (torch agrees): basic indexing, transposes,
``expand_dims``/``squeeze``, ``diagonal``, ``real``/``imag`` of complex arrays, ``detach()`` and
``.data`` always; ``reshape`` when the data need not move, which depends on how the array lies
in its base's memory (``_layout``); ``broadcast_to`` makes a read-only view. Backends without
views (array-api-strict, JAX, Dask) behave the same, since the views are arrayad's.
"""

import numpy as np

from .._core import _core
from .._core._core import Array, Tensor, bind
from ._namespace import ops
from .indexing import getitem, setitem
from ..backends import backend_of
from ._rules import ELEMENTWISE, Declarations

decl = Declarations(globals())


class View:
    """How a view shows its base. ``read(base)``: the view's value; ``write(base, value)``: the
    base with the viewed part replaced by ``value``; ``layout(a)``: the same view of a NumPy
    array ``a`` laid out as the base (only the strides matter: see ``_layout``)."""
    __slots__ = ()
    writable = True
    name = "view"

    def read(self, base):
        raise NotImplementedError

    def write(self, base, value):
        raise NotImplementedError

    def layout(self, a):
        raise NotImplementedError


class Index(View):
    """``base[key]`` for a basic key (integers, slices, None, Ellipsis)."""
    __slots__ = ("key",)
    name = "indexing"

    def __init__(self, key):
        self.key = key

    def read(self, base):
        return getitem(base, self.key)

    def write(self, base, value):
        return setitem(base, self.key, value)

    def layout(self, a):
        return a[self.key]


class Detached(View):
    """``detach()`` and ``.data``: the base's data without its history; writing into it changes
    the base's data and keeps the base's history (torch's)."""
    __slots__ = ()
    name = "detach"

    def read(self, base):
        return _without_history(base)

    def write(self, base, value):
        return bind(with_data_p, base, value)

    def layout(self, a):
        return a


def _with_data_vjp(g, ans, base, data):
    return g


def _zero_cotangent(g, ans, base, data):
    return ops.zeros_like(g)


# ``data``'s values, with a zero derivative for ``base``: an in-place update that leaves no
# history (``y.zero_()``, ``y.floor_()``, ``y.fill_(2.)``) keeps ``y`` in the graph as torch's do
# (``y.requires_grad`` stays True and the gradient through it is zero, not an error).
# (eager tensors only, the tape and forward_ad's dual levels: inside a transform an update
# without history makes a constant, whose derivative is zero already)
with_zero_grad_p = decl.primitive(
    "with_zero_grad", lambda xp, base, data: data, vjp=(_zero_cotangent, None), reads=["", ""],
    jvp=(lambda t, ans, base, data: ops.zeros_like(t), None))

with_data_p = decl.primitive(
    "with_data", lambda xp, base, data: data, vjp=(_with_data_vjp, None), reads=["", ""],
    jvp=(lambda t, ans, base, data: t, None), batch=ELEMENTWISE)
"""``data``'s values with ``base``'s derivative: what writing into a detached view does to its
base (the data changes, the history stays)."""


# Writing into ``z.real`` or ``z.imag`` (``ComplexPart`` in elementwise.py): ``z`` with one part
# replaced by a real ``v`` of its shape. Linear in (z, v): the cotangent of z is g without that
# part, v's is that part of g.
def _with_part_impl(xp, z, v, imag):
    return backend_of(z).with_part(z, v, imag)


def _without_part(g, imag):
    return bind(with_part_p, g, ops.zeros_like(ops.real(g)), imag=imag)


with_part_p = decl.primitive(
    "with_part", _with_part_impl, reads=["", ""], batch=ELEMENTWISE,
    vjp=(lambda g, ans, z, v, imag: _without_part(g, imag),
         lambda g, ans, z, v, imag: ops.imag(g) if imag else ops.real(g)),
    jvp=(lambda t, ans, z, v, imag: _without_part(t, imag),
         lambda t, ans, z, v, imag: bind(with_part_p, ops.zeros_like(ans), t, imag=imag)))


def make_view(out, base, view):
    """Record ``out`` as a view of ``base`` (when both are arrayad arrays); returns ``out``."""
    if isinstance(out, Array) and isinstance(base, Array) and out is not base:
        _core.view_of(out, base, view)
    return out


def _layout(x):
    """A NumPy array laid out in memory as ``x`` is in the memory of the array at the root of
    its views (which counts as C-contiguous), to ask NumPy whether a reshape would copy. Its
    elements are one byte at a stride of two, so that ``real``/``imag`` of complex values (every
    other float) fit the same picture; only the strides are ever read."""
    if x._base is None:
        return np.empty(tuple(x.shape) + (2,), np.int8)[..., 0]
    return x._view.layout(_layout(x._base))


def reshapes_without_copy(x, shape):
    """Whether reshaping the arrayad array ``x`` to ``shape`` moves no data (so it is a view), as
    NumPy decides for an array laid out as ``x``."""
    if x._base is None:
        return True
    a = _layout(x)
    r = a.reshape(shape)
    return r.size == 0 or np.may_share_memory(r, a)


# -- in-place updates ---------------------------------------------------------------------------
def update_in_place(x, result, what="an in-place operation", *, stamp=True):
    """Make ``x`` hold ``result`` (``x += y``, ``x[i] = v``, ``x.add_(y)``...): the one path of
    every in-place update. Refuses what torch and NumPy refuse before anything changes, rebinds
    ``x`` (functionally: the old value stays with whatever saved it), stamps it and brings its
    base and views up to date. ``stamp=False``: ``result`` is the output of the node that saved
    ``x`` (an ``autograd.Function`` input marked dirty), which must not see ``x`` as updated after
    it."""
    if isinstance(x, Tensor):
        if x.requires_grad and x.is_leaf and _core.is_grad_enabled():
            raise RuntimeError(
                "a leaf Variable that requires grad is being used in an in-place operation. "
                "Update it under arrayad.no_grad(), or work on a copy (x.clone()).")
    _check_writable_views(x)
    if isinstance(x, Tensor):
        same_level = isinstance(result, Tensor)
    else:
        same_level = type(result) is type(x) and result.interpreter is x.interpreter
    if not same_level:
        raise ops._inplace_level_error(x, result)
    result = _cast_for_update(x, result, what)
    if isinstance(x, Tensor) and x.requires_grad and not result.requires_grad and \
            _core.is_grad_enabled():
        result = bind(with_zero_grad_p, _core.alias(x), result)
    _rebind(x, result)
    if stamp:
        _core.stamp_update(x)
    if x._base is not None or x._views:
        _propagate(x, None)
    return x


def _check_writable_views(x):
    """Refuse, before anything changes, to write through a read-only view (``broadcast_to``,
    ``expand``: NumPy's rule) or through a view into a leaf that requires grad (torch's rule; a
    detach()ed view shares data only, so writing through it is allowed)."""
    t = x
    while t._base is not None:
        if not t._view.writable:
            raise ValueError(
                f"assignment destination is read-only: the array is a view made by "
                f"{t._view.name}, whose elements share memory. Write into a copy instead "
                f"(y = x.clone(), or arrayad.asarray(x, copy=True)).")
        if isinstance(t._view, Detached):
            return
        t = t._base
        if isinstance(t, Tensor) and t.requires_grad and t.is_leaf and \
                _core.is_grad_enabled():
            raise RuntimeError(
                "a view of a leaf Variable that requires grad is being used in an in-place "
                "operation. Update the leaf itself under arrayad.no_grad(), or work on a copy "
                "(v = x[1:3].clone()).")


def _cast_for_update(x, result, what):
    """``result`` as an update of ``x``: of ``x``'s shape, and cast to ``x``'s dtype where
    NumPy's in-place rule ('same_kind': float64 into float32 yes, float into int no) allows."""
    if tuple(result.shape) != tuple(x.shape):
        raise ValueError(
            f"{what}: the result has shape {tuple(result.shape)}, but the array updated in "
            f"place has shape {tuple(x.shape)} (an in-place update cannot change the shape). "
            f"Write y = x + v instead.")
    xd, rd = x.dtype, result.dtype
    if rd is xd:
        return result
    if not np.can_cast(np.dtype(rd.name), np.dtype(xd.name), "same_kind"):
        raise TypeError(
            f"{what}: cannot cast the result from {rd.name} to {xd.name}, the dtype of the "
            f"array updated in place (NumPy's 'same_kind' rule; torch refuses it too). Write "
            f"y = x + v to get a {rd.name} array, or convert the other operand first.")
    return ops.astype(result, xd)


def _rebind(t, result):
    if isinstance(t, Tensor) and t.is_leaf and t.requires_grad:
        # an update under no_grad (an optimizer step): new values, same place in the graph
        t._value = result._value
    else:
        t._replace(result)


def _propagate(t, came_from):
    """After ``t`` was updated: read its live views again (but the one the update came from)
    and write it into its base, recursively (NOTE [views])."""
    for w in list(t._views or ()):
        if w is not came_from:
            _rebind(w, w._view.read(_core.alias(t)))
            _core.stamp_update(w)
            _propagate(w, t)
    base = t._base
    if base is not None and base is not came_from:
        _rebind(base, t._view.write(_core.alias(base), _core.alias(t)))
        _core.stamp_update(base)
        _propagate(base, t)


@decl.glue
def _inplace(x, result):
    """The core's in-place operators and ``x[key] = v`` (the host's ``inplace``)."""
    return update_in_place(x, result)


@decl.glue
def _detach(x):
    """``x.detach()``, ``x.data``: a view without history (NOTE [views])."""
    return make_view(_without_history(x), x, Detached())


def _without_history(x):
    return Tensor(x._value) if isinstance(x, Tensor) else ops.stop_gradient(x)
