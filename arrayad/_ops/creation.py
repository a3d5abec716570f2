"""Creation functions (the standard's and torch's: tensor, randn, rand, randint, manual_seed).

Outside transforms, new arrays come from the default backend (``arrayad.set_backend``) and are
eager ``Tensor``s. Inside a transform they are made in the backend and on the device of the
transform's inputs and are constants of the innermost transform (NOTE [everything inside is
arrayad] in the core), so that ``out = zeros(n); out[i] = traced`` updates functionally and strict
or torch inputs never meet a NumPy array. ``device=`` with a backend's device object routes
there. The ``*_like`` functions are primitives without derivative: they follow their argument.
"""

import contextlib
import contextvars

import numpy as _np

from ._namespace import ops

from .._dtypes import from_backend, to_backend
from .._core import _core
from .._core._core import Array, Tensor, bind, shape_of
from ..backends import Generator, backend_of, backend_of_device, backend_of_dtype
from ..backends import default_backend, get_backend
from ..backends import refuse_numpy_kind
from ..backends import get_rng_state as _get_rng_state, manual_seed as _manual_seed
from ..backends import set_rng_state as _set_rng_state
from ._rules import LINEAR, Declarations, per_primitive

decl = Declarations(globals())


def _frame():
    """The innermost open transform that new arrays belong to, or None (eagerly, and in a
    ``forward_ad.dual_level`` block, which is eager code)."""
    for interp in reversed(_core.interpreters()):
        if interp.owns_new_arrays():
            return interp
    return None


# Outside transforms, an array made with a backend's own dtype (``arange(n, dtype=x.dtype)``
# with ``x`` an array-api-strict or torch array) is that backend's own array, not a Tensor: code
# on raw arrays stays on raw arrays, as arrayad's operations on them return raw arrays (the
# transform of ``_placement``: NATIVE). A Tensor's dtype is arrayad's, so code on Tensors keeps
# making Tensors, also with ``device=x.device`` (a backend's device object).
NATIVE = "native"


def _placement(device, dtype=None):
    """(backend, device, transform) of a new array: ``device``'s backend if it names one, else
    ``dtype``'s (``torch.float64``), else the backend and device of the innermost transform's
    inputs, else the default backend. The transform is None outside transforms, or NATIVE
    there where ``dtype`` is the backend's own (the result is a raw array)."""
    interp = _frame()
    b = backend_of_device(device)
    named = backend_of_dtype(dtype)
    if b is None:
        b = named
    if b is not None:
        return b, device, NATIVE if interp is None and named is b else interp
    if interp is not None:
        for f in reversed(_core.interpreters()):
            where = f.placement()
            if where is not None:
                return where[0], where[1] if device is None else device, interp
    return default_backend(), device, interp


def _to_host_if_foreign(obj, b):
    """``obj`` in a form backend ``b``'s asarray takes: itself if it is Python data, a NumPy
    array (every backend takes those) or already ``b``'s; else a NumPy copy of it."""
    try:
        ob = backend_of(obj)
    except TypeError:
        return obj
    if ob is b or ob.name == "numpy":
        return obj
    return ob.to_numpy(obj)


def made_inside(raw):
    """Tell every open transform that the backend array ``raw`` was made by arrayad inside it,
    from data no one outside holds, and never changes (``jit`` may fold what is computed from
    it: NOTE [captured arrays] in ``arrayad/_jit``)."""
    for f in _core.interpreters():
        f.note_new_array(raw)


def _made(raw, interp, requires_grad=False, fresh=True):
    """A new array: a constant of ``interp`` inside a transform, else a Tensor. ``fresh``: made
    here from Python data, so no one outside holds it (every transform open is told: jit folds
    what is computed from such arrays alone, NOTE [captured arrays] in ``arrayad/_jit``)."""
    if interp is NATIVE:
        if not requires_grad:
            return raw
    elif interp is not None:
        if fresh:
            made_inside(raw)
        return interp.lift(raw)
    t = Tensor(raw)
    if requires_grad:
        t.requires_grad = True
    return t


def _dt(dtype, b):
    return to_backend(dtype, b.xp)


def _is_int(v):
    """An int, or what stands for one (np.int64, a 0-d integer array: ``__index__``); not a
    bool (``zeros(True)`` is a mistake, not a shape of 1)."""
    if isinstance(v, bool):
        return False
    if isinstance(v, int):
        return True
    # (every ndarray has __index__: only a 0-d integer one converts)
    if not hasattr(v, "__index__") or getattr(v, "ndim", 0) != 0:
        return False
    try:
        v.__index__()
    except TypeError:
        return False
    return True


def _truncate_hint(v):
    return "; convert it with int() if you mean to truncate" if isinstance(v, float) else ""


def _shape(shape, api, arg="shape"):
    """``shape`` (an int or a tuple or list of ints) as a tuple of ints, or an error naming
    the function ``api``, its argument ``arg`` and what it expects."""
    if _is_int(shape):
        dims = (shape,)
    elif isinstance(shape, (tuple, list)):
        dims = tuple(shape)
    else:
        raise TypeError(f"{api}: {arg} must be an int or a tuple of ints, got {shape!r} (a "
                        f"{type(shape).__name__}){_truncate_hint(shape)}")
    for d in dims:
        if not _is_int(d):
            raise TypeError(f"{api}: {arg} must be an int or a tuple of ints, got {shape!r} (a "
                            f"{type(d).__name__} dimension){_truncate_hint(d)}")
    dims = tuple(d.__index__() for d in dims)
    if any(d < 0 for d in dims):
        raise ValueError(f"{api}: {arg} must not have a negative dimension, got {dims}")
    return dims


