"""Testing helpers: ``check_grads``, a numerical check of derivatives that users can call too.

The check follows the idea of HIPS autograd's ``check_grads``: derivatives are compared with
central finite differences along random directions (never against a Jacobian, so it costs a few
evaluations of ``f`` whatever the sizes), and higher orders are checked by applying the same test to
the derivative functions themselves (``jvp`` and ``vjp`` seen as functions of the primals).
"""

import numpy as np

from ._core._core import Array, Tensor, dtype_of
from ._dtypes import is_inexact
from ._pytree import tree_flatten, tree_unflatten
from .backends import backend_of

__all__ = ["check_grads"]


# ---------------------------------------------------------------------------------------------
# Moving data between NumPy (where the reference arithmetic happens) and the args' backends

def _raw(x):
    return x.detach()._value if isinstance(x, Tensor) else x


def _to_np(x):
    """A concrete array (raw, Tensor, Python scalar) -> NumPy."""
    if isinstance(x, (int, float, complex, bool, np.ndarray, np.generic)):
        return np.asarray(x)
    return np.asarray(backend_of(x).to_numpy(_raw(x)))


def _like(a, x):
    """NumPy data ``a`` on the backend of ``x`` (and wrapped like ``x``: raw or ad.Tensor)."""
    if isinstance(x, (np.ndarray, np.generic, float, int, complex)):
        return np.asarray(a)
    raw = backend_of(x)._from_numpy(np.array(a, copy=True), None, None)
    return Tensor(raw) if isinstance(x, Tensor) else raw


def _is_inexact_leaf(x):
    if isinstance(x, (float, complex)):
        return True
    if isinstance(x, (bool, int)) or not (isinstance(x, Array) or hasattr(x, "dtype")):
        return False
    return is_inexact(dtype_of(x))


def _random_like(rng, x):
    """A random NumPy direction with the shape and (real/complex) kind of ``x``."""
    a = _to_np(x)
    d = rng.standard_normal(a.shape)
    if np.iscomplexobj(a):
        d = d + 1j * rng.standard_normal(a.shape)
    return d


def _inner(a, b):
    """The real inner product Re(sum(conj(a) * b)) over lists of NumPy arrays. Real, so that
    complex values are treated as pairs of reals (the VJP is the adjoint of the R-linear JVP)."""
    return float(sum(np.real(np.vdot(x.ravel(), y.ravel())) for x, y in zip(a, b)))


# ---------------------------------------------------------------------------------------------
# The checks of one order

