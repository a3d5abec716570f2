"""``arrayad.special``: scipy.special's functions that SciPy dispatches through an array
namespace's ``special`` attribute, differentiable and batchable.

With ``SCIPY_ARRAY_API=1``, ``scipy.special.erf(x)`` looks up ``array_namespace(x).special.erf``
(``scipy/special/_support_alternative_backends.py``, ``_get_native_func``) for namespaces other
than NumPy, CuPy, JAX and torch, and calls it with SciPy's positional arguments (``psi`` for
digamma, ``polygamma(n, x)``). Inside a transform that namespace is arrayad, so those calls reach
the primitives below; ``logsumexp``, ``softmax`` and ``log_softmax`` are written by SciPy with
namespace functions and differentiate without help, and are offered here too with SciPy's
signatures.

NOTE [special implementations]: each elementwise primitive computes, on raw arrays, with

1. the backend's own special functions where it has them: ``scipy.special`` for NumPy, a lazy
   ``elemwise`` of it for Dask, ``torch.special``, ``cupyx.scipy.special``, ``jax.scipy.special``;
2. else, for the elementary ones (expit, logit, xlogy, entr, sinc, ndtr through erfc...), a
   formula in namespace functions;
3. else SciPy on a host copy, when the array lives on the CPU (array-api-strict's CPU device),
   the result converted back with the namespace's ``asarray``;
4. else a clear error naming the function and the backend.

Derivative rules use arrayad operations only (``ops.*``, ``ops.special.*``) so that they can be
differentiated again: d erf = 2/sqrt(pi) exp(-x^2), d gammaln = digamma, d digamma =
polygamma(1, .), d polygamma(n, .) = polygamma(n + 1, .), d i0 = i1, d i1 = i0 - i1/x (1/2 at 0)...
xlogy and xlog1py: SciPy's result is 0 wherever x == 0 (whatever y), so d/dy is 0 there, and d/dx
is log y (log1p y) where that is finite, else 0, as torch.
"""

import inspect
import math
import textwrap

from array_api_compat import (is_cupy_namespace, is_dask_namespace, is_jax_namespace,
                              is_numpy_namespace, is_torch_namespace)

from ._namespace import ops

from .._core import _core
from .._dtypes import from_backend
from ..backends._adapter import device_default_dtypes
from .._core._core import (BinaryJVP, PartialVJP, UnaryJVP, UnaryVJP, broadcast_like,
                           unbroadcast)
from ._rules import ELEMENTWISE, PY_SCALARS, Declarations, bind, names_read, ndim_of

decl = Declarations(globals(), ops.special, public_module="arrayad.special")

_SQRT_PI = math.sqrt(math.pi)
_SQRT_2PI = math.sqrt(2 * math.pi)
_SQRT_HALF = math.sqrt(0.5)


# ---------------------------------------------------------------------------------------------
# Implementations on raw arrays (NOTE [special implementations])

def _scipy(name):
    import scipy.special
    fn = getattr(scipy.special, name)
    # (with SCIPY_ARRAY_API, SciPy's dispatching wrapper around its NumPy function: called on
    # NumPy arrays only, skip its namespace lookup, 3/4 of the cost of a small call)
    return getattr(fn, "__wrapped__", fn)


# torch.special's names for SciPy's functions. (Not its bessel_j0/j1/y0/y1: off by up to 1e-6
# absolute, 1e-3 relative near their zeros, in torch 2.13; SciPy on a host copy is exact.)
_TORCH_NAMES = {"k0": "modified_bessel_k0", "k1": "modified_bessel_k1",
                "k0e": "scaled_modified_bessel_k0", "k1e": "scaled_modified_bessel_k1"}
_TORCH_SKIP = {"j0", "j1", "y0", "y1"}
_TORCH_TENSOR_ARGS = {"gammainc", "gammaincc", "zeta"}     # (refuse Python scalars)


def _torch(name):
    import torch
    if name == "log_expit":
        return torch.nn.functional.logsigmoid
    if name in _TORCH_EDGES:
        fn = _TORCH_EDGES[name]
    elif name in _TORCH_SKIP:
        return None
    else:
        fn = getattr(torch.special, _TORCH_NAMES.get(name, name), None)
    if fn is not None and name in _TORCH_WIDE:
        fn = _torch_wide(fn)
    if fn is not None and name in _TORCH_TENSOR_ARGS:
        fn = _torch_tensor_args(fn)
    return None if fn is None else _torch_floating(fn)


def _torch_floating(fn):
    """Integer (and bool) tensors as torch's default floating dtype when no argument is
    floating, as SciPy's loops take integers as floats: torch.special.gammainc of int64
    tensors computes in integers (gammainc(1, 1) is 0)."""
    def call(*args):
        import torch
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        if tensors and not any(a.is_floating_point() or a.is_complex() for a in tensors):
            dt = torch.get_default_dtype()
            args = [a.to(dt) if isinstance(a, torch.Tensor) else a for a in args]
        return fn(*args)
    return call


# torch's float32 kernels of these lose SciPy's float32 values at edges (gammainc(1e-45, x) is
# 0 for 1, gammaincc(1e-30, x) off by a factor 3, k1 and k1e nan at 1e-45, k0e inf, zeta off by
# 1e-6 at q = 3e38), where SciPy computes in float64 and rounds: so does arrayad for them.
_TORCH_WIDE = {"gammainc", "gammaincc", "zeta", "k1", "k0e", "k1e"}


def _torch_wide(fn):
    def call(*args):
        import torch
        ref = next(a for a in args if isinstance(a, torch.Tensor))
        if ref.dtype not in (torch.float32, torch.float16, torch.bfloat16) or \
                ref.device.type == "mps":     # (no float64 there)
            return fn(*args)
        return fn(*[a.to(torch.float64) if isinstance(a, torch.Tensor) else a
                    for a in args]).to(ref.dtype)
    return call


def _torch_tensor_args(fn):
    def call(*args):
        import torch
        ref = next(a for a in args if isinstance(a, torch.Tensor))
        return fn(*[torch.as_tensor(a, dtype=ref.dtype, device=ref.device)
                    if isinstance(a, PY_SCALARS) else a for a in args])
    return call


# NOTE [torch special edges]: torch.special's functions differ from SciPy's at some edge values;
# the wrappers below put SciPy's value in those cells (on any device, so without a host copy),
# and the derivative rules, written with these functions, follow.

def _torch_gammaln(x):
    import torch
    out = torch.special.gammaln(x)
    # SciPy: -inf at -inf (torch: inf); and inf where 1/x overflows (float64 subnormals, whose
    # reciprocal SciPy's recurrence takes), where torch gives the finite -log|x|
    out = torch.where(x == -math.inf, -math.inf, out)
    if x.dtype == torch.float64:
        out = torch.where((x != 0) & torch.isinf(1 / x), math.inf, out)
    return out


def _torch_gammainc(upper):
    name = "gammaincc" if upper else "gammainc"

    def fn(a, x):
        import torch
        if a.device.type == "cpu" and x.device.type == "cpu":
            # (SciPy on a host copy: exactly SciPy's values, subnormal results included)
            try:
                import numpy as np
                out = np.asarray(_scipy(name)(a.numpy(), x.numpy()))
            except ImportError:
                pass
            else:
                return torch.from_numpy(out).to(torch.promote_types(a.dtype, x.dtype))
        return _torch_gammainc_device(upper, a, x)
    return fn


# zeta(k), k = 2..17, for the series of log Gamma(1 + a) below
_ZETA_K = (math.pi ** 2 / 6, 1.2020569031595942, math.pi ** 4 / 90, 1.0369277551433699,
           math.pi ** 6 / 945, 1.0083492773819228, math.pi ** 8 / 9450, 1.0020083928260822,
           math.pi ** 10 / 93555, 1.0004941886041195, 1.0002460865533080, 1.0001227133475785,
           1.0000612481350587, 1.0000305882363070, 1.0000152822594087, 1.0000076371976379)
_EULER = 0.5772156649015329


def _torch_gammainc_device(upper, a, x):
    """torch's gammainc/gammaincc with SciPy's edges, off the CPU: nan for a nan argument (torch
    gives 0 or 1 at some), and Q(a, x) for small a and x by its series (torch computes 1 - P
    there, wrong by 1e-8 relative at a = 1e-10, x = 1/4, by a factor 3 at a = 1e-30):
    Q = -expm1(a log x - lgamma1p(a)) - a x^a / Gamma(1 + a) sum_n (-1)^n x^n / (n! (a + n)),
    lgamma1p(a) = -gamma a + sum_k (-1)^k zeta(k) a^k / k (to 1e-17 for a < 0.1, x <= 2 with
    these terms)."""
    import torch
    a, x = torch.broadcast_tensors(a, x)
    out = (torch.special.gammaincc if upper else torch.special.gammainc)(a, x)
    if upper:
        small = (a > 0) & (a < 0.1) & (x >= 0) & (x <= 2)
        as_ = torch.where(small, a, 0.05)
        xs = torch.where(small, x, 1.0)
        lg = torch.zeros_like(as_)
        for k in range(len(_ZETA_K) + 1, 1, -1):
            lg = (lg + (-1) ** k * _ZETA_K[k - 2] / k) * as_
        lg = (lg - _EULER) * as_
        t = as_ * torch.log(xs) - lg          # log(x^a / Gamma(1 + a))
        term, total = torch.ones_like(xs), torch.zeros_like(xs)
        for n in range(1, 31):
            term = term * (-xs / n)
            total = total + term / (as_ + n)
        # (clamped: at a = 5e-324 the rounding of the two terms' difference can be -5e-324)
        series = torch.clamp(-torch.expm1(t) - as_ * torch.exp(t) * total, 0.0, 1.0)
        out = torch.where(small, series, out)
    return torch.where(torch.isnan(a) | torch.isnan(x), math.nan, out)


def _torch_zeta(x, q):
    # torch's zeta is nan for q = inf and for huge q with huge x, where SciPy's is 0 (or a tiny
    # number): from q = 1e8 on, the first two terms of its asymptotic series
    # q^(1-x) / (x - 1) + q^-x / 2 (the next, x q^(-x-1) / 12, is below 1e-16 relative wherever
    # the value does not underflow: x < 42 there)
    import torch
    big = (x > 1) & (q >= 1e8)
    xs = torch.where(big, x, 2.0)
    lq = torch.log(torch.where(big, q, 2.0))
    asym = torch.exp((1 - xs) * lq - torch.log(xs - 1)) + 0.5 * torch.exp(-xs * lq)
    return torch.where(big, asym, torch.special.zeta(x, q))


def _torch_polygamma(n, x):
    # SciPy's formula psi^(n)(x) = (-1)^(n+1) n! zeta(n+1, x) for n >= 1, digamma for n = 0: nan
    # for an order that is not an integer (torch's own polygamma takes a Python int only, and its
    # trigamma is accurate to 1e-9 only, its zeta to rounding)
    import torch
    if isinstance(n, int) or (isinstance(n, float) and n.is_integer()):
        n = int(n)
        if n == 0:
            return torch.special.digamma(x)
        fac = math.gamma(n + 1) if n < 171 else math.inf
        return _torch_wide(_torch_zeta)(torch.full_like(x, float(n + 1)), x) * \
            math.copysign(fac, (-1) ** (n + 1))
    n = torch.as_tensor(n, device=x.device).to(x.dtype)
    n, x = torch.broadcast_tensors(n, x)
    sign = torch.pow(torch.full_like(n, -1.0), n + 1)     # (nan for a non-integer n)
    fac = sign * torch.exp(torch.lgamma(n + 1))
    return torch.where(n == 0, torch.special.digamma(x),
                       fac * _torch_wide(_torch_zeta)(n + 1, x))


_TORCH_EDGES = {"gammaln": _torch_gammaln, "gammainc": _torch_gammainc(False),
                "gammaincc": _torch_gammainc(True), "zeta": _torch_zeta,
                "polygamma": _torch_polygamma}


def _cupy(name):
    import cupyx.scipy.special
    fn = getattr(cupyx.scipy.special, name, None)
    if fn is None:
        import cupy
        fn = getattr(cupy, name, None)     # (sinc is cupy's own)
    return fn


def _jax(name):
    import jax.numpy as jnp
    import jax.scipy.special as jsp
    if name == "psi":
        name = "digamma"
    return getattr(jsp, name, None) or getattr(jnp, name, None)


