"""custom_vjp and custom_jvp against JAX's (same functions, same rules, values and derivatives),
on every backend, under every transform and nesting, with JAX's errors.

The rules below are deliberately not the function's true derivative (a factor 2 on one term), so
that a transform that ignored the rule and differentiated the function would be caught: JAX,
which applies the rule, is the reference."""
import numpy as np
import pytest

import arrayad as ad
from arrayad.func import (custom_jvp, custom_vjp, grad, hessian, jacfwd, jacrev, jvp,
                          linearize, vjp, vmap)

from arrayad._core import _core
from conftest import close_leaves as close

jax = pytest.importorskip("jax")
jnp = jax.numpy
jax.config.update("jax_enable_x64", True)

X = np.array([0.3, 1.2, -0.7])
Y = np.array([2.0, -1.0, 0.5])


# -- the same definitions in both libraries ---------------------------------------------------
def make_vjp(lib, xp, fwd_calls_f=False):
    @lib.custom_vjp
    def f(x, y):
        return xp.sin(x) * y

    def f_fwd(x, y):
        return f(x, y) if fwd_calls_f else xp.sin(x) * y, (xp.cos(x), xp.sin(x), y)

    def f_bwd(res, g):
        c, s, y = res
        return (2 * c * y * g, s * g)

    f.defvjp(f_fwd, f_bwd)
    return f


def make_jvp(lib, xp):
    @lib.custom_jvp
    def f(x, y):
        return xp.sin(x) * y

    @f.defjvp
    def f_jvp(primals, tangents):
        x, y = primals
        tx, ty = tangents
        return f(x, y), 2 * xp.cos(x) * tx * y + xp.sin(x) * ty

    return f


AD = {"vjp": make_vjp(ad.func, ad), "jvp": make_jvp(ad.func, ad)}
JX = {"vjp": make_vjp(jax, jnp), "jvp": make_jvp(jax, jnp)}


def loss(f, xp):
    return lambda x, y: xp.sum(f(x, y) ** 2)


# -- reverse mode, both decorators ------------------------------------------------------------
@pytest.mark.parametrize("kind", ["vjp", "jvp"])
def test_reverse_mode_transforms_match_jax(kind, backend):
    f, fj = AD[kind], JX[kind]
    x, y = backend(X), backend(Y)
    close(f(x, y), fj(X, Y))
    close(grad(loss(f, ad), argnums=(0, 1))(x, y), jax.grad(loss(fj, jnp), argnums=(0, 1))(X, Y))
    out, pull = vjp(f, x, y)
    close(pull(backend(Y)), jax.vjp(fj, X, Y)[1](Y))
    close(jacrev(f, argnums=(0, 1))(x, y), jax.jacrev(fj, argnums=(0, 1))(X, Y))
    close(hessian(loss(f, ad))(x, y), jax.hessian(loss(fj, jnp))(X, Y))
    if kind == "vjp":
        # reverse over reverse applies the rule at every level; JAX does the same when fwd calls
        # the function (the usual pattern; JAX then refuses forward over reverse, as here)
        f = make_vjp(ad.func, ad, fwd_calls_f=True)
        fj = make_vjp(jax, jnp, fwd_calls_f=True)
    close(jacrev(jacrev(loss(f, ad)))(x, y), jax.jacrev(jax.jacrev(loss(fj, jnp)))(X, Y))
    xs, ys = np.stack([X, X + 1]), np.stack([Y, -Y])
    close(vmap(grad(loss(f, ad)))(backend(xs), backend(ys)),
          jax.vmap(jax.grad(loss(fj, jnp)))(xs, ys))
    close(grad(lambda x, y: ad.sum(vmap(f)(x, y) ** 2))(backend(xs), backend(ys)),
          jax.grad(lambda x, y: jnp.sum(jax.vmap(fj)(x, y) ** 2))(xs, ys))


@pytest.mark.parametrize("kind", ["vjp", "jvp"])
def test_under_jit_and_the_eager_tape(kind, backend):
    f, fj = AD[kind], JX[kind]
    ref = jax.grad(loss(fj, jnp))(X, Y)
    x, y = backend(X), backend(Y)
    g = ad.jit(grad(loss(f, ad)))
    close(g(x, y), ref)
    close(g(x, y), ref)   # (the replayed program)
    gj = grad(ad.jit(loss(f, ad)))
    close(gj(x, y), ref)
    close(gj(x, y), ref)
    xt = backend.tensor(X, requires_grad=True)
    out = f(xt, backend.tensor(Y))
    assert out.grad_fn is not None
    ad.sum(out ** 2).backward()
    close(xt.grad, ref)


