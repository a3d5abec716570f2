"""NOTE [internal namespace]: the object the rules call other operations through.

A rule of one primitive needs operations of other modules (``sqrt``, ``where``, ``sum``,
``broadcast_to``...), whose own rules call back. Importing the package (``import arrayad as ad``)
for that made every module of ``arrayad/_ops`` part of one import cycle with ``arrayad/__init__``.
Instead, this module imports nothing of arrayad's but the dtypes (a leaf too): it holds ``ops``,
an attribute bag that each op module fills as it declares its public functions
(``Declarations.export`` in ``_rules``), and rules look names up on it when they run, by which
time every module has been imported (``arrayad/_ops/__init__`` imports them all).

``ops`` holds every public function of the namespace, the glue the core calls
(``_getitem``, ``_setitem``, ``_inplace``, ``_repr``...), the dtypes, and the sub-namespaces
``ops.linalg``, ``ops.fft`` and ``ops.special``. ``arrayad/__init__`` only re-exports what is
declared here.
"""

from typing import TYPE_CHECKING, Any

from .._dtypes import (bool, complex64, complex128, float32, float64, int8, int16,
                       int32, int64, uint8, uint16, uint32, uint64)


class Namespace:
    """An attribute bag of operations, filled on declaration."""

    def __init__(self, name):
        self.__name__ = name

    def __repr__(self):
        return f"<arrayad internal namespace {self.__name__}>"

    if TYPE_CHECKING:   # (its operations are set at import time: a type checker sees none)
        def __getattr__(self, name: str) -> Any: ...


ops = Namespace("arrayad")
ops.linalg = Namespace("arrayad.linalg")
ops.fft = Namespace("arrayad.fft")
ops.special = Namespace("arrayad.special")
for _dt in (bool, complex64, complex128, float32, float64, int8, int16, int32, int64, uint8,
            uint16, uint32, uint64):
    setattr(ops, _dt.name, _dt)
del _dt