def _dask(name):
    # elementwise, so blockwise application is exact (SciPy does the same for Dask arrays);
    # elemwise broadcasts and aligns the chunks of several arguments, and stays lazy.
    import dask.array as da
    fn = _scipy(name)
    return lambda *args: da.core.elemwise(fn, *args)


_NATIVE = {}    # (id(xp), name) -> the backend's function, or None


def _native(xp, name):
    key = (id(xp), name)
    if key not in _NATIVE:
        fn = None
        try:
            if is_numpy_namespace(xp):
                fn = _scipy(name)
            elif is_dask_namespace(xp):
                fn = _dask(name)
            elif is_torch_namespace(xp):
                fn = _torch(name)
            elif is_cupy_namespace(xp):
                fn = _cupy(name)
            elif is_jax_namespace(xp):
                fn = _jax(name)
        except ImportError:
            fn = None
        _NATIVE[key] = fn
    return _NATIVE[key]


def _on_cpu(xp, a):
    """Whether ``a`` is in CPU memory (DLPack's kDLCPU) on the CPU device of its namespace:
    array-api-strict's other devices share the memory but stand for accelerators."""
    dev = getattr(a, "__dlpack_device__", None)
    if dev is None or dev()[0] != 1:
        return False
    if "cpu" in str(a.device).lower():
        return True
    info = getattr(xp, "__array_namespace_info__", None)
    return info is not None and a.device == info().default_device()


def _to_host(a):
    import numpy as np
    if isinstance(a, PY_SCALARS):
        return a
    try:
        return np.from_dlpack(a)
    except (TypeError, AttributeError, BufferError, RuntimeError):
        return np.asarray(a)


def _host(xp, name, args):
    """SciPy on host copies of ``args`` when they live on the CPU, converted back with the
    namespace's ``asarray``; else a clear error."""
    import numpy as np
    arrays = [a for a in args if not isinstance(a, PY_SCALARS)]
    off = next((a for a in arrays if not _on_cpu(xp, a)), None)
    ns = getattr(xp, "__name__", type(xp).__name__)
    if off is not None:
        why = (f"its input is on device {getattr(off, 'device', '?')}, not the CPU, where SciPy "
               f"could compute it; move the input to the CPU first (x.to_device(...))")
    else:
        try:
            import scipy.special  # noqa: F401
        except ImportError:
            why = "SciPy, which would compute it on a host copy, is not installed: install scipy"
        else:
            out = np.asarray(_scipy(name)(*[_to_host(a) for a in args]))
            return xp.asarray(out, device=arrays[0].device) if arrays else xp.asarray(out)
    raise NotImplementedError(
        f"arrayad.special.{name}: the {ns} namespace has no {name} of its own and {why}, or use "
        f"a backend with special functions (NumPy, torch, CuPy, JAX)")


def _compute(xp, name, *args):
    """``name`` on raw arrays, by the first of the means of NOTE [special implementations]."""
    fn = _native(xp, name)
    if fn is not None:
        return fn(*args)
    generic = _GENERIC.get(name)
    if generic is not None:
        return generic(xp, *args)
    return _host(xp, name, args)


def _float(xp, *args):
    """Arrays (Python scalars made arrays of the others' dtype), at least floating, of one
    dtype: integers become the device's default floating dtype (float64, as SciPy's loops take
    them; float32 on array-api-strict's devices without float64), and the floating arrays are
    promoted together before computing (xlogy(int64, float32) is computed in float64, as
    SciPy does: not in float32 and widened afterwards)."""
    ref = next((a for a in args if not isinstance(a, PY_SCALARS)), None)
    out = []
    for a in args:
        if isinstance(a, PY_SCALARS):
            a = xp.asarray(float(a), dtype=ref.dtype if ref is not None and
                           xp.isdtype(ref.dtype, "real floating") else None,
                           **({"device": ref.device} if ref is not None else {}))
        elif not xp.isdtype(a.dtype, "real floating"):
            a = xp.astype(a, device_default_dtypes(xp, a)["real floating"])
        out.append(a)
    common = xp.result_type(*(a.dtype for a in out)) if len(out) > 1 else None
    return [a if common is None or a.dtype == common else xp.astype(a, common) for a in out]


def _g_expit(xp, x):
    (x,) = _float(xp, x)
    e = xp.exp(-xp.abs(x))
    return xp.where(x >= 0, 1 / (1 + e), e / (1 + e))


def _g_log_expit(xp, x):
    # log(1/(1+e^-x)) = -log1p(e^-x) for x >= 0, x - log1p(e^x) below: no overflow
    (x,) = _float(xp, x)
    return xp.where(x >= 0, -xp.log1p(xp.exp(-xp.abs(x))), x - xp.log1p(xp.exp(-xp.abs(x))))


def _g_logit(xp, x):
    (x,) = _float(xp, x)
    return xp.log(x / (1 - x))


def _g_xlogy(xp, x, y):
    x, y = _float(xp, x, y)
    x, y = xp.broadcast_arrays(x, y)
    # (0 where x == 0, but nan for a nan y, as SciPy)
    zero = xp.where(xp.isnan(y), y, xp.zeros_like(x))
    return xp.where(x == 0, zero, x * xp.log(xp.where(x == 0, 1.0, y)))


def _g_xlog1py(xp, x, y):
    x, y = _float(xp, x, y)
    x, y = xp.broadcast_arrays(x, y)
    # (0 where x == 0, but nan for a nan y, as SciPy)
    zero = xp.where(xp.isnan(y), y, xp.zeros_like(x))
    return xp.where(x == 0, zero, x * xp.log1p(xp.where(x == 0, 0.0, y)))


def _g_entr(xp, x):
    # -x log x for x > 0, 0 at 0, -inf below (nan stays nan)
    (x,) = _float(xp, x)
    pos = x > 0
    val = -x * xp.log(xp.where(pos, x, 1.0))
    return xp.where(pos, val, xp.where(x == 0, 0.0, xp.where(x < 0, -xp.inf, x)))


def _g_rel_entr(xp, x, y):
    # x log(x/y) for x, y > 0 (both finite), 0 for x == 0 <= y, nan for a nan, inf otherwise
    x, y = _float(xp, x, y)
    x, y = xp.broadcast_arrays(x, y)
    pos = (x > 0) & (y > 0)
    val = x * (xp.log(xp.where(pos, x, 1.0)) - xp.log(xp.where(pos, y, 1.0)))
    out = xp.where(pos, val, xp.inf)
    out = xp.where((x == 0) & (y >= 0), 0.0, out)
    return xp.where(xp.isnan(x) | xp.isnan(y) | (pos & xp.isinf(x) & xp.isinf(y)), xp.nan, out)


def _g_sinc(xp, x):
    (x,) = _float(xp, x)
    px = math.pi * xp.where(x == 0, 1.0, x)
    return xp.where(x == 0, 1.0, xp.sin(px) / px)


def _g_ndtr(xp, x):
    (x,) = _float(xp, x)
    return 0.5 * _compute(xp, "erfc", -x * _SQRT_HALF)


def _g_log_ndtr(xp, x):
    # log(ndtr(x)) from 0 down to x = -10 (ndtr(-10) ~ 7.6e-24 is still normal in float32), and
    # below the asymptotic series -x^2/2 - log(-x) - log(2 pi)/2 + log(sum_k (-1)^k (2k-1)!! / x^2k)
    # (its first omitted term, 21!!/x^22, is < 2e-12 there).
    (x,) = _float(xp, x)
    lo = x < -10
    xl = xp.where(lo, x, -10.0)
    xh = xp.where(lo, 0.0, x)
    z = 1 / (xl * xl)
    s, term = xp.ones_like(z), xp.ones_like(z)
    for k in range(1, 11):
        term = -term * (2 * k - 1) * z
        s = s + term
    tail = -0.5 * xl * xl - xp.log(-xl) - 0.5 * math.log(2 * math.pi) + xp.log(s)
    # (right of 0, log1p of the small left tail: log of a value near 1 would lose it)
    mid = xp.where(xh > 0, xp.log1p(-_g_ndtr(xp, -xp.abs(xh))), xp.log(_g_ndtr(xp, xh)))
    return xp.where(lo, tail, mid)


_GENERIC = {"expit": _g_expit, "log_expit": _g_log_expit, "logit": _g_logit,
            "xlogy": _g_xlogy, "xlog1py": _g_xlog1py, "entr": _g_entr, "rel_entr": _g_rel_entr,
            "sinc": _g_sinc, "ndtr": _g_ndtr, "log_ndtr": _g_log_ndtr}


def _impl(name):
    return lambda xp, *args: _compute(xp, name, *args)


# ---------------------------------------------------------------------------------------------
# NOTE [special docstrings]: the API reference's sections that every function here shares
# (Parameters' types, Returns, Raises, Notes, and an example that compares with scipy.special and
# checks each derivative against a central difference of SciPy's function) are written once, in
# ``_doc``; a declaration gives only its own part: the math (``doc``), what each argument is, an
# example input inside the domain and values known by hand. Which arguments are differentiated
# and which derivatives are refused is read from the declaration's rules (``_refused`` marks its
# rule), so the text follows the rules.

_X = "np.array([0.5, 1.0, 2.0])"     # the example input of most functions of one argument


def _how(name):
    """Which code computes ``name`` (NOTE [special implementations]), for the Notes."""
    torch = _TORCH_NAMES.get(name, name)
    native = (f"the backend's own function where it has one: ``scipy.special.{name}`` for NumPy "
              f"(blockwise for Dask), ``torch.special.{torch}``, ``cupyx.scipy.special.{name}``"
              f", ``jax.scipy.special.{name}``")
    if name in _TORCH_SKIP:
        native += (" (not torch's: off by up to 1e-3 relative near its zeros, so SciPy on a "
                   "host copy for torch on the CPU)")
    if name in _GENERIC:
        return native + "; elsewhere a formula in array API functions, on any backend and device."
    return (native + "; elsewhere SciPy on a host copy, for arrays in CPU memory "
            "(array-api-strict's CPU device, for instance).")


def _doc(name, summary, names, about, example, *, wrt, refused=(), known=(), how=None,
         custom=None, returns=None, uses=None):
    """The docstring of ``arrayad.special.<name>`` (NOTE [special docstrings]).

    ``names``/``about``: the parameters (``"x"`` for an array, or ``"name : type"``) and what
    each is; ``example``: one Python expression per
    leading parameter, inside the domain; ``wrt``: the indices of the arguments whose derivative
    the example checks (arrays of the full shape); ``refused``: ``(parameter, rule)`` pairs for
    derivatives refused by name (the ``_refused`` rule, or the fix as text); ``known``:
    ``(expression, output)`` doctest lines of values
    known by hand; ``how``: the Notes' account of what computes it (``_how(name)`` by default);
    ``custom``/``returns``: an example and a Returns section of its own (the reductions);
    ``uses``: the special function a composite computes with (None: ``name`` itself, unless
    ``how`` says otherwise)."""
    def para(text, indent=""):
        return textwrap.wrap(text, 96, initial_indent=indent, subsequent_indent=indent,
                             break_on_hyphens=False)

    lines = [summary, "", "Parameters", "----------"]
    for n, a in zip(names, about):
        lines += [n if " : " in n else f"{n} : array_like"] + para(a, "    ")
    lines += ["", "Returns", "-------"]
    lines += returns or [
        "array",
        f"    ``{name}`` elementwise, of the arguments' broadcast shape and a floating dtype, on",
        "    their backend: a NumPy array for NumPy arrays and Python numbers, an",
        "    ``ad.Tensor`` for Tensors (on the tape when one requires grad), a tracer inside a",
        "    transform."]
    lines += ["", "Raises", "------", "TypeError"]
    lines += para("If an argument is neither an array of a supported backend nor a Python "
                  "number.", "    ")
    if (how is None and name not in _GENERIC) or uses is not None:
        lines += ["NotImplementedError"] + para(
            f"If the arguments' backend has no ``{uses or name}`` of its own and they are not "
            "in CPU memory, where SciPy would compute it (move them to the CPU), or SciPy is not "
            "installed.", "    ")
    for param, rule in refused:
        fix = rule if isinstance(rule, str) else rule.fix
        lines += ["NotImplementedError"] + para(
            f"When differentiated with respect to ``{param}``: that derivative is not "
            f"implemented. {fix[0].upper()}{fix[1:]}.", "    ")
    diff = ", ".join(f"``{names[i].split(' :')[0]}``" for i in wrt)
    lines += ["", "Notes", "-----"] + para(f"Computed by {how or _how(name)}")
    if how is not None:
        lines += [""] + para("Its derivatives are those of the functions it is written with: "
                             "they differentiate again (``hessian``) and batch (``vmap``).")
    elif diff:
        lines += [""] + para(f"Its derivatives (in {diff}) are rules written with arrayad "
                             "functions, so they differentiate again (``hessian``) and batch "
                             "(``vmap``).")
    lines += ["", "Examples", "--------"]
    if custom is not None:
        lines += custom
    else:
        args = [n.split(" :")[0] for n in names[:len(example)]]
        call = f"{', '.join(args)}"
        lines += para("Against SciPy" + (", and each derivative against a central difference "
                                         "of SciPy's function (``grad`` of the sum is the "
                                         "elementwise derivative):" if wrt else ":")) + [
                  "",
                  ">>> from scipy import special as sp",
                  f">>> {', '.join(args)} = {', '.join(example)}",
                  f">>> bool(np.allclose(ad.special.{name}({call}), sp.{name}({call})))",
                  "True"]
        if wrt:
            lines += [">>> h = 1e-6"]
        for i in wrt:
            plus = ", ".join(f"{a} + h" if k == i else a for k, a in enumerate(args))
            minus = ", ".join(f"{a} - h" if k == i else a for k, a in enumerate(args))
            nums = "" if i == 0 else f", argnums={i}"
            lines += [f">>> g = ad.func.grad(lambda {call}: ad.sum(ad.special.{name}({call}))"
                      f"{nums})({call})",
                      f">>> bool(np.allclose(g, (sp.{name}({plus}) - sp.{name}({minus})) "
                      f"/ (2 * h)))",
                      "True"]
    if known:
        lines += ["", "Values known by hand:", ""]
        for expr, out in known:
            lines += [f">>> {expr}", out]
    return "\n".join(lines) + "\n"


