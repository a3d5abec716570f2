"""Inputs at the edges, each checked against torch, NumPy or a closed form:

* ``linalg.vector_norm``'s derivatives at zero vectors and at zero entries, for every ``ord``
  (torch's ``torch.linalg.vector_norm`` under torch.func.grad / jvp / vmap is the reference);
* NumPy inputs whose meaning arrayad would lose silently (masked arrays, ``numpy.matrix``,
  ``longdouble`` scalars) are refused by name with the fix;
* copies and pickles of an ``arrayad.Generator`` are independent generators in the same state;
* the transforms' arguments (``randomness``, ``argnums``, ``chunk_size``) are checked alike;
* ``autograd.Function.jvp`` returning the wrong number of tangents gets torch's error;
* creation functions name the argument that is wrong and what it expects.
"""
import copy
import math
import pickle

import numpy as np
import pytest

import arrayad as ad
from arrayad.autograd import Function, forward_ad
from arrayad.func import grad, hessian, jacfwd, jacrev, jvp, vmap
from conftest import to_numpy

inf = math.inf

# -- vector_norm at zeros ----------------------------------------------------------------------
# torch's rule, which arrayad follows: the gradient is 0 wherever the plain formula would give
# 0 * inf. Where that 0 is a choice rather than the derivative, the true one is undefined:
# * at x = 0 every norm (ord > 0) has a kink (its directional derivative is the norm of the
#   direction, not linear in it): 0 is a subgradient;
# * for 0 < ord < 1, |x_i| ** ord has infinite one-sided derivatives at x_i = 0: 0 is torch's
#   value (the entry takes no part in the sum);
# * for ord < 0 one zero entry makes the norm 0 (1 / sum(1 / |x_i| ** |ord|) ** (1 / |ord|)),
#   and moving that entry is again a kink |t|: 0; the other entries' derivatives are truly 0.
# For ord > 1 the zero entries' derivative 0 is the true one.
ORDS = [1, 2, 3, 0.5, 1.5, -1, -2, inf, -inf, 0]
POINTS = {
    "zero": [0.0, 0.0, 0.0],
    "one zero": [0.0, 3.0, -4.0],
    "two zeros": [0.0, 0.0, 2.0],
    "signed zero": [-0.0, 1.0, 0.0],
    "no zero, ties": [1.0, -1.0, 0.5],
}
TANGENT = [1.0, 2.0, 3.0]


def _torch_norm_derivatives(x, ord):
    torch = pytest.importorskip("torch")
    tf = torch.func
    xt = torch.as_tensor(x)
    f = lambda v: torch.linalg.vector_norm(v, ord=ord)   # noqa: E731
    g = tf.grad(f)(xt)
    t = tf.jvp(f, (xt,), (torch.as_tensor(np.asarray(TANGENT)),))[1]
    vg = tf.vmap(tf.grad(f))(torch.stack([xt, 2 * xt]))
    return f(xt).numpy(), g.numpy(), t.numpy(), vg.numpy()


@pytest.mark.parametrize("ord", ORDS, ids=str)
@pytest.mark.parametrize("point", list(POINTS), ids=str)
def test_vector_norm_derivatives_at_zeros_match_torch(backend, ord, point):
    x = np.asarray(POINTS[point])
    value, g_ref, t_ref, vg_ref = _torch_norm_derivatives(x, ord)
    f = lambda v: ad.linalg.vector_norm(v, ord=ord)   # noqa: E731
    xb = backend(x)
    np.testing.assert_allclose(to_numpy(f(xb)), value, rtol=1e-12)
    np.testing.assert_allclose(to_numpy(grad(f)(xb)), g_ref, rtol=1e-12, atol=0)
    np.testing.assert_allclose(to_numpy(jvp(f, (xb,), (backend(np.asarray(TANGENT)),))[1]),
                               t_ref, rtol=1e-12, atol=1e-15)
    vg = vmap(grad(f))(backend(np.stack([x, 2 * x])))
    np.testing.assert_allclose(to_numpy(vg), vg_ref, rtol=1e-12, atol=0)


