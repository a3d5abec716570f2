"""arrayad.special beyond the operator database (tests/opdb.py runs every function's values
against SciPy, its VJP/JVP against finite differences, second derivatives and vmap against a
loop on every backend): values against torch.special, the edge values, the backend paths (native,
namespace formulas, SciPy on a host copy, the error off the CPU), SciPy's reductions with weights
and signs, and ``scipy.special.<name>`` dispatching to arrayad under the transforms."""
import importlib.util
import math
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import scipy.special as sp

import arrayad as ad
from arrayad.func import grad, hessian, jvp, vmap
from arrayad.testing import check_grads

from conftest import to_numpy

S = ad.special
HAS_TORCH = importlib.util.find_spec("torch") is not None

UNARY = {"erf": (-2, 2), "erfc": (-2, 2), "erfinv": (-0.9, 0.9), "ndtr": (-3, 3),
         "log_ndtr": (-3, 3), "ndtri": (0.05, 0.95), "gammaln": (0.2, 4), "digamma": (0.2, 4),
         "expit": (-4, 4), "logit": (0.05, 0.95), "entr": (0.1, 3), "sinc": (-3, 3),
         "i0": (-3, 3), "i0e": (-3, 3), "i1": (-3, 3), "i1e": (-3, 3)}


def test_namespace():
    """ad.special is the namespace's attribute and the internal namespace's, so that
    array_namespace(tracer).special.<name> works inside transforms; psi is digamma."""
    from arrayad._ops import ops
    assert ad.special.erf is ops.special.erf
    assert S.psi is S.digamma
    assert set(S.__all__) <= set(dir(ops.special))

    def f(x):
        xp = x.__array_namespace__()
        return xp.sum(xp.special.erf(x))
    x = np.array([0.1, -0.4])
    np.testing.assert_allclose(grad(f)(x), 2 / math.sqrt(math.pi) * np.exp(-x ** 2), rtol=1e-13)


@pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed")
@pytest.mark.parametrize("name", sorted(UNARY))
def test_torch_values_and_grad_against_torch(name):
    """On torch tensors: torch.special's values and torch.func's derivative (both
    independent of arrayad), and a torch tensor back."""
    import torch
    lo, hi = UNARY[name]
    x = torch.from_numpy(np.random.default_rng(len(name)).uniform(lo, hi, (5,)))
    tfn = getattr(torch.special, name)
    got = getattr(S, name)(x)
    assert isinstance(got, torch.Tensor)
    torch.testing.assert_close(got, tfn(x), rtol=1e-13, atol=1e-15)
    want = torch.func.grad(lambda x: tfn(x).sum())(x)
    # (torch's trigamma, digamma's derivative, is accurate to ~1e-9 only)
    torch.testing.assert_close(grad(lambda x: ad.sum(getattr(S, name)(x)))(x), want,
                               rtol=1e-8 if name == "digamma" else 1e-12, atol=1e-14)


@pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed")
def test_torch_binary_against_torch():
    import torch
    x = torch.tensor([0.0, 0.0, 1.5, -2.0, 0.7])
    y = torch.tensor([0.0, 2.0, 0.5, 3.0, 1.2])
    for name in ("xlogy", "xlog1py"):
        torch.testing.assert_close(getattr(S, name)(x, y), getattr(torch.special, name)(x, y),
                                   equal_nan=True)
        # d/dx matches torch everywhere (log y, 0 where x == 0 and log y is not finite)
        gx = torch.func.grad(lambda x: getattr(torch.special, name)(x, y).sum())(x)
        torch.testing.assert_close(grad(lambda x: ad.sum(getattr(S, name)(x, y)))(x), gx)


def test_polygamma_with_array_orders(backend):
    if backend.name == "dask":
        pytest.skip("covered by the opdb run on dask")
    n = np.array([0, 1, 2, 3])
    x = np.array([0.7, 1.3, 2.1, 0.9])
    np.testing.assert_allclose(to_numpy(S.polygamma(backend(n), backend(x))), sp.polygamma(n, x),
                               rtol=1e-12)
    # vmap over the orders and the points together, against a loop
    got = vmap(lambda n, x: S.polygamma(n, x))(backend(n), backend(x))
    want = [sp.polygamma(int(k), v) for k, v in zip(n, x)]
    np.testing.assert_allclose(to_numpy(got), want, rtol=1e-12)
    check_grads(lambda x: S.polygamma(backend(n), x), (backend(x),), order=2)


