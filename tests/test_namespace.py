"""The array API namespace: every name of the standard with its exact signature, dtype promotion,
Python scalars, NumPy's protocols, the searching/set functions, and forward values against NumPy
on every backend."""
import inspect
import warnings

import numpy as np
import pytest

import arrayad as ad
from arrayad.func import grad, jvp, vmap

from conftest import to_numpy

P = inspect.Parameter
POS, KW, POS_KW = P.POSITIONAL_ONLY, P.KEYWORD_ONLY, P.POSITIONAL_OR_KEYWORD
REQ = P.empty

# The standard's top-level functions (2024.12, with the 2025.12 additions broadcast_shapes and
# isin, and expand_dims' tuple axis): (name, [(parameter, kind, default)...]), written from the
# specification's function stubs. ``*`` separates keyword-only parameters as in the stubs.
_SIGS = """
abs(x, /)
acos(x, /)
acosh(x, /)
add(x1, x2, /)
asin(x, /)
asinh(x, /)
atan(x, /)
atan2(x1, x2, /)
atanh(x, /)
bitwise_and(x1, x2, /)
bitwise_invert(x, /)
bitwise_left_shift(x1, x2, /)
bitwise_or(x1, x2, /)
bitwise_right_shift(x1, x2, /)
bitwise_xor(x1, x2, /)
ceil(x, /)
clip(x, /, min=None, max=None)
conj(x, /)
copysign(x1, x2, /)
cos(x, /)
cosh(x, /)
divide(x1, x2, /)
equal(x1, x2, /)
exp(x, /)
expm1(x, /)
floor(x, /)
floor_divide(x1, x2, /)
greater(x1, x2, /)
greater_equal(x1, x2, /)
hypot(x1, x2, /)
imag(x, /)
isfinite(x, /)
isinf(x, /)
isnan(x, /)
less(x1, x2, /)
less_equal(x1, x2, /)
log(x, /)
log1p(x, /)
log2(x, /)
log10(x, /)
logaddexp(x1, x2, /)
logical_and(x1, x2, /)
logical_not(x, /)
logical_or(x1, x2, /)
logical_xor(x1, x2, /)
maximum(x1, x2, /)
minimum(x1, x2, /)
multiply(x1, x2, /)
negative(x, /)
nextafter(x1, x2, /)
not_equal(x1, x2, /)
positive(x, /)
pow(x1, x2, /)
real(x, /)
reciprocal(x, /)
remainder(x1, x2, /)
round(x, /)
sign(x, /)
signbit(x, /)
sin(x, /)
sinh(x, /)
square(x, /)
sqrt(x, /)
subtract(x1, x2, /)
tan(x, /)
tanh(x, /)
trunc(x, /)
arange(start, /, stop=None, step=1, *, dtype=None, device=None)
asarray(obj, /, *, dtype=None, device=None, copy=None)
empty(shape, *, dtype=None, device=None)
empty_like(x, /, *, dtype=None, device=None)
eye(n_rows, n_cols=None, /, *, k=0, dtype=None, device=None)
from_dlpack(x, /, *, device=None, copy=None)
full(shape, fill_value, *, dtype=None, device=None)
full_like(x, /, fill_value, *, dtype=None, device=None)
linspace(start, stop, /, num, *, dtype=None, device=None, endpoint=True)
meshgrid(*arrays, indexing='xy')
ones(shape, *, dtype=None, device=None)
ones_like(x, /, *, dtype=None, device=None)
tril(x, /, *, k=0)
triu(x, /, *, k=0)
zeros(shape, *, dtype=None, device=None)
zeros_like(x, /, *, dtype=None, device=None)
astype(x, dtype, /, *, copy=True, device=None)
can_cast(from_, to, /)
finfo(type, /)
iinfo(type, /)
isdtype(dtype, kind)
result_type(*arrays_and_dtypes)
take(x, indices, /, *, axis=None)
take_along_axis(x, indices, /, *, axis=-1)
matmul(x1, x2, /)
matrix_transpose(x, /)
tensordot(x1, x2, /, *, axes=2)
vecdot(x1, x2, /, *, axis=-1)
broadcast_arrays(*arrays)
broadcast_shapes(*shapes)
broadcast_to(x, /, shape)
concat(arrays, /, *, axis=0)
expand_dims(x, /, axis)
flip(x, /, *, axis=None)
moveaxis(x, source, destination, /)
permute_dims(x, /, axes)
repeat(x, repeats, /, *, axis=None)
reshape(x, /, shape, *, copy=None)
roll(x, /, shift, *, axis=None)
squeeze(x, /, axis)
stack(arrays, /, *, axis=0)
tile(x, repetitions, /)
unstack(x, /, *, axis=0)
argmax(x, /, *, axis=None, keepdims=False)
argmin(x, /, *, axis=None, keepdims=False)
count_nonzero(x, /, *, axis=None, keepdims=False)
nonzero(x, /)
searchsorted(x1, x2, /, *, side='left', sorter=None)
where(condition, x1, x2, /)
isin(x1, x2, /, *, invert=False)
unique_all(x, /)
unique_counts(x, /)
unique_inverse(x, /)
unique_values(x, /)
argsort(x, /, *, axis=-1, descending=False, stable=True)
sort(x, /, *, axis=-1, descending=False, stable=True)
cumulative_prod(x, /, *, axis=None, dtype=None, include_initial=False)
cumulative_sum(x, /, *, axis=None, dtype=None, include_initial=False)
max(x, /, *, axis=None, keepdims=False)
mean(x, /, *, axis=None, keepdims=False)
min(x, /, *, axis=None, keepdims=False)
prod(x, /, *, axis=None, dtype=None, keepdims=False)
std(x, /, *, axis=None, correction=0.0, keepdims=False)
sum(x, /, *, axis=None, dtype=None, keepdims=False)
var(x, /, *, axis=None, correction=0.0, keepdims=False)
all(x, /, *, axis=None, keepdims=False)
any(x, /, *, axis=None, keepdims=False)
diff(x, /, *, axis=-1, n=1, prepend=None, append=None)
"""


