"""The operations of arrayad: every primitive with its rules, the composites, and the glue the
core calls. Importing this package imports every op module, so that the internal namespace
``ops`` (NOTE [internal namespace] in ``_namespace``) is complete: ``from arrayad._ops import ops``
gives every public function (``ops.sin``, ``ops.linalg.svd``, ``ops.fft.rfft``...) and the
private glue (``ops._getitem``, ``ops._setitem``, ``ops._inplace``, ``ops._repr``...).
``arrayad/__init__`` re-exports from here.
"""

from ._namespace import ops  # noqa: F401
from . import (creation, dtype_functions, elementwise, extras, indexing, linalg,  # noqa: F401
               manipulation, reductions, searching, linalg_ext, fft, special, views, _api,
               _methods, einsum)
from ._rules import batch_fallback  # noqa: F401
