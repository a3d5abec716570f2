"""The ``fft`` extension: forward values against numpy.fft, VJP and JVP against central finite
differences (complex values enter and leave as pairs of real arrays), vmap against a Python
loop, and gradients of real losses against torch.func on torch tensors.
"""
import importlib.util

import numpy as np
import pytest

import arrayad as ad
from arrayad.func import grad, jvp, vmap

from conftest import to_numpy
from reference import check_vjp_jvp_by_differences, flat_outputs, numeric

HAS_TORCH = importlib.util.find_spec("torch") is not None
F = ad.fft


def _c(re, im):
    """A complex array from two real ones (without Python-complex arithmetic on real arrays,
    which array-api-strict refuses)."""
    return ad.add(ad.astype(re, ad.complex128), ad.astype(im, ad.complex128) * 1j)


def _parts(y):
    """A complex result as two real outputs (finite differences see real numbers only)."""
    if y.dtype in (ad.complex64, ad.complex128):
        return ad.real(y), ad.imag(y)
    return y


def _r(r, *shape):
    return r.standard_normal(shape)


def _one_real(shape):
    return lambda r: [_r(r, *shape)]


def _two_real(shape):
    return lambda r: [_r(r, *shape), _r(r, *shape)]


# name -> (function of real arrays, inputs maker, reference on the same NumPy inputs)
CASES = {
    "fft_real": (lambda x: _parts(F.fft(x)), _one_real((6,)), np.fft.fft),
    "fft_complex": (lambda a, b: _parts(F.fft(_c(a, b))), _two_real((2, 5)),
                    lambda a, b: np.fft.fft(a + 1j * b)),
    "fft_pad_ortho": (lambda x: _parts(F.fft(x, n=8, norm="ortho")), _one_real((3, 6)),
                      lambda x: np.fft.fft(x, n=8, norm="ortho")),
    "fft_trunc_forward_axis0": (lambda a, b: _parts(F.fft(_c(a, b), n=3, axis=0, norm="forward")),
                                _two_real((5, 2)),
                                lambda a, b: np.fft.fft(a + 1j * b, n=3, axis=0, norm="forward")),
    "ifft": (lambda a, b: _parts(F.ifft(_c(a, b))), _two_real((7,)),
             lambda a, b: np.fft.ifft(a + 1j * b)),
    "ifft_pad_forward": (lambda a, b: _parts(F.ifft(_c(a, b), n=9, norm="forward")),
                         _two_real((2, 6)),
                         lambda a, b: np.fft.ifft(a + 1j * b, n=9, norm="forward")),
    "ifft_trunc_ortho": (lambda x: _parts(F.ifft(x, n=4, axis=0, norm="ortho")), _one_real((6, 2)),
                         lambda x: np.fft.ifft(x, n=4, axis=0, norm="ortho")),
    "fftn": (lambda a, b: _parts(F.fftn(_c(a, b))), _two_real((3, 4)),
             lambda a, b: np.fft.fftn(a + 1j * b)),
    "fftn_s_axes_ortho": (lambda x: _parts(F.fftn(x, s=(5, 2), axes=(-1, 0), norm="ortho")),
                          _one_real((3, 2, 4)),
                          lambda x: np.fft.fftn(x, s=(5, 2), axes=(-1, 0), norm="ortho")),
    "ifftn": (lambda a, b: _parts(F.ifftn(_c(a, b), axes=(1,), norm="forward")), _two_real((3, 4)),
              lambda a, b: np.fft.ifftn(a + 1j * b, axes=(1,), norm="forward")),
    "ifftn_s": (lambda a, b: _parts(F.ifftn(_c(a, b), s=(2, 6))), _two_real((3, 4)),
                lambda a, b: np.fft.ifftn(a + 1j * b, s=(2, 6))),
    "rfft_even": (lambda x: _parts(F.rfft(x)), _one_real((2, 8)), np.fft.rfft),
    "rfft_odd_ortho": (lambda x: _parts(F.rfft(x, norm="ortho")), _one_real((7,)),
                       lambda x: np.fft.rfft(x, norm="ortho")),
    "rfft_pad_axis0": (lambda x: _parts(F.rfft(x, n=9, axis=0, norm="forward")), _one_real((5, 2)),
                       lambda x: np.fft.rfft(x, n=9, axis=0, norm="forward")),
    "rfft_trunc": (lambda x: _parts(F.rfft(x, n=4)), _one_real((7,)),
                   lambda x: np.fft.rfft(x, n=4)),
    "irfft": (lambda a, b: F.irfft(_c(a, b)), _two_real((5,)),
              lambda a, b: np.fft.irfft(a + 1j * b)),
    "irfft_odd_ortho": (lambda a, b: F.irfft(_c(a, b), n=7, norm="ortho"), _two_real((2, 4)),
                        lambda a, b: np.fft.irfft(a + 1j * b, n=7, norm="ortho")),
    "irfft_pad_forward": (lambda a, b: F.irfft(_c(a, b), n=12, axis=0, norm="forward"),
                          _two_real((4, 3)),
                          lambda a, b: np.fft.irfft(a + 1j * b, n=12, axis=0, norm="forward")),
    "irfft_trunc": (lambda a, b: F.irfft(_c(a, b), n=4), _two_real((6,)),
                    lambda a, b: np.fft.irfft(a + 1j * b, n=4)),
    "rfftn": (lambda x: _parts(F.rfftn(x)), _one_real((3, 4)), np.fft.rfftn),
    "rfftn_s_ortho": (lambda x: _parts(F.rfftn(x, s=(4, 5), norm="ortho")), _one_real((2, 3, 6)),
                      lambda x: np.fft.rfftn(x, s=(4, 5), axes=(-2, -1), norm="ortho")),
    "irfftn": (lambda a, b: F.irfftn(_c(a, b)), _two_real((3, 4)),
               lambda a, b: np.fft.irfftn(a + 1j * b)),
    "irfftn_s_axes": (lambda a, b: F.irfftn(_c(a, b), s=(5, 4), axes=(1, 0), norm="forward"),
                      _two_real((3, 4)),
                      lambda a, b: np.fft.irfftn(a + 1j * b, s=(5, 4), axes=(1, 0),
                                                 norm="forward")),
    "hfft": (lambda a, b: F.hfft(_c(a, b)), _two_real((5,)), lambda a, b: np.fft.hfft(a + 1j * b)),
    "hfft_odd_ortho": (lambda a, b: F.hfft(_c(a, b), n=7, norm="ortho"), _two_real((2, 4)),
                       lambda a, b: np.fft.hfft(a + 1j * b, n=7, norm="ortho")),
    "ihfft": (lambda x: _parts(F.ihfft(x)), _one_real((6,)), np.fft.ihfft),
    "ihfft_forward": (lambda x: _parts(F.ihfft(x, n=5, norm="forward")), _one_real((2, 6)),
                      lambda x: np.fft.ihfft(x, n=5, norm="forward")),
    "fftshift": (lambda x: F.fftshift(x), _one_real((3, 5)), np.fft.fftshift),
    "fftshift_axes": (lambda x: F.fftshift(x, axes=(0,)), _one_real((5, 4)),
                      lambda x: np.fft.fftshift(x, axes=(0,))),
    "ifftshift": (lambda x: F.ifftshift(x, axes=-1), _one_real((3, 5)),
                  lambda x: np.fft.ifftshift(x, axes=-1)),
    "roundtrip": (lambda x: F.irfft(F.rfft(x) * F.rfft(x), n=6), _one_real((6,)),
                  lambda x: np.fft.irfft(np.fft.rfft(x) ** 2, n=6)),
}