def _int(v, api, arg, minimum=None):
    """``v`` as an int, or an error naming ``api``'s argument ``arg`` (for eye, linspace...)."""
    if not _is_int(v):
        raise TypeError(f"{api}: {arg} must be an int, got {v!r} (a {type(v).__name__})"
                        f"{_truncate_hint(v)}")
    v = v.__index__()
    if minimum is not None and v < minimum:
        raise ValueError(f"{api}: {arg} must be at least {minimum}, got {v}")
    return v


def _real_number(v, api, arg):
    """Refuse what is not a real number (a str, None, a bool, a complex) for ``api``'s ``arg``;
    arrays and NumPy scalars pass (the backend converts them)."""
    if isinstance(v, (bool, complex, str, bytes)) or v is None or isinstance(v, (tuple, list)):
        raise TypeError(f"{api}: {arg} must be an int or a float, got {v!r} (a "
                        f"{type(v).__name__})")


def _samples(api, draw, dtype, b, scale):
    """A function of the shape: ``draw(shape, dtype)`` for the real floating dtypes; for complex
    ones, real and imaginary parts drawn separately and scaled by ``scale`` (torch's complex
    ``randn`` has variance 1 in all, its ``rand`` uniform parts); other dtypes are refused
    (torch refuses them too)."""
    dt = _dt(dtype, b)
    xp = b.xp
    if dt is None or xp.isdtype(dt, "real floating"):   # (None: the backend's default)
        return lambda s: draw(s, dt)
    if xp.isdtype(dt, "complex floating"):
        real = xp.float32 if dt == xp.complex64 else xp.float64
        return lambda s: (xp.astype(draw(s, real), dt)
                          + xp.astype(draw(s, real), dt) * 1j) * scale
    raise TypeError(f"{api}: dtype must be a floating (or complex) dtype, got {dtype}: draw "
                    f"floats and convert them with astype if you want to round them")


# -- asarray / tensor ------------------------------------------------------------------------------
def _contains_arrays(obj):
    if isinstance(obj, Array):
        return True
    if isinstance(obj, (list, tuple)):
        return any(_contains_arrays(o) for o in obj)
    if type(obj).__module__.startswith("numpy") and not isinstance(obj, _np.matrix):
        refuse_numpy_kind(obj)   # (a masked array or a longdouble scalar in a list: not silently)
    return False


def asarray(obj, /, *, dtype=None, device=None, copy=None):
    """Convert ``obj`` to an arrayad array.

    An arrayad array (or a tracer) passes through, keeping its gradient; an array of torch,
    array-api-strict, CuPy, JAX or Dask keeps its backend; Python data (numbers, nested lists)
    and NumPy arrays go to the default backend (inside a transform, to its inputs' backend), as
    ``torch.asarray(numpy_array)`` makes a torch tensor. ``device=`` or a backend's own dtype
    (``torch.float64``) choose the backend instead.

    Parameters
    ----------
    obj : array, Python number or nested sequence
        The data. A list of arrays is stacked (differentiably).
    dtype : dtype, optional
        The result's dtype (a cast of an arrayad array is differentiable); by default the
        dtype of ``obj``, or for Python data the backend's default (int64, float64 or
        complex128 on NumPy; float32 for Python floats on torch).
    device : device, optional
        A backend's device object (``x.device``): the array is made, or moved, there.
    copy : bool, optional
        True: always copy; False: never copy (the backend raises if it must); None: copy only
        when needed.

    Returns
    -------
    Tensor or tracer
        ``obj`` itself when it is an arrayad array and nothing changes; otherwise an
        ``arrayad.Tensor`` (a constant of the innermost transform, inside one) on the backend
        of ``obj``, or for Python data and NumPy arrays on the default backend (inside a
        transform: its inputs'); outside transforms, with ``dtype`` a backend's own dtype
        object, that backend's array itself (raw-array code stays raw).

    Raises
    ------
    TypeError
        If the data has a dtype outside the standard's (strings, objects, float16): the error
        lists the dtypes arrayad has.
    ValueError
        If nested lists are ragged (the backend's error).

    Examples
    --------
    >>> ad.asarray([1.0, 2.0])
    tensor([1., 2.])
    >>> ad.asarray([1, 2], dtype=ad.float32)
    tensor([1., 2.], dtype=arrayad.float32)
    >>> x = ad.tensor([1.0], requires_grad=True)
    >>> ad.asarray(x) is x
    True
    """
    if isinstance(obj, Array):
        if dtype is not None:
            obj = ops.astype(obj, dtype, copy=bool(copy))
        elif copy:
            obj = bind(_copy_p, obj)
        if device is not None:   # (another backend's device moves obj even where it is the
            obj = ops._to_device(obj, device, None)   # same CPU: _to_device asks the backend)
        return obj
    if isinstance(obj, (list, tuple)) and _contains_arrays(obj):
        out = ops.stack([asarray(o) for o in obj])
        return out if dtype is None else ops.astype(out, dtype)
    b, dev, interp = _placement(device, dtype)
    if isinstance(obj, _np.matrix):
        obj = _np.asarray(obj)   # (a plain 2-d array: arrayad's operations are elementwise)
    if not (isinstance(obj, (bool, int, float, complex)) or isinstance(obj, (list, tuple))):
        if type(obj).__module__.startswith("numpy"):
            refuse_numpy_kind(obj)   # (masked arrays, longdouble scalars: not silently)
        if backend_of_device(device) is None and backend_of_dtype(dtype) is None:
            try:
                ob = backend_of(obj)
            except TypeError:
                ob = None
            # Another backend's array keeps its backend. NumPy data is host data, placed as
            # Python data is (the transform's inputs' backend, else the default backend), as
            # torch.asarray(numpy_array) makes a torch tensor: library code converts its NumPy
            # constants and test data with xp.asarray and expects xp's arrays.
            if ob is not None and ob.name != "numpy":
                b, dev = ob, device
        else:
            obj = _to_host_if_foreign(obj, b)
    kw = {}
    if dev is not None:
        kw["device"] = dev
    if copy is not None:
        kw["copy"] = copy
    raw = b.xp.asarray(obj, dtype=_dt(dtype, b), **kw)
    from_backend(raw.dtype)   # (refuses float16, object... here rather than at first use)
    # (an array argument's asarray may be that array itself, or share its memory: not fresh)
    return _made(raw, interp, fresh=isinstance(obj, (bool, int, float, complex, list, tuple)))


