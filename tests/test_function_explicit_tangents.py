"""autograd.Function with a jvp called with explicit tangents (``Fn.apply(x, tangent_x, ...)``
returns ``(output, tangent)``): three examples (Square, LinearTransform, ComplexOp) with the values
they must print (two results printed in the original write-up are arithmetically wrong; see
design.md), the gradients that ``res.sum().backward()`` gives through ``backward``, and the
explicit-tangent call's rule (docs/function.md) under transforms."""
import numpy as np
import pytest

import arrayad as torch
from arrayad.autograd import Function
import arrayad.func as AF
from arrayad.autograd import forward_ad

from conftest import to_numpy


# -- three Functions with an interleaved jvp -------------------------------------------------------
class Square(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x ** 2

    @staticmethod
    def backward(ctx, grad_output):
        x, = ctx.saved_tensors
        return grad_output * 2 * x

    @staticmethod
    def jvp(ctx, *inputs, **kwargs):
        x, tangent_x = inputs
        output = x ** 2
        tangent_output = 2 * x * tangent_x
        return output, tangent_output


class LinearTransform(Function):
    @staticmethod
    def forward(ctx, x, weight, bias):
        ctx.save_for_backward(x, weight, bias)
        return torch.matmul(x, weight) + bias

    @staticmethod
    def backward(ctx, grad_output):
        x, weight, bias = ctx.saved_tensors
        grad_x = torch.matmul(grad_output, weight.t())
        grad_weight = torch.matmul(x.t(), grad_output)
        grad_bias = grad_output.sum(0)
        return grad_x, grad_weight, grad_bias

    @staticmethod
    def jvp(ctx, *inputs, **kwargs):
        x, tangent_x = inputs[0], inputs[1]
        weight, tangent_weight = inputs[2], inputs[3]
        bias, tangent_bias = inputs[4], inputs[5]
        output = torch.matmul(x, weight) + bias
        tangent_output = (
            torch.matmul(tangent_x, weight) +
            torch.matmul(x, tangent_weight) +
            tangent_bias
        )
        return output, tangent_output


class ComplexOp(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.sin(x) + torch.cos(x)

    @staticmethod
    def backward(ctx, grad_output):
        x, = ctx.saved_tensors
        return grad_output * (torch.cos(x) - torch.sin(x))

    @staticmethod
    def jvp(ctx, *inputs, **kwargs):
        x, tangent_x = inputs
        output = torch.sin(x) + torch.cos(x)
        tangent_output = (torch.cos(x) - torch.sin(x)) * tangent_x
        return output, tangent_output


def test_square(capsys):
    torch.manual_seed(0)
    x = torch.tensor([2.0, 3.0, 4.0], requires_grad=True)
    tangent = torch.tensor([1.0, 0.5, 2.0])
    res, tangent_res = Square.apply(x, tangent)
    print(res)
    print(tangent_res)
    assert capsys.readouterr().out == (
        "tensor([ 4.,  9., 16.], grad_fn=<SquareBackward>)\n"
        "tensor([ 4.,  3., 16.])\n")
    res.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [4.0, 6.0, 8.0])
    assert tangent_res.grad_fn is None and not tangent_res.requires_grad


def test_linear_transform(capsys):
    torch.manual_seed(0)
    x = torch.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    weight = torch.tensor([[0.5, 0.3], [0.7, 0.9]], requires_grad=True)
    bias = torch.tensor([0.1, 0.2], requires_grad=True)
    tangent_x = torch.ones_like(x)
    tangent_weight = torch.zeros_like(weight)
    tangent_bias = torch.zeros_like(bias)
    res, tangent_res = LinearTransform.apply(
        x, tangent_x,
        weight, tangent_weight,
        bias, tangent_bias
    )
    print(res)
    print(tangent_res)
    # The original write-up printed [[1.9, 2.3], [4.3, 5.3]]:
    # x @ weight + bias is [[2.0, 2.3], [4.4, 4.7]].
    assert capsys.readouterr().out == (
        "tensor([[2.0000, 2.3000],\n"
        "        [4.4000, 4.7000]], grad_fn=<LinearTransformBackward>)\n"
        "tensor([[1.2000, 1.2000],\n"
        "        [1.2000, 1.2000]])\n")
    res.sum().backward()
    X, W = np.array([[1.0, 2.0], [3.0, 4.0]]), np.array([[0.5, 0.3], [0.7, 0.9]])
    np.testing.assert_allclose(x.grad.numpy(), np.ones((2, 2)) @ W.T)
    np.testing.assert_allclose(weight.grad.numpy(), X.T @ np.ones((2, 2)))
    np.testing.assert_allclose(bias.grad.numpy(), [2.0, 2.0])


def test_complex_op(capsys):
    torch.manual_seed(0)
    x = torch.tensor([0.5, 1.0, 1.5], requires_grad=True)
    tangent = torch.tensor([0.1, 0.2, 0.3])
    res, tangent_res = ComplexOp.apply(x, tangent)
    print(res)
    print(tangent_res)
    # The original write-up printed [0.0836, 0.0906, 0.1199] for the tangent (and 1.0688 for the
    # last output).
    assert capsys.readouterr().out == (
        "tensor([1.3570, 1.3818, 1.0682], grad_fn=<ComplexOpBackward>)\n"
        "tensor([ 0.0398, -0.0602, -0.2780])\n")
    X = np.array([0.5, 1.0, 1.5])
    np.testing.assert_allclose(res.detach().numpy(), np.sin(X) + np.cos(X))
    np.testing.assert_allclose(tangent_res.numpy(), (np.cos(X) - np.sin(X)) * [0.1, 0.2, 0.3])
    res.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.cos(X) - np.sin(X))


