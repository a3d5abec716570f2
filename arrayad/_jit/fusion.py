"""Elementwise fusion (NOTE [fusion]): a generic pass over programs, and the lowerers that
compile a fused group with a backend's own compiler.

NOTE [fusion]
-------------
``fuse_elementwise(program, accept)`` replaces maximal groups of elementwise instructions (the
``fusible`` fact, NOTE [primitive facts]; ``accept(eqn)`` says which may join, e.g. what a
lowerer can compile) whose results have one shape and dtype by one instruction holding the
group as a sub-program. Groups grow in program order: an accepted instruction joins the open
groups its operands come from (merging them), or starts one; a group closes as soon as an
instruction outside it reads one of its values. So every value a group reads from outside is
computed before the group's last member, every outside reader comes after it, and the fused
instruction, put at the last member's place, keeps the program in order. A value of the group
read outside (by another instruction or as an output of the program) is an output of the fused
instruction; the others never reach memory. The fused instruction's primitive is a
``_ProgramPrimitive`` of the sub-program (NOTE [program primitive]): its VJP, JVP and batching
rule transform the sub-program, so a fused program stays differentiable and batchable; its impl
is the lowerer's kernel, or the sub-program's replay where there is none.

Only the replay on raw arrays of a cached program runs the fused program (``Executable.fused``);
outer transforms bind the unfused one. NumPy programs are tiled when they are staged (NOTE
[tiled replay] in ``lower_tiles.py``: generated Python over pieces of the arrays, nothing
compiled). A compiler's lowerer is an optional extra (``arrayad.config.jit_fuse``): without it
(numba not installed, a backend without one) the replay is the unfused or tiled one, and results
are
the same. The lowerers: Dask's one blockwise layer per group running numba's loops
(``lower_numba.py``) or the group's NumPy replay per block (``lower_dask.py``), torch's
``torch.compile`` of the group's replay (``lower_torch.py``); numba's loops for NumPy programs
only where asked for (``lower_numba.register``: the tiled replay is faster).
"""

import collections

from .. import config as _config
from .ir import Eqn, Program, Var
from .replay import _ProgramPrimitive
from .._ops._rules import facts
from .._pytree import tree_flatten


class FusedPrimitive(_ProgramPrimitive):
    """A fused group (NOTE [fusion]): a sub-program as one primitive; ``kernel(*raw)`` runs it
    (returns the tuple of outputs), and ``out_kernel(*raw, out=buffers)`` where the kernel
    writes into given arrays (``buffers``: one per output, a C-contiguous array of its shape and
    dtype, or None for one the kernel makes): a dead buffer (``plan_memory``) or the replay's
    pool's (NOTE [buffer pool])."""

    fused = True

    def __init__(self, sub, kernel=None, out_kernel=None):
        names = ",".join(e.prim.name for e in sub.eqns)
        super().__init__(sub, name=f"fused[{names}]")
        self.kernel = kernel
        self.out_kernel = out_kernel
        if kernel is not None:
            self.impl = lambda xp, *raw: kernel(*raw)
            self._flat_replay = kernel


def _writable(buffer):
    """Whether a kernel writes into ``buffer`` (given to its ``out_kernel``) through a flat view:
    a C-contiguous array (else ``reshape(-1)`` would copy it, and the writes be lost: a ufunc's
    result on transposed operands is Fortran-ordered); None asks the kernel to make one."""
    return buffer is not None and buffer.flags.c_contiguous


def fusible(eqn):
    """Whether ``eqn`` may join a fused group at all: a fusible primitive of one result, no
    parameters."""
    return (facts(eqn.prim).fusible and len(eqn.outs) == 1 and not eqn.params
            and not eqn.prim.multiple_results)


# The most instructions in one group: a compiler's time grows with the kernel (a loop of 1000
# operations on 64 elements would take seconds to compile for microseconds of work).
MAX_GROUP = 256


def _shape_and_dtype(e):
    return (e.outs[0].shape, e.outs[0].dtype)


