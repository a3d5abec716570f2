"""Sparsity patterns of Jacobians and Hessians, read off the program ``jit`` stages (NOTE
[sparsity patterns]).

NOTE [sparsity patterns]
------------------------
The function is staged once, as ``jit`` stages it (``make_program``: NOTE [staging]), and the
optimised program is walked instruction by instruction. Every value of the program carries a
boolean CSR matrix, one row per element (C order) and one column per differentiated input
element: which input elements it depends on (no matrix: none, a constant). An instruction's rule
says, for each input, which of its elements each output element reads: a local boolean matrix
``M_k`` (output elements x input elements), so the output's pattern is ``OR_k M_k @ P_k`` (a
product of sparse boolean matrices, which SciPy computes as OR of ANDs). The rules:

* elementwise primitives read the element at the same (broadcast) index; ``where`` with a
  condition known while analysing (a constant of the program, or computed from constants only)
  reads the selected operand only, otherwise both; primitives whose derivative is zero almost
  everywhere (``floor``, ``sign``, comparisons) and results of integer or boolean dtype read none;
* primitives that move elements (indexing, slicing, ``setitem``, reshapes, transposes, rolls,
  flips, ``concat``, ``tile``, ``repeat``, ``tril``, ``broadcast_to``) are applied to arrays of
  element numbers, so that each output element says which input element it is: exact for every
  one of them, with whatever parameters (an index array must be known while analysing);
* reductions (``sum``, ``prod``, ``max``, ``min``) read their group, cumulative ones the elements
  up to their own, ``sort`` and the FFTs the elements along their axes, single-input linear
  algebra the matrices of their batch element;
* ``matmul`` reads, for ``(A @ B)[i, j]``, the elements ``A[i, l]`` where ``B[l, j]`` may be
  nonzero: a known operand's zeros are used, so a product with a constant sparse matrix is exact;
* ``switch`` (``cond``) takes the union of its branches; ``scan`` and ``while_loop`` iterate their
  body to a fixed point of the carries' patterns (a scan's ``xs`` and ``ys`` are taken as a whole:
  every step may read every step's ``x``);
* every other primitive reads every element of its differentiable inputs (conservative): among
  them ``custom_jvp``/``custom_vjp`` calls, whose rules need not have the sparsity of the
  function they stand beside (a straight-through estimator's JVP is not ``floor``'s).

The pattern holds for every value of the arguments (it is never the pattern at one point only,
where an element happens to be zero): arguments that are not differentiated are not known while
analysing. Arrays the function captures are: the pattern is the one for their current values.

Hessians (``hessian_sparsity``) use the same walk: by the chain rule the Hessian of ``y`` is a
sum, over the instructions, of ``J_in^T (sum_e lambda_e d2 op_e) J_in`` with ``lambda`` the
adjoint of the instruction's output. So, after the forward walk, a backward walk marks which
elements of each value reach an output (its ``live`` elements, through the transposed local
matrices) and each nonlinear instruction adds, for each live output element, the pairs of the
input elements its second derivative couples: for a unary nonlinearity the pairs of its
operand's dependency set, for ``multiply`` the pairs across its two operands' sets, for
``divide`` those and the denominator's own, for ``matmul`` of two variables the pairs
``A[i, l]`` x ``B[l, j]``, for any other nonlinear
primitive all pairs of its output element's set. Linear and piecewise linear primitives (sums,
moves, ``abs``, ``maximum``, ``where``...) add none.
"""

import numpy as np
import scipy.sparse as sp

from .._core import _core
from .._jit.ir import Lit, Var
from ..backends import backend_of

# ---------------------------------------------------------------------------------------------
# Local matrices

ID = "identity"   # the output reads the input's element at the same position (same size)
ALL = "all"       # every output element reads every input element


def _size(shape):
    return int(np.prod(shape, dtype=np.int64)) if len(shape) else 1


def _csr(rows, cols, shape):
    """A boolean CSR matrix with ones at (rows, cols)."""
    rows = np.asarray(rows, dtype=np.int64).ravel()
    cols = np.asarray(cols, dtype=np.int64).ravel()
    m = sp.coo_array((np.ones(len(rows), dtype=bool), (rows, cols)), shape=shape).tocsr()
    m.sum_duplicates()
    return m


