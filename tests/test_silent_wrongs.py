"""The checks of issue 36's "silently wrong" list: what the traced path refuses, the eager path
refuses too; cotangent and tangent dtypes follow torch.func; fori_loop bounds are integers;
jit keys static values by type and sign of zero and replays NumPy scalar constants on any
backend; custom rules, checkpoint and Function draw the same numbers in every run of one call.

Each case runs on NumPy, array-api-strict and torch inputs; the oracles are JAX (x64), torch.func
and, for the random cases, the same seed without the checkpoint or rule (and the gradient's own
mask read back against the value).
"""
import numpy as np
import pytest

import arrayad as ad
from arrayad import func as F
from arrayad.autograd import Function

from conftest import Backend, to_numpy

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
jnp = jax.numpy
lax = jax.lax
torch = pytest.importorskip("torch")


@pytest.fixture(params=["numpy", "array_api_strict", "torch"])
def B(request):
    return Backend(request.param)


def _f32(x):
    return ad.astype(x, ad.float32)


# -- 1. eager control flow checks what the traced path checks -------------------------------

def test_cond_branches_of_another_dtype_shape_or_structure_are_refused(B):
    x = B(np.array([1.0, 2.0]))
    cases = [
        (lambda a: a, _f32, r"output leaf 0 is float32\[2\] from false_fn.*float64\[2\] from "
                            r"true_fn.*dtypes differ.*astype"),
        (lambda a: a, lambda a: a[:1], r"output leaf 0 is float64\[1\] from false_fn.*shapes"),
        (lambda a: (a, a), lambda a: a, r"false_fn \(<lambda>\) returns .* but true_fn"),
    ]
    for t, f, msg in cases:
        for pred in (True, False, np.bool_(True)):
            with pytest.raises(TypeError, match="cond: every branch must return.*" + msg):
                F.cond(pred, t, f, x)
        # the traced path (an array predicate under grad) says the same
        with pytest.raises(TypeError, match="cond: every branch must return"):
            F.grad(lambda p: ad.sum(F.cond(p[0] > 0, t, f, p)[0]))(x)
        # the oracle refuses it too
        with pytest.raises(TypeError):
            lax.cond(True, lambda a: jnp.asarray(t(np.asarray(a))),
                     lambda a: jnp.asarray(f(np.asarray(a))) if not isinstance(f(a), tuple)
                     else f(a), jnp.ones(2))


def test_switch_with_a_python_index_checks_every_branch(B):
    x = B(np.array([1.0, 2.0]))
    branches = [lambda a: a * 2.0, lambda a: ad.sum(a), lambda a: a + 1.0]
    for i in (0, 2, 7, -1):
        with pytest.raises(TypeError, match=r"switch: .*output leaf 0 is float64\[2\] from "
                                            r"branches\[0\].*float64\[\] from branches\[1\]"):
            F.switch(i, branches, x)
    # a Python index under a transform: checked as well
    with pytest.raises(TypeError, match="switch: every branch must return"):
        F.grad(lambda p: ad.sum(F.switch(0, branches, p)))(x)
    with pytest.raises(TypeError):
        lax.switch(0, [lambda a: a * 2.0, lambda a: jnp.sum(a), lambda a: a + 1.0], jnp.ones(2))


def test_cond_with_agreeing_branches_matches_jax(B):
    x = np.array([0.5, -1.5])
    for pred in (True, False):
        got = F.cond(pred, lambda a: ad.sin(a) * 2.0, lambda a: a ** 2, B(x))
        want = lax.cond(pred, lambda a: jnp.sin(a) * 2.0, lambda a: a ** 2, jnp.asarray(x))
        np.testing.assert_allclose(to_numpy(got), np.asarray(want), rtol=1e-12)
    g = F.grad(lambda p: ad.sum(F.cond(True, lambda a: ad.sin(a), lambda a: a ** 2, p)))(B(x))
    np.testing.assert_allclose(to_numpy(g), np.cos(x), rtol=1e-12)


