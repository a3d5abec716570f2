"""arrayad.jit(f) means f: arrays the function captures are read when the program runs (NumPy,
torch and array-api-strict arrays written in place, arrayad Tensors updated through ``[]=`` and
``+=``), under ``jit``, ``jit(grad(f))`` and ``grad(jit(f))``; Python values (a closure's float,
a global) stay as they were when traced, as documented; 0.0 and -0.0, and NaNs, are told apart
in the cache key and in the program; ``jit``'s options are checked when it is applied.

The expected values are computed with NumPy from the captured array's current value (the
function is sum(sin(x) * c), its gradient cos(x) * c)."""

import importlib.util
import math
import warnings

import numpy as np
import pytest

import arrayad as ad
from arrayad.func import grad, jvp, vmap

from conftest import Backend, to_numpy

BACKENDS = ["numpy", "array_api_strict"] + (
    ["torch"] if importlib.util.find_spec("torch") is not None else [])

X = np.array([0.1, 0.2, 0.3])


@pytest.fixture(autouse=True)
def checked_passes():
    """Every program the passes make is verified (arrayad._jit.check)."""
    with ad.config.jit_check(True):
        yield


@pytest.fixture(params=BACKENDS)
def be(request):
    return Backend(request.param)


def close(got, want):
    np.testing.assert_allclose(to_numpy(got), want, rtol=1e-12, atol=1e-14)


# -- how a captured array is made and updated

def _raw(be):
    return be(np.ones(3))   # (ones: also checks that x * ones is not dropped as x * 1)


def _tensor(be):
    return be.tensor(np.ones(3))


def _setitem(c):
    c[0] = 5.0


def _iadd(c):
    c += 1.0   # (in place for every backend array and for a Tensor: the object stays)


def _slice_mul(c):
    c[1:] *= 3.0   # (a Tensor: through a view, written back into its base)


CAPTURES = {
    "raw-setitem": (_raw, _setitem),
    "raw-iadd": (_raw, _iadd),
    "tensor-setitem": (_tensor, _setitem),
    "tensor-iadd": (_tensor, _iadd),
    "tensor-slice": (_tensor, _slice_mul),
}


def _now(c):
    return to_numpy(c).astype(np.float64)


TRANSFORMS = ["jit", "jit(grad)", "grad(jit)", "jit(jit)"]


def _apply(kind, f):
    """(the transformed function, its NumPy reference given the captured value now)."""
    if kind == "jit":
        return ad.jit(f), lambda c: np.sum(np.sin(X) * c)
    if kind == "jit(jit)":
        return ad.jit(ad.jit(f)), lambda c: np.sum(np.sin(X) * c)
    if kind == "jit(grad)":
        return ad.jit(grad(f)), lambda c: np.cos(X) * c
    return grad(ad.jit(f)), lambda c: np.cos(X) * c


@pytest.mark.parametrize("kind", TRANSFORMS)
@pytest.mark.parametrize("capture", sorted(CAPTURES))
def test_captured_array_is_read_at_call_time(be, capture, kind):
    make, update = CAPTURES[capture]
    c = make(be)

    def f(v):
        return ad.sum(ad.sin(v) * c)

    fn, ref = _apply(kind, f)
    x = be(X)
    close(fn(x), ref(_now(c)))
    close(fn(x), ref(_now(c)))
    update(c)
    close(fn(x), ref(_now(c)))
    update(c)
    close(fn(x), ref(_now(c)))
    jitted = fn if isinstance(fn, ad._jit._Jitted) else None
    if jitted is not None:
        assert jitted.traces == 1   # the program read the new values: no tracing again


def test_captured_tensor_under_inner_grad_is_followed(be):
    """A grad inside the jitted function hands the captured Tensor on as an alias; jit follows
    it to the Tensor, so the cached program reads the Tensor's updates."""
    c = _tensor(be)
    g = ad.jit(grad(lambda v: ad.sum(ad.sin(v) * c)))
    x = be(X)
    close(g(x), np.cos(X))
    c[0] = 5.0
    close(g(x), np.cos(X) * [5, 1, 1])
    assert g.traces == 1


