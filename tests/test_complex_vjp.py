"""VJPs and JVPs on complex inputs against torch's and JAX's.

Conventions (NOTE [complex cotangents]): arrayad follows torch. For a holomorphic f the cotangent
of z is ``g * conj(df/dz)``; in general (f not holomorphic, real or complex input or output) it is
``conj(J)^T g`` for the R-linear derivative J, which is what ``torch.Tensor.backward(g)`` computes.
JAX's ``vjp`` computes the transpose without the conjugation, so the two relate by
``torch_grad == conj(jax_vjp(conj(g)))`` (``test_conventions_by_hand`` checks this formula on
``abs`` and ``z * conj(z)`` against derivatives written by hand before the table relies on it).
Tangents need no conversion: ``jvp`` is the R-linear derivative applied to the tangent in all
three libraries.

Finite differences of real parts would not catch a missing ``conj`` (``prod``'s VJP lacked one and
scipy.signal's gradient was 51% off); comparing with two independent libraries does.

Each case is ``(arrayad_fn, torch_fn, jax_fn, make)``; ``make(rng)`` draws the inputs (NumPy
complex128 inside the function's domain; some cases take real input and give complex output). All
inputs are differentiated.
"""

import numpy as np
import pytest

import arrayad as ad
from arrayad.func import jvp, vjp

from conftest import to_numpy

torch = pytest.importorskip("torch")

try:
    import jax
    import jax.numpy as jnp
    jax.config.update("jax_enable_x64", True)
except ImportError:                          # the JAX half of each case is skipped
    class _Missing:
        """Stands for jax.numpy so that the table can still be written; never called."""
        def __getattr__(self, name):
            return self

    jax, jnp = None, _Missing()


# ---------------------------------------------------------------------------------------------
# Inputs

def cplx(*shape, shift=0.0):
    return lambda rng: rng.standard_normal(shape) + 1j * rng.standard_normal(shape) + shift


def real(*shape):
    return lambda rng: rng.standard_normal(shape)


def away0(*shape):          # |z| in [0.5, 2]: away from the branch point / kink / pole at 0
    def make(rng):
        return rng.uniform(0.5, 2.0, shape) * np.exp(1j * rng.uniform(-np.pi, np.pi, shape))
    return make


def right(*shape):          # Re z > 0.3: away from the cut of log/sqrt on the negative real axis
    def make(rng):
        return rng.uniform(0.3, 2.0, shape) + 1j * rng.standard_normal(shape)
    return make


def small(*shape):          # |z| < 0.6: inside the unit disk (asin, acos, atanh, log1p of 1 + z)
    def make(rng):
        return rng.uniform(0.1, 0.6, shape) * np.exp(1j * rng.uniform(-np.pi, np.pi, shape))
    return make


def args(*makers):
    return lambda rng: tuple(m(rng) for m in makers)


# ---------------------------------------------------------------------------------------------
# The table: name -> (arrayad_fn, torch_fn, jax_fn, make)

CASES = {}


def case(name, f, tf, jf, make):
    assert name not in CASES, name
    CASES[name] = (f, tf, jf, make)


def same(name, make, ad_name=None, torch_name=None, jax_name=None, **kw):
    """A case whose function has the same name and signature in the three libraries."""
    def lookup(mod, dotted):
        for part in dotted.split("."):
            mod = getattr(mod, part)
        return mod
    f = lookup(ad, ad_name or name)
    tn = torch_name or name

    def tf(*a):
        return lookup(torch, tn)(*a, **kw)

    def jf(*a):
        return lookup(jnp, jax_name or name)(*a, **kw)

    case(name if not kw else f"{name}{kw}", lambda *a: f(*a, **kw), tf, jf, make)


