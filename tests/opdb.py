"""The operator database: sample inputs for every public function of ``arrayad`` (the namespace,
``ad.linalg``, ``ad.fft`` and ``ad.special``), drawn inside each function's domain.

An ``OpInfo`` names a public function (``"sin"``, ``"linalg.inv"``), says whether it is
differentiable, and makes its samples. A ``Sample`` holds NumPy data (float64; the tests cast it
to float32 for the forward/vmap checks and convert it with the ``backend`` fixture), static keyword
arguments, which positional arguments are differentiated, and optionally ``call(fn, *arrays,
**kwargs)`` for functions that do not take their arrays positionally (``concat``) or whose output
must be made unique before it can be compared (eigenvectors up to sign).

Samples are generated twice with different seeds (``draw`` 0 and 1): the two draws have the same
structure and shapes, so the tests stack them into a batch of two for vmap.

Functions that do not exist yet (other engineers are adding them) are skipped: the database is
written for the whole standard and picks them up when they appear.
"""

import dataclasses
import functools
import math
from typing import Callable, Optional

import numpy as np

import arrayad as ad
from arrayad._dtypes import is_inexact

# ---------------------------------------------------------------------------------------------
# Records


@dataclasses.dataclass
class Sample:
    args: tuple                    # NumPy arrays (float64/complex128 for floating data)
    kwargs: dict = dataclasses.field(default_factory=dict)
    diff: Optional[tuple] = None   # indices of args to differentiate (None: all floating args)
    call: Optional[Callable] = None
    desc: str = ""
    vmap: bool = True              # False: the output's shape depends on the data

    def __post_init__(self):
        # NumPy returns scalars for shape () draws: make them 0-d arrays
        self.args = tuple(np.asarray(a) if isinstance(a, (np.generic, float, int, bool)) else a
                          for a in self.args)

    def diff_indices(self):
        if self.diff is not None:
            return self.diff
        return tuple(i for i, a in enumerate(self.args)
                     if isinstance(a, np.ndarray) and is_inexact(a.dtype))


@dataclasses.dataclass
class OpInfo:
    name: str                      # public name: "sin", "linalg.inv", "fft.rfft"
    make: Callable                 # make(rng) -> list[Sample]
    differentiable: bool = True
    hessian: bool = True           # check second derivatives on the first sample
    torch: Optional[Callable] = None   # the equivalent function on torch tensors (same signature)
    ref: Optional[Callable] = None     # a NumPy reference for the forward check
    float32: bool = True           # the function accepts float32 (forward/vmap check)
    rtol: float = 1e-5
    atol: float = 1e-6

    @property
    def fn(self):
        obj = ad
        for part in self.name.split("."):
            obj = getattr(obj, part, None)
            if obj is None:
                return None
        return obj

    def samples(self, draw):
        return self.make(np.random.default_rng(_seed(self.name, draw)))


def _seed(name, draw):
    # A stable seed per (function, draw): adding an entry does not change the others' data.
    return (sum(ord(c) * 31 ** i for i, c in enumerate(name)) + 7919 * draw) % (2 ** 32)


def call_sample(op, sample, arrays, kwargs=None):
    """Call ``op``'s function on ``arrays`` (one per sample arg) with the sample's keywords."""
    kw = sample.kwargs if kwargs is None else kwargs
    if sample.call is not None:
        return sample.call(op.fn, *arrays, **kw)
    return op.fn(*arrays, **kw)


# ---------------------------------------------------------------------------------------------
# Domains (all float64; the shape is a tuple)

def real(rng, shape):
    return rng.standard_normal(shape)


def pos(rng, shape):
    return rng.uniform(0.5, 2.0, shape)


def unit(rng, shape):                      # inside (-1, 1), away from the ends
    return rng.uniform(-0.8, 0.8, shape)


def gt1(rng, shape):
    return rng.uniform(1.2, 3.0, shape)


def away0(rng, shape):                     # |x| in [0.3, 2]: no kink or pole at 0 nearby
    return rng.choice([-1.0, 1.0], shape) * rng.uniform(0.3, 2.0, shape)


def distinct(rng, shape):
    """Values at least 0.3 apart, in random order: no ties for sort/max/min/maximum."""
    n = math.prod(shape)
    return (rng.permutation(n) * 0.3 - 0.15 * n + rng.uniform(0, 0.05, n)).reshape(shape)


def cplx(rng, shape):
    return rng.standard_normal(shape) + 1j * rng.standard_normal(shape)


def cplx_right(rng, shape):
    """Complex with real part in [0.5, 2]: away from the branch cuts of sqrt and log."""
    return rng.uniform(0.5, 2.0, shape) + 1j * rng.standard_normal(shape)


def ints(rng, shape, lo=-4, hi=5):
    return rng.integers(lo, hi, shape).astype(np.int64)


def bools(rng, shape):
    return rng.random(shape) < 0.5


def spd(rng, n, batch=()):
    """Symmetric positive definite, well conditioned."""
    a = rng.standard_normal(batch + (n, n))
    return a @ np.swapaxes(a, -1, -2) + n * np.eye(n)


def wellcond(rng, n, batch=()):
    """A general square matrix far from singular."""
    return rng.standard_normal(batch + (n, n)) + 2.0 * n * np.eye(n)


def sym_distinct(rng, n, batch=()):
    """Symmetric with well-separated eigenvalues (eigh's derivatives divide by their gaps)."""
    q, _ = np.linalg.qr(rng.standard_normal(batch + (n, n)))
    lam = np.arange(1.0, n + 1.0) * 1.5 + rng.uniform(0, 0.1, batch + (n,))
    return (q * lam[..., None, :]) @ np.swapaxes(q, -1, -2)


# ---------------------------------------------------------------------------------------------
# Sample families

UNARY_SHAPES = [(), (3,), (2, 3), (0,)]


def unary_samples(domain, shapes=UNARY_SHAPES):
    def make(rng):
        return [Sample((domain(rng, s),), desc=f"shape{s}") for s in shapes]
    return make