def _documented(names, about, example, *, wrt, refused=(), known=(), custom=None, returns=None,
                composite=True, uses=None):
    """The docstring of a hand-written function by ``_doc``: its own docstring is the summary;
    ``composite``: written with arrayad functions (no implementation of its own)."""
    def apply(fn):
        how = ("the arrayad functions it is written with"
               + (f" (``{uses}`` and arithmetic)" if uses else "")
               + ", on every backend where they run.") if composite else None
        fn.__doc__ = _doc(fn.__name__, inspect.cleandoc(fn.__doc__), names, about, example, wrt=wrt,
                          refused=refused, known=known, how=how, custom=custom, returns=returns,
                          uses=uses)
        return fn
    return apply


# ---------------------------------------------------------------------------------------------
# Declarations

# NOTE [nan outside the domain]: where a function's value is nan (outside its domain: exp1 of a
# negative x, digamma at a pole, xlogy(1, -1)), its derivative is nan too: the derivative of an
# undefined value is undefined. Most formulas give that by themselves (they read the nan value,
# or compute the same nan: log of a negative number); those that can give a number there (exp1's
# -e^-x/x is finite at x = -1) are declared with ``nan_out=True``, and their rule is multiplied
# by a constant mask of ones and nans (nan where ``ans`` is nan; a multiplication, not a where,
# so that the derivative of the rule, for hessians, is nan there too). The mask costs three
# elementwise passes (isnan, where, multiply), so only the functions that need it pay them: each
# such declaration is one the edge-grid test found giving a finite derivative at a nan value.
def _nan_out(d, arity):
    """Rule ``d`` (of ``arity`` primal arguments after ``ans``), nan where ``ans`` is nan."""
    if d is None or getattr(d, "fix", None) is not None:
        return d
    if arity == 1:
        def rule(ans, x):
            return _nan_where_ans(ans, d(ans, x))
    elif arity == 2:
        def rule(ans, x1, x2):
            return _nan_where_ans(ans, d(ans, x1, x2))
    else:
        def rule(ans, x1, x2, x3):
            return _nan_where_ans(ans, d(ans, x1, x2, x3))
    return rule


def _nan_where_ans(ans, v):
    """``v`` times 1 where ``ans`` is a number, nan where it is nan (NOTE [nan outside the
    domain])."""
    a = ops.stop_gradient(ans)
    return ops.multiply(v, ops.where(ops.isnan(a), a, ops.ones_like(a)))


def unary(name, deriv, *, over=False, nan_out=False, doc, x="Real values.", example=_X,
          known=()):
    """An elementwise function of one argument; ``deriv(ans, x)`` its derivative (with
    ``over``: the derivative's reciprocal, which the rules divide by). ``nan_out``: the formula
    can be a number where the value is nan, made nan there (NOTE [nan outside the domain]).
    ``doc`` is the math, ``x`` the argument's domain, ``example``/``known`` as ``_doc``'s."""
    refused = getattr(deriv, "fix", None) is not None
    if nan_out:
        # (with ``over`` the rule divides by the formula: nan / nan is nan too)
        deriv = _nan_out(deriv, 1)
    doc = _doc(name, doc, ["x"], [x], [example], wrt=[] if refused else [0],
               refused=[("x", deriv)] if refused else [], known=known)
    return decl.primitive(name, _impl(name), vjp=(UnaryVJP(deriv, over),),
                          reads=[names_read(deriv)], full_jvp=UnaryJVP(deriv, over),
                          batch=ELEMENTWISE, api="x, /", doc=doc)


def _doc_of_rules(name, doc, names, about, example, rules, known):
    """``_doc`` for a declaration whose per-argument derivative rules are ``rules`` (None: not
    differentiable, e.g. an integer order; a ``_refused`` rule: refused by name)."""
    wrt = [i for i, r in enumerate(rules) if r is not None and getattr(r, "fix", None) is None]
    refused = [(n, r) for n, r in zip(names, rules) if getattr(r, "fix", None) is not None]
    return _doc(name, doc, names, about, example, wrt=wrt, refused=refused, known=known)


def binary(name, d1, d2, *, nan_out=False, doc, about, example, known=(), names=("x", "y")):
    """An elementwise function of two broadcasting arguments with partial derivatives
    ``d1(ans, x1, x2)`` and ``d2(...)`` (None: not differentiable in that argument).
    ``nan_out`` as ``unary``'s. ``doc`` is the math, ``names`` the (positional-only) parameters'
    names in it, ``about`` what each argument is, ``example``/``known`` as ``_doc``'s."""
    if nan_out:
        d1, d2 = _nan_out(d1, 2), _nan_out(d2, 2)
    doc = _doc_of_rules(name, doc, list(names), about, example, (d1, d2), known)
    return decl.primitive(name, _impl(name),
                          vjp=(None if d1 is None else PartialVJP(d1, 0),
                               None if d2 is None else PartialVJP(d2, 1)),
                          reads=["" if d is None else names_read(d) for d in (d1, d2)],
                          full_jvp=BinaryJVP(d1, d2), batch=ELEMENTWISE,
                          api=f"{names[0]}, {names[1]}, /", doc=doc)


def _where0(cond, x, like):
    """``where(cond, 0, x)``; ``cond`` may be a Python bool (from scalar arguments)."""
    if isinstance(cond, bool):
        return ops.zeros_like(like) if cond else x
    return ops.where(cond, 0.0, x)


def _safe(x, bad, fill):
    """``x`` with ``fill`` where ``bad``: keeps nan/inf out of the branch a where() drops, whose
    derivative would otherwise be nan * 0 (a Python scalar is a constant: no derivative)."""
    if isinstance(x, PY_SCALARS) or bad is False:
        return x
    return ops.full_like(x, fill) if bad is True else ops.where(bad, fill, x)


def _or(c1, c2):
    """Elementwise or of two conditions, either of which may be a Python bool."""
    if isinstance(c1, bool) or isinstance(c2, bool):
        c1, c2 = (c1, c2) if isinstance(c1, bool) else (c2, c1)
        return True if c1 else c2
    return ops.logical_or(c1, c2)


def _and(c1, c2):
    """Elementwise and of two conditions, either of which may be a Python bool."""
    if isinstance(c1, bool) or isinstance(c2, bool):
        c1, c2 = (c1, c2) if isinstance(c1, bool) else (c2, c1)
        return c2 if c1 else False
    return ops.logical_and(c1, c2)


def _scalar_log(v):
    return math.log(v) if v > 0 else (-math.inf if v == 0 else math.nan)


def _log(x):
    return _scalar_log(x) if isinstance(x, PY_SCALARS) else ops.log(x)


def _log1p(x):
    return _scalar_log(1 + x) if isinstance(x, PY_SCALARS) else ops.log1p(x)


# -- error function and normal distribution ----------------------------------------------------
unary("erf", lambda ans, x: ops.exp(-ops.square(x)) * (2 / _SQRT_PI),
      doc="The error function erf(x) = 2/sqrt(pi) times the integral of exp(-t^2) from 0 to x.",
      known=[("ad.special.erf(0.0)", "array(0.)")])
unary("erfc", lambda ans, x: ops.exp(-ops.square(x)) * (-2 / _SQRT_PI),
      doc="The complementary error function, 1 - erf(x).",
      known=[("ad.special.erfc(0.0)", "array(1.)")])
unary("erfinv", lambda ans, x: ops.exp(ops.square(ans)) * (_SQRT_PI / 2),
      doc="The inverse of erf on (-1, 1).", x="Values in (-1, 1) (-inf and inf at -1 and 1).",
      example="np.array([-0.5, 0.1, 0.9])",
      known=[("ad.special.erfinv(0.0)", "array(0.)"),
             ("bool(np.allclose(ad.special.erf(ad.special.erfinv(0.3)), 0.3))", "True")])
unary("ndtr", lambda ans, x: ops.exp(ops.square(x) * -0.5) * (1 / _SQRT_2PI),
      doc="The standard normal distribution function ndtr(x) = (1 + erf(x / sqrt(2))) / 2.",
      known=[("ad.special.ndtr(0.0)", "array(0.5)")])
# d log(ndtr) = pdf / ndtr = exp(-x^2/2 - log_ndtr(x)) / sqrt(2 pi): no underflow far left
unary("log_ndtr", lambda ans, x: ops.exp(ops.subtract(ops.square(x) * -0.5, ans)) * (1 / _SQRT_2PI),
      doc="log(ndtr(x)), accurate far into the left tail.",
      example="np.array([-20.0, 0.0, 3.0])",
      known=[("bool(np.isclose(ad.special.log_ndtr(0.0), np.log(0.5)))", "True")])
unary("ndtri", lambda ans, x: ops.exp(ops.square(ans) * 0.5) * _SQRT_2PI,
      doc="The inverse of ndtr (the standard normal quantile function).",
      x="Probabilities in (0, 1) (-inf and inf at 0 and 1).", example="np.array([0.1, 0.5, 0.9])",
      known=[("ad.special.ndtri(0.5)", "array(0.)")])

# -- gamma function ---------------------------------------------------------------------------
unary("gammaln", lambda ans, x: ops.special.digamma(x),
      doc="The logarithm of the absolute value of the gamma function.",
      x="Real values (inf at the poles 0, -1, -2...).",
      known=[("ad.special.gammaln(1.0)", "array(0.)"),
             ("bool(np.isclose(ad.special.gammaln(5.0), np.log(24.0)))", "True")])
digamma_p = unary("digamma", lambda ans, x: ops.special.polygamma(1, x), nan_out=True,
                  doc="The digamma function, d/dx log Gamma(x) (``psi`` is the same function, "
                      "SciPy's other name).",
                  known=[("bool(np.isclose(ad.special.digamma(1.0), -np.euler_gamma))", "True")])
decl.export(digamma, name="psi", primitive=digamma_p)   # noqa: F821  (SciPy's name)


def _polygamma_impl(xp, n, x):
    return _compute(xp, "polygamma", n, x)


