"""einsum: values against numpy.einsum and derivatives (grad, jvp, vmap, jit, jacrev, jacfwd,
hessian, the eager tape) against jax.numpy.einsum, on NumPy, array-api-strict (which has no
einsum: the matmul lowering) and torch inputs; contraction orders; the subscript grammar's
errors."""
import functools
import itertools

import numpy as np
import pytest

import arrayad as ad
from arrayad._ops import einsum as einsum_module
from arrayad.func import grad, hessian, jacfwd, jacrev, jvp, tree_flatten, vjp, vmap

from conftest import Backend, close_leaves as close, to_numpy

jax = pytest.importorskip("jax")
jnp = jax.numpy
jax.config.update("jax_enable_x64", True)

BACKENDS = ["numpy", "array_api_strict", "torch"]

# (subscripts, operand shapes): what each exercises is in the comment
TABLE = [
    ("ij,jk->ik", [(2, 3), (3, 4)]),                 # matmul
    ("bij,bjk->bik", [(2, 2, 3), (2, 3, 2)]),        # batched matmul
    ("i,j->ij", [(3,), (4,)]),                       # outer product
    ("i,i->", [(3,), (3,)]),                         # dot
    ("ij,ij->ij", [(2, 3), (2, 3)]),                 # elementwise
    ("ii->", [(3, 3)]),                              # trace
    ("ii->i", [(3, 3)]),                             # diagonal
    ("iii->i", [(2, 2, 2)]),                         # an index three times
    ("iij->j", [(3, 3, 2)]),                         # trace of a stack
    ("ij->ji", [(2, 3)]),                            # transpose
    ("ij->", [(2, 3)]),                              # sum
    ("ij->j", [(2, 3)]),                             # sum over one axis
    ("ba", [(2, 3)]),                                # implicit output: a transpose
    ("ij,jk", [(2, 3), (3, 2)]),                     # implicit output: matmul
    ("...ij,...jk->...ik", [(2, 1, 2, 3), (3, 3, 2)]),   # ellipsis, broadcast batch
    ("i...->...i", [(3, 2, 2)]),                     # ellipsis moved
    ("...i,...i", [(2, 3), (3,)]),                   # implicit output with ellipsis
    ("ij,ij->ij", [(1, 3), (2, 3)]),                 # a size-one axis broadcasts
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 2)]),      # three operands
    ("i,ij,j->", [(3,), (3, 4), (4,)]),              # bilinear form
    ("bi,ij,bj->b", [(2, 3), (3, 3), (2, 3)]),       # batched bilinear form
    ("ijk,ik->ij", [(4, 2, 3), (4, 3)]),             # GradBench gmm's batched mat-vec
    ("ijk,mik->mij", [(2, 3, 3), (4, 2, 3)]),        # GradBench gmm's Q times x
    ("ij,jk,kl,lm->im", [(2, 3), (3, 2), (2, 4), (4, 2)]),   # four operands
    ("ii,ij->j", [(3, 3), (3, 2)]),                  # repeated index in one of two operands
]
IDS = [s for s, _ in TABLE]


@functools.lru_cache(maxsize=None)
def data(k):
    rng = np.random.default_rng(k)
    return tuple(rng.standard_normal(s) for s in TABLE[k][1])


def cotangent(k):
    sub, _ = TABLE[k]
    out = np.einsum(sub, *data(k)) if "..." not in sub else jnp.einsum(sub, *data(k))
    return np.random.default_rng(100 + k).standard_normal(np.shape(out))


@functools.lru_cache(maxsize=None)
def jax_grads(k):
    sub = TABLE[k][0]
    u = cotangent(k)
    f = lambda *xs: jnp.sum(jnp.einsum(sub, *xs) * u)   # noqa: E731
    return jax.jit(jax.grad(f, argnums=tuple(range(len(data(k))))))(*data(k))


@pytest.fixture(params=BACKENDS)
def b(request):
    return Backend(request.param)