def _counted(lib, xp, kind, calls):
    """AD[kind]'s function and rule, counting the runs of the user's Python (function, fwd,
    jvp rule)."""
    if kind == "vjp":
        @lib.custom_vjp
        def f(x, y):
            calls.append("f")
            return xp.sin(x) * y

        def f_fwd(x, y):
            calls.append("fwd")
            return xp.sin(x) * y, (xp.cos(x), xp.sin(x), y)

        def f_bwd(res, g):
            c, s, y = res
            return (2 * c * y * g, s * g)

        f.defvjp(f_fwd, f_bwd)
        return f

    @lib.custom_jvp
    def f(x, y):
        calls.append("f")
        return xp.sin(x) * y

    @f.defjvp
    def f_jvp(primals, tangents):
        calls.append("jvp")
        x, y = primals
        tx, ty = tangents
        return xp.sin(x) * y, 2 * xp.cos(x) * tx * y + xp.sin(x) * ty

    return f


@pytest.mark.parametrize("kind", ["vjp", "jvp"])
def test_jit_of_vmap_stages_the_rules_call_once(kind, backend):
    """Under jit(vmap(grad)), jit(vmap(f)) and jit(f) a custom rule's call is traced into the
    program once (NOTE [staged calls]): the replays run none of the user's Python, and the
    values, the rule's (not the function's derivative: a factor 2 on one term), stay JAX's; an
    outer grad of the jitted function still applies the rule."""
    calls = []
    f, fj = _counted(ad.func, ad, kind, calls), _counted(jax, jnp, kind, [])
    xs, ys = np.stack([X, X + 1, -X]), np.stack([Y, -Y, 2 * Y])
    step = ad.jit(vmap(grad(loss(f, ad))))
    want = jax.vmap(jax.grad(loss(fj, jnp)))(xs, ys)
    close(step(backend(xs), backend(ys)), want)
    traced = len(calls)
    for _ in range(3):
        close(step(backend(xs), backend(ys)), want)
    assert len(calls) == traced   # (the replays ran none of it)
    batched = ad.jit(vmap(f))
    outer = grad(lambda x: ad.sum(batched(x, backend(ys)) ** 2))
    want = jax.grad(lambda x: jnp.sum(jax.vmap(fj)(x, ys) ** 2))(xs)
    close(outer(backend(xs)), want)
    close(outer(backend(xs)), want)
    # directly under jit too (no vmap, no derivative inside): the function runs once, traced
    direct = ad.jit(loss(f, ad))
    x, y = backend(X), backend(Y)
    close(direct(x, y), loss(fj, jnp)(X, Y))
    traced = len(calls)
    for _ in range(3):
        close(direct(x, y), loss(fj, jnp)(X, Y))
    assert len(calls) == traced
    close(grad(direct)(x, y), jax.grad(loss(fj, jnp))(X, Y))   # (the rule, not f's derivative)


def test_a_staged_call_reads_its_captured_arrays_at_every_call():
    """A staged call's closure array (a layer's weights) is read when the program runs, and a
    new shape traces anew (NOTE [staged calls], NOTE [captured arrays])."""
    c = np.array([1.0, 2.0, 3.0])

    @ad.func.custom_vjp
    def f(x):
        return ad.sin(x) * c

    f.defvjp(lambda x: (ad.sin(x) * c, x), lambda x, g: (2 * ad.cos(x) * c * g,))
    step = ad.jit(vmap(grad(lambda x: ad.sum(f(x)))))
    xs = np.stack([X, -X])
    close(step(xs), 2 * np.cos(xs) * c)
    c[:] = [0.5, -1.0, 4.0]   # (in place: the same array, new values)
    close(step(xs), 2 * np.cos(xs) * c)
    c = np.array([1.0, 1.0, 2.0])[:, None] * np.ones((3, 3))   # (a new global of a new shape)
    close(step(np.ones((2, 3, 3))), 2 * np.cos(np.ones((2, 3, 3))) * c)


def test_eager_tape_create_graph_second_order():
    # reverse over reverse: the rule at every level (as JAX when fwd calls the function)
    f, fj = make_vjp(ad.func, ad, True), make_vjp(jax, jnp, True)
    xt = ad.tensor(X, requires_grad=True)
    (g,) = ad.autograd.grad(ad.sum(f(xt, ad.tensor(Y)) ** 2), xt, create_graph=True)
    ad.sum(g).backward()
    close(xt.grad, jnp.sum(jax.jacrev(jax.grad(loss(fj, jnp)))(X, Y), axis=0))


