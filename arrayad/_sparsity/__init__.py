"""Sparse Jacobians and Hessians: patterns detected from the staged program, colourings, and
compressed products (exported from ``arrayad.func``).

``jacobian_sparsity`` and ``hessian_sparsity`` stage the function as ``jit`` does and walk the
program (NOTE [sparsity patterns] in ``patterns.py``); ``jacobian_coloring`` and
``hessian_coloring`` colour the patterns (NOTE [colourings] in ``coloring.py``); ``sparse_jacobian``
pushes one tangent per column colour (``vmap`` of ``jvp``) or pulls one cotangent per row colour
(``vmap`` of ``vjp``), whichever needs fewer, and ``sparse_hessian`` one Hessian-vector product
(forward over reverse) per colour of a star colouring; each entry is then read off the compressed
products in one vectorised gather.

SciPy is needed for the patterns and colourings (``scipy.sparse``), as it is for the results on
NumPy; it is imported when one of these functions is first called.
"""

import sys

import numpy as np

from .._core import _core
from .._jit import JitInterpreter, stage
from .._jit.passes import not_staging
from .._pytree import register_pytree_node, tree_flatten, tree_unflatten
from ..backends import backend_of

__all__ = ["jacobian_sparsity", "hessian_sparsity", "jacobian_coloring", "hessian_coloring",
           "sparse_jacobian", "sparse_hessian"]


def _func():
    return sys.modules["arrayad.func"]


def _ops():
    from .._ops._namespace import ops
    return ops


def _scipy_sparse(api):
    try:
        import scipy.sparse as sp
    except ImportError:   # pragma: no cover
        raise ImportError(f"{api}: sparse Jacobians and Hessians need SciPy (scipy.sparse holds "
                          f"the patterns and the results). Install it: pip install "
                          f"scipy.") from None
    return sp


def _modules(api):
    _scipy_sparse(api)
    from . import coloring, patterns
    return patterns, coloring


def _check_callable(func, api):
    if not callable(func):
        raise TypeError(f"{api}(func, ...): func must be a callable (the function to "
                        f"differentiate), got {type(func).__name__}.")


def _name(func):
    return getattr(func, "__name__", None) or type(func).__name__


def _is_array(x):
    return isinstance(x, _core.Array) or (
        not isinstance(x, (bool, int, float, complex, str, type(None), tuple, list, dict))
        and hasattr(x, "shape") and hasattr(x, "dtype"))


def _inexact(x):
    return getattr(_core.dtype_of(x), "kind", "") in ("f", "c")


class _Staged:
    """The program of ``func`` on ``args`` and where the differentiated leaves are in it."""

    def __init__(self, func, args, argnums, api):
        nums = _func()._check_argnums(argnums, len(args), api)
        self.nums = nums
        leaves_of = {}
        for i in nums:
            leaves, spec = tree_flatten(args[i])
            for k, x in enumerate(leaves):
                if not _is_array(x) or not _inexact(x):
                    what = (type(x).__name__ if not _is_array(x)
                            else f"dtype {_core.dtype_of(x)}")
                    leaf = f" (leaf {k})" if len(leaves) > 1 else ""
                    raise TypeError(
                        f"{api}({_name(func)}): argument {i}{leaf} "
                        f"is differentiated (argnums={argnums!r}) but is a {what}; it must be a "
                        f"floating-point array. Pass it as an array of floats (arrayad.asarray(x, "
                        f"dtype=arrayad.float64)), or leave it out of argnums.")
            leaves_of[i] = (leaves, spec)
        self.leaves_of = leaves_of
        self.prog = stage(func, args)
        # the program's inputs: the array leaves of (args, {}) in order
        self.diff_vars = []
        pos = 0
        for i, a in enumerate(args):
            n_arrays = sum(1 for x in tree_flatten(a)[0] if _is_array(x))
            if i in leaves_of:
                self.diff_vars += self.prog.in_vars[pos:pos + n_arrays]
            pos += n_arrays
        self.sizes = [_size(v.shape) for v in self.diff_vars]
        self.n = int(sum(self.sizes))

    def seeds(self):
        import scipy.sparse as sp
        out, start = [], 0
        for v, k in zip(self.diff_vars, self.sizes):
            out.append(sp.csr_array((np.ones(k, dtype=bool), np.arange(start, start + k),
                                     np.arange(k + 1)), shape=(k, self.n)))
            start += k
        return out

    def analyse(self, hessian=False):
        patterns, _ = _modules("sparsity")
        an = patterns.Analysis(self.n, hessian=hessian)
        seeds = dict(zip(self.diff_vars, self.seeds()))
        with not_staging():
            outs = an.run(self.prog, [seeds.get(v) for v in self.prog.in_vars])
        return an, outs