# elementwise, unary
for _n, _m in [("exp", cplx(3)), ("expm1", cplx(3)), ("log", right(3)), ("log1p", small(3)),
               ("log2", right(3)), ("log10", right(3)), ("sqrt", right(3)), ("square", cplx(3)),
               ("reciprocal", away0(3)), ("sin", cplx(3)), ("cos", cplx(3)), ("tan", small(3)),
               ("sinh", cplx(3)), ("cosh", cplx(3)), ("tanh", small(3)), ("conj", cplx(3)),
               ("real", cplx(3)), ("imag", cplx(3)), ("negative", cplx(3)),
               ("positive", cplx(3)), ("abs", away0(3))]:
    same(_n, args(_m))
for _n, _t, _j in [("asin", "asin", "arcsin"), ("acos", "acos", "arccos"),
                   ("atan", "atan", "arctan"), ("asinh", "asinh", "arcsinh"),
                   ("atanh", "atanh", "arctanh")]:
    same(_n, args(small(3)), torch_name=_t, jax_name=_j)
same("acosh", args(cplx(3, shift=3.0)), jax_name="arccosh")
case("sign", ad.sign, torch.sgn, lambda z: z / jnp.abs(z), args(away0(3)))

# elementwise, binary (complex base and exponent; broadcasting)
for _n in ["add", "subtract", "multiply"]:
    same(_n, args(cplx(2, 3), cplx(3)))
same("divide", args(cplx(2, 3), away0(3)))
same("pow", args(right(3), cplx(3)))
case("pow_real_exponent", lambda z: ad.pow(z, 3.0), lambda z: torch.pow(z, 3.0),
     lambda z: jnp.power(z, 3.0), args(away0(3)))
case("pow_real_base", lambda x, w: ad.pow(x, w), torch.pow, jnp.power,
     args(lambda rng: rng.uniform(0.5, 2.0, (3,)), cplx(3)))
case("mixed_real_complex", lambda x, z: x * z + x, lambda x, z: x * z + x,
     lambda x, z: x * z + x, args(real(3), cplx(3)))
case("abs_squared", lambda z: ad.real(z * ad.conj(z)), lambda z: torch.real(z * z.conj()),
     lambda z: jnp.real(z * jnp.conj(z)), args(cplx(3)))

# reductions
same("sum", args(cplx(2, 3)))
same("prod", args(away0(2, 3)))
same("mean", args(cplx(2, 3)))
case("sum_axis", lambda z: ad.sum(z, axis=1), lambda z: torch.sum(z, 1),
     lambda z: jnp.sum(z, axis=1), args(cplx(2, 3)))
case("prod_axis", lambda z: ad.prod(z, axis=0), lambda z: torch.prod(z, 0),
     lambda z: jnp.prod(z, axis=0), args(away0(2, 3)))
case("mean_axis", lambda z: ad.mean(z, axis=1), lambda z: torch.mean(z, 1),
     lambda z: jnp.mean(z, axis=1), args(cplx(2, 3)))
case("cumulative_sum", lambda z: ad.cumulative_sum(z, axis=1), lambda z: torch.cumsum(z, 1),
     lambda z: jnp.cumsum(z, axis=1), args(cplx(2, 3)))
case("cumulative_prod", lambda z: ad.cumulative_prod(z, axis=1), lambda z: torch.cumprod(z, 1),
     lambda z: jnp.cumprod(z, axis=1), args(away0(2, 3)))
case("vecdot", ad.vecdot, torch.linalg.vecdot, jnp.vecdot, args(cplx(2, 3), cplx(3)))
case("vector_norm", lambda z: ad.linalg.vector_norm(z), lambda z: torch.linalg.vector_norm(z),
     lambda z: jnp.linalg.vector_norm(z), args(cplx(2, 3)))
case("vector_norm_ord3_axis", lambda z: ad.linalg.vector_norm(z, axis=1, ord=3),
     lambda z: torch.linalg.vector_norm(z, ord=3, dim=1),
     lambda z: jnp.linalg.vector_norm(z, axis=1, ord=3), args(away0(2, 3)))
case("matrix_norm_fro", lambda z: ad.linalg.matrix_norm(z),
     lambda z: torch.linalg.matrix_norm(z), lambda z: jnp.linalg.matrix_norm(z),
     args(cplx(3, 3)))
