"""The array API ``fft`` extension.

fft, ifft, fftn, ifftn, rfft, irfft, rfftn, irfftn are primitives; hfft, ihfft, fftshift,
ifftshift are composites of them (and of roll, conj); fftfreq, rfftfreq are constants.

Every transform is linear, so its JVP is the same transform of the tangent and its VJP is the
adjoint (torch's convention for complex cotangents: the VJP of a C-linear map is its conjugate
transpose, see ``linalg_ext``). The adjoint of a transform with normalization ``norm`` is the
inverse transform with the *dual* normalization (``backward`` <-> ``forward``, ``ortho`` fixed):
e.g. fft's matrix W (no scaling) has W^H = n * ifft = ifft(norm='forward'). The ``n``/``s``
argument first pads with zeros or truncates the input; its adjoint truncates or zero-pads the
cotangent back to the input's length (``_fit``). The half-spectrum transforms:

* rfft = (complex fft of the real input, first n//2+1 bins): its adjoint is the real part of
  the adjoint fft of the cotangent zero-padded to n (``ifft(g, n=n)`` pads for us);
* irfft(h)_j = c (Re h_0 + 2 Re sum_k h_k e^{+2 pi i jk/n} + Re h_{n/2} (-1)^j): its adjoint is
  rfft(g) with dual scaling and the interior bins doubled (weights 1, 2, ..., 2, 1).

The complex transforms always see complex input (the public functions cast real input, as
array-api-strict requires; the cast's own VJP takes the real part for real input).
"""

from ._docfill import paragraph, reflow
from ._namespace import ops

from .._core._core import bind, dtype_of, shape_of
from .._dtypes import to_backend
from ._rules import Declarations, axis_batch, constant_like, ndim_of, normalize_axis, per_primitive

decl = Declarations(globals(), ops.fft)

_DUAL = {"backward": "forward", "forward": "backward", "ortho": "ortho"}


def _check_norm(norm):
    if norm not in _DUAL:
        raise ValueError(f"fft: norm must be 'backward', 'ortho' or 'forward', got {norm!r}")
    return norm


def _fit(x, axis, size):
    """``x`` truncated or zero-padded along ``axis`` to ``size`` (the adjoint of the other)."""
    cur = shape_of(x)[axis]
    if cur == size:
        return x
    lead = (slice(None),) * axis
    if cur > size:
        return x[lead + (slice(0, size), Ellipsis)]
    pad_shape = list(shape_of(x))
    pad_shape[axis] = size - cur
    zeros = ops.broadcast_to(ops.zeros_like(x[lead + (slice(0, 1), Ellipsis)]), tuple(pad_shape))
    return ops.concat([x, zeros], axis=axis)


def _fit_all(x, axes, sizes):
    for a, s in zip(axes, sizes):
        x = _fit(x, a, s)
    return x


def _as_complex(x):
    if dtype_of(x).kind == "c":
        return x
    dt = ops.complex64 if dtype_of(x) == ops.float32 else ops.complex128
    return ops.astype(x, dt)


def _as_real(x):
    if dtype_of(x).kind != "c":
        return x
    return ops.real(x)


def _half_weights(g, axis, n):
    """Weights (1, 2, ..., 2, 1) of irfft's adjoint over the n//2 + 1 bins, laid along ``axis``
    of ``g`` (the last bin is the Nyquist bin only for even n)."""
    m = n // 2 + 1
    w = [2.0] * m
    w[0] = 1.0
    if n % 2 == 0:
        w[-1] = 1.0
    nd = ndim_of(g)
    rdt = ops.float32 if dtype_of(g) in (ops.float32, ops.complex64) else ops.float64
    shape = (m,) + (1,) * (nd - 1 - axis)
    return constant_like(g, lambda xp: xp.reshape(
        xp.asarray(w, dtype=to_backend(rdt, xp)), shape))


# ---------------------------------------------------------------------------------------------
# Docstrings: the sections the transforms share, written once (_transform_doc).