@pytest.mark.parametrize("ord", ORDS, ids=str)
def test_vector_norm_complex_at_zeros_matches_torch(ord):
    torch = pytest.importorskip("torch")
    for x in (np.zeros(2, complex), np.array([0j, 3 + 4j, 1 - 1j])):
        ref = torch.func.grad(lambda v: torch.linalg.vector_norm(v, ord=ord))(torch.tensor(x))
        got = grad(lambda v: ad.linalg.vector_norm(v, ord=ord))(x)
        np.testing.assert_allclose(got, ref.numpy(), rtol=1e-12, atol=0)


@pytest.mark.parametrize("ord", [3, 0.5, -1])
def test_vector_norm_general_ord_keeps_axis_and_keepdims(ord):
    torch = pytest.importorskip("torch")
    x = np.array([[0.0, 0.0, 0.0], [1.0, 0.0, -2.0]])
    for keepdims in (False, True):
        got = jacrev(lambda v: ad.linalg.vector_norm(v, ord=ord, axis=1, keepdims=keepdims))(x)
        ref = torch.func.jacrev(lambda v: torch.linalg.vector_norm(
            v, ord=ord, dim=1, keepdim=keepdims))(torch.tensor(x))
        np.testing.assert_allclose(got, ref.numpy(), rtol=1e-12, atol=0)


# -- NumPy inputs arrayad must not take silently -------------------------------------------------
MASKED = "masked arrays are not supported.*x.filled.*numpy.ma.getdata"


def _masked():
    return np.ma.array([1.0, 2.0, 3.0], mask=[0, 1, 0])


@pytest.mark.parametrize("call", [
    lambda m: ad.sum(m),
    lambda m: ad.sin(m),
    lambda m: ad.asarray(m),
    lambda m: ad.tensor(m),
    lambda m: ad.Tensor(m),
    lambda m: ad.asarray([m, m]),
    lambda m: ad.zeros_like(m),
    lambda m: ad.ones(3) + m,
    lambda m: ad.where(ad.ones(3) > 0, m, 0.0),
    lambda m: ad.linalg.vector_norm(m),
    lambda m: grad(ad.sum)(m),
    lambda m: vmap(ad.sin)(m),
    lambda m: jvp(ad.sin, (m,), (np.ones(3),)),
    lambda m: jvp(ad.sin, (np.ones(3),), (m,)),
], ids=["sum", "sin", "asarray", "tensor", "Tensor", "asarray-list", "zeros_like", "add",
        "where", "vector_norm", "grad", "vmap", "jvp-primal", "jvp-tangent"])
def test_masked_arrays_are_refused_by_name(call):
    # (ad.sum of this array was 6: the masked 2 counted; JAX refuses them the same way)
    with pytest.raises(TypeError, match=MASKED):
        call(_masked())


def test_masked_array_on_the_left_is_not_silent():
    # MaskedArray.__add__ runs first: NumPy computes a masked result that keeps the mask (an
    # arrayad array is plain data to it), never a number that dropped the mask; with a value
    # that needs a derivative, the conversion refuses
    out = _masked() + ad.ones(3)
    assert isinstance(out, np.ma.MaskedArray)
    np.testing.assert_array_equal(np.ma.getmaskarray(out), np.ma.getmaskarray(_masked()))
    with pytest.raises((TypeError, RuntimeError)):
        _masked() + ad.tensor([1.0, 1.0, 1.0], requires_grad=True)


def test_the_fixes_the_masked_error_names_work():
    m = _masked()
    assert float(ad.sum(m.filled(0.0))) == 4.0
    assert float(ad.sum(np.ma.getdata(m))) == 6.0


MATRIX = "numpy.matrix is not supported.*numpy.asarray"
no_matrix_warning = pytest.mark.filterwarnings("ignore:the matrix subclass:PendingDeprecationWarning")


@no_matrix_warning
@pytest.mark.parametrize("call", [
    lambda M: ad.multiply(M, M),        # matrix semantics: M * M would be a matrix product
    lambda M: ad.ones((2, 2)) * M,
    lambda M: ad.sum(M, axis=0),        # matrix semantics: keeps two axes
    lambda M: grad(lambda x: ad.sum(x * x))(M),
    lambda M: vmap(ad.sin)(M),
], ids=["multiply", "mul-operator", "sum", "grad", "vmap"])
def test_matrix_inputs_are_refused_by_name_in_operations(call):
    with pytest.raises(TypeError, match=MATRIX):
        call(np.matrix([[1.0, 2.0], [3.0, 4.0]]))