# ---------------------------------------------------------------------------------------------
# Edge values

def test_xlogy_at_zero(backend):
    """SciPy's value is 0 wherever x == 0, so d/dy is 0 there (also at y == 0, where torch's
    0/0 is nan); d/dx is log y where finite (the true derivative), else 0."""
    x = backend(np.array([0.0, 0.0, 0.0, 2.0]))
    y = backend(np.array([0.0, 2.0, -1.0, 3.0]))
    np.testing.assert_array_equal(to_numpy(S.xlogy(x, y)), [0.0, 0.0, 0.0, 2 * math.log(3.0)])
    gx, gy = grad(lambda x, y: ad.sum(S.xlogy(x, y)), argnums=(0, 1))(x, y)
    np.testing.assert_allclose(to_numpy(gx), [0.0, math.log(2.0), 0.0, math.log(3.0)])
    np.testing.assert_allclose(to_numpy(gy), [0.0, 0.0, 0.0, 2 / 3])
    # the JVP agrees with the VJP
    _, t = jvp(lambda x, y: S.xlogy(x, y), (x, y), (ad.ones_like(x), ad.ones_like(y)))
    np.testing.assert_allclose(to_numpy(t), to_numpy(gx) + to_numpy(gy))
    # xlog1py likewise at y == -1
    y1 = backend(np.array([-1.0, 1.0, -1.0, 2.0]))
    gx, gy = grad(lambda x, y: ad.sum(S.xlog1py(x, y)), argnums=(0, 1))(x, y1)
    np.testing.assert_allclose(to_numpy(gx), [0.0, math.log(2.0), 0.0, math.log(3.0)])
    np.testing.assert_allclose(to_numpy(gy), [0.0, 0.0, 0.0, 2 / 3])


def test_xlogy_with_a_python_scalar(backend):
    y = backend(np.array([0.5, 2.0]))
    np.testing.assert_allclose(to_numpy(S.xlogy(3.0, y)), sp.xlogy(3.0, [0.5, 2.0]))
    np.testing.assert_allclose(to_numpy(grad(lambda y: ad.sum(S.xlogy(3.0, y)))(y)), [6.0, 1.5])
    x = backend(np.array([0.0, 2.0]))
    np.testing.assert_allclose(to_numpy(grad(lambda x: ad.sum(S.xlogy(x, 2.0)))(x)),
                               [math.log(2.0)] * 2)


def test_mixed_integer_and_float_arguments(backend):
    # SciPy's loops take an integer argument as float64 and compute in the common dtype of the
    # floating ones: xlogy(int64, float32) keeps float64's digits (a large x shows a float32
    # log), and pdtr of integer k and m is a float (array-api-strict refuses to promote ints)
    if backend.name == "torch":
        pytest.skip("torch promotes an int64 tensor with a float32 one to float32")
    x = np.array([123456789012345, 7], dtype=np.int64)
    y = np.array([0.3, 2.5], dtype=np.float32)
    want = sp.xlogy(x, y)
    got = S.xlogy(backend(x), backend(y))
    assert to_numpy(got).dtype == want.dtype == np.float64
    np.testing.assert_allclose(to_numpy(got), want, rtol=1e-15)
    k, m = np.array([3, 5, 0]), np.array([2, 7, 1])
    np.testing.assert_allclose(to_numpy(S.pdtr(backend(k), backend(m))), sp.pdtr(k, m),
                               rtol=1e-12)


def test_entr_and_logit_at_the_ends(backend):
    if backend.name == "dask":
        pytest.skip("covered by the opdb run on dask")
    with np.errstate(divide="ignore", invalid="ignore"):
        x = backend(np.array([0.0, -1.0, 1.0]))
        np.testing.assert_array_equal(to_numpy(S.entr(x)), sp.entr(np.array([0.0, -1.0, 1.0])))
        g = to_numpy(grad(lambda x: ad.sum(S.entr(x)))(x))
        assert g[0] == np.inf and np.isnan(g[1]) and g[2] == -1.0   # -(log x + 1)
        p = backend(np.array([0.0, 1.0]))
        np.testing.assert_array_equal(to_numpy(S.logit(p)), [-np.inf, np.inf])
        np.testing.assert_array_equal(to_numpy(grad(lambda p: ad.sum(S.logit(p)))(p)),
                                      [np.inf, np.inf])


