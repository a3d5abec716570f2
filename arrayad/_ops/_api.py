"""The glue between the array types of the core and the namespace: in-place updates, indexing,
conversions (and when they must refuse), NumPy's protocols, printing, devices.

The core's ``Array`` methods call these through the namespace (``arrayad._inplace`` ...); they
are declared as glue (``decl.glue``) in the internal namespace (NOTE [internal namespace]).
"""

import sys

import numpy as np

from .._dtypes import is_inexact
from ._namespace import ops

from .._core import _core
from .._core._core import Array, Tensor, Tracer, bind
from .indexing import getitem, setitem
from .views import Index, make_view
from ._rules import Declarations
from ..backends import _is_basic_key, backend_of, backend_of_device, get_backend

decl = Declarations(globals())


@decl.glue
def _inplace_level_error(self, result):
    special = result._inplace_error(self) if isinstance(result, Tracer) else None
    return special or RuntimeError(
        f"arrayad: an in-place operation would turn a {type(self).__name__} into a "
        f"{type(result).__name__} of another transform (the array was made outside the "
        f"transform, or with zeros(shape) inside it). Create it with zeros_like(traced_input) "
        f"so that it belongs to the transform, or write it out of place (y = x + v).")


@decl.glue
def _getitem(x, key):
    if isinstance(x, Array) and _is_basic_key(key):
        # a view (NOTE [views]); its node keeps x as it is now, so that a later update of x
        # (through this view or another) does not stale it: a slice's VJP needs no more
        return make_view(getitem(_core.alias(x), key), x, Index(key))
    return getitem(x, key)


@decl.glue
def _setitem(x, key, value):
    return setitem(x, key, value)


# -- conversions -----------------------------------------------------------------------------------
@decl.glue
def _concrete(x, what):
    """The concrete backend value of ``x`` for a Python conversion, or a clear error when the
    conversion would lose a derivative (grad/jvp), depends on the batch (vmap) or on a value
    being staged (jit): each tracer class says (``_concrete_value``)."""
    while isinstance(x, Tracer):
        x = x._concrete_value(what)
    return x._value if isinstance(x, Tensor) else x


@decl.glue
def _to_scalar(x, what):
    """A Python number from a one-element array (``float(x)``, ``x.item()``...)."""
    if what == "index" and not ops.isdtype(x.dtype, "integral"):
        # (as torch: [10, 20, 30][tensor(1.7)] must not silently pick element 1)
        raise TypeError(f"only integer arrays of a single element can be converted to an "
                        f"index, got dtype {x.dtype}; convert it first (int(x) or "
                        f"x.astype(int64)).")
    v = _concrete(x, what)
    item = getattr(v, "item", None)
    if item is None:  # array-api-strict has no item(): go through NumPy
        return backend_of(v).to_numpy(v).item()
    return item()


@decl.glue
def _to_numpy(x, dtype=None, copy=None):
    if isinstance(x, Tensor):
        if x.requires_grad:
            raise RuntimeError(
                "Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() "
                "instead.")
        out = backend_of(x).to_numpy(x._value)
    elif _core.in_transform():
        v = _concrete(x, "numpy")   # (refuses what would lose a derivative or a batch dim)
        out = backend_of(v).to_numpy(v)
    else:
        raise RuntimeError(
            f"arrayad: converting an array under a transform ({type(x).__name__}) to NumPy would "
            f"drop its derivative or its batch dimension. Use arrayad functions on it (NumPy "
            f"functions such as np.sin work too, through __array_ufunc__).")
    if dtype is not None:
        out = out.astype(dtype)
    return np.array(out, copy=True) if copy else out


@decl.glue
def _to_backend_array(x):
    if isinstance(x, Tensor):
        if x.requires_grad:
            raise RuntimeError(
                "arrayad: to_backend_array() of a Tensor that requires grad would drop its "
                "gradient. Use tensor.detach().to_backend_array() instead.")
        return x._value
    if _core.in_transform():
        return _concrete(x, "to_backend_array")   # (refuses what would lose a derivative)
    raise RuntimeError(
        f"arrayad: to_backend_array() of an array under a transform ({type(x).__name__}) would "
        f"drop its derivative or its batch dimension. Use arrayad functions on it, or call it "
        f"on the transform's result.")


