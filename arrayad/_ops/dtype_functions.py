"""Data type functions: astype lives in manipulation; here isdtype, result_type, can_cast,
finfo, iinfo, following the standard's promotion table."""

from .._dtypes import by_name, from_backend, is_inexact
from ._namespace import ops
from ._rules import Declarations
from .._core._core import Array, dtype_of

decl = Declarations(globals())


_KINDS = {
    "bool": ("b",), "signed integer": ("i",), "unsigned integer": ("u",),
    "integral": ("i", "u"), "real floating": ("f",), "complex floating": ("c",),
    "numeric": ("i", "u", "f", "c"),
}


@decl.export(traced=False)
def isdtype(dtype, kind):
    """Whether ``dtype`` is of ``kind``.

    Parameters
    ----------
    dtype : dtype
        An arrayad dtype, or any backend's (``torch.float32``) or its name.
    kind : dtype, str or tuple
        A dtype (then: the same dtype), a kind name ('bool', 'signed integer', 'unsigned
        integer', 'integral', 'real floating', 'complex floating', 'numeric'), or a tuple of
        them (any of them).

    Returns
    -------
    bool

    Raises
    ------
    ValueError
        If ``kind`` is a name the standard does not define ('floating', say).
    TypeError
        If a dtype is not one of the standard's (float16, a string that names none): the
        error lists the dtypes arrayad has.

    Examples
    --------
    >>> ad.isdtype(ad.float64, 'real floating')
    True
    >>> ad.isdtype(ad.int32, ('unsigned integer', ad.float64))
    False
    """
    dtype = from_backend(dtype)
    if isinstance(kind, tuple):
        return any(isdtype(dtype, k) for k in kind)
    if isinstance(kind, str):
        if kind not in _KINDS:
            raise ValueError(f"isdtype: unknown kind {kind!r}")
        return dtype.kind in _KINDS[kind]
    return dtype is from_backend(kind)


