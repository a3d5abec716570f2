#!/usr/bin/env python
"""Sparse Jacobians and Hessians: arrayad.func.sparse_jacobian / sparse_hessian against dense
jacfwd / hessian, single-threaded, on float64 NumPy.

Rows (best of ``--repeat`` calls each, all in one process):

* 2-D Brusselator residual (periodic five-point Laplacian), 2,048 unknowns (2 x 32 x 32):
  sparse_jacobian with detection and colouring on every call, against dense jacfwd; the number
  of colours;
* the same at 8,192 unknowns (2 x 64 x 64): detection alone, sparse_jacobian with the pattern
  and colouring given, and ``jit(sparse_jacobian)`` (pattern and colouring found when it is
  traced), against one evaluation of the residual;
* the extended Rosenbrock function at 10,000 variables: sparse_hessian (pattern and colouring
  given) against one gradient;
* colouring: this package's greedy colouring against networkx's greedy_color (largest_first),
  on the Brusselator's column intersection graph, when networkx is installed;
* against asdex (sparse differentiation for JAX), when it is importable, on the same Brusselator
  written in jax.numpy at 8,192 and 32,768 unknowns: detection time, colours, and the Jacobian
  with the colouring given (asdex's under ``jax.jit``, as its documentation advises; ours eager
  with the pattern given, and under ``arrayad.jit``).

Run: ``python benchmarks/sparse_jacobians.py [--repeat 5]``.
"""

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"
# (JAX, for the asdex rows: float64, one thread, CPU)
os.environ.setdefault("JAX_ENABLE_X64", "1")
os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false "
                                   "intra_op_parallelism_threads=1")

import argparse  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

import arrayad as ad  # noqa: E402
from arrayad.func import (grad, hessian_coloring, hessian_sparsity, jacfwd,  # noqa: E402
                          jacobian_coloring, jacobian_sparsity, sparse_hessian, sparse_jacobian)

A, B, ALPHA = 1.0, 3.4, 10.0


def brusselator(u):
    U, V = u[0], u[1]

    def lap(w):
        return (ad.roll(w, 1, axis=0) + ad.roll(w, -1, axis=0) + ad.roll(w, 1, axis=1)
                + ad.roll(w, -1, axis=1) - 4 * w)
    uuv = U * U * V
    return ad.stack([A + uuv - (B + 1) * U + ALPHA * lap(U), B * U - uuv + ALPHA * lap(V)])


def rosenbrock(x):
    return ad.sum(100 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2)


