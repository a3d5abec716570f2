"""The adapters' base classes (``Backend``; ``NumpyLikeBackend`` for NumPy and CuPy) and the
generic indexing they share."""

from .._core import _core
from ._random import _thread_seed


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
            return xp.where(m, xp.asarray(v, dtype=x.dtype, device=self.device_of(x)), x)
        if mask is not None:
            return self._masked_set(x, mask, v)
        n, pos = self._positions(x, key)
        k = _numel(pos)
        if k == 0:
            return xp.asarray(x, copy=True)
        dev = self.device_of(x)   # (array-api-strict has several devices, which never mix)
        vals = xp.reshape(xp.broadcast_to(xp.asarray(v, dtype=x.dtype, device=dev), pos.shape),
                          (k,))
        onehot = xp.reshape(pos, (k, 1)) == xp.reshape(xp.arange(n, device=dev), (1, n))
        # the last writer of each position: the largest 1-based occurrence number, 0 for none
        order = xp.reshape(xp.arange(1, k + 1, device=dev), (k, 1))
        last = xp.max(xp.where(onehot, order, xp.zeros_like(order)), axis=0)
        new = xp.take(vals, xp.clip(last - 1, 0, k - 1), axis=0)
        return xp.reshape(xp.where(last > 0, new, xp.reshape(x, (n,))), x.shape)

    def _masked_set(self, x, mask, v):
        """``x[mask] = v`` with one value (row) per selected position: the selected positions'
        running count picks each one's value, O(n) (the one-hot matrix below is O(n * k), which
        a mask selecting many of many elements cannot afford)."""
        xp = self.xp
        rest = tuple(x.shape[mask.ndim:])
        flat = xp.reshape(mask, (-1,))
        idt = self.index_dtype(x)   # (array-api-strict's no_x64 device has no int64, and
        # its cumulative_sum of int32 makes the default int64 without dtype=)
        order = xp.cumulative_sum(xp.astype(flat, idt), dtype=idt) - 1   # each one's row
        k = int(order[-1]) + 1 if flat.shape[0] else 0
        if k == 0:
            return xp.asarray(x, copy=True)
        vals = xp.broadcast_to(xp.asarray(v, dtype=x.dtype, device=self.device_of(x)), (k,) + rest)
        new = xp.take(vals, xp.clip(order, 0, k - 1), axis=0)
        rows = xp.reshape(x, (flat.shape[0],) + rest)
        m = xp.reshape(flat, (flat.shape[0],) + (1,) * len(rest))
        return xp.reshape(xp.where(m, new, rows), x.shape)

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
        dev = self.device_of(base)
        vals = xp.reshape(xp.broadcast_to(xp.asarray(v, dtype=base.dtype, device=dev), pos.shape),
                          (1, k))
        onehot = xp.astype(xp.reshape(pos, (k, 1)) == xp.reshape(xp.arange(n, device=dev), (1, n)),
                           base.dtype)
        return base + xp.reshape(vals @ onehot, base.shape)

    def _positions(self, x, key):
        """(number of elements of x, flat positions selected by key, shaped like x[key])."""
        n = _numel(x)
        flat = self.xp.arange(n, device=self.device_of(x))
        return n, self.getitem(self.xp.reshape(flat, x.shape), key)

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
        derivatives (a cotangent's structural zeros stay zero through a derivative that is not
        finite).
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

    def index_dtype(self, x):
        return index_dtype(self.xp, x)


def device_default_dtypes(xp, x):
    """The namespace's default dtypes on the device of the raw array ``x``
    (``default_dtypes(device=...)``): array-api-strict's test devices differ, ``no_x64`` has no
    int64 and ``no_float64`` no float64, and refuse to make them."""
    info = xp.__array_namespace_info__()
    try:
        return info.default_dtypes(device=x.device)
    except (TypeError, ValueError, AttributeError):   # (no device: Dask; an info that takes
        return info.default_dtypes()                  # no such device)


def index_dtype(xp, x):
    """The integer dtype of positions on the device of the raw array ``x``."""
    return device_default_dtypes(xp, x)["indexing"]


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
    idt = index_dtype(xp, x)   # (on x's device: array-api-strict's no_x64 has no int64)
    on = {"device": x.device} if hasattr(x, "device") else {}   # (Dask's arrays have none)
    arrays = [xp.asarray(key[p], dtype=idt, **on) if isinstance(key[p], int) else key[p]
              for p in adv]
    arrays = [xp.astype(a, idt) if a.dtype != idt else a for a in arrays]
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