def test_operations_on_captured_arrays_alone_are_staged(be):
    """exp(c), c.T, c[1:] with no traced argument are instructions of the program (JAX stages
    them too), so they follow later updates of c."""
    c = _tensor(be)
    a = be(np.ones(3))

    def f(v):
        return ad.exp(c) * v + ad.sin(ad.asarray(a)) + ad.flip(c[::-1])

    j = ad.jit(f)
    jg = ad.jit(grad(lambda v: ad.sum(f(v) * f(v))))
    x = be(X)
    for update in (lambda: c.__setitem__(0, 0.5), lambda: c.__iadd__(1.0)):
        close(j(x), to_numpy(f(x)))
        close(jg(x), to_numpy(grad(lambda v: ad.sum(f(v) * f(v)))(x)))
        update()
        close(j(x), to_numpy(f(x)))
        close(jg(x), to_numpy(grad(lambda v: ad.sum(f(v) * f(v)))(x)))
    assert j.traces == 1 and jg.traces == 1


def test_updating_a_captured_array_inside_jit_is_refused(be):
    c = _tensor(be)

    def f(v):
        c.add_(1.0)
        return v * c

    with pytest.raises(RuntimeError, match="in-place operation"):
        ad.jit(f)(be(X))
    np.testing.assert_array_equal(to_numpy(c), np.ones(3))


@pytest.mark.parametrize("capture", ["raw-setitem", "tensor-setitem"])
def test_captured_array_vmap_jvp_of_jit(be, capture):
    make, update = CAPTURES[capture]
    c = make(be)
    j = ad.jit(lambda v: ad.sum(ad.sin(v) * c))
    xs = np.stack([X, 2 * X])
    close(vmap(j)(be(xs)), np.sin(xs) @ _now(c))
    update(c)
    close(vmap(j)(be(xs)), np.sin(xs) @ _now(c))
    close(jvp(j, (be(X),), (be(np.ones(3)),))[1], np.cos(X) @ _now(c))
    assert j.traces == 1


def test_captured_array_used_through_arrayad_is_not_folded(be):
    # asarray(c) inside is the captured array itself (a constant of the program): computing
    # on it must stay in the program, not be folded into a constant at tracing
    c = _raw(be)
    j = ad.jit(lambda v: v * ad.exp(ad.asarray(c) * 2.0))
    close(j(be(X)), X * np.exp(2.0))
    c[0] = 0.5
    close(j(be(X)), X * np.exp(2.0 * np.array([0.5, 1, 1])))
    assert j.traces == 1


def test_captured_array_returned_as_is(be):
    c = _raw(be)
    j = ad.jit(lambda v: (v + 1, c))
    close(j(be(X))[1], np.ones(3))
    c[2] = 7.0
    out = j(be(X))[1]
    close(out, [1, 1, 7])
    c[2] = 8.0   # (the result was a copy: the caller's array does not move with c)
    close(out, [1, 1, 7])


def test_captured_numpy_array_changing_shape_retraces():
    a = np.arange(3.0)
    j = ad.jit(lambda v: v * a)
    close(j(X), X * np.arange(3.0))
    a.shape = (3, 1)   # (in place: the same object, another shape)
    close(j(X), X * np.arange(3.0)[:, None])
    assert j.traces == 2


def test_eager_tape_refuses_a_captured_tensor_updated_before_backward():
    # as without jit: the node saved the captured Tensor, an update before the backward pass
    # would make the derivative wrong, and the backward pass says so
    c = ad.ones(3)
    f = lambda v: ad.sum(ad.sin(v) * c)   # noqa: E731
    j = ad.jit(f)
    j(X)   # (cached: the next call applies the program as one primitive)
    for fn in (f, j):
        c[0] = 1.0
        x = ad.Tensor(X.copy())
        x.requires_grad_()
        y = fn(x)
        c[0] = 5.0
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            y.backward()
    # updated after the backward pass: the next derivative reads the new value
    x = ad.Tensor(X.copy())
    x.requires_grad_()
    j(x).backward()
    close(x.grad, np.cos(X) * [5, 1, 1])