# d/dx psi^(n)(x) = psi^(n+1)(x); the order n is an integer, not differentiable (nan where the
# value is: a negative order, NOTE [nan outside the domain])
_polygamma_dx = _nan_out(lambda ans, x1, x2: ops.special.polygamma(x1 + 1, x2), 2)
decl.primitive(
    "polygamma", _polygamma_impl,
    vjp=(None, PartialVJP(_polygamma_dx, 1)), reads=["", names_read(_polygamma_dx)],
    full_jvp=BinaryJVP(None, _polygamma_dx),
    batch=ELEMENTWISE, api="n, x, /",
    doc=_doc("polygamma", "The polygamma function psi^(n)(x), the n-th derivative of digamma.",
             ["n", "x"], ["The order, a non-negative integer (or an array of them): no derivative "
                          "(its gradient is zero).", "Real values."], ["1", _X], wrt=[1],
             known=[("bool(np.isclose(ad.special.polygamma(1, 1.0), np.pi ** 2 / 6))", "True")]))

# -- logistic function -------------------------------------------------------------------------
unary("expit", lambda ans, x: ops.multiply(ans, 1 - ans),
      doc="The logistic sigmoid 1 / (1 + exp(-x)).",
      known=[("ad.special.expit(0.0)", "array(0.5)"),
             ("ad.func.grad(ad.special.expit)(0.0)    # expit(0) (1 - expit(0))", "array(0.25)")])
unary("logit", lambda ans, x: ops.multiply(x, 1 - x), over=True, nan_out=True,
      doc="log(x / (1 - x)), expit's inverse.",
      x="Probabilities in [0, 1] (-inf and inf at 0 and 1).", example="np.array([0.1, 0.5, 0.9])",
      known=[("ad.special.logit(0.5)", "array(0.)")])
unary("log_expit", lambda ans, x: ops.special.expit(-x), doc="log(expit(x)), without overflow.",
      example="np.array([-50.0, 0.0, 2.0])",
      known=[("bool(np.isclose(ad.special.log_expit(0.0), np.log(0.5)))", "True")])

# -- x log y and entropies ---------------------------------------------------------------------
# xlogy = x log y: d/dx = log y, d/dy = x/y. SciPy's value is 0 wherever x == 0, so there
# d/dy = 0 exactly (also at y == 0) and d/dx = 0 where log y is not finite (y <= 0), as torch.
def _dx_xlogy(ans, x1, x2):
    edge = _and(x1 == 0, x2 <= 0)
    return _where0(edge, _log(_safe(x2, edge, 1.0)), ans)


def _dx_xlog1py(ans, x1, x2):
    edge = _and(x1 == 0, x2 <= -1)
    return _where0(edge, _log1p(_safe(x2, edge, 0.0)), ans)


def _dy_xlogy(ans, x1, x2):
    return _where0(x1 == 0, x1 / _safe(x2, x1 == 0, 1.0), ans)


def _dy_xlog1py(ans, x1, x2):
    return _where0(x1 == 0, x1 / (1 + _safe(x2, x1 == 0, 0.0)), ans)


binary("xlogy", _dx_xlogy, _dy_xlogy, nan_out=True,
       doc="x * log(y), 0 where x == 0 (whatever y).",
       about=["The factor.", "The argument of the logarithm."],
       example=["np.array([0.0, 1.0, 2.0])", "np.array([0.5, 2.0, 3.0])"],
       known=[("ad.special.xlogy(0.0, 0.0)", "array(0.)")])
binary("xlog1py", _dx_xlog1py, _dy_xlog1py, nan_out=True,
       doc="x * log1p(y), 0 where x == 0 (whatever y).",
       about=["The factor.", "The argument of log1p."],
       example=["np.array([0.0, 1.0, 2.0])", "np.array([-0.5, 1.0, 2.0])"],
       known=[("ad.special.xlog1py(0.0, -1.0)", "array(0.)")])
# entr = -x log x: d = -(log x + 1), +inf at 0 (the one-sided limit) as torch; nan below 0
unary("entr", lambda ans, x: -(ops.log(x) + 1),
      doc="The elementwise entropy -x log x (0 at 0, -inf for x < 0).",
      known=[("ad.special.entr(0.0)", "array(0.)")])
# rel_entr = x log(x/y): d/dx = log(x/y) + 1, d/dy = -x/y (0 where x == 0, also at y == 0)
binary("rel_entr", lambda ans, x1, x2: _log(x1) - _log(x2) + 1,
       lambda ans, x1, x2: _where0(x1 == 0, -x1 / _safe(x2, x1 == 0, 1.0), ans),
       nan_out=True,
       doc="The relative entropy x log(x / y) (0 where x == 0 <= y, inf outside the domain).",
       about=["Non-negative values.", "Non-negative values."],
       example=["np.array([0.5, 1.0, 2.0])", "np.array([1.0, 1.0, 0.5])"],
       known=[("ad.special.rel_entr(1.0, 1.0)", "array(0.)")])


# -- sinc --------------------------------------------------------------------------------------
def _sinc_d(ans, x):
    # (cos(pi x) - sinc(x)) / x; near 0 the Taylor series -pi^2 x/3 + pi^4 x^3/30 - pi^6 x^5/840
    # (0 at 0, and second derivative -pi^2/3 there), which also avoids the cancellation
    small = ops.abs(x) < 1e-2
    xs = ops.where(small, 1.0, x)
    far = (ops.cos(xs * math.pi) - ops.special.sinc(xs)) / xs
    p2 = math.pi ** 2
    x2 = x * x
    near = x * (-p2 / 3 + x2 * (p2 * p2 / 30 - x2 * (p2 ** 3 / 840)))
    return ops.where(small, near, far)


unary("sinc", _sinc_d, doc="The normalized sinc sin(pi x) / (pi x), 1 at 0.",
      known=[("ad.special.sinc(0.0)", "array(1.)")])


# -- modified Bessel functions of orders 0 and 1 (and their exponentially scaled versions) -----
def _i1_over_x(i1x, x):
    # i1(x)/x (or i1e(x)/x), 1/2 at 0: both vanish linearly there
    zero = x == 0
    return ops.where(zero, 0.5, ops.divide(i1x, ops.where(zero, 1.0, x)))


unary("i0", lambda ans, x: ops.special.i1(x),
      doc="The modified Bessel function of the first kind of order 0, I0.",
      known=[("ad.special.i0(0.0)", "array(1.)")])
unary("i1", lambda ans, x: ops.subtract(ops.special.i0(x), _i1_over_x(ans, x)),
      doc="The modified Bessel function of the first kind of order 1, I1.",
      known=[("ad.special.i1(0.0)", "array(0.)")])
# i0e = exp(-|x|) i0: d = i1e - sign(x) i0e
unary("i0e", lambda ans, x: ops.subtract(ops.special.i1e(x), ops.multiply(ops.sign(x), ans)),
      doc="exp(-abs(x)) I0(x), the exponentially scaled I0.",
      example="np.array([-2.0, 0.5, 3.0])", known=[("ad.special.i0e(0.0)", "array(1.)")])
# i1e = exp(-|x|) i1: d = i0e - i1e/x - sign(x) i1e (1/2 at 0)
unary("i1e", lambda ans, x: ops.subtract(ops.subtract(ops.special.i0e(x), _i1_over_x(ans, x)),
                                              ops.multiply(ops.sign(x), ans)),
      doc="exp(-abs(x)) I1(x), the exponentially scaled I1.",
      example="np.array([-2.0, 0.5, 3.0])", known=[("ad.special.i1e(0.0)", "array(0.)")])


# -- gamma, beta and their relatives ----------------------------------------------------------
def _refused(name, arg, fix):
    """A derivative rule that refuses, by name, a derivative arrayad cannot compute accurately
    (rather than a silent zero)."""
    def rule(*_):
        raise NotImplementedError(
            f"arrayad.special.{name}: the derivative with respect to {arg} is not implemented; "
            f"{fix}")
    rule.fix = fix     # (read by the docstrings: NOTE [special docstrings])
    return rule


def _gammaln_of(a):
    return _lgamma(a) if isinstance(a, PY_SCALARS) else ops.special.gammaln(a)


def _lgamma(v):
    try:
        return math.lgamma(v)
    except ValueError:      # (at the poles 0, -1, -2..., where gammaln is inf)
        return math.inf


def _betaln_of(a, b):
    if isinstance(a, PY_SCALARS) and isinstance(b, PY_SCALARS):
        return _lgamma(a) + _lgamma(b) - _lgamma(a + b)
    return ops.special.betaln(a, b)


def _betainc_dx(a, b, x):
    # d/dx I_x(a, b) = x^(a-1) (1-x)^(b-1) / B(a, b)
    return ops.exp(ops.special.xlogy(a - 1, x) + ops.special.xlog1py(b - 1, -x)
                   - _betaln_of(a, b))


unary("gamma", lambda ans, x: ops.multiply(ans, ops.special.digamma(x)),
      doc="The gamma function, (n - 1)! at a positive integer n.",
      x="Real values (inf or nan at the poles 0, -1, -2...).",
      known=[("ad.special.gamma(5.0)", "array(24.)")])
# d(1/Gamma) = -digamma/Gamma; at the poles x = -n of Gamma, where 1/Gamma is 0 and digamma
# infinite, from 1/Gamma(-n + e) = (-1)^n n! e (1 - digamma(n + 1) e + O(e^2)) the first two
# derivatives (-1)^n n! and -2 (-1)^n n! digamma(n + 1) (not the third, at exactly a pole).
def _rgamma_d(ans, x):
    pole = ops.logical_and(x <= 0, ops.floor(x) == x)
    xs = ops.where(pole, 0.5, x)
    n = ops.stop_gradient(-ops.where(pole, x, 0.0))
    c = ops.multiply(1 - 2 * ops.remainder(n, 2.0), ops.special.gamma(n + 1))
    at_pole = ops.multiply(c, 1 - ops.multiply(ops.special.digamma(n + 1), x + n) * 2)
    return ops.where(pole, at_pole, -ops.multiply(ans, ops.special.digamma(xs)))


unary("rgamma", _rgamma_d, doc="1 / Gamma(x), 0 at the poles of Gamma (and differentiable there).",
      example="np.array([-1.0, 0.5, 2.0])", known=[("ad.special.rgamma(1.0)", "array(1.)")])
unary("loggamma", lambda ans, x: ops.special.digamma(x), nan_out=True,
      doc="The principal branch of log Gamma(x) (gammaln(x) for x > 0).",
      known=[("ad.special.loggamma(1.0)", "array(0.)")])
def _pole(x):
    """Where ``x`` is a pole of Gamma (0, -1, -2...)."""
    return ops.logical_and(x <= 0, ops.floor(x) == x)


# psi(x) - psi(y), the derivative of log Gamma(x) / Gamma(y) (betaln, poch) along x - y fixed.
# Where x and y are both poles of Gamma (betaln(-1, 1) = log|1/a| at a = -1, poch(-1, 1) = -1),
# Gamma(x) / Gamma(y) is a finite limit and psi(x) - psi(y) is inf - inf: the reflection
# psi(1 - t) - psi(t) = pi cot(pi t), whose cot terms are equal for x - y an integer, gives it
# as psi(1 - x) - psi(1 - y) (and so do its derivatives along x - y fixed). Where only one of
# them is a pole the value is inf, or a finite value at a discontinuity (betaln(-1, b) is inf
# for b off the integers): nan.
def _digamma_diff(x, y):
    px, py = _pole(x), _pole(y)
    both = ops.logical_and(px, py)
    xs = ops.where(both, 1 - x, ops.where(px, math.nan, x))
    ys = ops.where(both, 1 - y, ops.where(py, math.nan, y))
    return ops.special.digamma(xs) - ops.special.digamma(ys)


def _betaln_d(ans, a, b):
    a, b = _like(a, ans), _like(b, ans)
    return _digamma_diff(a, a + b)


binary("betaln", lambda ans, x1, x2: _betaln_d(ans, x1, x2),
       lambda ans, x1, x2: _betaln_d(ans, x2, x1),
       doc="The logarithm of the absolute value of the beta function B(a, b).",
       names=("a", "b"), about=["Real values.", "Real values."],
       example=["np.array([0.5, 1.0, 2.0])", "np.array([1.5, 2.0, 3.0])"],
       known=[("ad.special.betaln(1.0, 1.0)", "array(0.)")])


