"""arrayad's settings, as ``jax.config``: one registry, a ``with`` block per setting (for the
calling thread or asyncio task) and ``update`` for the whole process.

>>> with ad.config.jit_vector_math(False):     # this thread or task, within the block
...     pass
>>> ad.config.update("jit_fuse_after", 1.0)    # the whole process, from now on
>>> ad.config.read("jit_fuse_after")
1.0
>>> ad.config.update("jit_fuse_after", 0.25)

Each setting's default comes from its environment variable (``ARRAYAD_JIT_FUSE=1``...), read
once, when arrayad is imported; a value there that is not one the setting takes stops the import
with an error naming the variable.

NOTE [configuration]
--------------------
One registry, ``SETTINGS`` (name -> ``Setting``), and two owners of a value, as JAX has them: the
process's (``update``; at import, the environment variable's or the built-in default) and the
calling context's (``with config.<name>(value):``). The overrides of all settings live in ONE
``ContextVar``, ``_overrides``: a mapping of the overridden names to their values, or no value
at all while nothing is overridden (NOTE [thread state] in ``_core/_base.pyx``: a variable kept
at a value makes every NumPy call walk the context's map). So a ``with`` block belongs to its
thread or asyncio task: a new thread starts with the process values, a task with the overrides
of the context it was created in, and a block held across an ``await`` changes nothing another
task computes. The exceptions are the settings an owner module binds to its own state
(``Setting._bind``): ``default_backend`` is ``backends.backend``/``set_backend``'s choice (also
per context), ``debug_nans`` is ``debug.detect_nans``'s hook, which is per thread, and
``reuse_freed_memory`` is the C library allocator's, which is the process's (NOTE [freed memory]
in ``backends/numpy.py``).

Reading a setting costs a ``ContextVar.get`` and a dict lookup (about 0.1 us), so the readers
read once per unit of work, never per operation: per program staged, per scan call, per jit call.

What a change reaches. The ``compile`` settings decide how ``jit`` lowers a program (tiles,
vector math, which compilers and when): their values are part of every jitted function's cache
key (``_compile_key``), so a call under other values finds or stages the program made for those,
and a program lowered later (NOTE [when to compile] in ``_jit/fusion.py``) is lowered under the
values it was staged with (``_using``). The others act on what runs after the change: the next
scan call (``scan_*``), the next pass (``jit_check``), the next kernel written
(``cache_dir``), the next operation (``debug_nans``), the next array made
(``default_backend``).
"""

import contextlib
import contextvars
import math
import os

__all__ = ["Setting", "read", "update", "debug_nans", "default_backend", "jit_tiles",
           "jit_vector_math", "jit_fuse", "jit_fuse_after", "jit_torch_compile_after",
           "jit_check", "scan_compiled", "scan_numba", "cache_dir", "reuse_freed_memory"]


# -- what a setting takes: (description, check of a Python value, parse of the environment's text)

def _check_bool(v):
    if isinstance(v, bool) or type(v).__name__ == "bool_":   # (NumPy's bool too)
        return bool(v)
    raise TypeError


def _parse_bool(text):
    t = text.strip().lower()
    if t in ("1", "true", "yes", "on"):
        return True
    if t in ("0", "false", "no", "off"):
        return False
    raise ValueError


def _check_seconds(v):
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise TypeError
    v = float(v)
    if not (v >= 0 and math.isfinite(v)):
        raise ValueError
    return v


def _check_path(v):
    if v is None:
        return None
    if not isinstance(v, (str, os.PathLike)):
        raise TypeError
    v = os.fspath(v)
    if not v:
        raise ValueError
    return v


def _check_name(v):
    if not isinstance(v, str):
        raise TypeError
    if not v:
        raise ValueError
    return v


_KINDS = {
    "bool": ("True or False", "bool", _check_bool, _parse_bool),
    "seconds": ("a number of seconds, 0 or more", "float", _check_seconds,
                lambda t: _check_seconds(float(t))),
    "path": ("a directory (str or path-like), or None for the default", "str or None",
             _check_path, _check_path),
    "backend": ("a backend's name ('numpy', 'torch', 'array_api_strict', ...)", "str",
                _check_name, _check_name),
}

_ENV_SPELLING = {"bool": "1 or 0", "seconds": "a number of seconds (0.25)",
                 "path": "a directory", "backend": "a backend's name"}