_NORM = """norm : {{'backward', 'ortho', 'forward'}}, optional
    Where the scaling goes: 'backward' (default) leaves the forward transform unscaled and
    divides the inverse by the number of points ``n`` (for the n-d transforms, the product of
    the sizes); 'forward' does the opposite; 'ortho' scales both by ``1 / sqrt(n)``, making
    them unitary."""

_ONE_D = """x : array
    Input array{real}.
n : int, optional
    The length of the {length} along ``axis``: the input is truncated or zero-padded to
    {padded}. Default: {n_default}.
axis : int, optional
    The axis to transform (default: the last). torch's ``dim=`` is not accepted.
""" + _NORM

_N_D = """x : array
    Input array{real}.
s : sequence of ints, optional
    The lengths of the {length} along ``axes`` (-1: keep that axis' size); the input is
    truncated or zero-padded to {padded}. Default: {n_default}.
axes : sequence of ints, optional
    The axes to transform: by default all of them, or the last ``len(s)`` if ``s`` is given.
""" + _NORM

_TRANSFORM_DOC = """{summary}

Parameters
----------
{params}

Returns
-------
array
{returns}

Raises
------
ValueError
{value_error}
IndexError
    If an axis is out of range for ``x`` (a 0-d ``x`` has none).
{raises}
Examples
--------
{example}
"""


_LINEAR = ("Linear: its JVP is the same transform of the tangent, its gradient the adjoint "
           "transform (torch's convention for complex cotangents), i.e. the inverse transform "
           "with the other normalization ('backward' and 'forward' swapped), the padding or "
           "truncation undone.")


def _transform_doc(fn, *, summary, returns, example, n_d=False, real="", length="transform",
                   padded="that length", n_default="the input's length", raises="",
                   linear=_LINEAR):
    """Set the docstring of the transform ``fn`` from its own parts and the shared ones."""
    params = (_N_D if n_d else _ONE_D).format(real=real, length=length, padded=padded,
                                               n_default=n_default)
    returns += " On the backend of ``x`` (inside a transform, a value of that transform). " + linear
    value_error = ("If ``norm`` is not one of the three, a length in ``s`` is below 1, ``axes`` "
                   "repeats an axis, or ``s`` is shorter than ``axes``." if n_d else
                   "If ``norm`` is not one of the three, or ``n`` is below 1.")
    fn.__doc__ = reflow(_TRANSFORM_DOC.format(summary=summary, params=params, example=example,
                                              raises=raises, returns=paragraph(returns),
                                              value_error=paragraph(value_error)))


_REAL_ONLY = ("TypeError\n    If ``x`` is complex (the transform of a real signal; use the "
              "complex transform).\n")


# ---------------------------------------------------------------------------------------------
# One-dimensional complex transforms: fft and ifft, params (n, axis, norm), n and axis explicit.

def _c2c_impl(name):
    return lambda xp, x, n, axis, norm: getattr(xp.fft, name)(x, n=n, axis=axis, norm=norm)


def _c2c_vjp(adjoint):
    # (the adjoint primitive by name: it is declared after this one's VJP is)
    def vjp(g, ans, x, n, axis, norm):
        return _fit(bind(decl.prims[adjoint], g, n=n, axis=axis, norm=_DUAL[norm]), axis,
                    shape_of(x)[axis])
    return vjp


# (linear: the JVP is the transform of the tangent, made complex as the primal was)
_COMPLEX_LINEAR = per_primitive(
    lambda p: lambda t, ans, x, **params: bind(p, _as_complex(t), **params))
_REAL_LINEAR = per_primitive(
    lambda p: lambda t, ans, x, **params: bind(p, _as_real(t), **params))


def _one_d(x, n, axis):
    ax = normalize_axis(axis, ndim_of(x))
    return (shape_of(x)[ax] if n is None else int(n)), ax


def fft(x, /, *, n=None, axis=-1, norm="backward"):
    n, ax = _one_d(x, n, axis)
    return bind(fft_p, _as_complex(x), n=n, axis=ax, norm=_check_norm(norm))


def ifft(x, /, *, n=None, axis=-1, norm="backward"):
    n, ax = _one_d(x, n, axis)
    return bind(ifft_p, _as_complex(x), n=n, axis=ax, norm=_check_norm(norm))


