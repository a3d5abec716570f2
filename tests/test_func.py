"""arrayad.func: the transforms, their nestings, pytrees, errors and state hygiene.

Every derivative is checked against central finite differences of a NumPy reference (``fd_*``),
or against torch.func where torch is installed.
"""
import collections
import dataclasses

import numpy as np
import pytest

import arrayad as ad
from arrayad._core import _core
from arrayad.func import (grad, grad_and_value, hessian, jacfwd, jacrev, jvp, linearize,
                          value_and_grad, vjp, vmap)

from conftest import to_numpy
from reference import chain, chain_np, fd_grad, fd_jac  # noqa: F401

RNG = np.random.default_rng(42)
X = RNG.standard_normal(4)


# -- results, on every backend ---------------------------------------------------------------------
def test_grad_native_in_native_out(backend):
    x = backend(X)
    g = grad(chain)(x)
    assert type(g) is type(x)
    np.testing.assert_allclose(to_numpy(g), fd_grad(chain_np, X), rtol=1e-6, atol=1e-8)


def test_grad_of_tensor_returns_tensor(backend):
    g = grad(chain)(backend.tensor(X))
    assert isinstance(g, ad.Tensor)
    np.testing.assert_allclose(to_numpy(g), fd_grad(chain_np, X), rtol=1e-6, atol=1e-8)


def test_jacobians_and_hessian(backend):
    W = RNG.standard_normal((3, 4))
    f = lambda x: ad.tanh(ad.matmul(backend(W), x))  # noqa: E731
    expected = fd_jac(lambda x: np.tanh(W @ x), X)
    np.testing.assert_allclose(to_numpy(jacrev(f)(backend(X))), expected, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(to_numpy(jacfwd(f)(backend(X))), expected, rtol=1e-6, atol=1e-8)
    h = hessian(chain)(backend(X))
    np.testing.assert_allclose(to_numpy(h), fd_jac(lambda x: fd_grad(chain_np, x, 1e-5), X, 1e-4),
                               rtol=1e-4, atol=1e-5)


def test_vmap_matches_loop(backend):
    xs = RNG.standard_normal((5, 4))
    out = vmap(chain)(backend(xs))
    np.testing.assert_allclose(to_numpy(out), [chain_np(r) for r in xs], rtol=1e-12)
    per_sample = vmap(grad(chain))(backend(xs))
    np.testing.assert_allclose(to_numpy(per_sample), [fd_grad(chain_np, r) for r in xs],
                               rtol=1e-6, atol=1e-8)


def test_vjp_and_jvp_agree(backend):
    u, v = RNG.standard_normal(3), RNG.standard_normal(4)
    W = RNG.standard_normal((3, 4))
    f = lambda x: ad.sin(ad.matmul(backend(W), x))  # noqa: E731
    out, vjp_fn = vjp(f, backend(X))
    (ct,) = vjp_fn(backend(u))
    _, t = jvp(f, (backend(X),), (backend(v),))
    assert np.isclose(np.dot(to_numpy(ct), v), np.dot(u, to_numpy(t)))
    np.testing.assert_allclose(to_numpy(out), np.sin(W @ X))


# -- the nestings of the contract --------------------------------------------------------------
def f_scalar(x):
    return ad.sum(ad.sin(x) * x * x)


def f_scalar_np(x):
    return np.sum(np.sin(x) * x * x)


def H_np(x):
    # d2/dx2 of sin(x) x^2, diagonal
    return np.diag(-np.sin(x) * x * x + 4 * x * np.cos(x) + 2 * np.sin(x))


NESTINGS = {
    "grad(grad)": lambda x: grad(lambda y: grad(lambda z: ad.sum(ad.sin(z)))(y)[0])(x),
    "grad(grad(grad))": lambda x: grad(grad(grad(ad.sin)))(x[0]),
    "jacfwd(jacrev)": lambda x: jacfwd(jacrev(f_scalar))(x),
    "jacrev(jacrev)": lambda x: jacrev(jacrev(f_scalar))(x),
    "jacfwd(jacfwd)": lambda x: jacfwd(jacfwd(f_scalar))(x),
    "jacrev(jacfwd)": lambda x: jacrev(jacfwd(f_scalar))(x),
    "jvp(grad)": lambda x: jvp(grad(f_scalar), (x,), (ad.ones_like(x),))[1],
    "vjp(grad)": lambda x: vjp(grad(f_scalar), x)[1](ad.ones_like(x))[0],
    "jvp(vjp)": lambda x: jvp(lambda y: vjp(f_scalar, y)[1](ad.asarray(1.0))[0], (x,),
                              (ad.ones_like(x),))[1],
    # (the cotangent is made outside any transform: on x's backend, by ones_like)
    "vjp(jvp)": lambda x: vjp(lambda y: jvp(f_scalar, (y,), (ad.ones_like(y),))[1], x)[1](
        ad.ones_like(x[0]))[0],
    "jvp(jvp)": lambda x: jvp(lambda y: jvp(f_scalar, (y,), (ad.ones_like(y),))[1], (x,),
                              (ad.ones_like(x),))[1],
    "grad(jvp)": lambda x: grad(lambda y: jvp(f_scalar, (y,), (ad.ones_like(y),))[1])(x),
}
EXPECTED = {
    "grad(grad)": lambda x: np.array([-np.sin(x[0]), 0, 0]),
    "grad(grad(grad))": lambda x: np.array(-np.cos(x[0])),
    "jvp(grad)": lambda x: H_np(x) @ np.ones_like(x),
    "vjp(grad)": lambda x: H_np(x) @ np.ones_like(x),
    "jvp(vjp)": lambda x: H_np(x) @ np.ones_like(x),
    "vjp(jvp)": lambda x: H_np(x) @ np.ones_like(x),
    "jvp(jvp)": lambda x: np.ones_like(x) @ H_np(x) @ np.ones_like(x),
    "grad(jvp)": lambda x: H_np(x) @ np.ones_like(x),
}


@pytest.mark.parametrize("name", sorted(NESTINGS))
def test_nesting(name, backend):
    x = RNG.standard_normal(3)
    got = to_numpy(NESTINGS[name](backend(x)))
    expected = EXPECTED.get(name, H_np)(x)
    np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-12)
    assert _core.stack_depth() == 0


