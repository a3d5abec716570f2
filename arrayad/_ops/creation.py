"""Creation functions (the standard's and torch's: tensor, randn, rand, randint, manual_seed).

Outside transforms, new arrays come from the default backend (``arrayad.set_backend``) and are
eager ``Tensor``s. Inside a transform they are made in the backend and on the device of the
transform's inputs and are constants of the innermost transform (NOTE [everything inside is
arrayad] in the core), so that ``out = zeros(n); out[i] = traced`` updates functionally and strict
or torch inputs never meet a NumPy array. ``device=`` with a backend's device object routes
there. The ``*_like`` functions are primitives without derivative: they follow their argument.
"""

from ._namespace import ops

from .._dtypes import from_backend, to_backend
from .._core import _core
from .._core._core import Array, Tensor, bind, shape_of
from ..backends import Generator, backend_of, backend_of_device, default_backend, get_backend
from ..backends import get_rng_state as _get_rng_state, manual_seed as _manual_seed
from ..backends import set_rng_state as _set_rng_state
from ._rules import LINEAR, Declarations, per_primitive

decl = Declarations(globals())


def _frame():
    """The innermost open transform that new arrays belong to, or None (eagerly, and in a
    ``forward_ad.dual_level`` block, which is eager code)."""
    for interp in reversed(_core.interpreters()):
        if not getattr(interp, "dual_level", False):
            return interp
    return None


def _placement(device):
    """(backend, device, transform) of a new array: ``device``'s backend if it names one, else
    the backend and device of the innermost transform's inputs, else the default backend."""
    interp = _frame()
    b = backend_of_device(device)
    if b is not None:
        return b, device, interp
    if interp is not None:
        for f in reversed(_core.interpreters()):
            if f.frame is not None:
                raw = _core.raw_value(f.frame)
                b = backend_of(raw)
                return b, b.device_of(raw) if device is None else device, interp
    return default_backend(), device, interp


def _made(raw, interp, requires_grad=False):
    """A new array: a constant of ``interp`` inside a transform, else a Tensor."""
    if interp is not None:
        return interp.lift(raw)
    t = Tensor(raw)
    if requires_grad:
        t.requires_grad = True
    return t


def _dt(dtype, b):
    return to_backend(dtype, b.xp)


def _shape(shape):
    if isinstance(shape, int):
        return (shape,)
    return tuple(int(s) for s in shape)


# -- asarray / tensor ------------------------------------------------------------------------------
def _contains_arrays(obj):
    if isinstance(obj, Array):
        return True
    if isinstance(obj, (list, tuple)):
        return any(_contains_arrays(o) for o in obj)
    return False


def asarray(obj, /, *, dtype=None, device=None, copy=None):
    """Convert ``obj`` to an arrayad array. An arrayad array (or tracer) passes through, keeping
    its gradient; a backend array keeps its backend; Python data goes to the default backend."""
    if isinstance(obj, Array):
        if dtype is not None:
            obj = ops.astype(obj, dtype, copy=bool(copy))
        elif copy:
            obj = bind(_copy_p, obj)
        if device is not None and device != obj.device:
            obj = ops._to_device(obj, device, None)
        return obj
    if isinstance(obj, (list, tuple)) and _contains_arrays(obj):
        out = ops.stack([asarray(o) for o in obj])
        return out if dtype is None else ops.astype(out, dtype)
    b, dev, interp = _placement(device)
    if not (isinstance(obj, (bool, int, float, complex)) or isinstance(obj, (list, tuple))):
        try:
            b, dev = backend_of(obj), device   # (a backend array keeps its backend)
        except TypeError:
            pass
    kw = {}
    if dev is not None:
        kw["device"] = dev
    if copy is not None:
        kw["copy"] = copy
    raw = b.xp.asarray(obj, dtype=_dt(dtype, b), **kw)
    from_backend(raw.dtype)   # (refuses float16, object... here rather than at first use)
    return _made(raw, interp)