@no_matrix_warning
def test_asarray_and_tensor_make_a_plain_array_of_a_matrix():
    M = np.matrix([[1.0, 2.0], [3.0, 4.0]])
    A = np.asarray(M)   # the reference: NumPy's own conversion
    for make in (ad.asarray, ad.tensor):
        t = make(M)
        assert type(t._value) is np.ndarray and t.shape == (2, 2)
        np.testing.assert_array_equal(to_numpy(t * t), A * A)          # elementwise
        np.testing.assert_array_equal(to_numpy(ad.sum(t, axis=0)), A.sum(axis=0))
    assert ad.asarray([M, M]).shape == (2, 2, 2)


needs_longdouble = pytest.mark.skipif(np.dtype(np.longdouble).itemsize <= 8,
                                      reason="longdouble is float64 on this platform")


@needs_longdouble
@pytest.mark.parametrize("call", [
    lambda v: ad.sin(v),
    lambda v: ad.multiply(v, v),
    lambda v: ad.ones(2) * v,
    lambda v: v * ad.ones(2),
    lambda v: ad.asarray(v),
    lambda v: ad.tensor(v),
    lambda v: ad.asarray([v, v]),
    lambda v: ad.full(2, v),
    lambda v: grad(ad.sin)(v),
    lambda v: grad(lambda x: ad.sum(x * v))(np.ones(2)),
], ids=["sin", "multiply", "mul", "rmul", "asarray", "tensor", "asarray-list", "full", "grad",
        "grad-constant"])
def test_longdouble_scalars_are_refused_as_float128_arrays_are(call):
    # a float128 array is refused by name: so is a longdouble scalar (sin of one gave a
    # float128 array, multiply two of them a float128 result)
    with pytest.raises(TypeError, match="unsupported dtype.*float128"):
        call(np.longdouble(1.5))
    with pytest.raises(TypeError, match="unsupported dtype.*float128"):
        ad.asarray(np.ones(2, np.longdouble))


@needs_longdouble
def test_longdouble_error_names_the_conversion():
    with pytest.raises(TypeError, match=r"numpy\.longdouble scalar.*numpy\.float64\(x\)"):
        ad.sin(np.longdouble(1.5))
    with pytest.raises(TypeError, match=r"numpy\.float32\(x\)"):
        ad.sin(np.float16(1.5))
    with pytest.raises(TypeError, match=r"complex256.*numpy\.complex128\(x\)"):
        ad.tensor(np.clongdouble(1.5))


def test_numpy_scalars_of_arrayad_dtypes_still_work(backend):
    x = backend(np.array([1.0, 2.0]))
    np.testing.assert_allclose(to_numpy(ad.sin(np.float64(1.0))), np.sin(1.0))
    np.testing.assert_allclose(to_numpy(ad.multiply(x, np.float64(2.0))), [2.0, 4.0])
    np.testing.assert_allclose(grad(lambda v: ad.sum(v * np.float32(3.0)))(np.ones(2)), [3, 3])
    assert int(ad.sum(ad.asarray(np.int64(3)))) == 3


# -- Generator copies --------------------------------------------------------------------------
COPIES = {"copy": copy.copy, "deepcopy": copy.deepcopy,
          "pickle": lambda g: pickle.loads(pickle.dumps(g))}


@pytest.mark.parametrize("how", list(COPIES))
def test_generator_copies_are_independent_and_in_the_same_state(backend, how):
    # torch.Generator: copy.copy / deepcopy / pickle give an independent generator in the same
    # state (the reference behaviour: checked here on torch itself where it is installed)
    g = ad.Generator(backend=backend.name, seed=5)
    with ad.backend(backend.name):
        ad.randn(3, generator=g)                       # not at the start of the stream
        c = COPIES[how](g)
        assert c is not g and c.backend is g.backend and c.initial_seed() == 5
        from_copy = [ad.randn(3, generator=c), ad.rand(2, generator=c),
                     ad.randint(0, 100, (4,), generator=c)]
        from_original = [ad.randn(3, generator=g), ad.rand(2, generator=g),
                         ad.randint(0, 100, (4,), generator=g)]
        for a, b in zip(from_copy, from_original):
            np.testing.assert_array_equal(to_numpy(a), to_numpy(b))
        # independent: drawing from one leaves the other where it was
        state = g.get_state()
        ad.randn(5, generator=c)
        after = ad.randn(2, generator=g)
        g.set_state(state)
        np.testing.assert_array_equal(to_numpy(ad.randn(2, generator=g)), to_numpy(after))