# -- the two owners of a value (NOTE [configuration])

class _Overrides(dict):
    """The overridden settings of a context (name -> value), and the compile key they make
    (computed on first use, again after an ``update`` of a compile setting)."""
    __slots__ = ("key", "version")


_overrides = contextvars.ContextVar("arrayad.config", default=None)
_values = {}          # name -> the process's value
SETTINGS = {}         # name -> Setting, in the order of the reference page
_COMPILE = []         # the names of the compile settings, in order
_process_key = [(), 0]   # (the compile key of the process values, their version)


class Setting:
    """One setting of ``arrayad.config``: ``with config.<name>(value):`` sets it within the block
    (for the calling thread or asyncio task), ``config.update(name, value)`` for the process,
    ``.value`` (or ``config.read(name)``) says what it is here and now.

    Parameters
    ----------
    name, kind, default, env, doc, example
        Declared once, in ``arrayad/config.py``'s registry.

    Raises
    ------
    TypeError, ValueError
        When called with a value the setting does not take.

    Examples
    --------
    >>> ad.config.jit_tiles
    <arrayad.config.jit_tiles: True>
    >>> with ad.config.jit_tiles(False):
    ...     ad.config.jit_tiles.value
    False
    """

    def __init__(self, name, kind, default, env, doc, example, compile=False, scope=None):
        self.name, self.kind, self.env, self.compile = name, kind, env, compile
        self.builtin_default = default
        self._hooks = None   # (read, update, override) of the module that owns the state
        what, typ, _, _ = _KINDS[kind]
        scope = scope or ("within the block, for the calling thread or asyncio task (restored "
                          "on leaving it, also on an exception)")
        self.__doc__ = (
            f"{doc}\n\n"
            f"``with arrayad.config.{name}(value):`` sets it {scope}; "
            f"``arrayad.config.update({name!r}, value)`` sets it for the process. "
            f"Its default: ``{default!r}``, or the environment variable ``{env}`` (read once, at "
            f"import).\n\n"
            f"Parameters\n----------\nvalue : {typ}\n    {what[0].upper() + what[1:]}.\n\n"
            f"Returns\n-------\ncontext manager\n    For a ``with`` block.\n\n"
            f"Raises\n------\nTypeError, ValueError\n    If ``value`` is not {what}.\n\n"
            f"Examples\n--------\n{example}\n")

    @property
    def value(self):
        """The setting's value in the calling thread or task."""
        return read(self.name)

    def __call__(self, value):
        value = self._checked(value)
        if self._hooks is not None:
            return self._hooks[2](value)
        return _using({self.name: value})

    def __repr__(self):
        return f"<arrayad.config.{self.name}: {self.value!r}>"

    def _checked(self, value, where=None):
        what, _, check, _ = _KINDS[self.kind]
        try:
            return check(value)
        except (TypeError, ValueError) as e:
            raise type(e)(f"{where or f'arrayad.config.{self.name}'}: takes {what}, got "
                          f"{value!r}") from None

    def _bind(self, read, update, override):
        """Let the module that owns this setting's state read, update and override it
        (``default_backend``, ``debug_nans``: NOTE [configuration])."""
        self._hooks = (read, update, override)


def _declare(name, kind, default, env, doc, example, **kw):
    s = Setting(name, kind, default, env, doc, example, **kw)
    text = os.environ.get(env, "")
    value = default
    if text.strip():
        try:
            value = _KINDS[kind][3](text)
        except (TypeError, ValueError):
            raise ValueError(
                f"arrayad.config: the environment variable {env}={text!r} is not "
                f"{_KINDS[kind][0]}: set it to {_ENV_SPELLING[kind]}, or unset it "
                f"(it is the default of arrayad.config.{name})") from None
    SETTINGS[name] = s
    _values[name] = value
    if s.compile:
        _COMPILE.append(name)
    return s


# -- lookup by name (JAX's names where arrayad has the setting)