def best(fn, repeat):
    fn()   # (warm: imports, caches)
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def ms(t):
    return f"{t * 1e3:9.3f} ms"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args(argv)
    r = args.repeat
    rng = np.random.default_rng(0)

    print("# Brusselator 2-D, 2,048 unknowns (2 x 32 x 32)")
    u = rng.uniform(0.5, 1.5, (2, 32, 32))
    pattern = jacobian_sparsity(brusselator)(u)
    mode, colors = jacobian_coloring(pattern)
    dense = jacfwd(brusselator)(u).reshape(u.size, u.size)
    sparse = sparse_jacobian(brusselator)(u)
    assert np.array_equal(sparse.toarray(), dense)
    t_dense = best(lambda: jacfwd(brusselator)(u), max(2, r // 2))
    t_sparse = best(lambda: sparse_jacobian(brusselator)(u), r)
    t_detect = best(lambda: jacobian_sparsity(brusselator)(u), r)
    t_colour = best(lambda: jacobian_coloring(pattern), r)
    t_given = best(lambda: sparse_jacobian(brusselator, sparsity=pattern,
                                           coloring=(mode, colors))(u), r)
    print(f"nonzeros {pattern.nnz} ({pattern.nnz // u.size} per row), {mode} mode, "
          f"{colors.max() + 1} colours")
    print(f"dense jacfwd                          {ms(t_dense)}")
    print(f"sparse_jacobian (detect+colour+eval)  {ms(t_sparse)}   "
          f"{t_dense / t_sparse:7.1f}x faster")
    print(f"  detection alone                     {ms(t_detect)}")
    print(f"  colouring alone                     {ms(t_colour)}")
    print(f"  with pattern and colouring given    {ms(t_given)}   {t_dense / t_given:7.1f}x faster")

    print("\n# Brusselator 2-D, 8,192 unknowns (2 x 64 x 64)")
    u = rng.uniform(0.5, 1.5, (2, 64, 64))
    t_detect = best(lambda: jacobian_sparsity(brusselator)(u), r)
    pattern = jacobian_sparsity(brusselator)(u)
    coloring = jacobian_coloring(pattern)
    jac = sparse_jacobian(brusselator, sparsity=pattern, coloring=coloring)
    t_f = best(lambda: brusselator(u), 10 * r)
    t_given = best(lambda: jac(u), r)
    jitted = ad.jit(sparse_jacobian(brusselator))   # (pattern and colouring at trace time)
    assert np.array_equal(jitted(u).toarray(), jac(u).toarray())
    t_jit = best(lambda: jitted(u), r)
    print(f"{coloring[1].max() + 1} colours ({coloring[0]})")
    print(f"detection                             {ms(t_detect)}")
    print(f"one evaluation of f                   {ms(t_f)}")
    print(f"sparse_jacobian, pattern given        {ms(t_given)}   = {t_given / t_f:5.1f} "
          f"evaluations of f")
    print(f"jit(sparse_jacobian)                  {ms(t_jit)}   = {t_jit / t_f:5.1f} "
          f"evaluations of f")

    print("\n# Extended Rosenbrock, 10,000 variables")
    x = rng.uniform(-1, 1, 10_000)
    t_hdetect = best(lambda: hessian_sparsity(rosenbrock)(x), r)
    h_pattern = hessian_sparsity(rosenbrock)(x)
    h_colors = hessian_coloring(h_pattern)
    hess = sparse_hessian(rosenbrock, sparsity=h_pattern, coloring=h_colors)
    g = grad(rosenbrock)
    t_grad = best(lambda: g(x), 10 * r)
    t_hess = best(lambda: hess(x), r)
    print(f"Hessian nonzeros {h_pattern.nnz}, {h_colors.max() + 1} colours (star)")
    print(f"hessian detection                     {ms(t_hdetect)}")
    print(f"one gradient                          {ms(t_grad)}")
    print(f"sparse_hessian, pattern given         {ms(t_hess)}   = {t_hess / t_grad:5.1f} "
          f"gradients")

    print("\n# Colouring the 8,192-unknown Brusselator's columns")
    from arrayad._sparsity import coloring as col
    p = pattern.astype(bool).tocsr()
    graph = (p.T @ p).tocsr()
    t_ours = best(lambda: col.greedy_coloring(graph), r)
    ours = col.greedy_coloring(graph)
    print(f"arrayad greedy (largest first)        {ms(t_ours)}   {ours.max() + 1} colours")
    t_star = best(lambda: col.star_coloring(graph), r)
    print(f"arrayad star colouring (same graph)   {ms(t_star)}   "
          f"{col.star_coloring(graph).max() + 1} colours")
    try:
        import networkx as nx
    except ImportError:
        print("networkx: not installed")
        nx = None
    if nx is not None:
        _networkx(nx, graph, col, r)
    against_asdex(r)


def _networkx(nx, graph, col, r):
    coo = graph.tocoo()
    G = nx.Graph()
    G.add_nodes_from(range(graph.shape[0]))
    G.add_edges_from((i, j) for i, j in zip(coo.row.tolist(), coo.col.tolist()) if i != j)
    t_build = best(lambda: nx.from_scipy_sparse_array(graph), r)
    t_nx = best(lambda: nx.greedy_color(G, strategy="largest_first"), r)
    theirs = nx.greedy_color(G, strategy="largest_first")
    print(f"networkx greedy_color (largest_first) {ms(t_nx)}   {max(theirs.values()) + 1} colours"
          f" (+{ms(t_build).strip()} to build its graph)")


def brusselator_jax(u):
    import jax.numpy as jnp
    U, V = u[0], u[1]

    def lap(w):
        return (jnp.roll(w, 1, axis=0) + jnp.roll(w, -1, axis=0) + jnp.roll(w, 1, axis=1)
                + jnp.roll(w, -1, axis=1) - 4 * w)
    uuv = U * U * V
    return jnp.stack([A + uuv - (B + 1) * U + ALPHA * lap(U), B * U - uuv + ALPHA * lap(V)])


def against_asdex(r):
    try:
        import asdex
        import jax
    except ImportError as e:
        print(f"\n# asdex: not importable ({e})")
        return
    print(f"\n# Against asdex {getattr(asdex, '__version__', '')} (JAX {jax.__version__}), "
          f"Brusselator 2-D")
    for side in (64, 128):
        u = np.random.default_rng(1).uniform(0.5, 1.5, (2, side, side))
        uj = jax.numpy.asarray(u)
        t_ours_detect = best(lambda: jacobian_sparsity(brusselator)(u), r)
        pattern = jacobian_sparsity(brusselator)(u)
        t_ours_colour = best(lambda: jacobian_coloring(pattern), r)
        coloring = jacobian_coloring(pattern)
        jac = sparse_jacobian(brusselator, sparsity=pattern, coloring=coloring)
        t_ours_jac = best(lambda: jac(u), r)
        jitted = ad.jit(sparse_jacobian(brusselator))
        t_ours_jit = best(lambda: jitted(u), r)
        t_their_detect = best(lambda: asdex.jacobian_sparsity(brusselator_jax, uj), r)
        t_their_coloring = best(lambda: asdex.jacobian_coloring(brusselator_jax, uj), r)
        colored = asdex.jacobian_coloring(brusselator_jax, uj)
        their_jac = jax.jit(asdex.jacobian_from_coloring(brusselator_jax, colored))
        jax.block_until_ready(their_jac(uj))
        t_their_jac = best(lambda: jax.block_until_ready(their_jac(uj)), r)
        ours = jac(u).toarray() if u.size <= 8192 else None
        if ours is not None:
            theirs = np.asarray(their_jac(uj).todense()).reshape(u.size, u.size)
            assert np.allclose(ours, theirs)
        print(f"{u.size} unknowns:")
        print(f"  detection       arrayad {ms(t_ours_detect)}   asdex {ms(t_their_detect)}")
        print(f"  detect+colour   arrayad {ms(t_ours_detect + t_ours_colour)}   "
              f"asdex {ms(t_their_coloring)}")
        print(f"  colours         arrayad {coloring[1].max() + 1:9d}      "
              f"asdex {colored.num_colors if hasattr(colored, 'num_colors') else colored}")
        print(f"  Jacobian        arrayad {ms(t_ours_jac)}   asdex (jit) {ms(t_their_jac)}")
        print(f"  Jacobian (jit)  arrayad {ms(t_ours_jit)}")


if __name__ == "__main__":
    main()