_transform_doc(
    fft, summary="The one-dimensional discrete Fourier transform of ``x`` along ``axis``.",
    returns="Complex (real input is cast: complex64 from float32, else complex128), shaped "
            "like ``x`` with length ``n`` along ``axis``: ``out[k] = sum_j x[j] * "
            "exp(-2j * pi * j * k / n)``.",
    example=">>> ad.fft.fft(ad.asarray([1., 1., 1., 1.]))\n"
            "tensor([4.0000+0.0000j, 0.0000+0.0000j, 0.0000+0.0000j, 0.0000+0.0000j], "
            "dtype=arrayad.complex128)\n"
            ">>> x = ad.asarray([1., 2., 3., 4.])\n"
            ">>> ad.func.grad(lambda x: ad.sum(ad.real(ad.fft.fft(x))))(x)\n"
            "tensor([4., 0., 0., 0.])")
_transform_doc(
    ifft, summary="The one-dimensional inverse discrete Fourier transform of ``x`` along "
                  "``axis``.",
    returns="Complex (real input is cast: complex64 from float32, else complex128), shaped "
            "like ``x`` with length ``n`` along ``axis``; ``ifft(fft(x))`` is ``x``.",
    example=">>> ad.fft.ifft(ad.asarray([4., 0., 0., 0.]))\n"
            "tensor([1.0000+0.0000j, 1.0000+0.0000j, 1.0000+0.0000j, 1.0000+0.0000j], "
            "dtype=arrayad.complex128)")


fft_p = decl.primitive("fft", _c2c_impl("fft"), vjp=(_c2c_vjp("ifft"),), jvp=(_COMPLEX_LINEAR,),
                       batch=axis_batch(), public=fft)
ifft_p = decl.primitive("ifft", _c2c_impl("ifft"), vjp=(_c2c_vjp("fft"),),
                        jvp=(_COMPLEX_LINEAR,), batch=axis_batch(), public=ifft)


# ---------------------------------------------------------------------------------------------
# n-dimensional complex transforms: params (s, axes, norm), both explicit tuples.

def _c2cn_impl(name):
    return lambda xp, x, s, axes, norm: getattr(xp.fft, name)(x, s=s, axes=axes, norm=norm)


def _c2cn_vjp(adjoint):
    def vjp(g, ans, x, s, axes, norm):
        out = bind(decl.prims[adjoint], g, s=s, axes=axes, norm=_DUAL[norm])
        return _fit_all(out, axes, [shape_of(x)[a] for a in axes])
    return vjp


def _n_d(x, s, axes, *, inverse_real=False):
    """Explicit ``(s, axes)`` following the standard's defaults: ``axes`` defaults to all axes
    (or the last ``len(s)``), ``s`` to the input's sizes (irfftn: 2 * (m - 1) on the last axis)."""
    nd = ndim_of(x)
    if axes is None:
        axes = tuple(range(nd)) if s is None else tuple(range(nd - len(s), nd))
    axes = tuple(normalize_axis(a, nd) for a in axes)
    if len(set(axes)) != len(axes):
        raise ValueError("fft: repeated axes are not supported")
    if s is None:
        shape = shape_of(x)
        s = [shape[a] for a in axes]
        if inverse_real and axes:
            s[-1] = 2 * (shape[axes[-1]] - 1)
    if len(s) != len(axes):   # (before the zip below, which would cut the longer one short)
        raise ValueError(f"fft: s and axes must have the same length, got s={tuple(s)} and "
                         f"axes={axes}")
    s = tuple(int(v) if v != -1 else shape_of(x)[a] for v, a in zip(s, axes))
    return s, axes


def fftn(x, /, *, s=None, axes=None, norm="backward"):
    s, axes = _n_d(x, s, axes)
    return bind(fftn_p, _as_complex(x), s=s, axes=axes, norm=_check_norm(norm))


def ifftn(x, /, *, s=None, axes=None, norm="backward"):
    s, axes = _n_d(x, s, axes)
    return bind(ifftn_p, _as_complex(x), s=s, axes=axes, norm=_check_norm(norm))


