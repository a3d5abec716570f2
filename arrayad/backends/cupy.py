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

    # cupy's Generator has no portable state object: the state is a copy of the whole generator
    def generator_state(self, gen):
        import copy
        return copy.deepcopy(gen)

    def set_generator_state(self, gen, state):
        import copy
        return copy.deepcopy(state)

    def normal(self, gen, shape, dtype, device):
        return gen.standard_normal(tuple(shape), dtype=dtype or cupy.float64)

    def uniform(self, gen, shape, dtype, device):
        return gen.random(tuple(shape), dtype=dtype or cupy.float64)

    def integers(self, gen, low, high, shape, dtype, device):
        return gen.integers(low, high, tuple(shape), dtype=dtype or cupy.int64)

    def index_add(self, base, key, v):
        import cupyx
        out = base.copy()
        cupyx.scatter_add(out, key, v)   # repeated indices accumulate
        return out

    def all_finite(self, x):
        return None   # (bool() of a GPU value waits for the device: NOTE [strong zeros])

    def to_numpy(self, x):
        return cupy.asnumpy(x)


def make():
    return CupyBackend()
