"""Every public function of ``arrayad.special`` against ``scipy.special`` on an edge grid (0, -0.0,
negative values, half-integers, +-inf, nan, huge and tiny values) in every argument position
(the product of the grid for functions of 2 and 3 arguments): values on NumPy (float64 and
float32), torch and array-api-strict, and derivatives (``grad`` and ``jvp``) against central
differences of SciPy's functions, nan (or an error) where SciPy's value is nan.

SciPy is the reference: with ``SCIPY_ARRAY_API=1`` its functions call these through
``xp.special``, so an edge value that differs breaks SciPy code run on arrayad arrays."""
import importlib.util
import itertools
import os
import warnings

import numpy as np
import pytest
import scipy.special as sp

import arrayad as ad
from arrayad.func import grad, jvp

from conftest import to_numpy

S = ad.special
HAS_TORCH = importlib.util.find_spec("torch") is not None

G = np.array([0.0, -0.0, 0.25, 0.5, 1.0, 1.5, 2.0, 3.0, -0.5, -1.0, -2.5, np.inf, -np.inf, np.nan,
              1e300, 1e30, -1e30, 1e-300, 5e-324])
# float32's own edges (1e300 and 1e-300 are not float32 numbers)
G32 = np.array([0.0, -0.0, 0.25, 0.5, 1.0, 1.5, 2.0, 3.0, -0.5, -1.0, -2.5, np.inf, -np.inf, np.nan,
                3e38, 1e30, -1e30, 1e-30, 1e-45], dtype=np.float32)

REDUCTIONS = ("logsumexp", "softmax", "log_softmax")
ELEMENTWISE = [n for n in S.__all__ if n not in REDUCTIONS + ("multigammaln",)]
ARITY = {n: 1 for n in ELEMENTWISE}
ARITY.update({n: 2 for n in ("polygamma", "xlogy", "xlog1py", "rel_entr", "betaln", "poch",
                             "gammainc", "gammaincc", "gammaincinv", "gammainccinv", "binom",
                             "expn", "yn", "zeta", "boxcox", "boxcox1p", "inv_boxcox",
                             "inv_boxcox1p", "chdtr", "chdtrc", "stdtr", "pdtr", "kl_div", "huber",
                             "pseudo_huber")})
ARITY.update({n: 3 for n in ("betainc", "hyp1f1", "gdtr", "gdtrc", "betaincc", "fdtr")})


def _sp(name):
    fn = getattr(sp, name)
    return getattr(fn, "__wrapped__", fn)     # (SciPy's NumPy function, without its dispatch)


def _outside_scipy(name, args):
    """Grid cells where SciPy itself does not answer, left out of the comparison: scipy.special
    1.17's hyp1f1(a, b, x) runs for hours for x beyond ~1e12 (its series' cost grows with x;
    at x = 1e10 it takes 0.04 s) and crashes the process at (-1e30, -inf, -inf); yn(n, x) with
    |n| >= 1e30 and x >= 1e30 runs its recurrence 2**31 times (seconds per cell)."""
    if name == "hyp1f1":
        a, b, x = args
        return (x > 1e9) | ((a == -1e30) & (b == -np.inf) & (x == -np.inf))
    if name == "yn":
        n, x = args
        return (np.abs(n) >= 1e30) & (x >= 1e30)
    return np.zeros(args[0].shape, bool)


def _grid(name, g=G):
    args = [a.ravel() for a in np.meshgrid(*[g] * ARITY[name], indexing="ij")]
    keep = ~_outside_scipy(name, args)
    return [a[keep] for a in args]


def _reference(name, args):
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return np.asarray(_sp(name)(*args))


