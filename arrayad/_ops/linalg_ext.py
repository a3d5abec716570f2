"""The array API ``linalg`` extension: decompositions and solvers as primitives (cholesky, det,
slogdet, inv, solve, eigh, eig, qr, svd), everything else as composites of arrayad functions.

Conventions shared by the rules below:

* Inputs are stacks of matrices ``(..., M, N)``; every rule works on the last two axes, so a
  batching rule only has to move the vmapped axis to the front (``_batch_front``), or, for
  ``solve``'s two broadcasting operands, to the front of the broadcast batch (``_batch_bcast``).
* Complex cotangents follow torch's convention: for a real loss ``L`` the cotangent of ``z`` is
  ``dL/dRe(z) + i dL/dIm(z)``, so the VJP of a C-linear map ``A`` is ``A^H``. Every VJP below is the
  adjoint, under ``<a, b> = Re(sum(conj(a) * b))``, of the JVP written next to it.
* Functions of Hermitian input (cholesky, eigh) read one triangle only, so their derivative is
  only defined on Hermitian perturbations. As torch does, the JVP uses the Hermitian part of the
  tangent and the VJP returns a Hermitian cotangent, so the two stay adjoint to each other.
* Spectral rules divide by eigenvalue (or squared singular value) gaps. Where a gap is exactly zero
  (degenerate spectrum) the term is set to zero instead of inf/nan: exact for functions of the
  eigenvalues alone (eigvalsh, svdvals, matrix norms), and a choice of gauge for eigenvectors,
  whose derivative is undefined there. Near-degenerate spectra still give large derivatives.
"""

from collections import namedtuple

from ._namespace import ops

from .._core._core import bind, dtype_of, raw_value, shape_of
from .._dtypes import to_backend
from ._rules import (Declarations, constant_like, eye_like, is_complex, move_to_front, ndim_of,
                     normalize_axis, per_primitive, unbroadcast)
from .elementwise import add, multiply, subtract
from .linalg import matmul, tensordot, vecdot
from .indexing import getitem, setitem
from .manipulation import matrix_transpose, reshape_p
from .views import View, make_view
from .reductions import _others_product, safe_sqrt as _safe_sqrt
from ..backends import backend_of

decl = Declarations(globals(), ops.linalg)
for _f in (matmul, tensordot, vecdot, matrix_transpose):   # (declared elsewhere)
    decl.export(_f)

EighResult = namedtuple("EighResult", ["eigenvalues", "eigenvectors"])
EigResult = namedtuple("EigResult", ["eigenvalues", "eigenvectors"])
QRResult = namedtuple("QRResult", ["Q", "R"])
SlogdetResult = namedtuple("SlogdetResult", ["sign", "logabsdet"])
SVDResult = namedtuple("SVDResult", ["U", "S", "Vh"])


# ---------------------------------------------------------------------------------------------
# Small matrix helpers (arrayad ops only, so that rules differentiate and batch again)

def _mT(x):
    return ops.matrix_transpose(x)


# Rules mix values of different levels (primals of one transform, tangents or cotangents of
# another, raw constants). They use the functions, never the operators: ``raw @ tracer`` calls
# the raw array's operator first, and array-api-strict raises instead of deferring. (Imported
# from their module, not read from ``ops`` here: ``ops`` is complete only once every op module
# is imported, NOTE [internal namespace].)
mul, sub = multiply, subtract


def mm(*xs):
    """Chained matrix product."""
    out = xs[0]
    for x in xs[1:]:
        out = ops.matmul(out, x)
    return out


def _mH(x):
    """Conjugate transpose (a plain transpose for real input)."""
    x = ops.matrix_transpose(x)
    return ops.conj(x) if is_complex(x) else x


def _real(x):
    return ops.real(x) if is_complex(x) else x


def _herm(t):
    """The Hermitian part of a tangent (see the module note on Hermitian input)."""
    return 0.5 * add(t, _mH(t))


def _diag_embed(v):
    """``(..., n)`` -> ``(..., n, n)`` with ``v`` on the diagonal."""
    n = shape_of(v)[-1]
    return ops.expand_dims(v, axis=-1) * eye_like(v, n)


def _eye_mask(x):
    """The identity, shaped like the last two axes of ``x``, in the real dtype of ``x``."""
    n = shape_of(x)[-1]
    dt = _real_dtype(dtype_of(x))
    return constant_like(x, lambda xp: xp.eye(n, n, dtype=to_backend(dt, xp)))


def _real_dtype(dt):
    if dt == ops.complex64:
        return ops.float32
    if dt == ops.complex128:
        return ops.float64
    return dt


def _gap_inverse(w):
    """``F[..., i, j] = 1 / (w_j - w_i)``, zero where the gap is exactly zero (and on the
    diagonal)."""
    e = ops.expand_dims(w, axis=-2) - ops.expand_dims(w, axis=-1)
    zero = e == 0
    return ops.where(zero, 0.0, 1.0 / ops.where(zero, 1.0, e))


def _safe_reciprocal(s):
    """1/s with 0 where s == 0 (rank-deficient input: the term it scales is undefined there)."""
    zero = s == 0
    return ops.where(zero, 0.0, 1.0 / ops.where(zero, 1.0, s))


def _rsolve(b, a):
    """``b @ inv(a)`` without forming the inverse."""
    return _mT(solve(_mT(a), _mT(b)))


def _rsolve_h(b, a):
    """``b @ inv(a)^H``."""
    return _mH(solve(a, _mH(b)))


@per_primitive
def _batch_front(prim):
    """Batching rule of a primitive that acts on the last two axes and broadcasts over the rest."""
    def rule(args, dims, **params):
        return bind(prim, move_to_front(args[0], dims[0]), **params), 0
    return rule


@per_primitive
def _batch_bcast(prim):
    """Batching rule of a primitive whose operands broadcast over their leading (batch) axes:
    each batched operand gets its vmapped axis in front and size-one axes after it up to the
    broadcast rank, so that it lines up with the others."""
    def rule(args, dims, **params):
        rank = max(ndim_of(a) - (d is not None) for a, d in zip(args, dims))
        new = []
        for a, d in zip(args, dims):
            if d is not None:
                a = move_to_front(a, d)
                missing = rank - (ndim_of(a) - 1)
                if missing:
                    s = shape_of(a)
                    a = ops.reshape(a, s[:1] + (1,) * missing + s[1:])
            new.append(a)
        return bind(prim, *new, **params), 0
    return rule


def _check_square(x, name):
    s = shape_of(x)
    if len(s) < 2 or s[-1] != s[-2]:
        raise ValueError(f"linalg.{name}: expected a stack of square matrices (..., M, M), got "
                         f"shape {s}")


# ---------------------------------------------------------------------------------------------
# inv