case("matrix_norm_nuc", lambda z: ad.linalg.matrix_norm(z, ord="nuc"),
     lambda z: torch.linalg.matrix_norm(z, ord="nuc"),
     lambda z: jnp.linalg.matrix_norm(z, ord="nuc"), args(cplx(3, 3)))


# linalg
case("matmul", ad.matmul, torch.matmul, jnp.matmul, args(cplx(2, 3), cplx(3, 2)))
case("matmul_vec", ad.matmul, torch.matmul, jnp.matmul, args(cplx(2, 3), cplx(3)))
case("tensordot", lambda a, b: ad.tensordot(a, b, axes=1), lambda a, b: torch.tensordot(a, b, 1),
     lambda a, b: jnp.tensordot(a, b, axes=1), args(cplx(2, 3), cplx(3, 2)))
case("linalg.inv", ad.linalg.inv, torch.linalg.inv, jnp.linalg.inv, args(cplx(3, 3)))
case("linalg.det", ad.linalg.det, torch.linalg.det, jnp.linalg.det, args(cplx(3, 3)))
case("linalg.slogdet.logabsdet", lambda a: ad.linalg.slogdet(a)[1],
     lambda a: torch.linalg.slogdet(a)[1], lambda a: jnp.linalg.slogdet(a)[1], args(cplx(3, 3)))
case("linalg.slogdet.sign", lambda a: ad.linalg.slogdet(a)[0],
     lambda a: torch.linalg.slogdet(a)[0], lambda a: jnp.linalg.slogdet(a)[0], args(cplx(3, 3)))
case("linalg.solve", ad.linalg.solve, torch.linalg.solve, jnp.linalg.solve,
     args(cplx(3, 3), cplx(3, 2)))
# Factorizations of Hermitian matrices are differentiated through A = B B^H + I (eigh) or
# B + B^H (cholesky needs PD): each library reads only one triangle of A, so a non-Hermitian
# perturbation of A itself would have convention-dependent gradients.
_ct = (lambda b: ad.conj(ad.linalg.matrix_transpose(b)), lambda b: b.conj().mT,
       lambda b: jnp.conj(b).swapaxes(-1, -2))
case("linalg.cholesky", lambda b: ad.linalg.cholesky(b @ _ct[0](b) + 3 * ad.eye(3)),
     lambda b: torch.linalg.cholesky(b @ _ct[1](b) + 3 * torch.eye(3)),
     lambda b: jnp.linalg.cholesky(b @ _ct[2](b) + 3 * jnp.eye(3)), args(cplx(3, 3)))
# QR and SVD are unique up to unit phases on the diagonal (Q D, D^H R; U D, V D): compare
# functions of the outputs that do not depend on D.
case("linalg.qr.q_diag_r", lambda a: (lambda q, r: q * ad.linalg.diagonal(r))(*ad.linalg.qr(a)),
     lambda a: (lambda q, r: q * torch.diagonal(r, dim1=-2, dim2=-1))(*torch.linalg.qr(a)),
     lambda a: (lambda q, r: q * jnp.diagonal(r, axis1=-2, axis2=-1))(*jnp.linalg.qr(a)),
     args(cplx(3, 3)))
case("linalg.qr.abs_r", lambda a: ad.abs(ad.linalg.qr(a)[1]),
     lambda a: torch.abs(torch.linalg.qr(a)[1]),
     lambda a: jnp.abs(jnp.linalg.qr(a)[1]), args(cplx(3, 3)))
case("linalg.svd.polar",
     lambda a: (lambda u, s, vh: u @ vh)(*ad.linalg.svd(a, full_matrices=False)),
     lambda a: (lambda u, s, vh: u @ vh)(*torch.linalg.svd(a, full_matrices=False)),
     lambda a: (lambda u, s, vh: u @ vh)(*jnp.linalg.svd(a, full_matrices=False)),
     args(cplx(3, 3)))