class Take:
    """The local matrix of an output whose element ``e`` reads input element ``src[e]`` (-1:
    none), kept as that index: applied by taking rows, never built."""
    __slots__ = ("src", "n_in")

    def __init__(self, src, n_in):
        self.src = src
        self.n_in = n_in


def _gather(src, n_in):
    return Take(np.asarray(src, dtype=np.int64).ravel(), n_in)


def _take_rows(p, src):
    """Rows ``src`` of the CSR pattern ``p`` (an empty row where ``src`` is -1), made directly
    from its index arrays (rows stay sorted)."""
    lens = np.diff(p.indptr)
    valid = src >= 0
    s = np.where(valid, src, 0)
    counts = np.where(valid, lens[s], 0)
    indptr = np.zeros(len(src) + 1, dtype=p.indptr.dtype)
    np.cumsum(counts, out=indptr[1:])
    total = int(indptr[-1])
    at = np.repeat(p.indptr[s] - indptr[:-1], counts) + np.arange(total, dtype=indptr.dtype)
    return sp.csr_array((np.ones(total, dtype=bool), p.indices[at], indptr),
                        shape=(len(src), p.shape[1]))


_broadcast_cache = {}


def _broadcast(in_shape, out_shape):
    """Local matrix of an elementwise operand of shape ``in_shape`` in a result of ``out_shape``."""
    in_shape, out_shape = tuple(in_shape), tuple(out_shape)
    if in_shape == out_shape:
        return ID
    key = (in_shape, out_shape)
    m = _broadcast_cache.get(key)
    if m is None:
        n = _size(in_shape)
        src = np.broadcast_to(np.arange(n).reshape(in_shape), out_shape)
        m = _broadcast_cache[key] = _gather(src, n)
        if len(_broadcast_cache) > 256:
            _broadcast_cache.clear()
    return m


def apply(m, p, n_out):
    """``m @ p`` for a local matrix (or ID, ALL) and a pattern ``p``."""
    if m is ID:
        return p
    if isinstance(m, Take):
        return _take_rows(p, m.src)
    if m is ALL:
        cols = np.unique(p.indices)
        k = len(cols)
        return sp.csr_array((np.ones(n_out * k, dtype=bool), np.tile(cols, n_out),
                             np.arange(n_out + 1, dtype=np.int64) * k), shape=(n_out, p.shape[1]))
    return m @ p


def transpose_apply(m, live_out, n_in):
    """Which input elements an output's live elements read (a boolean vector)."""
    if m is ID:
        return live_out
    if m is ALL:
        return np.full(n_in, bool(live_out.any()))
    if isinstance(m, Take):
        live_in = np.zeros(n_in, bool)
        live_in[m.src[(m.src >= 0) & live_out]] = True
        return live_in
    return (m.T @ live_out.astype(np.int8)) > 0


def union(parts, shape):
    parts = [p for p in parts if p is not None]
    if not parts:
        return None
    out = parts[0]
    for p in parts[1:]:
        out = out + p
    return out if out.shape == shape else out.reshape(shape)


# ---------------------------------------------------------------------------------------------
# Rules: ``rule(an, eqn) -> [M_k per input]`` (per output for a primitive of several results)

RULES = {}


def rule(*names):
    def register(fn):
        for n in names:
            RULES[n] = fn
        return fn
    return register


# Elementwise primitives whose derivative is zero almost everywhere (those not declared
# differentiable at all are found by ``prim.differentiable``).
ZERO_DERIVATIVE = {"sign", "with_zero_grad", "stop_gradient"}

# Second-order classes (NOTE [sparsity patterns]): primitives whose second derivative is zero
# (almost everywhere): they add no pairs.
LINEAR = {"index_add", "add", "subtract", "negative", "positive", "conj", "real", "imag", "where",
          "abs",
          "maximum", "minimum", "clip", "copysign", "remainder", "sum", "max", "min",
          "cumulative_sum", "sort", "getitem", "setitem", "reshape", "permute_dims",
          "broadcast_to", "flip", "roll", "repeat", "tile", "tril", "triu", "concat", "copy",
          "to_device", "astype", "fft", "ifft", "fftn", "ifftn", "rfft", "irfft", "rfftn",
          "irfftn"}


