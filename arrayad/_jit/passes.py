"""The passes of ``arrayad.jit``: each takes a program and returns a new one (NOTE [program IR]
in ``ir.py``); what they may assume of a primitive is declared with it (NOTE [primitive facts]
in ``arrayad/_ops/_rules.py``)."""

import collections
import contextlib

from .. import config as _config
from .._core import _core
from .._core._core import Array, bind
from .._ops._rules import facts
from .ir import Eqn, Lit, Var, check, value_key

try:
    import numpy as _np
    _ndarray = _np.ndarray
except ImportError:   # pragma: no cover
    _np = _ndarray = None

# ``check`` runs after every pass with ``arrayad.config.jit_check`` on (the tests turn it on; off
# in a normal call: it walks the program once more per pass).


def run_pass(fn, prog, *args):
    """``fn(prog, *args)``, checked (``config.jit_check``)."""
    out = fn(prog, *args)
    if out is not None and out is not prog and _config.read("jit_check"):
        check(out, f"the result of {fn.__name__}")
    return out


def optimize(prog, folded=None):
    """The program after the default passes; ``unoptimized`` holds the one before. ``folded``:
    values the trace computed for instructions of constants (NOTE [the trace's constants])."""
    if _config.read("jit_check"):
        check(prog, "the staged program")
    out = run_pass(fold, prog, folded)
    for p in (identities, cse, negations, dce):
        out = run_pass(p, out)
    if out is prog:
        out = prog.replace()
    out.unoptimized = prog
    return out


def _substitute(atom, sub):
    return sub.get(atom, atom) if isinstance(atom, Var) else atom


def _fresh(prog):
    """A number above every variable's of ``prog``."""
    return 1 + max([v.n for e in prog.eqns for v in e.outs] + [v.n for v in prog.in_vars]
                   + [v.n for v in prog.consts] + [0])


@contextlib.contextmanager
def not_staging():
    """``with not_staging():`` around operations on raw arrays that must be computed now, not
    staged into a jit tracing around them (NOTE [staging everything] in the core): the fold
    pass's constants (a body traced inside a jitted function is optimised while that function
    is traced: its folded constants must be arrays, not that jit's values), and the sparsity
    analysis's arrays of element numbers."""
    st = _core.thread_state()
    saved, st.staging = st.staging, None
    try:
        yield
    finally:
        st.staging = saved


# NOTE [the trace's constants]
# ----------------------------
# Tracing computes every instruction on the call's values (NOTE [staging] in ``arrayad/_jit``),
# those of the instructions that the fold pass computes again included: a table of constants
# made inside (``t[:, None] ** arange(m)`` of a least-squares fit, 16 MB at n=16,392) was computed
# twice on the first call, which took twice the eager call. So the staging interpreter keeps
# the value of each instruction whose arguments are literals, constants the program made or
# results of such instructions (raw values all, no side effect: what ``fold`` folds), and
# ``fold`` takes that value instead of binding again. The trace computed it with the same
# primitive, arguments and parameters, so the program is the one it would be otherwise. (The
# values live until the passes run instead of until the trace drops them: the fold pass held
# them all at once anyway.)


def fold(prog, folded=None):
    """Constant folding: an instruction whose inputs are all constants is computed now (or
    taken from ``folded``, Var -> the value the trace computed: NOTE [the trace's constants])."""
    consts = dict(prog.consts)
    captured = prog.captured   # (read at every call: never folded, NOTE [captured arrays])
    eqns = []
    for e in prog.eqns:
        if not facts(e.prim).side_effects and all(
                not isinstance(a, Var) or (a in consts and a not in captured) for a in e.ins):
            vals = [consts[a] if isinstance(a, Var) else a.value for a in e.ins]
            if not any(isinstance(v, Array) for v in vals):   # raw values only
                if folded and all(var in folded for var in e.outs):
                    outs = [folded[var] for var in e.outs]
                else:
                    with not_staging():
                        out = bind(e.prim, *vals, **e.params)
                    outs = out if e.prim.multiple_results else (out,)
                for var, o in zip(e.outs, outs):
                    consts[var] = o
                continue
        eqns.append(e)
    return drop_unused_consts(prog.replace(consts=consts, eqns=eqns))