# -- NumPy protocols -------------------------------------------------------------------------------
_UFUNC_NAMES = {
    "absolute": "abs", "fabs": "abs", "arccos": "acos", "arccosh": "acosh", "arcsin": "asin",
    "arcsinh": "asinh", "arctan": "atan", "arctanh": "atanh", "arctan2": "atan2",
    "power": "pow", "true_divide": "divide", "conjugate": "conj", "invert": "bitwise_invert",
    "left_shift": "bitwise_left_shift", "right_shift": "bitwise_right_shift", "mod": "remainder",
}
_FUNCTION_NAMES = {"concatenate": "concat", "transpose": "permute_dims", "absolute": "abs",
                   "power": "pow", "amax": "max", "amin": "min", "cumsum": "cumulative_sum",
                   "cumprod": "cumulative_prod", "arccos": "acos", "arcsin": "asin",
                   "arctan": "atan", "arctan2": "atan2"}


def _from_numpy_scalar(v):
    """NumPy scalars (``np.float64(2.0)``) act as Python scalars: weak, on any backend."""
    if isinstance(v, np.generic):
        return v.item()
    return v


def _arrays_in(obj, found):
    """The arrayad arrays in ``obj`` (nested lists, tuples and dicts of arguments)."""
    if isinstance(obj, Array):
        found.append(obj)
    elif isinstance(obj, (list, tuple)):
        for o in obj:
            _arrays_in(o, found)
    elif isinstance(obj, dict):
        for o in obj.values():
            _arrays_in(o, found)
    return found


def _numpy_values(obj):
    if isinstance(obj, Tensor):
        return backend_of(obj).to_numpy(obj._value)
    if isinstance(obj, (list, tuple)):
        return type(obj)(_numpy_values(o) for o in obj)
    if isinstance(obj, dict):
        return {k: _numpy_values(v) for k, v in obj.items()}
    return obj


def _back_to(b, out):
    if isinstance(out, (np.ndarray, np.generic)):
        if b.name == "numpy":
            return Tensor(np.asarray(out))
        return Tensor(b.xp.asarray(np.asarray(out)))
    if isinstance(out, (list, tuple)) and not hasattr(out, "_fields"):
        return type(out)(_back_to(b, o) for o in out)
    return out


def _on_numpy(name, call, args, kwargs):
    """A NumPy function that arrayad does not implement, on eager arrays that need no gradient:
    NumPy computes on the data and the arrays it returns come back as arrayad arrays of the
    inputs' backend. Where a derivative would be lost (a tensor that requires grad, a value
    inside a transform) it refuses by name."""
    arrays = _arrays_in((args, kwargs), [])
    for a in arrays:
        if not isinstance(a, Tensor):
            raise TypeError(
                f"arrayad: {name} has no arrayad version, and on an array inside a transform "
                f"({type(a).__name__}) computing it with NumPy would silently drop the "
                f"derivative or the batch dimension. Write it with arrayad functions.")
        if a.requires_grad and _core.is_grad_enabled():
            raise TypeError(
                f"arrayad: {name} has no arrayad version, and computing it with NumPy would "
                f"drop the gradient of a tensor that requires grad. Write it with arrayad "
                f"functions, or call it on x.detach() if no gradient should flow.")
    if any(isinstance(o, Array) for o in _arrays_in(kwargs.get("out", ()), [])):
        raise TypeError(f"arrayad: {name} with out= an arrayad array is not supported: "
                        f"arrayad arrays are updated functionally; use the returned array.")
    b = backend_of(arrays[0]) if arrays else None
    out = call(*_numpy_values(list(args)), **_numpy_values(kwargs))
    return out if b is None else _back_to(b, out)


@decl.glue
def _array_ufunc(ufunc, method, inputs, kwargs):
    name = _UFUNC_NAMES.get(ufunc.__name__, ufunc.__name__)
    # (scipy.special's ufuncs too: scipy.special.erf(tracer) without SCIPY_ARRAY_API)
    fn = getattr(ops, name, None) or getattr(ops.special, name, None)
    if method != "__call__" or kwargs or fn is None:
        what = f"numpy.{ufunc.__name__}" + (f".{method}" if method != "__call__" else "")
        return _on_numpy(what, getattr(ufunc, method), inputs, kwargs)
    return fn(*[_from_numpy_scalar(v) for v in inputs])


def _np_reduction(name, has_dtype=True, has_out=True):
    """NumPy's ``f(a, axis=None, dtype=None, out=None, keepdims=False)`` -> arrayad's."""
    order = ["axis"] + (["dtype"] if has_dtype else []) + (["out"] if has_out else []) + \
        ["keepdims"]

    def f(a, *args, **kw):
        kw.update(zip(order, args))
        if kw.pop("out", None) is not None:
            raise TypeError(f"arrayad: numpy.{name} with out= is not supported on arrayad arrays")
        if "ddof" in kw:
            kw["correction"] = kw.pop("ddof")
        if kw.get("dtype") is None:
            kw.pop("dtype", None)
        return getattr(ops, name)(a, **kw)
    return f