BINARY_SHAPES = [((3,), (3,)), ((2, 3), (3,)), ((2, 1), (1, 3)), ((), (2,)), ((0,), (0,))]


def binary_samples(d1, d2=None, shapes=BINARY_SHAPES, scalar=None):
    """Broadcasting pairs; ``scalar`` adds a sample with a Python scalar second operand."""
    d2 = d2 or d1

    def make(rng):
        out = [Sample((d1(rng, s1), d2(rng, s2)), desc=f"{s1}x{s2}") for s1, s2 in shapes]
        if scalar is not None:
            out.append(Sample((d1(rng, (2, 2)),), call=lambda fn, x: fn(x, scalar),
                              desc=f"scalar{scalar}"))
        return out
    return make


def remainder_samples(rng):
    # x1 = x2 * (k + frac) with frac in [0.2, 0.8]: away from the jumps of remainder.
    out = []
    for s in [(3,), (2, 3), ()]:
        x2 = pos(rng, s)
        x1 = x2 * (rng.integers(-3, 3, s) + rng.uniform(0.2, 0.8, s))
        out.append(Sample((x1, x2), desc=f"shape{s}"))
    return out


def grid(rng, shape, offset=0.0):
    """Values on a grid 0.3 apart (shifted by ``offset``), jittered by < 0.03, in random order."""
    n = math.prod(shape)
    k = rng.permutation(n) - n // 2
    return (0.3 * k + offset + rng.uniform(0, 0.03, n)).reshape(shape)


def minmax_samples(rng):
    # x1 on the grid, x2 on the grid shifted by half a step: they never tie (the derivative
    # splits between the arguments there)
    return [Sample((grid(rng, s1), grid(rng, s2, 0.15)), desc=f"{s1}x{s2}")
            for s1, s2 in [((3,), (3,)), ((2, 3), (3,)), ((), (2,))]]


def clip_samples(rng):
    x = distinct(rng, (2, 3)) * 0.4
    lo, hi = -0.31, 0.27            # not at a sample (values are 0.12 apart, offsets 0..0.02)
    x = np.where(np.abs(x - lo) < 0.03, x + 0.05, x)
    x = np.where(np.abs(x - hi) < 0.03, x - 0.05, x)
    lo_arr = np.full((3,), lo)
    hi_arr = np.full((2, 1), hi)
    return [
        Sample((x,), {"min": lo, "max": hi}, desc="scalar-bounds"),
        Sample((x,), {"max": hi}, desc="max-only"),
        Sample((x, lo_arr, hi_arr), call=lambda fn, x, lo, hi: fn(x, min=lo, max=hi),
               desc="array-bounds"),
        Sample((real(rng, ()),), {"min": -5.0, "max": 5.0}, desc="0d"),
    ]


def reduction_samples(domain=real, variants=None, empty=True):
    variants = variants or [
        ((2, 3), {}), ((2, 3), {"axis": 1}), ((2, 3), {"axis": 0, "keepdims": True}),
        ((2, 3, 2), {"axis": (0, 2)}), ((), {}), ((3,), {"axis": -1}),
    ]
    if empty:
        variants = variants + [((0, 3), {"axis": 0})]

    def make(rng):
        return [Sample((domain(rng, s),), dict(k), desc=f"{s}{k}") for s, k in variants]
    return make


def var_samples(rng):
    return [Sample((real(rng, (2, 3)),), {}),
            Sample((real(rng, (2, 3)),), {"axis": 1, "correction": 1}),
            Sample((real(rng, (3, 2)),), {"axis": 0, "keepdims": True}),
            Sample((real(rng, (4,)),), {"correction": 1.0})]


def cumulative_samples(domain=real):
    def make(rng):
        return [Sample((domain(rng, (4,)),), {}),
                Sample((domain(rng, (2, 3)),), {"axis": 1}),
                Sample((domain(rng, (3, 2)),), {"axis": 0, "include_initial": True}),
                Sample((domain(rng, (0,)),), {"axis": 0})]
    return make


def diff_samples(rng):
    return [Sample((real(rng, (5,)),), {}),
            Sample((real(rng, (3, 4)),), {"axis": 0, "n": 2}),
            Sample((real(rng, (2, 3)), real(rng, (2, 1)), real(rng, (2, 2))),
                   call=lambda fn, x, p, a, **k: fn(x, prepend=p, append=a, **k), desc="pre+app")]


# -- manipulation --------------------------------------------------------------------------------

def _list_call(fn, *xs, **k):
    return fn(list(xs), **k)


def _kw(**kw):
    return kw