@pytest.mark.parametrize("k", range(len(TABLE)), ids=IDS)
def test_values(k, b):
    sub, _ = TABLE[k]
    xs = data(k)
    got = ad.einsum(sub, *[b(x) for x in xs])
    want = np.einsum(sub, *xs)
    assert type(got).__module__.split(".")[0] == type(b(xs[0])).__module__.split(".")[0]
    close(got, want)
    for opt in (False, "optimal"):
        close(ad.einsum(sub, *[b(x) for x in xs], optimize=opt), want)


@pytest.mark.parametrize("k", range(len(TABLE)), ids=IDS)
def test_grad_vs_jax(k, b):
    sub, _ = TABLE[k]
    xs = [b(x) for x in data(k)]
    u = b(cotangent(k))
    got = grad(lambda *xs: ad.sum(ad.einsum(sub, *xs) * u), argnums=tuple(range(len(xs))))(*xs)
    close(got, jax_grads(k))


@functools.lru_cache(maxsize=None)
def tangents(k):
    rng = np.random.default_rng(200 + k)
    return tuple(rng.standard_normal(x.shape) for x in data(k))


@functools.lru_cache(maxsize=None)
def jax_jvp(k):
    return jax.jit(lambda xs, ts: jax.jvp(lambda *xs: jnp.einsum(TABLE[k][0], *xs), xs, ts))(
        data(k), tangents(k))


@pytest.mark.parametrize("k", range(len(TABLE)), ids=IDS)
def test_jvp_vs_jax(k, b):
    sub, _ = TABLE[k]
    out, tan = jvp(lambda *xs: ad.einsum(sub, *xs), tuple(b(x) for x in data(k)),
                   tuple(b(t) for t in tangents(k)))
    close([out, tan], list(jax_jvp(k)))


@functools.lru_cache(maxsize=None)
def batched(k):
    """The first operand batched along its last axis, the second (if any) along its first, the
    rest shared."""
    xs = data(k)
    rng = np.random.default_rng(300 + k)
    args = tuple(np.stack([x, rng.standard_normal(x.shape)], axis=x.ndim if i == 0 else 0)
                 if i < 2 else x for i, x in enumerate(xs))
    in_dims = tuple(x.ndim if i == 0 else 0 if i == 1 else None for i, x in enumerate(xs))
    want = jax.jit(jax.vmap(lambda *xs: jnp.einsum(TABLE[k][0], *xs), in_axes=in_dims))(*args)
    return args, in_dims, want


@pytest.mark.parametrize("k", range(len(TABLE)), ids=IDS)
def test_vmap_vs_jax(k, b):
    sub, _ = TABLE[k]
    args, in_dims, want = batched(k)
    close(vmap(lambda *xs: ad.einsum(sub, *xs), in_dims=in_dims)(*[b(x) for x in args]), want)


@pytest.mark.parametrize("k", range(len(TABLE)), ids=IDS)
def test_jit_vs_jax(k, b):
    sub, _ = TABLE[k]
    xs = [b(x) for x in data(k)]
    u = b(cotangent(k))
    f = ad.jit(lambda *xs: ad.einsum(sub, *xs))
    close(f(*xs), np.einsum(sub, *data(k)))
    close(f(*xs), np.einsum(sub, *data(k)))   # (replayed)
    g = ad.jit(grad(lambda *xs: ad.sum(ad.einsum(sub, *xs) * u), argnums=tuple(range(len(xs)))))
    close(g(*xs), jax_grads(k))


@pytest.mark.parametrize("k", range(len(TABLE)), ids=IDS)
def test_backward_on_tensors(k, b):
    sub, _ = TABLE[k]
    ts = [ad.Tensor(b(x)).requires_grad_() for x in data(k)]
    out = ad.einsum(sub, *ts)
    assert out.grad_fn is not None
    ad.sum(out * ad.Tensor(b(cotangent(k)))).backward()
    close([t.grad for t in ts], jax_grads(k))