def _size(shape):
    return int(np.prod(shape, dtype=np.int64)) if len(shape) else 1


def _output_pattern(staged, outs):
    import scipy.sparse as sp
    rows = []
    for a, p in zip(staged.prog.outs, outs):
        shape = a.shape if hasattr(a, "shape") else np.shape(a.value)
        rows.append(p if p is not None else sp.csr_array((_size(shape), staged.n), dtype=bool))
    if not rows:
        return sp.csr_array((0, staged.n), dtype=bool)
    out = sp.vstack(rows, format="csr").astype(bool)
    out.sort_indices()
    return out


def jacobian_sparsity(func, argnums=0):
    """The sparsity pattern of ``func``'s Jacobian, found from its staged program.

    ``jacobian_sparsity(f)(*args)`` stages ``f`` as ``arrayad.jit`` does (one run on ``args``)
    and follows, through each primitive, which input elements every element of every value
    depends on: exactly for elementwise code, indexing, slicing, scatters, reshapes, rolls,
    concatenation, reductions and ``matmul`` with a constant operand; ``cond`` takes the union
    of its branches, ``scan`` follows its steps (up to 256, a fixed point beyond),
    ``while_loop`` iterates to a fixed point; other primitives (``sort``, ``linalg``...) are
    taken to mix all the elements they may mix. The pattern holds for every value of the
    differentiated and other arguments; arrays ``f`` captures (and constants it makes) are
    read as they are, so ``where`` on a fixed mask and a product with a fixed sparse matrix
    stay sparse. The tutorial "Sparse Jacobians for implicit time steps" shows it at work.

    Parameters
    ----------
    func : callable
        A function of arrays (pytrees of arrays) returning an array or a pytree of arrays, that
        ``arrayad.jit`` can stage (no Python branch on an array's value).
    argnums : int or tuple of int, optional
        The positional arguments to differentiate with respect to (default 0); their leaves
        must be floating-point arrays.

    Returns
    -------
    callable
        ``(*args) -> scipy.sparse.csr_array`` of booleans, of shape (number of output
        elements, number of input elements): row ``i`` is element ``i`` of the outputs'
        leaves raveled (C order) one after another, column ``j`` element ``j`` of the
        differentiated arguments' leaves raveled likewise. ``True`` where the Jacobian may be
        nonzero.

    Raises
    ------
    TypeError
        If ``func`` is not callable, or a differentiated argument is not a floating-point
        array.
    RuntimeError
        If ``argnums`` is malformed or out of range, or ``func`` cannot be staged (a Python
        ``if`` on an array value: the error says how to rewrite it).
    ImportError
        If SciPy is not installed.

    Examples
    --------
    A three-point stencil: each output reads its two neighbours and itself.

    >>> def f(x):
    ...     return x[:-2] - 2 * x[1:-1] + x[2:]
    >>> ad.func.jacobian_sparsity(f)(np.ones(5)).toarray().astype(int)
    array([[1, 1, 1, 0, 0],
           [0, 1, 1, 1, 0],
           [0, 0, 1, 1, 1]])
    """
    _check_callable(func, "jacobian_sparsity")
    _func()._check_argnums(argnums, None, "jacobian_sparsity")

    def pattern(*args):
        _modules("jacobian_sparsity")
        staged = _Staged(func, args, argnums, "jacobian_sparsity")
        _, outs = staged.analyse()
        return _output_pattern(staged, outs)

    return pattern