def test_branch_not_taken_changes_nothing(B):
    """The check runs the other branches on copies and puts the random state back: the
    operands keep their values and the stream after the call is the one without the check."""
    x = B(np.array([1.0, 2.0]))

    def writes_and_draws(a):
        a[0] = 100.0
        return a * ad.rand(2, device=a.device)
    ad.manual_seed(3)
    out = F.cond(True, lambda a: a * 3.0, writes_and_draws, x)
    after = to_numpy(ad.rand(2, device=x.device))
    np.testing.assert_allclose(to_numpy(x), [1.0, 2.0])
    np.testing.assert_allclose(to_numpy(out), [3.0, 6.0])
    ad.manual_seed(3)
    np.testing.assert_allclose(to_numpy(ad.rand(2, device=x.device)), after)
    # a draw in a branch not taken is no draw of the transform: jit and vmap's 'error' let it be
    # (the branch taken would be refused)
    def draws(a):
        return a * ad.rand(2)
    np.testing.assert_allclose(
        to_numpy(ad.jit(lambda a: F.cond(True, lambda b: b * 2.0, draws, a))(x)), [2.0, 4.0])
    np.testing.assert_allclose(
        to_numpy(F.vmap(lambda a: F.cond(True, lambda b: b * 2.0, draws, a))(B(np.ones((2, 2))))),
        np.full((2, 2), 2.0))
    with pytest.raises(RuntimeError, match="draws random numbers"):
        ad.jit(lambda a: F.cond(False, lambda b: b * 2.0, draws, a))(x)


def test_plain_while_loop_checks_its_value_and_predicate(B):
    x = B(np.array(1.0))
    with pytest.raises(TypeError, match=r"while_loop: the function <lambda> .*value leaf 0 is "
                                        r"float64\[\] on input but float32\[\].*dtypes.*astype"):
        F.while_loop(lambda v: v < 3.0, lambda v: _f32(v + 1.0), x)
    with pytest.raises(TypeError, match=r"while_loop: .*float64\[1\] on input but "
                                        r"float64\[2\].*shapes"):
        F.while_loop(lambda v: ad.sum(v) < 3.0, lambda v: ad.concat([v, v]),
                     B(np.array([1.0])))
    with pytest.raises(TypeError, match=r"while_loop: cond_fun \(<lambda>\) must return a "
                                        r"boolean scalar.*float64\[\]"):
        F.while_loop(lambda v: v - 3.0, lambda v: v + 1.0, x)
    with pytest.raises(TypeError, match=r"cond_fun .*bool\[2\]"):
        F.while_loop(lambda v: v < 3.0, lambda v: v + 1.0, B(np.array([1.0, 2.0])))
    # the oracle refuses the same
    with pytest.raises(TypeError):
        lax.while_loop(lambda v: v < 3.0, lambda v: (v + 1.0).astype(jnp.float32),
                       jnp.asarray(1.0, jnp.float64))
    # and a loop that keeps its types gives JAX's value
    got = F.while_loop(lambda v: v < 10.0, lambda v: v * 1.5, x)
    want = lax.while_loop(lambda v: v < 10.0, lambda v: v * 1.5, jnp.asarray(1.0))
    np.testing.assert_allclose(to_numpy(got), float(want))


def test_fori_loop_and_scan_check_the_carry_by_their_own_name(B):
    x = B(np.array([1.0, 2.0]))
    for lo, hi in ((0, 3), (0, B(np.array(3)))):
        with pytest.raises(TypeError, match=r"fori_loop: the function body .*value leaf 0 is "
                                            r"float64\[2\] on input but float32\[2\]"):
            def body(i, v):
                return _f32(v * 2.0)
            F.fori_loop(lo, hi, body, x)
    with pytest.raises(TypeError, match=r"fori_loop: .*value leaf 1 is float64\[2\] on input "
                                        r"but float64\[3\].*shapes"):
        F.fori_loop(0, 2, lambda i, v: (v[0], ad.concat([v[1], v[1][:1]])), (x, x))
    with pytest.raises(TypeError, match=r"scan: .*carry leaf 0 is float64\[2\] on input but "
                                        r"float32\[2\]"):
        F.scan(lambda c, _: (_f32(c), None), x, None, length=3)
    with pytest.raises(TypeError):
        lax.fori_loop(0, 3, lambda i, v: (v * 2.0).astype(jnp.float32), jnp.ones(2))


