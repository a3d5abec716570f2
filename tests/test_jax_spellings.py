"""A program ported from JAX or torch meets no bare TypeError for a spelling that has an arrayad
equivalent: each spelling is accepted with its library's meaning (checked against JAX or torch),
or refused with a message that names what to write instead. Errors name the transform the user
called, not the one it is built on."""

import collections

import numpy as np
import pytest

import arrayad as ad
from arrayad import func as F
from arrayad._core import _core

from conftest import BACKENDS, Backend, to_numpy

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")
jax.config.update("jax_enable_x64", True)

X = np.array([0.5, -1.0, 2.0])
W = np.array([[1.0, 2.0, 0.5], [-1.0, 0.0, 3.0]])


def _close(a, b):
    np.testing.assert_allclose(to_numpy(a), np.asarray(b), rtol=1e-12, atol=1e-12)


def _f(w, x):
    return ad.sum(ad.tanh(w @ x) ** 2)


def _jf(w, x):
    return jnp.sum(jnp.tanh(w @ x) ** 2)


_REFERENCES = {}


def _jax_reference(jax_transform):
    """JAX's derivative of _jf at (W, X) with argnums=[0, 1] (computed once per transform)."""
    if jax_transform not in _REFERENCES:
        _REFERENCES[jax_transform] = jax.jit(jax_transform(_jf, argnums=[0, 1]))(
            jnp.asarray(W), jnp.asarray(X))
    return _REFERENCES[jax_transform]


@pytest.mark.parametrize("name", [b for b in ("numpy", "array_api_strict", "torch")
                                  if b in BACKENDS])
@pytest.mark.parametrize("transform, jax_transform", [
    (F.grad, jax.grad), (F.jacrev, jax.jacrev), (F.jacfwd, jax.jacfwd),
    (F.hessian, jax.hessian),
])
def test_argnums_as_a_list(name, transform, jax_transform):
    be = Backend(name)
    got = transform(_f, argnums=[0, 1])(be(W), be(X))
    want = _jax_reference(jax_transform)
    assert isinstance(got, tuple) and len(got) == 2    # a tuple, as for argnums=(0, 1)
    for a, b in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        _close(a, b)


def test_argnums_as_a_list_in_value_and_grad():
    (v, g), (jv, jg) = (F.value_and_grad(_f, argnums=[1])(W, X),
                        jax.value_and_grad(_jf, argnums=[1])(jnp.asarray(W), jnp.asarray(X)))
    _close(v, jv)
    _close(g[0], jg[0])
    g2, v2 = F.grad_and_value(_f, argnums=[1])(W, X)
    _close(g2[0], jg[0])


@pytest.mark.parametrize("name", [b for b in ("numpy", "array_api_strict", "torch")
                                  if b in BACKENDS])
def test_vmap_in_axes_and_out_axes(name):
    be = Backend(name)
    f = lambda w, x: ad.tanh(w @ x)       # noqa: E731
    jf = lambda w, x: jnp.tanh(w @ x)     # noqa: E731
    xs = np.stack([X, 2 * X, -X, X + 1])  # (4, 3)
    got = F.vmap(f, in_axes=(None, 0), out_axes=1)(be(W), be(xs))
    want = jax.vmap(jf, in_axes=(None, 0), out_axes=1)(jnp.asarray(W), jnp.asarray(xs))
    _close(got, want)
    # a list, as JAX reads it: a tuple
    got = F.vmap(f, in_axes=[None, 1])(be(W), be(xs.T))
    _close(got, jax.vmap(jf, in_axes=[None, 1])(jnp.asarray(W), jnp.asarray(xs.T)))


def test_vmap_both_names_is_an_error():
    with pytest.raises(TypeError, match=r"vmap: got both in_dims=1 and in_axes=0; they are the "
                                        r"same argument.*pass one of them"):
        F.vmap(ad.sin, 1, in_axes=0)
    with pytest.raises(TypeError, match=r"both out_dims=1 and out_axes=0"):
        F.vmap(ad.sin, out_dims=1, out_axes=0)
    # in_dims keeps torch's refusal of a list, pointing to JAX's name
    with pytest.raises(ValueError, match=r"expected `in_dims`.*list.*in_axes="):
        F.vmap(ad.sin, in_dims=[0])(X)