def test_vmap_nestings(backend):
    xs_np = RNG.standard_normal((3, 4))
    xs = backend(xs_np)
    np.testing.assert_allclose(to_numpy(vmap(hessian(f_scalar))(xs)), [H_np(r) for r in xs_np],
                               atol=1e-12)
    np.testing.assert_allclose(to_numpy(vmap(jacrev(ad.sin))(xs)),
                               [np.diag(np.cos(r)) for r in xs_np])
    np.testing.assert_allclose(to_numpy(vmap(vmap(lambda v: ad.sum(v * v)))(backend(xs_np[None]))),
                               (xs_np * xs_np).sum(-1)[None])
    np.testing.assert_allclose(
        to_numpy(vmap(lambda v: jvp(ad.sin, (v,), (ad.ones_like(v),))[1])(xs)), np.cos(xs_np))
    _, vjp_fn = vjp(ad.sin, backend(xs_np[0]))
    np.testing.assert_allclose(to_numpy(vmap(vjp_fn)(backend(np.eye(4)))[0]),
                               np.diag(np.cos(xs_np[0])))
    # grad(vmap): gradient of a batched computation summed
    g = grad(lambda w: ad.sum(vmap(lambda r: ad.sum(ad.sin(r * w)))(xs)))(backend(X))
    np.testing.assert_allclose(to_numpy(g), fd_grad(lambda w: np.sum(np.sin(xs_np * w)), X),
                               rtol=1e-6, atol=1e-8)