_transform_doc(
    fftn, n_d=True, n_default="the input's sizes",
    summary="The n-dimensional discrete Fourier transform of ``x`` over ``axes``.",
    returns="Complex (real input is cast: complex64 from float32, else complex128), shaped "
            "like ``x`` with the sizes ``s`` along ``axes``.",
    example=">>> ad.fft.fftn(ad.ones((2, 2)))\n"
            "tensor([[4.0000+0.0000j, 0.0000+0.0000j],\n"
            "        [0.0000+0.0000j, 0.0000+0.0000j]], dtype=arrayad.complex128)")
_transform_doc(
    ifftn, n_d=True, n_default="the input's sizes",
    summary="The n-dimensional inverse discrete Fourier transform of ``x`` over ``axes``.",
    returns="Complex (real input is cast: complex64 from float32, else complex128), shaped "
            "like ``x`` with the sizes ``s`` along ``axes``; ``ifftn(fftn(x))`` is ``x``.",
    example=">>> x = ad.asarray([[1., 2.], [3., 4.]])\n"
            ">>> ad.allclose(ad.real(ad.fft.ifftn(ad.fft.fftn(x))), x)\n"
            "True")


fftn_p = decl.primitive("fftn", _c2cn_impl("fftn"), vjp=(_c2cn_vjp("ifftn"),),
                        jvp=(_COMPLEX_LINEAR,), batch=axis_batch("axes"), public=fftn)
ifftn_p = decl.primitive("ifftn", _c2cn_impl("ifftn"), vjp=(_c2cn_vjp("fftn"),),
                         jvp=(_COMPLEX_LINEAR,), batch=axis_batch("axes"), public=ifftn)


# ---------------------------------------------------------------------------------------------
# Real transforms (see the module docstring for their adjoints).

def _rfft_vjp(g, ans, x, n, axis, norm):
    full = ifft(g, n=n, axis=axis, norm=_DUAL[norm])
    return _fit(ops.real(full), axis, shape_of(x)[axis])


def _irfft_vjp(g, ans, x, n, axis, norm):
    h = rfft(_as_real(g), n=n, axis=axis, norm=_DUAL[norm]) * _half_weights(g, axis, n)
    return _fit(h, axis, shape_of(x)[axis])


def rfft(x, /, *, n=None, axis=-1, norm="backward"):
    if dtype_of(x).kind == "c":
        raise TypeError("fft.rfft: x must be real; use fft.fft for complex input")
    n, ax = _one_d(x, n, axis)
    return bind(rfft_p, x, n=n, axis=ax, norm=_check_norm(norm))


def irfft(x, /, *, n=None, axis=-1, norm="backward"):
    ax = normalize_axis(axis, ndim_of(x))
    n = 2 * (shape_of(x)[ax] - 1) if n is None else int(n)
    return bind(irfft_p, _as_complex(x), n=n, axis=ax, norm=_check_norm(norm))


_HALF = "the ``n // 2 + 1`` non-negative frequency bins (the others are their conjugates)"
_transform_doc(
    rfft, real=" (real)", length="signal",
    summary="The discrete Fourier transform of the real ``x`` along ``axis``: " + _HALF + ".",
    returns="Complex (complex64 from float32, else complex128), shaped like ``x`` with "
            "``n // 2 + 1`` bins along ``axis``.",
    raises=_REAL_ONLY,
    example=">>> ad.fft.rfft(ad.asarray([1., 1., 1., 1.]))\n"
            "tensor([4.0000+0.0000j, 0.0000+0.0000j, 0.0000+0.0000j], dtype=arrayad.complex128)")
_transform_doc(
    irfft, length="output signal",
    padded="``n // 2 + 1`` bins", n_default="``2 * (m - 1)`` for ``m`` input bins",
    summary="The inverse of ``rfft``: the real signal whose half spectrum is ``x`` along "
            "``axis``.",
    returns="Real, shaped like ``x`` with length ``n`` along ``axis``. Only the real part of "
            "the zero-frequency bin (and of the last one for even ``n``) is read, so those "
            "imaginary parts get no gradient.",
    example=">>> ad.fft.irfft(ad.asarray([4., 0., 0.]))\n"
            "tensor([1., 1., 1., 1.])")