def _elementwise(an, e):
    out = e.outs[0]
    if e.prim.name == "where":
        cond, a, b = e.ins
        c = an.value(cond)
        ms = [None]
        if c is None:
            return ms + [_broadcast(an.shape(x), out.shape) for x in (a, b)]
        mask = np.broadcast_to(np.asarray(c, dtype=bool), out.shape).ravel()
        for x, keep in ((a, mask), (b, ~mask)):
            n = _size(an.shape(x))
            src = np.broadcast_to(np.arange(n).reshape(an.shape(x)), out.shape).ravel()
            ms.append(_gather(np.where(keep, src, -1), n))
        return ms
    return [_broadcast(an.shape(x), out.shape) for x in e.ins]


# ids: the primitive applied to element numbers (NOTE [sparsity patterns])
MOVES = {"getitem": (0,), "setitem": (0, 1), "reshape": (0,), "permute_dims": (0,),
         "broadcast_to": (0,), "flip": (0,), "roll": (0,), "repeat": (0,), "tile": (0,),
         "tril": (0,), "triu": (0,), "concat": None}


def _moves(an, e):
    data = MOVES[e.prim.name]
    if data is None:
        data = tuple(range(len(e.ins)))
    args, offsets, start = [], [], 1
    for k, a in enumerate(e.ins):
        if k in data:
            shape = an.shape(a)
            n = _size(shape)
            if isinstance(a, Var):
                args.append(np.arange(start, start + n, dtype=np.int64).reshape(shape))
                offsets.append((start, n))
                start += n
            else:
                args.append(0)   # (a Python value: no input element)
                offsets.append(None)
        else:
            v = an.value(a)
            if v is None:
                return None   # (an index computed from the arguments: conservative)
            args.append(v)
            offsets.append(None)
    out_ids = np.asarray(_core.bind(e.prim, *args, **e.params)).ravel()
    ms = []
    for k, off in enumerate(offsets):
        if off is None:
            ms.append(None)
            continue
        lo, n = off
        src = out_ids - lo
        ms.append(_gather(np.where((src >= 0) & (src < n), src, -1), n))
    return ms


for _name in MOVES:
    RULES[_name] = _moves


@rule("index_add")
def _index_add(an, e):
    """``out = base; out[key] += v``: each element of ``base`` stays where it is, each element
    of ``v`` (broadcast to ``base[key]``) adds to the element the key selects."""
    from .._ops._rules import DECLARED
    base, v, *idx = e.ins
    vals = [an.value(a) for a in idx]
    if any(x is None for x in vals):
        return None
    shape = an.shape(base)
    n = _size(shape)
    target = np.asarray(_core.bind(DECLARED["getitem"], np.arange(n).reshape(shape), *vals,
                                   key=e.params["key"]))
    nv = _size(an.shape(v))
    src = np.broadcast_to(np.arange(nv).reshape(an.shape(v)), target.shape)
    return [ID, _csr(target.ravel(), src.ravel(), (n, nv))] + [None] * len(idx)


@rule("copy", "to_device", "astype")
def _identity(an, e):
    return [ID]


def _axes(axis, ndim):
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, int):
        axis = (axis,)
    return tuple(sorted(a % ndim for a in axis)) if ndim else ()


def _groups(shape, keep):
    """Group number of each element (C order) of an array of ``shape``: its index over the
    axes in ``keep`` (raveled)."""
    idx = np.indices(shape).reshape(len(shape), -1) if len(shape) else np.zeros((0, 1), int)
    kept = [shape[a] for a in keep]
    if not kept:
        return np.zeros(_size(shape), dtype=np.int64), 1
    return np.ravel_multi_index(tuple(idx[a] for a in keep), kept), _size(kept)


def _along(in_shape, out_shape, in_keep, out_keep):
    """Every output element reads every input element of its group (the same index over the
    kept axes)."""
    gi, ng = _groups(in_shape, in_keep)
    go, ng_out = _groups(out_shape, out_keep)
    if ng != ng_out:
        return ALL
    Gi = _csr(gi, np.arange(len(gi)), (ng, len(gi)))
    Go = _csr(go, np.arange(len(go)), (ng, len(go)))
    return (Go.T @ Gi).tocsr()