def _parse(line):
    name, rest = line.split("(", 1)
    params = []
    kind = POS_KW
    for tok in rest.rstrip(")").split(","):
        tok = tok.strip()
        if not tok:
            continue
        if tok == "/":
            params = [(n, POS, d) for n, _, d in params]
            continue
        if tok == "*":
            kind = KW
            continue
        if tok.startswith("*"):
            params.append((tok[1:], P.VAR_POSITIONAL, REQ))
            kind = KW
            continue
        if "=" in tok:
            n, d = tok.split("=")
            params.append((n, kind, eval(d)))
        else:
            params.append((tok, kind, REQ))
    return name, params


SIGNATURES = dict(_parse(line) for line in _SIGS.strip().splitlines())


def test_the_list_is_complete():
    # 135 top-level functions in 2025.12, including the two it added
    assert len(SIGNATURES) == 135


@pytest.mark.parametrize("name", sorted(SIGNATURES))
def test_function_exists_with_exact_signature(name):
    fn = getattr(ad, name)
    assert callable(fn)
    got = [(p.name, p.kind, p.default) for p in inspect.signature(fn).parameters.values()]
    assert got == SIGNATURES[name]


def test_constants_dtypes_and_info():
    assert ad.e == np.e and ad.pi == np.pi and ad.inf == np.inf and np.isnan(ad.nan)
    assert ad.newaxis is None
    assert ad.__array_api_version__ in ("2024.12", "2025.12")
    for n in ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
              "float32", "float64", "complex64", "complex128"]:
        assert getattr(ad, n).name == n
    info = ad.__array_namespace_info__()
    assert info.capabilities()["boolean indexing"]
    assert info.default_dtypes()["real floating"] == ad.float64
    assert set(info.dtypes(kind="integral")) == {"int8", "int16", "int32", "int64", "uint8",
                                                  "uint16", "uint32", "uint64"}
    assert info.default_device() in info.devices()