_copy_p = decl.primitive("copy", lambda xp, x: xp.asarray(x, copy=True), public=asarray,
                         vjp=(lambda g, ans, x: g,), jvp=LINEAR,
                         batch=lambda args, dims: (bind(_copy_p, args[0]), dims[0]))


@decl.export(traced=False)
def tensor(data, *, dtype=None, device=None, requires_grad=False):
    """A new Tensor holding a copy of ``data`` (torch's ``torch.tensor``).

    Parameters
    ----------
    data : array, Python number or nested sequence
        The values; an ``arrayad.Tensor`` is copied and detached from its history.
    dtype, device
        As for ``asarray``.
    requires_grad : bool
        Whether the eager tape records operations on the result (``.backward()`` fills its
        ``.grad``).

    Returns
    -------
    Tensor
        An ``arrayad.Tensor`` owning its data, placed as by ``asarray`` (a torch, strict, CuPy,
        JAX or Dask array keeps its backend; Python data and NumPy arrays go to the default
        backend; inside a transform, a constant of it on its inputs' backend).

    Raises
    ------
    RuntimeError
        If ``requires_grad=True`` with an integer or bool dtype: only floating-point and
        complex Tensors can require gradients.
    TypeError
        If the data has a dtype outside the standard's (strings, objects, float16).
    ValueError
        If nested lists are ragged.

    Examples
    --------
    >>> ad.tensor([[1.0, 2.0], [3.0, 4.0]]).shape
    (2, 2)
    >>> x = ad.tensor([3.0], requires_grad=True)
    >>> (x * x).sum().backward()
    >>> x.grad   # 2 x
    tensor([6.])
    """
    if isinstance(data, Array):
        data = ops.asarray(data, dtype=dtype, copy=True)
        t = data.detach() if isinstance(data, Tensor) else data
    elif (type(data) is _np.ndarray and dtype is None and device is None and _frame() is None
          and default_backend().name == "numpy"):
        # (a NumPy array as the leaf of an eager computation, the common case: what asarray
        # would make of it, a copy on NumPy, without its placement questions)
        raw = _np.array(data, copy=True)
        from_backend(raw.dtype)   # (refuses float16, object...)
        t = Tensor(raw)
    else:
        t = asarray(data, dtype=dtype, device=device, copy=True)
    if requires_grad and isinstance(t, Tensor):
        t.requires_grad = True
    return t


# -- filled arrays ---------------------------------------------------------------------------------
@decl.export(traced=False)
def zeros(shape, *, dtype=None, device=None):
    """A new array of zeros.

    Parameters
    ----------
    shape : int or tuple of ints
        The shape of the result.
    dtype : dtype, optional
        The result's dtype; by default the backend's default floating dtype (float64 on NumPy,
        float32 on torch).
    device : device, optional
        A backend's device object (``x.device``), or a name the backend understands.

    Returns
    -------
    Tensor or tracer
    An ``arrayad.Tensor`` of the default backend (``arrayad.set_backend``); inside a
    transform, a constant of the innermost transform on its inputs' backend and device.
    ``device=`` a backend's device object (``x.device``) makes it there; outside transforms,
    ``dtype=`` a backend's own dtype (``x.dtype`` of a raw array) makes that backend's array.

    Raises
    ------
    ValueError
        If a dimension is negative (the backend's error).
    TypeError
        If ``dtype`` is not one of the standard's dtypes (float16, say), or a dimension is not
        an integer (2.5: convert it with ``int`` if you mean to truncate).

    Examples
    --------
    >>> ad.zeros(3)
    tensor([0., 0., 0.])
    >>> ad.zeros((2, 1), dtype=ad.int32)
    tensor([[0],
            [0]], dtype=arrayad.int32)
    """
    b, device, interp = _placement(device, dtype)
    return _made(b.xp.zeros(_shape(shape, "zeros"), dtype=_dt(dtype, b), device=device), interp)