rfft_p = decl.primitive("rfft",
                        lambda xp, x, n, axis, norm: xp.fft.rfft(x, n=n, axis=axis, norm=norm),
                        vjp=(_rfft_vjp,), jvp=(_REAL_LINEAR,), batch=axis_batch(), public=rfft)
irfft_p = decl.primitive("irfft",
                         lambda xp, x, n, axis, norm: xp.fft.irfft(x, n=n, axis=axis, norm=norm),
                         vjp=(_irfft_vjp,), jvp=(_COMPLEX_LINEAR,), batch=axis_batch(),
                         public=irfft)


def _rfftn_vjp(g, ans, x, s, axes, norm):
    # ifftn with s zero-pads the half spectrum (last axis) back to s[-1] before transforming.
    full = ifftn(g, s=s, axes=axes, norm=_DUAL[norm])
    return _fit_all(ops.real(full), axes, [shape_of(x)[a] for a in axes])


def _irfftn_vjp(g, ans, x, s, axes, norm):
    h = rfftn(_as_real(g), s=s, axes=axes, norm=_DUAL[norm])
    h = h * _half_weights(h, axes[-1], s[-1])
    return _fit_all(h, axes, [shape_of(x)[a] for a in axes])


def rfftn(x, /, *, s=None, axes=None, norm="backward"):
    if dtype_of(x).kind == "c":
        raise TypeError("fft.rfftn: x must be real; use fft.fftn for complex input")
    s, axes = _n_d(x, s, axes)
    return bind(rfftn_p, x, s=s, axes=axes, norm=_check_norm(norm))


def irfftn(x, /, *, s=None, axes=None, norm="backward"):
    s, axes = _n_d(x, s, axes, inverse_real=True)
    return bind(irfftn_p, _as_complex(x), s=s, axes=axes, norm=_check_norm(norm))


_transform_doc(
    rfftn, n_d=True, real=" (real)", length="signal", n_default="the input's sizes",
    summary="The n-dimensional discrete Fourier transform of the real ``x`` over ``axes``: "
            "the full transform over all but the last of ``axes``, half the bins "
            "(``s[-1] // 2 + 1``) over the last.",
    returns="Complex (complex64 from float32, else complex128), shaped like ``x`` with sizes "
            "``s`` along ``axes``, but ``s[-1] // 2 + 1`` along the last.",
    raises=_REAL_ONLY,
    example=">>> ad.fft.rfftn(ad.ones((2, 4))).shape\n"
            "(2, 3)")
_transform_doc(
    irfftn, n_d=True, length="output signal",
    padded="those sizes (``s[-1] // 2 + 1`` bins along the last axis)",
    n_default="the input's sizes, but ``2 * (m - 1)`` along the last axis for ``m`` bins",
    summary="The inverse of ``rfftn``: the real array whose half spectrum is ``x``.",
    returns="Real, shaped like ``x`` with the sizes ``s`` along ``axes``.",
    example=">>> ad.fft.irfftn(ad.asarray([[4., 0.], [0., 0.]]))\n"
            "tensor([[1., 1.],\n"
            "        [1., 1.]])")


rfftn_p = decl.primitive(
    "rfftn", lambda xp, x, s, axes, norm: xp.fft.rfftn(x, s=s, axes=axes, norm=norm),
    vjp=(_rfftn_vjp,), jvp=(_REAL_LINEAR,), batch=axis_batch("axes"), public=rfftn)
irfftn_p = decl.primitive(
    "irfftn", lambda xp, x, s, axes, norm: xp.fft.irfftn(x, s=s, axes=axes, norm=norm),
    vjp=(_irfftn_vjp,), jvp=(_COMPLEX_LINEAR,), batch=axis_batch("axes"), public=irfftn)


# ---------------------------------------------------------------------------------------------
# Composites