_copy_p = decl.primitive("copy", lambda xp, x: xp.asarray(x, copy=True), public=asarray,
                         vjp=(lambda g, ans, x: g,), jvp=LINEAR,
                         batch=lambda args, dims: (bind(_copy_p, args[0]), dims[0]))


@decl.export(traced=False)
def tensor(data, *, dtype=None, device=None, requires_grad=False):
    """torch-style constructor: a new Tensor holding a copy of ``data``."""
    if isinstance(data, Array):
        data = ops.asarray(data, dtype=dtype, copy=True)
        t = data.detach() if isinstance(data, Tensor) else data
    else:
        t = asarray(data, dtype=dtype, device=device, copy=True)
    if requires_grad and isinstance(t, Tensor):
        t.requires_grad = True
    return t


# -- filled arrays ---------------------------------------------------------------------------------
@decl.export(traced=False)
def zeros(shape, *, dtype=None, device=None):
    """An array of zeros."""
    b, device, interp = _placement(device)
    return _made(b.xp.zeros(_shape(shape), dtype=_dt(dtype, b), device=device), interp)


@decl.export(traced=False)
def ones(shape, *, dtype=None, device=None):
    """An array of ones."""
    b, device, interp = _placement(device)
    return _made(b.xp.ones(_shape(shape), dtype=_dt(dtype, b), device=device), interp)


@decl.export(traced=False)
def empty(shape, *, dtype=None, device=None):
    """An uninitialised array (arrayad fills it with zeros, for reproducibility)."""
    return zeros(shape, dtype=dtype, device=device)


@decl.export(traced=False)
def full(shape, fill_value, *, dtype=None, device=None):
    """An array filled with ``fill_value`` (a scalar, or a 0-d array: then it is differentiable)."""
    if isinstance(fill_value, Array) or not isinstance(fill_value, (bool, int, float, complex)):
        value = asarray(fill_value, dtype=dtype)
        return bind(_copy_p, ops.broadcast_to(value, _shape(shape))) if _shape(shape) else value
    b, device, interp = _placement(device)
    return _made(b.xp.full(_shape(shape), fill_value, dtype=_dt(dtype, b), device=device), interp)


def _like(name, **public):
    def impl(xp, x, dtype=None, device=None, **kw):
        args = {"dtype": to_backend(dtype, xp)}
        if device is not None:
            args["device"] = device
        return getattr(xp, name)(x, **kw, **args)
    return decl.primitive(name, impl, **public, batch=per_primitive(
        lambda p: lambda args, dims, **params: (bind(p, args[0], **params), dims[0])))


zeros_like_p = _like("zeros_like", api="x, /, *, dtype=None, device=None",
                     doc="Zeros with the shape (and by default dtype and device) of ``x``.")
ones_like_p = _like("ones_like", api="x, /, *, dtype=None, device=None",
                    doc="Ones with the shape of ``x``.")


@decl.export(primitive=zeros_like_p)
def empty_like(x, /, *, dtype=None, device=None):
    """An uninitialised array like ``x`` (zeros, for reproducibility)."""
    return bind(zeros_like_p, x, dtype=dtype, device=device)


def full_like(x, /, fill_value, *, dtype=None, device=None):
    """``fill_value`` with the shape of ``x``; a 0-d array ``fill_value`` is differentiable."""
    if not isinstance(fill_value, (bool, int, float, complex)):
        return zeros_like(x, dtype=dtype, device=device) + fill_value
    return bind(full_like_p, x, dtype=dtype, device=device, fill_value=fill_value)


full_like_p = _like("full_like", public=full_like)


# -- ranges ----------------------------------------------------------------------------------------
@decl.export(traced=False)
def arange(start, /, stop=None, step=1, *, dtype=None, device=None):
    """Evenly spaced values in ``[start, stop)``."""
    b, device, interp = _placement(device)
    return _made(b.xp.arange(start, stop, step, dtype=_dt(dtype, b), device=device), interp)


@decl.export(traced=False)
def linspace(start, stop, /, num, *, dtype=None, device=None, endpoint=True):
    """``num`` evenly spaced values from ``start`` to ``stop``."""
    b, device, interp = _placement(device)
    return _made(b.xp.linspace(start, stop, num, dtype=_dt(dtype, b), device=device,
                               endpoint=endpoint), interp)