class _Checker:
    def __init__(self, rng, eps, rtol, atol):
        self.rng, self.eps, self.rtol, self.atol = rng, eps, rtol, atol

    def _fail(self, what, path, got, want):
        got = np.asarray(got)
        want = np.asarray(want)
        if got.shape != want.shape:
            raise AssertionError(f"check_grads: {what} at {path}: shape {got.shape} from automatic "
                                 f"differentiation, {want.shape} expected")
        err = np.abs(got - want)
        bad = err > self.atol + self.rtol * np.abs(want)
        if np.any(bad) or np.any(np.isnan(got) != np.isnan(want)):
            with np.errstate(all="ignore"):
                rel = np.max(err / np.maximum(np.abs(want), 1e-300)) if err.size else 0.0
            raise AssertionError(
                f"check_grads: {what} does not match at {path}: max abs error "
                f"{np.max(err) if err.size else 0.0:.3e}, max rel error {rel:.3e} "
                f"(rtol={self.rtol}, atol={self.atol}).\n"
                f"  automatic: {np.array2string(got.ravel()[:8])}"
                f"\n  expected:  {np.array2string(want.ravel()[:8])}")

    def numeric_jvp(self, f, args, dirs):
        """Central difference of ``f`` at ``args`` along ``dirs`` (NumPy), as NumPy leaves."""
        xs = [_to_np(a) for a in args]
        plus = [_like(x + self.eps * d, a) for x, d, a in zip(xs, dirs, args)]
        minus = [_like(x - self.eps * d, a) for x, d, a in zip(xs, dirs, args)]
        fp, _ = tree_flatten(f(*plus))
        fm, _ = tree_flatten(f(*minus))
        return [(_to_np(p) - _to_np(m)) / (2 * self.eps) for p, m in zip(fp, fm)]

    def check(self, f, args, order, modes, path):
        from .func import jvp, vjp
        out_leaves, out_spec = tree_flatten(f(*args))
        for o in out_leaves:
            if not _is_inexact_leaf(o):
                raise TypeError(f"check_grads: {path} returned a non-floating output "
                                f"({type(o).__name__} of dtype {getattr(o, 'dtype', None)}); only "
                                f"floating-point outputs have derivatives to check")
        v_np = [_random_like(self.rng, a) for a in args]
        v = [_like(d, a) for d, a in zip(v_np, args)]
        numeric = self.numeric_jvp(f, args, v_np)
        auto = None
        if "fwd" in modes:
            _, tangent = jvp(f, tuple(args), tuple(v))
            auto = [_to_np(t) for t in tree_flatten(tangent)[0]]
            if len(auto) != len(numeric):
                raise AssertionError(f"check_grads: JVP at {path} returned {len(auto)} tangents "
                                     f"for {len(numeric)} outputs")
            for i, (a, n) in enumerate(zip(auto, numeric)):
                if np.iscomplexobj(a) and not np.iscomplexobj(n):
                    raise AssertionError(f"check_grads: JVP at {path} gave real output {i} a "
                                         f"complex tangent ({a.dtype})")
                self._fail(f"JVP (forward mode) output {i} vs central differences", path, a, n)
        if "rev" in modes:
            u_np = [_random_like(self.rng, o) for o in out_leaves]
            u = tree_unflatten([_like(d, o) for d, o in zip(u_np, out_leaves)], out_spec)
            _, vjp_fn = vjp(f, *args)
            cts = [_to_np(c) for c in tree_flatten(vjp_fn(u))[0]]
            for i, (c, a) in enumerate(zip(cts, args)):
                if c.shape != np.shape(_to_np(a)):
                    raise AssertionError(f"check_grads: VJP at {path} gave argument {i} a "
                                         f"cotangent of shape {c.shape}, its shape is "
                                         f"{np.shape(_to_np(a))}")
                if np.iscomplexobj(c) and not np.iscomplexobj(_to_np(a)):
                    raise AssertionError(f"check_grads: VJP at {path} gave real argument {i} a "
                                         f"complex cotangent ({c.dtype})")
            lhs = _inner(cts, v_np)
            self._fail("VJP (reverse mode) <vjp(u), v> vs <u, central differences along v>",
                       path, lhs, _inner(u_np, numeric))
            if auto is not None:
                # Both sides exact up to rounding: a much tighter test than the one above.
                self._fail("VJP/JVP inner-product identity <vjp(u), v> vs <u, jvp(v)>",
                           path, lhs, _inner(u_np, auto))
        if order <= 1:
            return
        n = len(args)
        if "fwd" in modes:
            # The JVP as a function of (primals, tangents): its derivatives are second derivatives.
            def f_jvp(*xs):
                return jvp(f, tuple(xs[:n]), tuple(xs[n:]))[1]
            self.check(f_jvp, list(args) + v, order - 1, modes, f"jvp({path})")
        if "rev" in modes:
            def f_vjp(*xs):
                _, fn = vjp(f, *xs[:n])
                return fn(tree_unflatten(list(xs[n:]), out_spec))
            us = [_like(d, o) for d, o in zip(u_np, out_leaves)]
            self.check(f_vjp, list(args) + us, order - 1, modes, f"vjp({path})")