FD_EPS = 1e-6


@pytest.mark.parametrize("name", sorted(CASES))
def test_forward(backend, name):
    fn, make, ref = CASES[name]
    args = make(np.random.default_rng(1))
    got = numeric(fn, backend, args)
    want = ref(*args)
    if np.iscomplexobj(want):
        got = [got[0] + 1j * got[1]]
    np.testing.assert_allclose(got[0], want, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name", sorted(CASES))
def test_vjp_and_jvp_against_finite_differences(backend, name):
    fn, make, _ = CASES[name]
    rng = np.random.default_rng(2)
    check_vjp_jvp_by_differences(fn, backend, make(rng), rng, eps=FD_EPS, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("name", sorted(CASES))
def test_vmap_against_loop(backend, name):
    fn, make, _ = CASES[name]
    rng = np.random.default_rng(3)
    per = [make(rng) for _ in range(3)]
    want = [np.stack(o) for o in zip(*[numeric(fn, backend, p) for p in per])]
    # the batch axis last, so that every axis parameter has to be shifted
    stacked = [np.stack([p[i] for p in per], axis=-1) for i in range(len(per[0]))]
    got = flat_outputs(vmap(fn, in_dims=-1)(*[backend(s) for s in stacked]))
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12)


# ---------------------------------------------------------------------------------------------
# Chains real -> complex -> real loss, against torch.func (torch's complex convention)

def _chains(m, fft):
    w = m.asarray(np.linspace(0.5, 1.5, 6))
    return {
        "abs2_fft": lambda x: m.sum(m.abs(fft.fft(x)) ** 2),
        "real_ifft_fft_w": lambda x: m.sum(m.real(fft.ifft(fft.fft(x) * w))),
        "abs_fft_ortho_pad": lambda x: m.sum(m.abs(fft.fft(x, n=9, norm="ortho")) ** 3),
        "rfft_forward": lambda x: m.sum(m.abs(fft.rfft(x, norm="forward")) ** 2
                                        + m.real(fft.rfft(x, norm="forward"))),
        "irfft_of_rfft": lambda x: m.sum(fft.irfft(fft.rfft(x) * w[:4], n=6) ** 3),
        "irfft_odd": lambda x: m.sum(fft.irfft(fft.rfft(x, n=5) * 1j, n=5) * w[:5]),
        "hfft_ihfft": lambda x: m.sum(fft.hfft(fft.ihfft(x) ** 2, n=6) * w),
        "fftn_rfftn": lambda x: (m.sum(m.abs(fft.fftn(fft.ifftn(x * w) * w, norm="ortho")))
                                 + m.sum(m.abs(fft.rfftn(x * w, s=(8,))) ** 2)),
        "irfftn": lambda x: m.sum(fft.irfftn(fft.rfftn(x) ** 2, s=(6,)) ** 2),
        "shift": lambda x: m.sum(fft.fftshift(x) * w + fft.ifftshift(x) * w ** 2),
    }


class _AdM:
    sum = staticmethod(ad.sum)
    abs = staticmethod(ad.abs)
    real = staticmethod(ad.real)

    @staticmethod
    def asarray(a):
        return a


class _AdTorchM(_AdM):
    """arrayad's functions with torch constants (for torch tensor inputs)."""
    @staticmethod
    def asarray(a):
        import torch
        return torch.tensor(a)


def _torch_m():
    import torch

    class M:
        sum = staticmethod(torch.sum)
        abs = staticmethod(torch.abs)
        real = staticmethod(torch.real)
        asarray = staticmethod(torch.tensor)
    return M


CHAINS = sorted(_chains(_AdM, F))


@pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed")
@pytest.mark.parametrize("name", CHAINS)
def test_chain_against_torch_func(name):
    import torch
    rng = np.random.default_rng(4)
    x = rng.standard_normal(6)
    v = rng.standard_normal(6)
    tf = _chains(_torch_m(), torch.fft)[name]
    want_g = torch.func.grad(tf)(torch.tensor(x)).numpy()
    _, want_t = torch.func.jvp(tf, (torch.tensor(x),), (torch.tensor(v),))
    # through arrayad on NumPy and on torch tensors (the constant w is NumPy or torch alike)
    fa = _chains(_AdM, F)[name]
    np.testing.assert_allclose(to_numpy(grad(fa)(x)), want_g, rtol=1e-9, atol=1e-10)
    _, got_t = jvp(fa, (x,), (v,))
    np.testing.assert_allclose(to_numpy(got_t), want_t.numpy(), rtol=1e-9, atol=1e-10)
    fa_t = _chains(_AdTorchM, F)[name]
    np.testing.assert_allclose(to_numpy(grad(fa_t)(torch.tensor(x))), want_g, rtol=1e-9,
                               atol=1e-10)


@pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed")
def test_complex_input_grad_against_torch_func():
    import torch
    rng = np.random.default_rng(5)
    z = rng.standard_normal((2, 6)) + 1j * rng.standard_normal((2, 6))

    def f(m, fft):
        return lambda z: (m.sum(m.abs(fft.fft(z, n=8, norm="ortho")) ** 2 * 0.5)
                          + m.sum(fft.irfft(z, n=9, norm="forward") ** 2)
                          + m.sum(m.real(fft.ifftn(z, s=(3, 4)) * 2.0))
                          + m.sum(fft.hfft(z, n=7) ** 2))

    want = torch.func.grad(f(_torch_m(), torch.fft))(torch.tensor(z)).numpy()
    got = to_numpy(grad(f(_AdM, F))(z))
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-10)