@decl.export(traced=False)
def eye(n_rows, n_cols=None, /, *, k=0, dtype=None, device=None):
    """A matrix with ones on diagonal ``k``."""
    b, device, interp = _placement(device)
    return _made(b.xp.eye(n_rows, n_cols, k=k, dtype=_dt(dtype, b), device=device), interp)


@decl.composite
def meshgrid(*arrays, indexing="xy"):
    """Coordinate matrices from coordinate vectors (differentiable: reshapes and broadcasts)."""
    if indexing not in ("xy", "ij"):
        raise ValueError("meshgrid: indexing must be 'xy' or 'ij'")
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
    """An array from any object that supports DLPack (kept on its backend where possible)."""
    if isinstance(x, Array):
        return asarray(x, device=device, copy=copy)
    for name in ("numpy", "torch", "cupy", "array_api_strict"):
        try:
            b = get_backend(name)
        except ImportError:
            continue
        if isinstance(x, b.array_types):
            return Tensor(b.xp.from_dlpack(x))
    return Tensor(default_backend().xp.from_dlpack(x))


# -- random numbers (torch-style) ------------------------------------------------------------------
def _size_args(size):
    if len(size) == 1 and isinstance(size[0], (list, tuple)):
        return tuple(size[0])
    return tuple(size)


def _random(draw, shape, requires_grad, interp):
    """Draw random numbers, honouring the ``randomness`` mode of every enclosing vmap:
    'error' refuses, 'same' draws once, 'different' draws one sample per batch element."""
    different = []
    for f in _core.interpreters():
        refuse = getattr(f, "random_error", None)   # (arrayad.jit: drawn once, replayed)
        if refuse is not None:
            raise refuse()
        if isinstance(f, _core.BatchInterpreter):
            mode = f.randomness
            if mode == "error":
                raise RuntimeError(
                    "vmap: called random operation while in randomness error mode. Please either "
                    "use the 'same' or 'different' randomness flags on vmap or perform the "
                    "randomness operation out of vmap")
            if mode == "different":
                different.append(f)
    full_shape = tuple(f.size for f in different) + tuple(shape)
    if interp is None:
        return _made(draw(full_shape), None, requires_grad)
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


@decl.export(traced=False)
def randn(*size, dtype=None, device=None, requires_grad=False, generator=None):
    """Standard normal samples of shape ``size`` (ints or one list), from the default backend
    (inside a transform, the inputs'), drawn from ``generator`` if one is given."""
    b, device, interp = _placement(device)
    g = _source(generator, b, "randn")
    return _random(lambda s: b.normal(g, s, _dt(dtype, b), device), _size_args(size),
                   requires_grad, interp)


@decl.export(traced=False)
def rand(*size, dtype=None, device=None, requires_grad=False, generator=None):
    """Uniform samples on [0, 1)."""
    b, device, interp = _placement(device)
    g = _source(generator, b, "rand")
    return _random(lambda s: b.uniform(g, s, _dt(dtype, b), device), _size_args(size),
                   requires_grad, interp)


@decl.export(traced=False)
def randint(low, high=None, size=(), *, dtype=None, device=None, generator=None):
    """Random integers in ``[low, high)`` (torch's ``randint(high, size)`` form works too)."""
    if high is None:
        low, high = 0, low
    b, device, interp = _placement(device)
    g = _source(generator, b, "randint")
    return _random(lambda s: b.integers(g, low, high, s, _dt(dtype, b), device), _shape(size),
                   False, interp)


def manual_seed(seed):
    """Seed the random generators of every backend (loaded now or later), in this thread."""
    _manual_seed(seed)


def get_rng_state():
    """This thread's random state of every loaded backend (restored by ``set_rng_state``)."""
    return _get_rng_state()


def set_rng_state(state):
    _set_rng_state(state)


for _f in (manual_seed, get_rng_state, set_rng_state):
    decl.export(_f, traced=False)