case("linalg.svd.s", lambda a: ad.linalg.svd(a)[1], lambda a: torch.linalg.svd(a)[1],
     lambda a: jnp.linalg.svd(a)[1], args(cplx(3, 3)))
case("linalg.svdvals", ad.linalg.svdvals, torch.linalg.svdvals, jnp.linalg.svdvals,
     args(cplx(2, 3)))
case("linalg.eigh.w", lambda b: ad.linalg.eigh(b + _ct[0](b))[0],
     lambda b: torch.linalg.eigh(b + _ct[1](b))[0],
     lambda b: jnp.linalg.eigh(b + _ct[2](b))[0], args(cplx(3, 3)))
case("linalg.eigh.sin_of_a",
     lambda b: (lambda w, v: (v * ad.sin(w)) @ _ct[0](v))(*ad.linalg.eigh(b + _ct[0](b))),
     lambda b: (lambda w, v: (v * torch.sin(w)) @ _ct[1](v))(*torch.linalg.eigh(b + _ct[1](b))),
     lambda b: (lambda w, v: (v * jnp.sin(w)) @ _ct[2](v))(*jnp.linalg.eigh(b + _ct[2](b))),
     args(cplx(3, 3)))
case("linalg.eigvalsh", lambda b: ad.linalg.eigvalsh(b + _ct[0](b)),
     lambda b: torch.linalg.eigvalsh(b + _ct[1](b)),
     lambda b: jnp.linalg.eigvalsh(b + _ct[2](b)), args(cplx(3, 3)))
case("linalg.trace", ad.linalg.trace, lambda a: torch.diagonal(a, dim1=-2, dim2=-1).sum(-1),
     lambda a: jnp.trace(a, axis1=-2, axis2=-1), args(cplx(2, 3, 3)))
case("linalg.diagonal", ad.linalg.diagonal, lambda a: torch.diagonal(a, dim1=-2, dim2=-1),
     lambda a: jnp.diagonal(a, axis1=-2, axis2=-1), args(cplx(2, 3, 3)))
case("linalg.outer", ad.linalg.outer, torch.outer, jnp.outer, args(cplx(3), cplx(2)))
case("linalg.cross", ad.linalg.cross, torch.linalg.cross, jnp.cross, args(cplx(2, 3), cplx(2, 3)))
case("linalg.matrix_power", lambda a: ad.linalg.matrix_power(a, 3),
     lambda a: torch.linalg.matrix_power(a, 3), lambda a: jnp.linalg.matrix_power(a, 3),
     args(cplx(3, 3)))
case("linalg.pinv", ad.linalg.pinv, torch.linalg.pinv, jnp.linalg.pinv, args(cplx(3, 2)))
case("linalg.eigvals.sum_sq", lambda a: ad.sum(ad.linalg.eigvals(a) ** 2),
     lambda a: torch.sum(torch.linalg.eigvals(a) ** 2),
     lambda a: jnp.sum(jnp.linalg.eigvals(a) ** 2), args(cplx(3, 3)))

# fft
for _n, _m in [("fft", cplx(2, 4)), ("ifft", cplx(2, 4)), ("fftn", cplx(2, 4)),
               ("ifftn", cplx(2, 4)), ("fftshift", cplx(2, 5)), ("ifftshift", cplx(2, 5)),
               ("rfft", real(2, 6)), ("rfftn", real(2, 6)), ("ihfft", real(2, 6)),
               ("irfft", cplx(2, 4)), ("irfftn", cplx(2, 4)), ("hfft", cplx(2, 4))]:
    same(_n, args(_m), ad_name=f"fft.{_n}", torch_name=f"fft.{_n}", jax_name=f"fft.{_n}")
case("fft.fft_n_norm", lambda z: ad.fft.fft(z, n=6, norm="ortho"),
     lambda z: torch.fft.fft(z, n=6, norm="ortho"), lambda z: jnp.fft.fft(z, n=6, norm="ortho"),
     args(cplx(2, 4)))
