"""checkpoint (remat) against jax.checkpoint and torch.utils.checkpoint: values and derivatives
under every transform and the eager tape, the number of forward runs, the policies, random
numbers, errors, and the peak memory of a long chain of checkpointed blocks."""
import gc
import tracemalloc
import warnings

import numpy as np
import pytest

import arrayad as ad
from arrayad._core import _core
from arrayad.func import (checkpoint, checkpoint_policies, grad, hessian, jacfwd, jacrev, jvp,
                          remat, vjp, vmap)

from conftest import close_leaves as close, to_numpy

jax = pytest.importorskip("jax")
jnp = jax.numpy
jax.config.update("jax_enable_x64", True)

RNG = np.random.default_rng(0)
X = RNG.normal(size=3)
W = RNG.normal(size=(3, 3))
CALLS = []


def block(x, W):
    CALLS.append(1)
    return ad.tanh(ad.matmul(W, x)) * ad.sin(x)


def block_j(x, W):
    return jnp.tanh(W @ x) * jnp.sin(x)


def loss(c, xp):
    return lambda x, W: xp.sum(c(c(x, W), W) ** 2)


@pytest.mark.parametrize("policy", [None, checkpoint_policies.dots_saveable])
def test_transforms_match_jax_checkpoint(backend, policy):
    c, cj = checkpoint(block, policy=policy), jax.checkpoint(block_j)
    x, w = backend(X), backend(W)
    close(c(x, w), block_j(X, W))
    close(grad(loss(c, ad), argnums=(0, 1))(x, w), jax.grad(loss(cj, jnp), argnums=(0, 1))(X, W))
    out, pull = vjp(lambda x: c(x, w), x)
    close(pull(backend(X)), jax.vjp(lambda x: cj(x, W), X)[1](X))
    close(jacrev(loss(c, ad))(x, w), jax.jacrev(loss(cj, jnp))(X, W))
    close(jacfwd(loss(c, ad))(x, w), jax.jacfwd(loss(cj, jnp))(X, W))
    close(jvp(lambda x: c(x, w), (x,), (x,)), jax.jvp(lambda x: cj(x, W), (X,), (X,)))
    close(hessian(loss(c, ad))(x, w), jax.hessian(loss(cj, jnp))(X, W))
    close(jacrev(jacrev(loss(c, ad)))(x, w), jax.jacrev(jax.jacrev(loss(cj, jnp)))(X, W))
    xs = np.stack([X, -X])
    close(vmap(grad(loss(c, ad)), in_dims=(0, None))(backend(xs), w),
          jax.vmap(jax.grad(loss(cj, jnp)), in_axes=(0, None))(xs, W))
    close(grad(lambda x: ad.sum(vmap(lambda r: c(r, w))(x)))(backend(xs)),
          jax.grad(lambda x: jnp.sum(jax.vmap(lambda r: cj(r, W))(x)))(xs))
    g = ad.jit(grad(loss(c, ad)))
    for _ in range(2):
        close(g(x, w), jax.jit(jax.grad(loss(cj, jnp)))(X, W))
    close(grad(ad.jit(loss(c, ad)))(x, w), jax.grad(loss(cj, jnp))(X, W))


def test_eager_tape_matches_torch_checkpoint():
    torch = pytest.importorskip("torch")
    from torch.utils.checkpoint import checkpoint as tcheck
    from arrayad.utils.checkpoint import checkpoint as acheck

    def tblock(x, W):
        return torch.tanh(W @ x) * torch.sin(x)

    xt, wt = torch.tensor(X, requires_grad=True), torch.tensor(W, requires_grad=True)
    torch.sum(tcheck(tblock, tcheck(tblock, xt, wt, use_reentrant=False), wt,
                     use_reentrant=False) ** 2).backward()
    xa, wa = ad.tensor(X, requires_grad=True), ad.tensor(W, requires_grad=True)
    out = acheck(block, acheck(block, xa, wa, use_reentrant=False), wa, use_reentrant=False)
    assert out.grad_fn is not None
    ad.sum(out ** 2).backward()
    close([xa.grad, wa.grad], [xt.grad.numpy(), wt.grad.numpy()])
    # second order through the tape (create_graph)
    xa = ad.tensor(X, requires_grad=True)
    (g,) = ad.autograd.grad(ad.sum(checkpoint(block)(xa, ad.tensor(W)) ** 2), xa,
                            create_graph=True)
    ad.sum(g).backward()
    close(xa.grad, jnp.sum(jax.hessian(lambda x: jnp.sum(block_j(x, W) ** 2))(X), axis=0))


def test_forward_runs_counted():
    CALLS.clear()
    grad(lambda x: ad.sum(checkpoint(block)(x, W)))(X)
    assert len(CALLS) == 2          # the forward, then once again in the backward pass
    CALLS.clear()
    grad(lambda x: ad.sum(block(x, W)))(X)
    assert len(CALLS) == 1
    CALLS.clear()
    checkpoint(block)(X, W)         # no reverse mode: the function simply runs
    assert len(CALLS) == 1
    CALLS.clear()
    xa = ad.tensor(X, requires_grad=True)
    ad.sum(checkpoint(block)(xa, ad.tensor(W))).backward()
    assert len(CALLS) == 2
    assert remat is checkpoint