def _is_identity(e):
    """Whether ``e`` hands back its (only) array input unchanged (its primitive's ``identity``
    fact, with the result of its input's type). (The program never writes into a value, so
    the input itself can stand for the result.)"""
    rule = facts(e.prim).identity
    if rule is None or len(e.outs) != 1 or not e.ins or not isinstance(e.ins[0], Var):
        return False
    x, out = e.ins[0], e.outs[0]
    if x.shape != out.shape or x.dtype is not out.dtype:
        return False
    return bool(rule(e.ins, out, e.params))


def _is_value(atom, value, consts, captured):
    """Whether ``atom`` is the number ``value`` or a NumPy constant of it that the program made
    (a captured array may be written into later: NOTE [captured arrays])."""
    if isinstance(atom, Lit):
        return type(atom.value) in (int, float) and atom.value == value
    if atom in captured:
        return False
    c = consts.get(atom)
    if type(c) is not _ndarray or c.size == 0 or not c.flat[0] == value:
        return False   # (a constant of another number fails at its first element, not after a
        # pass over it: a gradient's constants can be arrays of the data's size)
    if not any(c.strides):   # (one number broadcast: its first element is all of it)
        return True
    return bool((c == value).all())


def _unit_operand(e, consts, captured):
    """The operand that ``e`` hands back unchanged (its primitive's ``unit`` fact: ``x * 1``,
    ``1 * x``, ``x ** 1``) with the result's shape and dtype; else None."""
    unit = facts(e.prim).unit
    if unit is None or len(e.outs) != 1 or e.params or len(e.ins) != 2:
        return None
    value, positions = unit
    out = e.outs[0]
    for i in positions:
        x = e.ins[1 - i]
        if (isinstance(x, Var) and x.shape == out.shape and x.dtype is out.dtype
                and _is_value(e.ins[i], value, consts, captured)):
            return x
    return None


def identities(prog):
    """Instructions that hand back their input are dropped (the input stands for them)."""
    sub, eqns = {}, []
    for e in prog.eqns:
        e = Eqn(e.prim, tuple(_substitute(a, sub) for a in e.ins), e.params, e.outs)
        if _is_identity(e):
            sub[e.outs[0]] = e.ins[0]
            continue
        x = _unit_operand(e, prog.consts, prog.captured)
        if x is not None:
            sub[e.outs[0]] = x
            continue
        eqns.append(e)
    return prog.replace(eqns=eqns, outs=[_substitute(a, sub) for a in prog.outs])


def _same_type(neg_var, e):
    """Whether the negated value has the result's shape and dtype (no broadcasting or promotion
    for the rewrite to change)."""
    out = e.outs[0]
    return neg_var.shape == out.shape and neg_var.dtype is out.dtype