# poch(z, m) = Gamma(z + m) / Gamma(z): d/dz = poch (psi(z + m) - psi(z)) (both poles: the limit,
# _digamma_diff), d/dm = poch psi(z + m). Where poch is 0 (z a pole, z + m not) d/dz is
# 0 * inf: there the product rule on Gamma(z + m) rgamma(z) (as binom's). d/dm is nan where
# z + m is a pole: poch is inf there, or an isolated value (poch(0, 0) = 1, 0 around it).
def _poch_dz(ans, x1, x2):
    z, m = _like(x1, ans), _like(x2, ans)
    zero = ans == 0
    zs, ms = _safe(z, zero, 1.0), _safe(m, zero, 0.5)
    d = ops.multiply(ans, _digamma_diff(zs + ms, zs))
    not_zero = ops.logical_not(zero)
    zz, mz = _safe(z, not_zero, 1.0), _safe(m, not_zero, 0.5)
    r = ops.special.rgamma(zz)
    at_zero = ops.multiply(ops.special.gamma(zz + mz),
                           ops.multiply(ops.special.digamma(zz + mz), r) + _rgamma_d(r, zz))
    return ops.where(zero, at_zero, d)


def _poch_dm(ans, x1, x2):
    zm = _like(x1, ans) + x2
    pole = _pole(zm)
    return ops.multiply(ans, ops.special.digamma(ops.where(pole, math.nan, zm)))


binary("poch", _poch_dz, _poch_dm,
       doc="The Pochhammer symbol (z)_m = Gamma(z + m) / Gamma(z).",
       names=("z", "m"), about=["Real values.", "Real values."],
       example=["np.array([0.5, 1.0, 2.0])", "np.array([1.5, 2.0, 3.0])"],
       known=[("ad.special.poch(1.0, 3.0)     # 1 * 2 * 3", "array(6.)")])

# Regularized incomplete gamma: d/dx P(a, x) = x^(a-1) e^-x / Gamma(a) (Q = 1 - P: its
# negative). The derivative in a has no closed form (a series or quadrature would be needed):
# refused by name rather than a silent zero.
_NO_A = "treat it as a constant (arrayad.stop_gradient), or differentiate with respect to x only"


def _gammainc_dx(ans, x1, x2):
    return ops.exp(ops.special.xlogy(x1 - 1, x2) - x2 - _gammaln_of(x1))


binary("gammainc", _refused("gammainc", "a (the first argument)", _NO_A), _gammainc_dx,
       nan_out=True,
       doc="The regularized lower incomplete gamma function P(a, x) (differentiable in x).",
       names=("a", "x"), about=["The shape, positive.", "Non-negative values."],
       example=["np.array([0.5, 1.0, 2.0])", "np.array([1.5, 2.0, 3.0])"],
       known=[("bool(np.allclose(ad.special.gammainc(1.0, 2.0), 1 - np.exp(-2.0)))", "True")])
binary("gammaincc", _refused("gammaincc", "a (the first argument)", _NO_A),
       lambda ans, x1, x2: -_gammainc_dx(ans, x1, x2),
       nan_out=True, doc="The regularized upper incomplete gamma function Q(a, x) = 1 - P(a, x) "
           "(differentiable in x).",
       names=("a", "x"), about=["The shape, positive.", "Non-negative values."],
       example=["np.array([0.5, 1.0, 2.0])", "np.array([1.5, 2.0, 3.0])"],
       known=[("bool(np.allclose(ad.special.gammaincc(1.0, 2.0), np.exp(-2.0)))", "True")])


def ternary(name, dx, *, nan_out=False, doc, about, example, known=(), params=("a", "b", "x")):
    """An elementwise function of three broadcasting arguments ``(a, b, x)`` differentiable in
    ``x`` only, ``dx(ans, a, b, x)`` its derivative; the derivatives in the shape parameters a and
    b are refused by name. ``nan_out`` as ``unary``'s. ``params``: the parameters' names in the
    docs and errors."""
    if nan_out:
        dx = _nan_out(dx, 3)
    names = (f"{params[0]} (the first argument)", f"{params[1]} (the second argument)")
    fix = _NO_A.replace("x only", f"{params[2]} (the third argument) only")
    doc = _doc_of_rules(name, doc, list(params), about, example,
                        (_refused(name, names[0], fix), _refused(name, names[1], fix), dx), known)

    def vjp_x(g, ans, a, b, x):
        return unbroadcast(ops.multiply(g, dx(ans, a, b, x)), x)

    def full_jvp(tangents, ans, a, b, x):
        for t, arg in zip(tangents[:2], names):
            if t is not None:
                _refused(name, arg, fix)()
        t = tangents[2]
        return None if t is None else broadcast_like(ops.multiply(t, dx(ans, a, b, x)), ans)

    return decl.primitive(name, _impl(name),
                          vjp=(_refused(name, names[0], fix), _refused(name, names[1], fix),
                               vjp_x),
                          reads=["", "", "ans x1 x2 x3"], full_jvp=full_jvp, batch=ELEMENTWISE,
                          api=f"{', '.join(params)}, /", doc=doc)


# Regularized incomplete beta I_x(a, b): d/dx = x^(a-1) (1-x)^(b-1) / B(a, b)
ternary("betainc", lambda ans, a, b, x: _betainc_dx(a, b, x),
        nan_out=True,
        doc="The regularized incomplete beta function I_x(a, b) (differentiable in x).",
        about=["Positive values.", "Positive values.", "Values in [0, 1]."],
        example=["2.0", "3.0", "np.array([0.1, 0.5, 0.9])"],
        known=[("ad.special.betainc(1.0, 1.0, 0.25)     # I_x(1, 1) = x", "array(0.25)")])
# Kummer's 1F1(a; b; x): d/dx = a/b 1F1(a + 1; b + 1; x)
# (at a = -1, 1F1(0; b + 1; x) is 1, its series' one term, where SciPy's hyp1f1(0, 0, x) is inf:
# 1F1(-1; b; x) = 1 - x/b, and SciPy's hyp1f1(-1, -1, x) = 1 + x, have the slope a/b)
def _hyp1f1_dx(ans, a, b, x):
    a, b = _like(a, ans), _like(b, ans)
    one = a == -1
    a_s = _safe(a, one, 0.5)
    return ops.where(one, a / b, ops.special.hyp1f1(a_s + 1, b + 1, x) * (a_s / b))


ternary("hyp1f1", _hyp1f1_dx,
        nan_out=True,
        doc="The confluent hypergeometric function 1F1(a; b; x) (differentiable in x).",
        about=["Real values.", "Real values other than 0, -1, -2...", "Real values."],
        example=["1.0", "2.0", _X],
        known=[("bool(np.isclose(ad.special.hyp1f1(1.0, 1.0, 0.5), np.exp(0.5)))   # 1F1(a; a; x)",
                "True")])


# The inverses in p of P(a, .) and Q(a, .): 1 / (d/dx P(a, x)) at x = the result
binary("gammaincinv", _refused("gammaincinv", "a (the first argument)", _NO_A.replace("x", "p")),
       lambda ans, x1, x2: 1 / _gammainc_dx(None, x1, ans),
       doc="The inverse of gammainc(a, .) (differentiable in p).",
       names=("a", "p"), about=["The shape, positive.", "A probability in [0, 1]."],
       example=["np.array([0.5, 1.0, 2.0])", "np.array([0.1, 0.5, 0.9])"],
       known=[("bool(np.isclose(ad.special.gammainc(2.0, ad.special.gammaincinv(2.0, 0.3)), 0.3))",
               "True")])
binary("gammainccinv", _refused("gammainccinv", "a (the first argument)",
                                _NO_A.replace("x", "p")),
       lambda ans, x1, x2: -1 / _gammainc_dx(None, x1, ans),
       doc="The inverse of gammaincc(a, .) (differentiable in p).",
       names=("a", "p"), about=["The shape, positive.", "A probability in [0, 1]."],
       example=["np.array([0.5, 1.0, 2.0])", "np.array([0.1, 0.5, 0.9])"],
       known=[("bool(np.isclose(ad.special.gammaincc(2.0, ad.special.gammainccinv(2.0, 0.3)), "
               "0.3))", "True")])
# binom(n, k) = Gamma(n + 1) / (Gamma(k + 1) Gamma(n - k + 1)) (for real n and k): d/dn =
# binom (psi(n + 1) - psi(n - k + 1)), d/dk = binom (psi(n - k + 1) - psi(k + 1)). Where binom
# is 0 (k + 1 or n - k + 1 a pole of Gamma: binom(0, 1), binom(n, -1)) that is 0 * inf; there the
# product rule on Gamma(n + 1) rgamma(k + 1) rgamma(n - k + 1), with rgamma's derivative at its
# poles (rgamma's rule), gives the derivative: binom(n, 1) = n has slope 1 at n = 0. (Elsewhere
# the logarithmic form stays: Gamma(n + 1) alone overflows for n > 171.)
def _binom_d(ans, n, k, wrt_n):
    n, k = _like(n, ans), _like(k, ans)
    zero = ans == 0
    ns, ks = _safe(n, zero, 1.0), _safe(k, zero, 0.5)
    if wrt_n:
        d = ops.multiply(ans, ops.special.digamma(ns + 1) - ops.special.digamma(ns - ks + 1))
    else:
        d = ops.multiply(ans, ops.special.digamma(ns - ks + 1) - ops.special.digamma(ks + 1))
    nz, kz = _safe(n, ops.logical_not(zero), 1.0), _safe(k, ops.logical_not(zero), 0.5)
    r1, r2 = ops.special.rgamma(kz + 1), ops.special.rgamma(nz - kz + 1)
    dr2 = _rgamma_d(r2, nz - kz + 1)
    if wrt_n:
        at_zero = ops.multiply(ops.special.digamma(nz + 1), r2) + dr2
        at_zero = ops.multiply(ops.special.gamma(nz + 1), ops.multiply(r1, at_zero))
    else:
        dr1 = _rgamma_d(r1, kz + 1)
        at_zero = ops.multiply(ops.special.gamma(nz + 1),
                               ops.multiply(dr1, r2) - ops.multiply(r1, dr2))
    return ops.where(zero, at_zero, d)


binary("binom", lambda ans, x1, x2: _binom_d(ans, x1, x2, True),
       lambda ans, x1, x2: _binom_d(ans, x1, x2, False),
       doc="The binomial coefficient as a function of real n and k.",
       names=("n", "k"), about=["Real values.", "Real values."],
       example=["np.array([5.0, 6.0, 7.5])", "np.array([2.0, 3.0, 1.5])"],
       known=[("ad.special.binom(5.0, 2.0)", "array(10.)")])


# expn(n, x) = int_1^inf e^(-x t) / t^n dt: d/dx = -E_{n-1}(x), with E_{-1}(x) = e^-x (1+x)/x^2;
# the integer order is not differentiable (as polygamma's)
def _expn_dx(ans, x1, x2):
    em1 = ops.exp(-x2) * (1 + x2) / ops.square(x2)
    if isinstance(x1, PY_SCALARS):
        n = float(math.trunc(x1)) if math.isfinite(x1) else x1
        return -em1 if n == 0 else -ops.special.expn(n - 1, x2)
    # (SciPy's expn takes the order's integer part, toward 0: expn(0.5, x) is E_0(x); E_{-1} of
    # SciPy's expn is nan: kept out of the branch the where drops)
    n = ops.trunc(ops.stop_gradient(x1))
    return -ops.where(n == 0, em1, ops.special.expn(ops.where(n == 0, 1.0, n) - 1, x2))


binary("expn", None, _expn_dx, nan_out=True,
       doc="The generalized exponential integral E_n(x).",
       names=("n", "x"),
              about=["A non-negative integer: no derivative (its gradient is zero).",
              "Positive values."],
       example=["2", _X],
       known=[("bool(np.isclose(ad.special.expn(0, 2.0), np.exp(-2.0) / 2))   # e^-x / x",
               "True")])
# yn(n, x): d/dx = (Y_{n-1}(x) - Y_{n+1}(x)) / 2 (SciPy's yn takes negative orders)
# (SciPy's yn takes the order's integer part, toward 0, as expn: so does the rule)
def _yn_dx(ans, x1, x2):
    n = (float(math.trunc(x1)) if math.isfinite(x1) else x1) if isinstance(x1, PY_SCALARS) \
        else ops.trunc(ops.stop_gradient(x1))
    return (ops.special.yn(n - 1, x2) - ops.special.yn(n + 1, x2)) * 0.5


