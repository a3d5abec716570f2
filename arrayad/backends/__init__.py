"""Backend adapters: one small module per array library, holding only what differs between them.

Everything the standard covers goes through the library's array-api-compat namespace (``xp``);
an adapter adds random numbers, conversion to NumPy for printing, and the few functions a
backend lacks. Adapters are imported lazily, the first time an array of their type is seen or
their name is asked for, so arrayad imports no array library but NumPy at start-up.

The default backend (for ``ad.tensor``, ``ad.randn``...) is NumPy unless ``ARRAYAD_BACKEND``,
``set_backend(name)`` or a ``with backend(name):`` block says otherwise. The default backend
belongs to the calling context (a thread, an asyncio task: a ``contextvars`` variable) and the
random generators to the calling thread (NOTE [thread state] in ``_core/_base.pyx``): ``set_backend``
in one task and ``manual_seed`` in one thread change nothing in another.
"""

import contextlib
import contextvars
import importlib
import itertools
import os
import threading

from .._core import _core

__all__ = ["Backend", "NumpyLikeBackend", "get_backend", "set_backend", "backend", "available_backends",
           "default_backend", "backend_of", "manual_seed", "get_rng_state", "set_rng_state"]

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


class Backend:
    """What arrayad needs from one array library: the adapter that ``get_backend`` returns.

    Everything the standard covers goes through ``xp``, the library's array-api-compat
    namespace; an adapter adds random numbers, indexing updates (the transposes of indexing),
    conversion to NumPy for printing, and what the library lacks. Subclasses fill in ``name``,
    ``xp`` and ``array_types`` and override the methods whose generic version (written with
    standard functions only) does not fit; ``register()`` tells the core which array types
    belong to the adapter. The built-in adapters are made by ``get_backend``.

    Attributes
    ----------
    name : str
        The backend's name ('numpy', 'torch'...).
    xp : module
        The standard namespace of the library.
    array_types : tuple of types
        The library's array types.

    Raises
    ------
    Exception
        Nothing of its own when made; its methods raise the library's errors.

    Examples
    --------
    >>> b = ad.get_backend('numpy')
    >>> b.name, isinstance(b, ad.backends.Backend)
    ('numpy', True)
    >>> b.xp.sin(np.zeros(1))   # the standard namespace of NumPy
    array([0.])
    """

    name = None
    xp = None
    array_types = ()
    scalar_types = ()   # types a backend returns for 0-d results and that must become arrays

    def __repr__(self):
        return f"<arrayad backend {self.name}>"

    def register(self):
        for t in self.array_types:
            _core.register_backend_type(t, self)
        for t in self.scalar_types:
            _core.register_backend_type(t, self, self.fix_scalar)

    def fix_scalar(self, x):
        return self.xp.asarray(x)

    # -- random numbers: one generator per backend and thread (``generator``), made from the
    #    thread's seed on first use and remade by arrayad.manual_seed
    def new_generator(self, seed):
        import numpy as np
        return np.random.default_rng(seed)

    def generator(self):
        """This thread's generator for this backend."""
        rngs = _core.thread_state().rngs
        g = rngs.get(self.name)
        if g is None:
            g = rngs[self.name] = self.new_generator(_thread_seed())
        return g

    def get_rng_state(self):
        return self.generator_state(self.generator())

    def set_rng_state(self, state):
        _core.thread_state().rngs[self.name] = self.set_generator_state(self.generator(), state)

    def generator_state(self, gen):
        return gen.bit_generator.state

    def set_generator_state(self, gen, state):
        """Restore ``state`` into ``gen``; returns the generator to draw from afterwards."""
        gen.bit_generator.state = state
        return gen

    def _from_numpy(self, a, dtype, device):
        return self.xp.asarray(a, dtype=dtype, device=device)

    # (gen: this thread's generator, or an arrayad.Generator's)
    def normal(self, gen, shape, dtype, device):
        return self._from_numpy(gen.standard_normal(shape), dtype, device)

    def uniform(self, gen, shape, dtype, device):
        return self._from_numpy(gen.random(shape), dtype, device)

    def integers(self, gen, low, high, shape, dtype, device):
        return self._from_numpy(gen.integers(low, high, shape), dtype, device)

    # -- indexing and functional updates (the transposes of indexing). The generic versions use
    #    standard functions only (array-api-strict accepts integer arrays only with integers and
    #    no fancy __setitem__); NumPy, torch and CuPy override them with their native indexing.
    def getitem(self, x, key):
        """``x[key]`` with NumPy's semantics for any key arrayad accepts."""
        return generic_getitem(self.xp, x, key)

    def index_set(self, x, key, v):
        """A copy of ``x`` with ``x[key] = v`` (the last of repeated indices wins)."""
        xp = self.xp
        if _is_basic_key(key) and not _has_negative_step(key):
            out = xp.asarray(x, copy=True)
            key, v = _drop_none(xp, x, key, v)
            out[key] = v
            return out
        mask = _sole_mask(key, x)
        if mask is not None and (isinstance(v, (int, float, complex, bool)) or v.ndim == 0):
            m = xp.reshape(mask, tuple(mask.shape) + (1,) * (x.ndim - mask.ndim))
            return xp.where(m, xp.asarray(v, dtype=x.dtype), x)
        n, pos = self._positions(x, key)
        k = _numel(pos)
        if k == 0:
            return xp.asarray(x, copy=True)
        vals = xp.reshape(xp.broadcast_to(xp.asarray(v, dtype=x.dtype), pos.shape), (k,))
        onehot = xp.reshape(pos, (k, 1)) == xp.reshape(xp.arange(n), (1, n))
        # the last writer of each position: the largest 1-based occurrence number, 0 for none
        order = xp.reshape(xp.arange(1, k + 1), (k, 1))
        last = xp.max(xp.where(onehot, order, xp.zeros_like(order)), axis=0)
        new = xp.take(vals, xp.clip(last - 1, 0, k - 1), axis=0)
        return xp.reshape(xp.where(last > 0, new, xp.reshape(x, (n,))), x.shape)

    def index_add(self, base, key, v):
        """A copy of ``base`` with ``v`` added at ``key``; repeated indices accumulate."""
        xp = self.xp
        if _is_basic_key(key) and not _has_negative_step(key):
            out = xp.asarray(base, copy=True)
            key, v = _drop_none(xp, base, key, v)
            out[key] = out[key] + v
            return out
        # Scatter-add with standard functions only: the flat positions that ``key`` selects,
        # then a one-hot matrix product that sums the values landing on each position.
        n, pos = self._positions(base, key)
        k = _numel(pos)
        if k == 0:
            return xp.asarray(base, copy=True)
        vals = xp.reshape(xp.broadcast_to(xp.asarray(v, dtype=base.dtype), pos.shape), (1, k))
        onehot = xp.astype(xp.reshape(pos, (k, 1)) == xp.reshape(xp.arange(n), (1, n)), base.dtype)
        return base + xp.reshape(vals @ onehot, base.shape)

    def _positions(self, x, key):
        """(number of elements of x, flat positions selected by key, shaped like x[key])."""
        n = _numel(x)
        return n, self.getitem(self.xp.reshape(self.xp.arange(n), x.shape), key)

    # -- set functions (torch lacks unique_all)
    def unique_all(self, x):
        return self.xp.unique_all(x)

    def unique_counts(self, x):
        return self.xp.unique_counts(x)

    def unique_inverse(self, x):
        return self.xp.unique_inverse(x)

    def unique_values(self, x):
        return self.xp.unique_values(x)

    def with_part(self, z, v, imag):
        """A copy of the complex array ``z`` with its real part (``imag`` False) or imaginary
        part replaced by the real array ``v`` of its shape (writing into ``z.real``/``z.imag``).

        The standard has no complex constructor: ``re + im * 1j`` is exact for finite ``im``
        only (``inf * 1j`` has a nan real part), so other values are refused here; the native
        adapters set the part directly."""
        xp = self.xp
        re, im = (xp.real(z), v) if imag else (v, xp.imag(z))
        if self.all_finite(im) is not True:
            raise ValueError(
                f"arrayad: writing into the {'imaginary' if imag else 'real'} part of a complex "
                f"{self.name} array whose imaginary parts are not all finite cannot be done "
                f"exactly with the array API's functions; build the array out of place on another "
                f"backend, or write finite values")
        c = z.dtype
        return xp.astype(re, c) + xp.astype(im, c) * 1j

    def ones_like(self, x):
        """Ones shaped like the raw array ``x`` (the seed cotangent of a backward pass)."""
        return self.xp.ones_like(x)

    def owned(self, x):
        """``x``, or a copy of it when the caller could not write into it (a gradient handed
        out must be an array the caller owns: ``g *= 0.1`` works, as in torch)."""
        return x

    def all_finite(self, x):
        """Whether the raw array ``x`` holds no inf or nan, for the strong zeros of the
        derivatives (a cotangent's structural zeros stay zero through a derivative that is not finite).
        None: not known without waiting for a device (GPU arrays) or computing (a lazy
        backend), and the structural zeros are kept by a select anyway."""
        xp = self.xp
        if not xp.isdtype(x.dtype, ("real floating", "complex floating")):
            return True
        # (a finite sum has finite terms: one reduction, no temporary the size of x; a sum that
        # overflows only costs a backward pass run again for nothing)
        return bool(xp.isfinite(xp.sum(x)))

    # -- conversions
    def lazy_repr(self, x):
        """What ``repr`` of a Tensor holding ``x`` shows instead of its values, for a lazy
        backend whose values would have to be computed (Dask); None: print the values."""
        return None

    def to_numpy(self, x):
        import numpy as np
        return np.asarray(x)

    def default_device(self):
        return self.xp.__array_namespace_info__().default_device()

    def devices(self):
        """The devices arrays of this backend can live on (``info.devices()``)."""
        return tuple(self.xp.__array_namespace_info__().devices())

    def device_of(self, x):
        return x.device


