"""What runs a program (NOTE [program IR] in ``ir.py``): the replay, generated Python with one
backend call per instruction, its buffers (``plan_memory``), the program as one primitive for
outer transforms (NOTE [program primitive]), and the lowering of fused instructions to a
backend's compiler (``fusion.py``)."""

import sys
import weakref
from time import perf_counter as _perf_counter

from .. import config as _config
from .._core import _core
from .._core._core import bind, fix_scalar
from .._pytree import tree_flatten, tree_unflatten
from .ir import Var
from .passes import plan_memory
from ..backends._adapter import NumpyLikeBackend as _NumpyLikeBackend

_leaf_spec = tree_flatten(0)[1]

# How many blocks of ``arrayad.debug.detect_nans`` are open (NOTE [nan detection] in
# ``arrayad/debug.py``): while one is, a jitted function evaluates its program one primitive at
# a time (``Executable.evaluate``), so that each operation passes the hook, instead of replaying.
EVALUATING = [0]


def spec_shape(spec, n):
    """(is a leaf, is a flat tuple of n leaves)."""
    if spec == _leaf_spec:
        return True, False
    return False, spec == tree_flatten(tuple(range(n)))[1]


def numpy_ufunc(eqn):
    """The NumPy ufunc computing ``eqn`` (accepts ``out=``), or None."""
    prim = eqn.prim
    if not prim.elementwise or prim.xp_name is None or eqn.params or prim.multiple_results:
        return None
    import numpy as np
    u = getattr(np, prim.xp_name, None)
    return u if isinstance(u, np.ufunc) else None


def _copy_into(x, out):
    import numpy as np
    np.copyto(out, x, casting="unsafe")
    return out


def _cast_into(eqn):
    """``astype`` as a call writing into a given buffer, or None: a copy into an array of the
    result's dtype is the cast, by NumPy's same loops (a large cast's fresh array, as a
    log-sum-exp gradient's mask made float, cost more in page faults than the cast itself)."""
    if (eqn.prim.name != "astype" or eqn.params.get("device") is not None
            or not eqn.params.get("copy", True)):
        return None
    return _copy_into


def writes_into(eqn):
    """Whether the replay's call for ``eqn`` on NumPy takes an ``out=`` buffer: a NumPy ufunc,
    a cast (``_cast_into``), or a fused kernel that does (``FusedPrimitive.out_kernel``: a
    tuple, one buffer or None per output)."""
    return (numpy_ufunc(eqn) is not None or _cast_into(eqn) is not None
            or getattr(eqn.prim, "out_kernel", None) is not None)


def _out_callable(e, b):
    if b.name != "numpy":   # (plan_memory's writes_into is for NumPy only)
        raise AssertionError(f"jit: out= planned for {e.prim.name} on {b.name}")
    k = getattr(e.prim, "out_kernel", None)
    return k if k is not None else numpy_ufunc(e) or _cast_into(e)


def _callable(prim, b):
    """(function, takes xp first) that ``_call_impl`` of the core would call for ``prim``."""
    fast = getattr(b, "fast", {})
    if prim.xp_name is not None:
        return fast.get(prim.xp_name) or getattr(b.xp, prim.xp_name), False
    fn = fast.get(prim.name)
    if fn:
        return fn, False
    return prim.impl, True


def _index_add_basic(base, v, key):
    """NumPy's ``index_add`` of a key of slices and integers (``NumpyBackend.index_add``), for
    the replay without the primitive's impl: the pullback of every slice is one."""
    out = base.copy()
    out[key] += v
    return out


def _basic_index_add(e, b):
    """Whether the replay may call ``_index_add_basic`` for ``e``: NumPy's own ``index_add``,
    a key of slices and integers (no index array), a value of the base's dtype (the impl
    casts it first: ``+=`` would compute in the wider dtype)."""
    if e.prim.name != "index_add" or len(e.ins) != 2 or b.name != "numpy" \
            or not hasattr(e.ins[0], "dtype"):
        return False
    from ..backends.numpy import NumpyBackend
    if type(b).index_add is not NumpyBackend.index_add:
        return False
    base, v = e.ins
    return all(k is None or k is Ellipsis or type(k) in (int, slice) for k in e.params["key"]) \
        and (v.dtype == base.dtype if hasattr(v, "dtype") else
             isinstance(v.value, float) and base.dtype.name.startswith("float"))