def test_perturbation_confusion(backend):
    # d/dx [ d/dy (x * y) at y=x ] = d/dx x = 1; a level-blind implementation gives 2.
    assert grad(lambda x: grad(lambda y: x * y)(x))(2.0) == 1.0
    assert float(to_numpy(grad(lambda x: grad(lambda y: x * y)(x))(backend(2.0)))) == 1.0
    # and the vmap analogue: the inner vmap must not batch the outer value twice
    xs = backend(np.arange(3.0))
    out = vmap(lambda x: vmap(lambda y: x * y)(xs))(xs)
    np.testing.assert_allclose(to_numpy(out), np.outer(np.arange(3.0), np.arange(3.0)))
    # forward mode: jvp over x of jvp over y of x*y, tangent ones: d/dx(x) = 1
    inner = lambda x: jvp(lambda y: x * y, (x,), (ad.asarray(1.0),))[1]  # noqa: E731
    assert float(to_numpy(jvp(inner, (backend(2.0),), (backend(1.0),))[1])) == 1.0


def test_escaped_tracer_raises(backend):
    leaked = []

    def f(x):
        leaked.append(x)
        return ad.sum(x * x)

    grad(f)(backend(X))
    with pytest.raises(RuntimeError, match="escaped|after that transform returned"):
        ad.sin(leaked[0])
    vmap(lambda x: leaked.append(x) or x)(backend(np.ones((2, 3))))
    with pytest.raises(RuntimeError, match="after that transform returned"):
        leaked[-1] + 1


# -- API details ---------------------------------------------------------------------------------
def test_argnums_and_has_aux_and_value(backend):
    f = lambda x, y: (ad.sum(x * y), {"aux": x + 1})  # noqa: E731
    (gx, gy), aux = grad(f, argnums=(0, 1), has_aux=True)(backend(X), backend(2 * X))
    np.testing.assert_allclose(to_numpy(gx), 2 * X)
    np.testing.assert_allclose(to_numpy(gy), X)
    np.testing.assert_allclose(to_numpy(aux["aux"]), X + 1)
    g, (value, aux) = grad_and_value(f, argnums=-1, has_aux=True)(backend(X), backend(2 * X))
    np.testing.assert_allclose(to_numpy(g), X)
    assert np.isclose(to_numpy(value), np.sum(2 * X * X))
    value, g = value_and_grad(lambda x: ad.sum(x * x))(backend(X))
    np.testing.assert_allclose(to_numpy(g), 2 * X)


def test_one_array_argument(backend):
    # grad(f)(x) with x one array skips the pytree work: the same results and structure as
    # any other call (closed forms: d sum(x^3) = 3 x^2, d^2 x^3 = 6 x)
    x = backend(X)
    cube = lambda x: ad.sum(x ** 3)  # noqa: E731
    np.testing.assert_allclose(to_numpy(grad(cube, argnums=-1)(x)), 3 * X ** 2)
    (g,) = grad(cube, argnums=(0,))(x)
    np.testing.assert_allclose(to_numpy(g), 3 * X ** 2)
    g, aux = grad(lambda x: (cube(x), x.shape), has_aux=True)(x)
    np.testing.assert_allclose(to_numpy(g), 3 * X ** 2)
    assert tuple(aux) == (4,)
    d2 = grad(lambda a: grad(lambda b: b ** 3)(a))(backend(np.array(2.0)))
    assert np.isclose(to_numpy(d2), 12.0)
    g = grad(lambda x: ad.sum(x), argnums=0)(backend.tensor(X))
    assert isinstance(g, ad.Tensor)
    np.testing.assert_allclose(to_numpy(g), np.ones(4))

    @dataclasses.dataclass
    class Shaped:   # a registered node with a shape and a dtype is a pytree, not an array
        w: object
        shape = property(lambda self: self.w.shape)
        dtype = property(lambda self: self.w.dtype)

    ad.func.register_dataclass(Shaped)
    g = grad(lambda p: cube(p.w))(Shaped(x))
    assert isinstance(g, Shaped)
    np.testing.assert_allclose(to_numpy(g.w), 3 * X ** 2)