def hessian_sparsity(func, argnums=0):
    """The sparsity pattern of ``func``'s Hessian, found from its staged program.

    ``hessian_sparsity(f)(*args)`` stages ``f`` as ``jacobian_sparsity`` does and finds which
    pairs of input elements interact: for each nonlinear primitive whose result reaches the
    output, the pairs its second derivative couples (a product couples its two operands'
    dependencies, a nonlinear function of one value all pairs of that value's dependencies);
    linear and piecewise linear primitives add none. For a function with several output
    elements, the union of their Hessians' patterns.

    Parameters
    ----------
    func : callable
        A function of arrays returning an array (a scalar for a Hessian proper).
    argnums : int or tuple of int, optional
        The positional arguments to differentiate with respect to (default 0).

    Returns
    -------
    callable
        ``(*args) -> scipy.sparse.csr_array`` of booleans, square and symmetric, of the size of
        the differentiated arguments' elements raveled one after another (C order).

    Raises
    ------
    TypeError
        If ``func`` is not callable, or a differentiated argument is not a floating-point
        array.
    RuntimeError
        If ``argnums`` is malformed or out of range, or ``func`` cannot be staged.
    ImportError
        If SciPy is not installed.

    Examples
    --------
    The extended Rosenbrock function couples each variable with its neighbours only:

    >>> def rosen(x):
    ...     return ad.sum(100 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2)
    >>> ad.func.hessian_sparsity(rosen)(np.zeros(4)).toarray().astype(int)
    array([[1, 1, 0, 0],
           [1, 1, 1, 0],
           [0, 1, 1, 1],
           [0, 0, 1, 1]])
    """
    _check_callable(func, "hessian_sparsity")
    _func()._check_argnums(argnums, None, "hessian_sparsity")

    def pattern(*args):
        _modules("hessian_sparsity")
        staged = _Staged(func, args, argnums, "hessian_sparsity")
        an, _ = staged.analyse(hessian=True)
        with not_staging():
            h = an.hessian_pairs(staged.prog)
        h = h.astype(bool).tocsr()
        h.sort_indices()
        return h

    return pattern


# ---------------------------------------------------------------------------------------------
# Colourings

def _as_pattern(sparsity, api, what="sparsity"):
    sp = _scipy_sparse(api)
    try:
        p = sp.csr_array(sparsity).astype(bool)
    except Exception:
        raise TypeError(f"{api}: {what} must be a boolean sparse matrix (what "
                        f"jacobian_sparsity/hessian_sparsity return) or a 2-d boolean array, "
                        f"got {type(sparsity).__name__}.") from None
    p.eliminate_zeros()
    p.sort_indices()
    return p


_MODES = ("auto", "forward", "reverse")


def _check_mode(mode, api):
    if mode not in _MODES:
        raise ValueError(f"{api}: mode must be 'auto', 'forward' (one JVP per column colour) or "
                         f"'reverse' (one VJP per row colour), got {mode!r}.")


def jacobian_coloring(sparsity, mode="auto"):
    """A colouring of a Jacobian's pattern for compressed evaluation (``sparse_jacobian``).

    Forward mode colours the columns so that no row has two nonzeros of one colour (a greedy
    distance-2 colouring in largest-first order): one JVP per colour then gives every entry.
    Reverse mode colours the rows likewise, one VJP per colour. ``"auto"`` computes both and
    keeps the one with fewer colours (forward on a tie).

    Parameters
    ----------
    sparsity : scipy.sparse array or 2-d boolean array
        The pattern, as ``jacobian_sparsity`` returns it.
    mode : {"auto", "forward", "reverse"}, optional

    Returns
    -------
    (mode, colors)
        ``"forward"`` or ``"reverse"`` and a NumPy int array: the colour of each column
        (forward) or row (reverse), from 0. Pass the pair as ``sparse_jacobian(...,
        coloring=...)``.

    Raises
    ------
    ValueError
        If ``mode`` is not one of the three.
    TypeError
        If ``sparsity`` is not a 2-d pattern.

    Examples
    --------
    A tridiagonal pattern needs three colours:

    >>> p = ad.func.jacobian_sparsity(lambda x: x[:-2] + x[1:-1] * x[2:])(np.ones(6))
    >>> mode, colors = ad.func.jacobian_coloring(p, "forward")
    >>> mode, int(colors.max()) + 1
    ('forward', 3)
    """
    _check_mode(mode, "jacobian_coloring")
    p = _as_pattern(sparsity, "jacobian_coloring")
    _, coloring = _modules("jacobian_coloring")
    fwd = coloring.column_coloring(p) if mode in ("auto", "forward") else None
    if mode == "auto" and p.shape[0] == p.shape[1] and (p != p.T).nnz == 0:
        return "forward", fwd   # (a symmetric pattern: its rows colour as its columns do)
    rev = coloring.column_coloring(p.T.tocsr()) if mode in ("auto", "reverse") else None
    if fwd is not None and (rev is None or fwd.max(initial=-1) <= rev.max(initial=-1)):
        return "forward", fwd
    return "reverse", rev


