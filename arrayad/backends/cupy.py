"""CuPy arrays on an NVIDIA GPU, through array-api-compat's CuPy namespace."""
import cupy
from array_api_compat import cupy as compat_cupy

from . import NumpyLikeBackend


class CupyBackend(NumpyLikeBackend):
    name = "cupy"
    xp = compat_cupy
    array_types = (cupy.ndarray,)

    def new_generator(self, seed):
        return cupy.random.default_rng(seed)

    def get_rng_state(self):
        # cupy's Generator has no portable state object: keep a copy of the whole generator
        import copy
        return copy.deepcopy(self.generator())

    def set_rng_state(self, state):
        import copy
        from .._core import _core
        _core.thread_state().rngs[self.name] = copy.deepcopy(state)

    def normal(self, shape, dtype, device):
        return self.generator().standard_normal(tuple(shape), dtype=dtype or cupy.float64)

    def uniform(self, shape, dtype, device):
        return self.generator().random(tuple(shape), dtype=dtype or cupy.float64)

    def integers(self, low, high, shape, dtype, device):
        return self.generator().integers(low, high, tuple(shape), dtype=dtype or cupy.int64)

    def index_add(self, base, key, v):
        import cupyx
        out = base.copy()
        cupyx.scatter_add(out, key, v)   # repeated indices accumulate
        return out

    def to_numpy(self, x):
        return cupy.asnumpy(x)


def make():
    return CupyBackend()