binary("yn", None, _yn_dx, doc="The Bessel function of the second kind Y_n of integer order n.",
       names=("n", "x"),
       about=["An integer: no derivative (its gradient is zero).", "Positive values."],
       example=["1", _X],
       known=[("bool(np.allclose(ad.special.yn(0, 2.0), ad.special.y0(2.0)))", "True")])


# Hurwitz zeta(x, q) = sum_k (k + q)^-x: d/dq = -x zeta(x + 1, q); the derivative in x (a sum
# of log(k + q) (k + q)^-x) is refused by name. zeta(x) is Riemann's, q = 1.
def _zeta_dq(ans, x1, x2):
    return -ops.multiply(x1, bind(zeta_p, x1 + 1, x2))


_zeta_dq = _nan_out(_zeta_dq, 2)     # (zeta(x < 1, q) is nan: NOTE [nan outside the domain])


_ZETA_DX = _refused("zeta", "x (the exponent, first argument)",
                    "treat it as a constant (arrayad.stop_gradient); the derivative in q works")
zeta_p = decl.primitive(
    "zeta", _impl("zeta"),
    vjp=(_ZETA_DX, PartialVJP(_zeta_dq, 1)),
    reads=["", names_read(_zeta_dq)],
    full_jvp=BinaryJVP(_ZETA_DX, _zeta_dq),
    batch=ELEMENTWISE)


@decl.export(primitive=zeta_p)
@_documented(["x", "q : array_like, optional"],
             ["The exponent, > 1 (inf at 1).", "q > 0; None for Riemann's zeta (q = 1)."],
             ["3.0", _X], wrt=[1], refused=[("x", _ZETA_DX)], composite=False,
             known=[("bool(np.isclose(ad.special.zeta(2.0), np.pi ** 2 / 6))", "True")])
def zeta(x, q=None):
    """The Hurwitz zeta function sum_k (k + q)^-x (Riemann's for q=None), differentiable in
    q."""
    return bind(zeta_p, x, 1.0 if q is None else q)


unary("zetac", _refused("zetac", "x", "treat it as a constant (arrayad.stop_gradient)"),
      doc="Riemann's zeta(x) - 1, accurate for large x.", x="Real values (inf at 1).",
      example="np.array([0.5, 2.0, 3.0])",
      known=[("bool(np.isclose(ad.special.zetac(2.0), np.pi ** 2 / 6 - 1))", "True")])


# -- complete elliptic integrals K(m), E(m) (parameter m = k^2) ---------------------------------
# dK/dm = (E - (1-m) K) / (2 m (1-m)), dE/dm = (E - K) / (2m); both cancel near m = 0, where
# their series (pi/2) sum_n n c_n m^(n-1) and -(pi/2) sum_n n c_n/(2n-1) m^(n-1),
# c_n = ((2n)! / (4^n n!^2))^2, take over (to 1e-15 for |m| < 1e-3 with 4 terms).
_K_SERIES = (1 / 4, 9 / 32, 75 / 256, 1225 / 4096)
_E_SERIES = (-1 / 4, -3 / 32, -15 / 256, -175 / 4096)


def _series(coeffs, m):
    out = ops.zeros_like(m)
    for c in reversed(coeffs):
        out = out * m + c * (math.pi / 2)
    return out


def _ellipk_d(m):
    small = ops.abs(m) < 1e-3
    ms = ops.where(small, 0.5, m)
    far = (ops.special.ellipe(ms) - ops.multiply(1 - ms, ops.special.ellipk(ms))) \
        / ops.multiply(ms * 2, 1 - ms)
    return ops.where(small, _series(_K_SERIES, m), far)


def _ellipe_d(ans, x):
    m = x
    small = ops.abs(m) < 1e-3
    ms = ops.where(small, 0.5, m)
    far = (ops.special.ellipe(ms) - ops.special.ellipk(ms)) / (ms * 2)
    return ops.where(small, _series(_E_SERIES, m), far)


unary("ellipk", lambda ans, x: _ellipk_d(x), doc="The complete elliptic integral of the first "
      "kind K(m), with the parameter m = k^2.", x="The parameter m < 1.",
      example="np.array([0.0, 0.5, 0.9])",
      known=[("bool(np.isclose(ad.special.ellipk(0.0), np.pi / 2))", "True")])
unary("ellipkm1", lambda ans, x: -_ellipk_d(1 - x), doc="K(1 - p), accurate for small p.",
      x="p > 0.", example="np.array([0.1, 0.5, 1.0])",
      known=[("bool(np.isclose(ad.special.ellipkm1(1.0), np.pi / 2))", "True")])
unary("ellipe", _ellipe_d, doc="The complete elliptic integral of the second kind E(m), with the "
      "parameter m = k^2.", x="The parameter m <= 1.", example="np.array([0.0, 0.5, 0.9])",
      known=[("ad.special.ellipe(1.0)", "array(1.)"),
             ("bool(np.isclose(ad.special.ellipe(0.0), np.pi / 2))", "True")])


# Box-Cox: boxcox(x, l) = (x^l - 1)/l (log x at l = 0), boxcox1p the same of 1 + x. With
# L = log x: d/dx = x^(l-1), d/dl = (x^l L - ans)/l, which cancels for small u = l L: there
# its series L^2 sum_{k>=2} (k-1) u^(k-2) / k! (to 1e-16 for |u| < 0.1 with 14 terms).
def _boxcox_dl(ans, l, L):
    u = ops.multiply(l, L)
    small = ops.abs(u) < 0.1
    ls = _safe(l, small, 1.0)
    # (at x = 0, L = -inf: x^l L is 0 for l > 0, its limit, where the product is 0 * inf; the
    # value -1/l there has the derivative -ans/l = 1/l^2)
    zero = L == -math.inf
    Ls = _safe(L, zero, 0.0)
    far = (ops.where(zero, 0.0, ops.multiply(ops.exp(ops.multiply(ls, Ls)), Ls)) - ans) / ls
    near = ops.zeros_like(u)
    for k in range(15, 1, -1):
        near = near * u + (k - 1) / math.factorial(k)
    return ops.where(small, ops.multiply(near, ops.square(L)), far)


binary("boxcox", lambda ans, x1, x2: ops.exp(ops.multiply(x2 - 1, ops.log(x1))),
       lambda ans, x1, x2: _boxcox_dl(ans, x2, ops.log(x1)),
       nan_out=True,
       doc="The Box-Cox transform (x^lmbda - 1) / lmbda (log x at lmbda = 0).",
       names=("x", "lmbda"), about=["Positive values.", "Real values."],
       example=[_X, "np.array([0.0, 0.5, 2.0])"],
       known=[("bool(np.isclose(ad.special.boxcox(2.0, 0.0), np.log(2.0)))", "True")])
binary("boxcox1p", lambda ans, x1, x2: ops.exp(ops.multiply(x2 - 1, ops.log1p(x1))),
       lambda ans, x1, x2: _boxcox_dl(ans, x2, ops.log1p(x1)),
       nan_out=True,
       doc="The Box-Cox transform of 1 + x, ((1 + x)^lmbda - 1) / lmbda (log1p x at lmbda = 0).",
       names=("x", "lmbda"), about=["Values greater than -1.", "Real values."],
       example=[_X, "np.array([0.0, 0.5, 2.0])"],
       known=[("bool(np.isclose(ad.special.boxcox1p(1.0, 0.0), np.log(2.0)))", "True")])


# inv_boxcox(y, l) = (1 + l y)^(1/l) (exp y at l = 0): d/dy = ans / (1 + l y), and
# d/dl = ans y^2 f(l y), f(v) = (v/(1+v) - log1p(v)) / v^2, near 0 its series
# sum_{k>=2} (-1)^(k+1) (k-1)/k v^(k-2) (to 1e-16 for |v| < 0.05 with 14 terms);
# inv_boxcox1p = inv_boxcox - 1: the same derivatives of ans + 1.
def _inv_boxcox_dl(val, y, l):
    v = ops.multiply(l, y)
    small = ops.abs(v) < 0.05
    vs = _safe(v, small, 1.0)
    far = (vs / (1 + vs) - ops.log1p(vs)) / ops.square(vs)
    near = ops.zeros_like(v)
    for k in range(15, 1, -1):
        near = near * v + (-1) ** (k + 1) * (k - 1) / k
    return ops.multiply(ops.multiply(val, ops.square(y)), ops.where(small, near, far))


binary("inv_boxcox", lambda ans, x1, x2: ans / (1 + ops.multiply(x2, x1)),
       lambda ans, x1, x2: _inv_boxcox_dl(ans, x1, x2),
       doc="The inverse of boxcox in its first argument, (1 + lmbda y)^(1/lmbda) (exp y at "
           "lmbda = 0).",
       names=("y", "lmbda"), about=["Real values.", "Real values."],
       example=[_X, "np.array([0.0, 0.5, 2.0])"],
       known=[("bool(np.isclose(ad.special.inv_boxcox(ad.special.boxcox(3.0, 0.5), 0.5), 3.0))",
               "True")])
binary("inv_boxcox1p", lambda ans, x1, x2: (ans + 1) / (1 + ops.multiply(x2, x1)),
       lambda ans, x1, x2: _inv_boxcox_dl(ans + 1, x1, x2),
       doc="The inverse of boxcox1p in its first argument.",
       names=("y", "lmbda"), about=["Real values.", "Real values."],
       example=[_X, "np.array([0.0, 0.5, 2.0])"],
       known=[("bool(np.isclose(ad.special.inv_boxcox1p(ad.special.boxcox1p(3.0, 0.5), 0.5), "
               "3.0))", "True")])


def _floating(v):
    """An integer or boolean array as the default floating dtype of its device (float64, or
    float32 on array-api-strict's devices without float64); other values as they are."""
    if isinstance(v, PY_SCALARS) or ops.isdtype(v.dtype, ("real floating", "complex floating")):
        return v
    return ops.astype(v, _default_float(v))


def _like(v, arr):
    """A Python number as an array of ``arr``'s dtype and device (so that a float32 ``arr``
    stays float32 where SciPy's ufunc would promote the number to float64)."""
    return ops.full_like(arr, v) if isinstance(v, PY_SCALARS) else v


def _nan_where(bad, v):
    """``v`` with nan where ``bad`` (SciPy's domain errors), as a product with a constant of
    ones and nans: its derivative is nan there too, where a ``where`` would give 0 from its
    constant branch, a finite wrong number (``bad`` may be a Python bool, from scalars)."""
    if isinstance(bad, bool):
        return ops.multiply(v, math.nan) if bad else v
    return ops.multiply(v, ops.where(bad, math.nan, ops.ones_like(ops.stop_gradient(v))))


@decl.composite
@_documented(["a", "d : int"], ["Real values > (d - 1) / 2 (nan elsewhere, where SciPy raises a "
                                 "ValueError).", "The dimension, a positive Python int."],
             ["np.array([2.0, 3.0, 4.0])", "2"], wrt=[0],
             known=[("bool(np.isclose(ad.special.multigammaln(3.0, 1), np.log(2.0)))   "
                     "# gammaln(3)", "True")],
             uses="gammaln")
def multigammaln(a, d):
    """The log of the multivariate gamma function of dimension ``d`` (a Python int):
    d(d-1)/4 log(pi) + sum_j gammaln(a - j/2), j = 0..d-1."""
    if isinstance(d, bool) or int(d) != d or d < 1:
        raise ValueError(f"arrayad.special.multigammaln: d must be a positive integer, got {d!r}")
    d = int(d)
    out = ops.special.gammaln(a)
    for j in range(1, d):
        out = out + ops.special.gammaln(a - j / 2)
    # (SciPy raises a ValueError when some a <= (d - 1)/2, which reading the values would take,
    # impossible inside a transform: nan there instead, its derivative too)
    return _nan_where(a <= (d - 1) / 2, out + d * (d - 1) / 4 * math.log(math.pi))


def _default_float(x):
    """The default floating dtype of the backend and device of ``x`` (torch: float32)."""
    raw = _core.raw_value(x)
    b = _core.backend_of(raw)
    info = b.xp.__array_namespace_info__()
    return from_backend(info.default_dtypes(device=b.device_of(raw))["real floating"])