@decl.export(traced=False)
def ones(shape, *, dtype=None, device=None):
    """A new array of ones.

    Parameters
    ----------
    shape : int or tuple of ints
        The shape of the result.
    dtype : dtype, optional
        The result's dtype; by default the backend's default floating dtype (float64 on NumPy,
        float32 on torch).
    device : device, optional
        A backend's device object (``x.device``), or a name the backend understands.

    Returns
    -------
    Tensor or tracer
    An ``arrayad.Tensor`` of the default backend (``arrayad.set_backend``); inside a
    transform, a constant of the innermost transform on its inputs' backend and device.
    ``device=`` a backend's device object (``x.device``) makes it there; outside transforms,
    ``dtype=`` a backend's own dtype (``x.dtype`` of a raw array) makes that backend's array.

    Raises
    ------
    ValueError
        If a dimension is negative (the backend's error).
    TypeError
        If ``dtype`` is not one of the standard's dtypes (float16, say), or a dimension is not
        an integer (2.5: convert it with ``int`` if you mean to truncate).

    Examples
    --------
    >>> ad.ones((2, 3)).sum()
    tensor(6.)
    """
    b, device, interp = _placement(device, dtype)
    return _made(b.xp.ones(_shape(shape, "ones"), dtype=_dt(dtype, b), device=device), interp)


@decl.export(traced=False)
def empty(shape, *, dtype=None, device=None):
    """A new array whose values the caller will overwrite (arrayad fills it with zeros, so
    that runs repeat).

    Parameters
    ----------
    shape : int or tuple of ints
        The shape of the result.
    dtype : dtype, optional
        The result's dtype; by default the backend's default floating dtype (float64 on NumPy,
        float32 on torch).
    device : device, optional
        A backend's device object (``x.device``), or a name the backend understands.

    Returns
    -------
    Tensor or tracer
    An ``arrayad.Tensor`` of the default backend (``arrayad.set_backend``); inside a
    transform, a constant of the innermost transform on its inputs' backend and device.
    ``device=`` a backend's device object (``x.device``) makes it there; outside transforms,
    ``dtype=`` a backend's own dtype (``x.dtype`` of a raw array) makes that backend's array.

    Raises
    ------
    ValueError
        If a dimension is negative (the backend's error).
    TypeError
        If ``dtype`` is not one of the standard's dtypes (float16, say), or a dimension is not
        an integer (2.5: convert it with ``int`` if you mean to truncate).

    Examples
    --------
    >>> ad.empty((2,))
    tensor([0., 0.])
    """
    return zeros(_shape(shape, "empty"), dtype=dtype, device=device)


@decl.export(traced=False)
def full(shape, fill_value, *, dtype=None, device=None):
    """A new array filled with ``fill_value``.

    Parameters
    ----------
    shape : int or tuple of ints
        The shape of the result.
    fill_value : Python scalar or 0-d array
        The value. A 0-d array is broadcast (differentiably: the gradient of ``fill_value``
        is the sum of the result's).
    dtype : dtype, optional
        The result's dtype; by default that of ``fill_value`` (a Python int gives int64, a
        float the default floating dtype).
    device : device, optional
        A backend's device object (``x.device``).

    Returns
    -------
    Tensor or tracer
    An ``arrayad.Tensor`` of the default backend (``arrayad.set_backend``); inside a
    transform, a constant of the innermost transform on its inputs' backend and device.
    ``device=`` a backend's device object (``x.device``) makes it there; outside transforms,
    ``dtype=`` a backend's own dtype (``x.dtype`` of a raw array) makes that backend's array.
    A 0-d array ``fill_value`` keeps its backend.

    Raises
    ------
    ValueError
        If a dimension is negative (the backend's error).
    TypeError
        If ``fill_value`` is not a number or an array (a str: its dtype is not the standard's),
        or a dimension is not an integer.

    Examples
    --------
    >>> ad.full((2,), 7.0)
    tensor([7., 7.])
    >>> ad.func.grad(lambda v: ad.full((3,), v).sum())(2.0)   # three copies of v
    array(3.)
    """
    shape = _shape(shape, "full")
    if isinstance(fill_value, Array) or not isinstance(fill_value, (bool, int, float, complex)):
        value = asarray(fill_value, dtype=dtype)
        return bind(_copy_p, ops.broadcast_to(value, shape)) if shape else value
    b, device, interp = _placement(device, dtype)
    return _made(b.xp.full(shape, fill_value, dtype=_dt(dtype, b), device=device), interp)


def _like(name, **public):
    def impl(xp, x, dtype=None, device=None, **kw):
        args = {"dtype": to_backend(dtype, xp)}
        if device is not None:
            args["device"] = device
        return getattr(xp, name)(x, **kw, **args)
    return decl.primitive(name, impl, **public, shape_only=True, batch=per_primitive(
        lambda p: lambda args, dims, **params: (bind(p, args[0], **params), dims[0])))


zeros_like_p = _like("zeros_like", api="x, /, *, dtype=None, device=None",
                     doc="""Zeros with the shape (and by default the dtype and device) of ``x``.

    Parameters
    ----------
    x : array
        The array whose shape the result takes.
    dtype, device : optional
        The result's dtype and device, instead of those of ``x``.

    Returns
    -------
    array
        An array of the backend and kind of ``x`` (a NumPy array for a NumPy ``x``, a Tensor for
        a Tensor; inside a transform the transform's value), with its shape and, unless given,
        its dtype and device. Not differentiable: the values do not depend on ``x``.

    Raises
    ------
    TypeError
        If ``x`` is not an array of a supported backend (a str: convert it with ``asarray``),
        or ``dtype`` is not one of the standard's.

    Examples
    --------
    >>> ad.zeros_like(np.ones((2, 2), dtype=np.float32))
    array([[0., 0.],
           [0., 0.]], dtype=float32)
    >>> ad.zeros_like(ad.tensor([1, 2]), dtype=ad.float64)
    tensor([0., 0.])
    """)