def hessian_coloring(sparsity):
    """A star colouring of a (symmetric) Hessian pattern for ``sparse_hessian``.

    Parameters
    ----------
    sparsity : scipy.sparse array or 2-d boolean array
        The pattern, as ``hessian_sparsity`` returns it.

    Returns
    -------
    numpy.ndarray
        The colour of each variable, from 0: one Hessian-vector product per colour recovers
        every entry (each directly, from one of the two symmetric positions).

    Raises
    ------
    TypeError
        If ``sparsity`` is not a square pattern.

    Examples
    --------
    An arrow-shaped Hessian (the first variable meets all others) needs two colours:

    >>> h = ad.func.hessian_sparsity(lambda x: x[0] * ad.sum(x ** 2))(np.ones(5))
    >>> int(ad.func.hessian_coloring(h).max()) + 1
    2
    """
    p = _as_pattern(sparsity, "hessian_coloring")
    if p.shape[0] != p.shape[1]:
        raise TypeError(f"hessian_coloring: the pattern must be square, got shape {p.shape}.")
    _, coloring = _modules("hessian_coloring")
    return coloring.star_coloring(p)


# ---------------------------------------------------------------------------------------------
# Compressed evaluation

def _native_kind(x):
    """'torch', 'numpy' (NumPy, array-api-strict, everything converted to NumPy) or 'traced'
    (a value of an enclosing transform)."""
    if isinstance(x, _core.Tracer):
        return "traced"
    raw = x._value if isinstance(x, _core.Tensor) else x
    return "torch" if type(raw).__module__.startswith("torch") else "numpy"


def _seeds(like, colors, n_colors):
    """(n_colors, n) seed matrix on ``like``'s backend: row c is the sum of the unit vectors of
    the elements of colour c."""
    raw = _core.raw_value(like)
    b = backend_of(raw)
    seed = np.zeros((n_colors, len(colors)))
    seed[colors, np.arange(len(colors))] = 1.0
    dtype = raw.dtype
    try:
        arr = b.xp.asarray(seed, dtype=dtype, device=b.device_of(raw))
    except TypeError:
        arr = b.xp.asarray(seed, dtype=dtype)
    return arr


def _flat_function(func, args, nums, leaves_of):
    """``g(*leaves) -> raveled outputs``: ``func`` of the differentiated leaves, the other
    arguments fixed, its output leaves raveled and concatenated."""
    ops = _ops()

    def g(*leaves):
        it = iter(leaves)
        new = list(args)
        for i in nums:
            ls, spec = leaves_of[i]
            new[i] = tree_unflatten([next(it) for _ in ls], spec)
        outs = tree_flatten(func(*new))[0]
        flat = [ops.reshape(o, (-1,)) for o in outs]
        return flat[0] if len(flat) == 1 else ops.concat(flat)
    return g


def _split_raw(row, shapes):
    """A backend array of raveled vectors (k, n) as the leaves (k, *shape), backend arrays."""
    xp = backend_of(row).xp
    out, start = [], 0
    for shape in shapes:
        size = _size(shape)
        out.append(xp.reshape(row[:, start:start + size], (row.shape[0],) + tuple(shape)))
        start += size
    return out


def _concat_rows(parts):
    ops = _ops()
    flat = [ops.reshape(p, (p.shape[0], -1)) for p in parts]
    return flat[0] if len(flat) == 1 else ops.concat(flat, axis=1)


# NOTE [sparse results under jit]
# -------------------------------
# A scipy.sparse or torch sparse matrix cannot hold the values of a function being traced. Under
# ``jit`` alone (every open transform a jit) the result is a ``StagedCSR`` instead: the
# nonzeros as a traced vector (``data``) beside the pattern's ``indices`` and ``indptr``
# (NumPy constants of the trace), a pytree node whose only leaf is ``data``. Returned from the
# jitted function, it is rebuilt from the replay's values into the backend's sparse matrix (its
# unflatten calls ``_result`` on concrete values), so ``jit(sparse_jacobian(f))(x)`` gives what
# ``sparse_jacobian(f)(x)`` gives, with pattern and colouring found once, at trace time. Inside,
# ``J @ v`` and ``J.toarray()`` compute on it with arrayad operations (a Newton step can solve
# with the dense matrix in the same program). Under vmap or grad the error stays: a batch or a
# derivative of sparse matrices has no native type.

class _Structure:
    """A CSR pattern's constant part, compared by identity (the aux data of a StagedCSR)."""
    __slots__ = ("indices", "indptr", "shape", "pattern", "api")

    def __init__(self, pattern, api):
        self.pattern = pattern
        self.indices = np.asarray(pattern.indices, dtype=np.int64)
        self.indptr = np.asarray(pattern.indptr, dtype=np.int64)
        self.shape = tuple(pattern.shape)
        self.api = api


