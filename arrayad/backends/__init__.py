"""Backend adapters: one small module per array library, holding only what differs between them.

Everything the standard covers goes through the library's array-api-compat namespace (``xp``);
an adapter adds random numbers, conversion to NumPy for printing, and the few functions a
backend lacks. Adapters are imported lazily, the first time an array of their type is seen or
their name is asked for, so arrayad imports no array library but NumPy at start-up.

The default backend (for ``ad.tensor``, ``ad.randn``...) is NumPy unless ``ARRAYAD_BACKEND``,
``set_backend(name)`` or a ``with backend(name):`` block says otherwise. The default backend
belongs to the calling context (a thread, an asyncio task: a ``contextvars`` variable) and the
random generators to the calling thread (NOTE [thread state] in ``_core/_base.pyx``):
``set_backend`` in one task and ``manual_seed`` in one thread change nothing in another.

This package's own modules, each importing only the ones before it: ``_registry`` (the backends
by name, ``get_backend``), ``_dtypes`` (NumPy inputs refused, the backend of a dtype object),
``_placement`` (the default backend, the backend of an array or a device), ``_random`` (the
random streams), ``_adapter`` (the adapters' base classes); this module gathers their names.
"""

__all__ = ["Backend", "NumpyLikeBackend", "get_backend", "set_backend", "backend",
           "available_backends", "default_backend", "backend_of", "manual_seed", "get_rng_state",
           "set_rng_state"]

from ._registry import (_ADAPTERS, _ALIASES, available_backends, _canonical,
                        get_backend, _LOADED, _module_root)
from ._dtypes import (backend_of_dtype, _DTYPE_FIX, refuse_numpy_kind)
from ._placement import (backend, backend_of, backend_of_device, can_stand_for,
                         _default, default_backend, _process_default, _reset, _resolve,
                         set_backend)
from ._random import (Generator, get_rng_state, manual_seed, set_rng_state,
                      _thread_numbers, _thread_seed)
from ._adapter import (adv_contiguous, Backend, _basic_getitem, _drop_none, _full_basic,
                       generic_getitem, _has_negative_step, _is_basic_key,
                       _is_index_array, _numel, NumpyLikeBackend, set_complex_part,
                       _sole_mask)