@decl.composite
def hfft(x, /, *, n=None, axis=-1, norm="backward"):
    return irfft(ops.conj(_as_complex(x)), n=n, axis=axis, norm=_DUAL[_check_norm(norm)])


@decl.composite
def ihfft(x, /, *, n=None, axis=-1, norm="backward"):
    return ops.conj(rfft(x, n=n, axis=axis, norm=_DUAL[_check_norm(norm)]))


_transform_doc(
    hfft, length="output signal", padded="``n // 2 + 1`` values",
    n_default="``2 * (m - 1)`` for ``m`` input values",
    summary="The transform of a Hermitian-symmetric signal given by its first half: a real "
            "spectrum (``irfft`` of ``conj(x)`` with the other normalization).",
    returns="Real, shaped like ``x`` with length ``n`` along ``axis``.",
    linear="Real-linear: its derivatives are those of ``irfft`` and ``conj``.",
    example=">>> ad.fft.hfft(ad.asarray([1., 0., 0.]))\n"
            "tensor([1., 1., 1., 1.])")
_transform_doc(
    ihfft, real=" (real)", length="signal",
    summary="The inverse of ``hfft``: the half spectrum of the real ``x`` (``conj`` of ``rfft`` "
            "with the other normalization).",
    returns="Complex (complex64 from float32, else complex128), shaped like ``x`` with "
            "``n // 2 + 1`` values along ``axis``.",
    linear="Linear: its derivatives are those of ``rfft`` and ``conj``.",
    raises=_REAL_ONLY,
    example=">>> ad.fft.ihfft(ad.asarray([1., 2., 3., 4.])).shape\n"
            "(3,)\n"
            ">>> x = ad.asarray([1., 2., 3., 4.])\n"
            ">>> ad.allclose(ad.fft.hfft(ad.fft.ihfft(x)), x)\n"
            "True")