# second order, on the cases whose derivatives differ in kind (products, diagonals, three
# operands), through every composition
SECOND = ["ij,jk->ik", "ii->i", "i,ij,j->", "ijk,mik->mij", "ii,ij->j"]


def close_trees(got, want):
    close(tree_flatten(got)[0], jax.tree_util.tree_leaves(want))


def _second_order_case(sub, xp, einsum, w):
    # a nonlinear scalar, so that the hessian is not zero, and a nonlinear vector function
    return (lambda *xs: xp.sum(xp.sin(einsum(sub, *xs)) * w),
            lambda *xs: xp.sin(einsum(sub, *xs)))


@functools.lru_cache(maxsize=None)
def jax_second_order(sub):
    """JAX's hessian, jacrev, jacfwd and vmap(grad), each staged once (eager JAX compiles every
    operation on its own: many times slower)."""
    k = IDS.index(sub)
    xs = data(k)
    argnums = tuple(range(len(xs)))
    f, g = _second_order_case(sub, jnp, jnp.einsum, second_order_weights(sub))
    per = jax.vmap(jax.grad(f), in_axes=(0,) + (None,) * (len(xs) - 1))
    return [jax.jit(fn)(*a) for fn, a in [
        (jax.hessian(f, argnums=argnums), xs), (jax.jacrev(g, argnums=argnums), xs),
        (jax.jacfwd(g, argnums=argnums), xs), (per, (np.stack([xs[0], 2 * xs[0]]),) + xs[1:])]]


@functools.lru_cache(maxsize=None)
def second_order_weights(sub):
    xs = data(IDS.index(sub))
    return np.random.default_rng(400).standard_normal(np.shape(np.einsum(sub, *xs)))


@pytest.mark.parametrize("sub", SECOND)
def test_second_order_vs_jax(sub, b):
    xs = data(IDS.index(sub))
    argnums = tuple(range(len(xs)))
    f, g = _second_order_case(sub, ad, ad.einsum, b(second_order_weights(sub)))
    bx = [b(x) for x in xs]
    hess, jrev, jfwd, per = jax_second_order(sub)
    close_trees(hessian(f, argnums=argnums)(*bx), hess)
    close_trees(jacrev(g, argnums=argnums)(*bx), jrev)
    close_trees(jacfwd(g, argnums=argnums)(*bx), jfwd)
    # vmap of grad: per-example gradients of the first operand
    close_trees(vmap(grad(f), in_dims=(0,) + (None,) * (len(xs) - 1))(
        b(np.stack([xs[0], 2 * xs[0]])), *bx[1:]), per)


def test_complex_vjp_matches_torch():
    """Complex operands: torch's convention (the cotangent of an operand is g contracted with
    the conjugated others)."""
    import torch
    rng = np.random.default_rng(5)
    a = rng.standard_normal((2, 3)) + 1j * rng.standard_normal((2, 3))
    c = rng.standard_normal((3, 3)) + 1j * rng.standard_normal((3, 3))
    g = rng.standard_normal((2,)) + 1j * rng.standard_normal((2,))
    for sub, xs in [("ij,jk->i", (a, c)), ("ij,jj->i", (a, c)), ("ij->i", (a,))]:
        out, f_vjp = vjp(lambda *xs: ad.einsum(sub, *xs), *xs)
        ts = [torch.tensor(x, requires_grad=True) for x in xs]
        torch.einsum(sub, *ts).backward(torch.tensor(g))
        close(f_vjp(g), [t.grad.numpy() for t in ts])
    # a real operand against a complex one gets a real cotangent
    r = rng.standard_normal((2, 3))
    _, f_vjp = vjp(lambda r: ad.einsum("ij,jk->i", r, c), r)
    assert f_vjp(g)[0].dtype == np.float64