def compile_replay(prog, bound=False, flat=False, owner=None, plan=None):
    """The replay function of ``prog``: generated Python source, compiled once. With ``bound``,
    each line binds the primitive instead (``Program.evaluate``); with ``flat`` it returns the
    tuple of output leaves instead of their structure. Captured constants (NOTE [captured
    arrays]) are read and checked at the start of each call, or with ``bound`` or ``flat`` (the
    program primitive's impl and rules: NOTE [program primitive]) taken as arguments after the
    inputs. ``owner``: what a stale captured array names (NOTE [captured arrays]; the program
    by default); ``plan``: the buffers (``plan_memory``; by default NumPy ufuncs write into dead
    buffers)."""
    b = prog.backend
    ns = {"_fix": fix_scalar, "_xp": b.xp, "_bind": bind}
    names = {}
    params = []
    for i, v in enumerate(prog.in_vars):
        names[v] = f"a{i}"
        params.append(names[v])
    prologue = []
    captured_args = bound or flat
    for v, c in prog.consts.items():
        names[v] = f"c{v.n}"
        cap = prog.captured.get(v)
        if cap is None:
            ns[names[v]] = c
        elif captured_args:
            params.append(names[v])
        else:
            # read now (a Tensor's value) and check: the program holds for the traced shape
            # and dtype only (a Tensor's value rebound by an update is checked once)
            ns[f"_cap{v.n}"] = cap
            ns[f"_prog{v.n}"] = prog if owner is None else owner
            if cap.tensor:
                ns[f"_t{v.n}"] = c
                prologue.append(f"    {names[v]} = _t{v.n}._value")
                prologue.append(f"    if {names[v]} is not _cap{v.n}.last: "
                                f"_cap{v.n}.check(_prog{v.n}, {names[v]})")
            else:
                ns[names[v]] = c
                ns[f"_s{v.n}"], ns[f"_d{v.n}"] = cap.shape, cap.dtype
                prologue.append(f"    if {names[v]}.shape != _s{v.n} or {names[v]}.dtype != "
                                f"_d{v.n}: _cap{v.n}.check(_prog{v.n})")

    def name(a):
        if isinstance(a, Var):
            return names.setdefault(a, a.name)
        key = f"k{len(ns)}"
        ns[key] = a.value
        return key

    if plan is None:
        plan = plan_memory(prog, writes_into if b.name == "numpy" and not bound else None)
    lines = [f"def replay({', '.join(params)}):"] + prologue
    if plan.pooled:   # (NOTE [buffer pool] in passes.py)
        ns["_take"], ns["_give"] = _buffer_pool(b.xp)
    for k, e in enumerate(prog.eqns):
        args = [name(a) for a in e.ins]
        out = e.outs[0]
        target = plan.into.get(k)
        if target is not None or any(v in plan.pooled for v in e.outs):
            fname = f"u{k}"
            ns[fname] = _out_callable(e, b)
            if target is not None:   # (one output, written into a dead input's buffer)
                buffers = [name(target)]
            else:
                buffers = []
                for j, v in enumerate(e.outs):
                    if v in plan.pooled:
                        ns[f"_t{k}_{j}"] = (tuple(v.shape), v.dtype.name)
                    buffers.append(f"_take(_t{k}_{j})" if v in plan.pooled else "None")
            # (a ufunc takes its one buffer, a fused kernel a tuple of them)
            buffer = (f"({', '.join(buffers)},)" if getattr(e.prim, "fused", False)
                      else buffers[0])
            call = f"{fname}({', '.join(args)}, out={buffer})"
        elif (not bound and e.prim.name == "getitem" and len(e.ins) == 1
              and type(b).getitem is _NumpyLikeBackend.getitem):
            # (a key of slices and integers, no index array: the backend's getitem is x[key],
            # written here without the primitive's impl and the key's filling)
            ns[f"p{k}"] = e.params["key"]
            call = f"{args[0]}[p{k}]"
        elif not bound and _basic_index_add(e, b):
            # (the same: a copy of the base, its slice's elements added to)
            ns[f"p{k}"], ns["_index_add_basic"] = e.params["key"], _index_add_basic
            call = f"_index_add_basic({args[0]}, {args[1]}, p{k})"
        else:
            if bound:
                fn, takes_xp = e.prim, False
                args.insert(0, f"f{k}")
                ns[f"f{k}"] = fn
                fname = "_bind"
            else:
                fn, takes_xp = _callable(e.prim, b)
                fname = f"f{k}"
                ns[fname] = fn
            kw = []
            for pk, pv in e.params.items():
                pname = f"p{k}_{len(kw)}"
                ns[pname] = pv
                kw.append(f"{pk}={pname}" if pk.isidentifier() else None)
            if any(x is None for x in kw):   # (a parameter name that is no identifier)
                pname = f"p{k}"
                ns[pname] = dict(e.params)
                kw = [f"**{pname}"]
            call = f"{fname}({', '.join((['_xp'] if takes_xp else []) + args + kw)})"
        if e.prim.multiple_results:
            lhs = ", ".join(name(v) for v in e.outs)
            lines.append(f"    {lhs}, = {call}" if len(e.outs) == 1 else f"    {lhs} = {call}")
            for v in e.outs:
                if v.shape == () and not bound:
                    lines.append(f"    {name(v)} = _fix({name(v)})")
        elif out.shape == () and not bound:
            lines.append(f"    {name(out)} = _fix({call})")
        else:
            lines.append(f"    {name(out)} = {call}")
        # free large dead arrays now (the next allocation may reuse their memory)
        dead = plan.free.get(k)
        # (the buffer of an ``out=`` target lives on under the result's name: its own name
        # is deleted, or it would keep the buffer alive after the result dies)
        if dead:
            given = [a for a in dead if a in plan.pooled and a is not target]
            if given:
                lines.append(f"    _give({', '.join(name(a) for a in given)})")
            lines.append(f"    del {', '.join(name(a) for a in dead)}")
    # (a constant handed out is copied: the caller may write into it, the next call reuses it)
    ns["_copy"] = lambda c: b.xp.asarray(c, copy=True)
    outs = [f"_copy({name(a)})" if a in prog.consts and not bound else name(a)
            for a in prog.outs]
    is_leaf, is_flat_tuple = (False, False) if flat else spec_shape(prog.out_spec, len(outs))
    if flat:
        lines.append(f"    return ({', '.join(outs)}{',' if len(outs) == 1 else ''})")
    elif is_leaf:
        lines.append(f"    return {outs[0]}")
    elif is_flat_tuple:
        lines.append(f"    return ({', '.join(outs)}{',' if len(outs) == 1 else ''})")
    else:
        ns["_unflatten"] = tree_unflatten
        ns["_spec"] = prog.out_spec
        lines.append(f"    return _unflatten([{', '.join(outs)}], _spec)")
    src = "\n".join(lines) + "\n"
    code = compile(src, f"<arrayad.jit program {prog.name}>", "exec")
    exec(code, ns)
    fn = ns["replay"]
    fn.source = src
    fn.plan = plan   # (what ``explain`` reports)
    return fn