def _is_basic_key(key):
    if not isinstance(key, tuple):
        key = (key,)
    return all(k is None or k is Ellipsis or isinstance(k, slice)
               or (isinstance(k, int) and not isinstance(k, bool)) for k in key)


def _has_negative_step(key):
    if not isinstance(key, tuple):
        key = (key,)
    return any(isinstance(k, slice) and k.step is not None and k.step < 0 for k in key)


def _numel(x):
    n = 1
    for s in x.shape:
        n *= s
    return n


def _is_index_array(k):
    return not (k is None or k is Ellipsis or isinstance(k, (slice, int)))


def _sole_mask(key, x):
    """The boolean array of a key that is one mask (plus trailing full slices), else None."""
    if not isinstance(key, tuple):
        key = (key,)
    if not key or not _is_index_array(key[0]) or not hasattr(key[0], "dtype"):
        return None
    if any(not (k == slice(None) or k is Ellipsis) for k in key[1:] if not _is_index_array(k)) \
            or any(_is_index_array(k) for k in key[1:]):
        return None
    from .._dtypes import from_backend
    return key[0] if from_backend(key[0].dtype).kind == "b" else None


def _full_basic(key, ndim):
    """A basic key covering every axis (array-api-strict refuses implicit trailing axes)."""
    if not isinstance(key, tuple):
        key = (key,)
    if any(k is Ellipsis for k in key):
        return key
    used = sum(1 for k in key if k is not None)
    return key + (slice(None),) * (ndim - used)