def test_errors_name_the_transform_called():
    vector = lambda x: x * 2.0   # noqa: E731  (not a scalar: grad refuses it)
    for transform, name in [(F.grad, "grad"), (F.value_and_grad, "value_and_grad"),
                            (F.grad_and_value, "grad_and_value")]:
        with pytest.raises(RuntimeError, match=rf"^{name}\(f\)\(\*args\): Expected f\(\*args\) "
                                               rf"to return a scalar"):
            transform(vector)(X)
    to_int = lambda x: x.astype(ad.int64)   # noqa: E731
    for transform, name in [(F.jacrev, "jacrev"), (F.hessian, "hessian")]:
        with pytest.raises(RuntimeError, match=rf"^{name}\(f\)\(\*args\): All outputs of f must "
                                               rf"be floating-point"):
            transform(to_int)(X)
    for transform, name in [(F.jacfwd, "jacfwd"), (F.hessian, "hessian")]:
        with pytest.raises(RuntimeError, match=rf"^{name}\(f\)\(\*args\): Expected f to return "
                                               rf"arrays"):
            transform(lambda x: "text")(X)
        with pytest.raises(RuntimeError, match=rf"^{name}: f called a random operation.*"
                                               rf"randomness='different'"):
            transform(lambda x: ad.sum(x * ad.randn(3)))(X)
        with pytest.raises(ValueError, match=rf"^{name}\(f\)\(\*args\): Expected primal to be "
                                             rf"floating point"):
            transform(ad.sum)(np.arange(3))
    assert _core.stack_depth() == 0


@pytest.mark.parametrize("transform, name", [
    (F.grad, "grad"), (F.grad_and_value, "grad_and_value"), (F.value_and_grad, "value_and_grad"),
    (F.jacrev, "jacrev"),
])
def test_holomorphic_and_allow_int(transform, name):
    # False is JAX's default and this function's meaning
    got = transform(_f, holomorphic=False, allow_int=False)(W, X)
    for a, b in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(transform(_f)(W, X))):
        _close(a, b)
    with pytest.raises(ValueError, match=rf"{name}\(f, holomorphic=True\).*jacfwd\(f, "
                                         rf"holomorphic=True\)"):
        transform(_f, holomorphic=True)
    with pytest.raises(ValueError, match=rf"{name}\(f, allow_int=True\).*argnums.*astype"):
        transform(_f, allow_int=True)


def test_jacfwd_holomorphic_is_jaxs():
    z = np.array([1.0 + 2.0j, -0.5 + 0.25j])
    f = lambda z: z ** 3 + ad.sin(z) * z     # noqa: E731
    jf = lambda z: z ** 3 + jnp.sin(z) * z   # noqa: E731
    _close(F.jacfwd(f, holomorphic=True)(z), jax.jacfwd(jf, holomorphic=True)(jnp.asarray(z)))
    # the second derivative, 6 z + 2 cos z - z sin z, on the diagonal H[i, i, i]
    want = np.zeros((2, 2, 2), complex)
    want[[0, 1], [0, 1], [0, 1]] = 6 * z + 2 * np.cos(z) - z * np.sin(z)
    _close(F.jacfwd(F.jacfwd(f, holomorphic=True), holomorphic=True)(z), want)
    with pytest.raises(ValueError, match=r"jacfwd\(f, holomorphic=True\): the differentiated "
                                         r"arguments must be complex, got float64"):
        F.jacfwd(ad.sin, holomorphic=True)(X)
    with pytest.raises(ValueError, match=r"hessian\(f, holomorphic=True\).*jacfwd\(jacfwd"):
        F.hessian(f, holomorphic=True)


def test_linearize_has_aux():
    f = lambda x: (ad.sin(x) * 2.0, {"norm": ad.sum(x ** 2)})    # noqa: E731
    jf = lambda x: (jnp.sin(x) * 2.0, {"norm": jnp.sum(x ** 2)})  # noqa: E731
    out, jvp_fn, aux = F.linearize(f, X, has_aux=True)
    jout, jjvp, jaux = jax.linearize(jf, jnp.asarray(X), has_aux=True)
    _close(out, jout)
    _close(aux["norm"], jaux["norm"])
    t = np.array([1.0, 0.5, -2.0])
    _close(jvp_fn(t), jjvp(jnp.asarray(t)))
    with pytest.raises(RuntimeError, match=r"linearize.*\(output, aux\)"):
        F.linearize(ad.sin, X, has_aux=True)