def manip_samples(name):
    def make(rng):
        r = lambda *s: real(rng, s)  # noqa: E731
        table = {
            "reshape": [Sample((r(2, 3),), _kw(shape=(3, 2))), Sample((r(2, 3),), _kw(shape=(-1,))),
                        Sample((r(),), _kw(shape=(1, 1))), Sample((r(0, 2),), _kw(shape=(2, 0)))],
            "permute_dims": [Sample((r(2, 3, 4),), _kw(axes=(2, 0, 1))),
                             Sample((r(2, 3),), _kw(axes=(1, 0)))],
            "matrix_transpose": [Sample((r(2, 3),)), Sample((r(2, 3, 4),))],
            "moveaxis": [Sample((r(2, 3, 4),), call=lambda fn, x: fn(x, 0, -1)),
                         Sample((r(2, 3, 4),), call=lambda fn, x: fn(x, (0, 1), (2, 0)))],
            "expand_dims": [Sample((r(2, 3),), _kw(axis=1)), Sample((r(),), _kw(axis=0)),
                            Sample((r(3,),), _kw(axis=-1))],
            "squeeze": [Sample((r(2, 1, 3),), _kw(axis=1)), Sample((r(1, 3, 1),), _kw(axis=(0, 2)))],
            "broadcast_to": [Sample((r(3,),), _kw(shape=(2, 3))), Sample((r(),), _kw(shape=(2,))),
                             Sample((r(2, 1),), _kw(shape=(2, 3)))],
            "broadcast_arrays": [Sample((r(3,), r(2, 1)), call=lambda fn, a, b: fn(a, b)),
                                 Sample((r(), r(2)), call=lambda fn, a, b: fn(a, b))],
            "concat": [Sample((r(2, 3), r(1, 3)), call=_list_call),
                       Sample((r(2, 3), r(2, 2)), _kw(axis=1), call=_list_call),
                       Sample((r(2,), r(0,), r(3,)), call=_list_call),
                       Sample((r(2, 2), r(2, 1)), _kw(axis=None), call=_list_call)],
            "stack": [Sample((r(2, 3), r(2, 3)), call=_list_call),
                      Sample((r(3,), r(3,)), _kw(axis=1), call=_list_call),
                      Sample((r(), r()), call=_list_call)],
            "unstack": [Sample((r(3, 2),)), Sample((r(2, 3),), _kw(axis=1))],
            "flip": [Sample((r(2, 3),)), Sample((r(2, 3),), _kw(axis=1)),
                     Sample((r(2, 3, 2),), _kw(axis=(0, 2))), Sample((r(),))],
            "roll": [Sample((r(5,),), _kw(shift=2)), Sample((r(2, 3),), _kw(shift=1, axis=1)),
                     Sample((r(2, 3),), _kw(shift=(1, -1), axis=(0, 1))),
                     Sample((r(2, 3),), _kw(shift=4))],
            "repeat": [Sample((r(3,),), call=lambda fn, x: fn(x, 2)),
                       Sample((r(2, 3),), _kw(axis=1), call=lambda fn, x, **k: fn(x, 2, **k)),
                       Sample((r(2, 2),), call=lambda fn, x: fn(x, 2)),
                       Sample((r(3,), np.array([1, 0, 2])), call=lambda fn, x, rep: fn(x, rep),
                              diff=(0,), desc="array-repeats", vmap=False)],
            "tile": [Sample((r(2, 3),), call=lambda fn, x: fn(x, (2, 1))),
                     Sample((r(3,),), call=lambda fn, x: fn(x, (2,))),
                     Sample((r(2),), call=lambda fn, x: fn(x, (2, 2)))],
            "tril": [Sample((r(3, 3),)), Sample((r(2, 3, 4),), _kw(k=1)), Sample((r(3, 2),), _kw(k=-1))],
            "triu": [Sample((r(3, 3),)), Sample((r(2, 3, 4),), _kw(k=-1)), Sample((r(3, 2),), _kw(k=1))],
            "where": [Sample((bools(rng, (2, 3)), r(2, 3), r(3,))),
                      Sample((bools(rng, (3,)), r(), r(3))),
                      Sample((bools(rng, (2, 1)), r(1, 3), r(2, 3)))],
            "take": [Sample((r(4,), np.array([0, 3, 3, 1])), diff=(0,)),
                     Sample((r(3, 4), np.array([2, 0])), _kw(axis=1), diff=(0,)),
                     Sample((r(3, 2), np.array([1, 1])), _kw(axis=0), diff=(0,))],
            "take_along_axis": [
                Sample((r(3, 4), rng.integers(0, 4, (3, 2))), _kw(axis=1), diff=(0,)),
                Sample((r(3, 2), rng.integers(0, 3, (4, 2))), _kw(axis=0), diff=(0,)),
                Sample((r(5,), rng.integers(0, 5, (5,))), diff=(0,))],
            "sort": [Sample((distinct(rng, (4,)),)), Sample((distinct(rng, (2, 3)),), _kw(axis=0)),
                     Sample((distinct(rng, (2, 3)),), _kw(descending=True))],
            "astype": [Sample((r(2, 3),), call=lambda fn, x: fn(x, ad.float64)),
                       Sample((r(3,),), call=lambda fn, x: fn(x, ad.complex128)),
                       Sample((r(3,),), call=lambda fn, x: fn(x, ad.float32), diff=(), desc="f32")],
            "asarray": [Sample((r(2, 3),)), Sample((r(),))],
            "meshgrid": [Sample((r(3,), r(2)), call=lambda fn, a, b: fn(a, b)),
                         Sample((r(3,), r(2)), call=lambda fn, a, b: fn(a, b, indexing="ij"))],
        }
        return table[name]
    return make


# -- linalg ---------------------------------------------------------------------------------------

def _first(i):
    return lambda fn, *a, **k: fn(*a, **k)[i]


def _sign_fixed_columns(v):
    """Eigen/singular vectors up to sign: scale each column so its largest entry is positive."""
    return v * ad.sign(ad.sum(v * ad.abs(v), axis=-2, keepdims=True))


def _eigh_call(fn, a, **k):
    s = (a + ad.matrix_transpose(a)) / 2     # derivatives of the symmetric part
    w, v = fn(s, **k)
    return w, _sign_fixed_columns(v)


def _sym_call(fn, a, **k):
    return fn((a + ad.matrix_transpose(a)) / 2, **k)


def _svd_call(fn, a, **k):
    u, s, vh = fn(a, **k)
    return s, u @ vh                         # u @ vh is invariant to the signs of the vectors


def _qr_call(fn, a, **k):
    q, r = fn(a, **k)
    return q, r


def _eig_call(fn, a, **k):
    w, v = fn(a, **k)
    # eigenvectors up to a complex phase: normalise by the first row
    return w, v / v[..., :1, :]


def _slogdet_call(fn, a, **k):
    return fn(a, **k)[1]