def inv(x, /):
    """The inverse of each square matrix in ``x``.

    Returns
    -------
    array
        Shaped like ``x``, of the backend of ``x`` (inside a transform, a value of that
        transform); integer input gives the default floating dtype. The derivative of ``inv(A)``
        along ``dA`` is ``-inv(A) @ dA @ inv(A)``.

    Raises
    ------
    ValueError
        If ``x`` is not a stack of square matrices ``(..., M, M)``.
    LinAlgError
        The backend's, if a matrix is singular (NumPy's ``numpy.linalg.LinAlgError``, a
        ``ValueError``), as torch raises.

    Examples
    --------
    >>> ad.linalg.inv(ad.asarray([[2., 0.], [0., 4.]]))
    tensor([[0.5000, 0.0000],
            [0.0000, 0.2500]])
    >>> a = ad.asarray([[1., 2.], [3., 4.]])
    >>> ad.allclose(ad.linalg.inv(a) @ a, ad.eye(2))
    True
    """
    _check_square(x, "inv")
    return bind(inv_p, x)


inv_p = decl.primitive(
    "linalg_inv", lambda xp, x: xp.linalg.inv(x), key="inv", public=inv,
    vjp=(lambda g, ans, x: -mm(_mH(ans), g, _mH(ans)),),
    jvp=(lambda t, ans, x: -mm(ans, t, ans),), batch=_batch_front)


# ---------------------------------------------------------------------------------------------
# det: d det = tr(adj(A) dA), so the VJP is g * adj(A)^H and the JVP sum(adj(A)^T * dA). For an
# invertible A, adj(A) = det(A) A^-1. For a singular one (inv fails) the adjugate comes from the
# SVD A = U diag(S) V^H: adj(A) = det(U) det(V^H) V diag(P) U^H with P_i the product of the other
# singular values, which is what torch returns there. Which one is chosen is read from the
# concrete determinant (at every level; a lazy Dask value is not computed for it): the SVD form
# is not used otherwise, because its own derivative (hessian of det) is singular at repeated
# singular values.

def _any_zero_det(ans):
    raw = raw_value(ans)
    b = backend_of(raw)
    return b.name != "dask" and bool(b.xp.any(raw == 0))


def _adjugate(x, ans):
    if not _any_zero_det(ans):
        return mul(ops.expand_dims(ans, axis=(-2, -1)), inv(x))
    u, s, vh = svd(x)
    c = ops.expand_dims(mul(det(u), det(vh)), axis=(-2, -1))
    others = _others_product(s, -1)
    return mul(c, matmul(mul(_mH(vh), ops.expand_dims(others, axis=-2)), _mH(u)))


def _det_vjp(g, ans, x):
    return mul(ops.expand_dims(g, axis=(-2, -1)), _mH(_adjugate(x, ans)))


def det(x, /):
    """The determinant of each square matrix in ``x``.

    Returns
    -------
    array
        Shaped ``x.shape[:-2]``, of the backend of ``x`` (inside a transform, a value of that
        transform); integer input gives the default floating dtype. The gradient is the cofactor
        matrix (for real ``A``: the transposed adjugate, ``det(A) * inv(A).T`` where ``A`` is
        invertible). At a singular matrix it is still the cofactors, computed from an SVD (JAX
        agrees; torch's eager ``backward`` and ``torch.func.jvp`` return zeros there). See
        ``docs/correctness.md``.

    Raises
    ------
    ValueError
        If ``x`` is not a stack of square matrices ``(..., M, M)``.

    Examples
    --------
    >>> ad.linalg.det(ad.asarray([[2., 0.], [0., 3.]]))
    tensor(6.)
    >>> ad.func.grad(ad.linalg.det)(ad.asarray([[2., 0.], [0., 3.]]))
    tensor([[3., 0.],
            [0., 2.]])
    >>> ad.func.grad(ad.linalg.det)(ad.asarray([[1., 0.], [0., 0.]]))   # singular: cofactors
    tensor([[0., 0.],
            [0., 1.]])
    """
    _check_square(x, "det")
    return bind(det_p, x)


det_p = decl.primitive(
    "linalg_det", lambda xp, x: xp.linalg.det(x), key="det", public=det,
    vjp=(_det_vjp,),
    jvp=(lambda t, ans, x: ops.sum(mul(_mT(_adjugate(x, ans)), t), axis=(-2, -1)),),
    batch=_batch_front)


# ---------------------------------------------------------------------------------------------
# slogdet: with tr = tr(A^-1 dA), d logabsdet = Re(tr) and d sign = i * sign * Im(tr) (zero for
# real input, whose sign is piecewise constant).

def _tuple_result(name):
    """impl of a linalg function with a named-tuple result, as the plain tuple a multi-output
    primitive returns (the public function wraps it in the standard's named tuple again)."""
    return lambda xp, x, **params: tuple(getattr(xp.linalg, name)(x, **params))


def _slogdet_jvp(tangents, ans, x):
    t = tangents[0]
    if t is None:
        return None, None
    sign, _ = ans
    tr = ops.sum(mul(_mT(inv(x)), t), axis=(-2, -1))
    if not is_complex(x):
        return None, tr
    return mul(sign, ops.astype(ops.imag(tr), dtype_of(x)) * 1j), ops.real(tr)


def _slogdet_vjp(g, ans, x):
    gs, gl = g
    a_inv_h = _mH(inv(x))
    if not is_complex(x):
        return mul(ops.expand_dims(gl, axis=(-2, -1)), a_inv_h)
    sign, _ = ans
    c = ops.real(mul(ops.conj(gs), sign) * 1j)
    gtr = add(ops.astype(gl, dtype_of(x)), ops.astype(c, dtype_of(x)) * 1j)
    return mul(ops.expand_dims(gtr, axis=(-2, -1)), a_inv_h)


def slogdet(x, /):
    """The sign and the log of the absolute value of the determinant of each square matrix in
    ``x``, accurate where ``det`` would overflow or underflow.

    Returns
    -------
    SlogdetResult
        A named tuple ``(sign, logabsdet)``, each shaped ``x.shape[:-2]`` and of the backend of
        ``x`` (inside a transform, a value of that transform): ``sign`` is -1, 0 or 1 (a unit
        complex number for complex ``x``) and ``logabsdet`` real;
        ``det = sign * exp(logabsdet)``. A singular matrix gives ``(0, -inf)``. The gradient of
        ``logabsdet`` is ``inv(A)^H`` (``inv(A).T`` for real ``A``).

    Raises
    ------
    ValueError
        If ``x`` is not a stack of square matrices ``(..., M, M)``.
    LinAlgError
        The backend's, when differentiating at a singular matrix (where the derivative is
        infinite).

    Examples
    --------
    >>> ad.linalg.slogdet(ad.asarray([[2., 0.], [0., -3.]])).sign
    tensor(-1.)
    >>> ad.func.grad(lambda a: ad.linalg.slogdet(a).logabsdet)(ad.asarray([[2., 0.], [0., 4.]]))
    tensor([[0.5000, 0.0000],
            [0.0000, 0.2500]])
    """
    _check_square(x, "slogdet")
    return SlogdetResult(*bind(slogdet_p, x))


slogdet_p = decl.primitive(
    "linalg_slogdet", _tuple_result("slogdet"), multiple_results=True, key="slogdet",
    public=slogdet,
    vjp=(_slogdet_vjp,),
    full_jvp=_slogdet_jvp, batch=_batch_front)