def _buffer_pool(xp):
    """(take, give) of a replay's pool of large buffers (NOTE [buffer pool] in ``passes.py``):
    ``take((shape, dtype name))`` an array to write into, ``give(*arrays)`` hands dead ones
    back."""
    free = {}

    def take(kind):
        stack = free.get(kind)
        if stack:
            try:
                return stack.pop()
            except IndexError:   # (another thread took the last one)
                pass
        return xp.empty(kind[0], dtype=kind[1])

    def give(*arrays):
        for a in arrays:
            free.setdefault((a.shape, a.dtype.name), []).append(a)

    return take, give


# ---------------------------------------------------------------------------------------------
# NOTE [program primitive]
# ------------------------
# Called with values of outer transforms (``grad(jit(f))``, ``vmap(jit(f))``, Tensors that
# require grad), a cached program is applied as one primitive whose rules come from transforming
# the program itself: its impl is the replay on raw arrays; its VJP is ``jit`` of the program's
# pullback, its JVP ``jit`` of its pushforward, its batching rule ``jit`` of its vmap (each
# staged once per signature, like any jitted function). On raw arrays every one of them replays
# at backend speed; on values of further transforms (hessian(jit(f)): the VJP rule sees grad
# tracers) the jitted rule binds its own program's primitives, so every order composes.