class StagedCSR:
    """The sparse matrix that ``sparse_jacobian``/``sparse_hessian`` give inside ``jit`` (NOTE
    [sparse results under jit]): ``data`` (its nonzeros, row by row), ``indices``, ``indptr``
    and ``shape`` as scipy's CSR has them. Returned from the jitted function it becomes the
    backend's sparse matrix; inside, ``J @ v`` (a vector) and ``J.toarray()`` compute on it."""

    __slots__ = ("data", "_s")

    def __init__(self, data, structure):
        self.data = data
        self._s = structure

    indices = property(lambda self: self._s.indices)
    indptr = property(lambda self: self._s.indptr)
    shape = property(lambda self: self._s.shape)

    def __repr__(self):
        return (f"<StagedCSR {self.shape[0]}x{self.shape[1]}, {len(self.indices)} nonzeros, "
                f"from {self._s.api} inside jit>")

    def _rows(self):
        return np.repeat(np.arange(self.shape[0], dtype=np.int64), np.diff(self.indptr))

    def toarray(self):
        """The dense matrix, computed in the traced program."""
        from .._ops.indexing import setitem
        ops = _ops()
        m, n = self.shape
        flat = ops.asarray((self._rows() * n + self.indices).tolist(), dtype=ops.int64)
        dense = ops.zeros((m * n,), dtype=self.data.dtype)
        return ops.reshape(setitem(dense, flat, self.data), (m, n))

    def __matmul__(self, v):
        from .._ops.indexing import index_add
        ops = _ops()
        if tuple(_core.shape_of(v)) != (self.shape[1],):
            raise ValueError(f"{self._s.api} inside jit: J @ v takes a vector of "
                             f"{self.shape[1]} elements, got shape {tuple(_core.shape_of(v))}.")
        cols = ops.asarray(self.indices.tolist(), dtype=ops.int64)
        rows = ops.asarray(self._rows().tolist(), dtype=ops.int64)
        out = ops.zeros((self.shape[0],), dtype=self.data.dtype)
        return index_add(out, rows, self.data * ops.take(v, cols, axis=0))


def _flatten_staged(x):
    return (x.data,), x._s


def _unflatten_staged(structure, children):
    data, = children
    if isinstance(data, _core.Tracer):
        return StagedCSR(data, structure)
    return _result(data, structure.pattern, data, structure.api)


register_pytree_node(StagedCSR, _flatten_staged, _unflatten_staged)


def _result(values, pattern, like, api):
    """The sparse matrix of ``values`` (one per nonzero of ``pattern``, in its CSR order) as
    ``like``'s backend has it: scipy.sparse.csr_array (NumPy, array-api-strict),
    torch.sparse_csr_tensor (torch); inside ``jit``, a ``StagedCSR`` (NOTE [sparse results
    under jit])."""
    kind = _native_kind(like)
    if kind == "traced":
        if all(isinstance(f, JitInterpreter) for f in _core.interpreters()):
            return StagedCSR(values, _Structure(pattern, api))
        raise RuntimeError(
            f"{api}: called on values of an enclosing vmap, grad or other transform; the sparse "
            f"result (a scipy.sparse or torch sparse matrix) cannot hold them (under jit alone "
            f"it works). Call it outside the transform; with sparsity= and coloring= given "
            f"(jacobian_sparsity, jacobian_coloring), a call costs only the compressed products.")
    raw = values._value if isinstance(values, _core.Tensor) else values
    if kind == "torch":
        import warnings
        import torch
        with warnings.catch_warnings():   # (torch's note that its sparse CSR layout is beta)
            warnings.simplefilter("ignore", UserWarning)
            return torch.sparse_csr_tensor(
                torch.as_tensor(pattern.indptr, dtype=torch.int64, device=raw.device),
                torch.as_tensor(pattern.indices, dtype=torch.int64, device=raw.device), raw,
                size=pattern.shape, check_invariants=False)
    sp = _scipy_sparse(api)
    vals = np.asarray(backend_of(raw).to_numpy(raw))
    return sp.csr_array((vals, pattern.indices.copy(), pattern.indptr.copy()),
                        shape=pattern.shape)


def _empty(like):
    raw = _core.raw_value(like)
    return backend_of(raw).xp.zeros((0,), dtype=raw.dtype)


def _gather(compressed, flat_index):
    """``compressed.ravel()[flat_index]`` with arrayad operations (any backend, traced too)."""
    ops = _ops()
    raw = _core.raw_value(compressed)
    b = backend_of(raw)
    idx = b.xp.asarray(flat_index.astype(np.int64))
    return ops.take(ops.reshape(compressed, (-1,)), idx, axis=0)


