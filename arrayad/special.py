"""scipy.special's functions that SciPy dispatches through ``xp.special`` (with
``SCIPY_ARRAY_API=1``), differentiable and batchable on every backend: primitives with VJP/JVP/
batching rules and composites, all in ``arrayad/_ops/special.py`` (whose declarations make the
list: a function declared there is public here)."""
from ._ops import special as _special

__all__ = list(_special.__all__)
globals().update({_n: getattr(_special, _n) for _n in __all__})