def test_sinc_at_zero(backend):
    """sinc is smooth at 0: derivative 0, second derivative -pi^2/3 (its Taylor series), and
    close to 0 the rule agrees with the finite difference."""
    if backend.name == "dask":
        pytest.skip("covered by the opdb run on dask")
    z = backend(np.array(0.0))
    assert float(to_numpy(S.sinc(z))) == 1.0
    assert float(to_numpy(grad(S.sinc)(z))) == 0.0
    np.testing.assert_allclose(to_numpy(hessian(S.sinc)(z)), -math.pi ** 2 / 3, rtol=1e-14)
    check_grads(S.sinc, (backend(np.array([0.004, -0.009, 0.011, 0.3])),), order=2)


def test_bessel_at_zero(backend):
    if backend.name == "dask":
        pytest.skip("covered by the opdb run on dask")
    z = backend(np.array(0.0))
    for name, value, slope in [("i1e", 0.0, 0.5), ("i1", 0.0, 0.5), ("i0", 1.0, 0.0)]:
        f = getattr(S, name)
        assert float(to_numpy(f(z))) == value
        assert float(to_numpy(grad(f)(z))) == slope, name
    # i1 is odd: its second derivative at 0 is 0; I1'' = I1' - ... check around 0
    assert float(to_numpy(hessian(S.i1)(z))) == 0.0
    check_grads(S.i1, (backend(np.array([1e-3, -0.2])),), order=2)


@pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed")
def test_new_functions_against_torch():
    """erfcx, the K Bessel functions (torch's names differ) and gammainc/gammaincc's derivative
    in x: torch.special's values and torch.func's derivatives, independent of arrayad."""
    import torch
    x = torch.from_numpy(np.random.default_rng(3).uniform(0.3, 3.0, (5,)))
    for name, tname in [("erfcx", "erfcx"), ("k0", "modified_bessel_k0"),
                        ("k1", "modified_bessel_k1"), ("k0e", "scaled_modified_bessel_k0"),
                        ("k1e", "scaled_modified_bessel_k1")]:
        torch.testing.assert_close(getattr(S, name)(x), getattr(torch.special, tname)(x),
                                   rtol=1e-13, atol=0)
    tg = torch.func.grad(lambda x: torch.special.erfcx(x).sum())(x)
    torch.testing.assert_close(grad(lambda x: ad.sum(S.erfcx(x)))(x), tg, rtol=1e-12, atol=0)
    a = torch.tensor([0.5, 1.0, 2.5, 4.0, 7.0], dtype=torch.float64)
    for name in ("gammainc", "gammaincc"):
        tfn = getattr(torch.special, name)
        torch.testing.assert_close(getattr(S, name)(a, x), tfn(a, x), rtol=1e-12, atol=0)
        tg = torch.func.grad(lambda x: tfn(a, x).sum())(x)
        torch.testing.assert_close(grad(lambda x: ad.sum(getattr(S, name)(a, x)))(x), tg,
                                   rtol=1e-12, atol=1e-15)


def test_shape_parameter_derivatives_are_refused(backend):
    """gammainc/gammaincc in a and betainc in a or b have no closed-form derivative: grad and
    jvp refuse by name (not a silent zero), while the derivative in x still works."""
    if backend.name == "dask":
        pytest.skip("the rules are backend-independent")
    a = backend(np.array([0.7, 2.0]))
    x = backend(np.array([0.3, 0.6]))
    for call, arg in [(lambda a: S.gammainc(a, x), "gammainc: .* a \\(the first"),
                      (lambda a: S.gammaincc(a, x), "gammaincc: .* a \\(the first"),
                      (lambda a: S.betainc(a, 2.0, x), "betainc: .* a \\(the first"),
                      (lambda b: S.betainc(2.0, b, x), "betainc: .* b \\(the second")]:
        with pytest.raises(NotImplementedError, match=arg + ".*stop_gradient"):
            grad(lambda v: ad.sum(call(v)))(a)
        with pytest.raises(NotImplementedError, match=arg):
            jvp(call, (a,), (ad.ones_like(a),))
    # x alone: x^(a-1) e^-x / Gamma(a) and x^(a-1) (1-x)^(b-1) / B(a, b)
    xn, an = np.array([0.3, 0.6]), np.array([0.7, 2.0])
    np.testing.assert_allclose(to_numpy(grad(lambda x: ad.sum(S.gammainc(a, x)))(x)),
                               xn ** (an - 1) * np.exp(-xn) / sp.gamma(an), rtol=1e-13)
    np.testing.assert_allclose(to_numpy(grad(lambda x: ad.sum(S.betainc(a, 2.0, x)))(x)),
                               xn ** (an - 1) * (1 - xn) / sp.beta(an, 2.0), rtol=1e-13)