# ---------------------------------------------------------------------------------------------
# solve: X = A^-1 B. dX = A^-1 (dB - dA X); B_bar = A^-H g, A_bar = -B_bar X^H. The primitive
# sees B as a stack of matrices (the public function turns a 1-d B into a column) and broadcasts
# the batch axes itself, so that every backend gets operands of the same rank.

def _solve_impl(xp, a, b):
    batch = tuple(ops.broadcast_shapes(tuple(a.shape[:-2]), tuple(b.shape[:-2])))
    if tuple(a.shape[:-2]) != batch:
        a = xp.broadcast_to(a, batch + tuple(a.shape[-2:]))
    if tuple(b.shape[:-2]) != batch:
        b = xp.broadcast_to(b, batch + tuple(b.shape[-2:]))
    return xp.linalg.solve(a, b)


def _solve_vjp_b(g, ans, a, b):
    return unbroadcast(solve(_mH(a), g), b)


def _solve_vjp_a(g, ans, a, b):
    gb = solve(_mH(a), g)
    return unbroadcast(-mm(gb, _mH(ans)), a)


def solve(x1, x2, /):
    """The solution ``X`` of ``x1 @ X = x2``, for each square matrix in ``x1``.

    Parameters
    ----------
    x1 : array
        A stack of square matrices ``(..., M, M)``.
    x2 : array
        The right-hand sides: a vector ``(M,)`` if 1-d (the 2024.12 rule), otherwise a stack
        of matrices ``(..., M, K)``; the leading axes of both broadcast.

    Returns
    -------
    array
        Shaped like ``x2`` (with the broadcast leading axes), of the arguments' backend (inside
        a transform, a value of that transform), computed without forming ``inv(x1)``. The
        gradients are ``B_bar = solve(x1^H, g)`` and ``A_bar = -B_bar @ X^H``.

    Raises
    ------
    ValueError
        If ``x1`` is not a stack of square matrices, or the sizes of ``x2`` do not match.
    LinAlgError
        The backend's, if a matrix is singular (as torch).

    Examples
    --------
    >>> ad.linalg.solve(ad.asarray([[2., 0.], [0., 4.]]), ad.asarray([2., 4.]))
    tensor([1., 1.])
    >>> a, b = ad.asarray([[3., 1.], [1., 2.]]), ad.asarray([9., 8.])
    >>> ad.allclose(a @ ad.linalg.solve(a, b), b)
    True
    """
    _check_square(x1, "solve")
    if ndim_of(x2) == 1:
        return ops.squeeze(bind(solve_p, x1, ops.expand_dims(x2, axis=-1)), axis=-1)
    return bind(solve_p, x1, x2)


solve_p = decl.primitive(
    "linalg_solve", _solve_impl, key="solve", public=solve,
    vjp=(_solve_vjp_a, _solve_vjp_b),
    jvp=(lambda t, ans, a, b: solve(a, -mm(t, ans)), lambda t, ans, a, b: solve(a, t)),
    batch=_batch_bcast)


# ---------------------------------------------------------------------------------------------
# cholesky (lower factor; upper=True is its conjugate transpose). With L^-1 dA L^-H = X + X^H,
# X = L^-1 dL lower triangular: dL = L Phi(L^-1 dA L^-H), Phi = lower triangle with the diagonal
# halved (Murray 2016). Its adjoint: A_bar = L^-H Phi(L^H L_bar) L^-1, made Hermitian.

def _phi(x):
    return ops.tril(x, k=-1) + 0.5 * (x * _eye_mask(x))


def _cholesky_jvp(t, ans, x):
    l_inv = inv(ans)
    return mm(ans, _phi(mm(l_inv, _herm(t), _mH(l_inv))))


def _cholesky_vjp(g, ans, x):
    l_inv = inv(ans)
    return _herm(mm(_mH(l_inv), _phi(mm(_mH(ans), g)), l_inv))


def cholesky(x, /, *, upper=False):
    """The Cholesky factor of each Hermitian positive-definite matrix in ``x``: ``L`` lower
    triangular with ``x = L @ L^H``.

    Parameters
    ----------
    x : array
        A stack of Hermitian (symmetric) positive-definite matrices ``(..., M, M)``. Only the
        lower triangle is read.
    upper : bool, optional
        Return the upper factor ``U = L^H`` (``x = U^H @ U``) instead (default False).

    Returns
    -------
    array
        Shaped like ``x``, of the backend of ``x`` (inside a transform, a value of that
        transform). As ``x`` is read through one triangle, its derivative is defined for
        Hermitian perturbations: the JVP uses the Hermitian part of the tangent and the gradient
        is Hermitian (torch's convention).

    Raises
    ------
    ValueError
        If ``x`` is not a stack of square matrices ``(..., M, M)``.
    LinAlgError
        The backend's, if a matrix is not positive definite.

    Examples
    --------
    >>> ad.linalg.cholesky(ad.asarray([[4., 2.], [2., 5.]]))
    tensor([[2., 0.],
            [1., 2.]])
    """
    _check_square(x, "cholesky")
    low = bind(cholesky_p, x)
    return _mH(low) if upper else low


cholesky_p = decl.primitive(
    "linalg_cholesky", lambda xp, x: xp.linalg.cholesky(x), key="cholesky", public=cholesky,
    vjp=(_cholesky_vjp,),
    jvp=(_cholesky_jvp,), batch=_batch_front)


# ---------------------------------------------------------------------------------------------
# eigh: A = V diag(w) V^H. With P = V^H dA V and F[i, j] = 1/(w_j - w_i):
#   dw = Re diag(P), dV = V (F * P);
#   A_bar = V (diag(w_bar) + F * skew(V^H V_bar)) V^H   (Hermitian; skew(M) = (M - M^H)/2).
# Limitation: degenerate eigenvalues (see the module note); the eigenvectors' phase (complex) is
# a gauge, so only losses invariant to it have a meaningful derivative.


def _eigh_jvp(tangents, ans, x):
    t = tangents[0]
    if t is None:
        return None, None
    w, v = ans
    p = mm(_mH(v), _herm(t), v)
    dw = _real(diagonal(p))
    dv = mm(v, mul(_gap_inverse(w), p))
    return dw, dv


def _eigh_vjp(g, ans, x):
    gw, gv = g
    w, v = ans
    vhgv = mm(_mH(v), gv)
    inner = add(mul(_gap_inverse(w), 0.5 * (vhgv - _mH(vhgv))), _diag_embed(gw))
    return mm(v, inner, _mH(v))