# -- the same Functions under the transforms -------------------------------------------------------
X = np.array([0.5, 1.0, 1.5])
T = np.array([0.1, 0.2, 0.3])


def test_interleaved_jvp_under_func_jvp_and_forward_ad(backend):
    # jvp(ctx, *inputs, **kwargs) is the interleaved style: func.jvp calls it with
    # (x, tangent_x) and takes the tangent from the (output, tangent) it returns.
    x, tx = backend(X), backend(T)
    out, t = AF.jvp(ComplexOp.apply, (x,), (tx,))
    np.testing.assert_allclose(to_numpy(out), np.sin(X) + np.cos(X))
    np.testing.assert_allclose(to_numpy(t), (np.cos(X) - np.sin(X)) * T)
    W = np.array([[0.5, 0.3, 0.1], [0.7, 0.9, -0.2], [0.1, 0.0, 1.0]])
    b = backend([0.1, 0.2, 0.3])
    _, t = AF.jvp(lambda x, w: LinearTransform.apply(x, w, b), (backend(X[None]), backend(W)),
                  (backend(T[None]), backend(W * 0.5)))
    np.testing.assert_allclose(to_numpy(t), T[None] @ W + X[None] @ (W * 0.5))
    np.testing.assert_allclose(to_numpy(AF.jacfwd(Square.apply)(x)), np.diag(2 * X))
    with forward_ad.dual_level():
        d = forward_ad.make_dual(backend.tensor(X), backend.tensor(T))
        _, t = forward_ad.unpack_dual(Square.apply(d))
    np.testing.assert_allclose(to_numpy(t), 2 * X * T)


def test_interleaved_jvp_functions_under_reverse_transforms(backend):
    x = backend(X)
    np.testing.assert_allclose(to_numpy(AF.grad(lambda x: torch.sum(ComplexOp.apply(x)))(x)),
                               np.cos(X) - np.sin(X))
    np.testing.assert_allclose(to_numpy(AF.hessian(lambda x: torch.sum(Square.apply(x)))(x)),
                               2 * np.eye(3))
    np.testing.assert_allclose(to_numpy(AF.grad(lambda x: torch.sum(AF.grad(
        lambda y: torch.sum(ComplexOp.apply(y)))(x)))(x)), -np.sin(X) - np.cos(X))