def test_zetac_values_and_vmap_but_no_derivative(backend):
    if backend.name == "dask":
        pytest.skip("covered by the other backends")
    xn = np.array([1.5, 2.0, 7.0])
    np.testing.assert_allclose(to_numpy(S.zetac(backend(xn))), sp.zetac(xn), rtol=1e-13)
    np.testing.assert_allclose(to_numpy(vmap(S.zetac)(backend(np.stack([xn, xn + 1])))),
                               sp.zetac(np.stack([xn, xn + 1])), rtol=1e-13)
    with pytest.raises(NotImplementedError, match="zetac: .* x is not implemented"):
        grad(lambda x: ad.sum(S.zetac(x)))(backend(xn))
    with pytest.raises(NotImplementedError, match="zetac: .* x is not implemented"):
        jvp(S.zetac, (backend(xn),), (backend(np.ones(3)),))


def test_new_functions_at_their_edges(backend):
    """j1/x is 1/2 at 0 (j1'(0) = 1/2), spence'(1) = -1 (log z / (1 - z) -> -1), exprel's
    derivative is smooth through 0 (1/2 there, its Taylor series), the degree functions' are
    pi/180 times the radian ones', gammainc's derivative in x at x = 0 is 1 for a = 1."""
    if backend.name == "dask":
        pytest.skip("covered by the opdb run on dask")
    z = backend(np.array(0.0))
    assert float(to_numpy(grad(S.j1)(z))) == 0.5
    assert float(to_numpy(grad(S.j0)(z))) == 0.0
    assert float(to_numpy(grad(S.spence)(backend(np.array(1.0))))) == -1.0
    # 1/Gamma at the poles -n of Gamma: derivative (-1)^n n!, and smooth through them
    poles = backend(np.array([0.0, -1.0, -2.0, -3.0]))
    np.testing.assert_allclose(to_numpy(grad(lambda x: ad.sum(S.rgamma(x)))(poles)),
                               [1.0, -1.0, 2.0, -6.0], rtol=1e-14)
    # (second derivatives there against central second differences of SciPy's rgamma)
    second = [float(to_numpy(hessian(S.rgamma)(backend(np.array(-k))))) for k in (0.0, 1.0, 2.0)]
    h = 1e-4
    fd = [(sp.rgamma(-k + h) - 2 * sp.rgamma(-k) + sp.rgamma(-k - h)) / h ** 2 for k in (0, 1, 2)]
    np.testing.assert_allclose(second, fd, rtol=1e-6)
    check_grads(S.rgamma, (backend(np.array([1e-4, -1.0002, -2.5, 3.0])),), order=2)
    check_grads(S.spence, (backend(np.array([0.999, 1.002, 0.4])),), order=2)
    assert float(to_numpy(grad(S.exprel)(z))) == 0.5
    np.testing.assert_allclose(to_numpy(hessian(S.exprel)(z)), 1 / 3, rtol=1e-14)
    check_grads(S.exprel, (backend(np.array([1e-3, -0.05, 0.099, 0.101, -3.0])),), order=2)
    # K'(0) = pi/8, E'(0) = -pi/8 (the series near 0), and smooth across the switch at 1e-3
    assert float(to_numpy(grad(S.ellipk)(z))) == pytest.approx(math.pi / 8, rel=1e-15)
    assert float(to_numpy(grad(S.ellipe)(z))) == pytest.approx(-math.pi / 8, rel=1e-15)
    for name in ("ellipk", "ellipe"):
        check_grads(getattr(S, name), (backend(np.array([0.999e-3, 1.001e-3, -5e-4])),),
                    order=2)
    d = np.array([30.0, 45.0, 60.0])
    np.testing.assert_allclose(to_numpy(grad(lambda x: ad.sum(S.sindg(x)))(backend(d))),
                               np.cos(np.radians(d)) * math.pi / 180, rtol=1e-13)
    np.testing.assert_allclose(to_numpy(grad(lambda x: ad.sum(S.gammainc(1.0, x)))(
        backend(np.array([0.0, 1.0])))), [1.0, math.exp(-1.0)], rtol=1e-14)