def _shift(x, axes, sign):
    nd = ndim_of(x)
    axes = tuple(range(nd)) if axes is None else (
        (axes,) if isinstance(axes, int) else tuple(axes))
    axes = tuple(normalize_axis(a, nd) for a in axes)
    if not axes:
        return x
    shifts = tuple(sign * (shape_of(x)[a] // 2) for a in axes)
    return ops.roll(x, shifts, axis=axes)


@decl.composite
def fftshift(x, /, *, axes=None):
    """The spectrum ``x`` with the zero-frequency bin moved to the centre: negative frequencies
    first, in increasing order.

    Parameters
    ----------
    x : array
        Input array, typically a spectrum or its frequencies.
    axes : int or sequence of ints, optional
        The axes to shift (default: all).

    Returns
    -------
    array
        Shaped like ``x``, of its backend and dtype (inside a transform, a value of that
        transform): a ``roll`` by ``size // 2`` along each axis, whose gradient rolls back.

    Raises
    ------
    IndexError
        If an axis is out of range for ``x``.

    Examples
    --------
    >>> ad.fft.fftshift(ad.fft.fftfreq(4))
    tensor([-0.5000, -0.2500,  0.0000,  0.2500])
    >>> ad.fft.fftshift(ad.asarray([0., 1., 2., 3., 4.]))
    tensor([3., 4., 0., 1., 2.])
    """
    return _shift(x, axes, 1)


@decl.composite
def ifftshift(x, /, *, axes=None):
    """The inverse of ``fftshift``: the zero-frequency bin moved back to the start (the two
    differ for odd lengths).

    Parameters
    ----------
    x : array
        Input array, typically a spectrum or its frequencies.
    axes : int or sequence of ints, optional
        The axes to shift (default: all).

    Returns
    -------
    array
        Shaped like ``x``, of its backend and dtype (inside a transform, a value of that
        transform): a ``roll`` by ``-(size // 2)`` along each axis, whose gradient rolls back.

    Raises
    ------
    IndexError
        If an axis is out of range for ``x``.

    Examples
    --------
    >>> ad.fft.ifftshift(ad.asarray([0., 1., 2., 3., 4.]))
    tensor([2., 3., 4., 0., 1.])
    >>> ad.fft.ifftshift(ad.fft.fftshift(ad.asarray([0., 1., 2., 3., 4.])))
    tensor([0., 1., 2., 3., 4.])
    """
    return _shift(x, axes, -1)


def _freq_array(api, n, d, make, dtype, device):
    """A new array, placed like ``arange``'s (inside a transform, on its inputs' backend and
    device): ``make(xp, k, real_dtype)`` of ``k = arange(n)`` on that device, over ``d * n``."""
    from .creation import _made, _placement
    if isinstance(n, bool) or not hasattr(n, "__index__") or n.__index__() < 1:
        raise ValueError(f"fft.{api}: n must be a positive integer, got {n!r}")
    n = n.__index__()
    b, device, interp = _placement(device, dtype)
    xp = b.xp
    if dtype is None:
        # (the device's own default: array-api-strict's no_float64 test device has float32)
        info = xp.__array_namespace_info__()
        dt = (info.default_dtypes(device=device) if device is not None
              else info.default_dtypes())["real floating"]
    else:
        dt = to_backend(dtype, xp)
        if not xp.isdtype(dt, "real floating"):
            raise TypeError(f"fft.{api}: dtype must be a real floating dtype, got {dtype}")
    k = xp.arange(n, device=device) if device is not None else xp.arange(n)
    return _made(xp.astype(make(xp, k, n), dt) / (d * n), interp)


@decl.composite(traced=False)
def fftfreq(n, /, *, d=1.0, dtype=None, device=None):
    """The sample frequencies of an ``n``-point ``fft``: ``[0, 1, ..., -2, -1] / (d * n)``, the
    non-negative ones first.

    Parameters
    ----------
    n : int
        The number of samples (the transform's length).
    d : float, optional
        The sample spacing (default 1.0): frequencies are in cycles per unit of ``d``.
    dtype : dtype, optional
        A real floating dtype (default: the backend's default, float64).
    device : device, optional
        The device of the result.

    Returns
    -------
    array
        1-d of length ``n``: ``k / (d * n)`` for ``k = 0 .. (n - 1) // 2``, then the negative
        ones. Placed like ``arange``'s result: ``device``'s backend, else inside a transform
        its inputs' backend and device (a constant of the transform), else the default backend.

    Raises
    ------
    ValueError
        If ``n`` is not a positive integer (``4.5``, ``0``, ``-1``, ``True``).
    TypeError
        If ``dtype`` is not a real floating dtype.

    Examples
    --------
    >>> ad.fft.fftfreq(4)
    tensor([ 0.0000,  0.2500, -0.5000, -0.2500])
    """
    return _freq_array("fftfreq", n, d, lambda xp, k, n: xp.where(k < (n + 1) // 2, k, k - n),
                       dtype, device)


@decl.composite(traced=False)
def rfftfreq(n, /, *, d=1.0, dtype=None, device=None):
    """The sample frequencies of an ``n``-point ``rfft``: ``[0, 1, ..., n // 2] / (d * n)``.

    Parameters
    ----------
    n : int
        The number of samples (the transform's length).
    d : float, optional
        The sample spacing (default 1.0): frequencies are in cycles per unit of ``d``.
    dtype : dtype, optional
        A real floating dtype (default: the backend's default, float64).
    device : device, optional
        The device of the result.

    Returns
    -------
    array
        1-d of length ``n // 2 + 1``. Placed like ``arange``'s result: ``device``'s backend,
        else inside a transform its inputs' backend and device (a constant of the transform),
        else the default backend.

    Raises
    ------
    ValueError
        If ``n`` is not a positive integer (``4.5``, ``0``, ``-1``, ``True``).
    TypeError
        If ``dtype`` is not a real floating dtype.

    Examples
    --------
    >>> ad.fft.rfftfreq(4)
    tensor([0.0000, 0.2500, 0.5000])
    >>> ad.fft.rfftfreq(4, d=0.5)
    tensor([0.0000, 0.5000, 1.0000])
    """
    return _freq_array("rfftfreq", n, d, lambda xp, k, n: k[:n // 2 + 1], dtype, device)