def _np_axis_first(name, default):
    """NumPy's ``f(a, axis=default, ...)`` with axis positional -> keyword."""
    def f(a, axis=default, **kw):
        if axis is None and name in ("cumulative_sum", "cumulative_prod"):
            a = ops.reshape(a, (-1,))
            axis = 0
        return getattr(ops, name)(a, axis=axis, **kw)
    return f


def _np_transpose(a, axes=None):
    return ops.permute_dims(a, tuple(range(a.ndim))[::-1] if axes is None else tuple(axes))


def _np_concatenate(arrays, axis=0, **kw):
    return ops.concat(list(arrays), axis=axis, **kw)


def _np_stack(arrays, axis=0, **kw):
    return ops.stack(list(arrays), axis=axis, **kw)


def _np_squeeze(a, axis=None):
    if axis is None:
        axis = tuple(i for i, s in enumerate(a.shape) if s == 1)
    return ops.squeeze(a, axis=axis)


def _np_reshape(a, shape=None, order="C", *, newshape=None, copy=None):
    if order != "C":
        raise TypeError("arrayad: numpy.reshape supports order='C' only")
    return ops.reshape(a, newshape if shape is None else shape, copy=copy)


def _np_clip(a, a_min=None, a_max=None, **kw):
    return ops.clip(a, kw.get("min", a_min), kw.get("max", a_max))


def _np_atleast(nd):
    def f(*arrays):
        out = []
        for a in arrays:
            a = ops.asarray(a)
            if a.ndim < nd:   # NumPy's placement: () -> (1, 1, 1), (n,) -> (1, n, 1)
                s = tuple(a.shape)
                if a.ndim == 0:
                    s = (1,) * nd
                elif a.ndim == 1:
                    s = (1, s[0], 1)[:nd]
                else:
                    s = s + (1,)
                a = ops.reshape(a, s)
            out.append(a)
        return out[0] if len(out) == 1 else out
    return f


def _np_norm(x, ord=None, axis=None, keepdims=False):
    """numpy.linalg.norm: a vector norm, or a matrix norm over two axes."""
    if axis is None:
        if ord is None or x.ndim == 1:   # (the 2-norm of the flattened array: Frobenius's)
            out = ops.linalg.vector_norm(x, axis=None, ord=2 if ord is None else ord)
            return ops.reshape(out, (1,) * x.ndim) if keepdims else out
        axis = (-2, -1)
    if isinstance(axis, int) or len(axis) == 1:
        return ops.linalg.vector_norm(x, axis=axis, keepdims=keepdims,
                                      ord=2 if ord is None else ord)
    moved = ops.moveaxis(x, tuple(axis), (-2, -1))
    out = ops.linalg.matrix_norm(moved, ord="fro" if ord is None else ord)
    if keepdims:
        for a in sorted(a % x.ndim for a in axis):
            out = ops.expand_dims(out, axis=a)
    return out


# NumPy functions whose signature differs from the standard's (positional axis, numpy names).
_NP_ADAPTERS = {
    "sum": _np_reduction("sum"), "prod": _np_reduction("prod"), "mean": _np_reduction("mean"),
    "std": _np_reduction("std"), "var": _np_reduction("var"),
    "max": _np_reduction("max", False), "min": _np_reduction("min", False),
    "amax": _np_reduction("max", False), "amin": _np_reduction("min", False),
    "all": _np_reduction("all", False), "any": _np_reduction("any", False),
    "argmax": _np_reduction("argmax", False), "argmin": _np_reduction("argmin", False),
    "count_nonzero": lambda a, axis=None, *, keepdims=False:
        ops.count_nonzero(a, axis=axis, keepdims=keepdims),
    "cumsum": _np_axis_first("cumulative_sum", None),
    "cumprod": _np_axis_first("cumulative_prod", None),
    "sort": _np_axis_first("sort", -1), "argsort": _np_axis_first("argsort", -1),
    "flip": _np_axis_first("flip", None), "expand_dims": _np_axis_first("expand_dims", 0),
    "transpose": _np_transpose, "concatenate": _np_concatenate, "stack": _np_stack,
    "squeeze": _np_squeeze, "reshape": _np_reshape, "clip": _np_clip,
    "shape": lambda a: tuple(a.shape), "ndim": lambda a: a.ndim, "size": lambda a: int(a.size),
    "dot": lambda a, b: ops.matmul(a, b), "diff": lambda a, n=1, axis=-1, **kw:
        ops.diff(a, n=n, axis=axis, **kw),
    "atleast_1d": _np_atleast(1), "atleast_2d": _np_atleast(2), "atleast_3d": _np_atleast(3),
    "ravel": lambda a, order="C": ops.reshape(a, (-1,)),
}
_NP_LINALG_ADAPTERS = {"norm": _np_norm}
_NP_SUBMODULES = {"numpy": None, "numpy.linalg": "linalg", "numpy.fft": "fft"}