def eigh(x, /):
    """The eigenvalues and eigenvectors of each Hermitian (symmetric) matrix in ``x``.

    Only the lower triangle of ``x`` is read; the derivative is taken for Hermitian
    perturbations (the gradient is Hermitian, as torch's).

    Returns
    -------
    EighResult
        A named tuple ``(eigenvalues, eigenvectors)``, of the backend of ``x`` (inside a
        transform, a value of that transform): the eigenvalues real and ascending, shaped
        ``(..., M)``; the eigenvectors the orthonormal columns of an ``(..., M, M)`` array, each
        defined up to sign (a phase for complex ``x``), so only a loss that does not depend on
        that choice has a meaningful derivative. Where eigenvalues repeat, the eigenvectors are
        not unique and have no derivative: the terms that divide by a zero gap are set to zero
        (a finite value where torch returns nan or inf), so a loss of the eigenvalues alone
        stays exact and one of the eigenvectors gets one choice among many. Near-repeated
        eigenvalues give large derivatives.

    Raises
    ------
    ValueError
        If ``x`` is not a stack of square matrices ``(..., M, M)``.

    Examples
    --------
    >>> a = ad.asarray([[2., 1.], [1., 2.]])
    >>> w, v = ad.linalg.eigh(a)
    >>> w
    tensor([1., 3.])
    >>> ad.allclose(v @ ad.diag(w) @ v.T, a)
    True
    """
    _check_square(x, "eigh")
    return EighResult(*bind(eigh_p, x))


eigh_p = decl.primitive(
    "linalg_eigh", _tuple_result("eigh"), multiple_results=True, key="eigh", public=eigh,
    vjp=(_eigh_vjp,),
    full_jvp=_eigh_jvp, batch=_batch_front)


@decl.composite
def eigvalsh(x, /):
    """The eigenvalues of each Hermitian (symmetric) matrix in ``x``, ascending.

    Only the lower triangle of ``x`` is read.

    Returns
    -------
    array
        Real, shaped ``(..., M)``, of the backend of ``x`` (inside a transform, a value of that
        transform). The gradient of eigenvalue ``i`` is ``v_i v_i^H`` (its eigenvector's outer
        product), also where eigenvalues repeat: a symmetric function of them, such as their
        sum, has the exact gradient there.

    Raises
    ------
    ValueError
        If ``x`` is not a stack of square matrices ``(..., M, M)``.

    Examples
    --------
    >>> ad.linalg.eigvalsh(ad.asarray([[1., 5.], [0., 3.]]))   # the upper 5 is not read
    tensor([1., 3.])
    >>> ad.func.grad(lambda a: ad.sum(ad.linalg.eigvalsh(a)))(ad.eye(2))   # d trace = I
    tensor([[1., 0.],
            [0., 1.]])
    """
    return eigh(x).eigenvalues


# ---------------------------------------------------------------------------------------------
# eig (2025.12): general square matrices, complex results. With T = V^-1 dA V, E[i, j] = w_j - w_i:
#   dw = diag(T), dV = V (T / E) - V diag(Re diag(V^H V (T / E)))  (columns keep unit norm);
#   A_bar = V^-H (diag(w_bar) + conj(1/E) * (V^H V_bar - V^H V diag(Re diag(V^H V_bar)))) V^H,
# real for real input. The eigenvectors' phase is a gauge: use losses invariant to it.

def _complex_of(xp, x):
    dt = x.dtype
    if xp.isdtype(dt, "complex floating"):
        return dt
    return xp.complex64 if dt == xp.float32 else xp.complex128


def _eig_impl(xp, x):
    w, v = xp.linalg.eig(x)
    ct = _complex_of(xp, x)
    return xp.astype(w, ct), xp.astype(v, ct)


def _eig_jvp(tangents, ans, x):
    t = tangents[0]
    if t is None:
        return None, None
    w, v = ans
    tmat = solve(v, mm(ops.astype(t, dtype_of(v), copy=False), v))  # torch: one dtype in matmul
    dw = diagonal(tmat)
    dv = mm(v, mul(_gap_inverse(w), tmat))
    dv = sub(dv, mul(v, ops.expand_dims(ops.real(diagonal(mm(_mH(v), dv))), axis=-2)))
    return dw, dv


def _eig_vjp(g, ans, x):
    gw, gv = g
    w, v = ans
    vh = _mH(v)
    vhgv = mm(vh, gv)
    vhgv = sub(vhgv, mul(mm(vh, v), ops.expand_dims(ops.real(diagonal(vhgv)), axis=-2)))
    inner = add(mul(ops.conj(_gap_inverse(w)), vhgv), _diag_embed(gw))
    ga = solve(vh, mm(inner, vh))
    return ga if is_complex(x) else ops.real(ga)


def eig(x, /):
    """The eigenvalues and eigenvectors of each square matrix in ``x`` (2025.12 standard).

    Returns
    -------
    EigResult
        A named tuple ``(eigenvalues, eigenvectors)``, of the backend of ``x`` (inside a
        transform, a value of that transform), always complex (complex64 for float32 or
        complex64 input, complex128 otherwise), in no particular order: eigenvalues ``(..., M)``
        and unit-norm eigenvectors as the columns of ``(..., M, M)``. Each eigenvector is
        defined up to a complex phase, so only a loss that does not depend on it has a
        meaningful derivative; the gradient of a real ``x`` is real. Repeated eigenvalues: as
        ``eigh`` (the zero-gap terms are set to zero).

    Raises
    ------
    ValueError
        If ``x`` is not a stack of square matrices ``(..., M, M)``.

    Examples
    --------
    >>> a = ad.asarray([[2., 1.], [0., 3.]])
    >>> w, v = ad.linalg.eig(a)
    >>> ad.allclose(a @ v, v * w)
    True
    """
    _check_square(x, "eig")
    return EigResult(*bind(eig_p, x))


eig_p = decl.primitive(
    "linalg_eig", _eig_impl, multiple_results=True, key="eig", public=eig,
    vjp=(_eig_vjp,), full_jvp=_eig_jvp,
    batch=_batch_front)


@decl.composite
def eigvals(x, /):
    """The eigenvalues of each square matrix in ``x`` (2025.12 standard).

    Returns
    -------
    array
        Complex (complex64 for float32 or complex64 input, complex128 otherwise), shaped
        ``(..., M)``, of the backend of ``x`` (inside a transform, a value of that transform),
        in no particular order. The derivative of a simple eigenvalue is
        ``u^H dA v / (u^H v)`` with ``u``, ``v`` its left and right eigenvectors.

    Raises
    ------
    ValueError
        If ``x`` is not a stack of square matrices ``(..., M, M)``.

    Examples
    --------
    >>> ad.linalg.eigvals(ad.asarray([[0., -1.], [1., 0.]]))   # a rotation: +i and -i
    tensor([0.0000+1.0000j, 0.0000-1.0000j], dtype=arrayad.complex128)
    """
    return eig(x).eigenvalues


# ---------------------------------------------------------------------------------------------
# qr. For M >= N (reduced): with X = Q^H dA R^-1 and C = skew part of X's strict lower triangle
# (plus i Im diag(X) for complex input, R having a real diagonal),
#   dR = (X - C) R,  dQ = dA R^-1 - Q (X - C);
#   A_bar = (Q_bar + Q N) R^-H,  M = R_bar R^H - Q^H Q_bar,
#   N = M - tril(M, -1) + tril(M^H, -1) - i Im diag(M)   (the adjoint of the map X -> X - C).
# For M < N, A = [X | Y] and R = [U | V] with X = Q U square and V = Q^H Y.
# mode='complete' with M > N is not differentiable (Q's extra columns are not unique).


