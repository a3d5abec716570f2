"""The backends arrayad knows, by name: the adapters' modules, imported on first use."""

import importlib


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


def _canonical(name):
    name = _ALIASES.get(name, name)
    if name not in _ADAPTERS:
        raise ValueError(
            f"arrayad: unknown backend {name!r}; choose one of {sorted(_ADAPTERS)}")
    return name


def get_backend(name):
    """The adapter of backend ``name``, imported on first use.

    Parameters
    ----------
    name : str
        'numpy', 'array_api_strict', 'torch', 'cupy', 'dask' or 'jax' (aliases: 'np',
        'strict', 'array-api-strict', 'pytorch', 'dask.array').

    Returns
    -------
    Backend
        The adapter (one per process and name).

    Raises
    ------
    ValueError
        If ``name`` is not a backend arrayad knows; the error lists them.
    ImportError
        If the backend's library is not installed here.

    Examples
    --------
    >>> ad.get_backend('np')
    <arrayad backend numpy>
    >>> ad.get_backend('np') is ad.get_backend('numpy')
    True
    """
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
    """The names of the backends whose library imports here.

    Each backend is loaded to find out (its library imported), in the order numpy,
    array_api_strict, torch, cupy, dask, jax.

    Returns
    -------
    list of str

    Raises
    ------
    Exception
        Nothing of its own: a backend whose library fails to import is left out.

    Examples
    --------
    >>> names = ad.available_backends()
    >>> names[0], 'array_api_strict' in names
    ('numpy', True)
    """
    out = []
    for name in _ADAPTERS:
        try:
            get_backend(name)
        except Exception:
            continue
        out.append(name)
    return out


def _module_root(t):
    return (getattr(t, "__module__", "") or "").split(".")[0]
