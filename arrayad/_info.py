"""``__array_namespace_info__``: what the namespace supports, for the default backend, and
inside transforms what works there: array-api-extra and scipy read ``capabilities()`` to choose
between a masked path and a ``where`` path.

Devices, default dtypes and dtypes are the backend's own answers (its info object), its dtypes
given as arrayad's: torch's default floating dtype is float32, array-api-strict has devices
without float64, and a ``device=`` of a backend asks that backend."""

from ._core._core import BatchInterpreter, interpreters
from ._dtypes import from_backend
from .backends import backend_of_device, default_backend

_KINDS = ("bool", "signed integer", "unsigned integer", "integral", "real floating",
          "complex floating", "numeric")


class _Devices(tuple):
    """The devices: a tuple, as the 2025.12 standard has it, that also concatenates with a list
    as the list of the 2024.12 standard did (``info.devices() + [None]``: SciPy's test fixtures
    and other code written for 2024.12)."""
    __slots__ = ()

    def __add__(self, other):
        if isinstance(other, list):
            return list(self) + other
        return _Devices(tuple.__add__(self, other))

    def __radd__(self, other):
        if isinstance(other, list):
            return other + list(self)
        return _Devices(tuple(other) + tuple(self))


def _backend_info(device):
    b = backend_of_device(device) or default_backend()
    return b, b.xp.__array_namespace_info__()


def _check_kind(kind):
    if kind is None:
        return
    kinds = kind if isinstance(kind, tuple) else (kind,)
    for k in kinds:
        if not (isinstance(k, str) and k in _KINDS) and not hasattr(k, "kind"):
            raise ValueError(
                f"__array_namespace_info__().dtypes: unsupported kind {k!r}; one of "
                f"{', '.join(map(repr, _KINDS))}, a dtype, or a tuple of these")


class _Info:
    def capabilities(self):
        # Under vmap a boolean mask selects a different number of elements per batch element:
        # the result would have a data-dependent, ragged shape, which vmap refuses.
        batched = any(isinstance(f, BatchInterpreter) for f in interpreters())
        return {"boolean indexing": not batched, "data-dependent shapes": not batched,
                "max dimensions": 64}

    def default_device(self):
        return default_backend().default_device()

    def default_dtypes(self, *, device=None):
        _, info = _backend_info(device)
        return {k: from_backend(v) for k, v in info.default_dtypes(device=device).items()}

    def devices(self):
        return _Devices(default_backend().devices())

    def dtypes(self, *, device=None, kind=None):
        _check_kind(kind)
        from ._ops.dtype_functions import isdtype
        _, info = _backend_info(device)
        out = {}
        for name, d in info.dtypes(device=device).items():
            d = from_backend(d)
            if kind is None or isdtype(d, kind):
                out[name] = d
        return out


def __array_namespace_info__():
    """Information about this array API namespace (devices, dtypes, capabilities)."""
    return _Info()
