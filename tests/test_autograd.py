"""The eager tape: Tensor, backward, autograd.grad, grad modes, create_graph, and bad input.

Gradients are checked against closed-form NumPy derivatives or central differences, and against
torch's own autograd where torch is installed.
"""
import importlib.util

import numpy as np
import pytest

import arrayad as ad
from arrayad import autograd

from conftest import to_numpy
from reference import chain, chain_np, fd_grad, fd_jac  # noqa: F401

RNG = np.random.default_rng(7)
X = RNG.standard_normal(5)


def test_backward_on_every_backend(backend):
    x = backend.tensor(X, requires_grad=True)
    chain(x).backward()
    assert isinstance(x.grad, ad.Tensor)
    np.testing.assert_allclose(to_numpy(x.grad), fd_grad(chain_np, X), rtol=1e-6, atol=1e-8)


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch not installed")
def test_backward_matches_torch():
    import torch
    xt = torch.tensor(X, requires_grad=True)
    s = torch.sin(xt) * torch.cos(xt) + torch.exp(-xt * xt)
    y = torch.tanh(s) * 2 - s / 3
    torch.log(1 + y * y).sum().backward()
    x = ad.tensor(X, requires_grad=True)
    chain(x).backward()
    np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=1e-12)


def test_grad_accumulates_and_repr():
    c = ad.tensor([1.0, 2.0, 3.0], requires_grad=True)
    (2 * c).sum().backward()
    (2 * c).sum().backward()
    np.testing.assert_array_equal(c.grad.numpy(), [4.0, 4.0, 4.0])
    x = ad.tensor([2.0, 3.0, 4.0], requires_grad=True)
    y = x * x
    assert repr(y) == "tensor([ 4.,  9., 16.], grad_fn=<MultiplyBackward>)"
    assert repr(x) == "tensor([2., 3., 4.], requires_grad=True)"
    assert repr(ad.tensor([1.3570, 1.3818])) == "tensor([1.3570, 1.3818])"
    assert y.grad_fn is not None and not y.is_leaf and x.is_leaf and x.grad_fn is None
    assert repr(ad.sin(x).sum().grad_fn) == "<SumBackward>"


def test_tensor_methods_torch_style():
    t = ad.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    assert t.dim() == 2 and t.size() == (2, 2) and t.size(0) == 2 and t.numel() == 4
    assert t.shape == (2, 2) and int(t.size) == 4
    np.testing.assert_array_equal(t.t().detach().numpy(), [[1, 3], [2, 4]])
    np.testing.assert_array_equal(t.sum(0).detach().numpy(), [4, 6])
    np.testing.assert_array_equal(t.sum(dim=1, keepdim=True).detach().numpy(), [[3], [7]])
    np.testing.assert_array_equal(t.sum(axis=1, keepdims=True).detach().numpy(), [[3], [7]])
    assert t.mean().item() == 2.5
    v = ad.tensor([1.0, -2.0])
    assert v.dot(ad.tensor([3.0, 1.0])).item() == 1.0
    np.testing.assert_array_equal(v.relu().numpy(), [1.0, 0.0])
    np.testing.assert_array_equal(ad.relu(v).numpy(), [1.0, 0.0])
    np.testing.assert_allclose(v.sin().numpy(), np.sin([1.0, -2.0]))
    assert t.detach().requires_grad is False and t.requires_grad


def test_retain_grad_and_inputs(backend):
    x = backend.tensor(X, requires_grad=True)
    w = backend.tensor(2 * X, requires_grad=True)
    h = x * w
    h.retain_grad()
    ad.sum(ad.sin(h)).backward(inputs=[x])
    np.testing.assert_allclose(to_numpy(x.grad), np.cos(X * 2 * X) * 2 * X)
    assert w.grad is None
    y = x * w
    y.retain_grad()
    ad.sum(y * y).backward()
    np.testing.assert_allclose(to_numpy(y.grad), 2 * X * 2 * X)


def test_backward_with_gradient_argument(backend):
    x = backend.tensor(X, requires_grad=True)
    v = RNG.standard_normal(5)
    ad.sin(x).backward(gradient=backend.tensor(v))
    np.testing.assert_allclose(to_numpy(x.grad), np.cos(X) * v)


def test_autograd_grad_and_double_backward(backend):
    x = backend.tensor(X, requires_grad=True)
    y = ad.sum(ad.sin(x) * x * x)
    (g,) = autograd.grad(y, x, create_graph=True)
    np.testing.assert_allclose(to_numpy(g.detach()), np.cos(X) * X * X + 2 * X * np.sin(X))
    assert x.grad is None   # autograd.grad does not accumulate
    g.sum().backward()
    h_diag_sum = -np.sin(X) * X * X + 4 * X * np.cos(X) + 2 * np.sin(X)
    np.testing.assert_allclose(to_numpy(x.grad), h_diag_sum)


