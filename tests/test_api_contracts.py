"""Small contracts of the namespace that used to give a wrong value silently (each checked
against torch's or NumPy's behaviour, or refused with the fix)."""

import numpy as np
import pytest

import arrayad as ad
from arrayad.func import grad, vmap

from conftest import BACKENDS, Backend, to_numpy


def test_a_shape_must_be_integers():
    with pytest.raises(TypeError, match="tuple of ints.*int\\(\\)"):
        ad.zeros((2.5,))          # made 2 elements
    with pytest.raises(TypeError, match="tuple of ints"):
        ad.randn(2.0, 3)
    assert ad.zeros((np.int64(2), 3)).shape == (2, 3)   # integers of any kind


@pytest.mark.parametrize("draw", [ad.randn, ad.rand])
def test_random_draws_refuse_integer_dtypes(draw):
    with pytest.raises(TypeError, match="floating.*astype"):
        draw(3, dtype=ad.int64)   # gave zeros: the samples truncated


@pytest.mark.parametrize("name", [b for b in ("numpy", "array_api_strict", "torch") if b in BACKENDS])
def test_complex_samples_have_both_parts(name):
    # torch: a complex normal sample has variance 1 in all (1/2 per part); uniform parts in [0, 1)
    device = Backend(name).adapter.default_device()
    ad.manual_seed(0)
    z = to_numpy(ad.randn(20000, dtype=ad.complex128, device=device))
    assert abs(z.real.var() - 0.5) < 0.03 and abs(z.imag.var() - 0.5) < 0.03
    assert abs(np.mean(z.real * z.imag)) < 0.03
    u = to_numpy(ad.rand(20000, dtype=ad.complex64, device=device))
    assert u.dtype == np.complex64
    assert 0 <= u.imag.min() and u.imag.max() < 1 and abs(u.imag.mean() - 0.5) < 0.02


def test_real_and_imag_are_properties_as_in_torch():
    torch = pytest.importorskip("torch")
    z = np.array([1 + 2j, 3 - 4j])
    assert np.array_equal(to_numpy(ad.asarray(z).imag), torch.tensor(z).imag.numpy())
    assert np.array_equal(to_numpy(ad.asarray(z).real), torch.tensor(z).real.numpy())
    # under transforms too: d/dx Re(sin(x)) = cos(x), a method object before
    assert grad(lambda x: ad.sin(x).real)(np.asarray(1.0)) == pytest.approx(np.cos(1.0))
    np.testing.assert_array_equal(vmap(lambda v: v.imag)(z), [2.0, -4.0])


def test_gradient_of_imag_is_an_array():
    g = grad(ad.imag)(np.asarray(3 + 4j))
    assert isinstance(g, np.ndarray) and g.shape == () and g == 1j   # torch: tensor(0.+1.j)


def test_meshgrid_refuses_two_backends():
    torch = pytest.importorskip("torch")
    with pytest.raises(TypeError, match="meshgrid: cannot mix.*numpy and torch"):
        ad.meshgrid(np.ones(2), torch.ones(3, dtype=torch.float64))


@pytest.mark.parametrize("name", [b for b in ("array_api_strict", "torch") if b in BACKENDS])
def test_python_numbers_on_a_non_numpy_default_backend(name):
    # torch.sin(1.0) raises; the default backend's array of the number is meant
    with ad.backend(name):
        out = ad.sin(1.0)
        assert ad.backends.backend_of(out).name == name
        assert float(out) == pytest.approx(np.sin(1.0), rel=1e-6)


def test_dot_takes_vectors_only():
    # torch.dot refuses matrices; summing every product of broadcast matrices is no dot
    with pytest.raises(ValueError, match="dot: 1-d arrays expected.*matmul"):
        ad.dot(np.ones((2, 2)), np.ones((2, 2)))
    with pytest.raises(ValueError, match="different lengths"):
        ad.dot(np.ones(2), np.ones(3))
    np.testing.assert_allclose(vmap(ad.dot)(np.ones((3, 2)), np.full((3, 2), 2.0)), [4.0] * 3)


def test_fftn_refuses_more_sizes_than_axes():
    # the extra entry of s was dropped silently
    with pytest.raises(ValueError, match="s and axes must have the same length"):
        ad.fft.fftn(np.ones((4, 4)), s=(4, 4, 4), axes=(0, 1))