def test_pytree_arguments(backend):
    Point = collections.namedtuple("Point", "a b")

    @ad.func.register_dataclass
    @dataclasses.dataclass
    class Params:
        w: object
        b: object

    def loss(p, pts):
        return ad.sum(p.w * pts["x"][0].a + p.b * pts["x"][1]) + ad.sum(pts["y"] ** 2)

    p = Params(w=backend(X), b=backend(0.5 * np.ones(4)))
    pts = {"x": [Point(a=backend(2 * X), b=None), backend(3 * X)], "y": backend(X[:2])}
    gp, gpts = grad(loss, argnums=(0, 1))(p, pts)
    assert isinstance(gp, Params)
    np.testing.assert_allclose(to_numpy(gp.w), 2 * X)
    np.testing.assert_allclose(to_numpy(gp.b), 3 * X)
    np.testing.assert_allclose(to_numpy(gpts["x"][0].a), X)
    assert gpts["x"][0].b is None
    np.testing.assert_allclose(to_numpy(gpts["y"]), 2 * X[:2])


def test_unused_input_gets_zeros(backend):
    x = backend(X)
    gx, gy = grad(lambda x, y: ad.sum(x * x), argnums=(0, 1))(x, x)
    assert type(gy) is type(x)
    np.testing.assert_array_equal(to_numpy(gy), np.zeros_like(X))


def test_vmap_in_dims_out_dims_and_kwargs(backend):
    a_np, b_np = RNG.standard_normal((4, 3)), RNG.standard_normal(4)
    a, b = backend(a_np), backend(b_np)
    out = vmap(lambda x, y, scale=1.0: x * y * scale, in_dims=(1, None), out_dims=1)(a, b, scale=2.0)
    np.testing.assert_allclose(to_numpy(out), (a_np * b_np[:, None] * 2.0))
    out = vmap(lambda t: t["u"] + t["v"], in_dims=({"u": 0, "v": None},))({"u": a, "v": 1.0})
    np.testing.assert_allclose(to_numpy(out), a_np + 1.0)
    out = vmap(ad.sum, in_dims=-1)(a)
    np.testing.assert_allclose(to_numpy(out), a_np.sum(0))
    x, y = vmap(lambda r: (r, 3.0), out_dims=(0, None))(a)
    assert y == 3.0


def test_vmap_chunk_size_and_randomness(backend):
    a_np = RNG.standard_normal((7, 3))
    a = backend(a_np)
    np.testing.assert_allclose(to_numpy(vmap(ad.sin, chunk_size=3)(a)), np.sin(a_np))
    with pytest.raises(RuntimeError, match="randomness"):
        vmap(lambda r: r + ad.randn(3))(a)
    diff = to_numpy(vmap(lambda r: ad.randn(3) + 0 * r, randomness="different")(a))
    assert diff.shape == (7, 3) and not np.allclose(diff[0], diff[1])
    same = to_numpy(vmap(lambda r: ad.randn(3) + 0 * r, randomness="same")(a))
    np.testing.assert_allclose(same[0], same[1])
    ad.manual_seed(3)
    s1 = to_numpy(vmap(lambda r: ad.randn(3) + 0 * r, randomness="same", chunk_size=2)(a))
    np.testing.assert_allclose(s1[0], s1[6])
    with pytest.raises(RuntimeError, match="Only allowed values for randomness"):
        vmap(ad.sin, randomness="foo")


def test_jacobian_chunking_and_pytrees(backend):
    W = RNG.standard_normal((3, 4))
    f = lambda x: ad.tanh(ad.matmul(backend(W), x))  # noqa: E731
    x = backend(X)
    full = fd_jac(lambda x: np.tanh(W @ x), X)
    for cs in (1, 2):
        np.testing.assert_allclose(to_numpy(jacrev(f, chunk_size=cs)(x)), full, rtol=1e-6,
                                   atol=1e-8)
        np.testing.assert_allclose(to_numpy(jacfwd(f, chunk_size=cs)(x)), full, rtol=1e-6,
                                   atol=1e-8)
    jx, jy = jacrev(lambda x, y: x * y, argnums=(0, 1))(x, backend(2 * X))
    np.testing.assert_allclose(to_numpy(jx), np.diag(2 * X))
    np.testing.assert_allclose(to_numpy(jy), np.diag(X))
    outs = jacfwd(lambda x: (ad.sin(x), ad.sum(x)))(x)
    np.testing.assert_allclose(to_numpy(outs[0]), np.diag(np.cos(X)))
    np.testing.assert_allclose(to_numpy(outs[1]), np.ones(4))


