"""Shared pieces of the asv benchmarks: backends, seeded data, the workload functions.

The workloads are those of ``benchmarks/compare.py`` (run there side by side with torch.func,
autograd and JAX); here they run on arrayad alone, once per installed backend.
"""
import numpy as np

import arrayad as ad

# Fixed list so that result files of different machines line up; a backend that is not installed
# is skipped in ``setup`` with NotImplementedError (asv's convention for "not applicable").
BACKENDS = ["numpy", "array_api_strict", "torch"]

# Set by tests/test_asv_benchmarks.py to run every benchmark once with small sizes in a few
# seconds; asv never changes it. Benchmarks read it in ``setup``/the call, not at import time.
SMOKE = False

SEED = 0


def big(n):
    """The size to use for a large workload (``n`` elements or calls); small in smoke mode."""
    return min(n, 1000) if SMOKE else n


def leak_calls(n):
    """Number of calls for a leak check; a handful in smoke mode."""
    return min(n, 20) if SMOKE else n


def get_backend(name):
    """The adapter of backend ``name``, or NotImplementedError (asv skips the parameter)."""
    try:
        b = ad.get_backend(name)
    except ImportError as e:
        raise NotImplementedError(f"backend {name} not installed: {e}") from e
    if name == "torch":
        import torch

        # OMP_NUM_THREADS=1 already does this when torch is first imported by the benchmark;
        # set it again in case something imported torch before the package __init__ ran.
        torch.set_num_threads(1)
    return b


def to_backend(name, a):
    """NumPy array -> raw array of backend ``name`` (same values, float64)."""
    if name == "numpy":
        return a
    return get_backend(name).xp.asarray(a)


# name -> (shape, scale); each array has its own seed (its position here), so that adding an
# array never changes the others and only what a benchmark uses is generated.
_SPECS = {
    "x16": ((16,), 1.0),
    "x_big": ((1_000_000,), 1.0),
    "mlp_x": ((64, 128), 1.0),
    "mlp_w1": ((128, 256), 1 / np.sqrt(128)),
    "mlp_w2": ((256, 10), 1 / np.sqrt(256)),
    "mlp_y": ((64, 10), 1.0),
    "jac_W": ((128, 128), 1 / np.sqrt(128)),
    "jac_b": ((128,), 1.0),
    "jac_x": ((128,), 1.0),
    "vj_X": ((64, 16), 1.0),
    "vmap_X": ((8, 16), 1.0),
}
_SEEDS = {name: i for i, name in enumerate(_SPECS)}


def data(backend, *names):
    """Seeded float64 arrays ``names`` on ``backend`` (a tuple, or one array for one name).

    ``x_big`` has 1,000,000 elements (1000 in smoke mode).
    """
    out = []
    for name in names:
        shape, scale = _SPECS[name]
        if name == "x_big":
            shape = (big(shape[0]),)
        a = np.random.default_rng([SEED, _SEEDS[name]]).standard_normal(shape) * scale
        assert a.dtype == np.float64
        out.append(to_backend(backend, a))
    return out[0] if len(out) == 1 else tuple(out)


# -- the workloads of benchmarks/compare.py ------------------------------------------------------
# ``ad.matmul`` rather than ``@``: with a raw array-api-strict array on the left, ``raw @ tracer``
# raises TypeError inside array_api_strict instead of returning NotImplemented, so Python never
# tries the tracer's ``__rmatmul__``. The function is the same on every backend.


def chain_vec(x):
    """The 13-op elementwise chain of compare.py."""
    s = ad.sin(x) * ad.cos(x) + ad.exp(-x * x)
    y = ad.tanh(s) * 2 - s / 3
    return ad.log(1 + y * y)


def chain(x):
    return ad.sum(chain_vec(x))


def mlp_loss(x, w1, w2, y):
    return ad.mean((ad.matmul(ad.tanh(ad.matmul(x, w1)), w2) - y) ** 2)


def loss1(w1, w2, x, y):
    """One example's loss: x (128,), y (10,)."""
    return ad.sum((ad.matmul(ad.tanh(ad.matmul(x, w1)), w2) - y) ** 2)


def make_layer(W, b):
    def layer(x):
        return ad.tanh(ad.matmul(W, x) + b)

    return layer