def test_cotangent_dtypes():
    """A float32 operand contracted with a float64 one gets a float32 cotangent, as torch and
    JAX return it (the eager tape too)."""
    a = np.ones((2, 3), np.float32)
    w = np.ones((3, 4))
    g = grad(lambda a: ad.sum(ad.einsum("ij,jk->ik", a, w)))(a)
    assert g.dtype == np.float32
    np.testing.assert_array_equal(g, np.full((2, 3), 4.0))
    t = ad.Tensor(a).requires_grad_()
    ad.sum(ad.einsum("ij,jk->ik", t, w)).backward()
    assert t.grad.dtype == ad.float32


def test_diagonal_cotangent_keeps_its_zeros():
    """The cotangent of a diagonal is zero off the diagonal by construction, even where the
    incoming cotangent is inf (a product with an identity would make nan there)."""
    _, f_vjp = vjp(lambda a: ad.einsum("ii->i", a), np.ones((3, 3)))
    got = f_vjp(np.array([np.inf, 1.0, 2.0]))[0]
    np.testing.assert_array_equal(got, np.diag([np.inf, 1.0, 2.0]) + 0 * np.eye(3))
    assert not np.isnan(got).any()


def test_dask_stays_lazy():
    da = pytest.importorskip("dask.array")
    k = IDS.index("bi,ij,bj->b")
    xs = [da.from_array(x, chunks=2) for x in data(k)]
    u = cotangent(k)
    got = grad(lambda *xs: ad.sum(ad.einsum("bi,ij,bj->b", *xs) * u), argnums=(0, 1, 2))(*xs)
    assert all(isinstance(g, da.Array) for g in got)
    close([g.compute() for g in got], jax_grads(k))


def test_call_forms():
    """NumPy's interleaved sublists, torch's list of operands, np.einsum on traced values."""
    rng = np.random.default_rng(6)
    x, y = rng.standard_normal((2, 3)), rng.standard_normal((3, 4))
    want = x @ y
    close(ad.einsum(x, [0, 1], y, [1, 2], [0, 2]), want)
    close(ad.einsum(x, [Ellipsis, 1], y, [1, 2]), want)
    close(ad.einsum("ij,jk", [x, y]), want)
    close(ad.einsum(" i j , j k -> i k ", x, y), want)
    close(grad(lambda x: ad.sum(np.einsum("ij,jk->ik", x, y)))(x),
          np.broadcast_to(y.sum(1), (2, 3)))
    # torch tensors in, torch tensors out; array-api-strict in, strict out
    import torch
    assert isinstance(ad.einsum("ij,jk", torch.from_numpy(x), torch.from_numpy(y)), torch.Tensor)


def _flops(path, ins, out, size):
    """Multiply-adds of a pairwise path (as the planner counts them)."""
    live = dict(enumerate(frozenset(s) for s in ins))
    total, n = 0, len(ins)
    for i, j in path:
        a, b = live.pop(i), live.pop(j)
        rest = frozenset().union(*live.values())
        total += einsum_module._size(a | b, size)
        live[n] = frozenset(c for c in a | b if c in out or c in rest)
        n += 1
    return total


def _all_paths(ids, next_id):
    if len(ids) == 1:
        yield []
        return
    for i, j in itertools.combinations(sorted(ids), 2):
        for rest in _all_paths((ids - {i, j}) | {next_id}, next_id + 1):
            yield [(i, j)] + rest


