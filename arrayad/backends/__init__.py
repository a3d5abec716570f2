"""Backend adapters: one small module per array library, holding only what differs between them.

Everything the standard covers goes through the library's array-api-compat namespace (``xp``);
an adapter adds random numbers, conversion to NumPy for printing, and the few functions a
backend lacks. Adapters are imported lazily, the first time an array of their type is seen or
their name is asked for, so arrayad imports no array library but NumPy at start-up.

The default backend (for ``ad.tensor``, ``ad.randn``...) is NumPy unless ``ARRAYAD_BACKEND``,
``set_backend(name)`` or a ``with backend(name):`` block says otherwise.
"""

import contextlib
import importlib
import os

from .._core import _core

__all__ = ["Backend", "get_backend", "set_backend", "backend", "available_backends",
           "default_backend", "backend_of"]

_ADAPTERS = {
    "numpy": "arrayad.backends.numpy",
    "array_api_strict": "arrayad.backends.array_api_strict",
    "torch": "arrayad.backends.torch",
    "cupy": "arrayad.backends.cupy",
    "dask": "arrayad.backends.dask",
    "jax": "arrayad.backends.jax",
}
_ALIASES = {"np": "numpy", "strict": "array_api_strict", "array-api-strict": "array_api_strict",
            "pytorch": "torch", "dask.array": "dask"}
_LOADED = {}
_SEED = [0]   # the last arrayad.manual_seed, applied to backends loaded later too


class Backend:
    """What arrayad needs from one array library. Subclasses fill in ``name``, ``xp``, the
    array types, and override the methods whose generic version does not fit."""

    name = None
    xp = None
    array_types = ()
    scalar_types = ()   # types a backend returns for 0-d results and that must become arrays

    def __init__(self):
        self.seed(_SEED[0])

    def __repr__(self):
        return f"<arrayad backend {self.name}>"

    def register(self):
        for t in self.array_types:
            _core.register_backend_type(t, self)
        for t in self.scalar_types:
            _core.register_backend_type(t, self, self.fix_scalar)

    def fix_scalar(self, x):
        return self.xp.asarray(x)

    # -- random numbers: a generator per backend, reseeded by arrayad.manual_seed
    def seed(self, seed):
        import numpy as np
        self._rng = np.random.default_rng(seed)

    def get_rng_state(self):
        return self._rng.bit_generator.state

    def set_rng_state(self, state):
        self._rng.bit_generator.state = state

    def _from_numpy(self, a, dtype, device):
        return self.xp.asarray(a, dtype=dtype, device=device)

    def normal(self, shape, dtype, device):
        return self._from_numpy(self._rng.standard_normal(shape), dtype, device)

    def uniform(self, shape, dtype, device):
        return self._from_numpy(self._rng.random(shape), dtype, device)

    def integers(self, low, high, shape, dtype, device):
        return self._from_numpy(self._rng.integers(low, high, shape), dtype, device)

    # -- functional updates (the transposes of indexing)
    def index_set(self, x, key, v):
        """A copy of ``x`` with ``x[key] = v``."""
        out = self.xp.asarray(x, copy=True)
        out[key] = v
        return out

    def index_add(self, base, key, v):
        """A copy of ``base`` with ``v`` added at ``key``; repeated indices accumulate."""
        xp = self.xp
        if _is_basic_key(key):
            out = xp.asarray(base, copy=True)
            out[key] = out[key] + v
            return out
        # Generic scatter-add with standard functions only: the flat positions that ``key``
        # selects, then a one-hot matrix product that sums the values landing on each position.
        n = 1
        for s in base.shape:
            n *= s
        pos = xp.reshape(xp.arange(n), base.shape)[key]
        k = 1
        for s in pos.shape:
            k *= s
        vals = xp.reshape(xp.broadcast_to(xp.asarray(v, dtype=base.dtype), pos.shape), (1, k))
        onehot = xp.astype(xp.reshape(pos, (k, 1)) == xp.reshape(xp.arange(n), (1, n)), base.dtype)
        return base + xp.reshape(vals @ onehot, base.shape)

    # -- conversions
    def to_numpy(self, x):
        import numpy as np
        return np.asarray(x)

    def default_device(self):
        return self.xp.__array_namespace_info__().default_device()

    def device_of(self, x):
        return x.device


def _is_basic_key(key):
    if not isinstance(key, tuple):
        key = (key,)
    return all(k is None or k is Ellipsis or isinstance(k, slice)
               or (isinstance(k, int) and not isinstance(k, bool)) for k in key)


def _canonical(name):
    name = _ALIASES.get(name, name)
    if name not in _ADAPTERS:
        raise ValueError(
            f"arrayad: unknown backend {name!r}; choose one of {sorted(_ADAPTERS)}")
    return name


def get_backend(name):
    """The adapter for backend ``name``, imported on first use."""
    name = _canonical(name)
    b = _LOADED.get(name)
    if b is None:
        try:
            mod = importlib.import_module(_ADAPTERS[name])
        except ImportError as e:
            raise ImportError(
                f"arrayad: the {name} backend needs its library installed ({e})") from e
        b = mod.make()
        b.register()
        _LOADED[name] = b
    return b


def available_backends():
    """Names of the backends whose library imports here."""
    out = []
    for name in _ADAPTERS:
        try:
            get_backend(name)
        except Exception:
            continue
        out.append(name)
    return out


# -- default backend for new arrays
_default = [None]


def default_backend():
    b = _default[0]
    if b is None:
        b = get_backend(os.environ.get("ARRAYAD_BACKEND", "numpy"))
        _default[0] = b
    return b


def set_backend(name):
    """Make ``name`` the backend of new arrays (``ad.tensor``, ``ad.randn``, ``ad.zeros``...)."""
    _default[0] = get_backend(name)


@contextlib.contextmanager
def backend(name):
    """``with arrayad.backend('torch'):`` new arrays inside the block use that backend."""
    prev = _default[0]
    _default[0] = get_backend(name)
    try:
        yield _default[0]
    finally:
        _default[0] = prev


def _module_root(t):
    return (getattr(t, "__module__", "") or "").split(".")[0]


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
    b = get_backend(name)
    if not isinstance(raw, b.array_types + b.scalar_types):
        raise TypeError(f"arrayad: unsupported {name} object of type {type(raw).__name__}")
    return b


def backend_of(x):
    """The backend adapter of an arrayad Tensor or tracer, or of a raw array."""
    while isinstance(x, _core.Array):
        if isinstance(x, _core.Tensor):
            x = x._value
        elif isinstance(x, _core.BatchTracer) or isinstance(x, _core.GradTracer):
            x = x.value
        else:
            x = x.primal
    return _core.backend_of(x)
