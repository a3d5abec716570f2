"""The examples of the torch.func tour (grad, vmap, per-sample gradients, vjp, jvp,
jacrev/jacfwd/hessian), verbatim but for the imports (``import arrayad as torch``), with
independent checks of the numbers it prints (NumPy formulas, or torch.func itself).

Every example runs with each backend as the default one (``arrayad.backend``): ``torch.randn``
and ``torch.ones`` then make that backend's arrays, and the tour's text stays as it is."""
import numpy as np
import pytest

import arrayad as torch
from arrayad.func import grad, hessian, jacfwd, jacrev, jvp, vjp, vmap

from conftest import BACKENDS, Backend, to_numpy


@pytest.fixture(autouse=True, params=BACKENDS)
def default_backend(request):
    with torch.backend(request.param):
        yield Backend(request.param)


def assert_close(actual, desired, **tol):
    """NumPy's assert_allclose on the result in NumPy; float32 results (torch's randn) to float32
    precision, as the NumPy reference rounds differently from the backend's kernels."""
    actual = to_numpy(actual)
    if actual.dtype == np.float32:
        tol = {"rtol": 1e-5, "atol": 1e-6}
    np.testing.assert_allclose(actual, desired, **tol)


def _on_default_backend(t):
    assert torch.backends.backend_of(torch.asarray(t)).name == \
        torch.backends.default_backend().name


def test_grad_and_second_order():
    x = torch.randn([])
    _on_default_backend(x)
    cos_x = grad(lambda x: torch.sin(x))(x)
    _on_default_backend(cos_x)
    assert torch.allclose(cos_x, x.cos())

    # Second-order gradients
    neg_sin_x = grad(grad(lambda x: torch.sin(x)))(x)
    assert torch.allclose(neg_sin_x, -x.sin())


def test_vmap_model_over_closure_that_requires_grad():
    batch_size, feature_size = 3, 5
    weights = torch.randn(feature_size, requires_grad=True)

    def model(feature_vec):
        # Very simple linear model with activation
        assert feature_vec.dim() == 1
        return feature_vec.dot(weights).relu()

    examples = torch.randn(batch_size, feature_size)
    result = vmap(model)(examples)

    w, ex = weights.detach().numpy(), examples.numpy()
    assert_close(result.detach().numpy(), np.maximum(ex @ w, 0))
    # the eager tape composes with vmap: the batched result backpropagates into weights
    result.sum().backward()
    assert_close(weights.grad.numpy(), ((ex @ w > 0)[:, None] * ex).sum(0))


def test_per_sample_gradients():
    batch_size, feature_size = 3, 5

    def model(weights, feature_vec):
        # Very simple linear model with activation
        assert feature_vec.dim() == 1
        return feature_vec.dot(weights).relu()

    def compute_loss(weights, example, target):
        y = model(weights, example)
        return ((y - target) ** 2).mean()  # MSELoss

    weights = torch.randn(feature_size, requires_grad=True)
    examples = torch.randn(batch_size, feature_size)
    targets = torch.randn(batch_size)
    inputs = (weights, examples, targets)
    grad_weight_per_example = vmap(grad(compute_loss), in_dims=(None, 0, 0))(*inputs)

    w, ex, t = weights.detach().numpy(), examples.numpy(), targets.numpy()
    y = np.maximum(ex @ w, 0)
    expected = (2 * (y - t) * (ex @ w > 0))[:, None] * ex
    assert_close(grad_weight_per_example.detach().numpy(), expected, atol=1e-12)


def test_vjp():
    inputs = torch.randn(3)
    func = torch.sin
    cotangents = (torch.randn(3),)

    outputs, vjp_fn = vjp(func, inputs); vjps = vjp_fn(*cotangents)  # noqa: E702

    assert isinstance(vjps, tuple) and len(vjps) == 1
    assert_close(vjps[0].numpy(), np.cos(inputs.numpy()) * cotangents[0].numpy())
    assert_close(outputs.numpy(), np.sin(inputs.numpy()))


def test_jvp():
    x = torch.randn(5)
    y = torch.randn(5)
    f = lambda x, y: (x * y)  # noqa: E731
    _, out_tangent = jvp(f, (x, y), (torch.ones(5), torch.ones(5)))
    assert torch.allclose(out_tangent, x + y)


def test_jacrev_jacfwd_hessian():
    x = torch.randn(5)
    jacobian = jacrev(torch.sin)(x)
    expected = torch.diag(torch.cos(x))
    assert torch.allclose(jacobian, expected)

    x = torch.randn(64, 5)
    jacobian = vmap(jacrev(torch.sin))(x)
    assert jacobian.shape == (64, 5, 5)
    assert_close(jacobian.numpy()[7], np.diag(np.cos(x.numpy()[7])))

    x = torch.randn(5)
    jacobian = jacfwd(torch.sin)(x)
    expected = torch.diag(torch.cos(x))
    assert torch.allclose(jacobian, expected)

    def f(x):
        return x.sin().sum()

    x = torch.randn(5)
    hessian0 = jacrev(jacrev(f))(x)
    hessian1 = jacfwd(jacrev(f))(x)
    hess = hessian(f)(x)
    expected = np.diag(-np.sin(x.numpy()))
    for h in (hessian0, hessian1, hess):
        assert_close(h.numpy(), expected, atol=1e-12)


def test_matches_torch_func(default_backend):
    real_torch = pytest.importorskip("torch")
    x_np = np.random.default_rng(1).standard_normal((4, 5))
    x = default_backend(x_np)

    def f_ad(x):
        return torch.sum(torch.tanh(x) ** 2, axis=-1)

    def f_t(x):
        return (real_torch.tanh(x) ** 2).sum(-1)

    ours = vmap(grad(lambda r: f_ad(r)))(x)
    theirs = real_torch.func.vmap(real_torch.func.grad(f_t))(real_torch.tensor(x_np))
    assert_close(to_numpy(ours), theirs.numpy(), rtol=1e-12)
    x0 = default_backend(x_np[0])
    ours_h = hessian(lambda r: torch.sum(torch.sin(r) * r[0]))(x0)
    theirs_h = real_torch.func.hessian(lambda r: (real_torch.sin(r) * r[0]).sum())(
        real_torch.tensor(x_np[0]))
    assert_close(to_numpy(ours_h), theirs_h.numpy(), rtol=1e-10, atol=1e-12)
