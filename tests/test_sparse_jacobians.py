"""Sparse Jacobians and Hessians (arrayad.func.jacobian_sparsity, hessian_sparsity,
jacobian_coloring, hessian_coloring, sparse_jacobian, sparse_hessian).

Patterns are checked against the nonzeros of dense Jacobians and Hessians (``jacfwd``,
``hessian``) at random points: never a nonzero missed, and on elementwise, indexing and stencil
code none too many. Values are checked against the dense ones, on NumPy, array-api-strict and
torch. The operator database drives the "never missed" check over every differentiable function.
"""

import importlib.util

import numpy as np
import pytest

import arrayad as ad
from arrayad.func import (cond, fori_loop, hessian, hessian_coloring, hessian_sparsity, jacfwd,
                          jacobian_coloring, jacobian_sparsity, scan, sparse_hessian,
                          sparse_jacobian, while_loop)

import opdb
from conftest import to_numpy

sp = pytest.importorskip("scipy.sparse")

BACKENDS = ["numpy", "array_api_strict"] + (
    ["torch"] if importlib.util.find_spec("torch") is not None else [])


def dense(j, n_out, n_in):
    return to_numpy(j).reshape(n_out, n_in)


def as_dense(m):
    """A scipy or torch sparse result as a NumPy array."""
    if hasattr(m, "to_dense"):
        return m.to_dense().numpy()
    return m.toarray()


# ---------------------------------------------------------------------------------------------
# Functions whose patterns are sparse

CONST = np.array([[1.0, 0.0, 2.0, 0.0],
                  [0.0, 0.0, 3.0, 0.0],
                  [4.0, 0.0, 0.0, 5.0]])
INDEX = np.array([3, 0, 2])


def stencil(x):                          # a 1-d second difference, with a roll for periodicity
    return ad.roll(x, 1) - 2 * x + ad.roll(x, -1) + x[0] * 0.5


def elementwise(x):
    return ad.sin(x) * ad.exp(-x) + x ** 2 / (1 + x * x) - ad.tanh(x)


def slicing(x):
    return ad.concat([x[1:] * x[:-1], ad.flip(x[:3]), x[ad.asarray(INDEX)] ** 2, ad.reshape(
        ad.permute_dims(ad.reshape(x[:6], (2, 3)), (1, 0)), (-1,))])


def brusselator(u):                      # 2-d, periodic: the tutorial's residual
    a, b, alpha = 1.0, 3.4, 10.0
    U, V = u[0], u[1]

    def lap(w):
        return (ad.roll(w, 1, axis=0) + ad.roll(w, -1, axis=0) + ad.roll(w, 1, axis=1)
                + ad.roll(w, -1, axis=1) - 4 * w)
    du = a + U * U * V - (b + 1) * U + alpha * lap(U)
    dv = b * U - U * U * V + alpha * lap(V)
    return ad.stack([du, dv])


def reductions(x):
    m = ad.reshape(x, (2, 4))
    return ad.concat([ad.sum(m, axis=1), ad.prod(m, axis=0),
                      ad.reshape(ad.cumulative_sum(m, axis=1), (-1,)), ad.mean(x)[None]])


def with_constant_matmul(x):
    a = ad.asarray(CONST)    # (on the argument's backend)
    return a @ x + x[:3] * (a[:, 2:] @ x[1:3])


def with_where(x):
    mask = ad.arange(x.shape[0]) % 2 == 0     # known while analysing: exact
    return (ad.where(mask, x ** 2, ad.roll(x, 1)) + ad.where(x > 0.5, x, 0.0)
            + ad.max(ad.reshape(x, (2, 3)), axis=1)[:, None] * 0 + 0)  # (max: its whole row)


def with_setitem(x):
    y = ad.asarray(x, copy=True)
    y[1:3] = x[4:6] * x[0]
    return y


def with_scatter_add(x):                 # getitem's VJP: a scatter-add (index_add), repeated
    idx = ad.asarray(np.array([0, 2, 0, 5]))   # indices accumulating

    def energy(y):
        return ad.sum(y[idx] ** 2 * y[1:5])
    return ad.func.grad(energy)(x)


def with_cond(x):
    return cond(ad.sum(x) > 0, lambda a: a[:-1] * a[1:], lambda a: ad.sin(a[1:]), x)


def with_scan(x):                        # three steps of a carried stencil: exact step by step
    def step(c, xt):
        c = ad.roll(c, 1) * c + xt
        return c, ad.sum(c)
    c, ys = scan(step, x[:4], ad.reshape(x[4:], (2, 4)) if x.shape[0] == 12 else None,
                 length=2)
    return ad.concat([c, ys])