def _drop_none(xp, x, key, v):
    """A basic key without its ``None`` entries (some libraries refuse them in __setitem__),
    and the value reshaped to match: the new axes have size one, so only a reshape."""
    key = _full_basic(key, x.ndim)
    if not any(k is None for k in key):
        return key, v
    key2 = tuple(k for k in key if k is not None)
    if isinstance(v, (int, float, complex, bool)):
        return key2, v
    target = tuple(x[key].shape)
    return key2, xp.reshape(xp.broadcast_to(v, target), tuple(x[key2].shape))


def adv_contiguous(key):
    """Whether the index arrays of a key (and its ints, which NumPy then counts as advanced)
    stand next to each other, with no slice, None or Ellipsis between them."""
    key = key if isinstance(key, tuple) else (key,)
    adv = [p for p, k in enumerate(key) if _is_index_array(k) or isinstance(k, int)]
    return not adv or adv == list(range(adv[0], adv[-1] + 1))


def _basic_getitem(xp, x, key):
    """Basic indexing (ints, slices, None, Ellipsis); negative steps become a flip and a
    positive slice, for libraries without them (torch)."""
    key = _full_basic(key, x.ndim)
    if not _has_negative_step(key):
        return x[key]
    # expand the Ellipsis to know each slice's axis
    if any(k is Ellipsis for k in key):
        used = sum(1 for k in key if k is not None and k is not Ellipsis)
        i = next(j for j, k in enumerate(key) if k is Ellipsis)
        key = key[:i] + (slice(None),) * (x.ndim - used) + key[i + 1:]
    axis = 0
    flips = []
    new = []
    for k in key:
        if k is None:
            new.append(k)
            continue
        if isinstance(k, slice) and k.step is not None and k.step < 0:
            size = x.shape[axis]
            r = range(*k.indices(size))
            if len(r) == 0:
                new.append(slice(0, 0))
            else:
                # r descends: in the flipped axis, position j is size-1-j
                new.append(slice(size - 1 - r[0], size - r[-1], -k.step))
                flips.append(axis)
        else:
            new.append(k)
        axis += 1
    if flips:
        x = xp.flip(x, axis=tuple(flips))
    return x[tuple(new)]