# -- Python values: traced as constants (documented), an argument or static_argnums follows

SCALE = 2.0


@pytest.mark.parametrize("kind", ["jit", "jit(grad)", "grad(jit)"])
def test_python_values_are_constants_of_the_program(be, kind):
    global SCALE
    s = 2.0

    def with_closure(v):
        return ad.sum(ad.sin(v) * s)

    def with_global(v):
        return ad.sum(ad.sin(v) * SCALE)

    x = be(X)
    old = SCALE
    try:
        for f in (with_closure, with_global):
            fn, ref = _apply(kind, f)
            close(fn(x), ref(2.0))
            s, SCALE = 3.0, 3.0
            close(fn(x), ref(2.0))   # documented: the value when traced
            s, SCALE = 2.0, 2.0
    finally:
        SCALE = old
    # the ways around: an argument, or a static argument (a new program per value)
    as_arg = ad.jit(lambda v, k: ad.sum(ad.sin(v) * k))
    static = ad.jit(lambda v, k: ad.sum(ad.sin(v) * k), static_argnums=1)
    for k in (2.0, 3.0):
        close(as_arg(x, k), np.sum(np.sin(X)) * k)
        close(static(x, k), np.sum(np.sin(X)) * k)
    assert static.traces == 2


# -- 0.0 and -0.0, NaN

pytestmark = pytest.mark.filterwarnings("ignore:divide by zero:RuntimeWarning")

def test_signed_zero_arguments_are_two_programs(be):
    x = be(X)
    j = ad.jit(lambda v, y: v / y)
    close(j(x, 0.0), [np.inf] * 3)
    close(j(x, -0.0), [-np.inf] * 3)
    close(j(x, 0.0), [np.inf] * 3)
    g = ad.jit(grad(lambda v, y: ad.sum(v / y)))
    close(g(x, 0.0), [np.inf] * 3)
    close(g(x, -0.0), [-np.inf] * 3)
    s = ad.jit(lambda v, y: v / y, static_argnums=1)
    close(s(x, 0.0), [np.inf] * 3)
    close(s(x, -0.0), [-np.inf] * 3)
    k = ad.jit(lambda v, y: v / y, static_argnames="y")
    close(k(x, y=(0.0)), [np.inf] * 3)
    close(k(x, y=-0.0), [-np.inf] * 3)
    t = ad.jit(lambda v, ys: v / ys[0], static_argnums=1)   # (inside a static tuple)
    close(t(x, (0.0,)), [np.inf] * 3)
    close(t(x, (-0.0,)), [-np.inf] * 3)


def test_signed_zero_literals_are_not_merged(be):
    # x * 0.0 and x * -0.0 differ in sign (CSE must not merge them), as do 1 / (x * 0.0) ...
    f = lambda v: (1.0 / (v * 0.0), 1.0 / (v * -0.0), v * 0.0 + v * -0.0)   # noqa: E731
    j = ad.jit(f)
    x = be(np.array([1.0, -2.0]))
    for _ in range(2):
        a, b, c = j(x)
        close(a, [np.inf, -np.inf])
        close(b, [-np.inf, np.inf])
        np.testing.assert_array_equal(np.signbit(to_numpy(c)), [False, False])
    prog = j.lower(x)
    assert prog.primitive_names().count("multiply") == 2


def test_nan_argument_is_one_program(be):
    x = be(X)
    j = ad.jit(lambda v, y: v * y)
    for _ in range(3):
        assert np.isnan(to_numpy(j(x, math.nan))).all()
    close(j(x, 0.0), [0, 0, 0])
    assert j.traces == 2   # one NaN key (nan != nan), one for 0.0


def test_int_float_bool_literals_stay_apart():
    j = ad.jit(lambda v, y: v * y)
    x = np.array([1, 2], dtype=np.int64)
    assert to_numpy(j(x, 2)).dtype == np.int64
    assert to_numpy(j(x, 2.0)).dtype == np.float64
    assert j.traces == 2


# -- jit's options, checked when jit is applied

