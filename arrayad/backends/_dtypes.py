"""What a value's type says about its backend: NumPy inputs whose meaning arrayad would lose,
and the backend a dtype object belongs to."""

from ._registry import _module_root, get_backend


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


def backend_of_dtype(dtype):
    """The backend whose own dtype object ``dtype`` is (``torch.float64``, an array-api-strict
    dtype), or None: arrayad's dtypes, NumPy's (which CuPy and JAX share) and Python's types name
    a dtype, not a backend."""
    name = {"torch": "torch", "array_api_strict": "array_api_strict"}.get(
        _module_root(type(dtype)))
    return None if name is None else get_backend(name)