@rule("sum", "prod", "max", "min")
def _reduction(an, e):
    shape = an.shape(e.ins[0])
    axes = _axes(e.params.get("axis"), len(shape))
    keep = [a for a in range(len(shape)) if a not in axes]
    out_shape = e.outs[0].shape
    out_keep = keep if e.params.get("keepdims") else list(range(len(out_shape)))
    if e.params.get("keepdims"):
        out_keep = keep
    return [_along(shape, out_shape, keep, out_keep)]


@rule("sort")
def _sort(an, e):
    shape = an.shape(e.ins[0])
    axes = _axes(e.params.get("axis", -1), len(shape))
    keep = [a for a in range(len(shape)) if a not in axes]
    return [_along(shape, e.outs[0].shape, keep, keep)]


@rule("fft", "ifft", "rfft", "irfft", "fftn", "ifftn", "rfftn", "irfftn")
def _fft(an, e):
    shape = an.shape(e.ins[0])
    axis = e.params.get("axes", e.params.get("axis", -1))
    if axis is None and "axes" in e.params:
        s = e.params.get("s")
        axis = tuple(range(len(shape)))[-len(s):] if s else None
    axes = _axes(axis, len(shape))
    keep = [a for a in range(len(shape)) if a not in axes]
    return [_along(shape, e.outs[0].shape, keep, keep)]


@rule("cumulative_sum", "cumulative_prod")
def _cumulative(an, e):
    shape = an.shape(e.ins[0])
    out_shape = e.outs[0].shape
    if len(shape) == 0:
        return [ALL]
    ax = (e.params.get("axis") or 0) % len(shape)
    shift = 1 if e.params.get("include_initial") else 0
    n_in, n_out = _size(shape), _size(out_shape)
    ins = np.moveaxis(np.arange(n_in).reshape(shape), ax, -1)
    outs = np.moveaxis(np.arange(n_out).reshape(out_shape), ax, -1)
    L, Lo = ins.shape[-1], outs.shape[-1]
    tri = np.arange(L)[None, :] <= np.arange(Lo)[:, None] - shift     # (Lo, L)
    jo, ji = np.nonzero(tri)
    rows = outs[..., jo].reshape(-1)
    cols = ins[..., ji].reshape(-1)
    return [_csr(rows, cols, (n_out, n_in))]


def _linalg(an, e):
    """A single-input linear algebra primitive: each result element reads the matrix of its
    batch element."""
    shape = an.shape(e.ins[0])
    nb = max(len(shape) - 2, 0)
    if len(e.ins) != 1:
        return None
    ms = [[_along(shape, o.shape, list(range(nb)), list(range(min(nb, len(o.shape)))))]
          for o in e.outs]
    return ms if e.prim.multiple_results else ms[0]


for _name in ("linalg_inv", "linalg_det", "linalg_slogdet", "linalg_cholesky", "linalg_eigh",
              "linalg_eig", "linalg_qr", "linalg_svd"):
    RULES[_name] = _linalg


def _matmul_ids(an, e):
    """(ids of A as (T, m, k), ids of B as (T, k, n), ids of the result as (T, m, n)), the
    operands' values as masks of where they may be nonzero, for ``matmul`` with NumPy's
    promotion of 1-d operands and broadcasting of batch dimensions."""
    a, b = e.ins
    sa, sb = tuple(an.shape(a)), tuple(an.shape(b))
    sa2 = (1,) + sa if len(sa) == 1 else sa
    sb2 = sb + (1,) if len(sb) == 1 else sb
    batch = np.broadcast_shapes(sa2[:-2], sb2[:-2])
    m, k, n = sa2[-2], sa2[-1], sb2[-1]
    T = _size(batch)
    ia = np.broadcast_to(np.arange(_size(sa)).reshape(sa2), batch + (m, k)).reshape(T, m, k)
    ib = np.broadcast_to(np.arange(_size(sb)).reshape(sb2), batch + (k, n)).reshape(T, k, n)
    io = np.arange(T * m * n).reshape(T, m, n)

    def mask(x, s2, tail):
        v = an.value(x)
        if v is None:
            return np.ones((T,) + tail, dtype=bool)
        return np.broadcast_to((np.asarray(v) != 0).reshape(s2), batch + tail).reshape((T,) + tail)
    return ia, ib, io, mask(a, sa2, (m, k)), mask(b, sb2, (k, n))