def linalg_samples(name):
    def make(rng):
        r = lambda *s: real(rng, s)  # noqa: E731
        table = {
            "cholesky": [Sample((spd(rng, 3),), call=_sym_call),
                         Sample((spd(rng, 2, (2,)),), call=_sym_call),
                         Sample((spd(rng, 3),), _kw(upper=True), call=_sym_call)],
            "cross": [Sample((r(3,), r(3,))), Sample((r(2, 3), r(3,))),
                      Sample((r(3, 2), r(3, 2)), _kw(axis=0))],
            "det": [Sample((wellcond(rng, 3),)), Sample((wellcond(rng, 2, (2,)),)),
                    Sample((r(1, 1) + 2.0,))],
            "diagonal": [Sample((r(3, 3),)), Sample((r(2, 3, 4),), _kw(offset=1)),
                         Sample((r(3, 2),), _kw(offset=-1))],
            "eigh": [Sample((sym_distinct(rng, 3),), call=_eigh_call),
                     Sample((sym_distinct(rng, 2, (2,)),), call=_eigh_call)],
            "eigvalsh": [Sample((sym_distinct(rng, 3),), call=_sym_call),
                         Sample((sym_distinct(rng, 2, (2,)),), call=_sym_call)],
            "eig": [Sample((sym_distinct(rng, 3) + 0.1 * r(3, 3),), call=_eig_call)],
            "eigvals": [Sample((sym_distinct(rng, 3) + 0.1 * r(3, 3),))],
            "inv": [Sample((wellcond(rng, 3),)), Sample((wellcond(rng, 2, (2,)),))],
            "matmul": [Sample((r(2, 3), r(3, 2))), Sample((r(3,), r(3, 2))), Sample((r(2, 3), r(3,))),
                       Sample((r(3,), r(3,))), Sample((r(2, 2, 3), r(3, 2))),
                       Sample((r(2, 1, 2, 3), r(3, 3, 1))), Sample((r(2, 0), r(0, 3)))],
            "matrix_norm": [Sample((r(2, 3),)), Sample((r(2, 3),), _kw(ord="nuc")),
                            Sample((r(2, 3, 3),), _kw(ord=2)), Sample((r(3, 3),), _kw(ord=1)),
                            Sample((r(3, 3),), _kw(ord=float("inf"), keepdims=True)),
                            Sample((r(3, 2),), _kw(ord=-2))],
            "matrix_power": [Sample((r(3, 3),), call=lambda fn, a: fn(a, 3)),
                             Sample((wellcond(rng, 2, (2,)),), call=lambda fn, a: fn(a, -2)),
                             Sample((r(2, 2),), call=lambda fn, a: fn(a, 0))],
            "matrix_transpose": [Sample((r(2, 3),)), Sample((r(2, 3, 4),))],
            "outer": [Sample((r(3,), r(2,))), Sample((r(0,), r(2,)))],
            "pinv": [Sample((r(3, 2),)), Sample((r(2, 3),)), Sample((wellcond(rng, 2, (2,)),))],
            "qr": [Sample((r(3, 3),), call=_qr_call), Sample((r(4, 2),), call=_qr_call),
                   Sample((r(2, 3, 2),), call=_qr_call)],
            "slogdet": [Sample((wellcond(rng, 3),), call=_slogdet_call),
                        Sample((wellcond(rng, 2, (2,)),), call=_slogdet_call)],
            "solve": [Sample((wellcond(rng, 3), r(3, 2))), Sample((wellcond(rng, 2, (2,)), r(2, 2, 1))),
                      Sample((wellcond(rng, 3), r(3,)))],
            "svd": [Sample((r(3, 2) + np.array([[2.0, 0], [0, 4.0], [0, 0]]),),
                           _kw(full_matrices=False), call=_svd_call),
                    Sample((r(2, 3) + np.array([[2.0, 0, 0], [0, 4.0, 0]]),),
                           _kw(full_matrices=False), call=_svd_call)],
            "svdvals": [Sample((r(3, 2) + np.array([[2.0, 0], [0, 4.0], [0, 0]]),)),
                        Sample((r(2, 2, 3) + np.array([[2.0, 0, 0], [0, 4.0, 0]]),))],
            "tensordot": [Sample((r(2, 3), r(3, 2)), _kw(axes=1)), Sample((r(2, 3), r(2, 3)), _kw(axes=2)),
                          Sample((r(2, 3, 2), r(3, 2, 4)), _kw(axes=((1, 2), (0, 1)))),
                          Sample((r(2,), r(3,)), _kw(axes=0))],
            "trace": [Sample((r(3, 3),)), Sample((r(2, 3, 4),), _kw(offset=1))],
            "vecdot": [Sample((r(3,), r(3,))), Sample((r(2, 3), r(3,))),
                       Sample((r(3, 2), r(3, 2)), _kw(axis=0))],
            "vector_norm": [Sample((away0(rng, (2, 3)),)), Sample((away0(rng, (2, 3)),), _kw(axis=1)),
                            Sample((away0(rng, (2, 3)),), _kw(ord=1, axis=0, keepdims=True)),
                            Sample((distinct(rng, (4,)),), _kw(ord=float("inf"))),
                            Sample((away0(rng, (3,)),), _kw(ord=3)),
                            Sample((away0(rng, (2, 2, 2)),), _kw(axis=(0, 2)))],
        }
        return table[name]
    return make


# -- fft ------------------------------------------------------------------------------------------

def fft_samples(name):
    c = name in ("fft", "ifft", "fftn", "ifftn", "irfft", "irfftn", "hfft")

    def make(rng):
        d = cplx if c else real
        out = [Sample((d(rng, (4,)),)), Sample((d(rng, (2, 3)),), _kw(axis=0, norm="ortho"))]
        if name.endswith("n"):
            out = [Sample((d(rng, (2, 3)),)), Sample((d(rng, (2, 3, 2)),), _kw(axes=(0, 2), norm="forward")),
                   Sample((d(rng, (3, 4)),), _kw(s=(2, 6), axes=(0, 1)))]
        else:
            out.append(Sample((d(rng, (3,)),), _kw(n=5, norm="forward")))
        return out
    return make


def shift_samples(rng):
    return [Sample((real(rng, (5,)),)), Sample((real(rng, (2, 3)),), _kw(axes=1)),
            Sample((real(rng, (2, 4)),))]