@pytest.mark.parametrize("name", [b for b in ("numpy", "array_api_strict", "torch") if b in BACKENDS])
def test_fft_frequencies_are_made_on_the_inputs_backend(name):
    # like arange: inside a transform, on the inputs' backend (strict refused the NumPy constant)
    be = Backend(name)
    x = be(np.arange(4.0))
    g = grad(lambda v: ad.sum(v * ad.fft.fftfreq(4, dtype=v.dtype)))(x)
    np.testing.assert_allclose(to_numpy(g), np.fft.fftfreq(4))
    g = grad(lambda v: ad.sum(v[:3] * ad.fft.rfftfreq(4, d=0.5, dtype=v.dtype)))(x)
    np.testing.assert_allclose(to_numpy(g), np.r_[np.fft.rfftfreq(4, d=0.5), 0.0])


@pytest.mark.parametrize("n", [4.5, 0, -1, True])
def test_fft_frequencies_need_a_positive_integer(n):
    with pytest.raises(ValueError, match="fftfreq: n must be a positive integer"):
        ad.fft.fftfreq(n)
    with pytest.raises(TypeError, match="real floating"):
        ad.fft.rfftfreq(4, dtype=ad.int64)


def test_std_at_zero_spread_has_torchs_zero_gradient():
    torch = pytest.importorskip("torch")
    for data in ([2.0, 2.0, 2.0], [1.0, 2.0, 4.0]):
        t = torch.tensor(data, dtype=torch.float64, requires_grad=True)
        t.std(unbiased=False).backward()
        np.testing.assert_allclose(grad(ad.std)(np.array(data)), t.grad.numpy(), atol=1e-15)


def test_item_assignment_on_jax_inputs():
    # JAX arrays are immutable: arrayad's functional updates go through JAX's .at[]
    jnp = pytest.importorskip("jax.numpy")

    def f(x):
        y = x * 1.0
        y[0] = 0.0
        y[x > 2.5] = 2.0
        return ad.sum(y * x)

    x = np.array([1.0, 2.0, 3.0])
    for out_jax, out_np in [(grad(f)(jnp.asarray(x)), grad(f)(x)),
                            (vmap(grad(f))(jnp.asarray(np.stack([x, x + 1]))),
                             vmap(grad(f))(np.stack([x, x + 1]))),
                            (grad(lambda v: ad.sum(v[jnp.asarray([0, 0, 2])] ** 2))(jnp.asarray(x)),
                             grad(lambda v: ad.sum(v[np.array([0, 0, 2])] ** 2))(x))]:
        np.testing.assert_allclose(np.asarray(out_jax), out_np, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(out_np), [4.0, 0.0, 6.0])   # d/dx0 of 2 x0^2: repeats add
    t = ad.asarray(jnp.asarray(x))
    t[1] = 5.0
    np.testing.assert_allclose(to_numpy(t), [1.0, 5.0, 3.0])


@pytest.mark.parametrize("call, error, message", [
    (lambda: ad.stack([]), ValueError, "stack: expected a non-empty sequence"),
    (lambda: ad.concat([]), ValueError, "concat: expected a non-empty sequence"),
    (lambda: ad.unstack(ad.asarray(1.0)), IndexError, "unstack: x is 0-d"),
    (lambda: ad.linalg.vector_norm(ad.ones(3), ord="fro"), ValueError, "matrix_norm's ord='fro'"),
    (lambda: ad.tensordot(ad.ones((2, 3)), ad.ones((4, 5)), axes=1), ValueError,
     r"tensordot: the contracted axes must pair up.*\(2, 3\) axes \(1,\).*\(4, 5\) axes \(0,\)"),
])
def test_clear_errors_for_empty_or_mismatched_arguments(call, error, message):
    # (they were bare IndexErrors, "str is not an array", "cannot reshape array of size 20")
    with pytest.raises(error, match=message):
        call()


def test_public_signatures_show_no_private_keywords_and_star_imports_keep_builtins():
    import inspect
    from arrayad import func as F
    assert list(inspect.signature(F.while_loop).parameters) == ["cond_fun", "body_fun",
                                                                "init_val", "checkpoint"]
    namespace = {}
    exec("from arrayad.func import *", namespace)
    assert "map" not in namespace and "grad" in namespace   # the builtin map stays visible
    np.testing.assert_array_equal(F.map(lambda x: x * 2.0, np.arange(3.0)), [0.0, 2.0, 4.0])
    # fori_loop with array bounds runs as a while_loop: its errors still name fori_loop
    with pytest.raises(TypeError, match=r"^fori_loop"):
        F.fori_loop(0, np.asarray(3), lambda i, v: (v, v), np.array(1.0))