# -- 2. cotangent and tangent dtypes ---------------------------------------------------------

def _tf(B, x):
    """A torch tensor of the same values and dtype as ``x`` (NumPy data)."""
    return torch.asarray(np.asarray(x))


def test_vjp_casts_a_float_cotangent_to_the_output_dtype(B):
    x = np.array([0.3, -1.2, 2.0], np.float32)
    w = np.linspace(-1.0, 1.0, 6).reshape(3, 2).astype(np.float32)
    pairs = [(ad.sin, torch.sin), (lambda a: a, lambda a: a), (ad.sum, torch.sum),
             (lambda a: ad.reshape(a, (3, 1)), lambda a: torch.reshape(a, (3, 1))),
             (lambda a: a @ B(w), lambda a: a @ torch.asarray(w)), (ad.exp, torch.exp)]
    for f, tf in pairs:
        _, tpull = torch.func.vjp(tf, _tf(B, x))
        out, pull = F.vjp(f, B(x))
        ct = np.linspace(-2.0, 1.0, to_numpy(out).size).reshape(to_numpy(out).shape)  # float64
        (g,) = pull(B(ct))
        (tg,) = tpull(_tf(B, ct))
        assert tg.dtype == torch.float32
        assert to_numpy(g).dtype == np.float32, f
        np.testing.assert_allclose(to_numpy(g), tg.numpy(), rtol=1e-6)
    # a real cotangent for a complex output is made complex
    out, pull = F.vjp(lambda a: a * (1.0 + 2.0j), B(np.array([1.0, 2.0])))
    (g,) = pull(B(np.array([1.0, 1.0])))
    np.testing.assert_allclose(to_numpy(g), [1.0, 1.0])


def test_vjp_refuses_integer_and_complex_cotangents_of_a_real_output(B):
    _, pull = F.vjp(lambda a: a * 2.0, B(np.ones(2, np.float32)))
    with pytest.raises(RuntimeError, match=r"vjp_fn: grad_output\[0\] has dtype int64 but "
                                           r"output\[0\] has dtype float32.*astype"):
        pull(B(np.ones(2, np.int64)))
    with pytest.raises(RuntimeError, match=r"grad_output\[0\] has dtype complex128.*imaginary"):
        pull(B(np.ones(2, np.complex128)))
    # torch refuses the complex one too
    _, tpull = torch.func.vjp(lambda a: a * 2.0, torch.ones(2))
    with pytest.raises(RuntimeError):
        tpull(torch.ones(2, dtype=torch.complex64))


def test_jvp_tangent_dtypes_follow_torch_func(B):
    p = np.array([0.3, 1.1], np.float32)
    with pytest.raises(ValueError, match=r"jvp.*Expected tangent to be floating point or "
                                         r"complex, but got int64 for a float32 primal"):
        F.jvp(lambda a: a * 2.0, (B(p),), (B(np.ones(2, np.int64)),))
    with pytest.raises(ValueError, match="torch.func.jvp|Expected tangent"):
        torch.func.jvp(lambda a: a * 2.0, (torch.ones(2),), (torch.ones(2, dtype=torch.int64),))
    with pytest.raises(ValueError, match=r"complex128 tangent for a real \(float32\) primal"):
        F.jvp(lambda a: a * 2.0, (B(p),), (B(np.ones(2, np.complex128)),))
    # a float64 tangent for a float32 primal: as torch.func, no cast (the tangent out is float64)
    t = np.array([1.0, -0.5])
    out, tout = F.jvp(lambda a: ad.sin(a), (B(p),), (B(t),))
    tp, tt = torch.func.jvp(torch.sin, (_tf(B, p),), (_tf(B, t),))
    assert to_numpy(out).dtype == np.float32 and tp.dtype == torch.float32
    assert to_numpy(tout).dtype == np.float64 and tt.dtype == torch.float64
    np.testing.assert_allclose(to_numpy(tout), tt.numpy(), rtol=1e-6)
    # linearize wants the primal's dtype exactly, as torch.func.linearize
    _, jvp_fn = F.linearize(ad.sin, B(p))
    with pytest.raises(RuntimeError, match="linearize jvp_fn: tangent 0 has dtype float64"):
        jvp_fn(B(t))


