"""Independent references for the tests: the benchmark chain in NumPy and central differences."""
import numpy as np

import arrayad as ad


def chain(x):
    """The 13-operation scalar chain of the benchmarks, in arrayad."""
    s = ad.sin(x) * ad.cos(x) + ad.exp(-x * x)
    y = ad.tanh(s) * 2 - s / 3
    return ad.sum(ad.log(1 + y * y))


def chain_np(x):
    """The same chain in plain NumPy (the reference)."""
    s = np.sin(x) * np.cos(x) + np.exp(-x * x)
    y = np.tanh(s) * 2 - s / 3
    return np.sum(np.log(1 + y * y))


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
