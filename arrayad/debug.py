"""Debugging inside transforms and ``jit``: ``print`` and ``callback`` that run with the values
of every call, and ``detect_nans``, which names the first operation that makes a NaN or an
infinity from finite inputs.

``print`` and ``callback`` are one primitive (NOTE [debug callback]); ``detect_nans`` is a hook
on every operation on backend arrays (NOTE [nan detection]).
"""

import contextlib
import os
import sys
import threading

from . import config as _config
from ._core import _core, _small_arith
from ._core._core import Array, Interpreter, bind, shape_of
from ._jit import replay as _replay
from ._jit.ir import is_array as _is_array
from ._ops._rules import FACTS, Facts, primitive
from ._pytree import tree_flatten, tree_unflatten

__all__ = ["print", "callback", "detect_nans"]

_print = print   # (the builtin: this module's ``print`` shadows it)

# NOTE [debug callback]
# ---------------------
# ``callback(fn, *args)`` binds one primitive, ``debug_callback``, on the array leaves of
# ``args``; its implementation calls ``fn`` with the values it is given (backend arrays) and
# returns a 0-d array that nothing reads. So it runs wherever the values are computed: eagerly
# at once; under ``grad``/``jvp`` with the primal values (it is not differentiable: its result
# is a constant); under ``vmap`` once per batch element, in order (its batching rule binds it per
# lane); under ``jit`` as an instruction of the program that the passes never drop, merge or
# fold (the ``side_effects`` fact), so every call of the jitted function runs it with that call's
# values, in program order. The Python values among ``args`` (numbers, strings, None) are
# parameters, handed to ``fn`` as they are.


def _callback_impl(xp, *arrays, fn, spec, statics):
    it = iter(arrays)
    leaves = [next(it) if x is _ARRAY else x for x in statics]
    args, kwargs = tree_unflatten(leaves, spec)
    fn(*args, **kwargs)
    return xp.asarray(False)


def _callback_batch(args, dims, **params):
    size = next(shape_of(a)[d] for a, d in zip(args, dims) if d is not None)
    out = None
    for i in range(size):
        lane = [a if d is None else a[(slice(None),) * d + (i,)] for a, d in zip(args, dims)]
        out = bind(callback_p, *lane, **params)
    return out, None


class _ArrayLeaf:
    def __repr__(self):
        return "<array>"


_ARRAY = _ArrayLeaf()   # (where an array leaf goes among the static ones)

callback_p = primitive("debug_callback", _callback_impl, differentiable=False)
callback_p.batch = _callback_batch
FACTS["debug_callback"] = Facts(side_effects=True)


def callback(callback, *args, ordered=True, **kwargs):
    """Call ``callback(*args, **kwargs)`` with the values of ``args`` every time they are
    computed: eagerly, under every transform, and at every call of a ``jit``-ted function (not
    only while it is traced). JAX's ``jax.debug.callback``.

    Parameters
    ----------
    callback : callable
        Called with the arguments' values as backend arrays (NumPy arrays for NumPy inputs,
        torch tensors for torch inputs...); its return value is ignored.
    *args, **kwargs : pytrees of arrays and Python values
        What ``callback`` receives; arrays may be values of any transform.
    ordered : bool
        Accepted for JAX's spelling; calls always run in the order of the program.

    Returns
    -------
    None

    Raises
    ------
    Exception
        Whatever ``callback`` raises, when it runs (at tracing under ``jit`` too).

    Notes
    -----
    Under ``grad``, ``vjp``, ``jvp`` and the Jacobians the callback sees the primal values
    (it is not differentiated); under ``vmap`` it runs once per batch element, in order; under
    ``jit`` at every call, in program order.

    Examples
    --------
    >>> seen = []
    >>> f = ad.jit(lambda x: (ad.debug.callback(seen.append, x * 2), x + 1)[1])
    >>> _ = f(np.array(1.0)); _ = f(np.array(5.0))
    >>> [float(v) for v in seen]
    [2.0, 10.0]
    """
    leaves, spec = tree_flatten((args, kwargs))
    arrays = [x for x in leaves if _is_array(x)]
    statics = tuple(_ARRAY if _is_array(x) else x for x in leaves)
    if not arrays:   # (nothing to trace: a Python call now)
        callback(*args, **kwargs)
        return None
    bind(callback_p, *arrays, fn=callback, spec=spec, statics=statics)
    return None


def print(fmt, *args, ordered=True, **kwargs):   # (jax.debug.print's name)
    """Print ``fmt.format(*args, **kwargs)`` with the arguments' values every time they are
    computed: eagerly, under every transform, and at every call of a ``jit``-ted function.
    JAX's ``jax.debug.print``.

    Parameters
    ----------
    fmt : str
        A ``str.format`` string (``"x = {}"``, ``"{x:.3f}"`` for 0-d values).
    *args, **kwargs : arrays, pytrees of them, or Python values
        The values to format, as backend arrays.
    ordered : bool
        Accepted for JAX's spelling; prints always come in the order of the program.

    Returns
    -------
    None

    Raises
    ------
    IndexError, KeyError
        When ``fmt`` names an argument that is not given (``str.format``'s errors).

    Examples
    --------
    >>> f = ad.jit(lambda x: ad.debug.print("x = {}", x) or x * 2)
    >>> _ = f(np.array([1., 2.]))
    x = [1. 2.]
    >>> _ = f(np.array([3., 4.]))
    x = [3. 4.]
    """
    callback(lambda *a, **k: _print(fmt.format(*a, **k)), *args, **kwargs)