def test_frequencies():
    np.testing.assert_allclose(to_numpy(F.fftfreq(7, d=0.5)), np.fft.fftfreq(7, d=0.5))
    np.testing.assert_allclose(to_numpy(F.fftfreq(8)), np.fft.fftfreq(8))
    np.testing.assert_allclose(to_numpy(F.rfftfreq(9, d=2.0)), np.fft.rfftfreq(9, d=2.0))
    assert F.rfftfreq(4, dtype=ad.float32).dtype == ad.float32


def test_errors():
    with pytest.raises(ValueError):
        F.fft(np.ones(4), norm="bogus")
    with pytest.raises(TypeError):
        F.rfft(np.ones(4, dtype=complex))


@pytest.mark.parametrize("which", ["fft", "rfft_irfft", "fftn"])
def test_hessian_and_vmap_of_grad(backend, which):
    from arrayad.func import hessian
    rng = np.random.default_rng(6)
    x = rng.standard_normal(6)

    def f(x):
        if which == "fft":
            return ad.sum(ad.abs(F.fft(x, n=8, norm="ortho")) ** 3)
        if which == "rfft_irfft":
            return ad.sum(F.irfft(F.rfft(x, n=5) ** 2, n=7, norm="forward") ** 3)
        return ad.sum(ad.real(F.ifftn(F.fftn(x, s=(4,)) ** 2, s=(6,))) ** 2)

    g = grad(f)
    h = to_numpy(hessian(f)(backend(x)))
    fd = np.empty((6, 6))
    for k in range(6):
        e = np.zeros(6)
        e[k] = 1e-5
        fd[:, k] = (to_numpy(g(backend(x + e))) - to_numpy(g(backend(x - e)))) / 2e-5
    np.testing.assert_allclose(h, fd, rtol=1e-5, atol=1e-6)
    xs = rng.standard_normal((3, 6))
    got = to_numpy(vmap(g)(backend(xs)))
    want = np.stack([to_numpy(g(backend(r))) for r in xs])
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
