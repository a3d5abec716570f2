"""A scan's loop without the replay: a register machine, then numba, or numba's array statements
(NOTE [compiled scan]).

NOTE [compiled scan]
--------------------
The replay of a scan (``_scan_impl`` in ``arrayad/_control.py``) makes one NumPy call per
instruction of the body per step: on the small arrays of an ODE integrator or a recurrence
(4 elements), each call costs a microsecond of dispatch for nanoseconds of arithmetic. On NumPy,
a scan whose body is made of instructions that ``scan_lower.py`` knows, where a cost model says
it pays (``REPLAY_US``: small values, or many steps), runs its whole loop in one of two tiers
instead, the way a JIT compiler runs a function in its interpreter first and compiles it once
it has shown itself hot:

1. the machine (``scan_machine.py``, NOTE [scan machine]): the body's scalar statements as the
   instructions of a register machine in Cython, in doubles (float64, float32 rounded, bool,
   integers checked to stay exact).
   Nothing to compile, no start-up: the first call of ``jit(grad)`` of the RK4 benchmark
   (10,000 steps) takes a few tens of milliseconds.
2. numba (``scan_numba.py``): the whole loop as one ``numba.njit`` function, about ten times
   faster than the machine, but its compilation costs about a second the first time (0.2 s in a
   later process, from numba's on-disk cache). It is compiled once the machine has spent
   ``NUMBA_AFTER`` seconds in that scan, so that a program never loses more than about the
   compile time to the tiering; for a body the machine does not take at once, from
   ``NUMBA_MIN_WORK`` steps x instructions.

A body whose values are too large to be scalars (more than ``scan_lower.MAX_ELEMENTS``
elements: an integrator's state of a thousand values) goes to a third tier instead, once the
replay model says it has cost ``ARRAY_AFTER`` seconds: numba's loop of array statements, one
NumPy expression per instruction (``scan_vector.py``, NOTE [array scan]).

The VJP of a scan is a scan of the body's pullback, so the backward pass runs the same way.
Where neither tier takes a body, or numba fails to compile it (no error of a compiler reaches
the user), the replay runs. ``arrayad.config.scan_numba`` off leaves numba out,
``arrayad.config.scan_compiled`` off both tiers; both are read at every scan call.
"""

import time

import numpy as np

from .. import config as _config
from . import lower_numba
from .lower_numba import _size
from .scan_lower import MAX_ELEMENTS, Unsupported, scalar_statements
from .scan_machine import ScanMachine
from .scan_numba import CompiledScan, CompiledSweep
from .scan_vector import ArrayScan

# no scalar tier below this many steps; the array tier from one step (a body of large values
# runs its fused loops once: GradBench's ode at s=1)
MIN_STEPS = 2
ARRAY_MIN_STEPS = 1
# The machine's cost model, in microseconds, measured on bodies of 4 to 200 elements per value:
# the replay spends about REPLAY_US per instruction and step (NumPy's dispatch), the machine
# about MACHINE_US per scalar statement and step (a libm function costs more than arithmetic)
# and LOWER_US per scalar statement to lower the body. A scan runs in the machine where that
# is cheaper for one call: where the values are small, or the steps many (a 4-element body from
# about 10 steps on, a 64-element one from about 150; a 200-element body with sin in it gains
# nothing over NumPy's own loops).
REPLAY_US, MACHINE_US, LOWER_US = 1.2, 0.008, 2.0
# numba at once for a body the machine does not take, from this many (about half a second of
# replay: compiling takes a second the first time)
NUMBA_MIN_WORK = 500_000
# seconds spent in the machine by one scan before numba compiles it
NUMBA_AFTER = 1.0
# seconds of replay (by the cost model) of one scan the scalar tiers do not take before numba
# compiles it as array statements (NOTE [array scan] in scan_vector.py)
ARRAY_AFTER = 0.25

# a snapshot budget's reverse pass runs its whole schedule in one numba function (NOTE [compiled
# sweep] in arrayad/_loop_reverse.py) where the schedule run from Python would call the tiers at
# least this many times: each call costs 30-100 us, so about a second of calls, what the compiled
# sweep's first call costs from numba's on-disk cache (compiling it the first time takes 5 to 10
# seconds: the RK4 benchmark's three loops and schedule)
SWEEP_MIN_CALLS = 20_000

runs = {"machine": 0, "numba": 0, "array": 0, "sweep": 0}   # loops run by each tier (tests)
refused = None   # why the last body a tier saw is not taken (for the tests)


class _Tiers:
    """The tiers of one scan (one body, direction and ``save``)."""

    def __init__(self, body, nc, ncarry, reverse, save):
        global refused
        self.spec = (body, nc, ncarry, reverse, save)
        self.machine, self.numba, self.numba_tried, self.spent = None, None, False, 0.0
        try:
            self.machine = ScanMachine(*self.spec)
        except Unsupported as exc:
            refused = f"machine: {exc}"

    def __call__(self, args, length):
        """The outputs of the scan, or None: the replay runs."""
        global refused
        numba = _config.read("scan_numba")   # (once per scan call)
        if numba and not self.numba_tried and self.numba_due(length):
            self.numba_tried = True
            if lower_numba.available():
                try:
                    self.numba = CompiledScan(*self.spec)
                except Unsupported as exc:
                    refused = f"numba: {exc}"
        if numba and self.numba is not None:
            try:
                out = self.numba(args, length)
                runs["numba"] += 1
                return out
            except Exception as exc:   # (numba's compiler failed: the next tier down runs)
                self.numba, refused = None, f"numba: {exc}"
        if self.machine is None:
            return None
        t0 = time.perf_counter()
        out = self.machine(args, length)
        self.spent += time.perf_counter() - t0
        if out is None:   # (an integer out of the machine's range: the replay from now on)
            self.machine, refused = None, "machine: an integer out of its exact range"
            return None
        runs["machine"] += 1
        return out

    def numba_due(self, length):
        if self.machine is None:
            return length * len(self.spec[0].prog.eqns) >= NUMBA_MIN_WORK
        return self.spent >= NUMBA_AFTER


