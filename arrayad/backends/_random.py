"""Random streams: the seed of each thread's generators, ``Generator`` objects of their own, and
the state of a thread's generators (NOTE [thread state] in ``_core/_base.pyx``)."""

import itertools
import threading

from .._core import _core
from ._registry import _LOADED, get_backend
from ._placement import backend_of_device, default_backend


# -- random seeds, per thread
_thread_numbers = itertools.count(1)


def _thread_seed():
    """The seed of this thread's next generator: the last ``manual_seed`` in this thread or, before
    any, 0 in the main thread and in every other thread a stream of its own (drawn from seed 0 and
    the thread's number: threads that never seed must not all draw the same numbers)."""
    st = _core.thread_state()
    if st.seed is None:
        if threading.current_thread() is threading.main_thread():
            st.seed = 0
        else:
            import numpy as np
            ss = np.random.SeedSequence(0, spawn_key=(next(_thread_numbers),))
            st.seed = int(ss.generate_state(1, np.uint32)[0])
    return st.seed


class Generator:
    """A random number generator of its own (torch's ``torch.Generator``).

    ``randn(..., generator=g)`` (also ``rand``, ``randint``) draws from ``g`` instead of the
    thread's generator, so that one stream of numbers is independent of every other draw and
    of ``manual_seed``. It draws for one backend: arrays of another backend refuse it.

    Parameters
    ----------
    device : device, optional
        A backend's device object (``x.device``) picks that backend; None or a name such as
        'cpu': the default backend.
    backend : str, optional
        The backend's name, instead of ``device``.
    seed : int
        The starting seed (torch's default seed of a new generator, so that runs repeat).

    Raises
    ------
    TypeError
        If ``device`` is not a device of a supported backend.
    ValueError
        If ``backend`` is not a backend arrayad knows (ImportError: its library is missing).

    Examples
    --------
    >>> g = ad.Generator(seed=1)
    >>> a = ad.randn(3, generator=g)
    >>> b = ad.randn(3, generator=g.manual_seed(1))   # reseeded: the same numbers
    >>> ad.all(a == b)
    tensor(True)
    """

    def __init__(self, device=None, *, backend=None, seed=67280421310721):
        if backend is not None:
            self.backend = get_backend(backend)
        else:
            self.backend = backend_of_device(device) or default_backend()
        self.device = device
        self.manual_seed(seed)

    def manual_seed(self, seed):
        """Restart the generator from ``seed``; returns the generator."""
        self._seed = int(seed)
        self._impl = self.backend.new_generator(self._seed)
        return self

    def initial_seed(self):
        """The seed the generator was last started from."""
        return self._seed

    def get_state(self):
        """The generator's state, for ``set_state``."""
        return self.backend.generator_state(self._impl)

    def set_state(self, state):
        """Restore a state from ``get_state``; returns the generator."""
        self._impl = self.backend.set_generator_state(self._impl, state)
        return self

    def __repr__(self):
        return f"<arrayad.Generator backend={self.backend.name} seed={self._seed}>"

    # copy.copy, copy.deepcopy and pickle all go through these two (as torch.Generator's copies
    # do): an independent generator in the same state, which draws what the original would draw
    # next. The backend travels by name (the adapter is one object per process, which
    # ``randn(generator=...)`` checks by identity) and the stream by the backend's state object
    # (a copy of it: the two generators never share one).
    def __getstate__(self):
        state = dict(self.__dict__)
        state["backend"] = self.backend.name
        state["_impl"] = self.get_state()
        return state

    def __setstate__(self, state):
        state = dict(state)
        backend = get_backend(state.pop("backend"))
        stream = state.pop("_impl")
        self.__dict__.update(state)
        self.backend = backend
        self._impl = backend.set_generator_state(backend.new_generator(self._seed), stream)