def _check_given_pattern(p, shape, api, what):
    if p.shape != shape:
        raise ValueError(f"{api}: the {what} pattern given (sparsity=) has shape {p.shape}, but "
                         f"for these arguments it must be {shape}. Compute it for the same "
                         f"shapes ({what}_sparsity(f)(*args)).")


def sparse_jacobian(func, argnums=0, *, mode="auto", sparsity=None, coloring=None):
    """The Jacobian of ``func`` as a sparse matrix, from one product per colour.

    ``sparse_jacobian(f)(*args)`` finds the pattern (``jacobian_sparsity``, or ``sparsity=``),
    colours it (``jacobian_coloring``, or ``coloring=``), pushes one tangent per column colour
    (``vmap`` of ``jvp``: forward mode) or pulls one cotangent per row colour (``vmap`` of
    ``vjp``: reverse mode), and reads every nonzero off those compressed products in one
    gather. A PDE residual whose Jacobian has a few nonzeros per row costs a few JVPs instead
    of one per unknown.

    Parameters
    ----------
    func : callable
        A function of arrays returning an array (or a pytree of arrays: their elements raveled
        one after another are the rows).
    argnums : int or tuple of int, optional
        The positional arguments to differentiate with respect to (default 0; their leaves
        raveled one after another are the columns).
    mode : {"auto", "forward", "reverse"}, optional
        ``"auto"`` (default) uses the mode that needs fewer products.
    sparsity : sparse matrix, optional
        The pattern, computed once with ``jacobian_sparsity`` (detection then costs nothing);
        it must hold every nonzero of the Jacobian at these arguments.
    coloring : (mode, colors), optional
        A colouring from ``jacobian_coloring`` (its mode is used).

    Returns
    -------
    callable
        ``(*args) -> sparse matrix``: ``torch.sparse_csr_tensor`` for torch tensors (on their
        device), ``scipy.sparse.csr_array`` with NumPy values for every other backend
        (NumPy, array-api-strict, a Dask array's values computed); an ``arrayad.Tensor``
        counts as the backend it holds. The shape is (output elements, differentiated input
        elements). Inside ``jit`` it is a ``StagedCSR`` (``data``, ``indices``, ``indptr``,
        ``J @ v``, ``J.toarray()``), which the jitted function returns as that matrix: the
        pattern and colouring are found once, when it is traced.

    Raises
    ------
    ValueError
        If ``mode`` is unknown, the pattern or colouring given does not fit these arguments,
        or the colouring cannot separate the pattern's entries.
    TypeError
        If ``func`` is not callable or a differentiated argument is not a floating-point array.
    RuntimeError
        If called on values of an enclosing transform other than ``jit`` (a sparse matrix
        cannot hold a batch or a derivative).

    Examples
    --------
    >>> def f(x):
    ...     return x[1:] * x[:-1]
    >>> J = ad.func.sparse_jacobian(f)(np.array([1.0, 2.0, 3.0, 4.0]))
    >>> J.toarray()
    array([[2., 1., 0., 0.],
           [0., 3., 2., 0.],
           [0., 0., 4., 3.]])
    """
    api = "sparse_jacobian"
    _check_callable(func, api)
    _check_mode(mode, api)
    _func()._check_argnums(argnums, None, api)

    plans = {}   # (with sparsity= given) n -> its _Plan: checked and colored once

    def jacobian(*args):
        func_mod = _func()
        nums = func_mod._check_argnums(argnums, len(args), api)
        leaves_of, leaves, shapes, sizes = _differentiated(func, args, nums, argnums, api)
        n = sum(sizes)
        plan = plans.get(n)
        if plan is None:
            if sparsity is None:
                pattern = jacobian_sparsity(func, argnums)(*args)
            else:
                pattern = _as_pattern(sparsity, api)
                if pattern.shape[1] != n:
                    _check_given_pattern(pattern, (pattern.shape[0], n), api, "jacobian")
            plan = _JacobianPlan(pattern, mode, coloring, api)
            if sparsity is not None:
                plans[n] = plan
        pattern, k = plan.pattern, plan.k
        if k == 0:   # (no nonzero)
            return _result(_empty(leaves[0]), pattern, leaves[0], api)
        g = _flat_function(func, args, nums, leaves_of)
        if plan.how == "forward":
            compressed = func_mod.vmap(lambda *t: func_mod.jvp(g, tuple(leaves), tuple(t))[1])(
                *plan.seeds(leaves[0], shapes))                                 # (k, m)
        else:
            _, pull = func_mod.vjp(g, *leaves)
            compressed = _concat_rows(func_mod.vmap(pull)(plan.seeds(leaves[0])))  # (k, n)
        return _result(_gather(compressed, plan.index), pattern, leaves[0], api)

    return jacobian