def _compare(name, got, want, args, rtol, atol=0.0):
    got = np.asarray(got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    close = np.isclose(got, want, rtol=rtol, atol=atol, equal_nan=True) | (got == want)
    if not close.all():
        bad = np.nonzero(~close)[0]
        cells = "\n".join(f"  {name}{tuple(float(a[i]) for a in args)}: arrayad {got[i]!r}, "
                          f"SciPy {want[i]!r}" for i in bad[:12])
        pytest.fail(f"{len(bad)} of {len(want)} cells differ from SciPy:\n{cells}")


# Tolerances of the comparison: rtol 1e-12 wherever arrayad calls SciPy's own function or a
# formula whose rounding errors stay within a few ulps; looser where the NumPy path is a formula
# (none today) or, on torch, where torch.special's own implementation computes.
RTOL = {}
TORCH_RTOL = {"gammaln": 1e-13, "digamma": 1e-12, "polygamma": 1e-12, "zeta": 1e-12,
              "gammainc": 1e-12, "gammaincc": 1e-12}


@pytest.mark.parametrize("name", ELEMENTWISE)
def test_values_numpy(name):
    args = _grid(name)
    with np.errstate(all="ignore"):
        got = getattr(S, name)(*args)
    assert np.asarray(got).dtype == np.float64
    _compare(name, got, _reference(name, args), args, RTOL.get(name, 1e-12))


@pytest.mark.parametrize("name", ELEMENTWISE)
def test_values_numpy_float32(name):
    """float32 arrays give float32's answer: SciPy's on the same float32 numbers (its float32
    loop where it has one, else computed in float64 and rounded), to float32's accuracy."""
    args = _grid(name, G32)
    if name in ("polygamma", "expn", "yn"):     # (integer orders: SciPy's loops take float64)
        args[0] = args[0].astype(np.float64)
    with np.errstate(all="ignore"):
        got = np.asarray(getattr(S, name)(*args))
        want = _reference(name, args).astype(np.float32)
    _compare(name, got.astype(np.float32), want, args, rtol=2e-6, atol=1e-37)


@pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed")
@pytest.mark.parametrize("name", ELEMENTWISE)
def test_values_torch(name):
    import torch
    args = _grid(name)
    with np.errstate(all="ignore"):
        got = getattr(S, name)(*[torch.from_numpy(a) for a in args])
    assert isinstance(got, torch.Tensor)
    _compare(name, got.numpy(), _reference(name, args), args, TORCH_RTOL.get(name, 1e-12))


@pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed")
@pytest.mark.parametrize("name", ELEMENTWISE)
def test_values_torch_float32(name):
    """float32 tensors: SciPy's float32 answer, as on NumPy (torch's float32 kernels of
    gammainc, gammaincc, zeta, k1, k0e and k1e lose it at edges: arrayad computes those in
    float64)."""
    import torch
    args = _grid(name, G32)
    if name in ("polygamma", "expn", "yn"):
        args[0] = args[0].astype(np.float64)
    with np.errstate(all="ignore"):
        got = getattr(S, name)(*[torch.from_numpy(a) for a in args])
        want = _reference(name, args).astype(np.float32)
    _compare(name, got.numpy().astype(np.float32), want, args, rtol=2e-6, atol=1e-37)


@pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed")
@pytest.mark.parametrize("upper", [False, True])
def test_torch_gammainc_off_cpu(upper):
    """The code that computes gammainc/gammaincc for torch tensors off the CPU (on the CPU,
    SciPy computes them on a host copy), run here on CPU tensors: SciPy's values on the grid
    (but for subnormal results, whose last bits differ) and where torch's own gammaincc is
    wrong, small a and x (1 - P there: 1e-8 relative at a = 1e-10, a factor 3 at a = 1e-30)."""
    import torch
    from arrayad._ops.special import _torch_gammainc_device
    a = np.concatenate([G, [1e-30, 1e-12, 1e-8, 1e-4, 0.01, 0.0999, 0.1, 0.3]])
    x = np.concatenate([G, np.linspace(0.05, 3.0, 60)])
    a, x = [v.ravel() for v in np.meshgrid(a, x)]
    name = "gammaincc" if upper else "gammainc"
    want = _reference(name, [a, x])
    got = _torch_gammainc_device(upper, torch.from_numpy(a), torch.from_numpy(x)).numpy()
    if upper:     # (the series is clamped to [0, 1], SciPy's Q there too)
        assert ((got >= 0) & (got <= 1) | np.isnan(want)).all()
    keep = ~((np.abs(want) < 1e-290) | (np.abs(got) < 1e-290)) | (want == got)
    _compare(name, got[keep], want[keep], [a[keep], x[keep]], 1e-12)


@pytest.mark.parametrize("name", ELEMENTWISE)
def test_values_array_api_strict(name):
    import array_api_strict as xp
    args = _grid(name)
    with np.errstate(all="ignore"):
        got = getattr(S, name)(*[xp.asarray(a) for a in args])
    _compare(name, to_numpy(got), _reference(name, args), args, 1e-12)


@pytest.mark.parametrize("d", [1, 2, 3])
def test_multigammaln(d):
    """SciPy raises a ValueError when some a <= (d - 1)/2; arrayad cannot read the values inside
    a transform, so it gives nan there (and its derivative is nan), SciPy's value elsewhere."""
    with np.errstate(all="ignore"):
        got = np.asarray(S.multigammaln(G, d))
    for a, v in zip(G, got):
        try:
            want = sp.multigammaln(a, d)
        except ValueError:
            assert np.isnan(v), (a, d, v)
            continue
        _compare("multigammaln", [v], [want], [[a]], 1e-12)
    with pytest.raises(ValueError, match="multigammaln"):
        S.multigammaln(2.0, 0)


@pytest.mark.parametrize("name", REDUCTIONS)
def test_reductions(name):
    """Rows of two grid values (every pair), reduced along the row, against SciPy: nan over a
    row holding +inf for softmax (and at the +inf entry for log_softmax), as SciPy."""
    a = np.array(list(itertools.product(G, G)))
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = getattr(sp, name)(a, axis=1)
        got = getattr(S, name)(a, axis=1)
    k = np.size(got) // len(a)
    rows = [np.repeat(a[:, 0], k), np.repeat(a[:, 1], k)]
    _compare(name, np.ravel(got), np.ravel(want), rows, 1e-12)


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_reductions_derivative_nan(name):
    """Where the value is nan (a row holding +inf or nan), the derivative is nan too; on
    finite rows the Jacobian is the closed form (diag(s) - s s^T, or I - 1 s^T)."""
    from arrayad.func import jacrev
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for row in ([np.inf, 1.0], [1.0, np.inf], [np.nan, 2.0], [np.inf, np.inf]):
            row = np.array(row)
            val = np.asarray(getattr(S, name)(row))
            J = np.asarray(jacrev(getattr(S, name))(row))
            assert np.isnan(J[np.isnan(val)]).all(), (row, val, J)
    x = np.array([1.0, -2.0, 3.0])
    s = sp.softmax(x)
    want = np.diag(s) - np.outer(s, s) if name == "softmax" else np.eye(3) - s[None, :]
    np.testing.assert_allclose(np.asarray(jacrev(getattr(S, name))(x)), want, rtol=1e-12)


# -- derivatives on the grid ---------------------------------------------------------------------
# The arguments each function is differentiable in (the others are integer orders, or refused by
# name with an error: tested in test_special.py).
DIFF = {n: (0,) for n, k in ARITY.items() if k == 1}
del DIFF["zetac"]
DIFF.update({n: (0, 1) for n in ("xlogy", "xlog1py", "rel_entr", "betaln", "poch", "binom",
                                 "boxcox", "boxcox1p", "inv_boxcox", "inv_boxcox1p", "kl_div",
                                 "huber", "pseudo_huber")})
DIFF.update({n: (1,) for n in ("polygamma", "gammainc", "gammaincc", "gammaincinv",
                               "gammainccinv", "expn", "yn", "zeta", "chdtr", "chdtrc", "stdtr",
                               "pdtr")})
DIFF.update({n: (2,) for n in ("betainc", "hyp1f1", "betaincc", "fdtr")})
DIFF.update({n: (0, 2) for n in ("gdtr", "gdtrc")})
# the grid of the derivative checks for functions of 2 and 3 arguments (a few seconds in all)
G_SMALL = np.array([0.0, 0.25, 0.5, 1.0, 1.5, 3.0, -0.5, -1.0, -2.5, np.inf, np.nan, 1e30])


def _fd(name, args, i, h):
    lo, hi = list(args), list(args)
    lo[i], hi[i] = args[i] - h, args[i] + h
    return (_reference(name, hi) - _reference(name, lo)) / (2 * h)


def _one_sided(name, args, i, h, f0):
    """The one-sided difference of second order (-3 f(x) + 4 f(x + h) - f(x + 2h)) / (2h), from
    the right for h > 0, from the left for h < 0; ``f0`` is f(x)."""
    a1, a2 = list(args), list(args)
    a1[i], a2[i] = args[i] + h, args[i] + 2 * h
    return (4 * _reference(name, a1) - _reference(name, a2) - 3 * f0) / (2 * h)


# Where SciPy's own function is not accurate enough for differences: stdtr(df, t) near t = 0
# is accurate to about 1e-11 (stdtr(1, 1e-6) - 1/2 is 3.18324e-7, the Cauchy distribution's
# atan(1e-6)/pi is 3.18310e-7), which a step of 1e-6 turns into 1e-5 in the difference; its
# derivative in t is the density, scipy.stats.t.pdf (computed apart from stdtr), the reference.
def _stdtr_density(df, t):
    from scipy import stats
    with np.errstate(all="ignore"):
        return stats.t.pdf(t, df)


EXACT = {("stdtr", 1): _stdtr_density}


@pytest.mark.parametrize("name,i", [(n, i) for n in sorted(DIFF) for i in DIFF[n]])
def test_derivatives(name, i):
    """grad and jvp against differences of SciPy's function at the grid points where SciPy's
    value is finite and the function smooth (the central differences with steps h and h/2
    agree: no domain edge, pole or kink within a step; and the one-sided differences of second
    order from the left and from the right agree: no kink or jump at the point itself, such as
    poch(0, m), 1 at m = 0 and 0 around it, which central differences step over); nan where
    SciPy's value is nan. The reference is the mean of the one-sided differences: each is
    accurate to O(h^2) where only the second derivative jumps (huber(delta, r) at
    delta = |r|), where central differences are off by O(h)."""
    args = _grid(name) if ARITY[name] == 1 else _grid(name, G_SMALL)
    want = _reference(name, args)
    fn = getattr(S, name)

    def total(*a):
        return ad.sum(fn(*a))

    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        g = np.asarray(grad(total, argnums=i)(*args))

        def only_i(v):
            return fn(*args[:i], v, *args[i + 1:])
        _, t = jvp(only_i, (args[i],), (np.ones_like(args[i]),))
        t = np.asarray(t)
        h = 1e-6 * np.maximum(np.abs(args[i]), 1.0)
        fd, fd2 = _fd(name, args, i, h), _fd(name, args, i, h / 2)
        left, right = _one_sided(name, args, i, -h, want), _one_sided(name, args, i, h, want)
        ref = (left + right) / 2 if (name, i) not in EXACT else EXACT[name, i](*args)
    nan = np.isnan(want)
    assert np.isnan(g[nan]).all() and np.isnan(t[nan]).all(), (
        f"{name}: a finite derivative in argument {i} where SciPy's value is nan at "
        f"{[tuple(float(a[j]) for a in args) for j in np.nonzero(nan & ~np.isnan(g))[0][:6]]}")
    scale = 1e-7 * (1 + np.abs(want))
    smooth = (np.isfinite(want) & np.isfinite(fd) & np.isfinite(fd2)
              # (no huge values, nor tiny ones: a step of 1e-6 from 1e-300 crosses 0)
              & np.all([np.isfinite(a) & (np.abs(a) < 1e20) & ((a == 0) | (np.abs(a) > 1e-3))
                        for a in args], axis=0)
              & (np.abs(fd - fd2) <= 1e-6 * np.abs(fd) + scale)
              & (np.abs(left - right) <= 1e-6 * np.abs(fd) + scale))
    assert smooth.sum() > 0, name
    for got in (g, t):
        close = np.abs(got[smooth] - ref[smooth]) <= 1e-5 * np.abs(ref[smooth]) + scale[smooth]
        if not close.all():
            bad = np.nonzero(smooth)[0][~close]
            pytest.fail(f"{name}, argument {i}: {len(bad)} of {smooth.sum()} derivatives differ "
                        "from the differences of SciPy's function:\n" + "\n".join(
                            f"  {tuple(float(a[j]) for a in args)}: arrayad {got[j]!r}, "
                            f"reference {ref[j]!r}" for j in bad[:8]))