def test_stats_distribution_functions(backend):
    """The distribution functions written on gammainc/betainc: SciPy's values, and derivatives in
    x against the densities of scipy.stats (an independent computation)."""
    if backend.name == "dask":
        pytest.skip("covered by the opdb run on dask")
    from scipy import stats
    xn = np.array([0.4, 1.3, 2.9])
    t = np.array([-1.5, -0.2, 0.7])
    x, tb = backend(xn), backend(t)
    cases = [(lambda x: S.chdtr(3.0, x), xn, stats.chi2(3.0).pdf(xn)),
             (lambda x: S.chdtrc(3.0, x), xn, -stats.chi2(3.0).pdf(xn)),
             (lambda x: S.gdtr(1.5, 2.0, x), xn, stats.gamma(2.0, scale=1 / 1.5).pdf(xn)),
             (lambda x: S.fdtr(2.0, 5.0, x), xn, stats.f(2.0, 5.0).pdf(xn)),
             (lambda x: S.pdtr(2.0, x), xn, -stats.poisson(xn).pmf(2)),
             (lambda x: S.betaincc(2.0, 3.0, x / 4), xn / 4, -stats.beta(2.0, 3.0).pdf(xn / 4) / 4),
             (lambda t: S.stdtr(4.0, t), t, stats.t(4.0).pdf(t))]
    for i, (f, pts, density) in enumerate(cases):
        arg = tb if pts is t else x
        got = to_numpy(grad(lambda v: ad.sum(f(v)))(arg))
        np.testing.assert_allclose(got, density, rtol=1e-12, err_msg=str(i))
    np.testing.assert_allclose(to_numpy(S.stdtr(4.0, tb)), sp.stdtr(4.0, t), rtol=1e-13)
    np.testing.assert_allclose(to_numpy(S.fdtr(2.0, 5.0, x)), sp.fdtr(2.0, 5.0, xn), rtol=1e-13)
    np.testing.assert_allclose(to_numpy(S.multigammaln(x + 2, 3)), sp.multigammaln(xn + 2, 3),
                               rtol=1e-13)


def test_far_tails_on_the_namespace_formulas():
    """array-api-strict computes expit, log_expit, log_ndtr... with namespace formulas (NOTE
    [special implementations]): compare them with SciPy far out, where naive formulas fail."""
    import array_api_strict as xs
    x = np.array([-800.0, -60.0, -11.0, -9.0, 0.0, 5.0, 40.0, 800.0])
    with np.errstate(over="ignore"):
        for name in ("expit", "log_expit", "log_ndtr", "ndtr"):
            got = np.from_dlpack(getattr(S, name)(xs.asarray(x)))
            np.testing.assert_allclose(got, getattr(sp, name)(x), rtol=1e-12, atol=0,
                                       err_msg=name)
    p = np.array([0.0, 1e-300, 0.3, 1.0, 4.0])
    q = np.array([[0.0], [0.5], [2.0]])
    np.testing.assert_allclose(np.from_dlpack(S.rel_entr(xs.asarray(p), xs.asarray(q))),
                               sp.rel_entr(p, q), rtol=1e-13)
    np.testing.assert_allclose(np.from_dlpack(S.sinc(xs.asarray(p))), np.sinc(p), rtol=1e-13)