def f2(x, y):
    return x * y


@pytest.mark.parametrize("options, error, match", [
    (dict(cache_size=-1), ValueError, r"jit: cache_size must be a non-negative int.*got -1"),
    (dict(cache_size=1.5), TypeError, r"jit: cache_size must be a non-negative int"),
    (dict(cache_size=True), TypeError, r"cache_size"),
    (dict(cache_size="8"), TypeError, r"cache_size"),
    (dict(static_argnums=2), ValueError,
     r"jit\(f2\): static_argnums entry 2 is out of range: f2 takes 2 positional arguments "
     r"\(x, y\)"),
    (dict(static_argnums=-3), ValueError, r"static_argnums entry -3 is out of range"),
    (dict(static_argnums=1.0), TypeError, r"jit: static_argnums must be an int or a tuple"),
    (dict(static_argnums=(0, "y")), TypeError, r"static_argnums must be an int or a tuple"),
    (dict(static_argnums=True), TypeError, r"static_argnums"),
    (dict(static_argnames="z"), ValueError,
     r"jit\(f2\): static_argnames entry 'z' is not a parameter of f2 \(its parameters: x, y\)"),
    (dict(static_argnames=("x", 1)), TypeError, r"jit: static_argnames must be a str or"),
    (dict(static_argnames=3), TypeError, r"static_argnames"),
])
def test_options_are_checked_when_applied(options, error, match):
    with pytest.raises(error, match=match):
        ad.jit(f2, **options)
    with pytest.raises(error, match=match):   # (as a decorator: the same check)
        ad.jit(**options)(f2)


def test_options_checked_before_decorating():
    with pytest.raises(ValueError, match="cache_size"):
        ad.jit(cache_size=-1)   # (no function yet: the option alone is wrong)
    with pytest.raises(TypeError, match=r"jit: expected a function, got int"):
        ad.jit(3)


def test_positional_only_parameter_is_not_a_static_argname():
    def f(x, y, /):
        return x * y
    with pytest.raises(ValueError, match=r"static_argnames entry 'y'.*static_argnums"):
        ad.jit(f, static_argnames="y")


def test_options_that_the_signature_allows():
    def var(*args, **kwargs):
        return args[0] * kwargs.get("k", 1)
    j = ad.jit(var, static_argnums=3, static_argnames="k")   # (*args, **kwargs: any)
    close(j(X, 1.0, 1.0, "static", k=2), 2 * X)
    z = ad.jit(f2, cache_size=0)   # (keeps no program: traces on every call)
    close(z(X, X), X * X)
    close(z(X, X), X * X)
    assert z.traces == 2
    assert ad.jit(f2, static_argnums=-1)(X, 3.0).tolist() == (3 * X).tolist()
    with pytest.raises(ValueError, match=r"jit\(var\): static_argnums entry 3 is out of range "
                       r"for a call with 1 positional argument"):
        j(X)


def test_jit_closing_over_values_of_enclosing_transforms(be):
    """``jit`` of a function that reads a value of a transform around it from its closure
    (``grad(lambda p: jit(lambda x: x * p[0])(x))``): the operations on that value alone belong
    to the enclosing transform, not to the program (they used to leave jit's tracers inside the
    enclosing transform's values: "used after that transform returned"). Checked against JAX."""
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    jax.config.update("jax_enable_x64", True)
    P = np.array([2.0, 3.0])

    def make(lib, xp, x0):
        return lambda p: xp.sum(lib.jit(lambda x: x * p[0] + xp.sin(p[1]) * x ** 2)(x0))

    f, fj = make(ad, ad, be(X)), make(jax, jnp, X)
    p = be(P)
    close(grad(f)(p), jax.grad(fj)(P))
    close(jvp(f, (p,), (be(np.array([1.0, -1.0])),))[1],
          jax.jvp(fj, (P,), (np.array([1.0, -1.0]),))[1])
    close(vmap(f)(be(np.stack([P, P + 1]))), jax.vmap(fj)(np.stack([P, P + 1])))
    close(ad.func.hessian(f)(p), jax.hessian(fj)(P))
