"""Where arrays live: the default backend of new arrays (per context), the backend of a raw
array, of an arrayad array and of a device."""

import contextlib
import contextvars

from .. import config as _config
from .._core import _core
from ._registry import _ADAPTERS, _module_root, get_backend
from ._dtypes import refuse_numpy_kind


# -- default backend for new arrays, per context (NOTE [thread state] in _core/_base.pyx)
_process_default = []   # the process's adapter (config.default_backend), looked up when first used
_default = contextvars.ContextVar("arrayad.default_backend", default=None)   # None: the above


def default_backend():
    """The backend of new arrays in the calling thread or asyncio task.

    The calling context's choice (the last ``set_backend``, or the enclosing ``with
    backend(...)`` block; an asyncio task starts with the choice in force where it was created,
    a new thread with none), else the process's (``arrayad.config.update("default_backend",
    name)``, by default ``ARRAYAD_BACKEND``, read once), else NumPy. Inside a transform, new
    arrays follow the transform's inputs instead (``arrayad.zeros``).

    Returns
    -------
    Backend

    Raises
    ------
    ValueError
        If ``ARRAYAD_BACKEND`` names no backend (ImportError: its library is missing).

    Examples
    --------
    >>> with ad.backend('array_api_strict'):
    ...     ad.backends.default_backend()
    <arrayad backend array_api_strict>
    """
    b = _default.get()
    if b is None:
        if not _process_default:
            name = _config._values["default_backend"]
            try:
                _process_default.append(get_backend(name))
            except ValueError as e:   # (update checks its name: this one is the variable's)
                raise ValueError(f"ARRAYAD_BACKEND={name!r} in the environment: {e}") from None
        b = _process_default[0]
    return b


def _update_process_default(name):
    """``config.update("default_backend", name)``: the backend of new arrays for every thread
    and task that has not chosen its own."""
    b = get_backend(name)
    _process_default[:] = [b]
    _config._values["default_backend"] = b.name


def set_backend(name):
    """Make ``name`` the backend of new arrays in the calling thread or asyncio task.

    ``ad.tensor``, ``ad.asarray`` of Python data, ``ad.zeros``, ``ad.randn``... then make arrays
    of that backend (outside transforms; inside one, new arrays follow its inputs). Other
    threads and tasks keep theirs (the choice is a ``contextvars`` variable: tasks created
    afterwards from this one inherit it); new threads start with the process's default
    (``arrayad.config.default_backend``: ``ARRAYAD_BACKEND``, or NumPy).
    For a block of code, ``with arrayad.backend(name):`` is the tidier choice.

    Parameters
    ----------
    name : str
        A backend name or alias, as for ``get_backend``.

    Returns
    -------
    None

    Raises
    ------
    ValueError
        If ``name`` is not a backend arrayad knows.
    ImportError
        If the backend's library is not installed here.

    Examples
    --------
    >>> ad.set_backend('array_api_strict')
    >>> ad.zeros(2)
    tensor([0., 0.], backend=array_api_strict)
    >>> ad.set_backend('numpy')
    """
    _default.set(get_backend(name))


@contextlib.contextmanager
def backend(name):
    """A ``with`` block in which new arrays (in this thread or task) are made on backend ``name``.

    The previous default is restored on leaving the block, also when it raises. The block
    belongs to the calling context: another asyncio task running while this one awaits inside
    the block keeps its own default.

    Parameters
    ----------
    name : str
        A backend name or alias, as for ``get_backend``.

    Returns
    -------
    context manager
        Entering it gives the ``Backend``.

    Raises
    ------
    ValueError
        If ``name`` is not a backend arrayad knows.
    ImportError
        If the backend's library is not installed here.

    Examples
    --------
    >>> with ad.backend('array_api_strict') as b:
    ...     x = ad.ones(2)
    >>> b.name, ad.backends.backend_of(x).name
    ('array_api_strict', 'array_api_strict')
    >>> ad.backends.default_backend().name   # restored
    'numpy'
    """
    b = get_backend(name)
    token = _default.set(b)
    try:
        yield b
    finally:
        _reset(_default, token, None)


def _reset(var, token, default):
    """``var.reset(token)``; where the block ends in another context than it began (a generator
    that held it across a yield, resumed elsewhere), set the value it replaced instead."""
    try:
        var.reset(token)
    except ValueError:
        var.set(default if token.old_value is contextvars.Token.MISSING else token.old_value)


def _resolve(raw):
    """Find the adapter for a raw array type seen for the first time (called by the core)."""
    if raw is None:
        return default_backend()
    root = _module_root(type(raw))
    name = {"numpy": "numpy", "torch": "torch", "array_api_strict": "array_api_strict",
            "cupy": "cupy", "dask": "dask", "jax": "jax", "jaxlib": "jax"}.get(root)
    if name is None:
        raise TypeError(
            f"arrayad: {type(raw).__module__}.{type(raw).__qualname__} is not an array of a "
            f"supported backend ({', '.join(sorted(_ADAPTERS))}); convert it with "
            f"arrayad.asarray first.")
    if name == "numpy":
        refuse_numpy_kind(raw)
    b = get_backend(name)
    if not isinstance(raw, b.array_types + b.scalar_types):
        raise TypeError(f"arrayad: unsupported {name} object of type {type(raw).__name__}")
    return b


def backend_of_device(device):
    """The backend whose device object ``device`` is (a ``torch.device``, an array-api-strict
    ``Device``, a CuPy device...), or None for a name such as ``"cpu"`` that several backends
    understand (then the backend of the context decides)."""
    if device is None or isinstance(device, str):
        return None
    name = {"torch": "torch", "array_api_strict": "array_api_strict", "cupy": "cupy",
            "jax": "jax", "jaxlib": "jax"}.get(_module_root(type(device)))
    if name is None:
        raise TypeError(
            f"arrayad: device={device!r} is not a device of a supported backend; pass a device "
            f"of the backend the array should live in (x.device), or a name such as 'cpu'.")
    return get_backend(name)


def can_stand_for(b, like):
    """Whether an array of backend ``b`` can stand in for one of backend ``like`` (a tangent for
    a primal, a gradient for an input): the same backend, or NumPy for Dask, which takes NumPy
    arrays as operands (as one operation mixing them does, ``_backend_of_args`` in the core)."""
    return b is like or (b.name == "numpy" and like.name == "dask")


def backend_of(x):
    """The backend adapter of an arrayad Tensor or tracer, or of a raw array.

    Parameters
    ----------
    x : array
        An ``arrayad.Tensor``, a tracer, or an array of a supported library.

    Returns
    -------
    Backend

    Raises
    ------
    TypeError
        If ``x`` is not an array of a supported backend (a list, a Python number): convert it
        with ``arrayad.asarray``.

    Examples
    --------
    >>> ad.backends.backend_of(np.ones(2))
    <arrayad backend numpy>
    >>> ad.backends.backend_of(ad.tensor([1.0])).name
    'numpy'
    """
    return _core.backend_of(_core.raw_value(x))


_config.default_backend._bind(lambda: default_backend().name, _update_process_default, backend)