ones_like_p = _like("ones_like", api="x, /, *, dtype=None, device=None",
                    doc="""Ones with the shape (and by default the dtype and device) of ``x``.

    Parameters
    ----------
    x : array
        The array whose shape the result takes.
    dtype, device : optional
        The result's dtype and device, instead of those of ``x``.

    Returns
    -------
    array
        An array of the backend and kind of ``x`` (a NumPy array for a NumPy ``x``, a Tensor for
        a Tensor; inside a transform the transform's value), with its shape and, unless given,
        its dtype and device. Not differentiable: the values do not depend on ``x``.

    Raises
    ------
    TypeError
        If ``x`` is not an array of a supported backend (a str: convert it with ``asarray``),
        or ``dtype`` is not one of the standard's.

    Examples
    --------
    >>> ad.ones_like(ad.tensor([5.0, 6.0]))
    tensor([1., 1.])
    """)


@decl.export(primitive=zeros_like_p)
def empty_like(x, /, *, dtype=None, device=None):
    """An array like ``x`` whose values the caller will overwrite (zeros, so that runs repeat).

    Parameters
    ----------
    x : array
        The array whose shape the result takes.
    dtype, device : optional
        The result's dtype and device, instead of those of ``x``.

    Returns
    -------
    array
        An array of the backend and kind of ``x`` (a NumPy array for a NumPy ``x``, a Tensor for
        a Tensor; inside a transform the transform's value), with its shape and, unless given,
        its dtype and device. Not differentiable: the values do not depend on ``x``.

    Raises
    ------
    TypeError
        If ``x`` is not an array of a supported backend (a str: convert it with ``asarray``),
        or ``dtype`` is not one of the standard's.

    Examples
    --------
    >>> ad.empty_like(np.ones(2))
    array([0., 0.])
    """
    return bind(zeros_like_p, x, dtype=dtype, device=device)


def full_like(x, /, fill_value, *, dtype=None, device=None):
    """``fill_value`` with the shape (and by default the dtype and device) of ``x``.

    Parameters
    ----------
    x : array
        The array whose shape the result takes.
    fill_value : Python scalar or 0-d array
        The value. A 0-d array is broadcast (differentiably: ``zeros_like(x) + fill_value``).
    dtype, device : optional
        The result's dtype and device, instead of those of ``x``.

    Returns
    -------
    array
        An array of the backend and kind of ``x`` (a NumPy array for a NumPy ``x``, a Tensor for
        a Tensor; inside a transform the transform's value), with its shape and, unless given,
        its dtype and device.

    Raises
    ------
    TypeError
        If ``x`` is not an array of a supported backend, or ``fill_value`` is not a number or
        an array (NumPy: ``UFuncTypeError``, a TypeError, for a str).

    Examples
    --------
    >>> ad.full_like(np.ones(2), 7)
    array([7., 7.])
    """
    if not isinstance(fill_value, (bool, int, float, complex)):
        return ops.zeros_like(x, dtype=dtype, device=device) + fill_value
    return bind(full_like_p, x, dtype=dtype, device=device, fill_value=fill_value)


full_like_p = _like("full_like", public=full_like)


# -- ranges ----------------------------------------------------------------------------------------
@decl.export(traced=False)
def arange(start, /, stop=None, step=1, *, dtype=None, device=None):
    """Evenly spaced values in ``[start, stop)``, ``step`` apart.

    Parameters
    ----------
    start : int or float
        The first value; with no ``stop``, the end (and the start is 0).
    stop : int or float, optional
        The end, excluded.
    step : int or float
        The spacing (may be negative; not zero).
    dtype : dtype, optional
        By default int64 when every argument is an int, else the default floating dtype.
    device : device, optional
        A backend's device object (``x.device``), or a name the backend understands.

    Returns
    -------
    Tensor or tracer
        A 1-d array of ``ceil((stop - start) / step)`` values.
        An ``arrayad.Tensor`` of the default backend (``arrayad.set_backend``); inside a
        transform, a constant of the innermost transform on its inputs' backend and
        device. ``device=`` a backend's device object (``x.device``) makes it there;
        outside transforms, ``dtype=`` a backend's own dtype (``x.dtype`` of a raw array)
        makes that backend's array.

    Raises
    ------
    ValueError
        If ``step`` is 0.
    TypeError
        If ``start``, ``stop`` or ``step`` is not a real number (a str, None, a complex), or
        ``dtype`` is not one of the standard's dtypes.

    Examples
    --------
    >>> ad.arange(4)
    tensor([0, 1, 2, 3])
    >>> ad.arange(0.0, 1.0, 0.25)
    tensor([0.0000, 0.2500, 0.5000, 0.7500])
    """
    _real_number(start, "arange", "start")
    if stop is not None:
        _real_number(stop, "arange", "stop")
    _real_number(step, "arange", "step")
    # A 0-d arrayad array stands for its number (as NumPy's arange reads one; torch's takes
    # numbers only). Inside a transform the number is its value: .item() says why it cannot be.
    start, stop, step = (v.item() if isinstance(v, Array) else v for v in (start, stop, step))
    if isinstance(step, (int, float)) and step == 0:
        raise ValueError("arange: step must not be 0")
    b, device, interp = _placement(device, dtype)
    return _made(b.xp.arange(start, stop, step, dtype=_dt(dtype, b), device=device), interp)