def _func():
    # (arrayad.func imports this module: looked up, not imported, so that the import graph
    # keeps one direction)
    return sys.modules["arrayad.func"]


def _jit():
    return sys.modules["arrayad._jit"].jit


def _fusion():
    # (fusion.py imports this module; arrayad._jit imports both)
    return sys.modules["arrayad._jit.fusion"]


class _ProgramPrimitive(_core.Primitive):
    """A cached program as one primitive (NOTE [program primitive]); its rules act on the
    floating-point inputs and outputs (the others get no cotangent or tangent)."""

    fused = False   # (a fused instruction's: NOTE [fusion])

    def __init__(self, prog, run=None, name=None):
        super().__init__(name or f"jit[{prog.name}]", self._impl, multiple_results=True)
        self.prog = prog
        self._run = run   # the program the impl replays (fused, for a cached program's)
        self.vjp = self._vjp
        self.jvp = self._jvp
        self.batch = self._batch
        self.node_name = f"Jit{prog.name}Backward"
        self._flat_replay = None
        self._evaluate = None   # (made when a rule first needs it: ``_flat_eval``)
        # (the captured constants come after the inputs, and get no cotangent or tangent: a
        # Tensor that requires grad makes the program uncacheable, NOTE [captured arrays])
        self._inexact_in = ([getattr(v.dtype, "kind", "") in ("f", "c") for v in prog.in_vars]
                            + [False] * len(prog.captured))
        self._inexact_out = [getattr(v.dtype, "kind", "") in ("f", "c") for v in prog.outs]
        self._pullback = self._pushforward = None
        self._batched = {}

    @property
    def _flat_eval(self):
        """The program binding each primitive, flat in and out (what the rules transform);
        compiled at the first rule's call, not when a program is staged or fused."""
        if self._evaluate is None:
            self._evaluate = compile_replay(self.prog, bound=True, flat=True)
        return self._evaluate

    def _impl(self, xp, *raw):
        if self._flat_replay is None:
            self._flat_replay = compile_replay(self._run or self.prog, flat=True)
        return self._flat_replay(*raw)

    def _split(self, args):
        """(indices of the floating-point args, a function rebuilding all the args from
        new values of those): the others stay as they are."""
        idx = [i for i, ok in enumerate(self._inexact_in) if ok]

        def with_diff(*d):
            full = list(args)
            for i, v in zip(idx, d):
                full[i] = v
            return full
        return idx, with_diff

    def _vjp(self, g, ans, *args):
        if self._pullback is None:
            vjp = _func().vjp
            n, evaluate, outs_ok = len(args), self._flat_eval, self._inexact_out

            def pullback(*xs):
                args, cts = xs[:n], xs[n:]
                idx, full = self._split(args)
                _, fn = vjp(lambda *d: [o for o, ok in zip(evaluate(*full(*d)), outs_ok) if ok],
                            *[args[i] for i in idx])
                got = fn(list(cts))
                out = [None] * n
                for i, c in zip(idx, got):
                    out[i] = c
                return tuple(out)
            pullback.__name__ = f"vjp_{self.prog.name}"
            self._pullback = _jit()(pullback)
        if len(self._inexact_out) == 1:   # (the engine hands one output's cotangent bare)
            g = (g,)
        cts = [c for c, ok in zip(g, self._inexact_out) if ok]
        return list(self._pullback(*args, *cts))

    def _jvp(self, tangents, ans, *args):
        if self._pushforward is None:
            jvp = _func().jvp
            n, evaluate, outs_ok = len(args), self._flat_eval, self._inexact_out

            def pushforward(*xs):
                args, ts = xs[:n], xs[n:]
                idx, full = self._split(args)
                _, out_t = jvp(lambda *d: [o for o, ok in zip(evaluate(*full(*d)), outs_ok) if ok],
                               tuple(args[i] for i in idx), tuple(ts))
                return tuple(out_t)
            pushforward.__name__ = f"jvp_{self.prog.name}"
            self._pushforward = _jit()(pushforward)
        from .._ops._namespace import ops
        ts = [ops.zeros_like(a) if t is None else t
              for a, t, ok in zip(args, tangents, self._inexact_in) if ok]
        got = iter(self._pushforward(*args, *ts))
        return tuple(next(got) if ok else None for ok in self._inexact_out)

    def _batch(self, args, dims):
        dims = tuple(dims)
        fn = self._batched.get(dims)
        if fn is None:
            vmap = _func().vmap
            evaluate = self._flat_eval

            def batched(*xs):
                return vmap(lambda *a: tuple(evaluate(*a)), in_dims=dims)(*xs)
            batched.__name__ = f"vmap_{self.prog.name}"
            fn = self._batched[dims] = _jit()(batched)
        return tuple(fn(*args)), (0,) * len(self.prog.outs)