def generic_getitem(xp, x, key):
    """``x[key]`` with NumPy semantics, using only standard functions: basic indexing first
    (index arrays and, when there are arrays, ints are kept as full axes), then one ``take``
    on the advanced axes flattened together, placed where NumPy places them."""
    if not isinstance(key, tuple):
        key = (key,)
    if _is_basic_key(key):
        return _basic_getitem(xp, x, key)
    from .._dtypes import from_backend
    if len(key) == 1 or (len(key) == 2 and key[1] is Ellipsis):
        k = key[0]
        if hasattr(k, "dtype") and from_backend(k.dtype).kind == "b":
            return x[k]   # a sole boolean mask: the standard's own case
    # boolean arrays -> their nonzero() integer arrays (one per mask axis)
    expanded = []
    for k in key:
        if _is_index_array(k) and not isinstance(k, bool) and \
                from_backend(k.dtype).kind == "b":
            expanded.extend(xp.nonzero(k))
        elif isinstance(k, bool):
            raise IndexError("arrayad: a Python bool mixed with index arrays is not supported "
                             "on this backend")
        else:
            expanded.append(k)
    key = expanded
    used = sum(1 for k in key if k is not None and k is not Ellipsis)
    if any(k is Ellipsis for k in key):
        i = next(j for j, k in enumerate(key) if k is Ellipsis)
        fill = [slice(None)] * (x.ndim - used)
        key = key[:i] + (fill if fill else [Ellipsis]) + key[i + 1:]
    else:
        key = key + [slice(None)] * (x.ndim - used)
    adv = [p for p, k in enumerate(key) if _is_index_array(k) or isinstance(k, int)]
    contiguous = adv == list(range(adv[0], adv[-1] + 1))
    # 1. basic part, advanced entries kept as full axes; remember where they land in y
    basic = []
    y_adv = []
    ydim = 0
    for p, k in enumerate(key):
        if p in adv:
            basic.append(slice(None))
            y_adv.append(ydim)
            ydim += 1
        elif k is Ellipsis:
            basic.append(k)
        else:
            basic.append(k)
            ydim += 1
    y = _basic_getitem(xp, x, tuple(basic))
    n_before = sum(1 for k in key[:adv[0]] if k is not Ellipsis)
    # 2. advanced axes in front, flattened; flat index from the broadcast index arrays
    rest = [d for d in range(y.ndim) if d not in y_adv]
    y = xp.permute_dims(y, tuple(y_adv) + tuple(rest))
    sizes = [y.shape[i] for i in range(len(y_adv))]
    arrays = [xp.asarray(key[p]) if isinstance(key[p], int) else key[p] for p in adv]
    arrays = [xp.astype(a, xp.int64) if a.dtype != xp.int64 else a for a in arrays]
    arrays = xp.broadcast_arrays(*arrays)
    ishape = tuple(arrays[0].shape)
    flat = None
    stride = 1
    for a, s in reversed(list(zip(arrays, sizes))):
        a = xp.where(a < 0, a + s, a)
        flat = a * stride if flat is None else flat + a * stride
        stride *= s
    rest_shape = tuple(y.shape[len(y_adv):])
    y = xp.reshape(y, (stride,) + rest_shape)
    out = xp.take(y, xp.reshape(flat, (-1,)), axis=0)
    out = xp.reshape(out, ishape + rest_shape)
    # 3. NumPy puts a contiguous advanced block where it stood, else in front
    if contiguous and n_before:
        k = len(ishape)
        order = tuple(range(k, k + n_before)) + tuple(range(k)) + \
            tuple(range(k + n_before, out.ndim))
        out = xp.permute_dims(out, order)
    return out