@decl.export(traced=False)
def linspace(start, stop, /, num, *, dtype=None, device=None, endpoint=True):
    """``num`` evenly spaced values from ``start`` to ``stop``.

    Parameters
    ----------
    start, stop : float
        The first and last values (``stop`` excluded when ``endpoint=False``).
    num : int
        How many values (non-negative).
    dtype : dtype, optional
        By default the default floating dtype.
    device : device, optional
        A backend's device object (``x.device``), or a name the backend understands.
    endpoint : bool
        Whether ``stop`` is the last value.

    Returns
    -------
    Tensor or tracer
        A 1-d array of ``num`` values.
        An ``arrayad.Tensor`` of the default backend (``arrayad.set_backend``); inside a
        transform, a constant of the innermost transform on its inputs' backend and
        device. ``device=`` a backend's device object (``x.device``) makes it there;
        outside transforms, ``dtype=`` a backend's own dtype (``x.dtype`` of a raw array)
        makes that backend's array.

    Raises
    ------
    ValueError
        If ``num`` is negative.
    TypeError
        If ``dtype`` is not one of the standard's dtypes.

    Examples
    --------
    >>> ad.linspace(0, 1, 5)
    tensor([0.0000, 0.2500, 0.5000, 0.7500, 1.0000])
    >>> ad.linspace(0, 1, 4, endpoint=False)
    tensor([0.0000, 0.2500, 0.5000, 0.7500])
    """
    _real_number(start, "linspace", "start")
    _real_number(stop, "linspace", "stop")
    num = _int(num, "linspace", "num", minimum=0)
    b, device, interp = _placement(device, dtype)
    return _made(b.xp.linspace(start, stop, num, dtype=_dt(dtype, b), device=device,
                               endpoint=endpoint), interp)


@decl.export(traced=False)
def eye(n_rows, n_cols=None, /, *, k=0, dtype=None, device=None):
    """A matrix with ones on diagonal ``k`` and zeros elsewhere.

    Parameters
    ----------
    n_rows : int
        The number of rows.
    n_cols : int, optional
        The number of columns (default: ``n_rows``).
    k : int
        The diagonal: 0 the main one, positive above it, negative below.
    dtype : dtype, optional
        By default the default floating dtype.
    device : device, optional
        A backend's device object (``x.device``), or a name the backend understands.

    Returns
    -------
    Tensor or tracer
        An array of shape ``(n_rows, n_cols)``.
        An ``arrayad.Tensor`` of the default backend (``arrayad.set_backend``); inside a
        transform, a constant of the innermost transform on its inputs' backend and
        device. ``device=`` a backend's device object (``x.device``) makes it there;
        outside transforms, ``dtype=`` a backend's own dtype (``x.dtype`` of a raw array)
        makes that backend's array.

    Raises
    ------
    ValueError
        If ``n_rows`` or ``n_cols`` is negative (the backend's error).
    TypeError
        If ``dtype`` is not one of the standard's dtypes.

    Examples
    --------
    >>> ad.eye(2)
    tensor([[1., 0.],
            [0., 1.]])
    >>> ad.eye(2, 3, k=1)
    tensor([[0., 1., 0.],
            [0., 0., 1.]])
    """
    n_rows = _int(n_rows, "eye", "n_rows", minimum=0)
    if n_cols is not None:
        n_cols = _int(n_cols, "eye", "n_cols", minimum=0)
    k = _int(k, "eye", "k")
    b, device, interp = _placement(device, dtype)
    return _made(b.xp.eye(n_rows, n_cols, k=k, dtype=_dt(dtype, b), device=device), interp)


@decl.composite
def meshgrid(*arrays, indexing="xy"):
    """Coordinate matrices from coordinate vectors.

    Differentiable (reshapes and broadcasts): the gradient of each vector is the sum of its
    matrix's gradient over the other axes.

    Parameters
    ----------
    *arrays : 1-d arrays
        The coordinate vectors, of lengths ``n1, n2, ...``.
    indexing : {'xy', 'ij'}
        'xy' (Cartesian, the default): the first two axes are swapped, results of shape
        ``(n2, n1, n3, ...)``; 'ij' (matrix): results of shape ``(n1, n2, n3, ...)``.

    Returns
    -------
    tuple of arrays
        One array per input, of the inputs' backend and kind (inside a transform, its values).

    Raises
    ------
    ValueError
        If ``indexing`` is neither 'xy' nor 'ij', or an input is not 1-d.

    Examples
    --------
    >>> X, Y = ad.meshgrid(ad.arange(3), ad.arange(2))
    >>> X
    tensor([[0, 1, 2],
            [0, 1, 2]])
    >>> Y
    tensor([[0, 0, 0],
            [1, 1, 1]])
    """
    if indexing not in ("xy", "ij"):
        raise ValueError("meshgrid: indexing must be 'xy' or 'ij'")
    # (no primitive sees the inputs together to say it)
    _core.common_backend(tuple(_core.raw_value(a) for a in arrays), "meshgrid")
    n = len(arrays)
    shape = [shape_of(a)[0] for a in arrays]
    if indexing == "xy" and n > 1:
        shape[0], shape[1] = shape[1], shape[0]
    out = []
    for i, a in enumerate(arrays):
        pos = i
        if indexing == "xy" and n > 1 and i < 2:
            pos = 1 - i
        s = [1] * n
        s[pos] = shape_of(a)[0]
        out.append(ops.broadcast_to(ops.reshape(a, tuple(s)), tuple(shape)))
    return tuple(out)


