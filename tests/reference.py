"""Independent references for the tests: the benchmark chain in NumPy and central differences."""
import numpy as np

import arrayad as ad


def chain_vec(x):
    """The benchmarks' elementwise chain, in arrayad."""
    s = ad.sin(x) * ad.cos(x) + ad.exp(-x * x)
    y = ad.tanh(s) * 2 - s / 3
    return ad.log(1 + y * y)


def chain_vec_np(x):
    """The same chain in plain NumPy (the reference)."""
    s = np.sin(x) * np.cos(x) + np.exp(-x * x)
    y = np.tanh(s) * 2 - s / 3
    return np.log(1 + y * y)


def chain(x):
    """The 13-operation scalar chain of the benchmarks, in arrayad."""
    return ad.sum(chain_vec(x))


def chain_np(x):
    """The same chain in plain NumPy (the reference)."""
    return np.sum(chain_vec_np(x))


def fd_grad(f, x, eps=1e-6):
    """Central-difference gradient of a scalar NumPy function."""
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[i] = eps
        g[i] = (f(x + e) - f(x - e)) / (2 * eps)
    return g


def fd_jac(f, x, eps=1e-6):
    """Central-difference Jacobian, shaped ``out.shape + x.shape``."""
    out = np.asarray(f(x))
    jac = np.zeros(out.shape + x.shape)
    for i in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[i] = eps
        jac[(...,) + i] = (np.asarray(f(x + e)) - np.asarray(f(x - e))) / (2 * eps)
    return jac


def flat_outputs(out):
    """A function's output (one array or a tuple of them) as a list of NumPy arrays."""
    from conftest import to_numpy
    outs = out if isinstance(out, tuple) else (out,)
    return [to_numpy(o) for o in outs]


def numeric(fn, backend, args):
    """``fn`` evaluated on NumPy ``args`` converted to ``backend``, outputs back in NumPy."""
    return flat_outputs(fn(*[backend(a) for a in args]))


def check_vjp_jvp_by_differences(fn, backend, args, rng, *, eps=1e-6, rtol=1e-6, atol=1e-7):
    """JVP along random directions against central differences of ``fn``; VJP through the
    identity <ct, J d> == <J^T ct, d> with the differences standing for J d."""
    from arrayad.func import jvp, vjp
    from conftest import to_numpy
    outs = numeric(fn, backend, args)
    cts = [rng.standard_normal(o.shape) for o in outs]
    dirs = [rng.standard_normal(a.shape) for a in args]
    plus = numeric(fn, backend, [a + eps * d for a, d in zip(args, dirs)])
    minus = numeric(fn, backend, [a - eps * d for a, d in zip(args, dirs)])
    fd = [(p - m) / (2 * eps) for p, m in zip(plus, minus)]

    _, tangent_out = jvp(fn, tuple(backend(a) for a in args), tuple(backend(d) for d in dirs))
    for t, f in zip(flat_outputs(tangent_out), fd):
        np.testing.assert_allclose(t, f, rtol=rtol, atol=atol)

    out, pullback = vjp(fn, *[backend(a) for a in args])
    ct = tuple(backend(c) for c in cts) if isinstance(out, tuple) else backend(cts[0])
    grads = [to_numpy(g) for g in pullback(ct)]
    lhs = sum(float(np.sum(c * f)) for c, f in zip(cts, fd))
    rhs = sum(float(np.sum(g * d)) for g, d in zip(grads, dirs))
    assert np.isclose(lhs, rhs, rtol=rtol, atol=atol), (lhs, rhs)


class PythonControlFlow:
    """cond, switch, while_loop and map as plain Python with lax's signatures: a reference that
    traces nothing (and JAX's reverse mode through a while loop, which lax refuses)."""

    @staticmethod
    def cond(p, t, f, *ops):
        return t(*ops) if p else f(*ops)

    @staticmethod
    def switch(i, branches, *ops):
        return branches[min(max(int(i), 0), len(branches) - 1)](*ops)

    @staticmethod
    def while_loop(c, b, v):
        while c(v):
            v = b(v)
        return v

    @staticmethod
    def map(f, xs):
        return np.stack([f(x) for x in xs])