def _in_float64(fn, *args):
    """``fn(*args)`` computed in float64 and rounded back where the arrays are float32 (or
    narrower), as SciPy's gdtr and chdtr (float64 loops only): written with gammainc of a x (or
    x / 2), they would otherwise lose the product's underflow (1e-45 / 2 is 0 in float32)."""
    # Integer (and bool) arrays as the default floating dtype first, as SciPy's loops take them
    # (float64; float32 on torch by default): a x in int64 would overflow, and int with float
    # has no promotion in the standard.
    args = [a if isinstance(a, PY_SCALARS) or ops.isdtype(a.dtype, "real floating")
            else ops.astype(a, _default_float(a)) for a in args]
    arrays = [a for a in args if not isinstance(a, PY_SCALARS)]
    dt = ops.result_type(*arrays) if arrays else None
    if dt is None or not ops.isdtype(dt, "real floating") or ops.finfo(dt).bits >= 64:
        return fn(*args)
    wide = [a if isinstance(a, PY_SCALARS) else ops.astype(a, ops.float64) for a in args]
    return ops.astype(fn(*wide), dt)


def _gdtr(a, b, x, upper):
    if isinstance(a, PY_SCALARS) and isinstance(x, PY_SCALARS):
        ax = a * x
    else:
        # (P(b, a x) is 0 for every finite a at x = 0 (every x >= 0 at a = 0), but through the
        # product the chain rule gives 0 * inf there for b < 1 (the density of P(b, .) at 0):
        # so there the product does not depend on a (on x), and the structural zero of the
        # where's constant side stays 0 through the infinite density (NOTE [strong zeros]).
        # Only where P(b, 0) is a number (b > 0): a structural zero would hide a nan.)
        a, x = _like(a, x), _like(x, a)
        b_ok = _like(b, a) > 0
        x0 = ops.logical_and(ops.logical_and(x == 0, ops.isfinite(a)), b_ok)
        a0 = ops.logical_and(ops.logical_and(a == 0, x >= 0), ops.logical_and(x < math.inf, b_ok))
        ax = ops.multiply(ops.where(x0, ops.stop_gradient(a), a),
                          ops.where(a0, ops.stop_gradient(x), x))
    # (SciPy: nan for x < 0 whatever a, where P(b, a x) alone would be 0 or 1 for a <= 0)
    p = (ops.special.gammaincc if upper else ops.special.gammainc)(_like(b, ax), ax)
    return _nan_where(x < 0, p)


@decl.composite
@_documented(["a", "b", "x"],
             ["The rate, positive.", "The shape, positive.", "Non-negative values."],
             ["np.array([0.5, 1.0, 2.0])", "2.0", "np.array([1.0, 2.0, 3.0])"], wrt=[0, 2],
             refused=[("b", _NO_A.replace("x only", "a and x only"))],
             known=[("bool(np.isclose(ad.special.gdtr(1.0, 1.0, 2.0), 1 - np.exp(-2.0)))",
                     "True")],
             uses="gammainc")
def gdtr(a, b, x):
    """The gamma distribution function of rate ``a`` and shape ``b`` at ``x``: P(b, a x)
    (differentiable in a and x)."""
    return _in_float64(lambda a, b, x: _gdtr(a, b, x, False), a, b, x)


@decl.composite
@_documented(["a", "b", "x"],
             ["The rate, positive.", "The shape, positive.", "Non-negative values."],
             ["np.array([0.5, 1.0, 2.0])", "2.0", "np.array([1.0, 2.0, 3.0])"], wrt=[0, 2],
             refused=[("b", _NO_A.replace("x only", "a and x only"))],
             known=[("bool(np.isclose(ad.special.gdtrc(1.0, 1.0, 2.0), np.exp(-2.0)))", "True")],
             uses="gammaincc")
def gdtrc(a, b, x):
    """1 - gdtr(a, b, x): Q(b, a x) (differentiable in a and x)."""
    return _in_float64(lambda a, b, x: _gdtr(a, b, x, True), a, b, x)


@decl.composite
@_documented(["v", "x"], ["The degrees of freedom, positive.", "Non-negative values."],
             ["3.0", _X], wrt=[1], refused=[("v", _NO_A)],
             known=[("bool(np.isclose(ad.special.chdtr(2.0, 2.0), 1 - np.exp(-1.0)))", "True")],
             uses="gammainc")
def chdtr(v, x):
    """The chi-square distribution function with ``v`` degrees of freedom: P(v/2, x/2)
    (differentiable in x)."""
    return _in_float64(lambda v, x: ops.special.gammainc(v / 2, x / 2), v, x)


@decl.composite
@_documented(["v", "x"], ["The degrees of freedom, positive.", "Non-negative values."],
             ["3.0", _X], wrt=[1], refused=[("v", _NO_A)],
             known=[("bool(np.isclose(ad.special.chdtrc(2.0, 2.0), np.exp(-1.0)))", "True")],
             uses="gammaincc")
def chdtrc(v, x):
    """1 - chdtr(v, x): Q(v/2, x/2) (differentiable in x)."""
    return _in_float64(lambda v, x: ops.special.gammaincc(v / 2, x / 2), v, x)


# The distribution functions of Student's t and F, and betaincc, are computed by the backend's own
# function (SciPy's on a host copy elsewhere), not written with betainc: their edges (df = inf,
# the F tail beyond the rounding of dfn x / (dfd + dfn x), 1 - x below the rounding of 1) need
# the complementary forms SciPy chooses between. Their derivatives in x are the densities.
ternary("betaincc", lambda ans, a, b, x: -_nan_where(ops.isnan(ans), _betainc_dx(a, b, x)),
        doc="The regularized upper incomplete beta function 1 - I_x(a, b) (differentiable in x).",
        about=["Positive values.", "Positive values.", "Values in [0, 1]."],
        example=["2.0", "3.0", "np.array([0.1, 0.5, 0.9])"],
        known=[("ad.special.betaincc(1.0, 1.0, 0.25)     # 1 - x", "array(0.75)")])


def _stdtr_dt(ans, x1, x2):
    df, t = x1, x2
    # the density (1 + t^2/df)^(-(df+1)/2) / (sqrt(df) B(df/2, 1/2)); the normal one at df = inf
    # (df out of the domain, where the value is nan, kept out of the formula: nan by ans)
    inf = _and(df == math.inf, True)
    out = _or(inf, df <= 0)
    dfs = (1.0 if out else df) if isinstance(df, PY_SCALARS) else _safe(df, out, 1.0)
    student = ops.exp(ops.multiply(ops.log1p(ops.square(t) / dfs), (dfs + 1) * -0.5)
                      - 0.5 * _log(dfs) - _betaln_of(dfs / 2, 0.5))
    normal = ops.exp(ops.square(t) * -0.5) * (1 / _SQRT_2PI)
    if isinstance(inf, bool):
        d = normal if inf else student
    else:
        d = ops.where(inf, normal, student)
    return _nan_where(ops.isnan(ans), d)


binary("stdtr", _refused("stdtr", "df (the first argument)", _NO_A.replace("x only", "t only")),
       _stdtr_dt,
       doc="Student's t distribution function with ``df`` degrees of freedom (the normal one at "
           "df = inf), differentiable in t.",
       names=("df", "t"), about=["The degrees of freedom, positive.", "Real values."],
       example=["3.0", "np.array([-1.0, 0.5, 2.0])"],
       known=[("ad.special.stdtr(3.0, 0.0)", "array(0.5)")])


def _fdtr_dx(ans, n, d, x):
    # the density (n x)^(n/2 - 1) n d^(d/2) (d + n x)^(-(n+d)/2) / B(n/2, d/2)
    dens = ops.exp(ops.special.xlogy(n / 2 - 1, ops.multiply(n, x)) + _log(n)
                   + ops.special.xlogy(_like(d / 2, x), d)
                   - ops.multiply((n + d) / 2, ops.log(d + ops.multiply(n, x)))
                   - _betaln_of(n / 2, d / 2))
    return _nan_where(ops.isnan(ans), dens)


ternary("fdtr", _fdtr_dx, params=("dfn", "dfd", "x"),
        doc="The F distribution function I_{dfn x / (dfd + dfn x)}(dfn/2, dfd/2) (differentiable "
            "in x).",
        about=["The numerator's degrees of freedom, positive.",
               "The denominator's degrees of freedom, positive.", "Non-negative values."],
        example=["2.0", "3.0", _X],
        known=[("ad.special.fdtr(2.0, 3.0, 0.0)", "array(0.)")])


@decl.composite
@_documented(["k", "m"], ["The number of events, >= 0, rounded down: a step function of k, so its "
                          "gradient is zero.", "The mean, positive."],
             ["2.0", _X], wrt=[1],
             known=[("bool(np.isclose(ad.special.pdtr(0.0, 2.0), np.exp(-2.0)))", "True")],
             uses="gammaincc")
def pdtr(k, m):
    """The Poisson distribution function: Q(k + 1, m), k >= 0 (differentiable in m)."""
    if isinstance(k, PY_SCALARS):
        k = _like(float(k), m) if not isinstance(m, PY_SCALARS) else ops.asarray(float(k))
    k, m = _floating(k), _floating(m)   # (SciPy's loops take integer k and m as floats)
    k = ops.floor(ops.stop_gradient(k))
    # (SciPy: nan for k < 0, and 1 at m == 0 whatever k, nan included)
    k = ops.where(_and(ops.isnan(k), m == 0), 0.0, k)
    return _nan_where(k < 0, ops.special.gammaincc(k + 1, m))


# -- error function relatives and exponentials -------------------------------------------------
# erfcx = exp(x^2) erfc(x): d = 2 x erfcx(x) - 2/sqrt(pi)
unary("erfcx", lambda ans, x: ops.multiply(x, ans) * 2 - 2 / _SQRT_PI,
      doc="The scaled complementary error function exp(x^2) erfc(x).",
      known=[("ad.special.erfcx(0.0)", "array(1.)")])
unary("exp2", lambda ans, x: ans * math.log(2.0), doc="2**x.",
      known=[("ad.special.exp2(3.0)", "array(8.)")])
unary("exp10", lambda ans, x: ans * math.log(10.0), doc="10**x.",
      known=[("ad.special.exp10(2.0)", "array(100.)")])
unary("cosm1", lambda ans, x: -ops.sin(x), doc="cos(x) - 1, accurate near 0.",
      known=[("ad.special.cosm1(0.0)", "array(0.)")])
unary("cbrt", lambda ans, x: ops.square(ans) * 3, over=True, doc="The real cube root.",
      example="np.array([-8.0, 1.0, 27.0])", known=[("ad.special.cbrt(27.0)", "array(3.)")])
unary("exp1", lambda ans, x: -ops.exp(-x) / x, nan_out=True, doc="The exponential integral E1(x).",
      x="Positive values (inf at 0).")
unary("expi", lambda ans, x: ops.exp(x) / x, doc="The exponential integral Ei(x).",
      x="Real values (-inf at 0).")


def _exprel_d(ans, x):
    # exprel = (e^x - 1)/x, so d = (1 + (x - 1) exprel(x)) / x; near 0, where that cancels, its
    # Taylor series sum_k k x^(k-1) / (k+1)! (first omitted term 9 x^8/10! < 3e-14 for |x| < .1)
    small = ops.abs(x) < 0.1
    xs = ops.where(small, 1.0, x)
    far = (1 + ops.multiply(xs - 1, ops.special.exprel(xs))) / xs
    near = ops.zeros_like(x)
    for k in range(8, 0, -1):
        near = near * x + k / math.factorial(k + 1)
    return ops.where(small, near, far)


unary("exprel", _exprel_d, doc="(exp(x) - 1) / x, 1 at 0.",
      example="np.array([0.0, 0.05, 2.0])", known=[("ad.special.exprel(0.0)", "array(1.)")])


# spence(z) = integral from 1 to z of log(t) / (1 - t): d = log(z) / (1 - z), -1 at z = 1
def _spence_d(ans, x):
    one = x == 1
    xs = ops.where(one, 2.0, x)
    return ops.where(one, -1.0, ops.log(xs) / (1 - xs))


unary("spence", _spence_d, doc="Spence's function, the dilogarithm Li2(1 - z).",
      x="z >= 0 (nan below).", known=[("ad.special.spence(1.0)", "array(0.)")])