def fuse_elementwise(prog, accept=fusible, make_kernel=None, max_group=None, worth=None,
                     epilogue=None, kind_of=_shape_and_dtype):
    """``prog`` with its maximal elementwise groups fused (NOTE [fusion]); ``accept(eqn)``: may
    ``eqn`` join a group (``fusible`` and the lowerer's own conditions); ``make_kernel(sub)``:
    (kernel, out_kernel) for a group's sub-program, or None to replay it; ``max_group``: the
    most instructions in a group (``MAX_GROUP``); ``worth(eqns)``: whether a group of these
    instructions is made (by default, two or more: one alone has nothing to fuse);
    ``epilogue(eqn)``: whether ``eqn``, an instruction of one operand that is not elementwise
    (a reduction), may end the open group computing its operand (the group closes with it: its
    result has another shape); ``kind_of(eqn)``: what the instructions of one group share (by
    default their result's shape and dtype). Returns a new program (``prog`` itself where
    nothing is fused)."""
    max_group = MAX_GROUP if max_group is None else max_group
    parent = {}

    def find(g):
        while parent[g] != g:
            parent[g] = parent[parent[g]]
            g = parent[g]
        return g

    members = {}       # group -> [eqn index]
    closed = set()
    group_of = {}      # var -> group that computes it
    kind = {}          # group -> kind_of its instructions
    for k, e in enumerate(prog.eqns):
        if (epilogue is not None and len(e.ins) == 1 and isinstance(e.ins[0], Var)
                and e.ins[0] in group_of and epilogue(e)):
            g = find(group_of[e.ins[0]])
            if g not in closed and kind[g] == (e.ins[0].shape, e.ins[0].dtype):
                members[g].append(k)
                closed.add(g)
                continue
        ok = fusible(e) and accept(e)
        out = e.outs[0]
        joined = set()
        for a in e.ins:
            if isinstance(a, Var) and a in group_of:
                g = find(group_of[a])
                if ok and g not in closed and kind[g] == kind_of(e):
                    joined.add(g)
        for a in e.ins:   # (a group read by an instruction outside it closes)
            if isinstance(a, Var) and a in group_of:
                g = find(group_of[a])
                if g not in joined:
                    closed.add(g)
        if not ok:
            continue
        if joined:
            g, *rest = sorted(joined)
            for h in rest:
                parent[h] = g
                members[g] += members.pop(h)
        else:
            g = k
            parent[g] = g
            members[g] = []
            kind[g] = kind_of(e)
        members[g].append(k)
        group_of[out] = g
        if len(members[g]) >= max_group:
            closed.add(g)
    if worth is None:
        worth = lambda eqns: len(eqns) > 1   # noqa: E731
    groups = [sorted(m) for m in members.values() if worth([prog.eqns[k] for k in m])]
    if not groups:
        return prog
    member_of = {k: i for i, m in enumerate(groups) for k in m}
    read_by = collections.defaultdict(set)   # var -> the groups (None: no group) reading it
    for k, e in enumerate(prog.eqns):
        for a in e.ins:
            if isinstance(a, Var):
                read_by[a].add(member_of.get(k))
    prog_outs = {a for a in prog.outs if isinstance(a, Var)}
    fused_at = {}
    spec_cache = {}
    for i, m in enumerate(groups):
        eqns = [prog.eqns[k] for k in m]
        inside = {v for e in eqns for v in e.outs}
        ins = list(dict.fromkeys(a for e in eqns for a in e.ins
                                 if isinstance(a, Var) and a not in inside))
        outs = [v for e in eqns for v in e.outs if v in prog_outs or read_by[v] - {i}]
        n = len(outs)
        spec = spec_cache.get(n)
        if spec is None:
            spec = spec_cache[n] = tree_flatten(tuple(range(n)))[1]
        sub = Program(f"{prog.name}_fused{i}", ins, {}, eqns, outs, None, spec, prog.backend)
        kernels = make_kernel(sub) if make_kernel is not None else None
        prim = FusedPrimitive(sub, *(kernels or ()))
        fused_at[m[-1]] = Eqn(prim, tuple(ins), {}, tuple(outs))
    dropped = {k for m in groups for k in m}
    new = []
    for k, e in enumerate(prog.eqns):
        if k in fused_at:
            new.append(fused_at[k])
        elif k not in dropped:
            new.append(e)
    return prog.replace(eqns=new)


# ---------------------------------------------------------------------------------------------
# Lowerers: backend name -> function(program) -> fused program or None

LOWERERS = {}   # backend name -> (lower, wanted, after); lower_dask.py and lower_torch.py
# register themselves, lower_numba.py for NumPy only where ``register()`` asks it to
# What the lowering does is set by arrayad.config (NOTE [configuration] in arrayad/config.py),
# read when a program is staged (and its values part of the jit cache key):
# * ``jit_fuse``: compiled fusion, opt-in. Off, no compiler is imported or run. Why not on by
#   default: torch.compile takes seconds to tens of seconds, and numba's loops, measured on NumPy
#   programs, were slower than the unfused replay (1.49x against 1.12x the NumPy forward at
#   65,536 elements), where the tiled replay is faster than both.
# * ``jit_tiles``: the tiled replay of NumPy programs (NOTE [tiled replay] in ``lower_tiles.py``)
#   compiles nothing and gives the unfused replay's results (bit for bit but for the vector math
#   of NOTE [vector math]), so it is on by default; a compiler's lowering takes over once it
#   applies.
# * ``jit_fuse_after``: a program is lowered once its unfused replays have taken this many
#   seconds in all (NOTE [when to compile]); 0: at once, when it is staged.

# NOTE [when to compile]
# ----------------------
# Compiling costs far more than a replay: importing numba and starting its compiler take
# ~0.5-1 s in a fresh process, each kernel ~0.1-0.5 s more (its on-disk cache saves only the
# latter), where an unfused replay of a 13-operation chain on 65,536 elements takes ~3 ms and
# fusing saves a fraction of that. So a program is not lowered when it is staged: its replay runs
# unfused and counts its time, and once that reaches ``jit_fuse_after`` seconds (the rent-or-buy
# rule: at most about twice the better of never and always compiling) the program is lowered
# and the replay switches to the fused one. A function called a few times never waits for a
# compiler; one called in a loop compiles once it is hot. The budget is the lowerer's
# (``register_lowerer``'s ``after``): ``jit_fuse_after`` for numba; for torch.compile, whose
# compilation takes 6-40 s, ``jit_torch_compile_after`` (20 s); for Dask 0, at once: its
# replay builds a graph, so its time says nothing of the work fusion saves, and without numba
# its lowering compiles nothing.