# ---------------------------------------------------------------------------------------------
# The table

def _torch_fn(name):
    """torch's function of the same name, for the torch.func comparison (None if torch lacks it)."""
    try:
        import torch
    except ImportError:
        return None
    return getattr(torch, name, None)


def _torch_reduction(tname):
    def f(x, axis=None, keepdims=False, **kw):
        import torch
        fn = getattr(torch, tname)
        if axis is None:
            axis = tuple(range(x.ndim))
        if tname == "prod":
            # torch.prod takes one dim: reduce the axes one at a time, last first
            axes = (axis,) if isinstance(axis, int) else axis
            for a in sorted((a % max(x.ndim, 1) for a in axes), reverse=True):
                x = fn(x, dim=a, keepdim=keepdims)
            return x
        return fn(x, dim=axis, keepdim=keepdims, **kw)
    return f


def _torch_cum(tname):
    def f(x, axis=None, include_initial=False):
        import torch
        out = getattr(torch, tname)(x, dim=0 if axis is None else axis)
        if include_initial:
            ax = 0 if axis is None else axis
            init = torch.zeros_like(out.narrow(ax, 0, 1)) + (1 if tname == "cumprod" else 0)
            out = torch.cat([init, out], dim=ax)
        return out
    return f


def _torch_var(tname):
    def f(x, axis=None, correction=0.0, keepdims=False):
        import torch
        if axis is None:
            axis = tuple(range(x.ndim))
        return getattr(torch, tname)(x, dim=axis, correction=correction, keepdim=keepdims)
    return f


def _np_ref(name):
    """A NumPy function for the forward check (NumPy 2 has the standard's names)."""
    mod = np
    parts = name.split(".")
    for p in parts[:-1]:
        mod = getattr(mod, p)
    fn = getattr(mod, parts[-1], None)
    return fn


OPS = []


def op(name, make, **kw):
    info = OpInfo(name, make, **kw)
    if info.fn is None:
        # (an entry must never be skipped silently: a typo would leave a function untested)
        raise LookupError(f"opdb: arrayad has no function {name!r}; fix the entry's name or "
                          f"remove the entry")
    if "torch" not in kw and "." not in name:
        t = _torch_fn(name)
        if t is not None:
            info.torch = t
    OPS.append(info)


# -- elementwise, unary, differentiable
for _n, _d in [("sin", real), ("cos", real), ("tan", unit), ("asin", unit), ("acos", unit),
               ("atan", real), ("sinh", real), ("cosh", real), ("tanh", real), ("asinh", real),
               ("acosh", gt1), ("atanh", unit), ("exp", real), ("expm1", real), ("log", pos),
               ("log1p", pos), ("log2", pos), ("log10", pos), ("sqrt", pos), ("square", real),
               ("reciprocal", away0), ("abs", away0), ("negative", real), ("positive", real),
               ("conj", real), ("real", real)]:
    op(_n, unary_samples(_d))

# complex inputs for the functions that take them (holomorphic or linear)
for _n in ["exp", "sin", "tanh", "square", "conj", "real", "imag", "abs", "negative", "sqrt",
           "log", "reciprocal", "sign"]:
    op(_n, unary_samples(cplx_right, [(3,), (2, 2)]),
       float32=False, hessian=False, torch=None)

# -- elementwise, unary, not differentiable (zero derivative a.e., bool or int results)
for _n, _d in [("ceil", real), ("floor", real), ("round", real), ("trunc", real), ("sign", real),
               ("signbit", real), ("isfinite", real), ("isinf", real), ("isnan", real)]:
    op(_n, unary_samples(_d), differentiable=False)
op("logical_not", unary_samples(bools), differentiable=False, float32=False)
op("stop_gradient", unary_samples(real), differentiable=False, torch=None)
op("bitwise_invert", unary_samples(ints), differentiable=False, float32=False)

# -- elementwise, binary, differentiable
op("add", binary_samples(real, scalar=2.0))
op("subtract", binary_samples(real, scalar=-1.5))
op("multiply", binary_samples(real, scalar=3.0))
op("divide", binary_samples(real, away0, scalar=2.0))
op("pow", binary_samples(pos, real, scalar=2.0))
op("atan2", binary_samples(away0))
op("hypot", binary_samples(away0))
op("logaddexp", binary_samples(real))
op("maximum", minmax_samples)
op("minimum", minmax_samples)
op("copysign", binary_samples(away0))
op("remainder", remainder_samples)
op("nextafter", binary_samples(real), torch=None)
op("multiply", binary_samples(cplx, shapes=[((3,), (3,)), ((2, 2), (2,))]), float32=False,
   hessian=False, torch=None)
op("divide", binary_samples(lambda r, s: cplx(r, s) + 2.0, shapes=[((3,), (3,))]), float32=False,
   hessian=False, torch=None)
op("clip", clip_samples, torch=None)

# -- elementwise, binary, not differentiable
for _n in ["floor_divide", "equal", "not_equal", "less", "less_equal", "greater", "greater_equal"]:
    op(_n, binary_samples(away0), differentiable=False)
for _n in ["logical_and", "logical_or", "logical_xor"]:
    op(_n, binary_samples(bools), differentiable=False, float32=False)
for _n in ["bitwise_and", "bitwise_or", "bitwise_xor"]:
    op(_n, binary_samples(ints), differentiable=False, float32=False)
for _n in ["bitwise_left_shift", "bitwise_right_shift"]:
    op(_n, binary_samples(ints, lambda r, s: ints(r, s, 0, 4)), differentiable=False,
       float32=False)