def manual_seed(seed):
    """Seed the random generators of every backend (loaded now or later), in this thread.

    The generators are remade from ``seed`` on their next use, so that what follows repeats;
    other threads keep theirs, and ``arrayad.Generator`` objects are not affected.

    Parameters
    ----------
    seed : int
        The seed.

    Returns
    -------
    None

    Raises
    ------
    TypeError
        If ``seed`` is not an int (a float, a bool).

    Examples
    --------
    >>> ad.manual_seed(1); a = ad.rand(2)
    >>> ad.manual_seed(1); b = ad.rand(2)
    >>> ad.all(a == b)
    tensor(True)
    """
    if isinstance(seed, bool) or not isinstance(seed, int) and not hasattr(seed, "__index__"):
        raise TypeError(f"manual_seed(seed): seed must be an int, got {type(seed).__name__}")
    st = _core.thread_state()
    st.seed = int(seed)
    st.rngs.clear()   # (remade from the seed on first use, also for backends loaded later)


def get_rng_state():
    """This thread's random state, for every backend loaded (``set_rng_state`` restores it).

    Returns
    -------
    dict
        Backend name -> that backend's generator state (for NumPy-based generators, the bit
        generator's state dict), to pass to ``set_rng_state``.

    Raises
    ------
    Exception
        Nothing of its own: it takes no argument.

    Examples
    --------
    >>> state = ad.get_rng_state()
    >>> a = ad.rand(2)
    >>> ad.set_rng_state(state)
    >>> ad.all(ad.rand(2) == a)   # the same numbers again
    tensor(True)
    """
    return {name: b.get_rng_state() for name, b in _LOADED.items()}


def set_rng_state(state):
    """Restore this thread's random state from ``get_rng_state()``.

    Parameters
    ----------
    state : dict
        Backend name -> generator state, as ``get_rng_state`` returns it.

    Returns
    -------
    None

    Raises
    ------
    ValueError
        If a key is not a backend name.
    ImportError
        If a backend of ``state`` cannot be imported here.
    AttributeError
        If ``state`` is not a dict.

    Examples
    --------
    >>> state = ad.get_rng_state()
    >>> a = ad.randn(3)
    >>> ad.set_rng_state(state)
    >>> ad.all(ad.randn(3) == a)
    tensor(True)
    """
    for name, s in state.items():
        get_backend(name).set_rng_state(s)


def same_rng_state(a, b):
    """Whether two random states (dicts of backend states: dicts, tuples, arrays) are equal."""
    try:   # (NumPy's states are dicts of ints: compared in C)
        same = a == b
    except (TypeError, ValueError, RuntimeError):   # (arrays inside: compared below)
        same = None
    if type(same) is bool:
        return same
    if isinstance(a, dict):
        return (isinstance(b, dict) and a.keys() == b.keys()
                and all(same_rng_state(a[k], b[k]) for k in a))
    if isinstance(a, (tuple, list)):
        return (isinstance(b, (tuple, list)) and len(a) == len(b)
                and all(same_rng_state(x, y) for x, y in zip(a, b)))
    if hasattr(a, "shape") and hasattr(a, "dtype") and not isinstance(a, (int, float)):
        import numpy as np
        return (hasattr(b, "shape") and hasattr(b, "dtype")
                and np.array_equal(np.asarray(a), np.asarray(b)))
    return a == b


class RandomReplay:
    """The random state a call of a user's function started from, so that its later runs draw
    what its first drew. NOTE [random state of a rule]: custom_vjp, custom_jvp, checkpoint and
    ``autograd.Function`` may run the user's functions more than once for one call: the first
    run (``impl``, or under ``vmap`` the batching rule's run of the outputs, which keeps no
    residuals or ctx), then ``fwd`` again for custom_vjp's residuals, the block again for
    checkpoint's backward pass, the jvp rule, ``forward`` again for a ctx at another level.
    ``run(fn)`` runs the first of them as it is and keeps the state it started from if it drew;
    every later one starts from that state, which is then put back as it was, so the stream
    after the call is the one without the reruns. vmap's 'same' and 'different' draw from one
    state in one order, so the lanes get their numbers again too (as torch's checkpoint
    replays its recomputation's draws)."""

    __slots__ = ("state",)

    def __init__(self):
        self.state = None

    def run(self, fn):
        state = self.state
        if state is None:   # (the first run, or no run drew so far)
            state = get_rng_state()
            out = fn()
            if not same_rng_state(get_rng_state(), state):
                self.state = state
            return out
        now = get_rng_state()
        set_rng_state(state)
        try:
            return fn()
        finally:
            set_rng_state(now)