# ---------------------------------------------------------------------------------------------
# Executables

class Executable:
    """What runs one program (NOTE [program IR]): ``replay`` on raw arrays (of the program the
    lowering made, ``run_prog``: fused where a lowerer applies, NOTE [fusion]), ``evaluate``
    binding each primitive (outer transforms), ``as_primitive``. Made once per program
    (``executable``); the jit caches hold these, and a stale captured array names one.
    ``settings``: the compile settings it was made under (NOTE [configuration] in
    ``arrayad/config.py``), which its later lowering and its explanation use too."""

    def __init__(self, prog, lower=True):
        self.prog = prog
        self.name = prog.name
        self.settings = _config._compile_values()
        self.fused = None           # the fused program the replay runs, once lowered
        self.tiled = None           # the tiled program it runs until then (NOTE [tiled replay])
        self.run_prog = prog
        self._bound = None
        self._primitive = None
        fusion = _fusion()
        if lower:
            try:
                self.tiled = fusion.tiled(prog)
            except Exception as e:   # (a bug of the tiling must not break the function)
                import warnings
                warnings.warn(f"arrayad.jit({prog.name}): tiling its program failed "
                              f"({type(e).__name__}: {e}); it runs unfused.", RuntimeWarning,
                              stacklevel=2)
        if self.tiled is not None:
            self.run_prog = self.tiled
        self.replay = compile_replay(self.run_prog, owner=self)
        if lower and prog.cacheable:
            if fusion.wanted(prog):
                budget = fusion.budget(prog)
                if budget <= 0:
                    self.lower()
                else:   # (NOTE [when to compile])
                    self.replay = self._timed(self.replay, budget)

    def _timed(self, before, budget):
        """``before`` (the unfused or tiled replay), counting its time; lowers the program once
        it reaches ``budget``."""
        spent = [0.0]

        def replay(*args):
            t = _perf_counter()
            out = before(*args)
            spent[0] += _perf_counter() - t
            if spent[0] >= budget:
                self.replay = before   # (one lowering, also if it fails)
                self.lower()
            return out
        replay.source, replay.plan = before.source, before.plan
        return replay

    def lower(self):
        """Lower the program (NOTE [fusion]): the replay runs the fused program from now on. A
        compiler's failure leaves the replay as it was (unfused or tiled), with a warning."""
        try:
            with _config._using(self.settings):   # (a later call may run under other values)
                run = _fusion().lower_program(self.prog)
        except Exception as e:   # (a compiler's bug must not break the function)
            import warnings
            warnings.warn(f"arrayad.jit({self.prog.name}): compiling its fused kernels failed "
                          f"({type(e).__name__}: {e}); it runs as before.", RuntimeWarning,
                          stacklevel=2)
            return
        if run is not None:
            self.fused = self.run_prog = run
            self.replay = compile_replay(run, owner=self)
            if self._primitive:   # (its impl replays the fused program too)
                self._primitive._run, self._primitive._flat_replay = run, None

    def explain(self):
        """What runs this program on raw arrays (NOTE [explained lowering]): an ``Explanation``
        that prints one line per instruction of the replay, with the tier that computes it and,
        for an instruction left to one backend call, why."""
        with _config._using(self.settings):
            return _explain(self)

    def evaluate(self, leaves):
        """Bind each instruction's primitive on ``leaves`` (values of outer transforms, Tensors
        that require grad...): the outer transforms see, differentiate or batch the program.
        Returns the outputs in their structure."""
        if self._bound is None:
            self._bound = compile_replay(self.prog, bound=True, owner=self)
        return self._bound(*leaves, *self.captured_values())

    def captured_values(self):
        """The captured constants as they are now (NOTE [captured arrays]): the Tensor objects
        themselves (an outer transform then treats them as the un-jitted function would), the
        backend arrays; raises _Stale if one changed shape, dtype or type since tracing."""
        out = []
        for cap in self.prog.captured.values():
            cap.check(self)
            out.append(cap.obj)
        return out

    def as_primitive(self):
        """The program as one primitive (NOTE [program primitive]), or None where it cannot be
        (outputs that are no arrays, a program not cached)."""
        if self._primitive is None:
            prog = self.prog
            ok = (prog.cacheable and prog.outs and prog.in_vars
                  and all(isinstance(a, Var) for a in prog.outs))
            self._primitive = (_ProgramPrimitive(prog, self.fused or self.tiled) if ok
                               else False)
        return self._primitive or None