# NOTE [nan detection]
# --------------------
# ``with detect_nans():`` installs a hook on every operation on backend arrays (the core's
# raw-level hook, ``ThreadState.staging``: NOTE [staging everything]; the checkpoint policy's
# keeper uses it too). Transforms compute their values, forward and backward, by binding
# primitives on the values one level down, so every operation of the eager code, of each
# transform's rules and of a traced program reaches the hook with backend arrays. The hook runs
# the operation and, where a floating result holds a NaN or an infinity that no floating input
# held, raises ``FloatingPointError`` naming the primitive, the transforms open, whether it ran
# in a derivative rule (a backward or forward pass) and the line of the user's code. A jitted
# function called inside the block evaluates its program one primitive at a time through the
# hook instead of replaying it. Outside the block nothing is installed: nothing is checked and
# nothing is paid.

_PKG_DIR = os.path.dirname(os.path.abspath(__file__))
_RULE_DIRS = (os.path.join(_PKG_DIR, "_ops") + os.sep, os.path.join(_PKG_DIR, "_core") + os.sep)
_TRANSFORM_FILES = (os.path.join(_PKG_DIR, "func.py"), os.path.join(_PKG_DIR, "autograd"),
                    os.path.join(_PKG_DIR, "_custom.py"), os.path.join(_PKG_DIR, "_control.py"))


def _non_finite(x):
    """Whether the backend array ``x`` is floating and holds a NaN or an infinity; None for an
    array whose values are not at hand (a lazy Dask array)."""
    dtype = getattr(x, "dtype", None)
    kind = getattr(dtype, "kind", None)
    if kind is None:   # (torch, array-api-strict: their dtypes have no kind)
        name = str(dtype)
        kind = "f" if "float" in name else "c" if "complex" in name else "o"
    if kind not in "fc":
        return False
    if type(x).__module__.startswith("dask"):
        return None
    xp = _core.backend_of(x).xp
    return not bool(xp.all(xp.isfinite(x)))


def _raw_leaves(v):
    if isinstance(v, tuple):
        return [r for x in v for r in _raw_leaves(x)]
    if isinstance(v, Array):
        return [_core.raw_value(v)]
    return [v] if _is_array(v) else []


def _ours(f):
    """Whether frame ``f`` runs arrayad's code: a module of the package, a function it generated
    (the public functions, a jit program's replay), not the user's."""
    name = f.f_globals.get("__name__")
    if name is not None:
        return name == "arrayad" or name.startswith("arrayad.")
    return f.f_code.co_filename.startswith(("<arrayad", "<string>"))


def _user_line(f):
    """file:line of the innermost frame from ``f`` outwards that runs the user's code, or None."""
    while f is not None and _ours(f):
        f = f.f_back
    return None if f is None else f"{f.f_code.co_filename}:{f.f_lineno}"


def _where():
    """(the user's file:line, the derivative rule's name or None): the innermost frame outside
    arrayad and, if the operation ran in a rule that a transform called (a backward or forward
    pass), that rule."""
    f = sys._getframe(2)
    rule = None
    while f is not None and _ours(f):
        fn = os.path.abspath(f.f_code.co_filename)
        if fn.startswith(_RULE_DIRS):
            rule = f
        elif fn.startswith(_TRANSFORM_FILES) and rule is not None:
            # (a rule called by a transform's code, not by the user's: a derivative's pass)
            return _user_line(f), (f"{rule.f_code.co_name} at arrayad/"
                                   f"{os.path.relpath(rule.f_code.co_filename, _PKG_DIR)}:"
                                   f"{rule.f_lineno}")
        f = f.f_back
    return _user_line(f), None


class _NanWatch(Interpreter):
    """The raw-level hook of NOTE [nan detection]."""

    name = "detect_nans"
    counted = False   # (installed, and counted in ``_replay.EVALUATING``)

    def __init__(self, below):
        self.below = below
        self._enclosing_staging = below   # (what a jit tracing inside restores: NOTE [staging
        # everything])

    def __del__(self):
        if self.counted:   # (a thread that ended with the check on: NOTE [debug_nans setting])
            _count(self, False)

    def process(self, prim, args, params):
        st = _core.thread_state()
        st.staging = self.below
        try:
            out = bind(prim, *args, **params)
        finally:
            st.staging = self
        if prim is not callback_p:
            self.check(prim.name, args, out)
        return out

    def check(self, name, args, out):
        """Raise if ``out`` holds a NaN or an infinity that no argument held."""
        if (any(_non_finite(x) for x in _raw_leaves(out))
                and not any(_non_finite(x) for a in args for x in _raw_leaves(a))):
            raise self.error(name)

    def error(self, name):
        user, rule = _where()
        open_ = [i.name for i in _core.interpreters()]
        inside = f" inside {' of '.join(reversed(open_))}" if open_ else ""
        pass_ = f", in a derivative rule ({rule})" if rule else ""
        at = f", at {user}" if user else ""
        return FloatingPointError(
            f"arrayad.debug.detect_nans: {name} made a NaN or an infinity from finite "
            f"inputs{inside}{pass_}{at}. Check the values reaching it (arrayad.debug.print "
            f"shows them at every call, also under jit), or guard the operation with "
            f"arrayad.where.")