def test_create_graph_through_output_reusing_rules(backend):
    # tanh/exp/sqrt rules use their output: with create_graph the output must be differentiable
    for f, d2 in [(ad.tanh, lambda x: -2 * np.tanh(x) * (1 - np.tanh(x) ** 2)),
                  (ad.exp, np.exp),
                  (ad.sqrt, lambda x: -0.25 * x ** -1.5)]:
        x = backend.tensor(np.abs(X) + 0.5, requires_grad=True)
        (g,) = autograd.grad(ad.sum(f(x)), x, create_graph=True)
        g.sum().backward()
        np.testing.assert_allclose(to_numpy(x.grad), d2(np.abs(X) + 0.5), rtol=1e-10)


def test_allow_unused_and_materialize(backend):
    x = backend.tensor(X, requires_grad=True)
    z = backend.tensor(X, requires_grad=True)
    y = ad.sum(x * 2)
    with pytest.raises(RuntimeError, match="appears to not have been used in the graph"):
        autograd.grad(y, (x, z), retain_graph=True)
    gx, gz = autograd.grad(y, (x, z), allow_unused=True, retain_graph=True)
    assert gz is None
    gx, gz = autograd.grad(y, (x, z), materialize_grads=True)
    np.testing.assert_array_equal(to_numpy(gz), np.zeros(5))


def test_grad_modes():
    x = ad.tensor(X, requires_grad=True)
    with ad.no_grad():
        y = x * 2
        assert not y.requires_grad
        with ad.enable_grad():
            assert (x * 2).requires_grad
    assert ad.is_grad_enabled()
    with ad.set_grad_enabled(False):
        assert not (x * 2).requires_grad
    assert ad.is_grad_enabled()

    @ad.no_grad()
    def f(t):
        return t * 2
    assert not f(x).requires_grad and ad.is_grad_enabled()


def test_bad_input_errors_leave_no_state(backend):
    x = backend.tensor(X, requires_grad=True)
    y = ad.sum(x * x)
    y.backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time.*"
                                           "retain_graph=True"):
        y.backward()
    with pytest.raises(RuntimeError, match="grad can be implicitly created only for scalar"):
        (x * 2).backward()
    with pytest.raises(RuntimeError, match="does not require grad and does not have a grad_fn"):
        backend.tensor(X).sum().backward()
    with pytest.raises(RuntimeError, match="floating point"):
        ad.tensor([1, 2, 3], requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad .* in-place"):
        x += 1
    with pytest.raises(RuntimeError, match="Mismatch in shape"):
        ad.sin(x).backward(gradient=backend.tensor(np.ones(3)))
    assert ad.is_grad_enabled()
    # retain_graph lets a second backward run, and accumulates
    x.grad = None
    y = ad.sum(x * x)
    y.backward(retain_graph=True)
    y.backward()
    np.testing.assert_allclose(to_numpy(x.grad), 4 * X)


def test_inplace_on_non_leaf_and_under_no_grad(backend):
    x = backend.tensor(X, requires_grad=True)
    y = x * 1.0
    y[0] = 0.0
    y += x
    ad.sum(y * y).backward()
    expected = 2 * (2 * X) * 2
    expected[0] = 2 * X[0] * 1
    np.testing.assert_allclose(to_numpy(x.grad), expected)
    with ad.no_grad():
        x -= 0.5 * x.grad   # an optimizer step
    assert x.is_leaf and x.requires_grad


def test_backends_do_not_mix():
    pytest.importorskip("array_api_strict")
    import array_api_strict as xs
    with pytest.raises(TypeError, match="numpy and array_api_strict|array_api_strict and numpy"):
        ad.tensor(X) + ad.Tensor(xs.asarray(X))


def test_default_backend_switch():
    pytest.importorskip("array_api_strict")
    with ad.backend("array_api_strict"):
        t = ad.randn(3)
        assert ad.backends.backend_of(t).name == "array_api_strict"
    assert ad.backends.backend_of(ad.randn(3)).name == "numpy"
    ad.manual_seed(0)
    a = ad.randn(4).numpy()
    ad.manual_seed(0)
    np.testing.assert_array_equal(a, ad.randn(4).numpy())


def test_tensor_of_a_numpy_array_is_a_copy_placed_as_asarray_places_it():
    data = np.asfortranarray(np.arange(6.0).reshape(2, 3))
    t = ad.tensor(data, requires_grad=True)
    assert t.requires_grad and t.is_leaf and t.dtype == ad.float64
    data[0, 0] = 100.0   # (the caller's array and the tensor do not share memory)
    assert to_numpy(t)[0, 0] == 0.0 and to_numpy(t).flags.f_contiguous
    for bad in (np.zeros(2, np.float16), np.zeros(2, object)):
        with pytest.raises(TypeError, match="unsupported dtype"):
            ad.tensor(bad)
    # inside a transform: a constant of it; with another default backend: that backend's
    from arrayad.func import grad
    np.testing.assert_array_equal(grad(lambda x: ad.sum(x * ad.tensor(data)))(np.ones((2, 3))),
                                  data)
    sx = pytest.importorskip("array_api_strict")
    with ad.backend("array_api_strict"):
        s = ad.tensor(data)
    assert type(s._value).__module__.startswith("array_api_strict") and sx is not None