def with_while(x):                       # a trip count known at run time only: a fixed point
    def body(c):
        i, v = c
        return i + 1, v * 0.5 + ad.roll(v, 1) * 0.1
    return while_loop(lambda c: c[0] < 3, body, (0, x))[1]


def with_fori(x):
    return fori_loop(0, 2, lambda i, a: a + 0.1 * ad.roll(a, -1) ** 2, x)


# (name, function, input shape, whether the pattern is exact: no false nonzero)
CASES = [
    ("stencil", stencil, (7,), True),
    ("elementwise", elementwise, (6,), True),
    ("slicing", slicing, (8,), True),
    ("brusselator", brusselator, (2, 4, 4), True),
    ("reductions", reductions, (8,), True),
    ("constant_matmul", with_constant_matmul, (4,), True),
    ("where", with_where, (6,), False),     # (x > 0.5 depends on x: both operands)
    ("setitem", with_setitem, (7,), True),
    ("scatter_add", with_scatter_add, (6,), True),
    ("cond", with_cond, (5,), False),       # (the union of the branches)
    ("scan", with_scan, (12,), True),
    ("while_loop", with_while, (5,), False),
    ("fori_loop", with_fori, (5,), True),
]
IDS = [c[0] for c in CASES]


def point(shape, seed=0):
    return np.random.default_rng(seed).uniform(0.2, 1.2, shape)


@pytest.mark.parametrize("name, f, shape, exact", CASES, ids=IDS)
def test_pattern_holds_every_nonzero_and_no_other(name, f, shape, exact):
    x = point(shape)
    p = jacobian_sparsity(f)(x)
    n_in = x.size
    assert p.dtype == bool and p.shape[1] == n_in
    seen = np.zeros(p.shape, bool)
    for seed in range(3):
        j = dense(jacfwd(f)(point(shape, seed)), p.shape[0], n_in)
        assert not (j != 0)[~p.toarray()].any(), f"{name}: the pattern misses a nonzero"
        seen |= j != 0
    if exact:
        assert np.array_equal(seen, p.toarray()), f"{name}: the pattern has false nonzeros"


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("mode", ["auto", "forward", "reverse"])
@pytest.mark.parametrize("name, f, shape, exact", CASES, ids=IDS)
def test_sparse_jacobian_equals_dense(name, f, shape, exact, mode, backend):
    if backend != "numpy" and mode == "auto" and name not in ("brusselator", "slicing", "cond"):
        pytest.skip("one mode per function off NumPy keeps the suite short")
    be = ad.get_backend(backend)
    x = point(shape, 1)
    xb = be.xp.asarray(x)
    j = sparse_jacobian(f, mode=mode)(xb)
    if backend == "torch":
        import torch
        assert j.layout == torch.sparse_csr
    else:
        assert isinstance(j, sp.csr_array) and isinstance(j.data, np.ndarray)
    want = dense(jacfwd(f)(x), j.shape[0], x.size)
    np.testing.assert_allclose(as_dense(j), want, rtol=1e-12, atol=1e-12)


def test_brusselator_needs_few_colours():
    x = point((2, 16, 16))
    p = jacobian_sparsity(brusselator)(x)
    assert p.nnz == 6 * x.size        # (5-point stencil plus the other species)
    mode, colors = jacobian_coloring(p)
    assert colors.max() + 1 <= 12     # (a distance-2 colouring of a 2-d 5-point stencil x 2)
    np.testing.assert_allclose(
        sparse_jacobian(brusselator, sparsity=p, coloring=(mode, colors))(x).toarray(),
        dense(jacfwd(brusselator)(x), x.size, x.size), rtol=1e-12, atol=1e-12)


# ---------------------------------------------------------------------------------------------
# Hessians

def rosenbrock(x):
    return ad.sum(100 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2)


def arrow(x):
    return x[0] * ad.sum(x[1:] ** 2) + ad.sum(ad.exp(x[1:] * x[:-1]))


def quadratic_with_constant(x):          # x^T A x with a sparse constant A: A + A^T exactly
    return x[:3] @ (ad.asarray(CONST) @ x) + ad.sum(ad.sin(x))


def rows_then_slice(x):                  # nonlinear values that never reach the output add nothing
    y = ad.exp(x[:, None] * x[None, :])
    return ad.sum(y[0]) + ad.sum(x ** 3)


def hessian_cond(x):
    return cond(x[0] > 0, lambda a: ad.sum(a[1:] * a[:-1]), lambda a: ad.sum(a ** 2), x)