# -- trigonometric functions of degrees --------------------------------------------------------
_DEG = math.pi / 180
unary("sindg", lambda ans, x: ops.special.cosdg(x) * _DEG, doc="sin of an angle in degrees.",
      x="Angles in degrees.", example="np.array([30.0, 45.0, 90.0])",
      known=[("ad.special.sindg(90.0)", "array(1.)")])
unary("cosdg", lambda ans, x: ops.special.sindg(x) * -_DEG, doc="cos of an angle in degrees.",
      x="Angles in degrees.", example="np.array([30.0, 45.0, 90.0])",
      known=[("ad.special.cosdg(180.0)", "array(-1.)")])
unary("tandg", lambda ans, x: (1 + ops.square(ans)) * _DEG, doc="tan of an angle in degrees.",
      x="Angles in degrees.", example="np.array([30.0, 45.0, 60.0])",
      known=[("ad.special.tandg(45.0)", "array(1.)")])
unary("cotdg", lambda ans, x: (1 + ops.square(ans)) * -_DEG, doc="cot of an angle in degrees.",
      x="Angles in degrees.", example="np.array([30.0, 45.0, 60.0])",
      known=[("ad.special.cotdg(45.0)", "array(1.)")])

# -- losses ----------------------------------------------------------------------------------------
# kl_div = x log(x/y) - x + y: d/dx = log(x/y), d/dy = 1 - x/y (1 where x == 0)
binary("kl_div", lambda ans, x1, x2: _log(x1) - _log(x2),
       lambda ans, x1, x2: 1 - _where0(x1 == 0, x1 / _safe(x2, x1 == 0, 1.0), ans),
       nan_out=True,
       doc="x log(x / y) - x + y (y where x == 0 <= y, inf outside the domain).",
       about=["Non-negative values.", "Non-negative values."],
       example=["np.array([0.5, 1.0, 2.0])", "np.array([1.0, 1.0, 0.5])"],
       known=[("ad.special.kl_div(1.0, 1.0)", "array(0.)")])


# huber(delta, r) = r^2/2 for |r| <= delta, else delta (|r| - delta/2)
def _abs(v):
    return abs(v) if isinstance(v, PY_SCALARS) else ops.abs(v)


def _sq(v):
    return v * v if isinstance(v, PY_SCALARS) else ops.square(v)


def _huber_dr(ans, x1, x2):
    return ops.where(_abs(x2) <= x1, x2, ops.multiply(ops.sign(x2), x1) + ops.zeros_like(ans))


def _huber_ddelta(ans, x1, x2):
    return ops.where(_abs(x2) <= x1, 0.0, _abs(x2) - x1 + ops.zeros_like(ans))


binary("huber", _huber_ddelta, _huber_dr,
       nan_out=True,
       doc="The Huber loss: r^2 / 2 where abs(r) <= delta, else delta (abs(r) - delta / 2).",
       names=("delta", "r"), about=["The threshold.", "The residual."],
       example=["np.array([1.0, 1.0, 2.0])", "np.array([-2.0, 0.5, 3.0])"],
       known=[("ad.special.huber(1.0, 0.5)", "array(0.125)"),
              ("ad.special.huber(1.0, 3.0)", "array(2.5)")])


# pseudo_huber(delta, r) = delta^2 (s - 1), s = sqrt(1 + (r/delta)^2) = ans/delta^2 + 1:
# d/dr = r / s, d/ddelta = 2 delta (s - 1) - r^2 / (delta s)
def _ph_s(ans, x1):
    return ans / _sq(x1) + 1


# (SciPy's pseudo_huber is 0 at delta = 0, whatever r, as the limit delta |r|: d/dr is 0 there,
# where r / s is 0/0 at r = 0 and ans/delta^2 is 0/0)
def _ph_dr(ans, x1, x2):
    zero = _and(x1 == 0, True)
    return _where0(zero, x2 / _ph_s(ans, _safe(x1, zero, 1.0)), ans)


binary("pseudo_huber",
       lambda ans, x1, x2: (2 * x1) * (_ph_s(ans, x1) - 1)
       - _sq(x2) / ops.multiply(x1, _ph_s(ans, x1)),
       _ph_dr,
       doc="The pseudo-Huber loss delta^2 (sqrt(1 + (r/delta)^2) - 1).",
       names=("delta", "r"), about=["The scale, positive.", "The residual."],
       example=["np.array([1.0, 1.0, 2.0])", "np.array([-2.0, 0.5, 3.0])"],
       known=[("ad.special.pseudo_huber(1.0, 0.0)", "array(0.)")])


# -- Bessel functions of integer order ------------------------------------------------------------
unary("j0", lambda ans, x: -ops.special.j1(x),
      doc="The Bessel function of the first kind of order 0, J0.",
      known=[("ad.special.j0(0.0)", "array(1.)")])
# (j1/x, like i1/x, is 1/2 at 0)
unary("j1", lambda ans, x: ops.subtract(ops.special.j0(x), _i1_over_x(ans, x)),
      doc="The Bessel function of the first kind of order 1, J1.",
      known=[("ad.special.j1(0.0)", "array(0.)")])
unary("y0", lambda ans, x: -ops.special.y1(x),
      doc="The Bessel function of the second kind of order 0, Y0.",
      x="Positive values (-inf at 0, nan below).")
unary("y1", lambda ans, x: ops.special.y0(x) - ans / x,
      doc="The Bessel function of the second kind of order 1, Y1.",
      x="Positive values (-inf at 0, nan below).")
unary("k0", lambda ans, x: -ops.special.k1(x),
      doc="The modified Bessel function of the second kind of order 0, K0.",
      x="Positive values (inf at 0, nan below).")
unary("k1", lambda ans, x: -ops.special.k0(x) - ans / x,
      doc="The modified Bessel function of the second kind of order 1, K1.",
      x="Positive values (inf at 0, nan below).")
# k0e = e^x k0: d = k0e - k1e; k1e = e^x k1: d = k1e - k0e - k1e/x
unary("k0e", lambda ans, x: ans - ops.special.k1e(x),
      doc="exp(x) K0(x), the exponentially scaled K0.",
      x="Positive values (inf at 0, nan below).")
unary("k1e", lambda ans, x: ans - ops.special.k0e(x) - ans / x,
      doc="exp(x) K1(x), the exponentially scaled K1.",
      x="Positive values (inf at 0, nan below).")


# ---------------------------------------------------------------------------------------------
# Reductions with SciPy's signatures, composites of namespace functions

def _axes(axis, x):
    return tuple(range(ndim_of(x))) if axis is None else axis


@decl.composite
@_documented(
    ["a", "axis : int or tuple of int, optional", "b : array_like, optional",
     "keepdims : bool, optional", "return_sign : bool, optional"],
    ["The values.", "The axes to reduce (None: all, as SciPy).",
     "Weights, broadcast against ``a`` (entries of weight 0 do not count).",
     "Keep the reduced axes with length one.",
     "Also return the sign of the sum (for weights of any sign)."],
    [], wrt=[], returns=[
        "array or tuple",
        "    The reduction, on the backend of ``a`` (``(log(abs(sum)), sign)`` with "
        "``return_sign``)."],
    custom=[
        "Against SciPy, and its gradient, the softmax:", "",
        ">>> from scipy import special as sp",
        ">>> a = np.array([1.0, 2.0, 3.0])",
        ">>> bool(np.allclose(ad.special.logsumexp(a), sp.logsumexp(a)))", "True",
        ">>> bool(np.allclose(ad.func.grad(ad.special.logsumexp)(a), sp.softmax(a)))", "True",
        "", "No overflow where ``exp`` alone would, and the sum of four ones is 4:", "",
        ">>> bool(np.isclose(ad.special.logsumexp(np.array([1000.0, 1000.0])), "
        "1000.0 + np.log(2.0)))", "True",
        ">>> bool(np.isclose(ad.special.logsumexp(np.zeros(4)), np.log(4.0)))", "True"])
def logsumexp(a, axis=None, b=None, keepdims=False, return_sign=False):
    """log(sum(b * exp(a))) over ``axis`` (all axes by default), shifted by the maximum for
    stability; with ``return_sign``, ``(log(abs(sum)), sign(sum))`` for weights ``b`` of any sign,
    else nan where the sum is negative (as SciPy)."""
    if b is not None:
        a, b = ops.broadcast_arrays(a, b)
        # (entries with weight 0 do not count, even at a = inf, as SciPy)
        a = ops.where(b == 0, -math.inf, a)
    m = ops.stop_gradient(ops.max(a, axis=axis, keepdims=True))
    m = ops.where(ops.isfinite(m), m, 0.0)
    e = ops.exp(a - m)
    s = ops.sum(e if b is None else ops.multiply(b, e), axis=axis, keepdims=True)
    if return_sign:
        sign = ops.stop_gradient(ops.sign(s))
        s = ops.abs(s)
    # (a sum of 0, all entries -inf: -inf, through a where so that the gradient is 0, not nan)
    empty = s == 0
    out = ops.where(empty, -math.inf, ops.log(ops.where(empty, 1.0, s))) + m
    if not keepdims:
        out = ops.squeeze(out, axis=_axes(axis, a))
        if return_sign:
            sign = ops.squeeze(sign, axis=_axes(axis, a))
    return (out, sign) if return_sign else out


@decl.composite
@_documented(
    ["x", "axis : int or tuple of int, optional"],
    ["The values.", "The axes to normalize over (None: all, as SciPy)."],
    [], wrt=[], returns=[
        "array",
        "    Non-negative values of the shape of ``x`` summing to one over ``axis``, on its "
        "backend."],
    custom=[
        "Against SciPy, and its Jacobian ``diag(s) - s s^T``:", "",
        ">>> from scipy import special as sp",
        ">>> x = np.array([1.0, 2.0, 3.0])",
        ">>> s = ad.special.softmax(x)",
        ">>> bool(np.allclose(s, sp.softmax(x)))", "True",
        ">>> J = ad.func.jacrev(ad.special.softmax)(x)",
        ">>> bool(np.allclose(J, np.diag(s) - np.outer(s, s)))", "True",
        "", "Equal values share the mass equally:", "",
        ">>> ad.special.softmax(np.zeros(4))", "array([0.25, 0.25, 0.25, 0.25])"])
def softmax(x, axis=None):
    """exp(x) / sum(exp(x)) over ``axis`` (all axes by default, as SciPy): nan over a slice
    holding +inf (inf - inf) or nan, or only -inf, as SciPy and torch."""
    # (SciPy's formula, shifted by the maximum: the shift's derivative is zero, the softmax being
    # invariant under it; at a +inf maximum the nans carry a nan derivative)
    e = ops.exp(x - ops.stop_gradient(ops.max(x, axis=axis, keepdims=True)))
    return e / ops.sum(e, axis=axis, keepdims=True)


@decl.composite
@_documented(
    ["x", "axis : int or tuple of int, optional"],
    ["The values.", "The axes to normalize over (None: all, as SciPy)."],
    [], wrt=[], returns=[
        "array",
        "    ``log(softmax(x))`` without its underflow, of the shape of ``x``, on its backend."],
    custom=[
        "Against SciPy, by rows:", "",
        ">>> from scipy import special as sp",
        ">>> x = np.array([[1.0, 2.0, 3.0], [0.0, 0.0, -800.0]])",
        ">>> bool(np.allclose(ad.special.log_softmax(x, axis=1), sp.log_softmax(x, axis=1)))",
        "True",
        "",
        "where ``log(softmax(x))`` would give -inf: ``log(exp(-800) / 2)``:", "",
        ">>> bool(np.isclose(ad.special.log_softmax(x, axis=1)[1, 2], -800.0 - np.log(2.0)))",
        "True"])
def log_softmax(x, axis=None):
    """x - logsumexp(x) over ``axis`` (all axes by default, as SciPy): nan at +inf entries and
    over a slice of -inf, as SciPy."""
    # (SciPy's formula: the shift by a finite maximum first, so that x - max is exact (0 at
    # x = max = 1e300, where x - logsumexp(x) would round log 2 away)
    m = ops.stop_gradient(ops.max(x, axis=axis, keepdims=True))
    t = x - ops.where(ops.isfinite(m), m, 0.0)
    out = t - ops.log(ops.sum(ops.exp(t), axis=axis, keepdims=True))
    # (a nan value gets a nan derivative: at a +inf entry the rules alone give a finite one)
    return _nan_where(ops.isnan(out), out)