# -- forward mode -----------------------------------------------------------------------------
def test_custom_jvp_forward_mode_matches_jax(backend):
    f, fj = AD["jvp"], JX["jvp"]
    x, y, tx, ty = backend(X), backend(Y), backend(Y), backend(X)
    close(jvp(f, (x, y), (tx, ty)), jax.jvp(fj, (X, Y), (Y, X)))
    close(jacfwd(f, argnums=(0, 1))(x, y), jax.jacfwd(fj, argnums=(0, 1))(X, Y))
    out, lin = linearize(lambda x: f(x, y), x)
    close(lin(ty), jax.linearize(lambda x: fj(x, Y), X)[1](X))
    close(jacfwd(jacfwd(loss(f, ad)))(x, y), jax.jacfwd(jax.jacfwd(loss(fj, jnp)))(X, Y))
    close(vmap(lambda t: jvp(f, (x, y), (t, ty))[1])(backend(np.stack([Y, X]))),
          jax.vmap(lambda t: jax.jvp(fj, (X, Y), (t, X))[1])(np.stack([Y, X])))


def test_custom_vjp_refuses_forward_mode_with_jax_message(backend):
    f = AD["vjp"]
    x, y = backend(X), backend(Y)
    for call in (lambda: jvp(f, (x, y), (x, y)), lambda: jacfwd(f)(x, y),
                 lambda: grad(lambda x: ad.sum(jvp(lambda x: f(x, y), (x,), (x,))[1]))(x)):
        with pytest.raises(TypeError, match=r"can't apply forward-mode autodiff \(jvp\) to a "
                                            r"custom_vjp function\."):
            call()
    assert _core.stack_depth() == 0 and ad.is_grad_enabled()
    with pytest.raises(TypeError, match="forward-mode"):   # and JAX says the same
        jax.jvp(JX["vjp"], (X, Y), (X, Y))


# -- pytrees, nondiff_argnums, keyword arguments ----------------------------------------------
def make_tree(lib, xp):
    @lib.custom_vjp
    def f(p, x):
        return {"out": xp.tanh(p["w"] * x + p["b"]), "aux": p["w"] * 3}

    def fwd(p, x):
        out = f(p, x) if lib is jax else {"out": xp.tanh(p["w"] * x + p["b"]),
                                          "aux": p["w"] * 3}
        return out, (p, x, out["out"])

    def bwd(res, g):
        p, x, t = res
        d = g["out"] * (1 - t ** 2)
        return ({"w": d * x * 2 + 3 * g["aux"], "b": d}, d * p["w"])

    f.defvjp(fwd, bwd)
    return f


def test_pytrees_in_and_out(backend):
    f, fj = make_tree(ad.func, ad), make_tree(jax, jnp)
    P = {"w": X, "b": Y}
    L = lambda f, xp: (lambda p, x: xp.sum(f(p, x)["out"] * f(p, x)["aux"]))
    ref = jax.grad(L(fj, jnp), argnums=(0, 1))(P, Y)
    got = grad(L(f, ad), argnums=(0, 1))({"w": backend(X), "b": backend(Y)}, backend(Y))
    close([got[0]["w"], got[0]["b"], got[1]], [ref[0]["w"], ref[0]["b"], ref[1]])


def make_nondiff(lib, xp):
    from functools import partial

    @partial(lib.custom_vjp, nondiff_argnums=(0,))
    def app(fn, x):
        return fn(x)

    def fwd(fn, x):
        return fn(x), x

    def bwd(fn, x, g):
        return (g * 10.0,)   # (a rule that ignores fn: visible in the result)

    app.defvjp(fwd, bwd)
    return app


def test_nondiff_argnums_passed_first_to_bwd(backend):
    app, appj = make_nondiff(ad.func, ad), make_nondiff(jax, jnp)
    got = grad(lambda x: ad.sum(app(ad.sin, x)))(backend(X))
    close(got, jax.grad(lambda x: jnp.sum(appj(jnp.sin, x)))(X))


def test_keyword_arguments_resolve_to_positions():
    f, fj = AD["vjp"], JX["vjp"]
    close(grad(lambda x: ad.sum(f(x, y=ad.asarray(Y))))(X),
          jax.grad(lambda x: jnp.sum(fj(x, y=Y)))(X))