# -- reductions and statistics
op("sum", reduction_samples(), torch=_torch_reduction("sum"))
op("prod", reduction_samples(), torch=_torch_reduction("prod"))
op("max", reduction_samples(distinct, empty=False), torch=_torch_reduction("amax"))
op("min", reduction_samples(distinct, empty=False), torch=_torch_reduction("amin"))
op("mean", reduction_samples(empty=False), torch=_torch_reduction("mean"))
op("var", var_samples, torch=_torch_var("var"))
op("std", var_samples, torch=_torch_var("std"))
op("cumulative_sum", cumulative_samples(), torch=_torch_cum("cumsum"))
op("cumulative_prod", cumulative_samples(), torch=_torch_cum("cumprod"))
op("diff", diff_samples, torch=None)
op("logsumexp", reduction_samples(empty=False), torch=_torch_reduction("logsumexp"))
for _n in ["all", "any", "count_nonzero"]:
    op(_n, reduction_samples(lambda r, s: np.round(real(r, s))), differentiable=False, torch=None)
for _n in ["argmax", "argmin"]:
    op(_n, lambda rng: [Sample((distinct(rng, (2, 3)),)), Sample((distinct(rng, (2, 3)),), _kw(axis=1)),
                        Sample((distinct(rng, (2, 3)),), _kw(axis=0, keepdims=True))],
       differentiable=False, torch=None)

# -- torch-style extras (composites)
op("relu", unary_samples(away0))
op("sigmoid", unary_samples(real))
op("softmax", lambda rng: [Sample((real(rng, (2, 3)),)), Sample((real(rng, (2, 3)),), _kw(axis=0))],
   torch=lambda x, axis=-1: __import__("torch").softmax(x, dim=axis))
op("log_softmax", lambda rng: [Sample((real(rng, (2, 3)),)), Sample((real(rng, (2, 3)),), _kw(axis=0))],
   torch=lambda x, axis=-1: __import__("torch").log_softmax(x, dim=axis))
op("diag", lambda rng: [Sample((real(rng, (3,)),)), Sample((real(rng, (3, 3)),)),
                        Sample((real(rng, (2,)),), _kw(diagonal=1)),
                        Sample((real(rng, (3, 2)),), _kw(diagonal=-1))], torch=None)
op("dot", lambda rng: [Sample((real(rng, (3,)), real(rng, (3,))))])
op("isclose", lambda rng: [Sample((real(rng, (2, 3)), real(rng, (3,)))),
                           Sample((real(rng, (3,)), real(rng, (3,))), _kw(rtol=0.5, atol=0.5))],
   differentiable=False, torch=None)

# -- manipulation, indexing, sorting, creation with a differentiable input
for _n in ["reshape", "permute_dims", "matrix_transpose", "moveaxis", "expand_dims", "squeeze",
           "broadcast_to", "broadcast_arrays", "concat", "stack", "unstack", "flip", "roll",
           "repeat", "tile", "tril", "triu", "where", "take", "take_along_axis", "sort", "astype",
           "asarray", "meshgrid"]:
    op(_n, manip_samples(_n), torch=None)

# -- searching, sorting, sets: not differentiable
op("argsort", lambda rng: [Sample((distinct(rng, (4,)),)), Sample((distinct(rng, (2, 3)),), _kw(axis=0)),
                           Sample((distinct(rng, (2, 3)),), _kw(descending=True))],
   differentiable=False, torch=None)
op("nonzero", lambda rng: [Sample((np.round(real(rng, (2, 3))),), vmap=False),
                           Sample((np.round(real(rng, (4,))),), vmap=False)],
   differentiable=False, torch=None)
op("searchsorted", lambda rng: [Sample((np.sort(distinct(rng, (5,))), real(rng, (3,)))),
                                Sample((np.sort(distinct(rng, (4,))), real(rng, (2, 2))),
                                       _kw(side="right"))],
   differentiable=False, torch=None)
op("isin", lambda rng: [Sample((ints(rng, (2, 3)), ints(rng, (4,))))], differentiable=False,
   torch=None, float32=False)
for _n in ["unique_values", "unique_counts", "unique_inverse", "unique_all"]:
    op(_n, lambda rng: [Sample((np.round(real(rng, (6,))),), vmap=False)], differentiable=False,
       torch=None)
op("zeros_like", unary_samples(real), differentiable=False, torch=None)
op("empty_like", lambda rng: [Sample((real(rng, (2, 3)),))], differentiable=False, torch=None)
op("ones_like", unary_samples(real), differentiable=False, torch=None)
op("full_like", lambda rng: [Sample((real(rng, (2, 3)),), call=lambda fn, x: fn(x, 2.5))],
   differentiable=False, torch=None)

# -- linalg
for _n in ["cholesky", "cross", "det", "diagonal", "eigh", "eigvalsh", "eig", "eigvals", "inv",
           "matmul", "matrix_norm", "matrix_power", "matrix_transpose", "outer", "pinv", "qr",
           "slogdet", "solve", "svd", "svdvals", "tensordot", "trace", "vecdot", "vector_norm"]:
    op(f"linalg.{_n}", linalg_samples(_n), float32=_n not in ("eig", "eigvals"),
       hessian=_n not in ("eig", "eigh", "svd", "qr", "pinv"), rtol=1e-4)
op("matmul", linalg_samples("matmul"))
op("tensordot", linalg_samples("tensordot"), torch=None)
op("vecdot", linalg_samples("vecdot"), torch=None)
op("linalg.matrix_rank", lambda rng: [Sample((real(rng, (3, 3)),)), Sample((real(rng, (2, 3, 2)),))],
   differentiable=False)


# -- einsum (a sample per kind of rule: product, diagonal, both, ellipsis, a pairwise order)

def _einsum(subscripts):
    return lambda fn, *xs: fn(subscripts, *xs)


def einsum_samples(rng):
    r = functools.partial(real, rng)
    return [Sample((r((2, 3)), r((3, 4))), call=_einsum("ij,jk->ik"), desc="matmul"),
            Sample((r((3, 3)),), call=_einsum("ii->i"), desc="diagonal"),
            Sample((r((3, 3)), r((3, 2))), call=_einsum("ii,ij->j"), desc="trace-and-product"),
            Sample((r((2, 1, 3)), r((4, 3))), call=_einsum("...j,...j->..."), desc="ellipsis"),
            Sample((r((2, 3)), r((3, 4)), r((4,))), call=_einsum("ij,jk,k->i"), desc="three"),
            Sample((r((0, 3)), r((3, 2))), call=_einsum("ij,jk->ik"), desc="empty")]