def hessian_scan(x):
    def step(c, _):
        return ad.roll(c, 1) * 0.5 + c, None
    c, _ = scan(step, x, None, length=2)
    return ad.sum(c ** 2)


H_CASES = [("rosenbrock", rosenbrock, (6,), True), ("arrow", arrow, (6,), True),
           ("quadratic_with_constant", quadratic_with_constant, (4,), True),
           ("rows_then_slice", rows_then_slice, (4,), True),
           ("cond", hessian_cond, (5,), False), ("scan", hessian_scan, (5,), True),
           ("brusselator_energy", lambda u: ad.sum(brusselator(u) ** 2), (2, 3, 3), True)]
H_IDS = [c[0] for c in H_CASES]


@pytest.mark.parametrize("name, f, shape, exact", H_CASES, ids=H_IDS)
def test_hessian_pattern_holds_every_nonzero(name, f, shape, exact):
    x = point(shape)
    p = hessian_sparsity(f)(x).toarray()
    assert np.array_equal(p, p.T)
    seen = np.zeros(p.shape, bool)
    for seed in range(3):
        h = dense(hessian(f)(point(shape, seed)), x.size, x.size)
        assert not (h != 0)[~p].any(), f"{name}: the Hessian pattern misses a nonzero"
        seen |= h != 0
    if exact:
        assert np.array_equal(seen, p), f"{name}: the Hessian pattern has false nonzeros"


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name, f, shape, exact", H_CASES, ids=H_IDS)
def test_sparse_hessian_equals_dense(name, f, shape, exact, backend):
    be = ad.get_backend(backend)
    x = point(shape, 2)
    h = sparse_hessian(f)(be.xp.asarray(x))
    np.testing.assert_allclose(as_dense(h), dense(hessian(f)(x), x.size, x.size),
                               rtol=1e-10, atol=1e-10)


def test_star_colouring_of_an_arrow_and_a_band():
    x = point((40,))
    # (the hub, plus a star colouring of the band the products of neighbours make: 1 + 3)
    assert hessian_coloring(hessian_sparsity(arrow)(x)).max() + 1 <= 4
    assert hessian_coloring(hessian_sparsity(rosenbrock)(x)).max() + 1 <= 3


# ---------------------------------------------------------------------------------------------
# Colourings against networkx, reuse, errors

def test_colourings_are_valid_and_match_networkx_greedy():
    nx = pytest.importorskip("networkx")
    from arrayad._sparsity import coloring
    rng = np.random.default_rng(0)
    for _ in range(5):
        p = sp.csr_array(sp.random_array((30, 40), density=0.08, rng=rng) != 0)
        mode, colors = jacobian_coloring(p, "forward")
        assert coloring.recoverable(p, colors)
        g = nx.Graph()
        g.add_nodes_from(range(40))
        c = (p.T @ p).tocoo()
        g.add_edges_from((i, j) for i, j in zip(c.row, c.col) if i != j)
        theirs = nx.greedy_color(g, strategy="largest_first")
        assert colors.max() + 1 <= max(theirs.values()) + 2
        h = (p.T @ p).astype(bool)
        star = hessian_coloring(h)
        assert coloring.recoverable(h.tocsr(), star, symmetric=True)


def test_greedy_colouring_is_the_smallest_free_colour_in_order():
    """The compiled greedy colouring against the definition, written out in Python: in the
    given order, each vertex takes the smallest colour none of its coloured neighbours has;
    the graphs' self-loops and duplicate entries change nothing; bad arrays are refused."""
    from arrayad._core._graphs import greedy_colors
    from arrayad._sparsity import coloring
    rng = np.random.default_rng(3)
    for n, density in [(1, 0.5), (25, 0.1), (60, 0.3), (200, 0.02)]:
        a = sp.random_array((n, n), density=density, rng=rng) != 0
        g = sp.csr_array(a + a.T + sp.eye_array(n, dtype=bool))
        order = rng.permutation(n)
        want = [-1] * n
        for v in order:
            used = {want[w] for w in g.indices[g.indptr[v]:g.indptr[v + 1]]}
            want[v] = min(set(range(n + 1)) - used)
        got = coloring.greedy_coloring(g, order)
        assert got.tolist() == want
        for v in range(n):   # (a proper colouring)
            nbrs = [w for w in g.indices[g.indptr[v]:g.indptr[v + 1]] if w != v]
            assert got[v] not in got[nbrs]
    indptr, indices = np.array([0, 1, 2]), np.array([1, 0])
    with pytest.raises(ValueError, match="ordered once"):
        greedy_colors(indptr, indices, np.array([0, 0]))
    with pytest.raises(ValueError, match="not one of"):
        greedy_colors(indptr, np.array([1, 5]), np.array([0, 1]))