def _imag_diag(x):
    """i * Im(diag(x)) as a diagonal matrix (zero for real input, then None)."""
    if not is_complex(x):
        return None
    d = ops.astype(ops.imag(diagonal(x)), dtype_of(x)) * 1j
    return _diag_embed(d)


def _qr_tall_jvp(q, r, da):
    x = _rsolve(mm(_mH(q), da), r)
    low = ops.tril(x, k=-1)
    c = low - _mH(low)
    im = _imag_diag(x)
    if im is not None:
        c = c + im
    dr = mm(x - c, r)
    dq = sub(_rsolve(da, r), mm(q, x - c))
    return dq, dr


def _qr_tall_vjp(q, r, gq, gr):
    m = sub(mm(gr, _mH(r)), mm(_mH(q), gq))
    n = m - ops.tril(m, k=-1) + ops.tril(_mH(m), k=-1)
    im = _imag_diag(m)
    if im is not None:
        n = n - im
    return _rsolve_h(add(gq, mm(q, n)), r)


def _qr_check(x, mode):
    m, n = shape_of(x)[-2:]
    if mode == "complete" and m > n:
        raise NotImplementedError(
            "linalg.qr: the derivative of mode='complete' for tall matrices (M > N) is not "
            "defined (the extra columns of Q are not unique); use mode='reduced'.")
    return m, n


def _qr_jvp(tangents, ans, x, mode="reduced"):
    t = tangents[0]
    if t is None:
        return None, None
    m, n = _qr_check(x, mode)
    q, r = ans
    if m >= n:
        return _qr_tall_jvp(q, r, t)
    u, vv = r[..., :, :m], r[..., :, m:]
    dq, du = _qr_tall_jvp(q, u, t[..., :, :m])
    dv = mm(_mH(q), sub(t[..., :, m:], mm(dq, vv)))
    return dq, ops.concat([du, dv], axis=-1)


def _qr_vjp(g, ans, x, mode="reduced"):
    m, n = _qr_check(x, mode)
    gq, gr = g
    q, r = ans
    if m >= n:
        return _qr_tall_vjp(q, r, gq, gr)
    u = r[..., :, :m]
    gu, gv = gr[..., :, :m], gr[..., :, m:]
    y = x[..., :, m:]
    gx = _qr_tall_vjp(q, u, add(gq, mm(y, _mH(gv))), gu)
    return ops.concat([gx, mm(q, gv)], axis=-1)


def qr(x, /, *, mode="reduced"):
    """The QR decomposition of each matrix in ``x``: ``x = Q @ R``, ``Q`` with orthonormal
    columns, ``R`` upper triangular.

    Parameters
    ----------
    x : array
        A stack of matrices ``(..., M, N)``.
    mode : {'reduced', 'complete'}, optional
        'reduced' (default): ``Q`` is ``(..., M, K)`` and ``R`` ``(..., K, N)`` with
        ``K = min(M, N)``; 'complete': ``Q`` is ``(..., M, M)`` and ``R`` ``(..., M, N)``.

    Returns
    -------
    QRResult
        A named tuple ``(Q, R)``, of the backend of ``x`` (inside a transform, a value of that
        transform). Differentiable for every shape in 'reduced' mode (wide matrices too);
        'complete' for a tall ``x`` (M > N) is refused when differentiated: the extra columns of
        ``Q`` are not unique.

    Raises
    ------
    ValueError
        If ``mode`` is neither 'reduced' nor 'complete', or ``x`` has fewer than 2 dimensions.
    NotImplementedError
        When differentiating ``mode='complete'`` for ``M > N`` (the message says to use
        'reduced').

    Examples
    --------
    >>> a = ad.asarray([[1., 2.], [3., 4.], [5., 6.]])
    >>> q, r = ad.linalg.qr(a)
    >>> q.shape, r.shape, ad.allclose(q @ r, a)
    ((3, 2), (2, 2), True)
    """
    if mode not in ("reduced", "complete"):
        raise ValueError(f"linalg.qr: mode must be 'reduced' or 'complete', got {mode!r}")
    if ndim_of(x) < 2:
        raise ValueError("linalg.qr: x must have at least 2 dimensions")
    return QRResult(*bind(qr_p, x, mode=mode))


qr_p = decl.primitive(
    "linalg_qr", _tuple_result("qr"), multiple_results=True, key="qr", public=qr,
    vjp=(_qr_vjp,), full_jvp=_qr_jvp,
    batch=_batch_front)


# ---------------------------------------------------------------------------------------------
# svd: A = U diag(S) V^H, K = min(M, N). With dP = U^H dA V and F[i, j] = 1/(S_j^2 - S_i^2):
#   dS = Re diag(dP),
#   dU = U (F * (dP S + S dP^H)) + (dA V - U dP) S^-1   (+ U i Im diag(dP) / S, complex),
#   dV = V (F * (S dP + dP^H S)) + (dA^H U - V dP^H) S^-1;
#   A_bar = U (diag(S_bar) + (J + J^H) S + S (K + K^H)) V^H + (I - U U^H) U_bar S^-1 V^H
#           + U S^-1 V_bar^H (I - V V^H),   J = F * (U^H U_bar), K = F * (V^H V_bar)
#           (+ U i Im diag(U^H U_bar) / S V^H, complex).
# Limits: full_matrices=True is differentiable only for square input; repeated singular values
# and zero singular values (with U or V in the loss) have no derivative (see the module note).


def _svd_check(x, full_matrices):
    m, n = shape_of(x)[-2:]
    if full_matrices and m != n:
        raise NotImplementedError(
            "linalg.svd: the derivative of full_matrices=True for non-square input is not "
            "defined (the extra singular vectors are not unique); use full_matrices=False.")


def _row(s):
    return ops.expand_dims(s, axis=-2)


def _col(s):
    return ops.expand_dims(s, axis=-1)


def _svd_jvp(tangents, ans, x, full_matrices=True):
    t = tangents[0]
    if t is None:
        return None, None, None
    _svd_check(x, full_matrices)
    u, s, vh = ans
    v = _mH(vh)
    dp = mm(_mH(u), t, v)
    ds = _real(diagonal(dp))
    f = _gap_inverse(s * s)
    s_inv = _safe_reciprocal(s)
    dph = _mH(dp)
    du = add(mm(u, mul(f, add(mul(dp, _row(s)), mul(_col(s), dph)))),
             mul(sub(mm(t, v), mm(u, dp)), _row(s_inv)))
    if is_complex(dp):
        du = add(du, mul(u, _row(ops.astype(mul(ops.imag(diagonal(dp)), s_inv), dtype_of(dp))
                                 * 1j)))
    dv = add(mm(v, mul(f, add(mul(_col(s), dp), mul(dph, _row(s))))),
             mul(sub(mm(_mH(t), u), mm(v, dph)), _row(s_inv)))
    return du, ds, _mH(dv)