# JAX's names with no arrayad setting: why (an error says it)
_JAX_ONLY = {
    "jax_enable_x64": "arrayad computes in the dtype of its inputs (float64 NumPy arrays stay "
                      "float64): there is nothing to enable",
    "jax_platform_name": "arrays stay on their own backend and device; "
                         "arrayad.config.default_backend chooses where new arrays are made",
    "jax_platforms": "arrays stay on their own backend and device; "
                     "arrayad.config.default_backend chooses where new arrays are made",
    "jax_disable_jit": "call the function itself instead of arrayad.jit(f) (jit(f) computes "
                       "what f computes)",
}
_JAX_ALIASES = {"jax_debug_infs": "debug_nans"}   # (debug_nans checks both)


def _setting(name, fn):
    s = SETTINGS.get(name) if isinstance(name, str) else None
    if s is not None:
        return s
    if isinstance(name, str):
        alias = _JAX_ALIASES.get(name, name[4:] if name.startswith("jax_") else None)
        if alias in SETTINGS:
            return SETTINGS[alias]
        if name in _JAX_ONLY:
            raise ValueError(f"arrayad.config.{fn}: {name!r} is JAX's and has no arrayad "
                             f"setting: {_JAX_ONLY[name]}.")
    raise ValueError(f"arrayad.config.{fn}: unknown setting {name!r}; the settings are "
                     f"{', '.join(SETTINGS)} (JAX's names of them, jax_debug_nans, are taken "
                     f"too).")


def read(name):
    """The value of setting ``name`` in the calling thread or asyncio task: a ``with`` block's
    if one is open here, else the process's (``update``, or the default).

    Parameters
    ----------
    name : str
        A setting's name (``"jit_fuse"``...), or JAX's name of it (``"jax_debug_nans"``).

    Returns
    -------
    object
        The value (bool, float, str or None, by setting).

    Raises
    ------
    ValueError
        If ``name`` is no setting; the error lists them.

    Examples
    --------
    >>> ad.config.read("jit_tiles")
    True
    >>> with ad.config.jit_tiles(False):
    ...     ad.config.read("jit_tiles")
    False
    """
    s = _setting(name, "read")
    if s._hooks is not None:
        return s._hooks[0]()
    o = _overrides.get()
    if o is not None:
        v = o.get(s.name, _values)
        if v is not _values:
            return v
    return _values[s.name]


def update(name, value):
    """Set setting ``name`` for the whole process: every thread and asyncio task sees ``value``
    from now on, except within its own ``with arrayad.config.<name>(...)`` block (the block's
    value wins there until it ends). JAX's ``jax.config.update``; its names of arrayad's
    settings are taken (``"jax_debug_nans"``). ``debug_nans`` is the exception: its check is a
    hook of the calling thread's operations, so ``update`` turns it on or off for the calling
    thread.

    Parameters
    ----------
    name : str
        A setting's name (``"jit_fuse"``...), or JAX's name of it.
    value : object
        A value the setting takes (True/False, seconds, a directory...).

    Returns
    -------
    None

    Raises
    ------
    ValueError
        If ``name`` is no setting (the error lists them), or ``value`` is out of its range.
    TypeError
        If ``value`` is not of the setting's type.

    Examples
    --------
    >>> ad.config.update("scan_numba", False)
    >>> ad.config.read("scan_numba")
    False
    >>> ad.config.update("scan_numba", True)
    """
    s = _setting(name, "update")
    value = s._checked(value, f"arrayad.config.update({name!r}, ...)")
    if s._hooks is not None:
        s._hooks[1](value)
        return
    _values[s.name] = value
    if s.compile:
        _process_key[:] = [tuple(_values[n] for n in _COMPILE), _process_key[1] + 1]


@contextlib.contextmanager
def _using(changes):
    """Within the block, the settings of ``changes`` (name -> checked value) take those values
    in the calling context (NOTE [configuration]): what every ``with config.<name>(value):``
    is, and what a jit program's later lowering runs under (``_compile_values``)."""
    o = _overrides.get()
    new = _Overrides(o or ())
    new.update(changes)
    new.version = -1
    token = _overrides.set(new)
    try:
        yield
    finally:
        _overrides.reset(token)


def _compile_key():
    """The values of the compile settings here and now, as a tuple (part of every jit cache
    key: NOTE [configuration])."""
    o = _overrides.get()
    if o is None:
        return _process_key[0]
    if o.version != _process_key[1]:
        o.key = tuple(o.get(n, _values[n]) for n in _COMPILE)
        o.version = _process_key[1]
    return o.key


