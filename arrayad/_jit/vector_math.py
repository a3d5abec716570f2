"""Vectorised float64 functions for the tiled replay and the tile machine (NOTE [vector math]).

NOTE [vector math]
------------------
NumPy computes float64 ``sin`` and ``cos`` one value at a time with the C library's functions
(about 9 ns a value on a current x86-64 core, where its ``exp`` or a multiplication take under
1 ns), so they dominate the time of any elementwise program that uses them, and the unfused and
tiled replays alike wait on them. XLA uses its own vectorised approximations. The GNU C library
ships vectorised versions of them too, in ``libmvec`` (since glibc 2.22): this module finds them
at run time (``ctypes``; nothing links to the library, and where it is missing, on another
system or another processor, ``FUNCTIONS`` is empty and the tiled replay calls NumPy) and calls
them over a tile's values through ``arrayad._core._vector_math``, 8, 4 or 2 values at a time:
the tiled replay's NumPy calls take ``sin`` and ``cos`` from here (``FUNCTIONS``), the tile
machine (NOTE [tile machine] in ``lower_tiles.py``) every function of ``NAMES`` found
(``ADDRESSES``), as it cannot call NumPy's loops.

Numerics: ``libmvec``'s functions stay within 4 ulp of the exact result (the GNU C library's
stated bound; against NumPy's values ``tools/vector_math_ulps.py`` measured at most 4 ulp, and
3.51 ulp from the exact result, with AVX-512 and glibc 2.36), give nan for nan, the
same infinities, and keep the sign of zero, as NumPy's do; ``sin`` and ``cos`` of large
arguments (beyond about 1e5 in magnitude) take an exact slow path. So a jitted program may
differ from the unfused replay and from NumPy by a few ulp in those results, and the AVX-512,
AVX2 and SSE2 versions may differ from each other likewise (``tools/vector_math_ulps.py``
measures the difference from NumPy's values). ``arrayad.config.jit_vector_math`` off
(``ARRAYAD_JIT_VECTOR_MATH=0``) keeps NumPy's functions and no tile machine (the tiled replay's
results bit for bit the unfused replay's); it is read when a program is staged, through
``addresses()`` and ``functions()``, and part of the jit cache key.
"""

import ctypes

import numpy as np

from .. import config as _config

# glibc's names for the vector versions by width (the x86-64 vector function ABI's mangling:
# b = SSE, d = AVX2, e = AVX-512; N<lanes>v = one vector argument)
_PREFIX = {2: "_ZGVbN2v_", 4: "_ZGVdN4v_", 8: "_ZGVeN8v_"}
_FLOAT64 = np.dtype(np.float64)


def _vector_function(apply, address, ufunc):
    """``f(x, out=buf)``: the vector function on contiguous float64 values, else ``ufunc``."""
    def f(x, out):
        if (x.dtype == _FLOAT64 and out.dtype == _FLOAT64 and x.ndim == 1 and out.ndim == 1
                and x.flags.c_contiguous and out.flags.c_contiguous):
            apply(address, x, out)
            return out
        return ufunc(x, out=out)
    f.__name__ = f"vector_{ufunc.__name__}"
    return f


# The functions the tile machine calls (NOTE [tile machine] in lower_tiles.py); of them, the
# tiled replay's NumPy calls take only sin and cos (NumPy's own others are as fast, and exact).
NAMES = ("sin", "cos", "exp", "log", "tanh", "expm1", "log1p")


def _addresses():
    """{name: address} of the vector functions of ``NAMES`` found here, of the processor's
    width (NOTE [vector math]), whatever ``config.jit_vector_math`` says."""
    try:
        from .._core import _vector_math
    except ImportError:   # (a build without it)
        return {}
    prefix = _PREFIX.get(_vector_math.width()) if _vector_math.supported() else None
    if prefix is None:
        return {}
    try:
        lib = ctypes.CDLL("libmvec.so.1")
    except OSError:   # (no GNU C library, or an older one)
        return {}
    out = {}
    for name in NAMES:
        try:
            out[name] = ctypes.cast(getattr(lib, prefix + name), ctypes.c_void_p).value
        except AttributeError:   # (tanh, expm1, log1p: glibc 2.35 on)
            continue
    return out


def _load():
    """{name: f(x, out=)} of the vector sin and cos for the tiled replay's NumPy calls."""
    if not ADDRESSES:
        return {}
    from .._core import _vector_math
    return {name: _vector_function(_vector_math.apply, ADDRESSES[name], getattr(np, name))
            for name in ("sin", "cos") if name in ADDRESSES}


ADDRESSES = _addresses()   # (found here)
FUNCTIONS = _load()


def addresses():
    """``ADDRESSES`` where ``config.jit_vector_math`` is on here and now, else {}."""
    return ADDRESSES if _config.read("jit_vector_math") else {}


def functions():
    """``FUNCTIONS`` where ``config.jit_vector_math`` is on here and now, else {}."""
    return FUNCTIONS if _config.read("jit_vector_math") else {}