op("einsum", einsum_samples)


# -- fft
for _n in ["fft", "ifft", "fftn", "ifftn", "rfft", "irfft", "rfftn", "irfftn", "hfft", "ihfft"]:
    op(f"fft.{_n}", fft_samples(_n), float32=False, hessian=False)
op("fft.fftshift", shift_samples)
op("fft.ifftshift", shift_samples)
op("fft.fftfreq", lambda rng: [Sample((), call=lambda fn: fn(5, d=0.5)), Sample((), call=lambda fn: fn(4))],
   differentiable=False)
op("fft.rfftfreq", lambda rng: [Sample((), call=lambda fn: fn(5, d=0.5)), Sample((), call=lambda fn: fn(4))],
   differentiable=False)

# -- special (scipy.special's functions; references: SciPy, and torch.special for torch.func)
def _prob(rng, shape):                     # inside (0, 1), away from the ends
    return rng.uniform(0.1, 0.9, shape)


def _torch_special(name):
    def f(*args, **kw):
        import torch
        return getattr(torch.special, name)(*args, **kw)
    return f if _torch_fn("special") is not None else None


def _degrees(rng, shape):                  # away from tan's and cot's poles
    return rng.uniform(10.0, 80.0, shape)


SPECIAL_SHAPES = [(2, 3), ()]
for _n, _d in [("erf", real), ("erfc", real), ("erfinv", unit), ("ndtr", real), ("log_ndtr", real),
               ("ndtri", _prob), ("gammaln", pos), ("digamma", pos),
               ("expit", real), ("logit", _prob), ("log_expit", real), ("entr", pos),
               ("sinc", real), ("i0", real), ("i1", real), ("i0e", away0), ("i1e", away0)]:
    # (torch has no log_expit, and its digamma's derivative, trigamma, is accurate to 1e-9 only)
    op(f"special.{_n}", unary_samples(_d, SPECIAL_SHAPES),
       torch=None if _n in ("log_expit", "digamma") else _torch_special(_n))
for _n, _d1, _d2 in [("xlogy", real, pos), ("xlog1py", real, pos), ("rel_entr", pos, pos)]:
    op(f"special.{_n}", binary_samples(_d1, _d2, [((2, 3), (3,)), ((), (2,))], scalar=2.0),
       torch=None if _n == "rel_entr" else _torch_special(_n))
for _n, _d in [("gamma", pos), ("rgamma", pos), ("loggamma", pos), ("erfcx", real),
               ("exp2", real), ("exp10", real), ("cosm1", real), ("cbrt", away0), ("exp1", pos),
               ("expi", pos), ("exprel", real), ("spence", pos), ("j0", real), ("j1", real),
               ("y0", pos), ("y1", pos), ("k0", pos), ("k1", pos), ("k0e", pos), ("k1e", pos),
               ("sindg", _degrees), ("cosdg", _degrees), ("tandg", _degrees),
               ("cotdg", _degrees), ("ellipk", _prob), ("ellipkm1", _prob),
               ("ellipe", _prob)]:
    # (torch.special's Bessel functions have no derivative; its erfcx and exp2 have)
    op(f"special.{_n}", unary_samples(_d, SPECIAL_SHAPES),
       torch=_torch_special(_n) if _n in ("erfcx", "exp2") else None)
for _n, _d1, _d2 in [("betaln", pos, pos), ("poch", pos, pos), ("kl_div", pos, pos),
                     ("huber", pos, real), ("pseudo_huber", pos, real)]:
    op(f"special.{_n}", binary_samples(_d1, _d2, [((2, 3), (3,)), ((), (2,))], scalar=1.5),
       torch=None)
# differentiable in x only (the derivative in the shape parameters is refused by name)
for _n in ["gammainc", "gammaincc"]:
    op(f"special.{_n}", lambda rng: [Sample((pos(rng, (2, 3)), pos(rng, (3,))), diff=(1,)),
                                     Sample((pos(rng, ()),), call=lambda fn, x: fn(2.5, x))],
       torch=None)
op("special.betainc", lambda rng: [Sample((pos(rng, (3,)), pos(rng, (2, 1)), _prob(rng, (2, 3))),
                                          diff=(2,)),
                                   Sample((_prob(rng, ()),), call=lambda fn, x: fn(2.0, 3.5, x))],
   torch=None)
op("special.hyp1f1", lambda rng: [Sample((pos(rng, (3,)), pos(rng, (2, 1)), real(rng, (2, 3))),
                                          diff=(2,)),
                                  Sample((real(rng, ()),), call=lambda fn, x: fn(1.5, 2.5, x))],
   torch=None)
for _n in ["gammaincinv", "gammainccinv"]:
    op(f"special.{_n}", lambda rng: [Sample((pos(rng, (2, 3)), _prob(rng, (3,))), diff=(1,)),
                                     Sample((_prob(rng, ()),), call=lambda fn, p: fn(2.5, p))],
       torch=None)
op("special.binom", binary_samples(gt1, _prob, [((2, 3), (3,)), ((), (2,))]), torch=None)
for _n in ["expn", "yn"]:
    op(f"special.{_n}", lambda rng: [Sample((np.array([0.0, 1.0, 3.0]), pos(rng, (2, 3))), diff=(1,)),
                                     Sample((pos(rng, ()),), call=lambda fn, x: fn(2, x))],
       torch=None, float32=False)
op("special.zeta", lambda rng: [Sample((gt1(rng, (3,)), pos(rng, (2, 3))), diff=(1,)),
                                Sample((pos(rng, (2,)),), call=lambda fn, q: fn(3.5, q))],
   torch=None)