def negations(prog):
    """Negations folded into their one consumer (backward passes are full of them): ``a +
    (-b)`` is ``a - b``, ``(-a) * c`` is ``a * (-c)`` for a number ``c``, ``a * (-b)`` is ``-(a *
    b)`` (then folded further); by the facts ``negates``, ``absorbs_negation`` and ``odd``."""
    neg_p = next((e.prim for e in prog.eqns if facts(e.prim).negates), None)
    if neg_p is None:
        return prog
    uses = collections.Counter(a for e in prog.eqns for a in e.ins if isinstance(a, Var))
    uses.update(a for a in prog.outs if isinstance(a, Var))
    neg_of = {}   # var -> the var it negates (single-use negations only)
    for e in prog.eqns:
        if facts(e.prim).negates and isinstance(e.ins[0], Var) and uses[e.outs[0]] == 1:
            neg_of[e.outs[0]] = e.ins[0]
    if not neg_of:
        return prog
    fresh = _fresh(prog) - 1
    eqns = []
    for e in prog.eqns:
        f, ins = facts(e.prim), e.ins
        binary = len(ins) == 2 and len(e.outs) == 1 and not e.params
        if binary and f.absorbs_negation and ins[1] in neg_of and _same_type(ins[1], e):
            e = Eqn(_core._primitive_by_name(f.absorbs_negation), (ins[0], neg_of[ins[1]]),
                    e.params, e.outs)
        elif binary and f.absorbs_negation and ins[0] in neg_of and _same_type(ins[0], e):
            e = Eqn(_core._primitive_by_name(f.absorbs_negation), (ins[1], neg_of[ins[0]]),
                    e.params, e.outs)
        elif (binary and f.odd and ins[0] in neg_of and isinstance(ins[1], Lit)
              and type(ins[1].value) in (int, float) and _same_type(ins[0], e)):
            e = Eqn(e.prim, (neg_of[ins[0]], Lit(-ins[1].value)), e.params, e.outs)
        elif (binary and f.odd and ins[1] in neg_of and isinstance(ins[0], Var)
              and ins[0].shape == e.outs[0].shape and _same_type(ins[1], e)
              and uses[e.outs[0]] == 1):
            # a * (-b) -> -(a * b): a negation the next add/subtract absorbs
            fresh += 1
            m = Var(fresh, e.outs[0].shape, e.outs[0].dtype, e.prim.name)
            eqns.append(Eqn(e.prim, (ins[0], neg_of[ins[1]]), e.params, (m,)))
            e = Eqn(neg_p, (m,), {}, e.outs)
            neg_of[e.outs[0]] = m
        eqns.append(e)
    return prog.replace(eqns=eqns)


def cse(prog):
    """Common subexpressions: an instruction equal to an earlier one (same primitive, same
    inputs, same parameters) reuses its results."""
    sub = {}
    seen = {}
    eqns = []
    for e in prog.eqns:
        ins = tuple(_substitute(a, sub) for a in e.ins)
        e = Eqn(e.prim, ins, e.params, e.outs)
        key = [e.prim]
        for a in ins:
            key.append(("var", a.n) if isinstance(a, Var) else value_key(a.value))
        for k in sorted(e.params):
            key.append((k, value_key(e.params[k])))
        key = tuple(key)
        if not facts(e.prim).side_effects and not any(
                k is None or (isinstance(k, tuple) and k[-1] is None) for k in key[1:]):
            hit = seen.get(key)
            if hit is not None:
                sub.update(zip(e.outs, hit.outs))
                continue
            seen[key] = e
        eqns.append(e)
    return prog.replace(eqns=eqns, outs=[_substitute(a, sub) for a in prog.outs])


def dce(prog):
    """Dead code: instructions none of whose results reach an output are dropped (unless their
    primitive has side effects)."""
    live = {a for a in prog.outs if isinstance(a, Var)}
    kept = []
    for e in reversed(prog.eqns):
        if any(v in live for v in e.outs) or facts(e.prim).side_effects:
            kept.append(e)
            live.update(a for a in e.ins if isinstance(a, Var))
    kept.reverse()
    return drop_unused_consts(prog.replace(eqns=kept))


def drop_unused_consts(prog):
    """The program without the constants nothing reads (a new program)."""
    used = {a for e in prog.eqns for a in e.ins if isinstance(a, Var)}
    used.update(a for a in prog.outs if isinstance(a, Var))
    return prog.replace(consts={v: c for v, c in prog.consts.items() if v in used})


# ---------------------------------------------------------------------------------------------
# Memory

# Below glibc's threshold for serving allocations by mmap, a fresh array is cheap and writing
# into a dead one (out=) costs more than it saves (the same threshold as the core's NOTE
# [consumed cotangents]).
REUSE_BYTES = 1 << 17


def nbytes(var):
    n = 1
    for s in var.shape:
        n *= s
    return n * getattr(var.dtype, "itemsize", 8)