def test_reverse_mode_chosen_when_fewer_row_colours():
    def f(x):                            # two dense rows: 2 row colours, 8 column colours
        return ad.stack([ad.sum(x ** 2), ad.sum(ad.sin(x))])
    mode, colors = jacobian_coloring(jacobian_sparsity(f)(point((8,))))
    assert mode == "reverse" and colors.max() + 1 == 2


def test_several_arguments_and_pytrees():
    def f(a, d, scale):
        return {"u": a["x"][1:] * d, "v": a["y"] * scale}
    a = {"x": point((5,)), "y": point((2,), 1)}
    d = point((4,), 2)
    p = jacobian_sparsity(f, argnums=(0, 1))(a, d, 3.0)
    assert p.shape == (6, 11)
    j = sparse_jacobian(f, argnums=(0, 1))(a, d, 3.0).toarray()
    # columns: x (5), y (2), d (4); rows: u (4), v (2)
    want = np.zeros((6, 11))
    want[np.arange(4), 1 + np.arange(4)] = d
    want[np.arange(4), 7 + np.arange(4)] = a["x"][1:]
    want[4 + np.arange(2), 5 + np.arange(2)] = 3.0
    np.testing.assert_allclose(j, want)


def test_precomputed_pattern_and_colouring_are_reused():
    x = point((2, 4, 4))
    p = jacobian_sparsity(brusselator)(x)
    c = jacobian_coloring(p)
    calls = []

    def f(u):
        calls.append(1)
        return brusselator(u)
    sparse_jacobian(f, sparsity=p, coloring=c)(x)
    assert len(calls) == 1     # (no staging for detection: the products only)


def test_errors_name_the_function_and_the_fix():
    x = point((4,))
    with pytest.raises(ValueError, match="sparse_jacobian: mode"):
        sparse_jacobian(stencil, mode="sideways")
    with pytest.raises(TypeError, match="jacobian_sparsity.*callable"):
        jacobian_sparsity(3)
    with pytest.raises(TypeError, match="floating-point"):
        jacobian_sparsity(lambda i: i * 2)(np.arange(3))
    with pytest.raises(ValueError, match="sparsity="):
        sparse_jacobian(stencil, sparsity=sp.csr_array(np.eye(3, dtype=bool)))(x)
    wrong = ("forward", np.zeros(4, dtype=np.int64))   # (every column one colour)
    with pytest.raises(ValueError, match="jacobian_coloring"):
        sparse_jacobian(stencil, coloring=wrong)(x)
    with pytest.raises(ValueError, match="hessian_coloring"):
        sparse_hessian(rosenbrock, coloring=np.zeros(4, dtype=np.int64))(x)
    with pytest.raises(RuntimeError, match="jit"):
        jacobian_sparsity(lambda x: x if float(x[0]) > 0 else -x)(x)


def test_a_jitted_function_already_traced_is_read_through():
    # (called before, a jitted function binds its cached program as one primitive when it is
    # staged again: the walk goes into that program instead of taking it as a dense block)
    jitted = ad.jit(brusselator)
    x = point((2, 4, 4))
    jitted(x)
    jitted(x)
    p = jacobian_sparsity(jitted)(x)
    assert np.array_equal(p.toarray(), jacobian_sparsity(brusselator)(x).toarray())
    h = hessian_sparsity(lambda u: ad.sum(jitted(u) ** 2))(x)
    assert np.array_equal(h.toarray(),
                          hessian_sparsity(lambda u: ad.sum(brusselator(u) ** 2))(x).toarray())


def test_dask_and_tensor_arguments_give_scipy_matrices():
    da = pytest.importorskip("dask.array")
    x = point((2, 4, 4))
    want = dense(jacfwd(brusselator)(x), x.size, x.size)
    j = sparse_jacobian(brusselator)(da.from_array(x, chunks=2))    # (computed: NumPy values)
    assert isinstance(j, sp.csr_array)
    np.testing.assert_allclose(j.toarray(), want, rtol=1e-12, atol=1e-12)
    j = sparse_jacobian(brusselator)(ad.Tensor(x))
    np.testing.assert_allclose(j.toarray(), want, rtol=1e-12, atol=1e-12)


def test_under_jit_the_pattern_is_found_at_trace_time():
    x = point((7,))
    f = ad.jit(lambda x: ad.asarray(jacobian_sparsity(stencil)(x).toarray()) * x)
    np.testing.assert_array_equal(f(x) != 0, dense(jacfwd(stencil)(x), 7, 7) != 0)