class _ArrayTier:
    """The array tier of one scan (NOTE [array scan] in ``scan_vector.py``): the replay runs
    (``None``) until the replay model says it has cost ``ARRAY_AFTER`` seconds, or from the
    second call where numba's cache has the loop already (loading it costs milliseconds: the
    first call stays the replay's), then numba's loop, or the replay for good where it cannot
    be had."""

    def __init__(self, spec, eqns):
        self.spec, self.eqns, self.spent, self.scan = spec, eqns, 0.0, None
        self.calls, self.lowered = 0, None

    def __call__(self, args, length):
        global refused
        if not _config.read("scan_numba"):
            return None
        if self.scan is None:
            self.spent += length * self.eqns * REPLAY_US * 1e-6
            self.calls += 1
            due = self.spent >= ARRAY_AFTER
            if not due and self.calls == 2 and self.lowered is None:
                due = lower_numba.available() and self.on_disk()
            if not due or not lower_numba.available():
                return None
            try:
                self.scan = self.lowered or ArrayScan(*self.spec)
            except Unsupported as exc:
                refused, self.scan = f"array tier: {exc}", False
        if not self.scan:
            return None
        try:
            out = self.scan(args, length)
        except Exception as exc:   # (numba's compiler failed: the replay from now on)
            refused, self.scan = f"array tier: {exc}", False
            return None
        runs["array"] += 1
        return out

    def on_disk(self):
        """Whether numba's on-disk cache has this scan's loop (asked once: the body is lowered
        to know its source, and kept)."""
        global refused
        try:
            self.lowered = ArrayScan(*self.spec)
        except Unsupported as exc:
            refused, self.lowered, self.scan = f"array tier: {exc}", False, False
            return False
        return lower_numba.on_disk(self.lowered.source)


def compiled_scan(body, args, length, reverse, nc, ncarry, save):
    """The tiers of this scan (cached on ``body``, a ``_Body``: its program's shapes and dtypes
    are fixed), or None: the replay runs."""
    if length < min(MIN_STEPS, ARRAY_MIN_STEPS) or body.prog.backend.name != "numpy" \
            or not _config.read("scan_compiled"):
        return None
    for a in args:
        if not isinstance(a, (np.ndarray, np.generic)):
            return None
    key = (reverse, save, nc)
    cache = body.compiled
    if length < MIN_STEPS:   # (the array tier only, for a body of values too large for scalars)
        tiers = cache.get(key)
        if tiers is None and _large(body.prog):
            tiers = cache[key] = _ArrayTier((body, nc, ncarry, reverse, save),
                                            len(body.prog.eqns))
        return tiers if isinstance(tiers, _ArrayTier) else None
    if key not in cache:
        statements = scalar_statements(body.prog)
        eqns = len(body.prog.eqns)
        worth = LOWER_US * statements + length * MACHINE_US * statements \
            < length * REPLAY_US * eqns
        spec = (body, nc, ncarry, reverse, save)
        if worth or length * eqns >= NUMBA_MIN_WORK:
            cache[key] = _Tiers(*spec)
        else:   # (values too large to be scalars: numba's array statements, once hot)
            cache[key] = _ArrayTier(spec, eqns)
    return cache[key]


def _large(prog):
    """Whether a value of ``prog`` has more elements than the scalar tiers take."""
    vals = list(prog.in_vars) + [v for e in prog.eqns for v in e.outs]
    return any(_size(getattr(v, "shape", ())) > MAX_ELEMENTS for v in vals)


class _Sweep:
    """The compiled sweep of one ``loop_vjp`` (its body and pullback), or None once it cannot
    be had (the schedule then runs from Python)."""

    def __init__(self, spec):
        self.spec, self.sweep = spec, None

    def __call__(self, *args):
        global refused
        if self.sweep is None:
            try:
                self.sweep = CompiledSweep(*self.spec)
                out = self.sweep(*args)
            except Unsupported as exc:
                refused, self.sweep = f"sweep: {exc}", False
                return None
            except Exception as exc:   # (numba's compiler failed)
                refused, self.sweep = f"sweep: {exc}", False
                return None
        elif not self.sweep:
            return None
        else:
            out = self.sweep(*args)
        runs["sweep"] += 1
        return out


def compiled_sweep(body, back, nbk, nbc, ncarry, nback, arrays, calls):
    """The compiled sweep of this reverse pass (NOTE [compiled sweep]; cached on ``back``, a
    ``_Body``), or None: the schedule runs from Python, calling the tiers ``calls`` times."""
    if calls < SWEEP_MIN_CALLS or body.prog.backend.name != "numpy" \
            or not _config.read("scan_compiled") or not _config.read("scan_numba") \
            or not lower_numba.available():
        return None
    if not all(isinstance(a, (np.ndarray, np.generic)) for a in arrays):
        return None
    key = ("sweep", nbk, nbc, ncarry)
    cache = back.compiled
    if key not in cache:
        cache[key] = _Sweep((body, back, nbk, nbc, ncarry, nback))
    return cache[key]