case("fft.irfft_n_odd", lambda z: ad.fft.irfft(z, n=7), lambda z: torch.fft.irfft(z, n=7),
     lambda z: jnp.fft.irfft(z, n=7), args(cplx(2, 4)))
case("fft.hfft_n_odd", lambda z: ad.fft.hfft(z, n=7), lambda z: torch.fft.hfft(z, n=7),
     lambda z: jnp.fft.hfft(z, n=7), args(cplx(2, 4)))

# manipulation and indexing
_IDX = np.array([2, 0, 2])
for _n, _f, _t, _j in [
        ("reshape", lambda z: ad.reshape(z, (3, 2)), lambda z: z.reshape(3, 2),
         lambda z: z.reshape(3, 2)),
        ("permute_dims", lambda z: ad.permute_dims(z, (1, 0)), lambda z: z.permute(1, 0),
         lambda z: jnp.transpose(z, (1, 0))),
        ("flip", lambda z: ad.flip(z, axis=1), lambda z: torch.flip(z, (1,)),
         lambda z: jnp.flip(z, axis=1)),
        ("roll", lambda z: ad.roll(z, 1, axis=1), lambda z: torch.roll(z, 1, 1),
         lambda z: jnp.roll(z, 1, axis=1)),
        ("broadcast_to", lambda z: ad.broadcast_to(z, (4, 2, 3)),
         lambda z: torch.broadcast_to(z, (4, 2, 3)), lambda z: jnp.broadcast_to(z, (4, 2, 3))),
        ("expand_dims", lambda z: ad.expand_dims(z, axis=1), lambda z: z.unsqueeze(1),
         lambda z: jnp.expand_dims(z, 1)),
        ("moveaxis", lambda z: ad.moveaxis(z, 0, 1), lambda z: torch.moveaxis(z, 0, 1),
         lambda z: jnp.moveaxis(z, 0, 1)),
        ("tile", lambda z: ad.tile(z, (2, 1)), lambda z: torch.tile(z, (2, 1)),
         lambda z: jnp.tile(z, (2, 1))),
        ("repeat", lambda z: ad.repeat(z, 2, axis=1), lambda z: torch.repeat_interleave(z, 2, 1),
         lambda z: jnp.repeat(z, 2, axis=1)),
        ("getitem_slice", lambda z: z[:, 1:], lambda z: z[:, 1:], lambda z: z[:, 1:]),
        ("getitem_index_array", lambda z: z[:, _IDX], lambda z: z[:, torch.tensor(_IDX)],
         lambda z: z[:, _IDX]),
        ("take", lambda z: ad.take(z, _IDX, axis=1),
         lambda z: torch.index_select(z, 1, torch.tensor(_IDX)),
         lambda z: jnp.take(z, _IDX, axis=1)),
        ("take_along_axis",
         lambda z: ad.take_along_axis(z, np.array([[2, 2], [0, 1]]), axis=1),
         lambda z: torch.take_along_dim(z, torch.tensor([[2, 2], [0, 1]]), 1),
         lambda z: jnp.take_along_axis(z, np.array([[2, 2], [0, 1]]), axis=1)),
        ("matrix_transpose", ad.matrix_transpose, lambda z: z.mT, lambda z: z.swapaxes(-1, -2)),
        ("diff", lambda z: ad.diff(z, axis=1), lambda z: torch.diff(z, dim=1),
         lambda z: jnp.diff(z, axis=1)),
        ("tril", ad.tril, torch.tril, jnp.tril),
        ("triu", ad.triu, torch.triu, jnp.triu)]:
    case(_n, _f, _t, _j, args(cplx(2, 3)))
case("squeeze", lambda z: ad.squeeze(z, axis=1), lambda z: z.squeeze(1),
     lambda z: jnp.squeeze(z, 1), args(cplx(2, 1, 3)))
case("concat", lambda a, b: ad.concat([a, b], axis=1), lambda a, b: torch.cat([a, b], 1),
     lambda a, b: jnp.concatenate([a, b], axis=1), args(cplx(2, 3), cplx(2, 2)))