def test_dots_saveable_reuses_matmul_results():
    from arrayad._ops.linalg import matmul_p
    seen = []

    def count(prim, *args, **params):
        if prim is matmul_p:
            seen.append(1)
        return checkpoint_policies.dots_saveable(prim, *args, **params)

    g0 = grad(lambda w: ad.sum(checkpoint(block)(X, w) ** 2))(W)
    g1 = grad(lambda w: ad.sum(checkpoint(block, policy=count)(X, w) ** 2))(W)
    close(g1, g0)
    # the policy is asked once in the forward run; the recomputation takes the kept result
    # (asked again, then not computed)
    assert len(seen) == 2


def test_random_numbers_drawn_again_identically():
    # on the eager tape (torch's dropout-in-a-checkpoint case)
    def noisy(x):
        return x * ad.rand(3)

    ad.manual_seed(3)
    xa = ad.tensor(X, requires_grad=True)
    ad.sum(checkpoint(noisy)(xa) ** 2).backward()
    ad.manual_seed(3)
    mask = to_numpy(ad.rand(3))
    close(xa.grad, 2 * X * mask ** 2)


def test_closed_over_differentiated_value_runs_without_recomputation():
    """A value being differentiated read from a closure (JAX's ``jax.checkpoint(lambda x: x *
    w)``, torch's ``checkpoint(layer, x)`` with the layer's parameters): recomputing from the
    arguments alone would lose its derivative, so the function runs as it is, with a warning
    that says how to get the memory saving; the derivative is jax.checkpoint's / torch's."""
    def outer(w, xp, ckpt):
        return xp.sum(ckpt(lambda x: xp.tanh(x * w))(xp.asarray(X)) ** 2)

    with pytest.warns(UserWarning, match="Pass that value as an argument"):
        g = grad(lambda w: outer(w, ad, checkpoint))(np.array(2.0))
    close(g, jax.grad(lambda w: outer(w, jnp, jax.checkpoint))(2.0))
    torch = pytest.importorskip("torch")
    from torch.utils.checkpoint import checkpoint as tcheck
    from arrayad.utils.checkpoint import checkpoint as acheck
    wt = torch.tensor(W, requires_grad=True)
    xt = torch.tensor(X, requires_grad=True)
    torch.sum(tcheck(lambda x: torch.tanh(wt @ x), xt, use_reentrant=False) ** 2).backward()
    wa, xa = ad.tensor(W, requires_grad=True), ad.tensor(X, requires_grad=True)
    with pytest.warns(UserWarning, match="ran without recomputation"):
        out = acheck(lambda x: ad.tanh(wa @ x), xa, use_reentrant=False)
    ad.sum(out ** 2).backward()
    close([xa.grad, wa.grad], [xt.grad.numpy(), wt.grad.numpy()])
    assert _core.stack_depth() == 0 and ad.is_grad_enabled()
    assert _core.thread_state().staging is None


def test_arrays_made_inside_are_constants(backend):
    """``ad.zeros(n)``/``ad.arange(n)`` inside the block are constants of the transforms: the
    block is still recomputed (no warning), under grad, jvp and vmap."""
    def inner(x):
        CALLS.append(1)
        return ad.sin(x) * ad.arange(1.0, 4.0) + ad.zeros(3)

    def inner_j(x):
        return jnp.sin(x) * jnp.arange(1.0, 4.0)

    x = backend(X)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        CALLS.clear()
        g = grad(lambda x: ad.sum(checkpoint(inner)(x) ** 2))(x)
        assert len(CALLS) == 2
        close(g, jax.grad(lambda x: jnp.sum(jax.checkpoint(inner_j)(x) ** 2))(X))
        close(vmap(grad(lambda x: ad.sum(checkpoint(inner)(x))))(backend(np.stack([X, X]))),
              jax.vmap(jax.grad(lambda x: jnp.sum(inner_j(x))))(np.stack([X, X])))
        close(jvp(checkpoint(inner), (x,), (x,)), jax.jvp(inner_j, (X,), (X,)))


def test_static_argnums_and_pytrees():
    def f(p, n):
        return {"y": ad.sin(p["a"]) ** n}

    c = checkpoint(f, static_argnums=(1,))
    got = grad(lambda a: ad.sum(c({"a": a}, 3)["y"]))(X)
    close(got, jax.grad(lambda a: jnp.sum(jnp.sin(a) ** 3))(X))


def test_peak_memory_of_a_long_chain():
    """200 checkpointed blocks: the backward pass keeps one array per block (the inputs) and
    recomputes one block at a time; without checkpoint it keeps every block's intermediates."""
    n, steps = 20_000, 200
    x0 = np.linspace(0.1, 1.0, n)

    def blk(x):
        a = ad.sin(x)
        b = ad.tanh(a * x)
        c = ad.exp(-b * b)
        return x + 0.01 * c * a

    def run(f):
        def chain(x):
            for _ in range(steps):
                x = f(x)
            return ad.sum(x)
        gc.collect()
        tracemalloc.start()
        g = grad(chain)(x0)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        return g, peak

    g_plain, peak_plain = run(blk)
    g_ckpt, peak_ckpt = run(checkpoint(blk))
    close(g_ckpt, g_plain)
    ratio = peak_ckpt / peak_plain
    print(f"peak memory, checkpointed / plain: {ratio:.3f}")
    assert ratio < 0.5