for _n in ["boxcox", "boxcox1p"]:
    op(f"special.{_n}", binary_samples(pos, real, [((2, 3), (3,)), ((), (2,))], scalar=0.0),
       torch=None)
for _n in ["inv_boxcox", "inv_boxcox1p"]:
    op(f"special.{_n}", binary_samples(unit, unit, [((2, 3), (3,)), ((), (2,))], scalar=0.0),
       torch=None)
op("special.multigammaln", lambda rng: [Sample((gt1(rng, (2, 3)),), call=lambda fn, a: fn(a, 3))],
   torch=None)
op("special.gdtr", lambda rng: [Sample((pos(rng, (3,)), pos(rng, (2, 3))),
                                       call=lambda fn, a, x: fn(a, 2.0, x))], torch=None)
op("special.gdtrc", lambda rng: [Sample((pos(rng, (3,)), pos(rng, (2, 3))),
                                        call=lambda fn, a, x: fn(a, 2.0, x))], torch=None)
op("special.pdtr", lambda rng: [Sample((pos(rng, (2, 3)),), call=lambda fn, m: fn(3.0, m))],
   torch=None)
op("special.fdtr", lambda rng: [Sample((pos(rng, (2, 3)),), call=lambda fn, x: fn(2.0, 3.0, x))],
   torch=None)
op("special.stdtr", lambda rng: [Sample((real(rng, (2, 3)),), call=lambda fn, t: fn(3.0, t))],
   torch=None)
op("special.betaincc", lambda rng: [Sample((_prob(rng, (2, 3)),),
                                           call=lambda fn, x: fn(2.0, 3.0, x))], torch=None)
op("special.polygamma", lambda rng: [Sample((pos(rng, (2, 3)),), call=lambda fn, x: fn(1, x)),
                                     Sample((pos(rng, ()),), call=lambda fn, x: fn(2, x))],
   torch=None)
op("special.logsumexp", lambda rng: [
    Sample((real(rng, (2, 3)),), _kw(axis=1)), Sample((real(rng, (2, 3)),)),
    Sample((real(rng, (2, 3)), pos(rng, (3,))), call=lambda fn, a, b, **k: fn(a, b=b, axis=-1),
           desc="b")], torch=None)
op("special.softmax", lambda rng: [Sample((real(rng, (2, 3)),)),
                                   Sample((real(rng, (2, 3)),), _kw(axis=0))], torch=None)
op("special.log_softmax", lambda rng: [Sample((real(rng, (2, 3)),)),
                                       Sample((real(rng, (2, 3)),), _kw(axis=1))], torch=None)



def _softmax_ref(x, axis=-1):
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / np.sum(e, axis=axis, keepdims=True)


# NumPy references for the functions NumPy lacks or spells differently (the forward check).
REFS = {
    "stop_gradient": lambda x: x,
    "relu": lambda x: np.maximum(x, 0),
    "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
    "softmax": _softmax_ref,
    "log_softmax": lambda x, axis=-1: np.log(_softmax_ref(x, axis)),
    "logsumexp": lambda x, axis=None, keepdims=False: np.log(np.sum(np.exp(x), axis=axis,
                                                                    keepdims=keepdims)),
    "diag": lambda x, diagonal=0: np.diag(x, diagonal),
    "dot": np.dot,
    "empty_like": np.zeros_like,     # arrayad's is zeros (reproducible); NumPy's is garbage
}
for _o in OPS:
    if _o.name.startswith("special."):
        import scipy.special
        _o.ref = getattr(scipy.special, _o.name[len("special."):])
        continue
    _o.ref = REFS.get(_o.name) or _np_ref(_o.name)


# The differentiable functions of the standard (2024.12 + 2025.12's linalg.eig/eigvals): each
# needs a VJP rule or a composite definition (tests/test_ops.py::test_rule_tables).
STANDARD_DIFFERENTIABLE = sorted("""
abs acos acosh add asin asinh atan atan2 atanh clip conj copysign cos cosh divide exp expm1
hypot imag log log1p log2 log10 logaddexp maximum minimum multiply negative nextafter positive
pow real reciprocal remainder sin sinh square sqrt subtract tan tanh
asarray meshgrid tril triu astype take take_along_axis matmul matrix_transpose tensordot vecdot
broadcast_arrays broadcast_to concat expand_dims flip moveaxis permute_dims repeat reshape roll
squeeze stack tile unstack where sort cumulative_sum cumulative_prod max mean min prod std sum var
diff
linalg.cholesky linalg.cross linalg.det linalg.diagonal linalg.eig linalg.eigh linalg.eigvals
linalg.eigvalsh linalg.inv linalg.matmul linalg.matrix_norm linalg.matrix_power
linalg.matrix_transpose linalg.outer linalg.pinv linalg.qr linalg.slogdet linalg.solve linalg.svd
linalg.svdvals linalg.tensordot linalg.trace linalg.vecdot linalg.vector_norm
fft.fft fft.ifft fft.fftn fft.ifftn fft.rfft fft.irfft fft.rfftn fft.irfftn fft.hfft fft.ihfft
fft.fftshift fft.ifftshift
""".split())


def available():
    """Every entry (``op`` refuses a name arrayad does not have)."""
    return list(OPS)


@dataclasses.dataclass
class Case:
    """One sample of one entry, with both draws: ``id`` is ``name-k`` (k counts the samples of
    that public name over all its entries); ``i`` is the index within its own entry."""
    op: OpInfo
    k: int
    i: int
    s0: Sample
    s1: Sample

    @property
    def id(self):
        return f"{self.op.name}-{self.k}"


def all_cases():
    """Every sample of every available entry, in a stable order."""
    out = []
    counts = {}
    for o in available():
        for i, (a, b) in enumerate(zip(o.samples(0), o.samples(1))):
            k = counts.get(o.name, 0)
            counts[o.name] = k + 1
            out.append(Case(o, k, i, a, b))
    return out