case("stack", lambda a, b: ad.stack([a, b], axis=1), lambda a, b: torch.stack([a, b], 1),
     lambda a, b: jnp.stack([a, b], axis=1), args(cplx(2, 3), cplx(2, 3)))
_MASK = np.array([True, False, True])
case("where", lambda a, b: ad.where(_MASK, a, b),
     lambda a, b: torch.where(torch.tensor(_MASK), a, b),
     lambda a, b: jnp.where(_MASK, a, b), args(cplx(2, 3), cplx(3)))
case("astype_to_complex", lambda x: ad.astype(x, ad.complex128),
     lambda x: x.to(torch.complex128), lambda x: x.astype(jnp.complex128), args(real(2, 3)))
case("unstack", lambda z: ad.unstack(z, axis=0)[1], lambda z: torch.unbind(z, 0)[1],
     lambda z: z[1], args(cplx(2, 3)))

case("dot", ad.dot, torch.dot, jnp.dot, args(cplx(3), cplx(3)))
case("diag", ad.diag, torch.diag, jnp.diag, args(cplx(3)))
case("meshgrid", lambda a, b: ad.meshgrid(a, b)[0] * ad.meshgrid(a, b)[1],
     lambda a, b: (lambda u, v: u * v)(*torch.meshgrid(a, b, indexing="xy")),
     lambda a, b: (lambda u, v: u * v)(*jnp.meshgrid(a, b)), args(cplx(3), cplx(2)))
case("broadcast_arrays", lambda a, b: (lambda u, v: u * v)(*ad.broadcast_arrays(a, b)),
     lambda a, b: (lambda u, v: u * v)(*torch.broadcast_tensors(a, b)),
     lambda a, b: (lambda u, v: u * v)(*jnp.broadcast_arrays(a, b)), args(cplx(2, 1), cplx(3)))
case("var", lambda z: ad.var(z, axis=1), lambda z: torch.var(z, 1, correction=0),
     lambda z: jnp.var(z, axis=1), args(cplx(2, 3)))
case("std", lambda z: ad.std(z, axis=1, correction=1), lambda z: torch.std(z, 1, correction=1),
     lambda z: jnp.std(z, axis=1, ddof=1), args(cplx(2, 3)))
case("logsumexp", lambda z: ad.logsumexp(z, axis=1), lambda z: torch.logsumexp(z, 1),
     lambda z: jax.scipy.special.logsumexp(z, axis=1), args(small(2, 3)))
case("sigmoid", ad.sigmoid, torch.sigmoid, lambda z: 1 / (1 + jnp.exp(-z)), args(small(3)))
case("special.sinc", ad.special.sinc, torch.sinc, jnp.sinc, args(cplx(3)))
case("linalg.eig.exp_of_a",
     lambda a: (lambda w, v: (v * ad.exp(w)) @ ad.linalg.inv(v))(*ad.linalg.eig(a)),
     lambda a: (lambda w, v: (v * torch.exp(w)) @ torch.linalg.inv(v))(*torch.linalg.eig(a)),
     lambda a: (lambda w, v: (v * jnp.exp(w)) @ jnp.linalg.inv(v))(*jax.lax.linalg.eig(
         a, compute_left_eigenvectors=False, enable_eigvec_derivs=True)),
     args(cplx(3, 3)))

# compositions where a conj is easy to lose
case("exp_sin", lambda z: ad.exp(ad.sin(z)), lambda z: torch.exp(torch.sin(z)),
     lambda z: jnp.exp(jnp.sin(z)), args(cplx(2, 3)))
case("multiply_divide", lambda z: z * z / (z + 2.0), lambda z: z * z / (z + 2.0),
     lambda z: z * z / (z + 2.0), args(cplx(2, 3)))


# ---------------------------------------------------------------------------------------------
# Checks

def _random_like(rng, like):
    like = np.asarray(like)
    g = rng.standard_normal(like.shape)
    if np.iscomplexobj(like):
        g = g + 1j * rng.standard_normal(like.shape)
    return np.asarray(g)