def _svd_vjp(g, ans, x, full_matrices=True):
    _svd_check(x, full_matrices)
    gu, gs, gvh = g
    u, s, vh = ans
    v = _mH(vh)
    gv = _mH(gvh)
    f = _gap_inverse(s * s)
    s_inv = _safe_reciprocal(s)
    uhgu = mm(_mH(u), gu)
    vhgv = mm(_mH(v), gv)
    j = mul(f, uhgu)
    k = mul(f, vhgv)
    inner = add(_diag_embed(gs), add(mul(j + _mH(j), _row(s)), mul(_col(s), k + _mH(k))))
    if is_complex(uhgu):
        inner = add(inner, _diag_embed(
            ops.astype(mul(ops.imag(diagonal(uhgu)), s_inv), dtype_of(uhgu)) * 1j))
    out = mm(u, inner, vh)
    out = add(out, mm(mul(sub(gu, mm(u, uhgu)), _row(s_inv)), vh))
    out = add(out, mm(u, mul(_col(s_inv), _mH(sub(gv, mm(v, vhgv))))))
    return out


def svd(x, /, *, full_matrices=True):
    """The singular value decomposition of each matrix in ``x``: ``x = U @ diag(S) @ Vh``.

    Parameters
    ----------
    x : array
        A stack of matrices ``(..., M, N)``.
    full_matrices : bool, optional
        True (default, the standard's): ``U`` is ``(..., M, M)`` and ``Vh`` ``(..., N, N)``;
        False: ``(..., M, K)`` and ``(..., K, N)`` with ``K = min(M, N)``.

    Returns
    -------
    SVDResult
        A named tuple ``(U, S, Vh)``, of the backend of ``x`` (inside a transform, a value of
        that transform): ``S`` real, non-negative and descending, ``(..., K)``. The singular
        vectors are defined up to sign (a phase for complex ``x``); only losses that do not
        depend on it have a meaningful derivative. Where singular values repeat, or are zero
        while ``U`` or ``Vh`` enter the loss, the vectors have no derivative: the terms that
        divide by a zero gap are set to zero (finite, a choice, where torch returns nan or inf);
        losses of ``S`` alone are exact. With ``full_matrices=True`` only square ``x`` can be
        differentiated.

    Raises
    ------
    ValueError
        If ``x`` has fewer than 2 dimensions.
    NotImplementedError
        When differentiating ``full_matrices=True`` for non-square ``x`` (the extra singular
        vectors are not unique; the message says to use ``full_matrices=False``).

    Examples
    --------
    >>> a = ad.asarray([[3., 0.], [4., 5.]])
    >>> u, s, vh = ad.linalg.svd(a)
    >>> ad.allclose(u @ ad.diag(s) @ vh, a)
    True
    """
    if ndim_of(x) < 2:
        raise ValueError("linalg.svd: x must have at least 2 dimensions")
    return SVDResult(*bind(svd_p, x, full_matrices=full_matrices))


svd_p = decl.primitive(
    "linalg_svd", _tuple_result("svd"), multiple_results=True, key="svd", public=svd,
    vjp=(_svd_vjp,), full_jvp=_svd_jvp,
    batch=_batch_front)


@decl.composite
def svdvals(x, /):
    """The singular values of each matrix in ``x``, descending.

    Returns
    -------
    array
        Real and non-negative, shaped ``(..., min(M, N))``, of the backend of ``x`` (inside a
        transform, a value of that transform). The gradient of singular value ``i`` is
        ``u_i v_i^H``, also where singular values repeat (a symmetric function of them, such as
        their sum, is exact there).

    Raises
    ------
    ValueError
        If ``x`` has fewer than 2 dimensions.

    Examples
    --------
    >>> ad.linalg.svdvals(ad.asarray([[0., 2.], [3., 0.]]))
    tensor([3., 2.])
    """
    return svd(x, full_matrices=False).S


# ---------------------------------------------------------------------------------------------
# Composites

@decl.composite
def diagonal(x, /, *, offset=0):
    """The diagonal ``offset`` of each matrix in ``x``.

    Parameters
    ----------
    x : array
        A stack of matrices ``(..., M, N)``.
    offset : int, optional
        Which diagonal: 0, the default, is the main one, ``offset > 0`` above it,
        ``offset < 0`` below.

    Returns
    -------
    array
        Shaped ``(..., L)`` with ``L`` the length of that diagonal (0 if it lies outside the
        matrix), of the backend of ``x`` (inside a transform, a value of that transform) and of
        its dtype: a strided slice of the flattened matrices, so that its derivative comes from
        reshape and indexing.

    Raises
    ------
    ValueError
        If ``x`` has fewer than 2 dimensions.

    Examples
    --------
    >>> ad.linalg.diagonal(ad.asarray([[1., 2.], [3., 4.]]))
    tensor([1., 4.])
    >>> ad.linalg.diagonal(ad.asarray([[1., 2.], [3., 4.]]), offset=1)
    tensor([2.])
    """
    if len(shape_of(x)) < 2:
        raise ValueError("linalg.diagonal: x must have at least 2 dimensions")
    return make_view(_diagonal(x, offset), x, Diagonal(offset))


def _diagonal_span(shape, offset):
    """Where diagonal ``offset`` of ``shape[-2:]`` matrices lies: its first (row, column), its
    length."""
    m, n = shape[-2:]
    if offset >= 0:
        return 0, offset, max(0, min(m, n - offset))
    return -offset, 0, max(0, min(m + offset, n))


def _diagonal(x, offset):
    # a strided slice of the flattened matrices: its derivative comes from reshape and indexing
    s = shape_of(x)
    m, n = s[-2:]
    r0, c0, length = _diagonal_span(s, offset)
    flat = bind(reshape_p, x, shape=s[:-2] + (m * n,))
    start = r0 * n + c0
    return getitem(flat, (Ellipsis, slice(start, start + (length - 1) * (n + 1) + 1 if length
                                          else start, n + 1)))


class Diagonal(View):
    """``diagonal``: one diagonal of each matrix."""
    __slots__ = ("offset",)
    name = "diagonal"

    def __init__(self, offset):
        self.offset = offset

    def read(self, base):
        return _diagonal(base, self.offset)

    def write(self, base, value):
        r0, c0, length = _diagonal_span(shape_of(base), self.offset)
        return setitem(base, (Ellipsis, list(range(r0, r0 + length)),
                              list(range(c0, c0 + length))), value)

    def layout(self, a):
        return a.diagonal(self.offset, -2, -1)


@decl.composite
def trace(x, /, *, offset=0, dtype=None):
    """The sum of the diagonal ``offset`` of each matrix in ``x``.

    Parameters
    ----------
    x : array
        A stack of matrices ``(..., M, N)``.
    offset : int, optional
        Which diagonal, as in ``diagonal`` (default 0, the main one).
    dtype : dtype, optional
        The dtype of the result; by default as ``sum``'s (integers widened to int64).

    Returns
    -------
    array
        Shaped ``x.shape[:-2]``, of the backend of ``x`` (inside a transform, a value of that
        transform). The gradient is the identity (shifted by ``offset``) times the cotangent.

    Raises
    ------
    ValueError
        If ``x`` has fewer than 2 dimensions.

    Examples
    --------
    >>> ad.linalg.trace(ad.asarray([[1., 2.], [3., 4.]]))
    tensor(5.)
    """
    return ops.sum(diagonal(x, offset=offset), axis=-1, dtype=dtype)