@pytest.mark.parametrize("jac", [jacrev, jacfwd])
def test_chunk_size_bounds_the_memory_of_the_basis(jac):
    # The basis is made a chunk at a time: with 2000 outputs (jacrev) or inputs (jacfwd), a
    # whole identity is 2000 * 2000 * 8 bytes = 32 MB; a chunk of 10 rows is 160 KB.
    import tracemalloc
    n = 2000
    W = np.ones((n, 3)) if jac is jacrev else np.ones((3, n))
    f = lambda x: ad.matmul(W, x)  # noqa: E731
    x = np.ones(W.shape[1])
    jac(f, chunk_size=10)(x)
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        J = jac(f, chunk_size=10)(x)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    np.testing.assert_array_equal(J, W)
    assert peak < 4e6, f"peak {peak / 1e6:.1f} MB: the whole identity (32 MB) was made"


def test_linearize_evaluates_once(backend):
    calls = []

    def f(x):
        calls.append(1)
        return ad.sin(x) * x

    out, jvp_fn = linearize(f, backend(X))
    t1 = to_numpy(jvp_fn(backend(np.ones(4))))
    t2 = to_numpy(jvp_fn(backend(2 * np.ones(4))))
    assert len(calls) == 1
    np.testing.assert_allclose(to_numpy(out), np.sin(X) * X)
    np.testing.assert_allclose(t1, np.cos(X) * X + np.sin(X))
    np.testing.assert_allclose(t2, 2 * t1)


def test_inplace_writes_inside_transforms(backend):
    def f(x):
        y = ad.zeros_like(x)
        y[0] = x[1] * 2
        y[1:] = x[:-1]
        y += x
        return ad.sum(y * y)

    def f_np(x):
        y = np.zeros_like(x)
        y[0] = x[1] * 2
        y[1:] = x[:-1]
        y += x
        return np.sum(y * y)

    np.testing.assert_allclose(to_numpy(grad(f)(backend(X))), fd_grad(f_np, X), rtol=1e-6,
                               atol=1e-8)
    xs = RNG.standard_normal((3, 4))
    np.testing.assert_allclose(to_numpy(vmap(f)(backend(xs))), [f_np(r) for r in xs])
    np.testing.assert_allclose(to_numpy(vmap(grad(f))(backend(xs))),
                               [fd_grad(f_np, r) for r in xs], rtol=1e-6, atol=1e-8)


def test_control_flow(backend):
    def f(x):
        if ad.sum(x) > 0:
            return ad.sum(x * x)
        return ad.sum(-x)

    np.testing.assert_allclose(to_numpy(grad(f)(backend(np.abs(X)))), 2 * np.abs(X))
    np.testing.assert_allclose(to_numpy(grad(f)(backend(-np.abs(X)))), -np.ones(4))
    with pytest.raises(RuntimeError, match="where"):
        vmap(f)(backend(RNG.standard_normal((2, 4))))
    with pytest.raises(RuntimeError, match="item"):
        vmap(lambda x: ad.sum(x).item())(backend(RNG.standard_normal((2, 4))))


@pytest.mark.parametrize("convert", [float, int, lambda t: t.item(), np.asarray])
def test_conversions_that_drop_derivatives_raise(convert, backend):
    with pytest.raises(RuntimeError, match="derivative|drop"):
        grad(lambda x: ad.asarray(convert(ad.sum(x))) * ad.sum(x))(backend(X))
    assert _core.stack_depth() == 0 and ad.is_grad_enabled()


def test_conversions_on_concrete_tensors_work():
    t = ad.tensor([2.5])
    assert float(t) == 2.5 and int(t) == 2 and t.item() == 2.5
    np.testing.assert_array_equal(np.asarray(t), [2.5])