_EXECUTABLES = weakref.WeakKeyDictionary()


def executable(prog):
    """The ``Executable`` of ``prog`` (made on first use, kept as long as the program)."""
    exe = _EXECUTABLES.get(prog)
    if exe is None:
        exe = _EXECUTABLES[prog] = Executable(prog)
    return exe


# ---------------------------------------------------------------------------------------------
# NOTE [explained lowering]
# -------------------------
# ``jit(f).explain(*args)`` says what the replay of ``f``'s program runs: each instruction of
# the program the replay runs (``Executable.run_prog``: tiled or compiled groups where a
# lowering applied), the tier that computes it (the tile machine, NumPy's calls on tiles, a
# compiler's kernel, or one backend call from the generated Python), the buffer it writes into
# on NumPy (``plan_memory``), and, for an elementwise instruction that no group took, the
# lowering's reason (``fusion.why_unfused``). It reads the decisions the lowerings made; it
# decides nothing itself.

class Explanation:
    """The lowering of one program, printable (NOTE [explained lowering]): ``rows``, one
    ``(instruction, tier, note)`` per instruction of the replay; ``replay``: which replay runs
    (``"unfused"``, ``"tiled"``, ``"compiled"``)."""

    def __init__(self, header, replay, rows):
        self.header = header
        self.replay = replay
        self.rows = rows

    def tiers(self):
        """How many instructions each tier runs, as a dict."""
        count = {}
        for _, tier, _ in self.rows:
            count[tier] = count.get(tier, 0) + 1
        return count

    def __str__(self):
        width = min(60, max((len(r[0]) for r in self.rows), default=0))
        lines = [self.header]
        for text, tier, note in self.rows:
            cell = text if len(text) <= width else text[:width - 3] + "..."
            lines.append(f"  {cell:<{width}}  {tier}{': ' + note if note else ''}")
        return "\n".join(lines)

    __repr__ = __str__


def _explain(exe):
    fusion = _fusion()
    run = exe.run_prog
    b = run.backend
    replay = "compiled" if exe.fused is not None else "tiled" if exe.tiled is not None else (
        "unfused")
    plan = exe.replay.plan   # (the replay's own: the buffers it writes into)
    n_staged = len(exe.prog.unoptimized.eqns) if exe.prog.unoptimized is not None else None
    header = (f"jit({exe.name}) on {b.name}: {len(exe.prog.eqns)} instructions after the passes"
              + (f" ({n_staged} staged)" if n_staged is not None else "")
              + f"; the {replay} replay runs {len(run.eqns)}"
              + ("" if exe.fused is not None else fusion.compiler_state(exe.prog)))
    rows = []
    for k, e in enumerate(run.eqns):
        if getattr(e.prim, "fused", False):
            tier = getattr(e.prim.kernel, "tier", "the group's replay, one backend call each")
            note = f"{len(e.prim.prog.eqns)} operations"
        else:
            tier = "one backend call"
            note = fusion.why_unfused(e, run)
        where = ("into " + plan.into[k].name + "'s buffer" if k in plan.into
                 else "pooled buffer" if any(v in plan.pooled for v in e.outs) else None)
        if where:
            note = f"{note}; {where}" if note else where
        rows.append((str(e).split(" = ", 1)[0] + " = " + e.prim.name, tier, note))
    return Explanation(header, replay, rows)