def _compile_values():
    """{name: value} of the compile settings here and now (for ``_using``, later)."""
    return dict(zip(_COMPILE, _compile_key()))


# ---------------------------------------------------------------------------------------------
# The registry (the order of the reference page)

debug_nans = _declare(
    "debug_nans", "bool", False, "ARRAYAD_DEBUG_NANS",
    "Whether every operation is checked for NaNs and infinities: the first one that makes "
    "either from finite inputs, forward or backward, raises ``FloatingPointError`` naming the "
    "primitive, the transforms open and the user's line (``arrayad.debug.detect_nans`` is the "
    "same switch; JAX's ``jax_debug_nans``, torch's anomaly detection). A program runs slower "
    "while it is on (a jitted function evaluates its program one operation at a time). It is a "
    "hook of the thread's operations: a block is per thread (an asyncio task on the thread "
    "shares it while it awaits), ``update`` sets it for the calling thread, and "
    "``ARRAYAD_DEBUG_NANS=1`` turns it on in the thread that imports arrayad.",
    ">>> with ad.config.debug_nans(True):\n"
    "...     ad.log(ad.asarray([1.0, 0.0]))\n"
    "Traceback (most recent call last):\n"
    "...\n"
    "FloatingPointError: arrayad.debug.detect_nans: log made a NaN or an infinity ...",
    scope="within the block, for the calling thread")

default_backend = _declare(
    "default_backend", "backend", "numpy", "ARRAYAD_BACKEND",
    "The backend of new arrays made outside transforms (``ad.tensor``, ``ad.zeros``, "
    "``ad.randn``...): the setting of ``arrayad.backend(name)`` and ``arrayad.set_backend``, "
    "which choose it per thread and task as the ``with`` block does; ``update`` sets the "
    "process's default, which every thread and task without its own choice follows. Inside a "
    "transform new arrays follow its inputs.",
    ">>> with ad.config.default_backend('array_api_strict'):\n"
    "...     ad.zeros(2)\n"
    "tensor([0., 0.], backend=array_api_strict)")

jit_tiles = _declare(
    "jit_tiles", "bool", True, "ARRAYAD_JIT_TILES",
    "Whether ``jit`` replays NumPy programs tiled: groups of elementwise operations over tiles "
    "of their arrays, by NumPy's calls or by the tile machine (``docs/jit.md``, \"The tiled "
    "replay\"). Off, each operation is one NumPy call on the whole arrays (the unfused "
    "replay). Part of the jit cache key.",
    ">>> f = ad.jit(lambda x: x * 2 + 1)\n"
    ">>> with ad.config.jit_tiles(False):\n"
    "...     f.explain(np.ones(4096)).replay\n"
    "'unfused'",
    compile=True)

jit_vector_math = _declare(
    "jit_vector_math", "bool", True, "ARRAYAD_JIT_VECTOR_MATH",
    "Whether ``jit``'s tiled replay computes float64 ``sin``, ``cos``, ``exp``, ``log``, "
    "``tanh``, ``expm1`` and ``log1p`` with the GNU C library's vector functions (``libmvec``, "
    "Linux on x86-64, where found): faster, within 4 ulp of the exact result and a few ulp "
    "from NumPy's (``docs/jit.md``, \"Numerics\", gives the measured bound). Off, the tiled "
    "replay calls NumPy's functions and runs no tile machine, and a jitted NumPy program gives "
    "the un-jitted function's results bit for bit. Part of the jit cache key.",
    ">>> f = ad.jit(lambda x: ad.exp(ad.sin(x)) * 2)\n"
    ">>> x = np.linspace(0.0, 10.0, 5000)\n"
    ">>> with ad.config.jit_vector_math(False):\n"
    "...     bool((f(x) == np.exp(np.sin(x)) * 2).all())\n"
    "True",
    compile=True)

jit_fuse = _declare(
    "jit_fuse", "bool", False, "ARRAYAD_JIT_FUSE",
    "Whether ``jit`` compiles elementwise groups with a backend's compiler (torch.compile for "
    "torch tensors, numba loops in Dask blocks) once a program's replays have taken the "
    "compiler's budget (``jit_fuse_after``, ``jit_torch_compile_after``). Off by default: "
    "compilers take seconds. Part of the jit cache key.",
    ">>> with ad.config.jit_fuse(True):\n"
    "...     ad.config.read('jit_fuse')\n"
    "True",
    compile=True)