# -- 3. a complex cotangent for a real input from a user's rule ------------------------------

def test_custom_vjp_bwd_returning_complex_for_a_real_input_is_refused(B):
    @F.custom_vjp
    def f(x):
        return x * 2.0

    def fwd(x):
        return x * 2.0, None

    def bwd_complex(res, g):
        return (g * (2.0 + 1.0j),)
    f.defvjp(fwd, bwd_complex)
    with pytest.raises(TypeError, match=r"Custom VJP bwd rule bwd_complex returned a complex128 "
                                        r"cotangent in output\[0\] for a real input"):
        F.grad(lambda x: ad.sum(f(x)))(B(np.ones(2)))
    t = B.tensor(np.ones(2), requires_grad=True)
    with pytest.raises(TypeError, match="bwd_complex"):
        ad.sum(f(t)).backward()


class _ComplexBackward(Function):
    @staticmethod
    def forward(x):
        return x * 2.0

    @staticmethod
    def setup_context(ctx, inputs, output):
        pass

    @staticmethod
    def backward(ctx, g):
        return g * (2.0 + 1.0j)

    @staticmethod
    def jvp(ctx, t):
        return t * (2.0 + 1.0j)


class _Float64Backward(_ComplexBackward):
    @staticmethod
    def backward(ctx, g):
        return ad.astype(g * 2.0, ad.float64)


class _TorchComplexBackward(torch.autograd.Function):
    @staticmethod
    def forward(x):
        return x * 2.0

    @staticmethod
    def setup_context(ctx, inputs, output):
        pass

    @staticmethod
    def backward(ctx, g):
        return g * (2.0 + 1.0j)


def test_function_backward_and_jvp_returning_complex_for_real_are_refused(B):
    x = np.ones(2)
    with pytest.raises(TypeError, match=r"_ComplexBackwardBackward returned a complex128 "
                                        r"gradient at index 0 for a real input"):
        F.grad(lambda a: ad.sum(_ComplexBackward.apply(a)))(B(x))
    t = B.tensor(x, requires_grad=True)
    with pytest.raises(TypeError, match="_ComplexBackwardBackward returned a complex128"):
        ad.sum(_ComplexBackward.apply(t)).backward()
    with pytest.raises(TypeError, match=r"_ComplexBackward's jvp returned a complex128 tangent"):
        F.jvp(_ComplexBackward.apply, (B(x),), (B(x),))
    # torch refuses the backward too
    tt = torch.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError):
        _TorchComplexBackward.apply(tt).sum().backward()
    # a float64 gradient for a float32 input is cast, as torch does
    g = F.grad(lambda a: ad.sum(_Float64Backward.apply(a)))(B(np.ones(2, np.float32)))
    assert to_numpy(g).dtype == np.float32
    np.testing.assert_allclose(to_numpy(g), [2.0, 2.0])


def test_custom_jvp_rule_returning_complex_for_real_is_refused(B):
    @F.custom_jvp
    def f(x):
        return x * 2.0

    @f.defjvp
    def f_jvp(primals, tangents):
        return f(primals[0]), tangents[0] * (2.0 + 1.0j)
    with pytest.raises(TypeError, match=r"Custom JVP rule .*complex128 tangent for a real"):
        F.jvp(f, (B(np.ones(2)),), (B(np.ones(2)),))


# -- 4. fori_loop bounds ---------------------------------------------------------------------