@decl.composite
def outer(x1, x2, /):
    """The outer product of two vectors: ``out[i, j] = x1[i] * x2[j]`` (not conjugated).

    Returns
    -------
    array
        Shaped ``(len(x1), len(x2))``, of the arguments' backend (inside a transform, a value
        of that transform) and promoted dtype.

    Raises
    ------
    ValueError
        If ``x1`` or ``x2`` is not 1-d.

    Examples
    --------
    >>> ad.linalg.outer(ad.asarray([1., 2.]), ad.asarray([3., 4.]))
    tensor([[3., 4.],
            [6., 8.]])
    """
    if ndim_of(x1) != 1 or ndim_of(x2) != 1:
        raise ValueError("linalg.outer: x1 and x2 must be 1-d")
    return mul(ops.expand_dims(x1, axis=-1), ops.expand_dims(x2, axis=0))


@decl.composite
def cross(x1, x2, /, *, axis=-1):
    """The cross product of 3-element vectors along ``axis``.

    Parameters
    ----------
    x1, x2 : array
        The vectors, along ``axis``; the other axes broadcast.
    axis : int, optional
        The axis of the vectors (default: the last), which must have size 3.

    Returns
    -------
    array
        The broadcast shape, of the arguments' backend (inside a transform, a value of that
        transform) and promoted dtype.

    Raises
    ------
    ValueError
        If ``axis`` does not have size 3, or the shapes cannot be broadcast together.

    Examples
    --------
    >>> ad.linalg.cross(ad.asarray([1., 0., 0.]), ad.asarray([0., 1., 0.]))
    tensor([0., 0., 1.])
    """
    x1, x2 = ops.broadcast_arrays(x1, x2)
    ax = normalize_axis(axis, ndim_of(x1))
    if shape_of(x1)[ax] != 3:
        raise ValueError(f"linalg.cross: axis {axis} must have size 3, got {shape_of(x1)[ax]}")
    # c_i = a_{i+1} b_{i+2} - a_{i+2} b_{i+1} (indices mod 3): rolls, no slicing or stacking
    def r(v, k):
        return ops.roll(v, -k, axis=ax)
    return sub(mul(r(x1, 1), r(x2, 2)), mul(r(x1, 2), r(x2, 1)))


@decl.composite
def matrix_power(x, n, /):
    """``x`` multiplied by itself ``n`` times, for each square matrix in ``x``.

    Computed by repeated squaring, so that its derivative comes from ``matmul`` (and ``inv``).

    Parameters
    ----------
    x : array
        A stack of square matrices ``(..., M, M)``.
    n : int
        The power: ``n == 0`` gives the identity, ``n < 0`` the ``-n``-th power of the inverse.

    Returns
    -------
    array
        Shaped like ``x``, of the backend of ``x`` (inside a transform, a value of that transform).

    Raises
    ------
    ValueError
        If ``x`` is not a stack of square matrices ``(..., M, M)``.
    TypeError
        If ``n`` is not an int.
    LinAlgError
        The backend's, for ``n < 0`` and a singular matrix.

    Examples
    --------
    >>> ad.linalg.matrix_power(ad.asarray([[2., 0.], [0., 3.]]), 2)
    tensor([[4., 0.],
            [0., 9.]])
    """
    _check_square(x, "matrix_power")
    if not isinstance(n, int):
        raise TypeError("linalg.matrix_power: n must be an int")
    if n == 0:
        # a where on x (all true), so that the result stays at x's level: a raw constant
        # would meet tracers in the caller's arithmetic, which array-api-strict refuses
        return ops.where(ops.zeros_like(x) == 0, eye_like(x, shape_of(x)[-1]), x)
    if n < 0:
        x, n = inv(x), -n
    result = None
    base = x
    while True:
        if n & 1:
            result = base if result is None else result @ base
        n >>= 1
        if not n:
            return result
        base = base @ base


def _default_rtol(x, s):
    m, n = shape_of(x)[-2:]
    return max(m, n) * ops.finfo(_real_dtype(dtype_of(s))).eps


@decl.composite
def matrix_rank(x, /, *, rtol=None):
    """The rank of each matrix in ``x``: the number of singular values larger than
    ``rtol * max(S)``.

    Parameters
    ----------
    x : array
        A stack of matrices ``(..., M, N)``.
    rtol : float or array, optional
        The relative tolerance (an array broadcasts against ``x.shape[:-2]``); by default
        ``max(M, N) * eps`` of the real dtype of ``x``.

    Returns
    -------
    array
        Shaped ``x.shape[:-2]``, of the default integer dtype (int64), of the backend of ``x``
        (inside a transform, a value of that transform). Not differentiable: an integer.

    Raises
    ------
    ValueError
        If ``x`` has fewer than 2 dimensions.

    Examples
    --------
    >>> ad.linalg.matrix_rank(ad.asarray([[1., 2.], [2., 4.]]))
    tensor(1)
    """
    s = ops.stop_gradient(svdvals(x))
    if rtol is None:
        rtol = _default_rtol(x, s)
    elif not isinstance(rtol, (int, float)):
        rtol = ops.expand_dims(rtol, axis=-1)
    tol = ops.max(s, axis=-1, keepdims=True) * rtol
    return ops.count_nonzero(s > tol, axis=-1)


@decl.composite
def pinv(x, /, *, rtol=None):
    """The Moore-Penrose pseudo-inverse of each matrix in ``x``, from its SVD.

    Parameters
    ----------
    x : array
        A stack of matrices ``(..., M, N)``.
    rtol : float or array, optional
        Singular values at most ``rtol * max(S)`` count as zero (an array broadcasts against
        ``x.shape[:-2]``); by default ``max(M, N) * eps`` of the real dtype of ``x``.

    Returns
    -------
    array
        Shaped ``(..., N, M)``, of the backend of ``x`` (inside a transform, a value of that
        transform). Differentiable where the rank is locally constant (the derivative jumps
        where a singular value crosses the tolerance), and, being computed from the SVD, subject
        to ``svd``'s rule for repeated singular values.

    Raises
    ------
    ValueError
        If ``x`` has fewer than 2 dimensions.

    Examples
    --------
    >>> ad.linalg.pinv(ad.asarray([[2., 0.], [0., 0.]]))
    tensor([[0.5000, 0.0000],
            [0.0000, 0.0000]])
    >>> a = ad.asarray([[1., 2.], [3., 4.], [5., 6.]])
    >>> ad.allclose(ad.linalg.pinv(a) @ a, ad.eye(2))
    True
    """
    u, s, vh = svd(x, full_matrices=False)
    if rtol is None:
        rtol = _default_rtol(x, s)
    elif not isinstance(rtol, (int, float)):
        rtol = ops.expand_dims(rtol, axis=-1)
    keep = ops.stop_gradient(s > ops.max(s, axis=-1, keepdims=True) * rtol)
    s_inv = ops.where(keep, 1.0 / ops.where(keep, s, 1.0), 0.0)
    return _mH(vh) @ (ops.expand_dims(ops.astype(s_inv, dtype_of(u)), axis=-1) * _mH(u))