jit_fuse_after = _declare(
    "jit_fuse_after", "seconds", 0.25, "ARRAYAD_JIT_FUSE_AFTER",
    "With ``jit_fuse`` on, the seconds a program's replays take in all before a compiler (other "
    "than torch.compile) lowers it; 0: when it is staged. Part of the jit cache key.",
    ">>> with ad.config.jit_fuse_after(0):\n"
    "...     ad.config.read('jit_fuse_after')\n"
    "0.0",
    compile=True)

jit_torch_compile_after = _declare(
    "jit_torch_compile_after", "seconds", 20.0, "ARRAYAD_JIT_TORCH_COMPILE_AFTER",
    "With ``jit_fuse`` on, the seconds a torch program's replays take in all before "
    "torch.compile lowers it (its compilation takes seconds to tens of seconds); 0: when it is "
    "staged. Part of the jit cache key.",
    ">>> ad.config.read('jit_torch_compile_after')\n"
    "20.0",
    compile=True)

jit_check = _declare(
    "jit_check", "bool", False, "ARRAYAD_JIT_CHECK",
    "Whether ``jit`` checks each program after every pass (every variable defined before it is "
    "read, outputs defined, shapes consistent): for debugging arrayad's passes; it costs a walk "
    "of the program per pass when a program is staged.",
    ">>> with ad.config.jit_check(True):\n"
    "...     ad.jit(lambda x: x + 1)(np.ones(3))\n"
    "array([2., 2., 2.])")

scan_compiled = _declare(
    "scan_compiled", "bool", True, "ARRAYAD_SCAN_COMPILED",
    "Whether a ``scan`` (and ``fori_loop``) on NumPy arrays may run its loop in a compiled tier "
    "(the register machine, then numba) instead of replaying its body step by step, where a "
    "cost model says it pays (``docs/control_flow.md``). Read at every scan call.",
    ">>> body = lambda c, x: (c + x, c)\n"
    ">>> with ad.config.scan_compiled(False):\n"
    "...     ad.func.scan(body, np.zeros(2), np.ones((3, 2)))[0]\n"
    "array([3., 3.])")

scan_numba = _declare(
    "scan_numba", "bool", True, "ARRAYAD_SCAN_NUMBA",
    "Whether a compiled ``scan`` may go on to numba (with ``scan_compiled`` on and numba "
    "installed); off, its loop stays in the register machine or the replay. Read at every scan "
    "call.",
    ">>> with ad.config.scan_numba(False):\n"
    "...     ad.config.read('scan_numba')\n"
    "False")

cache_dir = _declare(
    "cache_dir", "path", None, "ARRAYAD_CACHE_DIR",
    "The directory of the on-disk cache of compiled kernels (numba's, under ``numba/``); None: "
    "``$XDG_CACHE_HOME/arrayad``, else ``~/.cache/arrayad``. Read when a kernel is compiled.",
    ">>> with ad.config.cache_dir('kernels'):\n"
    "...     ad.config.read('cache_dir')\n"
    "'kernels'")

reuse_freed_memory = _declare(
    "reuse_freed_memory", "bool", True, "ARRAYAD_REUSE_FREED_MEMORY",
    "Whether the C library's allocator keeps freed memory for the next arrays (glibc, on "
    "Linux): NumPy arrays of up to 32 MiB come from its heap, and up to 64 MiB freed there "
    "stays with the process, instead of pages of their own for each array of 128 KiB or more, "
    "handed back when it is freed, whose page faults at the first write cost more than the "
    "arithmetic on them (eager GradBench gmm and log-sum-exp: 2-4x slower). The price: a "
    "process keeps up to 64 MiB it freed. Process-wide, as the allocator is: set it with "
    "``update``, or ``ARRAYAD_REUSE_FREED_MEMORY=0``; arrayad leaves the allocator alone where "
    "``MALLOC_MMAP_THRESHOLD_`` or ``MALLOC_TRIM_THRESHOLD_`` is set (``docs/performance.md``, "
    "\"Freed memory\").",
    ">>> ad.config.read('reuse_freed_memory') in (True, False)\n"
    "True",
    scope="for the process only (a ``with`` block is refused: the allocator is the process's)")

_process_key[0] = tuple(_values[n] for n in _COMPILE)
