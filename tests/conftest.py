"""Shared fixtures: the backends every test runs on.

``backend`` is parametrized over NumPy and array-api-strict always, torch and Dask when they are
installed. ``to_backend(np_array)`` converts test data; ``to_numpy(x)`` converts results back.
"""
import importlib.util
import os

# SciPy's array API support (tests/test_func.py::test_array_api_consumer_code) must be switched
# on before SciPy is imported.
os.environ.setdefault("SCIPY_ARRAY_API", "1")

import numpy as np
import pytest

import arrayad as ad

BACKENDS = ["numpy", "array_api_strict"]
for _name in ("torch", "dask"):
    if importlib.util.find_spec(_name) is not None:
        BACKENDS.append(_name)
# On a machine with a GPU (tools/gpu_suite.py): CuPy joins the backends, and torch test data can
# be made on CUDA (ARRAYAD_TEST_TORCH_DEVICE=cuda).
if os.environ.get("ARRAYAD_TEST_CUPY") == "1":
    BACKENDS.append("cupy")
TORCH_DEVICE = os.environ.get("ARRAYAD_TEST_TORCH_DEVICE", "cpu")


class Backend:
    """Test-side view of one backend: convert NumPy data in and results out."""

    def __init__(self, name):
        self.name = name
        self.adapter = ad.get_backend(name)
        self.xp = self.adapter.xp

    def __repr__(self):
        return self.name

    def __call__(self, a, dtype=None):
        """NumPy data -> a raw array of this backend."""
        a = np.asarray(a, dtype=dtype)
        if self.name == "numpy":
            return a
        if self.name == "dask":
            import dask.array as da
            return da.from_array(a)
        if self.name == "torch" and TORCH_DEVICE != "cpu":
            return self.xp.asarray(a, device=TORCH_DEVICE)
        return self.xp.asarray(a)

    def tensor(self, a, requires_grad=False):
        t = ad.Tensor(self(a))
        if requires_grad:
            t.requires_grad_()
        return t


def to_numpy(x):
    """Any result (raw array of any backend, ad.Tensor, Python scalar) -> NumPy."""
    if isinstance(x, ad.Tensor):
        x = x.detach()._value
    if isinstance(x, (int, float, complex, bool, np.ndarray, np.generic)):
        return np.asarray(x)
    return np.asarray(ad.backends.backend_of(x).to_numpy(x))


def close_leaves(a, b, tol=1e-10):
    """``a`` (arrayad results: one or a tuple/list) equals ``b`` (NumPy/JAX/torch references,
    the same number) to ``tol``, relative and absolute."""
    a = [to_numpy(v) for v in (a if isinstance(a, (tuple, list)) else (a,))]
    b = [np.asarray(v) for v in (b if isinstance(b, (tuple, list)) else (b,))]
    assert len(a) == len(b)
    for u, v in zip(a, b):
        np.testing.assert_allclose(u, v, rtol=tol, atol=tol)


def no_dask_compute():
    """A context in which computing any Dask graph fails the test (gradients must stay lazy).
    A function: dask.config.set changes the configuration when it is made, not when entered."""
    import dask

    def raising_scheduler(*args, **kwargs):
        raise AssertionError("a dask graph was computed while a gradient graph was being built")
    return dask.config.set(scheduler=raising_scheduler)


@pytest.fixture(params=BACKENDS)
def backend(request):
    return Backend(request.param)


@pytest.fixture
def rng():
    return np.random.default_rng(0)
