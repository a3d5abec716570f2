#!/usr/bin/env python
"""An implicit layer as users write one: the fixed point z = tanh(W z + x) found by a
``while_loop`` that stops on a tolerance, its gradient by the implicit function theorem in a
``custom_vjp`` (the adjoint fixed point u = g + W^T ((1 - z^2) u), another ``while_loop``),
batched over inputs with ``vmap`` and compiled with ``jit``: ``jit(vmap(grad(loss)))``.

arrayad (``arrayad.jit``) against JAX (``jax.jit``, the same program with ``jax.lax.while_loop``
and ``jax.custom_vjp``), single-threaded, float64, on the same data; the gradients are compared
before timing. Prints microseconds per call (best of ``--repeat`` measurements) and the ratio.

Run: ``python benchmarks/implicit_solver.py [--n 16] [--batch 64] [--repeat 7]``.
"""

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"
os.environ.setdefault("JAX_ENABLE_X64", "1")
os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false "
                                   "intra_op_parallelism_threads=1")

import argparse  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

import arrayad as ad  # noqa: E402
from arrayad.func import custom_vjp, grad, vmap, while_loop  # noqa: E402

TOL = 1e-10


def layer_gradient(lib, W):
    """``jit(vmap(grad(loss)))`` of the fixed-point layer, written once for both libraries:
    ``lib`` names the array namespace, ``custom_vjp``, ``while_loop`` and the transforms."""
    xp = lib.xp

    def fixed_point(step, start):
        def cond(c):
            return c[1] > TOL

        def body(c):
            new = step(c[0])
            return new, xp.max(xp.abs(new - c[0]))
        return lib.while_loop(cond, body, (start, xp.asarray(1.0, dtype=start.dtype)))[0]

    @lib.custom_vjp
    def solve(x):
        return fixed_point(lambda z: xp.tanh(W @ z + x), xp.zeros_like(x))

    def solve_fwd(x):
        z = solve(x)
        return z, z

    def solve_bwd(z, g):
        s = 1 - z * z
        u = fixed_point(lambda u: g + W.T @ (s * u), g)
        return (s * u,)

    solve.defvjp(solve_fwd, solve_bwd)

    def loss(x):
        z = solve(x)
        return xp.sum(z * z)

    return lib.jit(lib.vmap(lib.grad(loss)))


class _Lib:
    def __init__(self, xp, custom_vjp, while_loop, jit, vmap, grad):
        self.xp, self.custom_vjp, self.while_loop = xp, custom_vjp, while_loop
        self.jit, self.vmap, self.grad = jit, vmap, grad


def arrayad_program(W):
    return layer_gradient(_Lib(ad, custom_vjp, while_loop, ad.jit, vmap, grad), W)


def jax_program(W):
    import jax
    return layer_gradient(_Lib(jax.numpy, jax.custom_vjp, jax.lax.while_loop, jax.jit,
                               jax.vmap, jax.grad), W)


def best(fn, repeat, number):
    fn()
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        for _ in range(number):
            fn()
        times.append((time.perf_counter() - t) / number)
    return min(times)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=16, help="size of the state z")
    ap.add_argument("--batch", type=int, default=64, help="inputs x per call (vmap)")
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    W = rng.standard_normal((args.n, args.n))
    W *= 0.5 / np.linalg.norm(W, 2)   # (a contraction: both fixed points converge)
    X = rng.standard_normal((args.batch, args.n))

    ours = arrayad_program(W)
    t0 = time.perf_counter()
    g_ours = np.asarray(ours(X))
    first_ours = time.perf_counter() - t0
    print(f"jit(vmap(grad)) of a fixed-point layer, n = {args.n}, batch {args.batch}")
    t_ours = best(lambda: ours(X), args.repeat, 20)
    print(f"arrayad.jit   {t_ours * 1e6:10.1f} us   (first call {first_ours * 1e3:.1f} ms)")
    try:
        import jax
    except ImportError:
        print("jax.jit       not installed")
        return
    theirs = jax_program(jax.numpy.asarray(W))
    t0 = time.perf_counter()
    g_theirs = np.asarray(jax.block_until_ready(theirs(X)))
    first_theirs = time.perf_counter() - t0
    np.testing.assert_allclose(g_ours, g_theirs, rtol=1e-8, atol=1e-10)
    t_theirs = best(lambda: jax.block_until_ready(theirs(X)), args.repeat, 20)
    print(f"jax.jit       {t_theirs * 1e6:10.1f} us   (first call {first_theirs * 1e3:.1f} ms)")
    print(f"arrayad.jit / jax.jit: {t_ours / t_theirs:.2f}x")


if __name__ == "__main__":
    main()