@decl.export(traced=False)
def from_dlpack(x, /, *, device=None, copy=None):
    """An array sharing the memory of any object that supports DLPack.

    Parameters
    ----------
    x : object
        An object with ``__dlpack__`` (a NumPy, torch, CuPy or array-api-strict array...).
        An arrayad array is returned as ``asarray(x, device=device, copy=copy)``.
    device, copy : optional
        As for ``asarray`` (used for arrayad arrays only).

    Returns
    -------
    Tensor
        An ``arrayad.Tensor`` on the backend of ``x`` for torch, CuPy and array-api-strict
        arrays; for NumPy arrays and other objects, on the default backend (as ``asarray``
        places NumPy data).

    Raises
    ------
    AttributeError
        If ``x`` does not support DLPack (has no ``__dlpack__``).

    Examples
    --------
    >>> ad.from_dlpack(np.arange(3))
    tensor([0, 1, 2])
    """
    if isinstance(x, Array):
        return asarray(x, device=device, copy=copy)
    if isinstance(x, _np.ndarray):
        # NumPy data is placed as by asarray (the default backend, inside a transform its
        # inputs'): torch.from_dlpack(numpy_array) shares the memory on the CPU
        b, dev, interp = _placement(None)
        if b.name != "numpy":
            fn = getattr(b.xp, "from_dlpack", None)
            try:
                raw = fn(x) if fn is not None else b.xp.asarray(x)
            except (TypeError, BufferError, RuntimeError):
                raw = b.xp.asarray(x)   # (a layout DLPack cannot share: a copy)
            return _made(raw, interp, fresh=False)
    for name in ("numpy", "torch", "cupy", "array_api_strict"):
        try:
            b = get_backend(name)
        except ImportError:
            continue
        if isinstance(x, b.array_types):
            return Tensor(b.xp.from_dlpack(x))
    return Tensor(default_backend().xp.from_dlpack(x))


# -- random numbers (torch-style) ------------------------------------------------------------------
def _size_args(size, api):
    if len(size) == 1 and isinstance(size[0], (list, tuple)):
        return _shape(size[0], api, "size")
    return _shape(size, api, "size")


# NOTE [draws in a batching rule]
# -------------------------------
# A batching rule runs one level below its vmap, with that vmap still on the stack. A rule that
# batches a call by running it under a vmap of its own (``generate_vmap_rule``, custom_vjp,
# checkpoint: ``_Batched``) or a user's ``vmap`` staticmethod takes the lanes' draws itself (the
# inner vmap has the outer one's randomness): counting the outer vmap too would draw every lane
# twice over and wrap the result in a tracer of the outer level, which escapes the rule. So
# while its batching rule runs, a vmap is left out of the draws (as torch runs a Function's
# vmap rule below the vmap's level). A function run for its result types only (a branch not
# taken, NOTE [eager checks] in ``_control.py``) draws once, as outside every transform,
# whatever the transforms around it say (``types_only``): its numbers are never used, and the
# random state is put back after it.
_rule_vmaps = contextvars.ContextVar("arrayad_rule_vmaps", default=())
_EVERY = ("every transform",)


@contextlib.contextmanager
def types_only():
    """``with types_only():`` around a function run for its result types alone: its draws
    ignore the transforms' randomness (NOTE [draws in a batching rule])."""
    token = _rule_vmaps.set(_EVERY)
    try:
        yield
    finally:
        _rule_vmaps.reset(token)


@contextlib.contextmanager
def batching_rule_of(interp):
    """``with batching_rule_of(vmap_interpreter):`` around a batching rule that draws through
    a vmap of its own (NOTE [draws in a batching rule])."""
    token = _rule_vmaps.set(_rule_vmaps.get() + (interp,))
    try:
        yield
    finally:
        _rule_vmaps.reset(token)


def _random(draw, shape, requires_grad, interp):
    """Draw random numbers, honouring the ``randomness`` mode of every enclosing vmap:
    'error' refuses, 'same' draws once, 'different' draws one sample per batch element."""
    # (each transform says, outermost first: NOTE [interpreters]; a vmap whose batching rule
    # is running is not asked: NOTE [draws in a batching rule])
    skip = _rule_vmaps.get()
    if skip is _EVERY:
        different = []
    else:
        different = [f for f in _core.interpreters()
                     if not (skip and any(f is v for v in skip)) and f.random_per_batch_element()]
    full_shape = tuple(f.size for f in different) + tuple(shape)
    if interp is None or interp is NATIVE:
        return _made(draw(full_shape), interp, requires_grad)
    out = draw(full_shape)
    for f in different:   # (outermost first: each batch dim is the next axis of the draw)
        out = _core.new_batch(f, out, 0)
    if not (different and different[-1] is interp):
        out = interp.lift(out)
    return out


def _source(generator, b, fn):
    """What ``fn`` draws from: the thread's generator of backend ``b``, or ``generator``'s."""
    if generator is None:
        return b.generator()
    if not isinstance(generator, Generator):
        raise TypeError(f"{fn}: generator= must be an arrayad.Generator, got "
                        f"{type(generator).__name__}")
    if generator.backend is not b:
        raise ValueError(
            f"{fn}: generator= draws {generator.backend.name} numbers but the array is made on "
            f"{b.name}. Make the generator for that backend: arrayad.Generator(device=x.device) "
            f"or arrayad.Generator(backend='{b.name}').")
    return generator._impl