def _abs2(x):
    """|x|^2, smooth everywhere (abs is not differentiable at 0)."""
    return ops.real(x * ops.conj(x)) if is_complex(x) else x * x


@decl.composite
def vector_norm(x, /, *, axis=None, keepdims=False, ord=2):
    """The ``ord``-norm of the vectors of ``x`` over ``axis``.

    Parameters
    ----------
    x : array
        Input array.
    axis : int or tuple of ints, optional
        The axes that hold the vectors; None, the default, takes all of ``x`` as one vector.
    keepdims : bool, optional
        Keep the reduced axes as axes of length one.
    ord : int, float, inf or -inf, optional
        2 (default): Euclidean; 1: sum of absolute values; ``inf``/``-inf``: largest/smallest
        absolute value; 0: the number of non-zero elements; any other ``p``:
        ``sum(abs(x) ** p) ** (1 / p)``.

    Returns
    -------
    array
        Real, of the backend of ``x`` (inside a transform, a value of that transform), shaped
        like ``x`` without the reduced axes. As torch, the gradient is 0 (not nan) at ``x = 0``
        for every ``ord``, and 0 at zero entries for ``0 < ord < 1`` (whose derivative there is
        infinite) and at a zero norm for ``ord < 0``; the ``inf`` norms share the gradient
        among tied elements (as ``max``); ``ord=0`` has a zero gradient.

    Raises
    ------
    IndexError
        If an axis is out of range for ``x``.
    ValueError
        If ``ord`` is not a number (the matrix norms' 'fro'/'nuc' belong to ``matrix_norm``).

    Examples
    --------
    >>> ad.linalg.vector_norm(ad.asarray([3., 4.]))
    tensor(5.)
    >>> ad.linalg.vector_norm(ad.asarray([3., -4.]), ord=1)
    tensor(7.)
    >>> ad.func.grad(ad.linalg.vector_norm)(ad.zeros(2))
    tensor([0., 0.])
    """
    if isinstance(ord, bool) or not isinstance(ord, (int, float)):
        raise ValueError(f"vector_norm: ord must be a number (2, 1, inf, -inf, 0 or any p), got "
                         f"{ord!r}" + ("; the Frobenius norm is matrix_norm's ord='fro'"
                                       if ord == "fro" else ""))
    if ord == 2:
        return _safe_sqrt(ops.sum(_abs2(x), axis=axis, keepdims=keepdims))
    a = ops.abs(x)
    if ord == 1:
        return ops.sum(a, axis=axis, keepdims=keepdims)
    if ord == float("inf"):
        return ops.max(a, axis=axis, keepdims=keepdims)
    if ord == -float("inf"):
        return ops.min(a, axis=axis, keepdims=keepdims)
    if ord == 0:
        return ops.astype(ops.count_nonzero(ops.stop_gradient(a), axis=axis, keepdims=keepdims),
                         dtype_of(a))
    return _p_norm(a, ord, axis, keepdims)


def _p_norm(a, p, axis, keepdims):
    """``sum(a ** p) ** (1 / p)`` of ``a = |x|``, with torch's gradient at zeros.

    Written plainly, a zero entry gives ``0 * inf = nan``: ``a ** p`` has an infinite derivative at
    0 for ``p < 1``, and the outer ``s ** (1 / p)`` one at ``s = 0`` for ``p > 1``. torch's rule
    (and ours) is 0 there, where the true derivative is a kink or infinite:

    * a zero entry takes no part in the sum (``where`` gives it a structural zero gradient): for
      ``p > 1`` that is its true derivative; for ``0 < p < 1`` the one-sided derivatives are
      infinite and 0 is torch's choice;
    * a norm of 0 (all entries zero for ``p > 0``, any entry zero for ``p < 0``, where the norm is
      ``1 / sum(1 / |x_i| ** |p|) ** (1 / |p|)``) has gradient 0: the kink of the norm at the
      origin, where 0 is a subgradient (the same value as the 2-norm's ``safe_sqrt``).
    """
    nz = a != 0
    terms = ops.where(nz, ops.where(nz, a, 1.0) ** p, 0.0)
    s = ops.sum(terms, axis=axis, keepdims=keepdims)
    if p > 0:
        zero = s == 0
    else:
        zero = ops.logical_not(ops.all(nz, axis=axis, keepdims=keepdims))
    return ops.where(zero, 0.0, ops.where(zero, 1.0, s) ** (1.0 / p))


@decl.composite
def matrix_norm(x, /, *, keepdims=False, ord="fro"):
    """The ``ord``-norm of each matrix in ``x``.

    Parameters
    ----------
    x : array
        A stack of matrices ``(..., M, N)``.
    keepdims : bool, optional
        Keep the last two axes as axes of length one.
    ord : {'fro', 'nuc', 1, -1, 2, -2, inf, -inf}, optional
        'fro' (default): Frobenius, the square root of the sum of squared absolute values;
        'nuc': the sum of the singular values; 2/-2: the largest/smallest singular value;
        1/-1: the largest/smallest absolute column sum; ``inf``/``-inf``: the same over rows.

    Returns
    -------
    array
        Real, shaped ``x.shape[:-2]``, of the backend of ``x`` (inside a transform, a value of
        that transform). The Frobenius norm's gradient at 0 is 0 (as torch); the norms from
        singular values follow ``svdvals`` (exact at repeated ones); the max/min norms share the
        gradient among ties (as ``max``).

    Raises
    ------
    ValueError
        If ``x`` has fewer than 2 dimensions, or ``ord`` is not one of the above.

    Examples
    --------
    >>> ad.linalg.matrix_norm(ad.asarray([[3., 0.], [0., 4.]]))
    tensor(5.)
    >>> ad.linalg.matrix_norm(ad.asarray([[3., 0.], [0., 4.]]), ord="nuc")
    tensor(7.)
    """
    if ndim_of(x) < 2:
        raise ValueError("linalg.matrix_norm: x must have at least 2 dimensions")
    if ord == "fro":
        out = _safe_sqrt(ops.sum(_abs2(x), axis=(-2, -1)))
    elif ord == "nuc":
        out = ops.sum(svdvals(x), axis=-1)
    elif ord in (2, -2):
        s = svdvals(x)
        out = ops.max(s, axis=-1) if ord == 2 else ops.min(s, axis=-1)
    elif ord in (1, -1, float("inf"), -float("inf")):
        # 1: largest absolute column sum; inf: largest absolute row sum.
        sums = ops.sum(ops.abs(x), axis=-2 if ord in (1, -1) else -1)
        out = ops.max(sums, axis=-1) if ord > 0 else ops.min(sums, axis=-1)
    else:
        raise ValueError(f"linalg.matrix_norm: unsupported ord {ord!r}")
    if keepdims:
        out = ops.expand_dims(out, axis=(-2, -1))
    return out