@rule("matmul")
def _matmul(an, e):
    ia, ib, io, mask_a, mask_b = _matmul_ids(an, e)
    a, b = e.ins
    n_out = io.size
    ms = []
    if an.pattern(a) is not None:
        t, l, j = np.nonzero(mask_b)
        i = np.arange(ia.shape[1])[:, None]
        ms.append(_csr(io[t, i, j], ia[t, i, l], (n_out, _size(an.shape(a)))))
    else:
        ms.append(None)
    if an.pattern(b) is not None:
        t, i, l = np.nonzero(mask_a)
        j = np.arange(ib.shape[2])[:, None]
        ms.append(_csr(io[t, i, j], ib[t, l, j], (n_out, _size(an.shape(b)))))
    else:
        ms.append(None)
    return ms


# ---------------------------------------------------------------------------------------------
# Second order: the pairs an instruction adds (NOTE [sparsity patterns])

def _live_rows(p, live):
    return p if live.all() else p[np.nonzero(live)[0]]


def pairs(an, e, ms, live_outs):
    """The Hessian pairs (a list of boolean n x n matrices, not yet symmetric) of instruction
    ``e`` with local matrices ``ms``, given the live elements of its outputs."""
    name = e.prim.name
    if name in LINEAR or not any(l.any() for l in live_outs):
        return []
    if name == "multiply" or name == "divide":
        rows = [None if m is None or an.pattern(x) is None
                else apply(m, an.pattern(x), _size(e.outs[0].shape)) for m, x in zip(ms, e.ins)]
        live = live_outs[0]
        a, b = [None if r is None else _live_rows(r, live) for r in rows]
        out = []
        if a is not None and b is not None:
            out.append(a.T @ b)
        if name == "divide" and b is not None:
            out.append(b.T @ b)
        return out
    if name == "matmul":
        a, b = e.ins
        pa, pb = an.pattern(a), an.pattern(b)
        if pa is None or pb is None:
            return []
        ia, ib, io, _, _ = _matmul_ids(an, e)
        live = live_outs[0].reshape(io.shape)
        t, i, j = np.nonzero(live)
        if len(t) * ia.shape[2] > 50_000_000:   # (too many triples: all pairs of the sets)
            rows = _live_rows(an.pattern(e.outs[0]), live_outs[0])
            return [rows.T @ rows]
        l = np.arange(ia.shape[2])[:, None]
        T = _csr(ia[t, i, l], ib[t, l, j], (pa.shape[0], pb.shape[0]))
        return [pa.T @ (T @ pb)]
    out = []
    for o, live in zip(e.outs, live_outs):
        p = an.pattern(o)
        if p is not None and live.any():
            rows = _live_rows(p, live)
            out.append(rows.T @ rows)
    return out


# ---------------------------------------------------------------------------------------------
# The walk

class _Unknown(Exception):
    pass


def _to_numpy(x):
    if isinstance(x, (bool, int, float, complex)) or x is None:
        return x
    if isinstance(x, _core.Tensor):
        x = x._value
    if isinstance(x, _core.Array):   # (a value of an outer transform: not known here)
        return None
    try:
        return np.asarray(backend_of(x).to_numpy(x))
    except Exception:
        return None