@pytest.mark.parametrize("how", list(COPIES))
def test_torch_generator_copies_behave_the_same(how):
    torch = pytest.importorskip("torch")
    g = torch.Generator().manual_seed(5)
    torch.randn(3, generator=g)
    c = COPIES[how](g)
    assert torch.equal(torch.randn(3, generator=c), torch.randn(3, generator=g))


def test_generator_with_a_device_survives_pickling():
    xps = pytest.importorskip("array_api_strict")
    g = ad.Generator(device=xps.asarray([1.0]).device, seed=3)
    c = pickle.loads(pickle.dumps(g))
    assert c.device == g.device
    with ad.backend("array_api_strict"):
        np.testing.assert_array_equal(to_numpy(ad.randn(2, generator=c)),
                                      to_numpy(ad.randn(2, generator=g)))


# -- transform arguments -----------------------------------------------------------------------
TRANSFORMS = {"jacfwd": jacfwd, "jacrev": jacrev, "hessian": hessian, "vmap": vmap}


@pytest.mark.parametrize("name", ["jacfwd", "vmap"])
@pytest.mark.parametrize("randomness", ["bogus", None, 1, "Error"])
def test_randomness_is_checked_when_the_transform_is_made(name, randomness):
    with pytest.raises(RuntimeError, match=f"^{name}: Only allowed values for randomness are "
                                           f"'error', 'different', or 'same'"):
        TRANSFORMS[name](ad.sin, randomness=randomness)


@pytest.mark.parametrize("name", ["jacfwd", "vmap"])
@pytest.mark.parametrize("randomness", ["error", "different", "same"])
def test_valid_randomness_is_accepted(name, randomness):
    x = np.array([1.0, 2.0])
    out = TRANSFORMS[name](lambda v: ad.sin(v), randomness=randomness)(x)
    expected = np.diag(np.cos(x)) if name == "jacfwd" else np.sin(x)
    np.testing.assert_allclose(out, expected)


@pytest.mark.parametrize("name", list(TRANSFORMS))
@pytest.mark.parametrize("chunk_size", [0, -1, 1.5, True, "2"])
def test_chunk_size_is_checked_alike(name, chunk_size):
    with pytest.raises(ValueError, match=f"^{name}: `chunk_size` should be None or an integer "
                                         f"greater than 0"):
        TRANSFORMS[name](ad.sin, chunk_size=chunk_size)


@pytest.mark.parametrize("name", ["jacfwd", "jacrev", "hessian"])
@pytest.mark.parametrize("argnums, message", [
    ("a", "argnums must be int or Tuple"),   # (a list is JAX's spelling of a tuple: accepted)
    (True, "argnums must be int or Tuple"),
    ((0, 1.0), "argnums must be int or Tuple"),
    ((), "argnums must be non-empty"),
    ((0, 0), "argnums elements must be unique"),
])
def test_argnums_is_checked_when_the_transform_is_made(name, argnums, message):
    with pytest.raises(RuntimeError, match=f"^{name}: {message}"):
        TRANSFORMS[name](ad.sin, argnums=argnums)


@pytest.mark.parametrize("name", ["jacfwd", "jacrev", "hessian"])
def test_argnums_out_of_range_names_the_transform_when_called(name):
    f = TRANSFORMS[name](lambda x: ad.sum(ad.sin(x)), argnums=1)
    with pytest.raises(RuntimeError, match=f"^{name}: Got argnum=1, but only 1 positional"):
        f(np.ones(2))


def test_hessian_still_right_with_checked_arguments():
    x = np.array([0.3, -0.7])
    np.testing.assert_allclose(hessian(lambda v: ad.sum(ad.sin(v)), argnums=0, chunk_size=1)(x),
                               np.diag(-np.sin(x)), rtol=1e-12)
    h = hessian(lambda a, b: ad.sum(a * a * b), argnums=(0, 1))(x, x)
    np.testing.assert_allclose(h[0][1], np.diag(2 * x), rtol=1e-12)


