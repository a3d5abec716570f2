"""NumPy, the default backend (through array-api-compat's NumPy namespace)."""
import numpy as np
from array_api_compat import numpy as compat_numpy

from . import Backend


class NumpyBackend(Backend):
    name = "numpy"
    xp = compat_numpy
    array_types = (np.ndarray,)
    # NumPy returns scalars (np.float64...) for 0-d results; arrayad keeps 0-d arrays.
    scalar_types = tuple({t for t in np.sctypeDict.values()
                          if issubclass(t, (np.number, np.bool_))})

    def fix_scalar(self, x):
        return np.asarray(x)

    def _from_numpy(self, a, dtype, device):
        return np.asarray(a, dtype=dtype)

    def index_add(self, base, key, v):
        out = base.copy()
        np.add.at(out, key, v)
        return out

    def to_numpy(self, x):
        return x

    def default_device(self):
        return "cpu"

    def device_of(self, x):
        return "cpu"


def make():
    return NumpyBackend()