def _draw(name):
    """The case's inputs, its output (by torch), a random cotangent and random tangents."""
    f, tf, jf, make = CASES[name]
    rng = np.random.default_rng(sum(map(ord, name)))
    xs = make(rng)
    out = tf(*[torch.tensor(x) for x in xs]).resolve_conj().numpy()
    return xs, out, _random_like(rng, out), tuple(_random_like(rng, x) for x in xs)


def _torch_vjp(tf, xs, g):
    ts = [torch.tensor(x, requires_grad=True) for x in xs]
    grads = torch.autograd.grad(tf(*ts), ts, torch.tensor(g), allow_unused=True)
    return [np.zeros_like(x) if gr is None else gr.resolve_conj().numpy()
            for x, gr in zip(xs, grads)]


def _jax_vjp_as_torch(jf, xs, g):
    out, pull = jax.vjp(jf, *xs)
    # torch_grad = conj(jax_vjp(conj(g))): see the module docstring
    return [jnp.conj(c) for c in pull(jnp.conj(g).astype(out.dtype))]


@pytest.fixture(scope="module")
def jax_results():
    """JAX's VJP (in torch's convention) and JVP of every case, {name: (grads, tangent)}.

    Computed in one ``jax.jit``: one XLA compilation for the table instead of one per operation
    per case (eagerly, JAX took ~45 s here; the single compilation ~10 s)."""
    if jax is None:
        pytest.skip("jax is not installed")
    data = {name: _draw(name) for name in CASES}

    def everything(data):
        res = {}
        for name, (xs, _, g, ts) in data.items():
            jf = CASES[name][2]
            res[name] = (_jax_vjp_as_torch(jf, xs, g), jax.jvp(jf, tuple(xs), tuple(ts))[1])
        return res

    out = jax.jit(everything)(jax.tree_util.tree_map(jnp.asarray, data))
    return jax.tree_util.tree_map(np.asarray, out)


def _close(actual, expected, what):
    np.testing.assert_allclose(np.asarray(actual), np.asarray(expected), rtol=1e-8, atol=1e-10,
                               err_msg=what)


@pytest.mark.parametrize("name", sorted(CASES))
def test_vjp_matches_torch(name):
    f, tf, _, _ = CASES[name]
    xs, want_out, g, _ = _draw(name)
    out, pull = vjp(f, *xs)
    _close(out, want_out, "forward vs torch")
    for i, (a, t) in enumerate(zip(pull(g), _torch_vjp(tf, xs, g))):
        _close(a, t, f"vjp of input {i} vs torch")


@pytest.mark.parametrize("name", sorted(CASES))
def test_vjp_matches_jax(name, jax_results):
    xs, _, g, _ = _draw(name)
    _, pull = vjp(CASES[name][0], *xs)
    for i, (a, j) in enumerate(zip(pull(g), jax_results[name][0])):
        _close(a, j, f"vjp of input {i} vs jax (converted to torch's convention)")