def test_explicit_tangent_call_under_transforms(backend):
    # Inside a transform the tangent of the explicit call stays differentiable:
    # d/dx sum(2 x t) = 2 t; and the output's derivative goes through backward.
    x, tx = backend(X), backend(T)
    np.testing.assert_allclose(
        to_numpy(AF.grad(lambda x: torch.sum(Square.apply(x, tx)[1]))(x)), 2 * T)
    np.testing.assert_allclose(
        to_numpy(AF.grad(lambda x: torch.sum(Square.apply(x, tx)[0]))(x)), 2 * X)

    class SquareV(Square):
        generate_vmap_rule = True

    out, t = AF.vmap(lambda x, t: tuple(SquareV.apply(x, t)))(backend(np.stack([X, 2 * X])),
                                                               backend(np.stack([T, T])))
    np.testing.assert_allclose(to_numpy(out), [X ** 2, 4 * X ** 2])
    np.testing.assert_allclose(to_numpy(t), [2 * X * T, 4 * X * T])
    with pytest.raises(RuntimeError, match="does not have vmap support"):
        AF.vmap(lambda x, t: tuple(Square.apply(x, t)))(backend(np.stack([X, X])),
                                                        backend(np.stack([T, T])))


class TorchStyle(Function):
    """jvp in torch's convention (tangents only, primals from ctx)."""

    @staticmethod
    def forward(ctx, x, k):
        ctx.save_for_forward(x)
        ctx.k = k
        return x ** 3 * k

    @staticmethod
    def backward(ctx, g):
        raise AssertionError("not used here")

    @staticmethod
    def jvp(ctx, tx, tk):
        x, = ctx.saved_tensors
        return 3 * x ** 2 * tx * ctx.k


def test_explicit_tangent_call_with_torch_style_jvp_and_a_constant():
    x = torch.tensor(X, requires_grad=True)
    out, t = TorchStyle.apply(x, torch.tensor(T), 2.0, None)
    np.testing.assert_allclose(out.detach().numpy(), 2 * X ** 3)
    np.testing.assert_allclose(t.numpy(), 6 * X ** 2 * T)
    assert repr(out.grad_fn) == "<TorchStyleBackward>"
    with pytest.raises(TypeError, match="must be None"):
        TorchStyle.apply(x, torch.tensor(T), 2.0, 1.0)
    with pytest.raises(RuntimeError, match="tangent of argument 0 has shape"):
        Square.apply(x, torch.tensor([1.0, 2.0]))


class Interleaved(Function):
    """A jvp with named interleaved parameters (2n of them) is the interleaved style too."""

    @staticmethod
    def forward(ctx, x):
        return torch.exp(x)

    @staticmethod
    def jvp(ctx, x, tx):
        y = torch.exp(x)
        return y, y * tx


class Declared(Function):
    jvp_style = "tangents"

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_forward(x)
        return torch.exp(x)

    @staticmethod
    def jvp(ctx, *inputs, **kwargs):
        x, = ctx.saved_tensors
        return torch.exp(x) * inputs[0]


def test_jvp_style_detection(backend):
    for cls in (Interleaved, Declared):
        _, t = AF.jvp(cls.apply, (backend(X),), (backend(T),))
        np.testing.assert_allclose(to_numpy(t), np.exp(X) * T)

    class BadReturn(Function):
        jvp_style = "interleaved"

        @staticmethod
        def forward(ctx, x):
            return x

        @staticmethod
        def jvp(ctx, *inputs):
            return inputs[1]

    with pytest.raises(RuntimeError, match="must return \\(output, tangent_output\\)"):
        AF.jvp(BadReturn.apply, (backend(X),), (backend(T),))