# -- dtype promotion ---------------------------------------------------------------------------------
@pytest.mark.parametrize("a, b, want", [
    ("int8", "int16", "int16"), ("uint8", "int8", "int16"), ("uint32", "int64", "int64"),
    ("uint16", "uint64", "uint64"), ("float32", "float64", "float64"),
    ("float32", "complex64", "complex64"), ("float64", "complex64", "complex128"),
    ("bool", "bool", "bool"),
])
def test_promotion_table(a, b, want):
    assert ad.result_type(getattr(ad, a), getattr(ad, b)) == getattr(ad, want)
    x = ad.ones(2, dtype=getattr(ad, a))
    y = ad.ones(2, dtype=getattr(ad, b))
    assert (x + y).dtype == getattr(ad, want) if a != "bool" else True


def test_promotion_errors_and_can_cast():
    with pytest.raises(TypeError):
        ad.result_type(ad.uint64, ad.int64)
    with pytest.raises(TypeError):
        ad.result_type(ad.int32, ad.float32)
    assert ad.can_cast(ad.int8, ad.int32) and not ad.can_cast(ad.float64, ad.float32)
    assert ad.isdtype(ad.float32, "real floating") and ad.isdtype(ad.int8, ("bool", "integral"))
    assert ad.finfo(ad.float32).eps == np.finfo(np.float32).eps
    assert ad.iinfo(ad.int16).max == 32767


@pytest.mark.parametrize("scalar, dtype, want", [
    (2, "float32", "float32"), (2.5, "float32", "float32"), (2, "int8", "int8"),
    (1j, "float32", "complex64"), (3, "uint8", "uint8"), (1.5, "complex64", "complex64"),
])
def test_python_scalars_are_weak(backend, scalar, dtype, want):
    x = ad.asarray(backend(np.ones(3, dtype=dtype)))
    assert (x * scalar).dtype == getattr(ad, want)
    assert (scalar * x).dtype == getattr(ad, want)
    # 2024.12: scalars are allowed in binary functions, on either side
    assert ad.add(x, scalar).dtype == getattr(ad, want)
    assert ad.add(scalar, x).dtype == getattr(ad, want)


def test_scalars_in_binary_functions_values(backend):
    x = ad.asarray(backend(np.array([1.0, 2.0, 4.0])))
    np.testing.assert_allclose(to_numpy(ad.pow(2.0, x)), [2.0, 4.0, 16.0])
    np.testing.assert_allclose(to_numpy(ad.maximum(x, 2.0)), [2.0, 2.0, 4.0])
    np.testing.assert_allclose(to_numpy(ad.atan2(1.0, x)), np.arctan2(1.0, [1.0, 2.0, 4.0]))
    assert to_numpy(ad.equal(x, 2.0)).tolist() == [False, True, False]


def test_scalar_gradients():
    np.testing.assert_allclose(grad(lambda x: ad.sum(ad.pow(2.0, x)))(np.array([1.0, 3.0])),
                               np.log(2.0) * 2.0 ** np.array([1.0, 3.0]))
    np.testing.assert_allclose(grad(lambda x: ad.sum(ad.divide(1.0, x)))(np.array([2.0])),
                               [-0.25])


# -- forward values against NumPy, on every backend -------------------------------------------------
A = np.random.default_rng(1).standard_normal((3, 4))
B = np.random.default_rng(2).standard_normal((3, 4))