@decl.glue
def _array_function(func, types, args, kwargs):
    module = getattr(func, "__module__", "") or ""
    sub = _NP_SUBMODULES.get(module, False)
    fn = None
    if sub is None:
        fn = _NP_ADAPTERS.get(func.__name__)
        if fn is None:
            fn = getattr(ops, _FUNCTION_NAMES.get(func.__name__, func.__name__), None)
    elif sub:
        fn = (_NP_LINALG_ADAPTERS.get(func.__name__) if sub == "linalg" else None) or \
            getattr(getattr(ops, sub), func.__name__, None)
    if fn is None or not callable(fn) or isinstance(fn, type):
        return _on_numpy(f"{module or 'numpy'}.{func.__name__}", func, args, kwargs)
    args = [_from_numpy_scalar(a) for a in args]
    return fn(*args, **kwargs)


# -- printing --------------------------------------------------------------------------------------
def _format_values(raw, prefix):
    arr = np.asarray(raw)
    if (arr.dtype.kind == "f" and arr.size and np.all(np.isfinite(arr))
            and np.all(arr == np.round(arr))):
        opts = {}
    elif is_inexact(arr.dtype):
        opts = {"precision": 4, "floatmode": "fixed"}
    else:
        opts = {}
    return np.array2string(arr, separator=", ", prefix=prefix, **opts)


@decl.glue
def _repr(x):
    if isinstance(x, Tensor):
        b = backend_of(x)
        body = b.lazy_repr(x._value)   # (a lazy backend's own summary: printing computes nothing)
        try:
            body = body or _format_values(b.to_numpy(x._value), "tensor(")
        except Exception:  # a foreign value that cannot be printed cheaply
            body = f"<{type(x._value).__name__} {tuple(x.shape)}>"
        extra = []
        dt = x.dtype
        if dt not in (ops.float64, ops.int64, ops.bool):
            extra.append(f"dtype={dt!r}")
        if b.name != "numpy":
            extra.append(f"backend={b.name}")
        if x.grad_fn is not None:
            extra.append(f"grad_fn=<{x.grad_fn.name()}>")
        elif x.requires_grad:
            extra.append("requires_grad=True")
        return "tensor(" + body + "".join(", " + e for e in extra) + ")"
    return x._describe()   # (each tracer class's own)


# -- devices ---------------------------------------------------------------------------------------
def _is_the_cpu(device):
    """Whether a device object of any backend is the host CPU: "cpu" (NumPy, Dask), torch's
    ``device('cpu')``, array-api-strict's CPU_DEVICE, a JAX CPU device."""
    if isinstance(device, str):
        return device == "cpu"
    root = type(device).__module__.partition(".")[0]
    if root == "torch":
        return device.type == "cpu"
    if root == "array_api_strict":
        import array_api_strict
        return device == array_api_strict.Device("CPU_DEVICE")
    if root in ("jax", "jaxlib"):
        return getattr(device, "platform", None) == "cpu"
    return False


class CPU(str):
    """The device of NumPy-backed (and Dask-backed) arrays: the string "cpu", which also equals
    the other backends' objects for the CPU. Code that checks that its inputs share a device
    (scikit-learn's ``device(*arrays)``: ``d1 != d2``) must not report "different devices: cpu,
    cpu" for a NumPy-backed and a torch-backed array; whether the two can meet in one operation
    is arrayad's to say, with an error naming both backends. (torch's ``device.__eq__`` defers to
    this one; array-api-strict's Device answers False itself when it is on the left.)"""
    __slots__ = ()

    def __eq__(self, other):
        return _is_the_cpu(other) if not isinstance(other, str) else str.__eq__(self, other)

    def __ne__(self, other):
        return not self.__eq__(other)

    __hash__ = str.__hash__


_CPU = CPU("cpu")


