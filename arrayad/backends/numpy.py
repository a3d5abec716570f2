"""NumPy, the default backend (through array-api-compat's NumPy namespace)."""
import operator

import numpy as np
from array_api_compat import numpy as compat_numpy

from . import NumpyLikeBackend
from .._core import _small_arith
from .._core._vector_math import reduce_short as _reduce_short
from .._dtypes import _BY_NAME as _STANDARD_NAMES


def _sum(x, axis=None, keepdims=False, dtype=None):
    """np.sum without its Python-level dispatch: np.sum of an ndarray is np.add.reduce (the
    same upcast of small integers and bools), at a third of the cost on small arrays; short
    rows of float64 are summed by ``reduce_short`` (NOTE [short reductions]: NumPy's bits)."""
    if dtype is not None:
        from .._dtypes import to_backend
        return np.add.reduce(x, axis=axis, keepdims=keepdims, dtype=to_backend(dtype, np))
    out = _reduce_short(1, x, axis, keepdims)
    return np.add.reduce(x, axis=axis, keepdims=keepdims) if out is None else out


def _extremum(kind, reduce):
    def extremum(x, axis=None, keepdims=False):
        out = _reduce_short(kind, x, axis, keepdims)
        return reduce(x, axis=axis, keepdims=keepdims) if out is None else out
    extremum.__name__ = reduce.__name__
    extremum.__doc__ = (f"np.{reduce.__name__}, its short float64 rows reduced by "
                        "``reduce_short`` (NOTE [short reductions])")
    return extremum


def _broadcast_to(x, shape):
    """np.broadcast_to, with a fast path for the 0-d cotangent of a full reduction: the same
    zero-stride read-only view, made in C (np.broadcast_to costs ten times more)."""
    if type(x) is np.ndarray and x.ndim == 0:
        return _small_arith.broadcast_scalar(x, tuple(shape))
    return np.broadcast_to(x, shape)


# NOTE [freed memory]
# -------------------
# glibc's malloc gives each block of 128 KiB or more pages of its own (mmap) and hands them back
# to the system when the block is freed; its heap, too, is handed back above 128 KiB free at
# its top. So each new large NumPy array costs a page fault per 4 KiB page at its first write,
# which on the arrays of an eager gradient (a few hundred KiB to a few MiB each, made and freed
# at every operation) costs more than the arithmetic: single-threaded, eager GradBench gmm at
# d=10, k=5, n=1,000 took 2.4 ms for its gradient and 1.4 ms for its objective, 0.8 ms and 0.28
# ms with blocks of up to 32 MiB from the heap and 64 MiB of free heap kept (its log-sum-exp of
# 640,000 values: 3.1 -> 0.8 ms; 2026-12-08, ``MALLOC_MMAP_THRESHOLD_`` and
# ``MALLOC_TRIM_THRESHOLD_`` in the environment). jit's replay keeps its own buffers (NOTE
# [buffer pool]); the eager path cannot, its arrays are the user's. So, unless
# ``config.reuse_freed_memory`` is off, importing arrayad sets those two of glibc's parameters
# (``mallopt``), which the environment variables set too: where the user set either variable,
# arrayad leaves the allocator as they set it. Elsewhere than glibc nothing is changed.

_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3   # (glibc's malloc.h)
HEAP_BLOCK_BYTES = 32 << 20   # (blocks up to this size from the heap)
KEPT_FREE_BYTES = 64 << 20    # (free heap kept by the process)
_GLIBC_DEFAULT = 128 << 10
_reusing = [False]


def _mallopt():
    try:
        import ctypes
        fn = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):   # (no C library found by name, or not glibc's)
        return None
    fn.argtypes = (ctypes.c_int, ctypes.c_int)
    return fn


def _reuse_read():
    return _reusing[0]


def _reuse_update(on):
    fn = _mallopt()
    if fn is None:
        return
    block, kept = (HEAP_BLOCK_BYTES, KEPT_FREE_BYTES) if on else (_GLIBC_DEFAULT, _GLIBC_DEFAULT)
    _reusing[0] = bool(fn(_M_MMAP_THRESHOLD, block) and fn(_M_TRIM_THRESHOLD, kept)) and on


def _reuse_block(on):
    raise ValueError("arrayad.config.reuse_freed_memory: the C library's allocator is the "
                     "process's, so this setting has no block for a thread or task: use "
                     "arrayad.config.update('reuse_freed_memory', value)")


def _bind_reuse_freed_memory():
    from .. import config
    config.reuse_freed_memory._bind(_reuse_read, _reuse_update, _reuse_block)
    import os
    if not ({"MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_"} & set(os.environ)):
        _reuse_update(config._values["reuse_freed_memory"])


_bind_reuse_freed_memory()


class NumpyBackend(NumpyLikeBackend):
    name = "numpy"
    xp = compat_numpy
    array_types = (np.ndarray,)
    # NumPy returns scalars (np.float64...) for 0-d results; arrayad keeps 0-d arrays. Only
    # the scalar types of arrayad's dtypes: the others (longdouble, float16, timedelta64) are
    # refused by name when first seen (``refuse_numpy_kind``), as float128 arrays are.
    scalar_types = tuple({t for t in np.sctypeDict.values()
                          if issubclass(t, (np.number, np.bool_))
                          and np.dtype(t).name in _STANDARD_NAMES})

    def all_finite(self, x):
        # (a finite sum has finite terms; one read-only pass, no temporary: a sum that
        # overflows only costs a backward pass run again for nothing)
        return x.dtype.kind not in "fc" or bool(np.isfinite(x.sum()))

    # The Python operators skip the ufunc's argument parsing: same result, about half the cost
    # on small arrays (the core uses these for primitives of the same name); the arithmetic
    # of small float64 arrays skips NumPy's dispatch too (NOTE [small arithmetic]).
    # (``x ** 2`` through the operator takes NumPy's fast path for small integer powers, which
    # np.power does not.)
    fast = {"add": _small_arith.add, "subtract": _small_arith.subtract,
            "multiply": _small_arith.multiply, "divide": _small_arith.divide,
            "negative": _small_arith.negative, "pow": operator.pow,
            "matmul": operator.matmul, "broadcast_to": _broadcast_to,
            "sum": _sum, "max": _extremum(3, np.max), "min": _extremum(2, np.min)}

    # (NumPy's own function, not a method: the core calls it for every full reduction, and a
    # Python frame cost more than the conversion)
    fix_scalar = staticmethod(np.asarray)

    def ones_like(self, x):
        return np.ones(x.shape, x.dtype)   # (array-api-compat's ones_like costs 6x more)

    def _from_numpy(self, a, dtype, device):
        return np.asarray(a, dtype=dtype)

    def index_add(self, base, key, v):
        out = base.copy()
        if all(k is None or k is Ellipsis or type(k) is int or type(k) is slice for k in key):
            out[key] += v   # (a key of slices and integers selects each element once)
        else:
            np.add.at(out, key, v)   # unbuffered: repeated indices accumulate
        return out

    def to_numpy(self, x):
        return x

    def default_device(self):
        return "cpu"

    def device_of(self, x):
        return "cpu"


def make():
    from .._core import _core
    _core.register_inplace_accumulation(np.ndarray)
    return NumpyBackend()
