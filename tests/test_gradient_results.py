"""Gradients handed to the caller are arrays the caller owns (writable, not a broadcast view),
and what an autograd.Function's backward returns is cast like torch casts it."""

import numpy as np
import pytest

import arrayad as ad
from arrayad.func import grad, vjp


@pytest.mark.parametrize("f", [lambda v: ad.sum(v), lambda v: ad.mean(v),
                               lambda v: ad.sum(v * 2.0)], ids=["sum", "mean", "scaled"])
def test_grad_results_are_writable(f):
    x = np.array([1.0, 2.0, 3.0])
    g = grad(f)(x)
    before = g.copy()
    g *= 0.5      # an optimizer step in place, as with torch.func's results
    np.testing.assert_allclose(g, before * 0.5)
    g2 = vjp(f, x)[1](np.asarray(1.0))[0]
    g2[0] = 7.0
    assert g2[0] == 7.0


def test_leaf_grad_and_autograd_grad_own_their_data():
    t = ad.tensor([1.0, 2.0, 3.0], requires_grad=True)
    ad.sum(t).backward()
    data = t.grad.numpy()
    data[0] = 5.0               # writes into the caller's own buffer
    assert t.grad.numpy()[0] == 5.0
    g = ad.autograd.grad(ad.mean(t), t)[0]
    g.numpy()[1] = 3.0
    assert g.numpy()[1] == 3.0


def test_torch_results_are_not_expanded_views():
    torch = pytest.importorskip("torch")
    g = grad(lambda v: ad.sum(v))(torch.tensor([1.0, 2.0]))
    g.mul_(0.5)     # an expanded tensor refuses this
    assert g.tolist() == [0.5, 0.5]


def _function_returning(make):
    class F(ad.autograd.Function):
        @staticmethod
        def forward(x):
            return x * 2

        @staticmethod
        def setup_context(ctx, inputs, output):
            pass

        @staticmethod
        def backward(ctx, g):
            return make(g)
    return F


@pytest.mark.parametrize("make, expected", [
    (lambda g: ad.astype(g * 3, ad.float32), 3.0),
    (lambda g: ad.astype(g * 2, ad.int64), 2.0),
], ids=["float32", "int64"])
def test_function_backward_result_is_cast_to_the_input_dtype(make, expected):
    F = _function_returning(make)
    x = ad.tensor([1.0, 2.0, 3.0], requires_grad=True)
    ad.sum(F.apply(x)).backward()
    assert x.grad.dtype == ad.float64
    np.testing.assert_array_equal(x.grad.numpy(), [expected] * 3)
    g = grad(lambda v: ad.sum(F.apply(v)))(np.array([1.0, 2.0, 3.0]))
    assert g.dtype == np.float64
    np.testing.assert_array_equal(g, [expected] * 3)


def test_function_backward_of_a_complex_gradient_for_a_real_input_is_refused():
    # (torch refuses it too; keeping the real part silently would drop the imaginary one)
    F = _function_returning(lambda g: g * (2 + 5j))
    x = ad.tensor([1.0, 2.0, 3.0], requires_grad=True)
    with pytest.raises(TypeError, match="FBackward returned a complex128 gradient at index 0 "
                                        "for a real input"):
        ad.sum(F.apply(x)).backward()
    assert x.grad is None


def test_function_backward_on_another_backend_is_refused():
    torch = pytest.importorskip("torch")
    F = _function_returning(lambda g: torch.ones(3, dtype=torch.float64))
    x = ad.tensor([1.0, 2.0, 3.0], requires_grad=True)
    with pytest.raises(TypeError, match="FBackward returned a gradient at index 0 on the torch "
                                        "backend for an input on numpy"):
        ad.sum(F.apply(x)).backward()
    assert x.grad is None