def test_numpy_ufuncs_route_to_arrayad(backend):
    # inside the transform x is arrayad whatever its backend: NumPy's functions route to arrayad
    g = grad(lambda x: np.sum(np.sin(x) * 2.0))(backend(X))
    np.testing.assert_allclose(to_numpy(g), 2 * np.cos(X))


def test_numpy_scalars_mix_with_every_backend(backend):
    # np.float64 subclasses float; torch takes it as a Python scalar, and so does arrayad on
    # every backend (array-api-strict itself refuses it; arrayad converts it first)
    g = grad(lambda x: ad.sum(ad.sin(x) * np.float64(2.0)))(backend(X))
    np.testing.assert_allclose(to_numpy(g), 2 * np.cos(X))
    out = ad.multiply(ad.asarray(backend(X)), np.float32(3.0)) + np.int64(1)
    np.testing.assert_allclose(to_numpy(out), 3 * X + 1)
    assert ad.backends.backend_of(out).name == backend.name


def test_backward_inside_transform_raises(backend):
    def f(x):
        t = ad.tensor([1.0], requires_grad=True)
        (t * 2).sum().backward()
        return ad.sum(x)

    with pytest.raises(RuntimeError, match="backward\\(\\) called inside"):
        grad(f)(backend(X))
    assert _core.stack_depth() == 0


# -- errors of the contract ----------------------------------------------------------------------
def test_grad_errors(backend):
    x = backend(X)
    with pytest.raises(RuntimeError, match="Expected f\\(\\*args\\) to return a scalar Tensor, got "
                                           "tensor with 1 dims"):
        grad(ad.sin)(x)
    with pytest.raises(RuntimeError, match="Expected f\\(\\*args\\) to return a Tensor"):
        grad(lambda x: 1.0)(x)
    with pytest.raises(RuntimeError, match="Got argnum=2, but only 1 positional inputs"):
        grad(ad.sum, argnums=2)(x)
    with pytest.raises(RuntimeError, match="argnums elements must be unique"):
        grad(lambda x, y: ad.sum(x), argnums=(0, 0))(x, x)
    with pytest.raises(RuntimeError, match="argnums must be non-empty"):
        grad(ad.sum, argnums=())(x)
    with pytest.raises(RuntimeError, match="argnums must be int or Tuple"):
        grad(ad.sum, argnums=0.5)(x)
    # (a list is read as a tuple, as in JAX: tests/test_jax_spellings.py)
    with pytest.raises(ValueError, match="floating point"):
        grad(ad.sum)(backend(np.arange(3)))
    with pytest.raises(ValueError, match="must be an array"):
        grad(ad.sum)("abc")
    assert _core.stack_depth() == 0 and ad.is_grad_enabled()


def test_vmap_errors(backend):
    a = backend(np.ones((2, 3)))
    with pytest.raises(ValueError, match="expected `in_dims` to be int or a \\(potentially nested\\) "
                                         "tuple"):
        vmap(lambda x, y: x, in_dims=[0, 0])(a, a)
    with pytest.raises(ValueError, match="in_dims is not compatible with the structure"):
        vmap(lambda x, y: x, in_dims=(0,))(a, a)
    with pytest.raises(ValueError, match="same size in the mapped dimension, got sizes \\[2, 3\\]"):
        vmap(lambda x, y: x + y)(a, backend(np.ones((3, 3))))
    with pytest.raises(ValueError, match="at least one Tensor to vmap over"):
        vmap(lambda x: x, in_dims=None)(a) if False else vmap(lambda x: x, in_dims=(None,))(a)
    with pytest.raises(ValueError, match="got no inputs"):
        vmap(lambda: 1)()
    with pytest.raises(ValueError, match="expected in_dim to satisfy -2 <= in_dim < 2"):
        vmap(lambda x: x, in_dims=2)(a)
    with pytest.raises(ValueError, match="cannot vmap over non-Tensor arguments"):
        vmap(lambda x, y: x, in_dims=(0, 0))(a, 1.0)
    with pytest.raises(ValueError, match="must only return Tensors"):
        vmap(lambda x: 1.0)(a)
    with pytest.raises(ValueError, match="can not return a BatchedTensor when out_dim is None"):
        vmap(lambda x: x, out_dims=None)(a)
    assert _core.stack_depth() == 0