@pytest.mark.parametrize("ins,out,size", [
    (["ij", "jk", "k"], "i", {"i": 50, "j": 40, "k": 30}),
    (["ab", "bc", "cd", "de"], "ae", {"a": 2, "b": 30, "c": 3, "d": 40, "e": 5}),
    (["ab", "cd", "bc", "a"], "d", {"a": 7, "b": 11, "c": 13, "d": 3}),
    (["i", "j", "ij", "jk", "k"], "", {"i": 4, "j": 9, "k": 6}),
])
def test_orders(ins, out, size):
    """'optimal' finds the cheapest of every pairwise order (checked by enumerating them); the
    greedy order is never worse than left to right on these, and on the first it avoids the
    large intermediate that left to right makes."""
    ins = [list(s) for s in ins]
    best = min(_flops(p, ins, out, size) for p in _all_paths(set(range(len(ins))), len(ins)))
    plan = functools.partial(einsum_module._plan, ins, list(out), size)
    assert _flops(plan("optimal"), ins, out, size) == best
    assert _flops(plan("greedy"), ins, out, size) <= _flops(plan(False), ins, out, size)
    if ins[2] == ["k"]:
        assert plan("greedy")[0] == (1, 2) and plan("optimal")[0] == (1, 2)
        assert plan(False)[0] == (0, 1)


def test_given_path():
    rng = np.random.default_rng(7)
    xs = [rng.standard_normal(s) for s in [(2, 3), (3, 4), (4,)]]
    path = ["einsum_path", (1, 2), (0, 1)]
    close(ad.einsum("ij,jk,k->i", *xs, optimize=path), np.einsum("ij,jk,k->i", *xs))
    close(ad.einsum("ij,jk,k->i", *xs, optimize=np.einsum_path("ij,jk,k->i", *xs)[0]),
          np.einsum("ij,jk,k->i", *xs))
    with pytest.raises(ValueError, match="einsum: the contraction path .* leaves 2 terms"):
        ad.einsum("ij,jk,k->i", *xs, optimize=[(0, 1)])


@pytest.mark.parametrize("sub,shapes,match", [
    ("ij,jk->ik", [(2, 3)], "einsum: the subscripts 'ij,jk->ik' name 2 operands but 1 was given"),
    ("ij", [(3,)], "einsum: operand 0 has 1 dimension but its subscripts 'ij' name 2"),
    ("i", [(2, 3)], r"operand 0 has 2 dimensions but its subscripts 'i' name 1 \(add '...'"),
    ("i0", [(2, 3)], "einsum: invalid character '0' in the subscripts of operand 0"),
    ("ij.->", [(2, 3)], "einsum: the subscripts of operand 0 .* '.' that is not part of an"),
    ("i...j...", [(2, 3)], "more than one ellipsis"),
    ("ij->i->j", [(2, 3)], "at most one '->'"),
    ("ij>i", [(2, 3)], "at most one '->'"),
    ("ij->ii", [(2, 3)], "einsum: index 'i' appears more than once in the output"),
    ("i->j", [(3,)], "einsum: index 'j' of the output 'j' is not an index of any operand"),
    ("ii", [(2, 3)], "einsum: index 'i' repeats in operand 0 with sizes 2 and 3"),
    ("ij,jk", [(2, 3), (2, 3)], "einsum: index 'j' has size 3 in operand 0 and size 2 in "
                                "operand 1, which do not broadcast"),
    ("...i,...i", [(2, 3), (4, 3)], "einsum: a dimension covered by '...' has size 2"),
])
def test_bad_subscripts(sub, shapes, match):
    with pytest.raises(ValueError, match=match):
        ad.einsum(sub, *[np.ones(s) for s in shapes])


def test_bad_calls():
    x = np.ones((2, 2))
    with pytest.raises(TypeError, match="einsum: the subscripts must be a string"):
        ad.einsum(3, x)
    with pytest.raises(TypeError, match="einsum: operand 1 is a float, expected an array"):
        ad.einsum("ij,->ij", x, 2.0)
    with pytest.raises(ValueError, match="einsum: expected at least one operand"):
        ad.einsum("ij")
    with pytest.raises(ValueError, match="einsum: optimize must be False, True, 'greedy'"):
        ad.einsum("ij,jk", x, x, optimize="fastest")
    with pytest.raises(ValueError, match="einsum: a sublist holds integers"):
        ad.einsum(x, [0, "a"])