def test_fori_loop_bounds_are_integers_of_one_type(B):
    x = B(np.array(1.0))

    def body(i, v):
        return v * 2.0
    for lo, hi, shown in ((0, 3.5, "int 0 and float 3.5"), (0.0, 3, "float 0.0 and int 3"),
                          (True, 3, "bool True and int 3"),
                          (np.int64(0), np.int32(3), "int64.*int32"),
                          (0, B(np.array(3.0)), r"int 0 and float64\[\]"),
                          (B(np.array(0, np.int32)), B(np.array(3, np.int64)),
                           r"int32\[\] and int64\[\]")):
        with pytest.raises(TypeError, match=r"fori_loop: lower and upper must be integers of "
                                            r"the same integer type.*" + shown):
            F.fori_loop(lo, hi, body, x)
    # JAX refuses what it types differently
    for lo, hi in ((0, 3.5), (np.int64(0), np.int32(3)), (True, 3)):
        with pytest.raises(TypeError):
            lax.fori_loop(lo, hi, lambda i, v: v * 2.0, 1.0)


def test_numpy_integer_bounds_are_static(B):
    """np.int32(3) is a trip count known now: fori_loop is then a scan, which reverse mode
    differentiates (an array bound would make it a while_loop, which it refuses)."""
    x = np.array([0.5, -0.25])
    for lo, hi in ((0, np.int32(3)), (np.int64(1), np.int64(4)), (np.int16(0), 3)):
        g = F.grad(lambda p: ad.sum(F.fori_loop(lo, hi, lambda i, v: ad.sin(v), p)))(B(x))
        want = jax.grad(lambda p: jnp.sum(lax.fori_loop(int(lo), int(hi),
                                                        lambda i, v: jnp.sin(v), p)))(x)
        np.testing.assert_allclose(to_numpy(g), np.asarray(want), rtol=1e-12)
    # an array bound beside a Python int: the int takes its dtype; forward mode works
    hi = B(np.array(3, np.int32))
    out, t = F.jvp(lambda p: F.fori_loop(0, hi, lambda i, v: v * 2.0, p), (B(x),),
                   (B(np.ones(2)),))
    np.testing.assert_allclose(to_numpy(out), x * 8.0)
    np.testing.assert_allclose(to_numpy(t), [8.0, 8.0])


# -- 5. jit keys static Python values by value, type and sign of zero ------------------------

def test_jit_static_values_keyed_by_sign_of_zero_and_type(B):
    for kw in ({"static_argnums": 1}, {}):
        inv = ad.jit(lambda x, s: 1.0 / (x * s), **kw)
        x = B(np.ones(2))
        with np.errstate(divide="ignore"):
            for s, sign in ((0.0, 1.0), (-0.0, -1.0), (0.0, 1.0), (-0.0, -1.0),
                            (np.float64(-0.0), -1.0), (np.float64(0.0), 1.0)):
                out = to_numpy(inv(x, s))
                assert np.all(np.isinf(out)) and np.all(np.sign(out) == sign), (s, out)
    by_name = ad.jit(lambda x, s: 1.0 / (x * s), static_argnames=("s",))
    with np.errstate(divide="ignore"):
        for s, sign in ((-0.0, -1.0), (0.0, 1.0), (-0.0, -1.0)):
            assert np.all(np.sign(to_numpy(by_name(B(np.ones(2)), s=s))) == sign)
        mul = ad.jit(lambda x, s: x * s, **kw)
        xi = B(np.array([1, 2], np.int32))

        def kind(fn, s):
            try:
                return to_numpy(fn(xi, s)).dtype
            except TypeError:   # (array-api-strict: no float scalar with an int array)
                return TypeError
        got = [kind(mul, s) for s in (1, 1.0, True, 1, 1.0)]
        want = [kind(lambda a, b: a * b, s) for s in (1, 1.0, True, 1, 1.0)]
        assert got == want, (B, got, want)
        assert got[1] != got[0]


# -- 6. jit replays a NumPy scalar constant on any backend -----------------------------------