class Analysis:
    """The patterns of the values of one program (and its sub-programs).

    ``run(prog, in_patterns)`` walks ``prog`` forward; with ``hessian``, each instruction's
    local matrices are kept and ``hessian_pairs`` walks back for the live elements and adds the
    pairs."""

    def __init__(self, n, hessian=False):
        self.n = n
        self.hessian = hessian
        self.pats = {}
        self.vals = {}
        self.tape = []     # (eqn, local matrices or None for a sub-program walk)
        self.subs = []     # sub-analyses' pair lists (control flow)
        self.extra_pairs = []

    # -- what the rules read
    def shape(self, a):
        return tuple(a.shape) if isinstance(a, Var) else tuple(np.shape(a.value))

    def pattern(self, a):
        return self.pats.get(a) if isinstance(a, Var) else None

    def value(self, a):
        if isinstance(a, Lit):
            return a.value
        return self.vals.get(a)

    # -- the walk
    def run(self, prog, in_patterns, in_values=None):
        for v, p in zip(prog.in_vars, in_patterns):
            if p is not None:
                self.pats[v] = p
        for v, x in zip(prog.in_vars, in_values or ()):
            if x is not None:
                self.vals[v] = x
        for v, c in prog.consts.items():
            x = _to_numpy(c)
            if x is not None:
                self.vals[v] = x
        for e in prog.eqns:
            self.step(e)
        return [self.pattern(a) for a in prog.outs]

    def step(self, e):
        ins = [self.pattern(a) for a in e.ins]
        if all(p is None for p in ins):
            self._evaluate(e)
            return
        handler = CONTROL.get(e.prim.name) or (_program if _is_program(e.prim) else None)
        if handler is not None:
            outs = handler(self, e)
            for o, p in zip(e.outs, outs):
                if p is not None and _differentiable_dtype(o):
                    self.pats[o] = p
            self.tape.append((e, None))
            return
        ms = self.local(e)
        per_out = ms if e.prim.multiple_results else [ms]
        for o, mo in zip(e.outs, per_out):
            if not _differentiable_dtype(o):
                continue
            n_out = _size(o.shape)
            parts = [None if m is None or p is None else apply(m, p, n_out)
                     for m, p in zip(mo, ins)]
            p = union(parts, (n_out, self.n))
            if p is not None:
                p.data[:] = True
                self.pats[o] = p
        if self.hessian:
            self.tape.append((e, per_out))

    def local(self, e):
        name = e.prim.name
        prim = e.prim
        nout = len(e.outs)
        if not prim.differentiable or (name in ZERO_DERIVATIVE and not any(
                isinstance(a, Var) and getattr(a.dtype, "kind", "") == "c" for a in e.ins)):
            none = [None] * len(e.ins)
            return [none] * nout if prim.multiple_results else none
        fn = RULES.get(name)
        if fn is None and prim.elementwise and not prim.multiple_results:
            fn = _elementwise
        ms = None
        if fn is not None:
            try:
                ms = fn(self, e)
            except Exception:   # (a rule that cannot read this call: the conservative answer)
                ms = None
        if ms is None:
            ms = [ALL if isinstance(a, Var) else None for a in e.ins]
            return [ms] * nout if prim.multiple_results else ms
        return ms

    def _evaluate(self, e):
        """An instruction of constants only: its value, where all its inputs are known."""
        vals = []
        for a in e.ins:
            v = self.value(a)
            if v is None and not (isinstance(a, Lit) and a.value is None):
                return
            vals.append(v)
        if e.prim.name in CONTROL or getattr(e.prim, "prog", None) is not None:
            return
        try:
            out = _core.bind(e.prim, *vals, **e.params)
        except Exception:
            return
        outs = out if e.prim.multiple_results else (out,)
        for o, x in zip(e.outs, outs):
            x = _to_numpy(x)
            if x is not None:
                self.vals[o] = x

    # -- second order
    def hessian_pairs(self, prog, live_out=None):
        """The pairs of the program's Hessian(s) (a symmetric boolean n x n CSR matrix), the
        elements of its outputs in ``live_out`` (all by default) being those that count."""
        live = {}
        for k, a in enumerate(prog.outs):
            if isinstance(a, Var):
                n = _size(a.shape)
                flag = np.ones(n, bool) if live_out is None else live_out[k]
                live[a] = live.get(a, np.zeros(n, bool)) | flag
        found = list(self.extra_pairs)
        for e, per_out in reversed(self.tape):
            louts = [live.get(o, np.zeros(_size(o.shape), bool)) for o in e.outs]
            if per_out is None:   # (control flow: the sub-walks' pairs, when any output is live)
                if any(l.any() for l in louts):
                    found += SECOND.get(e.prim.name, _program_pairs)(self, e)
                    for a in e.ins:
                        if isinstance(a, Var) and a in self.pats:
                            live[a] = np.ones(_size(a.shape), bool)
                continue
            found += pairs(self, e, per_out[0] if len(per_out) == 1 else per_out, louts) \
                if not e.prim.multiple_results else self._pairs_multi(e, louts)
            for mo, lo, o in zip(per_out, louts, e.outs):
                if not lo.any():
                    continue
                for m, a in zip(mo, e.ins):
                    if m is None or not isinstance(a, Var) or a not in self.pats:
                        continue
                    li = transpose_apply(m, lo, _size(a.shape))
                    live[a] = live[a] | li if a in live else li
        h = sp.csr_array((self.n, self.n), dtype=bool)
        for p in found:
            h = h + p.astype(bool)
        return (h + h.T).tocsr()

    def _pairs_multi(self, e, louts):
        out = []
        for o, live in zip(e.outs, louts):
            p = self.pattern(o)
            if p is not None and live.any() and e.prim.name not in LINEAR:
                rows = _live_rows(p, live)
                out.append(rows.T @ rows)
        return out