def test_off_the_cpu_is_a_clear_error():
    """No namespace function and not on the CPU: an error naming the function, the backend and
    the fix (array-api-strict's device1 stands for an accelerator); the namespace formulas
    still work there."""
    import array_api_strict as xs
    x = xs.asarray([0.5, 1.5], device=xs.Device("device1"))
    with pytest.raises(NotImplementedError, match=r"arrayad.special.gammaln.*array_api_strict"
                                                  r".*not the CPU.*move the input"):
        S.gammaln(x)
    out = S.expit(x)
    assert out.device == x.device
    np.testing.assert_allclose(np.from_dlpack(xs.asarray(out, device=xs.Device("CPU_DEVICE"))),
                               sp.expit([0.5, 1.5]))


def test_dask_stays_lazy():
    da = pytest.importorskip("dask.array")
    x = da.from_array(np.array([0.3, 1.2, 2.5, 0.8]), chunks=2)
    y = S.gammaln(x)
    assert isinstance(y, da.Array)
    np.testing.assert_allclose(y.compute(), sp.gammaln([0.3, 1.2, 2.5, 0.8]))
    g = grad(lambda x: ad.sum(S.xlogy(x, x + 1)))(x)
    assert isinstance(g, da.Array)
    xs_ = np.array([0.3, 1.2, 2.5, 0.8])
    np.testing.assert_allclose(g.compute(), np.log1p(xs_) + xs_ / (xs_ + 1))


# ---------------------------------------------------------------------------------------------
# logsumexp, softmax, log_softmax with SciPy's signatures

@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")   # (the row with +inf)
def test_logsumexp_with_infinite_entries(backend):
    a = np.array([[-np.inf, 1.0, 2.0], [-np.inf, -np.inf, -np.inf], [np.inf, 0.0, 1.0]])
    got = S.logsumexp(backend(a), axis=1)
    np.testing.assert_array_equal(to_numpy(got), sp.logsumexp(a, axis=1))
    g = to_numpy(grad(lambda a: S.logsumexp(a, axis=1)[0] + S.logsumexp(a, axis=1)[1])(
        backend(a)))
    # d/da logsumexp = softmax: 0 at the -inf entries; a row of -inf only has gradient 0
    np.testing.assert_allclose(g[0], [0.0, *np.exp([1.0, 2.0]) / np.exp([1.0, 2.0]).sum()])
    np.testing.assert_array_equal(g[1], [0.0, 0.0, 0.0])


def test_logsumexp_with_weights_and_signs(backend):
    if backend.name == "dask":
        pytest.skip("covered by the opdb run on dask")
    rng = np.random.default_rng(5)
    a = rng.standard_normal((2, 3))
    b = np.array([[1.0, -2.0, 0.5], [0.3, 0.2, 0.1]])
    out, sign = S.logsumexp(backend(a), axis=-1, b=backend(b), return_sign=True)
    want, wsign = sp.logsumexp(a, axis=-1, b=b, return_sign=True)
    np.testing.assert_allclose(to_numpy(out), want, rtol=1e-13)
    np.testing.assert_array_equal(to_numpy(sign), wsign)
    # without return_sign a negative sum is nan, as SciPy
    with np.errstate(invalid="ignore"):
        np.testing.assert_array_equal(np.isnan(to_numpy(S.logsumexp(backend(a), axis=1,
                                                                    b=backend(b)))),
                                      np.isnan(sp.logsumexp(a, axis=1, b=b)))
    # weights of 0 drop their entries, even at a = inf
    a0 = np.array([np.inf, 1.0, 2.0])
    b0 = np.array([0.0, 1.0, 1.0])
    np.testing.assert_allclose(to_numpy(S.logsumexp(backend(a0), b=backend(b0))),
                               sp.logsumexp(a0, b=b0))
    check_grads(lambda a, b: S.logsumexp(a, axis=-1, b=b, return_sign=True)[0],
                (backend(a), backend(b)), order=2)
    check_grads(lambda a, b: S.logsumexp(a, axis=0, b=b, keepdims=True),
                (backend(a), backend(np.abs(b))), order=2)


def test_softmax_defaults_to_all_axes(backend):
    a = np.random.default_rng(6).standard_normal((2, 3))
    np.testing.assert_allclose(to_numpy(S.softmax(backend(a))), sp.softmax(a), rtol=1e-13)
    np.testing.assert_allclose(to_numpy(S.log_softmax(backend(a))), sp.log_softmax(a),
                               rtol=1e-13)
    assert S.logsumexp(backend(a)).shape == ()