class MemoryPlan:
    """Where the replay of a program puts its values: ``into[k]``, the dead variable whose
    buffer instruction ``k`` writes its result into (``out=``); ``free[k]``, the large
    variables to let go of after instruction ``k`` (their last use); ``pooled``, the variables
    whose buffers go back to the replay's pool where they die (those not written into another's
    buffer take theirs from it: NOTE [buffer pool])."""
    __slots__ = ("into", "free", "pooled")

    def __init__(self):
        self.into = {}
        self.free = {}
        self.pooled = set()

    def __repr__(self):
        return f"MemoryPlan(into={self.into}, free={self.free}, pooled={self.pooled})"


# NOTE [buffer pool]
# ------------------
# A large array that NumPy allocates is mapped fresh from the system when the allocator has
# returned the last one (glibc trims the top of its heap, and serves large blocks by mmap), and
# its first write then takes a page fault per 4 KiB page: on a virtual machine that can cost
# more than the arithmetic. The gradient of a log-sum-exp on 160,000 values took 905 page
# faults per call in the replay (2.5 ms, against 0.43 ms without them). So the replay keeps
# the buffers of its large temporaries across calls, as XLA's allocator does: a value that an
# ``out=`` call makes (a fresh array no view of which exists), read only by such calls (none of
# them keeps a view) and neither an input, a constant nor an output, is written into a buffer
# taken from the replay's pool (one list per shape and dtype) and handed back where it dies.
# The pool holds at most the most such buffers alive at once in one call, for as long as the
# program is cached; threads calling one replay take different buffers (a list's pop and
# append are atomic).


def plan_memory(prog, writes_into=None):
    """The buffers of ``prog``'s replay (a ``MemoryPlan``). ``writes_into(eqn)``: whether the
    replay's call for ``eqn`` takes an ``out=`` buffer (a NumPy ufunc); None: no instruction
    does. A buffer is reused only when it is large (``REUSE_BYTES``), of the result's shape and
    dtype, made by such a call (so a fresh array, viewed by nothing), read by such calls or
    reductions only (none of them keeps a view of it), not an input, constant or output, and
    dead after this instruction. Such values are also the ones whose buffers the replay keeps
    across calls (NOTE [buffer pool])."""
    plan = MemoryPlan()
    ok = [bool(writes_into and writes_into(e)) for e in prog.eqns]
    # (an instruction that keeps no view of what it reads: an out= call, a reduction, a fused
    # group, whose kernels write their outputs into arrays of their own)
    no_view = [ok[k] or facts(e.prim).fresh or getattr(e.prim, "fused", False)
               for k, e in enumerate(prog.eqns)]
    last, only_ok_reads, fresh = {}, {}, set()
    for k, e in enumerate(prog.eqns):
        for a in e.ins:
            if isinstance(a, Var):
                last[a] = k
                only_ok_reads[a] = only_ok_reads.get(a, True) and no_view[k]
        if ok[k]:
            fresh.update(e.outs)
    kept = set(prog.in_vars) | set(prog.consts) | {a for a in prog.outs if isinstance(a, Var)}
    for k, e in enumerate(prog.eqns):
        out = e.outs[0] if len(e.outs) == 1 else None
        if ok[k] and out is None:   # (a fused group's outputs: NOTE [buffer pool])
            plan.pooled.update(v for v in e.outs if nbytes(v) >= REUSE_BYTES
                               and v not in kept and v in last and only_ok_reads[v])
        if ok[k] and out is not None and nbytes(out) >= REUSE_BYTES:
            for a in e.ins:
                if (isinstance(a, Var) and a in fresh and a not in kept and last[a] == k
                        and only_ok_reads[a] and a.shape == out.shape
                        and a.dtype is out.dtype):
                    plan.into[k] = a
                    break
            if out not in kept and out in last and only_ok_reads[out]:
                plan.pooled.add(out)   # (NOTE [buffer pool]: handed back where it dies)
        dead = [a for a in dict.fromkeys(e.ins) if isinstance(a, Var) and last.get(a) == k
                and a not in kept and nbytes(a) >= REUSE_BYTES]
        if dead:
            plan.free[k] = dead
    return plan