def _differentiable_dtype(v):
    return getattr(v.dtype, "kind", "f") in ("f", "c")


# ---------------------------------------------------------------------------------------------
# Control flow (NOTE [control flow] in _control): sub-programs walked with their inputs' patterns

def _sub(an, prog, in_pats, in_vals=None):
    sub = Analysis(an.n, an.hessian)
    outs = sub.run(prog, in_pats, in_vals)
    return sub, outs


def _vals(an, atoms):
    return [an.value(a) for a in atoms]


def _switch(an, e):
    branches, ncs = e.params["branches"], e.params["ncs"]
    args = list(e.ins[1:])
    consts, operands = args[:sum(ncs)], args[sum(ncs):]
    outs, start = None, 0
    for b, nc in zip(branches, ncs):
        atoms = consts[start:start + nc] + operands
        start += nc
        _, po = _sub(an, b.prog, [an.pattern(a) for a in atoms], _vals(an, atoms))
        outs = po if outs is None else [union([x, y], (x if x is not None else y).shape)
                                         if (x is not None or y is not None) else None
                                         for x, y in zip(outs, po)]
    return outs


def _switch_pairs(an, e):
    branches, ncs = e.params["branches"], e.params["ncs"]
    args = list(e.ins[1:])
    consts, operands = args[:sum(ncs)], args[sum(ncs):]
    found, start = [], 0
    for b, nc in zip(branches, ncs):
        atoms = consts[start:start + nc] + operands
        start += nc
        sub, _ = _sub(an, b.prog, [an.pattern(a) for a in atoms], _vals(an, atoms))
        found.append(sub.hessian_pairs(b.prog))
    return found


def _collapse(p, length):
    """The pattern of one step's slice of a stacked value: the union over the steps."""
    if p is None:
        return None
    n_step = p.shape[0] // max(length, 1)
    g = _csr(np.arange(p.shape[0]) % max(n_step, 1), np.arange(p.shape[0]),
             (n_step, p.shape[0]))
    out = (g @ p).tocsr()
    out.data[:] = True
    return out


def _stack(p, length, n):
    if p is None:
        return None
    return sp.vstack([p] * length, format="csr") if length else sp.csr_array((0, n), dtype=bool)


def _same(a, b):
    if a is None or b is None:
        return a is None and b is None
    return (a != b).nnz == 0


def _fixed_point(an, prog, before, carry, after, ncarry, in_vals):
    """The carries' patterns at the fixed point of the body, the last walk's output patterns and
    its analysis. Patterns only grow, so it ends (after at most one step per input column)."""
    while True:
        sub, outs = _sub(an, prog, before + carry + after, in_vals)
        new = []
        for c, o in zip(carry, outs[:ncarry]):
            u = union([c, o], (c if c is not None else o).shape) \
                if c is not None or o is not None else None
            if u is not None:
                u.data[:] = True
            new.append(u)
        if all(_same(a, b) for a, b in zip(new, carry)):
            return carry, outs, sub
        carry = new


# A scan of at most this many steps is followed step by step (exact: step t reads x[t] and
# writes y[t] only, and the carries are those after exactly ``length`` steps); a longer one
# iterates its body to the carries' fixed point, every step reading every x.
UNROLL = 256