def test_jit_replays_numpy_scalar_constants_on_every_backend(B):
    def gp_like(x):
        n = x.shape[0]
        return ad.sum(x * x) / 2.0 + n / 2 * np.log(2 * np.pi) + np.float32(0.5) * x[0]

    def with_0d_array(x):
        return x * np.asarray(2.0) + np.float64(1.0)
    x = np.array([1.0, 2.0, 3.0])
    for fn in (gp_like, with_0d_array):
        want = fn(x)   # NumPy's own value
        j = ad.jit(fn)
        for _ in range(3):   # the trace, then replays
            np.testing.assert_allclose(to_numpy(j(B(x))), want, rtol=1e-6)
        g = ad.jit(F.grad(lambda p: ad.sum(fn(p))))
        for _ in range(2):
            np.testing.assert_allclose(to_numpy(g(B(x))),
                                       to_numpy(F.grad(lambda p: ad.sum(fn(p)))(x)), rtol=1e-6)


# -- 7. one call's runs of a drawing function draw the same numbers --------------------------

def _dropout(x):
    m = ad.astype(ad.rand(*x.shape) < 0.5, x.dtype)
    return x * x * m * 2.0


@F.custom_vjp
def _cv_dropout(x):
    return _dropout(x)


def _cv_fwd(x):
    m = ad.astype(ad.rand(*x.shape) < 0.5, x.dtype)
    return x * x * m * 2.0, (x, m)


def _cv_bwd(res, g):
    x, m = res
    return (g * 4.0 * x * m,)


_cv_dropout.defvjp(_cv_fwd, _cv_bwd)


class _Dropout(Function):
    generate_vmap_rule = True

    @staticmethod
    def forward(x):
        m = ad.astype(ad.rand(*x.shape) < 0.5, x.dtype)
        return x * x * m * 2.0, m

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0], output[1])

    @staticmethod
    def backward(ctx, g, gm):
        x, m = ctx.saved_tensors
        return g * 4.0 * x * m


_BLOCKS = {"checkpoint": F.checkpoint(_dropout), "custom_vjp": _cv_dropout,
           "Function": lambda x: _Dropout.apply(x)[0]}
_X = np.arange(1.0, 9.0).reshape(2, 4)


def _mask_agrees(x, grad, value):
    """The mask the gradient used (4 x m) gives the value (2 sum x^2 m), lane by lane."""
    m = to_numpy(grad) / (4.0 * x)
    assert set(np.unique(m)) <= {0.0, 1.0}
    np.testing.assert_allclose(2.0 * np.sum(x * x * m, axis=-1), to_numpy(value))


@pytest.mark.parametrize("mode", ["same", "different"])
@pytest.mark.parametrize("kind", sorted(_BLOCKS))
def test_vmap_grad_of_a_drawing_block_draws_once(B, kind, mode):
    blk = _BLOCKS[kind]
    ad.manual_seed(7)
    g, v = F.vmap(F.grad_and_value(lambda x: ad.sum(blk(x))), randomness=mode)(B(_X))
    after = to_numpy(ad.rand(3))
    ad.manual_seed(7)
    g0, v0 = F.vmap(F.grad_and_value(lambda x: ad.sum(_dropout(x))), randomness=mode)(B(_X))
    after0 = to_numpy(ad.rand(3))
    for a in (g, v):
        assert not isinstance(a, ad.Tensor) and type(a) is type(B(_X)), type(a)
    np.testing.assert_allclose(to_numpy(g), to_numpy(g0))
    np.testing.assert_allclose(to_numpy(v), to_numpy(v0))
    np.testing.assert_allclose(after, after0)   # (the stream goes on as without the rule)
    _mask_agrees(_X, g, v)
    if mode == "same":
        m = to_numpy(g) / (4.0 * _X)
        np.testing.assert_array_equal(m[0], m[1])