def _differentiated(func, args, nums, argnums, api):
    """(leaves of each differentiated argument, their leaves in order, shapes, sizes), or the
    error for a leaf that is not a floating-point array."""
    leaves_of = {i: tree_flatten(args[i]) for i in nums}
    for i in nums:
        for x in leaves_of[i][0]:
            if not _is_array(x) or not _inexact(x):
                raise TypeError(f"{api}({_name(func)}): argument {i} is differentiated "
                                f"(argnums={argnums!r}) but is not a floating-point array "
                                f"({type(x).__name__}); pass floats or leave it out of argnums.")
    leaves = [x for i in nums for x in leaves_of[i][0]]
    shapes = [tuple(_core.shape_of(x)) for x in leaves]
    return leaves_of, leaves, shapes, [_size(s) for s in shapes]


class _Plan:
    """A pattern, its colouring, checked, and where each nonzero is in the compressed products
    (``index``, into the products raveled); seed matrices per backend and dtype, made once."""

    def __init__(self, pattern, colors):
        self.pattern = pattern
        self.colors = colors
        self.k = int(colors.max(initial=-1)) + 1
        self._seeds = {}

    def seeds(self, like, shapes=None):
        """The (k, n) seed matrix on ``like``'s backend; with ``shapes`` (of the differentiated
        leaves), its columns split into arrays (k, *shape), one per leaf."""
        from .._ops.creation import made_inside
        raw = _core.raw_value(like)
        key = (type(raw), str(raw.dtype), str(getattr(raw, "device", "")),
               None if shapes is None else tuple(shapes))
        out = self._seeds.get(key)
        if out is None:
            out = _seeds(like, self.colors, self.k)
            if shapes is not None:
                out = _split_raw(out, shapes)
            self._seeds[key] = out
        # (the seeds never change: under jit, what the products compute from them alone, such
        # as a stencil's shifts of the tangents, is folded into constants)
        for s in (out if shapes is not None else (out,)):
            made_inside(s)
        return out


class _JacobianPlan(_Plan):
    def __init__(self, pattern, mode, coloring, api):
        m, n = pattern.shape
        if coloring is None:
            how, colors = jacobian_coloring(pattern, mode)
        else:
            how, colors = _given_coloring(coloring, mode, api)
        colors = np.asarray(colors, dtype=np.int64)
        if len(colors) != (n if how == "forward" else m):
            raise ValueError(f"{api}: the colouring given has {len(colors)} colours for a "
                             f"{how}-mode Jacobian of shape {(m, n)}: it must have one per "
                             f"{'column' if how == 'forward' else 'row'}. Compute it with "
                             f"jacobian_coloring(sparsity, mode={how!r}).")
        _, col_mod = _modules(api)
        p_check = pattern if how == "forward" else pattern.T.tocsr()
        p_check.sort_indices()
        # (a colouring given is checked; one computed here is valid by construction)
        if coloring is not None and not col_mod.recoverable(p_check, colors):
            raise ValueError(f"{api}: the colouring given gives two nonzeros of one "
                             f"{'row' if how == 'forward' else 'column'} the same colour, so "
                             f"they cannot be told apart in the compressed products. Compute "
                             f"it with jacobian_coloring(sparsity).")
        super().__init__(pattern, colors)
        self.how = how
        rows = np.repeat(np.arange(m), np.diff(pattern.indptr))
        cols = pattern.indices
        # J[i, j] is at row c(j), position i of the forward products, at row c(i), position j
        # of the reverse ones
        self.index = colors[cols] * m + rows if how == "forward" else colors[rows] * n + cols


def _given_coloring(coloring, mode, api):
    if (isinstance(coloring, tuple) and len(coloring) == 2
            and coloring[0] in ("forward", "reverse")):
        how, colors = coloring
        if mode != "auto" and mode != how:
            raise ValueError(f"{api}: mode={mode!r} but the colouring given is for "
                             f"{how!r} mode. Leave mode='auto' or pass a {mode}-mode colouring.")
        return how, colors
    raise TypeError(f"{api}: coloring must be the (mode, colors) pair that jacobian_coloring "
                    f"returns, got {type(coloring).__name__}.")