def set_complex_part(z, v, imag):
    """A copy of the NumPy (or CuPy) complex array ``z`` with its real or imaginary part set to
    ``v``: exact for every value."""
    out = z.copy()
    if imag:
        out.imag = v
    else:
        out.real = v
    return out


class NumpyLikeBackend(Backend):
    """The adapter base of NumPy and CuPy: native indexing, and a copy for the functional
    ``x[key] = v`` (the generic versions of ``Backend`` use standard functions only).

    Raises
    ------
    Exception
        Nothing of its own when made; its methods raise the library's errors.

    Examples
    --------
    >>> isinstance(ad.get_backend('numpy'), ad.backends.NumpyLikeBackend)
    True
    >>> isinstance(ad.get_backend('array_api_strict'), ad.backends.NumpyLikeBackend)
    False
    """

    def with_part(self, z, v, imag):
        return set_complex_part(z, v, imag)

    def owned(self, x):
        # (broadcast_to's zero-stride views, read-only in NumPy; CuPy has no writeable flag)
        if getattr(x.flags, "writeable", True) and not (x.size > 1 and 0 in x.strides):
            return x
        return x.copy()

    def getitem(self, x, key):
        return x[key]

    def index_set(self, x, key, v):
        out = x.copy()
        out[key] = v
        return out


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


# -- random seeds, per thread
_thread_numbers = itertools.count(1)


def _thread_seed():
    """The seed of this thread's next generator: the last ``manual_seed`` in this thread or, before
    any, 0 in the main thread and in every other thread a stream of its own (drawn from seed 0 and
    the thread's number: threads that never seed must not all draw the same numbers)."""
    st = _core.thread_state()
    if st.seed is None:
        if threading.current_thread() is threading.main_thread():
            st.seed = 0
        else:
            import numpy as np
            ss = np.random.SeedSequence(0, spawn_key=(next(_thread_numbers),))
            st.seed = int(ss.generate_state(1, np.uint32)[0])
    return st.seed