# Cases where torch's forward mode itself is wrong (JAX and arrayad agree): their JVP is compared
# with JAX's only.
TORCH_JVP_WRONG = {
    # torch 2.13: the tangent of the real base contributes only its real part to the complex
    # output's tangent (x ** w at x = 1.5, w = 0.3 + 0.7j, tangent (1, 0): torch gives
    # 0.0692 - 0j, JAX and w * x ** (w - 1) give 0.0692 + 0.5692j)
    "pow_real_base",
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_jvp_matches_torch(name):
    if name in TORCH_JVP_WRONG:
        pytest.skip("torch's JVP is wrong here (TORCH_JVP_WRONG); checked against JAX's")
    f, tf, _, _ = CASES[name]
    xs, _, _, ts = _draw(name)
    _, tan = jvp(f, xs, ts)
    _, ttan = torch.func.jvp(tf, tuple(torch.tensor(x) for x in xs),
                             tuple(torch.tensor(t) for t in ts))
    _close(tan, ttan.resolve_conj().numpy(), "jvp vs torch")


@pytest.mark.parametrize("name", sorted(CASES))
def test_jvp_matches_jax(name, jax_results):
    xs, _, _, ts = _draw(name)
    _, tan = jvp(CASES[name][0], xs, ts)
    _close(tan, jax_results[name][1], "jvp vs jax")


@pytest.mark.skipif(jax is None, reason="jax is not installed")
def test_conventions_by_hand():
    """The torch <-> JAX formula of the module docstring, on two non-holomorphic functions, from
    derivatives written by hand: |z| has the R-linear derivative dz -> Re(conj(z) dz) / |z|,
    whose conj-transpose sends a real g to g z / |z|; z * conj(z) = |z|^2 sends g to 2 g z."""
    z = np.array([0.6 - 1.1j, -1.3 + 0.4j])
    g = np.array([0.7, -1.9])
    want = g * z / np.abs(z)
    _close(_torch_vjp(torch.abs, [z], g)[0], want, "torch abs")
    _close(_jax_vjp_as_torch(jnp.abs, [z], g)[0], want, "jax abs")
    gc = np.array([0.3 + 0.8j, -1.2 - 0.5j])      # complex output with zero imaginary part
    want = 2 * np.real(gc) * z                    # only Re(g) pairs with a real-valued output
    _close(_torch_vjp(lambda t: t * t.conj(), [z], gc)[0], want, "torch z conj(z)")
    _close(_jax_vjp_as_torch(lambda t: t * jnp.conj(t), [z], gc)[0], want, "jax z conj(z)")


BACKEND_SUBSET = ["exp_sin", "sum", "prod", "prod_axis", "cumulative_prod", "multiply_divide",
                  "linalg.inv", "linalg.det", "fft", "irfft", "abs", "getitem_slice", "concat",
                  "divide", "vecdot", "linalg.eigh.sin_of_a", "sign"]


@pytest.mark.parametrize("name", BACKEND_SUBSET)
def test_vjp_on_every_backend(name, backend):
    """The same VJPs with the inputs held by each backend (conftest): agree with torch's."""
    f, tf, _, _ = CASES[name]
    xs, _, g, _ = _draw(name)
    _, pull = vjp(f, *[backend(x) for x in xs])
    got = pull(backend(g))
    for i, (a, t) in enumerate(zip(got, _torch_vjp(tf, xs, g))):
        _close(to_numpy(a), t, f"vjp of input {i} on {backend} vs torch")


# arrayad.special functions that take complex input but that neither torch nor JAX
# differentiates on complex input: their complex derivative f'(z), by central differences along
# the real axis (f is holomorphic, so this is the derivative in every direction), gives the VJP
# g * conj(f'(z)) and the JVP t * f'(z).
SPECIAL_HOLOMORPHIC = {
    "erf": ad.special.erf, "erfc": ad.special.erfc, "ndtr": ad.special.ndtr,
    "log_ndtr": ad.special.log_ndtr, "xlogy": lambda z: ad.special.xlogy(z, z + 1.0),
}


@pytest.mark.parametrize("name", sorted(SPECIAL_HOLOMORPHIC))
def test_special_complex_against_complex_derivative(name):
    f = SPECIAL_HOLOMORPHIC[name]
    rng = np.random.default_rng(sum(map(ord, name)))
    z, g, t = (cplx(3)(rng) * 0.5 for _ in range(3))
    h = 1e-6
    d = (np.asarray(f(z + h)) - np.asarray(f(z - h))) / (2 * h)
    assert np.all(np.abs(d.imag) > 1e-3)     # a derivative whose conj matters
    _, pull = vjp(f, z)
    np.testing.assert_allclose(pull(g)[0], g * np.conj(d), rtol=1e-7, atol=1e-8)
    np.testing.assert_allclose(jvp(f, (z,), (t,))[1], t * d, rtol=1e-7, atol=1e-8)
