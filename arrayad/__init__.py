"""arrayad: torch.func's transforms and torch's autograd on any array API backend.

``import arrayad as ad`` is an array API namespace (the 2025.12 standard, with ``linalg`` and
``fft``) whose functions accept eager ``ad.Tensor``s, raw backend arrays and the tracers of the
transforms in ``arrayad.func``; ``arrayad.autograd`` holds the eager tape's API and ``Function``.
"""

from ._core import _core  # noqa: F401  (raises a clear error when the extension is not built)
from ._core._core import Tensor, bind, is_grad_enabled  # noqa: F401

from ._dtypes import (bool, complex64, complex128, float32, float64, int8, int16,  # noqa: F401
                      int32, int64, uint8, uint16, uint32, uint64)
from .backends import (Generator, available_backends, backend, get_backend,  # noqa: F401
                       set_backend)

__version__ = "0.2.0"
__array_api_version__ = "2025.12"

e = 2.718281828459045
pi = 3.141592653589793
inf = float("inf")
nan = float("nan")
newaxis = None

from ._ops.creation import *  # noqa: F403, E402
from ._ops.dtype_functions import *  # noqa: F403, E402
from ._ops.elementwise import *  # noqa: F403, E402
from ._ops.extras import *  # noqa: F403, E402
from ._ops.indexing import *  # noqa: F403, E402
from ._ops.linalg import *  # noqa: F403, E402
from ._ops.manipulation import *  # noqa: F403, E402
from ._ops.reductions import *  # noqa: F403, E402
from ._ops.searching import *  # noqa: F403, E402
from ._ops.einsum import *  # noqa: F403, E402

from ._ops._api import stop_gradient  # noqa: E402,F401
from ._info import __array_namespace_info__  # noqa: E402,F401

from . import linalg, fft  # noqa: E402,F401
from . import special  # noqa: E402,F401  (scipy.special's functions, NOTE in _ops/special)
from . import _host  # noqa: E402,F401  (hands the core what it calls in the package)

from . import autograd, debug, func, testing  # noqa: E402,F401
from . import tree_util  # noqa: E402,F401  (jax.tree_util's names)
from . import config  # noqa: E402,F401  (settings: jax.config's counterpart)
from . import _custom  # noqa: E402  (JAX's decorators, public in arrayad.func: see there)
for _n in _custom.__all__:
    setattr(func, _n, getattr(_custom, _n))
del _n
from .autograd import enable_grad, no_grad, set_grad_enabled  # noqa: E402,F401
from ._jit import jit  # noqa: E402,F401
from ._control import torch_cond as cond  # noqa: E402,F401  (torch.cond; JAX's: ad.func)