def test_vjp_jvp_errors(backend):
    x = backend(X)
    _, vjp_fn = vjp(ad.sin, x)
    with pytest.raises(RuntimeError, match="Mismatch in shape"):
        vjp_fn(backend(np.ones(3)))
    with pytest.raises(RuntimeError, match="pytree structure of cotangents"):
        vjp_fn((backend(np.ones(4)), backend(np.ones(4))))
    with pytest.raises(RuntimeError, match="All outputs of f must be floating-point"):
        vjp(lambda x: ad.astype(x, ad.int64), x)
    with pytest.raises(RuntimeError, match="Expected primals to be a tuple"):
        jvp(ad.sin, x, x)
    with pytest.raises(RuntimeError, match="same python structure"):
        jvp(lambda x, y: x, (x, x), (x,))
    with pytest.raises(RuntimeError, match="different size"):
        jvp(ad.sin, (x,), (backend(np.ones(3)),))
    with pytest.raises(RuntimeError, match="independent of the inputs"):
        jvp(lambda x: ad.ones_like(x), (x,), (x,), strict=True)
    zero = jvp(lambda x: ad.ones_like(x), (x,), (x,))[1]
    np.testing.assert_array_equal(to_numpy(zero), np.zeros(4))
    with pytest.raises(ValueError, match="floating point"):
        jvp(ad.sin, (backend(np.arange(3)),), (backend(np.arange(3)),))
    assert _core.stack_depth() == 0


def test_state_restored_after_errors(backend):
    state = ad.get_rng_state()
    with ad.no_grad():
        with pytest.raises(RuntimeError):
            grad(lambda x: ad.sin(x))(backend(X))
        assert not ad.is_grad_enabled()
    assert ad.is_grad_enabled()
    with pytest.raises(ZeroDivisionError):
        vmap(lambda x: grad(lambda y: 1 / 0)(x))(backend(np.ones((2, 3))))
    assert _core.stack_depth() == 0
    assert str(ad.get_rng_state()) == str(state)


def test_no_grad_inside_and_outside(backend):
    # grad ignores a no_grad around the call, and respects one inside f (as torch.func)
    with ad.no_grad():
        np.testing.assert_allclose(to_numpy(grad(lambda x: ad.sum(x * x))(backend(X))), 2 * X)

    def f(x):
        with ad.no_grad():
            c = x * x
        return ad.sum(c + x)

    np.testing.assert_allclose(to_numpy(grad(f)(backend(X))), np.ones(4))


def test_matches_jax(backend):
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    jnp = jax.numpy

    def chain_jax(x):
        s = jnp.sin(x) * jnp.cos(x) + jnp.exp(-x * x)
        y = jnp.tanh(s) * 2 - s / 3
        return jnp.sum(jnp.log(1 + y * y))

    x = backend(X)
    np.testing.assert_allclose(to_numpy(grad(chain)(x)), np.asarray(jax.grad(chain_jax)(X)),
                               rtol=1e-12)
    np.testing.assert_allclose(to_numpy(hessian(chain)(x)),
                               np.asarray(jax.hessian(chain_jax)(X)), rtol=1e-10, atol=1e-12)
    xs = RNG.standard_normal((3, 4))
    np.testing.assert_allclose(to_numpy(vmap(jacfwd(ad.tanh))(backend(xs))),
                               np.asarray(jax.vmap(jax.jacfwd(jnp.tanh))(xs)), rtol=1e-12)
    out, t = jvp(chain, (x,), (backend(np.ones(4)),))
    jout, jt = jax.jvp(chain_jax, (X,), (np.ones(4),))
    np.testing.assert_allclose(to_numpy(t), np.asarray(jt), rtol=1e-12)