class Generator:
    """A random number generator of its own (torch's ``torch.Generator``).

    ``randn(..., generator=g)`` (also ``rand``, ``randint``) draws from ``g`` instead of the
    thread's generator, so that one stream of numbers is independent of every other draw and
    of ``manual_seed``. It draws for one backend: arrays of another backend refuse it.

    Parameters
    ----------
    device : device, optional
        A backend's device object (``x.device``) picks that backend; None or a name such as
        'cpu': the default backend.
    backend : str, optional
        The backend's name, instead of ``device``.
    seed : int
        The starting seed (torch's default seed of a new generator, so that runs repeat).

    Raises
    ------
    TypeError
        If ``device`` is not a device of a supported backend.
    ValueError
        If ``backend`` is not a backend arrayad knows (ImportError: its library is missing).

    Examples
    --------
    >>> g = ad.Generator(seed=1)
    >>> a = ad.randn(3, generator=g)
    >>> b = ad.randn(3, generator=g.manual_seed(1))   # reseeded: the same numbers
    >>> ad.all(a == b)
    tensor(True)
    """

    def __init__(self, device=None, *, backend=None, seed=67280421310721):
        if backend is not None:
            self.backend = get_backend(backend)
        else:
            self.backend = backend_of_device(device) or default_backend()
        self.device = device
        self.manual_seed(seed)

    def manual_seed(self, seed):
        """Restart the generator from ``seed``; returns the generator."""
        self._seed = int(seed)
        self._impl = self.backend.new_generator(self._seed)
        return self

    def initial_seed(self):
        """The seed the generator was last started from."""
        return self._seed

    def get_state(self):
        """The generator's state, for ``set_state``."""
        return self.backend.generator_state(self._impl)

    def set_state(self, state):
        """Restore a state from ``get_state``; returns the generator."""
        self._impl = self.backend.set_generator_state(self._impl, state)
        return self

    def __repr__(self):
        return f"<arrayad.Generator backend={self.backend.name} seed={self._seed}>"

    # copy.copy, copy.deepcopy and pickle all go through these two (as torch.Generator's copies
    # do): an independent generator in the same state, which draws what the original would draw
    # next. The backend travels by name (the adapter is one object per process, which
    # ``randn(generator=...)`` checks by identity) and the stream by the backend's state object
    # (a copy of it: the two generators never share one).
    def __getstate__(self):
        state = dict(self.__dict__)
        state["backend"] = self.backend.name
        state["_impl"] = self.get_state()
        return state

    def __setstate__(self, state):
        state = dict(state)
        backend = get_backend(state.pop("backend"))
        stream = state.pop("_impl")
        self.__dict__.update(state)
        self.backend = backend
        self._impl = backend.set_generator_state(backend.new_generator(self._seed), stream)


def manual_seed(seed):
    """Seed the random generators of every backend (loaded now or later), in this thread.

    The generators are remade from ``seed`` on their next use, so that what follows repeats;
    other threads keep theirs, and ``arrayad.Generator`` objects are not affected.

    Parameters
    ----------
    seed : int
        The seed.

    Returns
    -------
    None

    Raises
    ------
    TypeError
        If ``seed`` is not an int (a float, a bool).

    Examples
    --------
    >>> ad.manual_seed(1); a = ad.rand(2)
    >>> ad.manual_seed(1); b = ad.rand(2)
    >>> ad.all(a == b)
    tensor(True)
    """
    if isinstance(seed, bool) or not isinstance(seed, int) and not hasattr(seed, "__index__"):
        raise TypeError(f"manual_seed(seed): seed must be an int, got {type(seed).__name__}")
    st = _core.thread_state()
    st.seed = int(seed)
    st.rngs.clear()   # (remade from the seed on first use, also for backends loaded later)


def get_rng_state():
    """This thread's random state, for every backend loaded (``set_rng_state`` restores it).

    Returns
    -------
    dict
        Backend name -> that backend's generator state (for NumPy-based generators, the bit
        generator's state dict), to pass to ``set_rng_state``.

    Raises
    ------
    Exception
        Nothing of its own: it takes no argument.

    Examples
    --------
    >>> state = ad.get_rng_state()
    >>> a = ad.rand(2)
    >>> ad.set_rng_state(state)
    >>> ad.all(ad.rand(2) == a)   # the same numbers again
    tensor(True)
    """
    return {name: b.get_rng_state() for name, b in _LOADED.items()}


def set_rng_state(state):
    """Restore this thread's random state from ``get_rng_state()``.

    Parameters
    ----------
    state : dict
        Backend name -> generator state, as ``get_rng_state`` returns it.

    Returns
    -------
    None

    Raises
    ------
    ValueError
        If a key is not a backend name.
    ImportError
        If a backend of ``state`` cannot be imported here.
    AttributeError
        If ``state`` is not a dict.

    Examples
    --------
    >>> state = ad.get_rng_state()
    >>> a = ad.randn(3)
    >>> ad.set_rng_state(state)
    >>> ad.all(ad.randn(3) == a)
    tensor(True)
    """
    for name, s in state.items():
        get_backend(name).set_rng_state(s)