def _promote2(a, b):
    if a is b:
        return a
    ka, kb = a.kind, b.kind
    if ka == "b" or kb == "b":
        if ka == kb:
            return a
        raise TypeError(f"result_type: {a.name} and {b.name} have no promotion in the standard")
    if ka in "iu" and kb in "iu":
        if ka == kb:
            return a if a.bits >= b.bits else b
        s, u = (a, b) if ka == "i" else (b, a)
        if s.bits > u.bits:
            return s
        if u.bits < 64:
            return by_name(f"int{u.bits * 2}")
        raise TypeError(f"result_type: {a.name} and {b.name} have no promotion in the standard")
    if is_inexact(a) and is_inexact(b):
        bits = max(a.bits // (2 if ka == "c" else 1), b.bits // (2 if kb == "c" else 1))
        if "c" in (ka, kb):
            return by_name(f"complex{bits * 2}")
        return by_name(f"float{bits}")
    raise TypeError(f"result_type: mixed-kind promotion {a.name} + {b.name} is not defined by "
                    f"the standard; use astype first")


@decl.export(traced=False)
def result_type(*arrays_and_dtypes):
    """The dtype that the arguments promote to, by the standard's promotion table.

    Within a kind (bool, integers, floating-point) the wider dtype wins; a signed and an
    unsigned integer give the signed integer that holds both; real and complex floating give
    the complex dtype of the larger precision. Python scalars are weak: they take the dtype of
    the arrays when of the same kind (a float with integer arrays gives float64).

    Parameters
    ----------
    *arrays_and_dtypes : arrays, dtypes or Python scalars
        At least one array or dtype.

    Returns
    -------
    dtype
        An arrayad dtype.

    Raises
    ------
    ValueError
        If no array or dtype is given (Python scalars alone).
    TypeError
        If the standard defines no promotion between two of them: bool with a number, an
        integer with a floating dtype (use ``astype`` first), int64 with uint64.
    TypeError
        If a dtype is not one of the standard's (float16, a string that names none): the
        error lists the dtypes arrayad has.

    Examples
    --------
    >>> ad.result_type(ad.int8, ad.uint8)
    arrayad.int16
    >>> ad.result_type(ad.float32, ad.complex64, 1.0)
    arrayad.complex64
    >>> ad.result_type(ad.tensor([1.0]), ad.complex64)   # float64 with complex64
    arrayad.complex128
    """
    dts = []
    scalars = []
    for a in arrays_and_dtypes:
        if isinstance(a, (bool, int, float, complex)):
            scalars.append(a)
        elif isinstance(a, Array) or hasattr(a, "dtype") and not isinstance(a, type):
            dts.append(dtype_of(a))
        else:
            dts.append(from_backend(a))
    if not dts:
        raise ValueError("result_type: at least one array or dtype is required")
    out = dts[0]
    for d in dts[1:]:
        out = _promote2(out, d)
    for s in scalars:
        if isinstance(s, bool):
            continue
        if isinstance(s, complex) and out.kind != "c":
            out = ops.complex128 if out.bits == 64 or out.kind != "f" else ops.complex64
        elif isinstance(s, float) and out.kind in "biu":
            out = ops.float64
        elif isinstance(s, int) and out.kind == "b":
            out = ops.int64
    return out


@decl.export(traced=False)
def can_cast(from_, to, /):
    """Whether ``from_`` casts to ``to`` under the standard's promotion rules.

    True when ``from_`` promotes to ``to`` (a cast that loses nothing within a kind); across
    kinds the standard defines no casting, so the answer is False.

    Parameters
    ----------
    from_ : dtype or array
        The dtype, or an array whose dtype is meant.
    to : dtype
        The target dtype.

    Returns
    -------
    bool

    Raises
    ------
    TypeError
        If a dtype is not one of the standard's (float16, a string that names none): the
        error lists the dtypes arrayad has.

    Examples
    --------
    >>> ad.can_cast(ad.int8, ad.int16)
    True
    >>> ad.can_cast(ad.float64, ad.float32)
    False
    >>> ad.can_cast(ad.int8, ad.float32)   # across kinds: not defined
    False
    """
    f = dtype_of(from_) if isinstance(from_, Array) else from_backend(from_)
    t = from_backend(to)
    # within the standard's promotion lattice only (across kinds it defines no casting)
    try:
        return _promote2(f, t) is t
    except TypeError:
        return False


class _FInfo:
    def __init__(self, dtype):
        import numpy as np
        fi = np.finfo(dtype.name)
        self.bits = int(fi.bits)
        self.eps = float(fi.eps)
        self.max = float(fi.max)
        self.min = float(fi.min)
        self.smallest_normal = float(fi.smallest_normal)
        self.dtype = by_name("float32" if dtype.name == "complex64" else
                                     "float64" if dtype.name == "complex128" else dtype.name)


class _IInfo:
    def __init__(self, dtype):
        import numpy as np
        ii = np.iinfo(dtype.name)
        self.bits = int(ii.bits)
        self.max = int(ii.max)
        self.min = int(ii.min)
        self.dtype = dtype


@decl.export(traced=False)
def finfo(type, /):
    """Machine limits of a floating-point dtype.

    Parameters
    ----------
    type : dtype or array
        A real or complex floating dtype, or an array of one.

    Returns
    -------
    object
        With attributes ``bits``, ``eps`` (the difference between 1.0 and the next value),
        ``max``, ``min``, ``smallest_normal`` (Python floats) and ``dtype`` (the real dtype:
        float32 for complex64).

    Raises
    ------
    ValueError
        If the dtype is not floating-point.
    TypeError
        If a dtype is not one of the standard's (float16, a string that names none): the
        error lists the dtypes arrayad has.

    Examples
    --------
    >>> ad.finfo(ad.float32).eps == 2.0 ** -23
    True
    >>> ad.finfo(ad.complex128).dtype
    arrayad.float64
    """
    d = dtype_of(type) if isinstance(type, Array) else from_backend(type)
    if not is_inexact(d):
        raise ValueError(f"finfo: {d.name} is not a floating dtype")
    return _FInfo(d)


@decl.export(traced=False)
def iinfo(type, /):
    """Machine limits of an integer dtype.

    Parameters
    ----------
    type : dtype or array
        A signed or unsigned integer dtype, or an array of one.

    Returns
    -------
    object
        With attributes ``bits``, ``max``, ``min`` (Python ints) and ``dtype``.

    Raises
    ------
    ValueError
        If the dtype is not an integer dtype.
    TypeError
        If a dtype is not one of the standard's (float16, a string that names none): the
        error lists the dtypes arrayad has.

    Examples
    --------
    >>> ad.iinfo(ad.int8).min, ad.iinfo(ad.int8).max
    (-128, 127)
    >>> ad.iinfo(ad.uint8).max
    255
    """
    d = dtype_of(type) if isinstance(type, Array) else from_backend(type)
    if d.kind not in "iu":
        raise ValueError(f"iinfo: {d.name} is not an integer dtype")
    return _IInfo(d)
