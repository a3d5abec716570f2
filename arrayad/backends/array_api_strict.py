"""array-api-strict: the standard and nothing else; the test suite runs on it to prove that no
NumPy-only call leaked into arrayad's rules."""
import array_api_strict

from . import Backend


class StrictBackend(Backend):
    name = "array_api_strict"
    xp = array_api_strict
    array_types = (array_api_strict._array_object.Array,)

    def to_numpy(self, x):
        import numpy as np
        # array-api-strict refuses __array__ on purpose; go through DLPack-free buffer copy.
        return np.asarray(x._array) if hasattr(x, "_array") else np.from_dlpack(x)


def make():
    return StrictBackend()