def turned(on, fuse_after=None, tiles=None):
    """Programs staged in this block replay with the compilers' fusion (``on``) or without,
    whatever ``config.jit_fuse`` says (for comparisons); ``tiles``: with the tiled replay or
    without (by default as ``on``: ``turned(False)`` is the unfused replay); ``fuse_after``, if
    given, replaces ``config.jit_fuse_after`` for them (0: compiled when staged)."""
    changes = {"jit_fuse": bool(on), "jit_tiles": bool(on if tiles is None else tiles)}
    if fuse_after is not None:
        changes["jit_fuse_after"] = _config.jit_fuse_after._checked(fuse_after)
    return _config._using(changes)


def register_lowerer(backend_name, lower, wanted=None, after=None):
    """Let ``lower(program) -> program or None`` make the replay of ``backend_name``'s programs
    (NOTE [fusion]); None leaves the unfused replay. ``wanted(program)``: whether ``lower``
    would fuse anything (cheap: imports no compiler). ``after()``: the seconds of unfused
    replays after which a program is lowered (NOTE [when to compile]), read when it is staged;
    by default ``config.jit_fuse_after``. Dask's is 0 (its replay builds a graph: its time does
    not measure the work), torch.compile's is longer (its compiler takes seconds)."""
    LOWERERS[backend_name] = (lower, wanted or (lambda prog: True),
                              after or (lambda: _config.read("jit_fuse_after")))


TILERS = {}   # backend name -> lower(program) -> program or None; lower_tiles.py (NumPy)


def register_tiler(backend_name, lower, why=None):
    """Let ``lower(program) -> program or None`` make the replay of ``backend_name``'s programs
    when they are staged, before any compiler's lowering (NOTE [tiled replay]): a lowering that
    compiles nothing and keeps the unfused results. ``why(eqn, program)``: why it left an
    elementwise instruction out (NOTE [explained lowering])."""
    TILERS[backend_name] = lower
    if why is not None:
        EXPLAINERS[backend_name] = why


def tiled(prog):
    """The program the replay of ``prog`` runs from its staging on (NOTE [tiled replay]); None:
    ``prog`` itself."""
    from .passes import run_pass
    lower = (TILERS.get(prog.backend.name) if prog.cacheable and _config.read("jit_tiles")
             else None)
    if lower is None:
        return None
    out = run_pass(lower, prog)
    return None if out is None or out is prog else out


def _lowerer(prog):
    if not prog.cacheable or not _config.read("jit_fuse"):
        return None
    return LOWERERS.get(prog.backend.name)


def wanted(prog):
    """Whether the lowerer of ``prog``'s backend would fuse some of it."""
    lw = _lowerer(prog)
    return lw is not None and lw[1](prog)


def budget(prog):
    """The seconds of unfused replays after which ``prog`` is lowered (0: when it is staged)."""
    lw = _lowerer(prog)
    return _config.read("jit_fuse_after") if lw is None else lw[2]()


def lower_program(prog):
    """The program the replay of ``prog`` runs, fused by its backend's lowerer; None: ``prog``
    itself."""
    from .passes import run_pass
    lw = _lowerer(prog)
    if lw is None:
        return None
    out = run_pass(lw[0], prog)
    return None if out is None or out is prog else out


# -- explaining (NOTE [explained lowering] in replay.py) -----------------------------------------

EXPLAINERS = {}   # backend name -> why(eqn, prog) -> str or None, from the backend's tiler


def why_unfused(e, prog):
    """Why the lowering of ``prog`` left the instruction ``e`` to one backend call, or None
    where there is nothing to say (NOTE [explained lowering])."""
    f = facts(e.prim)
    if not f.fusible:
        return None if getattr(e.prim, "fused", False) else "not elementwise"
    if e.params:
        return "elementwise with parameters (" + ", ".join(e.params) + "): not fused"
    if e.outs[0].shape == ():
        return "a 0-d value"
    why = EXPLAINERS.get(prog.backend.name)
    if why is not None:
        return why(e, prog)
    if prog.backend.name in LOWERERS and not _config.read("jit_fuse"):
        return "compiled fusion is off (arrayad.config.jit_fuse turns it on)"
    return f"no fusing lowering for {prog.backend.name} arrays"


def compiler_state(prog):
    """A phrase on whether a compiler will take the program over (``Executable`` lowers once
    its replays reach the budget: NOTE [when to compile])."""
    lw = _lowerer(prog)
    if lw is None or not lw[1](prog):
        return ""
    return f"; compiled groups take over after {lw[2]():g} s of replays"