FORWARD = [
    ("sin", lambda xp, a, b: xp.sin(a), lambda a, b: np.sin(a)),
    ("logaddexp", lambda xp, a, b: xp.logaddexp(a, b), lambda a, b: np.logaddexp(a, b)),
    ("sum_axis", lambda xp, a, b: xp.sum(a, axis=1), lambda a, b: a.sum(1)),
    ("std", lambda xp, a, b: xp.std(a, axis=0, correction=1), lambda a, b: a.std(0, ddof=1)),
    ("cumprod", lambda xp, a, b: xp.cumulative_prod(a, axis=1), lambda a, b: np.cumprod(a, 1)),
    ("matmul", lambda xp, a, b: xp.matmul(a, xp.matrix_transpose(b)), lambda a, b: a @ b.T),
    ("concat", lambda xp, a, b: xp.concat([a, b], axis=1), lambda a, b: np.concatenate([a, b], 1)),
    ("where", lambda xp, a, b: xp.where(a > b, a, b), lambda a, b: np.where(a > b, a, b)),
    ("sort", lambda xp, a, b: xp.sort(a, axis=1, descending=True), lambda a, b: -np.sort(-a, 1)),
    ("argsort", lambda xp, a, b: xp.argsort(a, axis=0), lambda a, b: np.argsort(a, 0, kind="stable")),
    ("expand_dims_tuple", lambda xp, a, b: xp.expand_dims(a, axis=(0, -1)),
     lambda a, b: a[None, :, :, None]),
    ("clip", lambda xp, a, b: xp.clip(a, -0.5, 0.5), lambda a, b: np.clip(a, -0.5, 0.5)),
    ("take", lambda xp, a, b: xp.take(a, xp.argmax(b[:, :3], axis=0) + 1, axis=1),
     lambda a, b: np.take(a, np.argmax(b[:, :3], axis=0) + 1, axis=1)),
    ("roll", lambda xp, a, b: xp.roll(a, 2, axis=1), lambda a, b: np.roll(a, 2, axis=1)),
    ("tile", lambda xp, a, b: xp.tile(a, (2, 1)), lambda a, b: np.tile(a, (2, 1))),
    ("diff", lambda xp, a, b: xp.diff(a, axis=1, n=2), lambda a, b: np.diff(a, 2, axis=1)),
]


@pytest.mark.parametrize("name", [f[0] for f in FORWARD])
def test_forward_values(backend, name):
    _, f, ref = next(f for f in FORWARD if f[0] == name)
    if backend.name == "dask" and name in ("sort", "argsort"):
        pytest.skip("dask has no sort")
    got = f(ad, ad.asarray(backend(A)), ad.asarray(backend(B)))
    np.testing.assert_allclose(to_numpy(got), ref(A, B), rtol=1e-12, atol=1e-12)