@pytest.mark.parametrize("mode", ["same", "different"])
@pytest.mark.parametrize("kind", sorted(_BLOCKS))
def test_eager_backward_through_vmap_of_a_drawing_block(B, kind, mode):
    blk = _BLOCKS[kind]
    ad.manual_seed(11)
    x = B.tensor(_X, requires_grad=True)
    y = F.vmap(lambda r: ad.sum(blk(r)), randomness=mode)(x)
    ad.sum(y).backward()
    ad.manual_seed(11)
    x0 = B.tensor(_X, requires_grad=True)
    y0 = F.vmap(lambda r: ad.sum(_dropout(r)), randomness=mode)(x0)
    ad.sum(y0).backward()
    np.testing.assert_allclose(to_numpy(y), to_numpy(y0))
    np.testing.assert_allclose(to_numpy(x.grad), to_numpy(x0.grad))
    _mask_agrees(_X, x.grad, y)


def test_grad_of_a_drawing_checkpoint_and_custom_vjp_without_vmap(B):
    for kind in ("checkpoint", "custom_vjp", "Function"):
        ad.manual_seed(5)
        g, v = F.grad_and_value(lambda x: ad.sum(_BLOCKS[kind](x)))(B(_X[0]))
        _mask_agrees(_X[0], g, v)


# -- 8. creation follows the inputs' backend ------------------------------------------------

@pytest.fixture(params=["array_api_strict", "torch"])
def Other(request):
    return Backend(request.param)


def test_creation_with_a_backends_dtype_stays_raw(Other):
    """Code on raw arrays stays on raw arrays: arange(n, dtype=x.dtype) is x's backend's own
    array, which its operators take, and arrayad's operations on both return raw arrays; a
    Tensor's program keeps making Tensors, also with device=x.device."""
    x = Other(np.array([1.0, 2.0, 3.0]))
    for made in (ad.arange(3, dtype=x.dtype), ad.zeros(3, dtype=x.dtype) + 2,
                 ad.asarray([0.0, 1.0, 2.0], dtype=x.dtype), ad.linspace(0, 2, 3, dtype=x.dtype)):
        assert type(made) is type(x)
        np.testing.assert_allclose(to_numpy(x * made), np.array([1.0, 2.0, 3.0]) * to_numpy(made))
        assert type(ad.sin(x) + made) is type(x)
    t = ad.Tensor(x)
    for made in (ad.arange(3, dtype=t.dtype, device=t.device), ad.zeros(3, device=t.device)):
        assert isinstance(made, ad.Tensor) and ad.backends.backend_of(made) is Other.adapter
    # inside a transform every value is arrayad, on the inputs' backend (as before)
    g = F.grad(lambda v: ad.sum(v * ad.arange(3, dtype=x.dtype)))(x)
    np.testing.assert_allclose(to_numpy(g), [0.0, 1.0, 2.0])


def test_an_index_made_from_python_data_meets_every_backend(Other):
    """ad.asarray([0, 2]) is an eager Tensor of the default backend (NumPy): as an index of
    another backend's array it is host data, converted as a list or a NumPy array is; a float
    Tensor of another backend still does not mix."""
    a = np.arange(12.0).reshape(4, 3)
    x = Other(a)
    rows, mask = ad.asarray([3, 0, 0]), ad.asarray([True, False, True, False])
    np.testing.assert_array_equal(to_numpy(ad.take(x, rows, axis=0)), a[[3, 0, 0]])
    t = ad.Tensor(x)   # (a raw array's own [] is its backend's)
    np.testing.assert_array_equal(to_numpy(t[rows]), a[[3, 0, 0]])
    np.testing.assert_array_equal(to_numpy(t[mask]), a[[True, False, True, False]])
    want = np.zeros_like(a)
    np.add.at(want, [3, 0, 0], 1.0)
    np.testing.assert_allclose(to_numpy(F.grad(lambda t: ad.sum(ad.take(t, rows, axis=0)))(x)),
                               want)
    with pytest.raises(TypeError, match="cannot mix arrays of two backends.*numpy"):
        ad.add(x, ad.asarray(np.ones((4, 3))))