def detect_nans(enabled=True):
    """Within the block, the first operation that makes a NaN or an infinity from finite inputs
    raises ``FloatingPointError`` naming the primitive, the transforms open, whether it ran in a
    derivative rule, and the line of the user's code (JAX's ``jax_debug_nans``, torch's
    anomaly detection). For the calling thread; off by default, and nothing is checked or paid
    outside the block. The same switch as ``arrayad.config.debug_nans``: ``with
    detect_nans(flag):`` is ``with arrayad.config.debug_nans(flag):``, and
    ``arrayad.config.update("debug_nans", True)`` turns it on for the thread until turned off.

    Parameters
    ----------
    enabled : bool
        False turns the check off within the block (where an enclosing block or ``update``
        turned it on), so ``with detect_nans(flag):`` follows a flag.

    Returns
    -------
    context manager
        For a ``with`` block; it yields nothing.

    Raises
    ------
    FloatingPointError
        From the operation that made the first NaN or infinity (a NaN carried in from an input
        is not reported again).
    TypeError
        If ``enabled`` is not True or False.

    Notes
    -----
    Every operation is checked, so a program runs slower inside the block: a ``jit``-ted
    function evaluates its program one primitive at a time.

    Examples
    --------
    >>> with ad.debug.detect_nans():
    ...     ad.func.grad(lambda x: ad.sum(ad.sqrt(x)))(np.array([1.0, 0.0]))
    Traceback (most recent call last):
    ...
    FloatingPointError: arrayad.debug.detect_nans: divide made a NaN or an infinity ...
    """
    return _nans_block(_config.debug_nans._checked(enabled, "arrayad.debug.detect_nans"))


# NOTE [debug_nans setting]
# -------------------------
# ``arrayad.config.debug_nans`` is this module's switch (``Setting._bind``): per thread, since
# the hook is the thread's (``ThreadState.staging``). Each thread has a value of its own
# (``update``; False in a new thread, ``ARRAYAD_DEBUG_NANS`` in the one that imported arrayad)
# and its open blocks, the innermost of which wins; the hook is installed exactly while the
# value in force is True. ``_replay.EVALUATING`` counts the hooks installed in all threads (a
# jitted function evaluates its program one primitive at a time while any is); a hook still
# installed when its thread ends (``update`` with no ``update`` back) is uncounted as the
# thread's state is freed.

class _NansState(threading.local):
    def __init__(self):
        self.default = False   # (``update``'s value for this thread)
        self.blocks = []       # (the values of the open blocks, innermost last)


_nans = _NansState()


def _count(watch, installed):
    watch.counted = installed
    _replay.EVALUATING[0] += 1 if installed else -1
    _small_arith.set_watch(_watch_rule_arithmetic if _replay.EVALUATING[0] else None)


def _install(st):
    st.staging = watch = _NanWatch(st.staging)
    _count(watch, True)
    return watch


def _uninstall(st, watch, restore):
    st.staging = restore
    _count(watch, False)


def _nans_read():
    return _nans.blocks[-1] if _nans.blocks else _nans.default


def _nans_update(on):
    _nans.default = on
    if not _nans.blocks:   # (an open block's value stays in force until it ends)
        st = _core.thread_state()
        watch = st.staging
        if on and not isinstance(watch, _NanWatch):
            _install(st)
        elif not on and isinstance(watch, _NanWatch):
            _uninstall(st, watch, watch.below)


@contextlib.contextmanager
def _nans_block(on):
    st = _core.thread_state()
    before = st.staging
    watched = isinstance(before, _NanWatch)
    if on and not watched:
        mine = _install(st)
    elif not on and watched:
        _uninstall(st, before, before.below)
    _nans.blocks.append(on)
    try:
        yield
    finally:
        _nans.blocks.pop()
        st = _core.thread_state()
        if on and not watched:
            _uninstall(st, mine, before)
        elif not on and watched:
            st.staging = before
            _count(before, True)
        if not _nans.blocks:   # (an ``update`` inside the block takes effect now)
            _nans_update(_nans.default)


def _watch_rule_arithmetic(name, args, out):
    """What the derivative rules' arithmetic on backend arrays (NOTE [small arithmetic]: no
    ``bind``) reports; checked for the threads inside a ``detect_nans`` block."""
    watch = _core.thread_state().staging
    if isinstance(watch, _NanWatch) and not any(isinstance(a, Array) for a in args):
        watch.check(name, args, out)


_config.debug_nans._bind(_nans_read, _nans_update, _nans_block)
if _config._values["debug_nans"]:   # (ARRAYAD_DEBUG_NANS=1: the importing thread)
    _nans_update(True)