# -- Function.jvp's number of tangents ----------------------------------------------------------
def _function(name, forward, jvp_rule):
    return type(name, (Function,), {
        "forward": staticmethod(forward),
        "setup_context": staticmethod(lambda ctx, inputs, output: None),
        "backward": staticmethod(lambda ctx, *g: g[0]),
        "jvp": staticmethod(jvp_rule),
    })


WRONG_COUNTS = [
    ("TooMany", lambda x: x * 2, lambda ctx, t: (t * 2, t * 2), 1, 2),
    ("NoTangent", lambda x: x * 2, lambda ctx, t: (), 1, 0),
    ("TooFew", lambda x: (x * 2, x * 3), lambda ctx, t: t * 2, 2, 1),
    ("TooFewTuple", lambda x: (x * 2, x * 3), lambda ctx, t: (t * 2,), 2, 1),
    ("TooManyOfTwo", lambda x: (x * 2, x * 3), lambda ctx, t: (t, t, t), 2, 3),
]


@pytest.mark.parametrize("name, forward, rule, expected, got", WRONG_COUNTS,
                         ids=[c[0] for c in WRONG_COUNTS])
def test_function_jvp_with_the_wrong_number_of_tangents(backend, name, forward, rule, expected,
                                                        got):
    # torch: "Function's jvp returned an invalid number of forward gradients (expected 1 but
    # got 2)"; arrayad names the Function as well
    Fn = _function(name, forward, rule)
    x = backend(np.ones(2))
    pattern = (f"function {name}'s jvp returned an invalid number of forward gradients "
               fr"\(expected {expected} but got {got}\)")
    with pytest.raises(RuntimeError, match=pattern):
        jvp(Fn.apply, (x,), (backend(np.ones(2)),))
    with pytest.raises(RuntimeError, match=pattern):
        jacfwd(lambda v: Fn.apply(v))(x)
    with forward_ad.dual_level():
        dual = forward_ad.make_dual(ad.Tensor(x), ad.Tensor(backend(np.ones(2))))
        with pytest.raises(RuntimeError, match=pattern):
            Fn.apply(dual)


def test_function_jvp_tangent_that_is_not_an_array():
    Fn = _function("ListTangent", lambda x: x * 2, lambda ctx, t: [t * 2])
    with pytest.raises(TypeError, match="function ListTangent's jvp returned a list as the "
                                        "tangent of output 0; expected an array or None"):
        jvp(Fn.apply, (np.ones(2),), (np.ones(2),))


def test_function_jvp_one_tangent_in_a_tuple_is_accepted_as_torch():
    Fn = _function("OneTuple", lambda x: x * 2, lambda ctx, t: (t * 2,))
    out, tangent = jvp(Fn.apply, (np.ones(2),), (np.array([1.0, 3.0]),))
    np.testing.assert_array_equal(tangent, [2.0, 6.0])   # d(2x) = 2 dx
    torch = pytest.importorskip("torch")

    class Ref(torch.autograd.Function):
        @staticmethod
        def forward(x):
            return x * 2

        @staticmethod
        def setup_context(ctx, inputs, output):
            pass

        @staticmethod
        def jvp(ctx, t):
            return (t * 2,)

    ref = torch.func.jvp(Ref.apply, (torch.ones(2),), (torch.tensor([1.0, 3.0]),))[1]
    np.testing.assert_array_equal(tangent, ref.numpy())