# ---------------------------------------------------------------------------------------------
# scipy.special on arrayad tracers (SCIPY_ARRAY_API must be set before SciPy is imported: a
# fresh interpreter)

_SCIPY_SCRIPT = textwrap.dedent("""
    import os, sys
    import numpy as np
    import array_api_strict as xs
    import scipy.special as sp
    import arrayad as ad
    from arrayad.func import grad, jvp, vmap

    DOMAIN = {"erf": (-2, 2), "erfc": (-2, 2), "erfinv": (-0.9, 0.9), "ndtr": (-3, 3),
              "log_ndtr": (-3, 3), "ndtri": (0.05, 0.95), "gammaln": (0.2, 4),
              "digamma": (0.2, 4), "psi": (0.2, 4), "expit": (-4, 4), "logit": (0.05, 0.95),
              "entr": (0.1, 3), "sinc": (-3, 3), "i0": (-3, 3), "i0e": (-3, 3), "i1": (-3, 3),
              "i1e": (-3, 3), "logsumexp": (-3, 3), "softmax": (-3, 3), "log_softmax": (-3, 3),
              "xlogy": (0.1, 3), "xlog1py": (0.1, 3), "rel_entr": (0.1, 3), "polygamma": (0.3, 3),
              "log_expit": (-4, 4),
              # (scipy.stats' building blocks; gammainc/betainc in x only)
              "gamma": (0.2, 4), "rgamma": (0.2, 4), "loggamma": (0.2, 4), "erfcx": (-1, 3),
              "j0": (-3, 3), "j1": (-3, 3), "y0": (0.3, 3), "y1": (0.3, 3), "k0": (0.3, 3),
              "k1": (0.3, 3), "k0e": (0.3, 3), "k1e": (0.3, 3), "exp1": (0.3, 3),
              "expi": (0.5, 3), "exprel": (-2, 2), "spence": (0.2, 3), "cbrt": (0.2, 3),
              "exp2": (-2, 2), "exp10": (-2, 2), "cosm1": (-2, 2), "sindg": (10, 80),
              "kl_div": (0.1, 3), "betaln": (0.3, 3), "poch": (0.3, 3), "gammainc": (0.2, 4),
              "gammaincc": (0.2, 4), "betainc": (0.05, 0.95), "betaincc": (0.05, 0.95),
              "chdtr": (0.2, 4), "chdtrc": (0.2, 4), "stdtr": (-2, 2), "gdtr": (0.2, 3),
              "fdtr": (0.2, 3), "pdtr": (0.2, 3), "multigammaln": (2, 4),
              "huber": (-2, 2), "pseudo_huber": (-2, 2), "hyp1f1": (-2, 2),
              "gammaincinv": (0.1, 0.9), "gammainccinv": (0.1, 0.9), "binom": (0.1, 0.9),
              "expn": (0.3, 3), "yn": (0.3, 3), "zeta": (0.3, 3), "boxcox": (0.3, 3),
              "boxcox1p": (0.3, 3), "inv_boxcox": (-0.8, 0.8), "inv_boxcox1p": (-0.8, 0.8),
              "ellipk": (-1, 0.9), "ellipkm1": (0.1, 2), "ellipe": (-1, 0.9)}
    if not os.environ.get("SCIPY_ARRAY_API"):
        # SciPy's plain ufuncs, which reach arrayad through __array_ufunc__
        DOMAIN = {k: v for k, v in DOMAIN.items() if isinstance(getattr(sp, k), np.ufunc)}
        assert len(DOMAIN) == 69, sorted(DOMAIN)
    CALL = {"xlogy": lambda f, x: f(x, x * 0.5 + 1), "xlog1py": lambda f, x: f(x, x * 0.5 + 1),
            "rel_entr": lambda f, x: f(x, x * 0.5 + 1), "polygamma": lambda f, x: f(1, x),
            "softmax": lambda f, x: f(x)[0], "log_softmax": lambda f, x: f(x)[0],
            "kl_div": lambda f, x: f(x, x * 0.5 + 1), "betaln": lambda f, x: f(x, x * 0.5 + 1),
            "poch": lambda f, x: f(x, x * 0.5 + 1), "gammainc": lambda f, x: f(2.5, x),
            "gammaincc": lambda f, x: f(2.5, x), "betainc": lambda f, x: f(2.0, 3.5, x),
            "betaincc": lambda f, x: f(2.0, 3.5, x), "chdtr": lambda f, x: f(3.0, x),
            "chdtrc": lambda f, x: f(3.0, x), "stdtr": lambda f, x: f(4.0, x),
            "gdtr": lambda f, x: f(x * 0.5 + 1, 2.0, x), "fdtr": lambda f, x: f(2.0, 3.0, x),
            "pdtr": lambda f, x: f(3.0, x), "multigammaln": lambda f, x: f(x, 3),
            "huber": lambda f, x: f(1.0, x), "pseudo_huber": lambda f, x: f(x * 0.5 + 1, x),
            "hyp1f1": lambda f, x: f(1.5, 2.5, x), "gammaincinv": lambda f, x: f(2.5, x),
            "gammainccinv": lambda f, x: f(2.5, x), "binom": lambda f, x: f(x + 2, x),
            "expn": lambda f, x: f(2, x), "yn": lambda f, x: f(1, x),
            "zeta": lambda f, x: f(3.5, x), "boxcox": lambda f, x: f(x, x - 1),
            "boxcox1p": lambda f, x: f(x, x - 1), "inv_boxcox": lambda f, x: f(x, x * 0.5),
            "inv_boxcox1p": lambda f, x: f(x, x * 0.5)}
    rng = np.random.default_rng(0)
    bad = []
    for name, (lo, hi) in DOMAIN.items():
        x = rng.uniform(lo, hi, (3,))
        v = rng.standard_normal(3)
        call = CALL.get(name, lambda f, x: f(x))
        ref = lambda x: np.sum(call(getattr(sp, name), x))       # NumPy: SciPy's own code
        eps = 1e-6
        fd = np.array([(ref(x + eps * e) - ref(x - eps * e)) / (2 * eps) for e in np.eye(3)])
        for conv, back in [(np.asarray, np.asarray), (xs.asarray, np.from_dlpack)]:
            f = lambda x: ad.sum(call(getattr(sp, name), x))     # SciPy on tracers
            try:
                g = back(grad(f)(conv(x)))
                t = float(back(jvp(f, (conv(x),), (conv(v),))[1]))
                vm = back(vmap(lambda r: call(getattr(sp, name), r))(conv(np.stack([x, x[::-1]]))))
            except Exception as e:
                bad.append(f"{name} {conv.__module__}: {type(e).__name__}: {e}")
                continue
            want_vm = np.stack([call(getattr(sp, name), x), call(getattr(sp, name), x[::-1])])
            if not np.allclose(g, fd, rtol=1e-6, atol=1e-7):
                bad.append(f"{name} {conv.__module__}: grad {g} vs finite differences {fd}")
            if not np.isclose(t, fd @ v, rtol=1e-6, atol=1e-7):
                bad.append(f"{name} {conv.__module__}: jvp {t} vs {fd @ v}")
            if not np.allclose(vm, want_vm, rtol=1e-12, atol=1e-14):
                bad.append(f"{name} {conv.__module__}: vmap {vm} vs {want_vm}")
    print("\\n".join(bad) if bad else "OK")
    sys.exit(1 if bad else 0)
""")


@pytest.mark.parametrize("array_api", [True, False], ids=["SCIPY_ARRAY_API", "ufuncs"])
def test_scipy_special_dispatches_to_arrayad(array_api):
    """With SCIPY_ARRAY_API=1, scipy.special.<name>(tracer) calls arrayad.special.<name> (or,
    for logsumexp/softmax/log_softmax, SciPy's code on the arrayad namespace); without it,
    SciPy's ufuncs reach arrayad through __array_ufunc__ (log_expit always does). grad, jvp and
    vmap of SciPy's functions, on NumPy and array-api-strict inputs, against finite differences
    of SciPy on NumPy data and a loop."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("SCIPY_ARRAY_API", None)
    if array_api:
        env["SCIPY_ARRAY_API"] = "1"
    r = subprocess.run([sys.executable, "-c", _SCIPY_SCRIPT], env=env, cwd=root,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and r.stdout.strip() == "OK", r.stdout + r.stderr[-3000:]