def test_integer_argument_gets_no_gradient():
    @custom_jvp
    def scale(x, n):
        return x * n

    scale.defjvp(lambda p, t: (p[0] * p[1], t[0] * p[1] * 2))
    close(grad(lambda x: ad.sum(scale(x, np.array(3)))) (X), np.full(3, 6.0))


# -- errors -----------------------------------------------------------------------------------
def test_errors_name_the_function_and_follow_jax():
    @custom_vjp
    def h(x):
        return x * 2

    with pytest.raises(AttributeError, match="No VJP defined for custom_vjp function h using "
                                             "defvjp."):
        h(X)
    h.defvjp(lambda x: (x * 2, None), lambda res, g: g * 2)
    with pytest.raises(TypeError, match=r"Custom VJP bwd rule must produce an output with the "
                                        r"same container \(pytree\) structure"):
        grad(lambda x: ad.sum(h(x)))(X)
    h.defvjp(lambda x: (x * 2, None), lambda res, g: (ad.ones(5),))
    with pytest.raises(ValueError, match="at output\\[0\\] the bwd rule produced an output of "
                                         "shape \\(5,\\)"):
        grad(lambda x: ad.sum(h(x)))(X)
    h.defvjp(lambda x: x * 2, lambda res, g: (g,))
    with pytest.raises(TypeError, match="must produce a pair"):
        grad(lambda x: ad.sum(h(x)))(X)

    @custom_jvp
    def k(x):
        return x

    with pytest.raises(AttributeError, match="No JVP defined for custom_jvp function k using "
                                             "defjvp."):
        k(X)
    k.defjvp(lambda p, t: p[0])
    with pytest.raises(TypeError, match="must produce a pair"):
        jvp(k, (X,), (X,))
    k.defjvp(lambda p, t: (p[0], (t[0],)))
    with pytest.raises(TypeError, match="equal container \\(pytree\\) structures"):
        jvp(k, (X,), (X,))
    k.defjvp(lambda p, t: (p[0], ad.ones(5)))
    with pytest.raises(TypeError, match="corresponding shapes and dtypes"):
        grad(lambda x: ad.sum(k(x)))(X)
    assert _core.stack_depth() == 0 and ad.is_grad_enabled()


def test_closed_over_tracer_is_refused_with_the_fix():
    @custom_jvp
    def f(x):
        return x * w_box[0]

    f.defjvp(lambda p, t: (f(p[0]), t[0]))
    w_box = [None]

    def outer(w):
        w_box[0] = w
        return ad.sum(f(ad.asarray(X)))

    with pytest.raises(TypeError, match="Pass that value as an argument"):
        grad(outer)(np.array(2.0))
    assert _core.stack_depth() == 0 and ad.is_grad_enabled()


def test_arrays_made_inside_are_constants(backend):
    """``zeros``/``ones``/``arange`` made inside the function, the fwd rule (in its residuals)
    and the jvp rule are constants of the enclosing transforms, as in JAX."""
    def make(lib, xp):
        @lib.custom_vjp
        def f(x):
            return xp.sin(x) * xp.arange(1.0, 4.0) + xp.zeros(3)

        f.defvjp(lambda x: (f(x), (xp.cos(x) * xp.ones(3), xp.arange(1.0, 4.0))),
                 lambda r, g: (2 * r[0] * r[1] * g,))

        @lib.custom_jvp
        def h(x):
            return xp.sin(x) * xp.ones(3)

        h.defjvp(lambda p, t: (h(p[0]), 3 * t[0] * xp.arange(1.0, 4.0)))
        return f, h

    (f, h), (fj, hj) = make(ad.func, ad), make(jax, jnp)
    x = backend(X)
    for a, b in ((f, fj), (h, hj)):
        close(grad(lambda x: ad.sum(a(x)))(x), jax.grad(lambda x: jnp.sum(b(x)))(X))
        close(vmap(grad(lambda x: ad.sum(a(x))))(backend(np.stack([X, Y]))),
              jax.vmap(jax.grad(lambda x: jnp.sum(b(x))))(np.stack([X, Y])))
    close(jvp(h, (x,), (x,)), jax.jvp(hj, (X,), (X,)))


def test_no_transform_runs_the_function_itself(backend):
    calls = []

    @custom_vjp
    def f(x):
        calls.append(1)
        return x + 1

    f.defvjp(lambda x: (x + 1, None), lambda r, g: (g,))
    out = f(backend(X))
    assert type(out) is type(backend(X)) and len(calls) == 1
    close(out, X + 1)