def _scan_steps(an, e):
    """(final carries, ys, carry history, the step analyses) of a scan's patterns."""
    p = e.params
    nc, ncarry, length = p["nc"], p["ncarry"], p["length"]
    ins = list(e.ins)
    consts, init, xs = ins[:nc], ins[nc:nc + ncarry], ins[nc + ncarry:]
    before = [an.pattern(a) for a in consts]
    vals = _vals(an, consts) + [None] * (ncarry + len(xs))
    carry = [an.pattern(a) for a in init]
    prog = p["body"].prog
    if length > UNROLL:
        after = [_collapse(an.pattern(a), length) for a in xs]
        carry, outs, sub = _fixed_point(an, prog, before, carry, after, ncarry, vals)
        ys = [_stack(y, length, an.n) for y in outs[ncarry:]]
        hist = [_stack(c, length, an.n) for c in carry] if p["save"] else []
        return carry, ys, hist, [sub]
    xps = [an.pattern(a) for a in xs]
    steps = {}
    subs = []
    for t in (range(length - 1, -1, -1) if p["reverse"] else range(length)):
        x_t = [None if q is None else q[t * (q.shape[0] // length):
                                        (t + 1) * (q.shape[0] // length)] for q in xps]
        sub, outs = _sub(an, prog, before + carry + x_t, vals)
        steps[t] = (carry, outs[ncarry:])
        carry = outs[:ncarry]
        subs.append(sub)
    ys, hist = [], []
    for k, (shape, _) in enumerate(p["body"].out_avals[ncarry:]):
        ys.append(_stack_steps([steps[t][1][k] for t in range(length)], _size(shape), an.n))
    if p["save"]:
        for k, v in enumerate(init):
            hist.append(_stack_steps([steps[t][0][k] for t in range(length)],
                                     _size(an.shape(v)), an.n))
    return carry, ys, hist, subs


def _stack_steps(parts, size, n):
    if all(q is None for q in parts):
        return None
    return sp.vstack([sp.csr_array((size, n), dtype=bool) if q is None else q for q in parts],
                     format="csr")


def _scan(an, e):
    carry, ys, hist, _ = _scan_steps(an, e)
    return list(carry) + ys + hist


def _scan_pairs(an, e):
    _, _, _, subs = _scan_steps(an, e)
    return [sub.hessian_pairs(e.params["body"].prog) for sub in subs]


def _while_parts(an, e):
    p = e.params
    ncc, nbc = p["ncc"], p["nbc"]
    ins = list(e.ins)
    bc, init = ins[ncc:ncc + nbc], ins[ncc + nbc:]
    vals = _vals(an, bc) + [None] * len(init)
    return _fixed_point(an, p["body"].prog, [an.pattern(a) for a in bc],
                        [an.pattern(a) for a in init], [], len(init), vals)


def _while(an, e):
    carry, _, _ = _while_parts(an, e)
    return carry


def _while_pairs(an, e):
    _, _, sub = _while_parts(an, e)
    return [sub.hessian_pairs(e.params["body"].prog)]


def _is_program(prim):
    """A jitted function's cached program bound as one primitive (NOTE [program primitive]):
    its inputs, then its captured arrays."""
    from .._jit.replay import _ProgramPrimitive
    return isinstance(prim, _ProgramPrimitive) and not prim.fused


def _program_walk(an, e):
    prog = e.prim.prog
    k = len(prog.in_vars)
    sub = Analysis(an.n, an.hessian)
    for v, a in zip(prog.captured, e.ins[k:]):   # (the captured arrays follow the inputs)
        p = an.pattern(a)
        if p is not None:
            sub.pats[v] = p
    outs = sub.run(prog, [an.pattern(a) for a in e.ins[:k]], _vals(an, e.ins[:k]))
    return sub, outs


def _program(an, e):
    return _program_walk(an, e)[1]


def _program_pairs(an, e):
    sub, _ = _program_walk(an, e)
    return [sub.hessian_pairs(e.prim.prog)]


CONTROL = {"switch": _switch, "scan": _scan, "while_loop": _while}
SECOND = {"switch": _switch_pairs, "scan": _scan_pairs, "while_loop": _while_pairs}