# -- default backend for new arrays, per context (NOTE [thread state] in _core/_base.pyx)
_process_default = []   # ARRAYAD_BACKEND's adapter, looked up once
_default = contextvars.ContextVar("arrayad.default_backend", default=None)   # None: the above


def default_backend():
    """The backend of new arrays in the calling thread or asyncio task.

    The calling context's choice (the last ``set_backend``, or the enclosing ``with
    backend(...)`` block; an asyncio task starts with the choice in force where it was created,
    a new thread with none), else ``ARRAYAD_BACKEND`` (read once), else NumPy. Inside a
    transform, new arrays follow the transform's inputs instead (``arrayad.zeros``).

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
            _process_default.append(get_backend(os.environ.get("ARRAYAD_BACKEND", "numpy")))
        b = _process_default[0]
    return b


def set_backend(name):
    """Make ``name`` the backend of new arrays in the calling thread or asyncio task.

    ``ad.tensor``, ``ad.asarray`` of Python data, ``ad.zeros``, ``ad.randn``... then make arrays
    of that backend (outside transforms; inside one, new arrays follow its inputs). Other
    threads and tasks keep theirs (the choice is a ``contextvars`` variable: tasks created
    afterwards from this one inherit it); new threads start with ``ARRAYAD_BACKEND`` (or NumPy).
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
    if name == "numpy":
        refuse_numpy_kind(raw)
    b = get_backend(name)
    if not isinstance(raw, b.array_types + b.scalar_types):
        raise TypeError(f"arrayad: unsupported {name} object of type {type(raw).__name__}")
    return b


# What an input of one of these NumPy types would silently lose, and the fix: they are ndarray
# (sub)classes or NumPy scalars that arrayad would otherwise hand to NumPy as they are.
_DTYPE_FIX = {"float16": "numpy.float32", "longdouble": "numpy.float64",
              "clongdouble": "numpy.complex128"}


def refuse_numpy_kind(raw):
    """Raise TypeError, naming the fix, for NumPy inputs whose meaning arrayad would lose
    silently: masked arrays (the mask), ``numpy.matrix`` (its ``*`` is a matrix product and its
    reductions keep two axes, where arrayad's are elementwise and drop them) and scalars of a
    dtype arrayad does not have (``longdouble``: float128 arrays are refused the same way).
    Called for the first value of each type an operation or transform sees (types accepted are
    remembered by the core), and by ``asarray``."""
    import numpy as np
    if isinstance(raw, np.ma.MaskedArray):
        raise TypeError(
            "arrayad: NumPy masked arrays are not supported (the mask would be dropped "
            "silently); pass x.filled(value) to put a value in the masked places, or "
            "numpy.ma.getdata(x) for the data without the mask.")
    if isinstance(raw, np.matrix):
        raise TypeError(
            "arrayad: numpy.matrix is not supported (its * and ** are matrix products and its "
            "reductions keep two axes); pass numpy.asarray(m), a plain 2-d ndarray (use @ for "
            "the matrix product), or make it one with arrayad.asarray(m).")
    if isinstance(raw, np.generic):
        from .._dtypes import _BY_NAME
        dt = np.dtype(type(raw))
        if dt.name not in _BY_NAME:
            kind = np.dtype(type(raw)).type.__name__
            fix = _DTYPE_FIX.get(kind)
            raise TypeError(
                f"arrayad: unsupported dtype {dt!r} (a numpy.{kind} scalar). arrayad has the "
                f"array API standard's dtypes ({', '.join(_BY_NAME)}); convert first"
                + (f", e.g. {fix}(x)." if fix else "."))


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


def backend_of_dtype(dtype):
    """The backend whose own dtype object ``dtype`` is (``torch.float64``, an array-api-strict
    dtype), or None: arrayad's dtypes, NumPy's (which CuPy and JAX share) and Python's types name
    a dtype, not a backend."""
    name = {"torch": "torch", "array_api_strict": "array_api_strict"}.get(
        _module_root(type(dtype)))
    return None if name is None else get_backend(name)


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