# -- searching and set functions ------------------------------------------------------------------
def test_searching_and_sets(backend):
    if backend.name == "dask":
        pytest.skip("dask: data-dependent shapes are not computed lazily")
    x = ad.asarray(backend(np.array([3.0, 1.0, 2.0, 1.0, 3.0])))
    u = ad.unique_all(x)
    np.testing.assert_allclose(to_numpy(u.values), [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(to_numpy(u.counts), [2, 1, 2])
    np.testing.assert_array_equal(to_numpy(u.values)[to_numpy(u.inverse_indices)], to_numpy(x))
    np.testing.assert_array_equal(to_numpy(ad.unique_counts(x).counts), [2, 1, 2])
    np.testing.assert_allclose(to_numpy(ad.unique_values(x)), [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(to_numpy(ad.unique_inverse(x).inverse_indices),
                                  [2, 0, 1, 0, 2])
    nz = ad.nonzero(ad.asarray(backend(np.array([[0, 1], [2, 0]]))))
    assert [to_numpy(i).tolist() for i in nz] == [[0, 1], [1, 0]]
    s = ad.asarray(backend(np.array([1.0, 2.0, 3.0])))
    assert to_numpy(ad.searchsorted(s, 2.0)).tolist() == 1                 # scalar (2025.12)
    assert to_numpy(ad.searchsorted(s, 2.0, side="right")).tolist() == 2
    np.testing.assert_array_equal(
        to_numpy(ad.isin(ad.asarray(backend(np.array([1, 2, 5]))), ad.asarray(backend(np.array([5, 1]))))),
        [True, False, True])


def test_sort_is_differentiable():
    x = np.array([3.0, 1.0, 2.0])
    w = np.array([1.0, 10.0, 100.0])
    g = grad(lambda x: ad.sum(ad.sort(x) * w))(x)
    np.testing.assert_allclose(g, [100.0, 1.0, 10.0])   # x[0] is the largest
    _, t = jvp(lambda x: ad.sort(x, descending=True), (x,), (np.array([1.0, 2.0, 3.0]),))
    np.testing.assert_allclose(t, [1.0, 3.0, 2.0])


def test_searching_under_vmap():
    s = np.array([[1.0, 2.0, 3.0], [0.0, 10.0, 20.0]])
    v = np.array([[2.5, 0.0], [15.0, 25.0]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = vmap(lambda s, v: ad.searchsorted(s, v))(s, v)
        assert got.tolist() == [[2, 0], [2, 3]]
        got = vmap(lambda s, v: ad.searchsorted(s, v, side="right"))(s, np.array([[2.0], [10.0]]))
        assert got.tolist() == [[2], [2]]
        got = vmap(lambda v: ad.searchsorted(ad.asarray(s[0]), v))(v)
        assert got.tolist() == [[2, 0], [3, 3]]
        got = vmap(lambda a, b: ad.isin(a, b))(np.array([[1, 2], [3, 4]]), np.array([[2, 9], [3, 4]]))
        assert got.tolist() == [[False, True], [True, True]]
        got = vmap(lambda a: ad.isin(a, ad.asarray([2, 3])))(np.array([[1, 2], [3, 4]]))
        assert got.tolist() == [[False, True], [True, False]]
        got = vmap(lambda a: ad.argsort(a))(np.array([[3.0, 1.0, 2.0], [0.0, 2.0, 1.0]]))
        assert got.tolist() == [[1, 2, 0], [0, 2, 1]]


@pytest.mark.parametrize("fn", ["nonzero", "unique_values", "unique_all", "unique_counts",
                                "unique_inverse"])
def test_dynamic_shapes_under_vmap_are_clear_errors(fn):
    with pytest.raises(RuntimeError, match=f"{fn}.*dynamic shape.*fixed-size"):
        vmap(getattr(ad, fn))(np.array([[1.0, 0.0], [1.0, 1.0]]))


# -- NumPy protocols ---------------------------------------------------------------------------------
def test_numpy_ufuncs_and_functions_route_to_arrayad():
    x = np.array([0.5, 1.0, 2.0])
    np.testing.assert_allclose(grad(lambda x: np.sum(np.sin(x)))(x), np.cos(x))
    np.testing.assert_allclose(grad(lambda x: np.sum(np.float64(2.0) * x ** 2))(x), 4 * x)
    np.testing.assert_allclose(grad(lambda x: np.mean(np.exp(x), axis=0))(x), np.exp(x) / 3)
    np.testing.assert_allclose(vmap(lambda r: np.sum(r, 0))(np.ones((2, 3, 4))), np.full((2, 4), 3.0))
    t = ad.asarray(x)
    assert isinstance(np.sin(t), ad.Tensor)
    assert isinstance(np.concatenate([t, t]), ad.Tensor)
    np.testing.assert_allclose(to_numpy(np.transpose(ad.reshape(t, (1, 3)))), x.reshape(3, 1))


@pytest.mark.parametrize("call", [
    lambda t: np.interp(t, t, t),
    lambda t: np.add.reduce(t),
    lambda t: np.sin(t, out=np.zeros(3)),
    lambda t: np.percentile(t, 50),
])
def test_uncovered_numpy_functions(call):
    """NumPy functions arrayad does not implement compute with NumPy on eager arrays that need
    no gradient (as on torch tensors), and are refused by name where a derivative would be lost."""
    x = np.array([0.5, 1.0, 2.0])
    out = call(ad.asarray(x))
    assert isinstance(out, ad.Tensor)
    np.testing.assert_allclose(to_numpy(out), call(x))
    with pytest.raises(TypeError, match="has no arrayad version.*requires grad"):
        call(ad.tensor(x, requires_grad=True))
    with pytest.raises(TypeError, match="has no arrayad version.*inside a transform"):
        grad(lambda v: ad.sum(call(v)))(x)


def test_numpy_understands_arrayad_dtypes():
    """numpy.dtype(ad.float64) is NumPy's float64 (JAX's dtypes are NumPy's; SciPy calls
    np.dtype on the dtypes of foreign arrays, e.g. scipy.linalg.companion)."""
    for name in ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
                 "uint64", "float32", "float64", "complex64", "complex128"]:
        assert np.dtype(getattr(ad, name)) == np.dtype(name)
    assert np.zeros(2, dtype=ad.float32).dtype == np.float32
    linalg = pytest.importorskip("scipy.linalg")
    np.testing.assert_array_equal(np.asarray(linalg.companion(ad.asarray([1.0, 2.0, 3.0]))),
                                  linalg.companion(np.array([1.0, 2.0, 3.0])))