# -- creation functions' arguments ---------------------------------------------------------------
BAD_CREATION = [
    ("zeros(2.5)", lambda: ad.zeros(2.5), TypeError,
     r"^zeros: shape must be an int or a tuple of ints, got 2\.5 \(a float\); convert it with "
     r"int\(\)"),
    ("ones(2.5)", lambda: ad.ones(2.5), TypeError,
     r"^ones: shape must be an int or a tuple of ints, got 2\.5 \(a float\)"),
    ("empty(None)", lambda: ad.empty(None), TypeError,
     r"^empty: shape must be an int or a tuple of ints, got None"),
    ("full('3')", lambda: ad.full("3", 1.0), TypeError,
     r"^full: shape must be an int or a tuple of ints, got '3' \(a str\)"),
    ("zeros((2, 2.5))", lambda: ad.zeros((2, 2.5)), TypeError,
     r"^zeros: shape must be an int or a tuple of ints, got \(2, 2\.5\) \(a float dimension\)"),
    ("ones(True)", lambda: ad.ones(True), TypeError, r"^ones: shape .* got True \(a bool\)"),
    ("zeros(array)", lambda: ad.zeros(np.array([2, 3])), TypeError,
     r"^zeros: shape must be an int or a tuple of ints"),
    ("zeros(-1)", lambda: ad.zeros(-1), ValueError,
     r"^zeros: shape must not have a negative dimension, got \(-1,\)"),
    ("full((2, -1))", lambda: ad.full((2, -1), 0.0), ValueError,
     r"^full: shape must not have a negative dimension"),
    ("randn(2.5)", lambda: ad.randn(2.5), TypeError,
     r"^randn: size must be an int or a tuple of ints, got \(2\.5,\) \(a float dimension\)"),
    ("rand((2, None))", lambda: ad.rand((2, None)), TypeError,
     r"^rand: size must be an int or a tuple of ints, got \(2, None\)"),
    ("randn(2, (3,))", lambda: ad.randn(2, (3,)), TypeError, r"^randn: size must be"),
    ("rand(-2)", lambda: ad.rand(-2), ValueError, r"^rand: size must not have a negative"),
    ("randint size", lambda: ad.randint(0, 5, 2.5), TypeError,
     r"^randint: size must be an int or a tuple of ints, got 2\.5"),
    ("randint high", lambda: ad.randint(2.5), TypeError,
     r"^randint: high must be an int, got 2\.5 \(a float\)"),
    ("randint low", lambda: ad.randint(0.5, 3), TypeError, r"^randint: low must be an int"),
    ("randint empty", lambda: ad.randint(3, 3), ValueError, r"^randint: low must be below high"),
    ("eye(2.5)", lambda: ad.eye(2.5), TypeError,
     r"^eye: n_rows must be an int, got 2\.5 \(a float\)"),
    ("eye(2, '3')", lambda: ad.eye(2, "3"), TypeError, r"^eye: n_cols must be an int, got '3'"),
    ("eye(k=0.5)", lambda: ad.eye(2, k=0.5), TypeError, r"^eye: k must be an int"),
    ("eye(-1)", lambda: ad.eye(-1), ValueError, r"^eye: n_rows must be at least 0, got -1"),
    ("arange('3')", lambda: ad.arange("3"), TypeError,
     r"^arange: start must be an int or a float, got '3' \(a str\)"),
    ("arange(0, None, None)", lambda: ad.arange(0, 5, None), TypeError,
     r"^arange: step must be an int or a float, got None"),
    ("arange step 0", lambda: ad.arange(0, 5, 0), ValueError, r"^arange: step must not be 0"),
    ("linspace num", lambda: ad.linspace(0, 1, 2.5), TypeError,
     r"^linspace: num must be an int, got 2\.5 \(a float\)"),
    ("linspace num < 0", lambda: ad.linspace(0, 1, -1), ValueError,
     r"^linspace: num must be at least 0"),
    ("linspace start", lambda: ad.linspace("a", 1, 3), TypeError,
     r"^linspace: start must be an int or a float"),
]


@pytest.mark.parametrize("name, call, exc, pattern", BAD_CREATION,
                         ids=[c[0] for c in BAD_CREATION])
def test_creation_functions_name_the_wrong_argument(backend, name, call, exc, pattern):
    with ad.backend(backend.name):
        with pytest.raises(exc, match=pattern):
            call()


def test_creation_functions_accept_what_stands_for_an_int(backend):
    # as torch.zeros / numpy.zeros: NumPy integers and 0-d integer arrays are ints
    with ad.backend(backend.name):
        assert ad.zeros(np.int64(2)).shape == (2,)
        assert ad.ones([2, np.int32(3)]).shape == (2, 3)
        assert ad.full(np.array(3), 1.0).shape == (3,)
        assert ad.randn(np.int64(2), 3).shape == (2, 3)
        assert ad.eye(np.int64(2), 3, k=np.int8(1)).shape == (2, 3)
        assert ad.linspace(0.0, 1.0, np.int64(5)).shape == (5,)
        assert ad.randint(np.int64(4), size=(3,)).shape == (3,)
        assert ad.zeros(()).shape == ()
        np.testing.assert_array_equal(to_numpy(ad.arange(0, 1, 0.25)), np.arange(0, 1, 0.25))