@decl.glue
def _device_of(x):
    x = _core.raw_value(x)
    d = _core.backend_of(x).device_of(x)
    return _CPU if type(d) is str and d == "cpu" else d


def _to_device_impl(xp, x, device, stream=None, backend=None):
    # ``backend``: the target's name where ``device`` alone does not say it ("cpu" of NumPy)
    target = get_backend(backend) if backend else backend_of_device(device)
    source = _core.backend_of(x)
    if target is not None and target is not source:
        # another backend's device: through a NumPy copy (every backend takes NumPy arrays)
        host = x if source.name == "numpy" else source.to_numpy(x)
        return target.xp.asarray(host, device=device)
    from array_api_compat import to_device
    return to_device(x, device, stream=stream)


def _home_of(x):
    """The params that move a cotangent back to where the primal ``x`` lives."""
    raw = _core.raw_value(x)
    return {"device": _core.backend_of(raw).device_of(raw),
            "backend": _core.backend_of(raw).name}


to_device_p = decl.primitive(
    "to_device", _to_device_impl,
    vjp=(lambda g, ans, x, device, stream=None, backend=None:
         bind(to_device_p, g, **_home_of(x)),),
    full_jvp=lambda ts, ans, x, device, stream=None, backend=None:
        bind(to_device_p, ts[0], device=device, backend=backend),
    batch=lambda args, dims, **params: (bind(to_device_p, args[0], **params), dims[0]))


@decl.glue
def _to_device(x, device, stream):
    target = backend_of_device(device)
    if target is not None and target is not _core.backend_of(_core.raw_value(x)):
        return bind(to_device_p, x, device=device, stream=stream)
    if device == _device_of(x):
        return x
    return bind(to_device_p, x, device=device, stream=stream)


@decl.glue
def _namespace_for(api_version):
    if api_version not in (None, "2022.12", "2023.12", "2024.12", "2025.12"):
        raise ValueError(f"arrayad: unsupported array API version {api_version!r}")
    # (the public namespace is the package itself, which imports this module: looked up, not
    # imported, so that this module stays below the package in the import graph)
    return sys.modules["arrayad"]


# -- guards ----------------------------------------------------------------------------------------
@decl.glue
def _check_requires_grad(t):
    if not is_inexact(t.dtype):
        raise RuntimeError(
            f"only Tensors of floating point and complex dtype can require gradients "
            f"(this one is {t.dtype.name}); convert it first, e.g. x.astype(arrayad.float64).")


@decl.glue
def _check_not_transformed(what):
    if _core.in_transform():   # (a forward_ad dual level is not a transform)
        raise RuntimeError(
            f"You are attempting to call Tensor.{what}() inside of a function being transformed "
            f"by an arrayad.func transform. This is not supported: pass the tensor as an input "
            f"of the transform (grad/vjp differentiate with respect to their inputs) instead.")


# -- stop_gradient: the value, as a constant to every transform ------------------------------------
def stop_gradient(x):
    """``x`` as a constant: no derivative flows through it (JAX's ``stop_gradient``).

    Under a transform its derivative is zero; on an eager ``Tensor`` it is ``x.detach()``.
    Use it to hold a value fixed in a derivative (a target, a baseline, a running statistic).

    Parameters
    ----------
    x : array
        Any backend's array, an ``ad.Tensor`` or a tracer.

    Returns
    -------
    array
        The same value, of the same kind (a Tensor that does not require grad for a Tensor), as
        a constant for every transform.

    Raises
    ------
    TypeError
        If ``x`` is of a type no backend accepts (a string, for instance).

    Examples
    --------
    In ``d/dx (stop_gradient(x) * x)`` only the second factor is differentiated, so the
    derivative is ``x`` (and not ``2 x``):

    >>> ad.func.grad(lambda x: ad.sum(ad.stop_gradient(x) * x))(np.array([1.0, 2.0]))
    array([1., 2.])
    >>> ad.stop_gradient(ad.tensor([1.0], requires_grad=True)).requires_grad
    False
    """
    if isinstance(x, Tensor):
        return x.detach()
    return bind(stop_gradient_p, x)


# (the batched value stopped again: returned as it is, a value of a grad outside the vmap
# would be differentiated through, as in grad(vmap(f)) or a loop's batched reverse pass)
stop_gradient_p = decl.primitive("stop_gradient", lambda xp, x: x, public=stop_gradient,
                                 batch=lambda args, dims: (bind(stop_gradient_p, args[0]),
                                                           dims[0]))