@pytest.mark.parametrize("backend", BACKENDS)
def test_jit_of_sparse_jacobian_and_hessian_gives_the_eager_matrices(backend):
    """Pattern and colouring at trace time, the products replayed: the backend's sparse matrix
    comes out of the jitted function, equal to the dense Jacobian/Hessian at every point (one
    trace); inside, J @ v and J.toarray() compute on it (a Newton step in one program)."""
    be = ad.get_backend(backend)
    jj = ad.jit(sparse_jacobian(brusselator))
    jh = ad.jit(sparse_hessian(rosenbrock))
    for seed in (1, 2):
        x = point((2, 4, 4), seed)
        j = jj(be.xp.asarray(x))
        if backend == "torch":
            import torch
            assert j.layout == torch.sparse_csr
        else:
            assert isinstance(j, sp.csr_array) and isinstance(j.data, np.ndarray)
        np.testing.assert_allclose(as_dense(j), dense(jacfwd(brusselator)(x), x.size, x.size),
                                   rtol=1e-12, atol=1e-12)
        y = point((9,), seed)
        np.testing.assert_allclose(as_dense(jh(be.xp.asarray(y))), to_numpy(hessian(rosenbrock)(y)),
                                   rtol=1e-12, atol=1e-12)
    assert jj.traces == 1 and jh.traces == 1

    def newton_step(u):
        J = sparse_jacobian(brusselator)(u)
        r = ad.reshape(brusselator(u), (-1,))
        flat = ad.reshape(u, (-1,))
        return J @ flat, flat - ad.linalg.solve(J.toarray(), r)

    x = point((2, 3, 3), 3)
    jd = dense(jacfwd(brusselator)(x), x.size, x.size)
    matvec, step = ad.jit(newton_step)(be.xp.asarray(x))
    np.testing.assert_allclose(to_numpy(matvec), jd @ x.ravel(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(
        to_numpy(step), x.ravel() - np.linalg.solve(jd, to_numpy(brusselator(x)).ravel()),
        rtol=1e-10, atol=1e-12)


def test_sparse_results_under_vmap_or_grad_are_refused():
    x = point((3, 7))
    with pytest.raises(RuntimeError, match="sparse_jacobian: called on values of an enclosing "
                                           "vmap, grad.*under jit alone it works"):
        ad.func.vmap(sparse_jacobian(stencil))(x)
    with pytest.raises(RuntimeError, match="sparse_hessian: called on values of an enclosing"):
        ad.jit(ad.func.vmap(sparse_hessian(rosenbrock)))(x)


# ---------------------------------------------------------------------------------------------
# Every differentiable function of the operator database: the pattern never misses a nonzero

def _real_cases():
    seen, out = set(), []
    for case in opdb.all_cases():
        op, s = case.op, case.s0
        if not op.differentiable or op.name in seen:
            continue
        diff = s.diff_indices()
        arrays = [s.args[i] for i in diff]
        if not arrays or any(np.iscomplexobj(a) or a.size == 0 for a in arrays):
            continue
        seen.add(op.name)
        out.append(case)
    return out


OPDB = _real_cases()


@pytest.mark.parametrize("case", OPDB, ids=[c.op.name for c in OPDB])
def test_operator_database_patterns_never_miss(case):
    s = case.s0
    diff = s.diff_indices()

    def f(*xs):
        full = list(s.args)
        for i, x in zip(diff, xs):
            full[i] = x
        return opdb.call_sample(case.op, s, full)
    args = [s.args[i] for i in diff]
    try:
        out = f(*args)
        j = jacfwd(f, argnums=tuple(range(len(args))))(*args)
    except Exception as e:   # (not differentiable this way: nothing to compare)
        pytest.skip(f"jacfwd: {e}")
    leaves = [to_numpy(o) for o in ad.func.tree_flatten(out)[0]]
    if any(np.iscomplexobj(o) for o in leaves):
        pytest.skip("complex output")
    n_out = sum(o.size for o in leaves)
    n_in = sum(a.size for a in args)
    blocks = ad.func.tree_flatten(j)[0]
    # (per output leaf, per argument: (out shape + in shape) blocks) -> one matrix
    rows, k = [], 0
    for o in leaves:
        row = []
        for a in args:
            row.append(to_numpy(blocks[k]).reshape(o.size, a.size))
            k += 1
        rows.append(np.concatenate(row, axis=1))
    dense_j = np.concatenate(rows, axis=0)
    p = jacobian_sparsity(f, argnums=tuple(range(len(args))))(*args)
    assert p.shape == (n_out, n_in)
    assert not (dense_j != 0)[~p.toarray()].any(), f"{case.op.name}: a nonzero is missed"