class _HessianPlan(_Plan):
    def __init__(self, pattern, coloring, n, api):
        colors = hessian_coloring(pattern) if coloring is None else np.asarray(coloring)
        colors = colors.astype(np.int64)
        _, col_mod = _modules(api)
        if len(colors) != n or (coloring is not None
                                and not col_mod.recoverable(pattern, colors, symmetric=True)):
            raise ValueError(f"{api}: the colouring given cannot recover every entry of the "
                             f"pattern (it needs one colour per variable, {n}, and a star "
                             f"colouring). Compute it with hessian_coloring(sparsity).")
        super().__init__(pattern, colors)
        own, _ = col_mod.direct_sources(pattern, colors, symmetric=True)
        rows = np.repeat(np.arange(n), np.diff(pattern.indptr))
        cols = pattern.indices
        # H[i, j] at row c(j), position i of the products, or (the same number) at row c(i),
        # position j, whichever has no other nonzero of that colour
        self.index = np.where(own, colors[cols] * n + rows, colors[rows] * n + cols)


def sparse_hessian(func, argnums=0, *, sparsity=None, coloring=None):
    """The Hessian of a scalar ``func`` as a sparse matrix, from one Hessian-vector product per
    colour.

    ``sparse_hessian(f)(*args)`` finds the pattern (``hessian_sparsity``, or ``sparsity=``),
    star-colours it (``hessian_coloring``, or ``coloring=``), computes one Hessian-vector
    product per colour (forward over reverse: ``jvp`` of ``grad``, batched with ``vmap``) and
    reads each entry directly off one of them (from either of its two symmetric positions).

    Parameters
    ----------
    func : callable
        A function of arrays returning a scalar.
    argnums : int or tuple of int, optional
        The positional arguments to differentiate with respect to (default 0).
    sparsity : sparse matrix, optional
        The pattern, computed once with ``hessian_sparsity``.
    coloring : array of int, optional
        A colouring from ``hessian_coloring``.

    Returns
    -------
    callable
        ``(*args) -> sparse matrix``: ``torch.sparse_csr_tensor`` for torch tensors,
        ``scipy.sparse.csr_array`` with NumPy values for every other backend (as
        ``sparse_jacobian``, also inside ``jit``); square, of the size of the differentiated
        arguments' elements.

    Raises
    ------
    ValueError
        If the pattern or colouring given does not fit these arguments, or the colouring
        cannot recover every entry.
    TypeError
        If ``func`` is not callable or a differentiated argument is not a floating-point array.
    RuntimeError
        If ``func`` does not return a scalar (from ``grad``), or it is called on values of an
        enclosing transform other than ``jit``.

    Examples
    --------
    >>> def rosen(x):
    ...     return ad.sum(100 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2)
    >>> H = ad.func.sparse_hessian(rosen)(np.array([1.0, 1.0, 1.0]))
    >>> H.toarray()
    array([[ 802., -400.,    0.],
           [-400., 1002., -400.],
           [   0., -400.,  200.]])
    """
    api = "sparse_hessian"
    _check_callable(func, api)
    _func()._check_argnums(argnums, None, api)

    plans = {}

    def hessian(*args):
        func_mod = _func()
        nums = func_mod._check_argnums(argnums, len(args), api)
        leaves_of, leaves, shapes, sizes = _differentiated(func, args, nums, argnums, api)
        n = sum(sizes)
        plan = plans.get(n)
        if plan is None:
            if sparsity is None:
                pattern = hessian_sparsity(func, argnums)(*args)
            else:
                pattern = _as_pattern(sparsity, api)
                pattern = (pattern + pattern.T).tocsr()
                pattern.sort_indices()
                _check_given_pattern(pattern, (n, n), api, "hessian")
            plan = _HessianPlan(pattern, coloring, n, api)
            if sparsity is not None:
                plans[n] = plan
        if plan.k == 0:   # (no nonzero)
            return _result(_empty(leaves[0]), plan.pattern, leaves[0], api)
        flat = _flat_function(func, args, nums, leaves_of)

        def scalar(*ls):
            out = flat(*ls)
            return _ops().reshape(out, ()) if tuple(_core.shape_of(out)) == (1,) else out
        grads = func_mod.grad(scalar, argnums=tuple(range(len(leaves))))

        def hvp(*t):
            return func_mod.jvp(lambda *ls: tuple(grads(*ls)), tuple(leaves), tuple(t))[1]
        compressed = _concat_rows(func_mod.vmap(hvp)(*plan.seeds(leaves[0], shapes)))  # (k, n)
        return _result(_gather(compressed, plan.index), plan.pattern, leaves[0], api)

    return hessian