def test_jacobians_with_aux(backend):
    f = lambda x: (ad.sin(x), {"norm": ad.sum(x * x)})  # noqa: E731
    x = backend(X)
    for jac in (jacrev, jacfwd):
        j, aux = jac(f, has_aux=True)(x)
        np.testing.assert_allclose(to_numpy(j), np.diag(np.cos(X)))
        np.testing.assert_allclose(to_numpy(aux["norm"]), np.sum(X * X))
    h, aux = hessian(lambda x: (ad.sum(ad.sin(x)), x[0]), has_aux=True)(x)
    np.testing.assert_allclose(to_numpy(h), np.diag(-np.sin(X)), atol=1e-12)
    np.testing.assert_allclose(to_numpy(aux), X[0])


def test_inplace_update_of_the_input_itself(backend):
    # the function rebinds its own input tracer: the gradient is still with respect to the input
    def g(v):
        v[1] = v[0] * 3
        return ad.sum(v * v)

    expected = np.array([20 * X[0], 0.0, 2 * X[2], 2 * X[3]])
    x = backend(X)
    np.testing.assert_allclose(to_numpy(grad(g)(x)), expected)
    np.testing.assert_allclose(to_numpy(vjp(g, x)[1](backend(np.ones(())))[0]), expected)
    np.testing.assert_allclose(to_numpy(linearize(g, x)[1](backend(np.ones(4)))), expected.sum())
    np.testing.assert_array_equal(to_numpy(x), X)     # the caller's array is not written


def test_array_api_consumer_code(backend):
    """Unmodified array-API code from array-api-extra and SciPy, differentiated and batched."""
    xpx = pytest.importorskip("array_api_extra")
    x = backend([0.5, 1.0, 2.0])

    def f(v):   # xpx.at writes into v, which it takes for a writeable array
        y = xpx.at(v)[1].set(v[0] * 3)
        return ad.sum(y * y)

    np.testing.assert_allclose(to_numpy(grad(f)(x)), [20 * 0.5, 0.0, 4.0])
    import os
    if os.environ.get("SCIPY_ARRAY_API") != "1":
        pytest.skip("SciPy's array API support needs SCIPY_ARRAY_API=1 before it is imported")
    special = pytest.importorskip("scipy.special")
    xn = np.array([0.5, 1.0, 2.0])
    np.testing.assert_allclose(to_numpy(grad(lambda v: special.logsumexp(v))(x)),
                               np.exp(xn) / np.exp(xn).sum())


def test_jacobians_of_a_pytree_argument(backend):
    params = {"a": backend(X), "b": backend(X[:2])}
    f = lambda p: ad.concat([ad.sin(p["a"]), p["b"] * 2])  # noqa: E731
    for jac in (jacrev, jacfwd):
        j = jac(f)(params)
        assert set(j) == {"a", "b"}
        np.testing.assert_allclose(to_numpy(j["a"]),
                                   np.vstack([np.diag(np.cos(X)), np.zeros((2, 4))]))
        np.testing.assert_allclose(to_numpy(j["b"]), np.vstack([np.zeros((4, 2)), 2 * np.eye(2)]))


def test_gradients_keep_the_inputs_dtype_when_an_operand_promotes(backend):
    # float32 x times a float64 array is float64; the cotangent of x comes back float32, as
    # torch and JAX return it (the promotion's derivative casts back).
    x = backend(np.linspace(0.1, 1.0, 4), dtype=np.float32)
    w = backend(np.linspace(1.0, 2.0, 4))
    gx, gw = grad(lambda a, b: ad.sum(ad.sin(a * b)), argnums=(0, 1))(x, w)
    assert ad.asarray(gx).dtype == ad.float32 and ad.asarray(gw).dtype == ad.float64
    xn = np.linspace(0.1, 1.0, 4).astype(np.float32).astype(np.float64)
    wn = np.linspace(1.0, 2.0, 4)
    np.testing.assert_allclose(to_numpy(gx), np.cos(xn * wn) * wn, rtol=1e-6)
    np.testing.assert_allclose(to_numpy(gw), np.cos(xn * wn) * xn, rtol=1e-6)