_SAMPLES_DOC = """{summary}

Parameters
----------
*size : ints, or one tuple or list of ints
    The shape of the result: ``{api}(2, 3)`` or ``{api}((2, 3))``.
dtype : dtype, optional
    A floating dtype; by default the backend's default floating dtype (float64 on NumPy, float32
    on torch). {complex_}
device : device, optional
    A backend's device object (``x.device``).
requires_grad : bool
    Whether the eager tape records operations on the result.
generator : arrayad.Generator, optional
    Draw from this generator instead of the thread's generator of the backend.

Returns
-------
Tensor or tracer
    An ``arrayad.Tensor`` of the default backend; inside a transform, a constant of it on
    its inputs' backend (under ``vmap(..., randomness='different')``, one sample per batch
    element). The numbers come from the calling thread's generator of that backend
    (``manual_seed``), or from ``generator``.

Raises
------
TypeError
    If ``generator`` is not an ``arrayad.Generator``, ``dtype`` is not a floating dtype (the
    samples would be truncated: draw floats and use ``astype``), or a dimension is not an
    integer.
ValueError
    If ``generator`` draws for another backend than the array's (make it with
    ``Generator(device=x.device)``), or a dimension is negative.
RuntimeError
    Inside ``vmap(..., randomness='error')`` (the default): pass ``randomness='same'`` or
    ``'different'`` to ``vmap``.

Examples
--------
{example}
"""


@decl.export(traced=False)
def randn(*size, dtype=None, device=None, requires_grad=False, generator=None):
    b, device, interp = _placement(device, dtype)
    g = _source(generator, b, "randn")
    draw = _samples("randn", lambda s, dt: b.normal(g, s, dt, device), dtype, b, 0.5 ** 0.5)
    return _random(draw, _size_args(size, "randn"), requires_grad, interp)


randn.__doc__ = _SAMPLES_DOC.format(
    summary="Samples of the standard normal distribution (mean 0, variance 1).", api="randn",
    complex_="A complex dtype draws both parts, each of variance 1/2 (as torch).",
    example=""">>> ad.randn(2, 3).shape
(2, 3)
>>> ad.manual_seed(0); a = ad.randn(3)
>>> ad.manual_seed(0); b = ad.randn(3)
>>> ad.all(a == b)   # the same seed, the same numbers
tensor(True)""")


@decl.export(traced=False)
def rand(*size, dtype=None, device=None, requires_grad=False, generator=None):
    b, device, interp = _placement(device, dtype)
    g = _source(generator, b, "rand")
    draw = _samples("rand", lambda s, dt: b.uniform(g, s, dt, device), dtype, b, 1)
    return _random(draw, _size_args(size, "rand"), requires_grad, interp)


rand.__doc__ = _SAMPLES_DOC.format(
    summary="Samples of the uniform distribution on ``[0, 1)``.", api="rand",
    complex_="A complex dtype draws both parts uniformly (as torch).",
    example=""">>> x = ad.rand(1000)
>>> x.shape, bool(ad.all((0 <= x) & (x < 1)))
((1000,), True)""")


@decl.export(traced=False)
def randint(low, high=None, size=(), *, dtype=None, device=None, generator=None):
    """Random integers, uniform in ``[low, high)``.

    Parameters
    ----------
    low : int
        The lowest value; with no ``high``, the end (torch's ``randint(high, size)``).
    high : int, optional
        The end, excluded.
    size : int or tuple of ints
        The shape of the result (default: a 0-d array).
    dtype : dtype, optional
        By default int64.
    device : device, optional
        A backend's device object (``x.device``).
    generator : arrayad.Generator, optional
        Draw from this generator instead of the thread's generator of the backend.

    Returns
    -------
    Tensor or tracer
        An ``arrayad.Tensor`` of the default backend; inside a transform, a constant of it on
        its inputs' backend (under ``vmap(..., randomness='different')``, one sample per batch
        element). The numbers come from the calling thread's generator of that backend
        (``manual_seed``), or from ``generator``.

    Raises
    ------
    TypeError
        If ``generator`` is not an ``arrayad.Generator``.
    ValueError
        If ``generator`` draws for another backend than the array's (make it with
        ``Generator(device=x.device)``), or ``low >= high``.
    RuntimeError
        Inside ``vmap(..., randomness='error')`` (the default): pass ``randomness='same'`` or
        ``'different'`` to ``vmap``.

    Examples
    --------
    >>> x = ad.randint(0, 5, (100,))
    >>> x.dtype, bool(ad.all((0 <= x) & (x < 5)))
    (arrayad.int64, True)
    """
    if high is None:
        low, high = 0, _int(low, "randint", "high")
    else:
        low, high = _int(low, "randint", "low"), _int(high, "randint", "high")
    if low >= high:
        raise ValueError(f"randint: low must be below high (the range [low, high) is empty), "
                         f"got low={low}, high={high}")
    size = _shape(size, "randint", "size")
    b, device, interp = _placement(device, dtype)
    g = _source(generator, b, "randint")
    return _random(lambda s: b.integers(g, low, high, s, _dt(dtype, b), device), size,
                   False, interp)


def manual_seed(seed):
    _manual_seed(seed)


def get_rng_state():
    return _get_rng_state()


def set_rng_state(state):
    _set_rng_state(state)


for _f, _defined in ((manual_seed, _manual_seed), (get_rng_state, _get_rng_state),
                     (set_rng_state, _set_rng_state)):
    _f.__doc__ = _defined.__doc__   # (documented once, where they are defined)
    decl.export(_f, traced=False)