def check_grads(f, args, order=2, modes=("fwd", "rev"), eps=1e-6, rtol=1e-5, atol=1e-6, *,
                seed=0):
    """Check the derivatives of ``f`` at ``args`` against central finite differences.

    For each order up to ``order``: the JVP along a random direction ``v`` (mode ``"fwd"``) is
    compared with ``(f(x + eps v) - f(x - eps v)) / (2 eps)``; the VJP of a random cotangent ``u``
    (mode ``"rev"``) is checked through ``<vjp(u), v> == <u, J v>``, against the finite difference
    and, when both modes are checked, against the JVP (an identity exact up to rounding). Higher
    orders apply the same checks to the derivative functions ``(x, v) -> jvp(f, x, v)`` and
    ``(x, u) -> vjp(f, x)(u)``, so ``order=2`` covers forward-over-forward, forward-over-reverse,
    reverse-over-forward and reverse-over-reverse. It costs a few evaluations of ``f`` per
    check, whatever the sizes (no Jacobian is formed).

    Parameters
    ----------
    f : callable
        Takes the arrays in ``args`` positionally (all of them are differentiated; close over
        the others) and returns a float array or a pytree of them.
    args : tuple or list of arrays, or one array
        The point. Arrays may live on any backend (NumPy, torch, array-api-strict, Dask...) or
        be ``ad.Tensor``; Python floats become float64 NumPy arrays. Use float64: the default
        ``eps``/``rtol`` assume it. Complex inputs are treated as pairs of reals.
    order : int, optional
        The highest order of derivatives to check (default 2).
    modes : {"fwd", "rev"} or tuple of them, optional
        Forward mode (JVP), reverse mode (VJP), or both (the default).
    eps : float, optional
        The finite-difference step.
    rtol, atol : float, optional
        The tolerances of the comparison, ``abs(auto - numeric) <= atol + rtol * abs(numeric)``.
    seed : int, optional
        Seed of the NumPy generator of the random directions (converted to each argument's
        backend).

    Returns
    -------
    None
        It returns when every check passes.

    Raises
    ------
    AssertionError
        If a derivative does not match, naming the order (e.g. ``vjp(jvp(f))``), the mode and
        the error, with the first values of both sides.
    TypeError
        If an argument is not a float or complex array, or ``f`` returns a non-float output.
    ValueError
        If ``modes`` is not a non-empty subset of ``("fwd", "rev")`` or ``order`` is not a
        positive int.

    Examples
    --------
    >>> import numpy as np, arrayad as ad
    >>> from arrayad.testing import check_grads
    >>> x = np.array([0.3, 1.2, -0.7])
    >>> check_grads(lambda x: ad.sum(ad.sin(x) * x), (x,), order=2)   # passes silently

    A custom rule with a wrong derivative (``1.01 cos``) is caught:

    >>> class BadSin(ad.autograd.Function):
    ...     @staticmethod
    ...     def forward(ctx, x):
    ...         ctx.save_for_backward(x)
    ...         return ad.sin(x)
    ...     @staticmethod
    ...     def backward(ctx, g):
    ...         (x,) = ctx.saved_tensors
    ...         return g * ad.cos(x) * 1.01
    >>> check_grads(BadSin.apply, (x,), order=1, modes="rev")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    AssertionError: check_grads: VJP (reverse mode) <vjp(u), v> vs ... does not match at apply: ...
    """
    if not isinstance(args, (tuple, list)):
        args = (args,)
    if isinstance(modes, str):
        modes = (modes,)
    bad = set(modes) - {"fwd", "rev"}
    if bad or not modes:
        raise ValueError(f"check_grads: modes must be a non-empty subset of ('fwd', 'rev'), got "
                         f"{modes!r}")
    if not isinstance(order, int) or order < 1:
        raise ValueError(f"check_grads: order must be a positive int, got {order!r}")
    args = list(args)
    for i, a in enumerate(args):
        if isinstance(a, float):
            args[i] = np.asarray(a, dtype=np.float64)
        elif isinstance(a, complex):
            args[i] = np.asarray(a, dtype=np.complex128)
        elif not _is_inexact_leaf(a):
            raise TypeError(f"check_grads: argument {i} must be a floating-point array (it is "
                            f"differentiated), got {type(a).__name__} with dtype "
                            f"{getattr(a, 'dtype', None)}; close over non-differentiable "
                            f"arguments instead")
    name = getattr(f, "__name__", "f")
    if name == "<lambda>":
        name = "f"
    _Checker(np.random.default_rng(seed), eps, rtol, atol).check(f, args, order, tuple(modes), name)