def test_torch_cond_positional_operands():
    torch = pytest.importorskip("torch")
    x = np.array([1.0, 2.0])
    t, f = (lambda a, b: a + b), (lambda a, b: a * b)
    want = torch.cond(torch.tensor(False), t, f, (torch.tensor(x), torch.tensor(x))).numpy()
    for pred, expect in ((False, want), (True, x + x)):
        _close(ad.cond(np.array(pred), t, f, (x, x)), expect)
        _close(ad.cond(pred, t, f, [x, x]), expect)
        _close(ad.cond(pred, t, f, operands=(x, x)), expect)
    # the gradient through torch's form
    g = F.grad(lambda a: ad.sum(ad.cond(ad.sum(a) > 0, lambda u: u ** 3, lambda u: u, (a,))))(x)
    _close(g, 3 * x ** 2)
    # JAX's forms work in ad.cond too where they cannot be torch's: several operands one by
    # one, one operand that is not a plain tuple or list
    _close(ad.cond(True, t, f, x, x), 2 * x)
    _close(ad.cond(True, lambda a: a * 2, lambda a: a, x), 2 * x)   # (both branches run: JAX traces both)
    P = collections.namedtuple("P", "u v")
    _close(ad.cond(True, lambda p: p.u - p.v, lambda p: p.u * p.v, P(x, x)), 0 * x)


def test_func_cond_stays_jaxs_on_a_tuple_operand():
    x = np.array([1.0, 2.0])
    t = lambda pair: pair[0] - pair[1]   # noqa: E731  (one operand, a tuple)
    _close(F.cond(True, t, t, (x, 2 * x)),
           jax.lax.cond(True, t, t, (jnp.asarray(x), jnp.asarray(2 * x))))
    with pytest.raises(TypeError, match="operands"):
        ad.cond(True, t, t, x, operands=(x,))


def test_fori_loop_unroll():
    body = lambda i, c: c * 0.5 + i     # noqa: E731
    want = jax.lax.fori_loop(0, 7, body, jnp.asarray(X), unroll=3)
    _close(F.fori_loop(0, 7, body, X, unroll=3), want)
    _close(F.grad(lambda x: ad.sum(F.fori_loop(0, 7, body, x, unroll=True)))(X),
           jax.grad(lambda x: jnp.sum(jax.lax.fori_loop(0, 7, body, x, unroll=True)))(
               jnp.asarray(X)))
    n = np.asarray(7)
    _close(F.fori_loop(0, n, body, X, unroll=1), want)   # (array bounds: 1 is no unrolling)
    with pytest.raises(ValueError, match=r"fori_loop\(<lambda>\): unroll=2 needs Python int "
                                         r"bounds"):
        F.fori_loop(0, n, body, X, unroll=2)


def test_map_batch_size():
    xs = np.arange(10.0).reshape(5, 2)
    f = lambda x: ad.sum(ad.sin(x)) * x      # noqa: E731
    jf = lambda x: jnp.sum(jnp.sin(x)) * x   # noqa: E731
    want = np.stack([np.sum(np.sin(x)) * x for x in xs])
    _close(jax.lax.map(jf, jnp.asarray(xs), batch_size=2), want)   # (JAX's meaning)
    for b in (1, 2, 5, 7):
        _close(F.map(f, xs, batch_size=b), want)
    _close(F.grad(lambda v: ad.sum(F.map(f, v, batch_size=2)))(xs),
           F.grad(lambda v: ad.sum(F.map(f, v)))(xs))
    with pytest.raises(ValueError, match=r"map\(<lambda>\): batch_size must be a positive int"):
        F.map(f, xs, batch_size=0)


def test_tree_util_spellings():
    # JAX's argument order of tree_unflatten, torch's tree_all(pred, tree)
    leaves, spec = ad.tree_util.tree_flatten({"a": 1.0, "b": [2.0]})
    assert ad.tree_util.tree_unflatten(spec, leaves) == ad.tree_util.tree_unflatten(leaves, spec)
    assert ad.tree_util.tree_all(lambda v: v > 0, leaves)
