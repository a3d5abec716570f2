"""Structured control flow: ``cond``, ``switch``, ``while_loop``, ``fori_loop``, ``scan``, ``map``.

NOTE [control flow]
-------------------
Each loop or branch is one primitive (``scan``, ``while_loop``, ``switch``) holding its
sub-programs: the user's function is traced once per call by the staging interpreter of ``jit``
(NOTE [staging]) into a ``Program`` (a ``_Body``), the arrays it reads from outside (values of
outer transforms, captured arrays and Tensors) become explicit arguments of the primitive (its
*closure*, so that derivatives and batching flow to them), and the primitive is bound on
``(*closure, *carry, *xs)``. Its rules build new loops out of transformed bodies, written with
the public transforms on the body's bound evaluation, so every rule is itself a loop primitive
and every order of transforms composes (hessian of a scan is a scan of scans of the body):

* impl: the loop in Python over the body's generated replay on raw arrays (NOTE [staging]),
  or for a long scan on NumPy the whole loop in a register machine or one numba function
  (NOTE [compiled scan] in ``_jit/scan.py``);
* JVP: the loop of the body's pushforward (carries and their tangents);
* batching: the loop of the vmapped body (carries batched along 0, xs along 1), where only
  the carries that a batched value reaches are batched (a fixed point over the body, as in
  JAX: a step size or counter stays one value for every lane);
* VJP of ``scan``: the forward keeps the carry history once (``save``: one stacked array per
  carry leaf, extra outputs of the primitive that the public function drops) when a reverse
  transform or the eager tape may need it; the backward is a reverse scan of the body's pullback
  that recomputes each step's forward from its saved carry. ``while_loop`` (its trip count is
  known at run time only) and a scan with a snapshot budget reverse through one more
  primitive, ``loop_vjp`` (NOTE [loop reverse]); ``fori_loop`` with Python int bounds is a scan.
* ``checkpoint``: as every VJP above keeps only a body's inputs and recomputes the body, a
  body given as ``checkpoint(f)`` (or traced into one checkpoint call) runs as ``f``; a
  checkpoint of part of a body stays a primitive (``_trace``).
* ``scan(unroll=k)``: a scan of ``k`` steps per iteration over xs reshaped to (n // k, k, ...),
  then a scan of the ``n % k`` steps left (``_scan_unrolled``): the same steps in order.
* ``switch``: the branch the index selects runs; its JVP/VJP are switches of the branches'
  pushforwards/pullbacks; a batched index runs every branch and selects with ``where``; a
  batched ``while_loop`` runs until every lane is done and freezes the finished lanes.

With no transform open, nothing staging and no Tensor that requires grad among the arguments,
the public functions run the user's function in a plain Python loop (no tracing cost) or call
the branch, except a ``scan`` (or ``fori_loop``) of ``_PLAIN_STEPS`` steps or more: the
replay skips the per-operation dispatch, which pays for the tracing from about 30 steps on
(measured on a 4-element body of 3 operations: 10 steps, plain 0.33 ms, traced 0.73 ms; 1000
steps, plain 26 ms, traced 12 ms). A ``while_loop``'s trip count is unknown: it stays plain.
"""

import contextlib
import sys

from ._core import _core
from ._core._core import Array, Tensor, bind
from ._dtypes import to_backend
from ._jit import JitInterpreter, Program, Var, _compile, _user_frame
from ._ops.creation import types_only
from ._jit.scan import compiled_scan
from . import _loop_reverse
from ._pytree import tree_flatten, tree_unflatten
from .backends import backend_of, default_backend, get_rng_state, set_rng_state
from .backends._random import same_rng_state

__all__ = ["cond", "switch", "while_loop", "fori_loop", "scan", "map"]


def _ops():
    from ._ops._namespace import ops
    return ops


def _func():
    return sys.modules["arrayad.func"]


def _custom():
    """The checkpoint's module (loaded by arrayad's __init__; looked up, not imported: it
    imports the transforms, which import this module)."""
    return sys.modules["arrayad._custom"]


def _is_array(x):
    return isinstance(x, Array) or (not isinstance(x, (bool, int, float, complex, str,
                                                       type(None), tuple, list, dict, slice))
                                    and hasattr(x, "shape") and hasattr(x, "dtype"))


def _inexact(dtype):
    return getattr(dtype, "kind", "") in ("f", "c")


def _type_str(shape, dtype):
    return f"{getattr(dtype, 'name', dtype)}[{', '.join(str(s) for s in shape)}]"


def _records(leaves):
    """Whether a Tensor among ``leaves`` requires grad under grad mode (the tape records it)."""
    return _core.is_grad_enabled() and any(isinstance(x, Tensor) and x.requires_grad
                                           for x in leaves)


def _plain(leaves):
    """Whether the call can run as a plain Python loop: no transform open, nothing staging,
    no Tensor among the arguments that would record (NOTE [control flow])."""
    return not (_core.interpreters() or _core.thread_state().staging is not None
                or _records(leaves))


_PLAIN_STEPS = 32


def _want_history(args):
    """Whether a scan's forward keeps its carry history: a reverse transform is open, or a
    Tensor argument that requires grad will record a node (the VJP recomputes it otherwise)."""
    return (any(isinstance(f, _core.GradInterpreter) for f in _core.interpreters())
            or _records(args))


def _fixed(tree):
    """A plain loop's result with NumPy scalars as 0-d arrays (what every arrayad function
    returns)."""
    leaves, spec = tree_flatten(tree)
    return tree_unflatten([_core.fix_scalar(x) if x is not None else x for x in leaves], spec)


def _as_array_leaf(x, like=None):
    """A Python scalar leaf as a 0-d array (of the backend of ``like``, a raw array)."""
    if _is_array(x):
        return x
    if isinstance(x, (bool, int, float, complex)):
        if like is not None:
            return backend_of(_core.raw_value(like)).xp.asarray(x)
        return default_backend().xp.asarray(x)
    raise TypeError(f"expected an array or a Python scalar, got {type(x).__name__}")


# ---------------------------------------------------------------------------------------------
# Bodies: a user function traced into a program (NOTE [control flow])

class _BodyInterpreter(JitInterpreter):
    """The staging interpreter, with the messages of a loop's or a branch's body."""

    def __init__(self, api, fname):
        super().__init__(fname)
        self.api = api

    def random_error(self):
        if self.api in ("cond", "switch"):
            where = ("run", "an operand")
        else:
            where = ("step", "xs of scan or map, or in the carry")
        return RuntimeError(
            f"{self.api}: the function {self.fname} draws random numbers{_user_frame()}; it is "
            f"traced once and its program replayed at every {where[0]}, so the same numbers "
            f"would come back. Draw them outside and pass them in (as {where[1]}).")

    def conversion_error(self, tracer, what):
        call = "bool() (an if/while on an array)" if what == "bool" else f"{what}()"
        return RuntimeError(
            f"{self.api}: {call} of a traced value in {self.fname}{_user_frame()}: the function "
            f"is staged into a program that must work for every value of its arguments' shapes "
            f"and dtypes. Use arrayad.where(c, a, b) to select elementwise, arrayad.func.cond or "
            f"switch to branch, arrayad.func.while_loop for a loop on a value.")


class _Body:
    """A traced function of flat leaves: ``prog`` takes (closure..., inputs...) and returns its
    flat outputs. ``replay`` runs it on raw arrays, ``evaluate`` binds its primitives (outer
    transforms see them)."""

    def __init__(self, prog, n_closure):
        self.prog = prog
        self.n_closure = n_closure
        self.name = prog.name
        self.in_avals = [(v.shape, v.dtype) for v in prog.in_vars]
        self.out_avals = [(a.shape, a.dtype) for a in prog.outs]
        self._replay = self._eval = None
        self.compiled = {}   # (reverse, save, nc) -> its scan as one numba function, or None
        self.masked = None   # (cond, the masked step of this body's while loop: _masked_step)

    def __repr__(self):
        return f"<body {self.name}: {len(self.prog.eqns)} instructions>"

    @property
    def replay(self):
        if self._replay is None:
            self._replay = _compile(self.prog, flat=True)
        return self._replay

    def evaluate(self, *args):
        if self._eval is None:
            self._eval = _compile(self.prog, bound=True, flat=True)
        return self._eval(*args)

    def out_inexact(self):
        return [_inexact(d) for _, d in self.out_avals]


def _trace(api, fname, fn, leaves):
    """Trace ``fn`` (flat leaves -> flat list of array leaves) on ``leaves`` (values of any
    level: only their shapes, dtypes and, for the trace, their values matter). Returns
    (body, closure values).

    A body that is one ``checkpoint`` call and nothing else is traced again with that call
    inlined: every rule that reverse-differentiates a body (scan's, switch's) keeps only the
    body's inputs and recomputes the body in the backward pass, which is all that the
    checkpoint asks for. Kept as a primitive, it would run a third time in the backward pass
    and call the user's function operation by operation at every step, instead of the body's
    replay (measured on a 10,000-step RK4 scan: 3x the time of the scan alone, the same peak
    memory). A checkpoint of part of a body stays: it lowers the backward pass's peak within
    one step."""
    inline = _custom()._inline_whole_checkpoint
    with inline(False):
        body, closure = _trace_once(api, fname, fn, leaves)
    eqns = body.prog.eqns
    if len(eqns) == 1 and getattr(eqns[0].params.get("spec"), "kind", None) == "checkpoint":
        with inline(True):
            body, closure = _trace_once(api, fname, fn, leaves)
    return body, closure


def _trace_once(api, fname, fn, leaves):
    vals = [x._value if isinstance(x, Tensor) else x for x in leaves]
    backend = None
    with _BodyInterpreter(api, fname) as interp:
        tracers = []
        for i, v in enumerate(vals):
            if backend is None:
                backend = backend_of(_core.raw_value(v))
            tracers.append(interp.new_input(v, f"argument {i}"))
        # (not staging_everything: an operation of an outer transform's values, ``p[0]`` of a
        # grad tracer the body captured, would be staged one level below that transform; its
        # result is a value of the outer level, a closure argument like any other. The
        # enclosing jit, if any, still stages what it would.)
        interp._enclosing_staging = _core.thread_state().staging
        out = fn(*tracers)
        outs = []
        for o in out:
            if not _is_array(o):
                o = _ops().asarray(o)
            outs.append(interp.output(o)[0])
    closure_vars, closure, consts = [], [], {}
    for var, val in interp.consts.items():
        if var in interp.captured or isinstance(val, Array):
            closure_vars.append(var)
            closure.append(val)
        else:
            consts[var] = val
    spec = tree_flatten(tuple(range(len(outs))))[1]
    prog = Program(fname, closure_vars + [t.var for t in tracers], consts, list(interp.eqns),
                   outs, None, spec, backend or default_backend())
    prog = prog.optimized(interp.folded)   # (NOTE [the trace's constants] in _jit/passes.py)
    # (the passes keep every input; an output folded to a literal becomes a constant array)
    for k, a in enumerate(prog.outs):
        if not isinstance(a, Var):
            raw = (backend or default_backend()).xp.asarray(a.value)
            var = Var(10 ** 9 + k, _core.shape_of(raw), _core.dtype_of(raw), "constant")
            prog.consts[var] = raw
            prog.outs[k] = var
    return _Body(prog, len(closure_vars)), closure


def _slice0(x):
    """Leaf ``x[0]`` of a stacked leaf (zeros of its element shape when it is empty)."""
    if _core.shape_of(x)[0] == 0:
        return _ops().sum(x, axis=0)
    return x[0, ...]


def _check_carry(api, fname, body, n_skip, n_carry, what="carry"):
    """The body's carry out must have the carry in's shapes and dtypes (JAX's rule)."""
    ins = body.in_avals[body.n_closure + n_skip: body.n_closure + n_skip + n_carry]
    _check_types(api, fname, ins, body.out_avals[:n_carry], what)


def _types(leaves):
    """(shape, dtype) of each array leaf."""
    return [(tuple(_core.shape_of(x)), _core.dtype_of(x)) for x in leaves]


def _step_checker(api, fname, leaves, what):
    """A check of a plain loop's carry at each step against ``leaves``, the initial one
    (NOTE [eager checks]): the arrays' own shapes and dtypes first (attribute reads), arrayad's
    types (``_check_types``, which raises) only where those differ, as they may between a raw
    array and a Tensor of one type."""
    ins = [(x.shape, x.dtype) for x in leaves]
    exact = None

    def check(out):
        nonlocal exact
        if [(x.shape, x.dtype) for x in out] != ins:
            if exact is None:
                exact = _types(leaves)
            _check_types(api, fname, exact, _types(out), what)
    return check


def _check_types(api, fname, ins, outs, what="carry"):
    """A body's carry out (``outs``, (shape, dtype) per leaf) must have the carry in's shapes and
    dtypes (``ins``): checked on the traced body (``_check_carry``) and at every step of a plain
    loop (NOTE [eager checks]), with one message."""
    for i, ((si, di), (so, do)) in enumerate(zip(ins, outs)):
        if si != so or di != do:
            which = "shapes" if si != so else "dtypes"
            raise TypeError(
                f"{api}: the function {fname} must return a {what} of the same structure, "
                f"shapes and dtypes as the {what} it is given; {what} leaf {i} is "
                f"{_type_str(si, di)} on input but {_type_str(so, do)} on output, so the "
                f"{which} do not match. Make them agree (e.g. cast with .astype, or start from "
                f"an initial value of the right dtype and shape).")


def _check_structure(api, fname, spec_in, spec_out, what="carry"):
    if spec_in != spec_out:
        raise TypeError(
            f"{api}: the function {fname} must return a {what} of the same structure as the "
            f"{what} it is given: got {spec_out} for {spec_in}. Return the same pytree "
            f"(same containers, same number of leaves).")


def _fname(f):
    return getattr(f, "__name__", type(f).__name__)


def _uncheckpointed(fn):
    """``fun`` for a loop's body or a branch given as ``checkpoint(fun)`` (``scan(checkpoint(step),
    ...)``, JAX's way of keeping only the carry per step): the reverse rules of every loop and
    branch already keep only the body's inputs and recompute it (``_trace`` says what the
    checkpoint would cost); the same holds for a body that is one checkpoint call."""
    return fn.fun if isinstance(fn, _custom()._Checkpointed) else fn


# ---------------------------------------------------------------------------------------------
# scan

def _scan_split(args, nc, ncarry):
    return list(args[:nc]), list(args[nc:nc + ncarry]), list(args[nc + ncarry:])


def _stack(xp, items, example):
    if not items:
        return xp.zeros((0,) + tuple(example.shape), dtype=example.dtype)
    return xp.stack(items, axis=0)


def _scan_impl(xp, *args, body, length, reverse, nc, ncarry, save, snapshots=None):
    # (NOTE [compiled scan]: the whole loop in a register machine or numba, on NumPy)
    compiled = compiled_scan(body, args, length, reverse, nc, ncarry, save)
    out = None if compiled is None else compiled(args, length)
    if out is not None:
        return out
    consts, carry, xs = _scan_split(args, nc, ncarry)
    f = body.replay
    nout = len(body.out_avals)
    ys = [[] for _ in range(nout - ncarry)]
    hist = [[] for _ in range(ncarry)] if save else None
    order = range(length - 1, -1, -1) if reverse else range(length)
    for i in order:
        if save:
            for h, c in zip(hist, carry):
                h.append(c)
        out = f(*consts, *carry, *[x[i, ...] for x in xs])
        carry = out[:ncarry]
        for y, o in zip(ys, out[ncarry:]):
            y.append(o)
    examples = []
    if length == 0:
        for shape, dtype in body.out_avals:
            examples.append(xp.zeros(shape, dtype=to_backend(dtype, xp)))
    if reverse:
        for y in ys:
            y.reverse()
        if save:
            for h in hist:
                h.reverse()
    res = list(carry)
    res += [_stack(xp, y, examples[ncarry + j] if length == 0 else None)
            for j, y in enumerate(ys)]
    if save:
        res += [_stack(xp, h, c) for h, c in zip(hist, carry)]
    return tuple(res)


def _scan_bind(api, fname, fn, consts, init, xs, length, reverse, save=None, snapshots=None):
    """Trace ``fn(*consts, *carry, *x) -> [*carry, *y]`` and bind the scan primitive. Returns
    (final carry leaves, stacked y leaves, carry history leaves or None). ``snapshots``: the
    most states its reverse pass keeps (NOTE [loop reverse]; None: every carry, kept by the
    forward when a reverse transform may need it)."""
    x0 = [_slice0(x) for x in xs]
    body, closure = _trace(api, fname, fn, list(consts) + list(init) + x0)
    _check_carry(api, fname, body, len(consts), len(init))
    args = list(closure) + list(consts) + list(init) + list(xs)
    if snapshots is not None:
        save = False
    elif save is None:
        save = _want_history(args)
    nc = len(closure) + len(consts)
    out = bind(scan_p, *args, body=body, length=length, reverse=reverse, nc=nc,
               ncarry=len(init), save=save, snapshots=snapshots)
    n = len(init)
    ny = len(body.out_avals) - n
    return list(out[:n]), list(out[n:n + ny]), (list(out[n + ny:]) if save else None)


def _pullback(body, prim, pos, outs, ct):
    """One step of a loop's pullback: the cotangents of ``body``'s inputs at the positions
    ``pos`` of ``prim`` (its inputs) for the cotangents ``ct`` of its outputs at ``outs``."""
    if not outs:
        return [_ops().zeros_like(prim[p]) for p in pos]

    def f(*d):
        full = list(prim)
        for p, v in zip(pos, d):
            full[p] = v
        out = body.evaluate(*full)
        return [out[j] for j in outs]
    _, pull = _func().vjp(f, *[prim[p] for p in pos])
    return list(pull(list(ct)))


def _scan_vjp(g, ans, *args, body, length, reverse, nc, ncarry, save, snapshots=None):
    ops = _ops()
    consts, init, xs = _scan_split(args, nc, ncarry)
    nx = len(xs)
    nout = len(body.out_avals)
    ny = nout - ncarry
    if not isinstance(g, tuple):
        g = (g,)
    if snapshots is not None:   # (NOTE [loop reverse])
        y_ok = body.out_inexact()[ncarry:]
        g_ys = [ops.zeros_like(ans[ncarry + j]) if ok and g[ncarry + j] is None
                else g[ncarry + j] for j, ok in enumerate(y_ok)]
        d_c, d_init, d_xs = _loop_reverse.bind_loop_vjp(
            "scan (VJP)", body.name, None, body.evaluate, [], consts, init, xs,
            list(g[:ncarry]), g_ys, length, snapshots, reverse)
        return tuple(d_c) + tuple(d_init) + tuple(d_xs)
    if save:
        hist = list(ans[ncarry + ny:])
    else:
        hist = list(bind(scan_p, *args, body=body, length=length, reverse=reverse, nc=nc,
                         ncarry=ncarry, save=True)[ncarry + ny:])
    in_ok = [_inexact(d) for _, d in body.in_avals]
    c_ok, carry_ok, x_ok = in_ok[:nc], in_ok[nc:nc + ncarry], in_ok[nc + ncarry:]
    out_ok = body.out_inexact()
    y_ok = out_ok[ncarry:]
    ci = [k for k in range(nc) if c_ok[k]]
    ji = [j for j in range(ncarry) if carry_ok[j]]
    xi = [k for k in range(nx) if x_ok[k]]
    yi = [j for j in range(ny) if y_ok[j]]

    def zeros_if_none(t, like):
        return ops.zeros_like(like) if t is None else t

    g_carry = [zeros_if_none(g[j], ans[j]) for j in ji]
    g_ys = [zeros_if_none(g[ncarry + j], ans[ncarry + j]) for j in yi]
    # (the history is an output too: its cotangent, where reverse-over-reverse sends one, adds
    # to that of the carry entering step i)
    g_hist = []
    if save:
        g_hist = [g[ncarry + ny + j] for j in ji]
        if all(t is None for t in g_hist):
            g_hist = []
        else:
            g_hist = [zeros_if_none(t, ans[ncarry + ny + j]) for t, j in zip(g_hist, ji)]
    nh = len(g_hist)
    acc0 = [ops.zeros_like(consts[k]) for k in ci]
    na, nacc = len(ji), len(ci)

    def bwd(*a):
        cs = list(a[:nc])
        ct_c = a[nc:nc + na]
        acc = a[nc + na:nc + na + nacc]
        rest = a[nc + na + nacc:]
        c, x = rest[:ncarry], rest[ncarry:ncarry + nx]
        gy, gh = rest[ncarry + nx:len(rest) - nh], rest[len(rest) - nh:]
        prim = cs + list(c) + list(x)
        pos = ci + [nc + j for j in ji] + [nc + ncarry + k for k in xi]
        if not pos:
            return []

        cts = _pullback(body, prim, pos, ji + [ncarry + j for j in yi],
                        list(ct_c) + list(gy))
        d_consts, d_carry, d_x = cts[:nacc], cts[nacc:nacc + na], cts[nacc + na:]
        if nh:
            d_carry = [a + b for a, b in zip(d_carry, gh)]
        return list(d_carry) + [s + d for s, d in zip(acc, d_consts)] + list(d_x)
    bwd.__name__ = f"vjp_{body.name}"
    carry_out, ys, _ = _scan_bind("scan (VJP)", bwd.__name__, bwd, consts,
                                  g_carry + acc0, hist + xs + g_ys + g_hist, length,
                                  not reverse)
    ct_init, ct_consts = carry_out[:na], carry_out[na:]
    res = [None] * len(args)
    for k, v in zip(ci, ct_consts):
        res[k] = v
    for j, v in zip(ji, ct_init):
        res[nc + j] = v
    for k, v in zip(xi, ys):
        res[nc + ncarry + k] = v
    return tuple(res)


def _jvp_of(body, prim, tangents_at):
    """(primal outputs, tangents of the inexact outputs) of ``body`` at ``prim`` with the
    tangents ``tangents_at`` ({position: tangent}); built with func.jvp (differentiable)."""
    func = _func()
    out_ok = body.out_inexact()
    pos = sorted(tangents_at)
    if not pos:
        out = body.evaluate(*prim)
        return list(out), [_ops().zeros_like(o) for o, ok in zip(out, out_ok) if ok]

    def f(*d):
        full = list(prim)
        for p, v in zip(pos, d):
            full[p] = v
        out = body.evaluate(*full)
        return ([o for o, ok in zip(out, out_ok) if ok], [o for o, ok in zip(out, out_ok)
                                                           if not ok])
    outs, touts, aux = func.jvp(f, tuple(prim[p] for p in pos),
                                tuple(tangents_at[p] for p in pos), has_aux=True)
    it, ia = iter(outs), iter(aux)
    primal = [next(it) if ok else next(ia) for ok in out_ok]
    return primal, list(touts)


def _tangent_positions(avals, tangents, base, instantiate, like):
    """{position: tangent} for the inexact inputs with a tangent (``instantiate``: zeros for
    the inexact ones without)."""
    ops = _ops()
    got = {}
    for k, ((_, d), t) in enumerate(zip(avals, tangents)):
        if not _inexact(d):
            continue
        if t is None:
            if instantiate:
                got[base + k] = ops.zeros_like(like[k])
        else:
            got[base + k] = t
    return got


def _scan_jvp(tangents, ans, *args, body, length, reverse, nc, ncarry, save, snapshots=None):
    consts, init, xs = _scan_split(args, nc, ncarry)
    tangents = list(tangents)
    avals = body.in_avals
    t_c = _tangent_positions(avals[:nc], tangents[:nc], 0, False, consts)
    t_carry = _tangent_positions(avals[nc:nc + ncarry], tangents[nc:nc + ncarry], nc, True,
                                 init)
    t_x = _tangent_positions(avals[nc + ncarry:], tangents[nc + ncarry:], nc + ncarry, False,
                             xs)
    pc, pj, px = sorted(t_c), sorted(t_carry), sorted(t_x)
    n_tc, n_tj, nx = len(pc), len(pj), len(xs)
    out_ok = body.out_inexact()
    ny = len(out_ok) - ncarry

    def push(*a):
        cs, tcs = a[:nc], a[nc:nc + n_tc]
        c, tj = a[nc + n_tc:nc + n_tc + ncarry], a[nc + n_tc + ncarry:nc + n_tc + ncarry + n_tj]
        rest = a[nc + n_tc + ncarry + n_tj:]
        x, tx = rest[:nx], rest[nx:]
        prim = list(cs) + list(c) + list(x)
        tan = dict(zip(pc, tcs))
        tan.update(zip(pj, tj))
        tan.update(zip(px, tx))
        primal, touts = _jvp_of(body, prim, tan)
        n_tcarry = sum(out_ok[:ncarry])
        return (primal[:ncarry] + touts[:n_tcarry] + primal[ncarry:] + touts[n_tcarry:])
    push.__name__ = f"jvp_{body.name}"
    carry_out, ys, hist = _scan_bind(
        "scan (JVP)", push.__name__, push, list(consts) + [t_c[p] for p in pc],
        list(init) + [t_carry[p] for p in pj], list(xs) + [t_x[p] for p in px], length,
        reverse, save, snapshots)
    n_tcarry = len(pj)
    res = []
    it = iter(carry_out[ncarry:])
    for j in range(ncarry):
        res.append(next(it) if out_ok[j] else None)
    ny_ok = out_ok[ncarry:]
    it = iter(ys[ny:])
    for j in range(ny):
        res.append(next(it) if ny_ok[j] else None)
    if save:
        it = iter(hist[ncarry:])
        for j in range(ncarry):
            res.append(next(it) if _inexact(avals[nc + j][1]) else None)
    del n_tcarry
    return tuple(res)


def _batch_size(args, dims):
    for a, d in zip(args, dims):
        if d is not None:
            return _core.shape_of(a)[d]
    raise ValueError("no batched argument")


def _move(x, d, to):
    ops = _ops()
    return x if d == to else ops.moveaxis(x, d, to)


def _batched_at0(x, d, size):
    """``x`` with its batch dim at 0 (an unbatched ``x`` broadcast to ``size`` lanes)."""
    ops = _ops()
    if d is None:
        shape = tuple(_core.shape_of(x))
        return ops.broadcast_to(ops.expand_dims(x, axis=0), (size,) + shape)
    return _move(x, d, 0)


def _batched_outputs(prog, batched_in):
    """Which outputs of ``prog`` depend on an input flagged in ``batched_in``: every output of
    an instruction depends on all of its inputs, a scan's as its carries' fixed point says
    (``_scan_batched``); all of them where an instruction may batch on its own (a rule told
    the vmap's randomness)."""
    if any(e.prim.batch_gets_interpreter for e in prog.eqns):
        return [True] * len(prog.outs)
    batched = {v for v, b in zip(prog.in_vars, batched_in) if b}
    for e in prog.eqns:
        flags = [isinstance(a, Var) and a in batched for a in e.ins]
        if not any(flags):
            continue
        if e.prim is scan_p:
            p = e.params
            outs = _scan_batched(p["body"], p["nc"], p["ncarry"], p["save"], flags)
        else:
            outs = [True] * len(e.outs)
        batched.update(v for v, b in zip(e.outs, outs) if b)
    return [isinstance(v, Var) and v in batched for v in prog.outs]


def _scan_batched(body, nc, ncarry, save, batched_in):
    """Which outputs of a scan (carries, ys, history) depend on its inputs flagged in
    ``batched_in``: a carry is batched where its input is or where a step makes it depend on a
    batched value (a fixed point, as JAX's scan batching rule finds)."""
    carry = list(batched_in[nc:nc + ncarry])
    while True:
        out = _batched_outputs(body.prog, list(batched_in[:nc]) + carry
                               + list(batched_in[nc + ncarry:]))
        new = [a or b for a, b in zip(carry, out[:ncarry])]
        if new == carry:
            return carry + out[ncarry:] + (carry if save else [])
        carry = new


def _scan_batch(args, dims, *, body, length, reverse, nc, ncarry, save, snapshots=None):
    func = _func()
    size = _batch_size(args, dims)
    consts, init, xs = _scan_split(args, nc, ncarry)
    dims = list(dims)
    # (only the carries that a batched value reaches are batched: the others, and the ys made
    # of them alone, stay one value for every lane)
    out_b = _scan_batched(body, nc, ncarry, save, [d is not None for d in dims])
    carry_b, ys_b = out_b[:ncarry], out_b[ncarry:len(body.out_avals)]
    c_dims = dims[:nc]
    carry = [_batched_at0(c, d, size) if b else c
             for c, d, b in zip(init, dims[nc:nc + ncarry], carry_b)]
    x_dims = dims[nc + ncarry:]
    xs_b = [x if d is None else _move(x, d, 1) for x, d in zip(xs, x_dims)]
    in_dims = tuple(c_dims) + tuple(0 if b else None for b in carry_b) \
        + tuple(None if d is None else 0 for d in x_dims)
    body_out_dims = tuple(0 if b else None for b in carry_b + ys_b)

    def batched(*a):
        return list(func.vmap(lambda *b: tuple(body.evaluate(*b)), in_dims=in_dims,
                              out_dims=body_out_dims)(*a))
    batched.__name__ = f"vmap_{body.name}"
    carry_out, ys, hist = _scan_bind("scan (vmap)", batched.__name__, batched, consts, carry,
                                     xs_b, length, reverse, save, snapshots)
    out = tuple(carry_out) + tuple(ys) + (tuple(hist) if save else ())
    out_dims = tuple(0 if b else None for b in carry_b) + tuple(1 if b else None for b in ys_b) \
        + (tuple(1 if b else None for b in carry_b) if save else ())
    return out, out_dims


def _loop_primitive(name, impl, vjp, jvp, batch):
    """A control-flow primitive (its params hold the traced bodies), registered with its rules."""
    p = _core.Primitive(name, impl, multiple_results=True)
    p.vjp, p.jvp, p.batch = vjp, jvp, batch
    _core.register_primitive(p)
    return p


scan_p = _loop_primitive("scan", _scan_impl, _scan_vjp, _scan_jvp, _scan_batch)


def scan(f, init, xs=None, length=None, reverse=False, unroll=1, *, checkpoint="all"):
    """Loop ``f`` over the leading axis of ``xs``, carrying state: ``jax.lax.scan``.

    Computes, as one primitive that every transform differentiates or batches as a whole::

        carry = init
        for x in xs:               # (from the end with reverse=True)
            carry, y = f(carry, x)
            ys.append(y)
        return carry, stack(ys)

    Parameters
    ----------
    f : callable
        ``f(carry, x) -> (carry, y)``; the carry it returns has the structure, shapes and
        dtypes of ``init``; ``y`` is a pytree of arrays (or None).
    init : pytree of arrays
        The initial carry.
    xs : pytree of arrays, optional
        Scanned along their leading axis (all of the same length); None: ``f`` gets None and
        ``length`` gives the number of steps.
    length : int, optional
        The number of steps, required when ``xs`` is None.
    reverse : bool, optional
        Run from the last element to the first (ys keep the order of xs).
    unroll : int or bool, optional
        Steps of ``f`` per iteration of the loop (True: every step in one iteration, as in
        JAX); the result is the same. Under transforms and ``jit`` each iteration replays
        ``unroll`` steps, which saves a little bookkeeping per step on small states at the cost
        of a longer trace.
    checkpoint : int or 'all', optional
        The most carries the reverse pass (grad, vjp) keeps at once: ``'all'`` (the default)
        keeps every step's and recomputes each step's own intermediates from it (what
        ``checkpoint(f)`` asks of a JAX scan); an int ``k`` keeps at most ``k``, placed by
        the binomial schedule (Revolve), and recomputes the others from them (the
        control-flow guide gives the cost).

    Returns
    -------
    (carry, ys)
        The final carry and the ys stacked along a new leading axis.

    Raises
    ------
    TypeError
        If ``f`` returns a carry of another structure, shape or dtype than ``init``.
    ValueError
        If the leaves of ``xs`` differ in length, neither ``xs`` nor ``length`` is given, or
        ``checkpoint`` is not ``'all'`` or a positive int.

    Examples
    --------
    A cumulative sum:

    >>> carry, ys = ad.func.scan(lambda c, x: (c + x, c + x), 0.0, np.arange(4.0))
    >>> carry, ys
    (array(6.), array([0., 1., 3., 6.]))
    """
    return _scan(f, init, xs, length, reverse, unroll, checkpoint, "scan")


def _scan(f, init, xs, length, reverse, unroll, checkpoint, api):
    """``scan``, its messages naming ``api``: fori_loop with int bounds and map are scans."""
    f = _uncheckpointed(f)
    fname = _fname(f)
    if not callable(f):
        raise TypeError(f"{api}: f must be a function f(carry, x) -> (carry, y), got "
                        f"{type(f).__name__}.")
    snapshots = _loop_reverse.check_checkpoint(api, fname, checkpoint)
    x_leaves, x_spec = tree_flatten(xs)
    x_mask = [x is not None for x in x_leaves]
    x_leaves = [x for x in x_leaves if x is not None]
    lengths = {_core.shape_of(x)[0] if len(_core.shape_of(x)) else None for x in x_leaves}
    if None in lengths:
        raise ValueError(f"{api}({fname}): every leaf of xs must have a leading axis to scan "
                         f"over; a 0-d leaf has none. Pass arrays of shape (length, ...).")
    if length is not None:
        length = int(length)
        lengths.add(length)
    if len(lengths) > 1:
        raise ValueError(f"{api}({fname}): the leaves of xs (and length=) disagree on the "
                         f"number of steps: {sorted(lengths)}. Give xs leaves the same leading "
                         f"size (and length= equal to it).")
    if not lengths:
        raise ValueError(f"{api}({fname}): pass xs (arrays to scan over) or length= (the number "
                         f"of steps) when xs is None.")
    length = lengths.pop()
    like = x_leaves[0] if x_leaves else None
    c_leaves, c_spec = tree_flatten(init)
    if like is None and c_leaves:
        like = next((c for c in c_leaves if _is_array(c)), None)
    c_leaves = [_as_array_leaf(c, like) for c in c_leaves]

    def unflat_x(vals):
        it = iter(vals)
        return tree_unflatten([next(it) if m else None for m in x_mask], x_spec)

    def split_out(out):
        if not (isinstance(out, tuple) and len(out) == 2):
            raise TypeError(f"{api}: the function {fname} must return a pair (carry, y), got "
                            f"{type(out).__name__}.")
        carry, y = out
        cl, cs = tree_flatten(carry)
        _check_structure(api, fname, c_spec, cs)
        yl, ys = tree_flatten(y)
        return cl, yl, ys

    if length < _PLAIN_STEPS and _plain(c_leaves + x_leaves):
        ops = _ops()
        check_step = _step_checker(api, fname, c_leaves, "carry")
        carry = tree_unflatten(c_leaves, c_spec)
        ys_list, y_spec = [], None
        order = range(length - 1, -1, -1) if reverse else range(length)
        for i in order:
            cl, yl, y_spec = split_out(f(carry, unflat_x([x[i, ...] for x in x_leaves])))
            cl = [_as_array_leaf(c, like) for c in cl]
            check_step(cl)
            carry = tree_unflatten(cl, c_spec)
            ys_list.append(yl)
        if reverse:
            ys_list.reverse()
        if length == 0:
            # (the ys' shapes come from one traced step: run it on the zeros of an element)
            x0 = [_slice0(x) for x in x_leaves]
            _, yl, y_spec = split_out(f(carry, unflat_x(x0)))
            ys = [ops.stack([_as_array_leaf(y, like)])[:0] if y is not None else None
                  for y in yl]
        else:
            ys = [None if col[0] is None else ops.stack([_as_array_leaf(y, like) for y in col])
                  for col in zip(*ys_list)]
        return _fixed(carry), _fixed(tree_unflatten(ys, y_spec))

    nc, nx = len(c_leaves), len(x_leaves)
    y_info = {}

    def body(*a):
        carry = tree_unflatten(list(a[:nc]), c_spec)
        cl, yl, ys = split_out(f(carry, unflat_x(list(a[nc:nc + nx]))))
        y_info["spec"] = ys
        y_info["mask"] = [y is not None for y in yl]
        return [_as_array_leaf(c, like) for c in cl] + [_as_array_leaf(y, like) for y in yl
                                                        if y is not None]
    body.__name__ = fname
    k = _unroll_steps(unroll, length, fname)
    if k > 1:
        carry, ys = _scan_unrolled(api, fname, body, c_leaves, x_leaves, length, reverse, k,
                                   snapshots)
    else:
        carry, ys, _ = _scan_bind(api, fname, body, [], c_leaves, x_leaves, length, reverse,
                                  snapshots=snapshots)
    it = iter(ys)
    y = tree_unflatten([next(it) if m else None for m in y_info["mask"]], y_info["spec"])
    return tree_unflatten(carry, c_spec), y


def _unroll_steps(unroll, length, fname):
    """Steps per iteration of the loop for ``scan``'s ``unroll`` (JAX's: True is every step)."""
    if unroll is True:
        return max(length, 1)
    if unroll is False:
        return 1
    if not isinstance(unroll, int) or unroll < 1:
        raise ValueError(f"scan({fname}): unroll must be a positive int or a bool (True: every "
                         f"step in one iteration), got {unroll!r}.")
    return min(unroll, max(length, 1))


def _scan_unrolled(api, fname, body, carry, xs, length, reverse, k, snapshots=None):
    """``scan`` with ``k`` steps of ``body`` per iteration of the loop: one scan over the
    ``length // k`` groups of ``k`` elements (xs reshaped to (groups, k, ...)), then one over
    the ``length % k`` left (the first elements when ``reverse``). The same steps in the same
    order: only the loop's iterations are fewer, its body larger (its replay skips a loop
    iteration's bookkeeping per step, and its passes see k steps at once)."""
    ops = _ops()
    groups, rest = divmod(length, k)
    nc = len(carry)
    split = rest if reverse else groups * k
    main = [x[split:, ...] if reverse else x[:split, ...] for x in xs]
    left = [x[:split, ...] if reverse else x[split:, ...] for x in xs]
    main = [ops.reshape(x, (groups, k) + tuple(_core.shape_of(x)[1:])) for x in main]

    def k_steps(*a):
        c, xk = list(a[:nc]), a[nc:]
        ys = [None] * k
        for j in (range(k - 1, -1, -1) if reverse else range(k)):
            out = body(*c, *[x[j, ...] for x in xk])
            c, ys[j] = out[:nc], out[nc:]
        return list(c) + [ops.stack(col) for col in zip(*ys)]
    k_steps.__name__ = fname
    c, ys_main, _ = _scan_bind(api, fname, k_steps, [], carry, main, groups, reverse,
                               snapshots=snapshots)
    ys_main = [ops.reshape(y, (groups * k,) + tuple(_core.shape_of(y)[2:])) for y in ys_main]
    if not rest:
        return c, ys_main
    c, ys_left, _ = _scan_bind(api, fname, body, [], c, left, rest, reverse,
                               snapshots=snapshots)
    pairs = zip(ys_left, ys_main) if reverse else zip(ys_main, ys_left)
    return c, [ops.concat([a, b], axis=0) for a, b in pairs]


def map(f, xs, *, batch_size=None):
    """``f`` applied to each element of ``xs`` along its leading axis, stacked: ``jax.lax.map``.

    ``arrayad.func.map`` is not in ``arrayad.func.__all__``: ``from arrayad.func import *``
    leaves the builtin ``map`` alone.

    Parameters
    ----------
    f : callable
        A function of one element (a pytree of arrays).
    xs : pytree of arrays
        Mapped over their leading axis.
    batch_size : int, optional
        JAX's option: ``f`` runs batched (``vmap``) on this many elements at a time, which is
        ``vmap(f, chunk_size=batch_size)(xs)``, with vmap's rules (no branching on a value:
        ``ad.where``). None: one element at a time, in a loop.

    Returns
    -------
    pytree of arrays
        ``f``'s results, stacked along a new leading axis.

    Raises
    ------
    ValueError
        If the leaves of ``xs`` differ in length, or ``batch_size`` is not a positive int.

    Examples
    --------
    >>> ad.func.map(lambda x: x ** 2, np.arange(3.0))
    array([0., 1., 4.])
    >>> ad.func.map(lambda x: x ** 2, np.arange(5.0), batch_size=2)
    array([ 0.,  1.,  4.,  9., 16.])
    """
    f = _uncheckpointed(f)
    if batch_size is not None:
        if not _is_static_int(batch_size) or batch_size < 1:
            raise ValueError(f"map({_fname(f)}): batch_size must be a positive int (elements "
                             f"per batched call of f) or None, got {batch_size!r}.")
        return _func().vmap(f, chunk_size=batch_size)(xs)

    def step(c, x):
        return c, f(x)
    step.__name__ = _fname(f)
    return _scan(step, (), xs, None, False, 1, "all", "map")[1]


# ---------------------------------------------------------------------------------------------
# fori_loop

def _is_static_int(v):
    """A Python int or a NumPy integer scalar (a static trip count, as in JAX)."""
    return (isinstance(v, int) and not isinstance(v, bool)) or (
        _np_integer is not None and isinstance(v, _np_integer))


try:
    from numpy import bool_ as _np_bool, errstate as _np_errstate, integer as _np_integer
    from numpy import ndarray as _np_ndarray
except ImportError:   # pragma: no cover
    _np_bool = _np_errstate = _np_integer = _np_ndarray = None


def _bound_type(v):
    """The integer type of a fori_loop bound: 'int' (a Python int: weak, it takes the other
    bound's type), a dtype's name, or None where ``v`` is no integer."""
    if isinstance(v, int) and not isinstance(v, bool):
        return "int"
    if _is_array(v) and _core.shape_of(v) == ():
        dtype = _core.dtype_of(v)
        if getattr(dtype, "kind", "") in ("i", "u"):
            return getattr(dtype, "name", str(dtype))
    return None


def _check_bounds(lower, upper):
    """fori_loop's bounds are integers of one integer type (JAX's rule; a Python int takes the
    other's): ``fori_loop(0, 3.5, ...)`` would otherwise run a number of steps that no one
    asked for."""
    types = [_bound_type(lower), _bound_type(upper)]
    if None in types or ("int" not in types and types[0] != types[1]):
        def name(v):
            if _is_array(v):
                return _type_str(_core.shape_of(v), _core.dtype_of(v))
            return f"{type(v).__name__} {v!r}"
        raise TypeError(
            f"fori_loop: lower and upper must be integers of the same integer type (Python "
            f"ints, NumPy integer scalars or 0-d integer arrays), got {name(lower)} and "
            f"{name(upper)}. Pass int bounds (e.g. int(n)), or cast an array bound with "
            f".astype to the other's dtype.")


def fori_loop(lower, upper, body_fun, init_val, *, unroll=None, checkpoint=None):
    """``for i in range(lower, upper): val = body_fun(i, val)``: ``jax.lax.fori_loop``.

    With Python int bounds (a static trip count) it is a ``scan``; with array bounds it is a
    ``while_loop``. Both differentiate in both modes.

    Parameters
    ----------
    lower, upper : int or 0-d integer array
        The bounds: integers of one integer type (a Python int takes the other bound's; NumPy
        integer scalars count as Python ints, as in JAX).
    body_fun : callable
        ``body_fun(i, val) -> val`` (``i`` a 0-d integer array), returning the structure,
        shapes and dtypes of ``init_val``.
    init_val : pytree of arrays
        The initial value.
    unroll : int or bool, optional
        With Python int bounds, ``scan``'s ``unroll`` (steps per iteration of the loop; the
        result is the same). With array bounds only None, 1 or False, as in JAX.
    checkpoint : int or 'all', optional
        The most values the reverse pass keeps at once (``scan``'s and ``while_loop``'s
        parameter). None (the default): ``'all'`` with int bounds, 1024 with array bounds.

    Returns
    -------
    pytree of arrays
        The final value.

    Raises
    ------
    TypeError
        If ``body_fun`` changes the value's structure, shapes or dtypes, or the bounds are not
        integers of one integer type (``fori_loop(0, 3.5, ...)``).
    ValueError
        If ``unroll`` is given with array bounds, or ``checkpoint`` is not ``'all'`` or a
        positive int.

    Examples
    --------
    >>> ad.func.fori_loop(0, 4, lambda i, x: x * 2.0, np.array(1.0))
    array(16.)
    """
    body_fun = _uncheckpointed(body_fun)
    fname = _fname(body_fun)
    _check_bounds(lower, upper)
    leaves, spec = tree_flatten(init_val)
    like = next((x for x in leaves if _is_array(x)), None)
    xp = (backend_of(_core.raw_value(like)) if like is not None else default_backend()).xp
    check_step = _step_checker("fori_loop", fname, [_as_array_leaf(x, like) for x in leaves],
                               "value")

    def checked(i, v):
        # (the value's check, named for fori_loop and its own leaves: the loop below carries
        # the counter too)
        out = body_fun(i, v)
        ol, os = tree_flatten(out)
        _check_structure("fori_loop", fname, spec, os, "value")
        check_step([_as_array_leaf(o, like) for o in ol])
        return out

    if _is_static_int(lower) and _is_static_int(upper):
        lower, upper = int(lower), int(upper)
        i0 = xp.asarray(lower, dtype=xp.int64)

        def step(c, _):
            i, v = c
            return (i + 1, checked(i, v)), None
        step.__name__ = fname
        (_, val), _ = _scan(step, (i0, init_val), None, max(upper - lower, 0), False,
                            1 if unroll is None else unroll,
                            "all" if checkpoint is None else checkpoint, "fori_loop")
        return val
    if unroll is not None and unroll is not False and unroll != 1:
        raise ValueError(f"fori_loop({fname}): unroll={unroll!r} needs Python int bounds (a "
                         f"static number of steps, run as a scan); with array bounds the loop "
                         f"is a while_loop, which does not unroll. Pass int bounds, or leave "
                         f"unroll out.")

    # (a static bound takes the array bound's dtype, as a Python int does in JAX)
    int_dtype = _core.raw_value(upper if _is_static_int(lower) else lower).dtype
    lo = xp.asarray(int(lower), dtype=int_dtype) if _is_static_int(lower) else lower
    hi = xp.asarray(int(upper), dtype=int_dtype) if _is_static_int(upper) else upper

    def body(c):
        i, h, v = c
        return i + 1, h, checked(i, v)
    body.__name__ = fname

    def cond_fun(c):
        return c[0] < c[1]
    _, _, val = _while_loop(cond_fun, body, (lo, hi, init_val), "fori_loop", checkpoint)
    return val


# ---------------------------------------------------------------------------------------------
# while_loop

# NOTE [compiled while]
# ---------------------
# A while loop's predicate decides after every step whether to go on, so its loop cannot be
# handed to the compiled-scan tiers as it is (NOTE [compiled scan]). Its masked step can:
# ``carry = where(pred(carry), body(carry), carry)``, with a counter of the steps taken, is a
# scan body whose carry stops changing at the first step the predicate is false. After
# ``_WHILE_PLAIN_STEPS`` replayed steps (most loops are short), ``_run_while`` runs chunks of
# that scan, of 16 steps, then twice as many each time up to 4,096, checking the predicate
# between chunks: at most one chunk's steps are run in vain (on the final carry, discarded), the
# carry and the count are the plain loop's. Where no tier takes the masked step (or the
# backend is not NumPy), the loop replays one step at a time, as before.
_WHILE_PLAIN_STEPS = 8


def _masked_step(cond, body, cc, bc, c):
    """The scan body ``(*cc, *bc, *carry, count) -> (*carry', count')`` of a while loop's
    masked step (NOTE [compiled while]), cached on ``body``; None where the loop has none."""
    if body.masked is not None and body.masked[0] is cond:
        return body.masked[1]
    ncc, nbc = len(cc), len(bc)
    ops = _ops()

    def step(*a):
        cs, bs, carry, count = a[:ncc], a[ncc:ncc + nbc], a[ncc + nbc:-1], a[-1]
        go = cond.evaluate(*cs, *carry)[0]
        new = body.evaluate(*bs, *carry)
        return [ops.where(go, v, old) for v, old in zip(new, carry)] + \
            [count + ops.astype(go, count.dtype)]
    step.__name__ = body.name
    xp = body.prog.backend.xp
    try:
        masked, closure = _trace("while_loop", body.name, step,
                                 list(cc) + list(bc) + list(c) + [xp.asarray(0, dtype=xp.int64)])
        masked = None if closure else masked
    except Exception:   # (a body that only its own replay runs: the plain loop)
        masked = None
    body.masked = (cond, masked)
    return masked


def _run_while(xp, cond, body, cc, bc, c, limit=None):
    """(final carry, number of steps) of a while loop on raw arrays (NOTE [compiled while]);
    with ``limit``, of at most that many steps (the loop's online reverse runs it in parts:
    NOTE [online snapshots])."""
    fc, fb = cond.replay, body.replay
    c, n = tuple(c), 0
    limit = float("inf") if limit is None else limit
    while n < min(_WHILE_PLAIN_STEPS, limit):
        if not bool(fc(*cc, *c)[0]):
            return c, n
        c, n = tuple(fb(*bc, *c)), n + 1
    if body.prog.backend.name != "numpy" or not all(isinstance(a, _np_ndarray)
                                                   for a in (*cc, *bc, *c)):
        masked = None
    else:
        masked = _masked_step(cond, body, cc, bc, c)
    chunk, nc, ncarry = 16, len(cc) + len(bc), len(c) + 1
    while n < limit and bool(fc(*cc, *c)[0]):
        steps = int(min(chunk, limit - n))
        args = (*cc, *bc, *c, xp.asarray(0, dtype=xp.int64))
        compiled = None if masked is None else compiled_scan(masked, args, steps, False, nc,
                                                              ncarry, False)
        out = None if compiled is None else compiled(args, steps)
        if out is None:   # (no tier takes it, or not yet: one chunk of plain steps)
            for _ in range(steps):
                c, n = tuple(fb(*bc, *c)), n + 1
                if not bool(fc(*cc, *c)[0]):
                    return c, n
            continue
        c, n = tuple(out[:len(c)]), n + int(out[len(c)])
        chunk = min(2 * chunk, 4096)
    return c, n


def _while_impl(xp, *args, cond, body, ncc, nbc, snapshots):
    cc, bc, c = args[:ncc], args[ncc:ncc + nbc], args[ncc + nbc:]
    return _run_while(xp, cond, body, cc, bc, c)[0]


def _while_vjp(g, ans, *args, cond, body, ncc, nbc, snapshots):
    # (NOTE [loop reverse]: the loop runs again, counting its steps and keeping snapshots)
    cc, bc, c = args[:ncc], args[ncc:ncc + nbc], args[ncc + nbc:]
    if not isinstance(g, tuple):
        g = (g,)
    d_bc, d_init, _ = _loop_reverse.bind_loop_vjp(
        "while_loop (VJP)", body.name, cond.evaluate, body.evaluate, list(cc), list(bc), list(c),
        [], list(g), [], None, snapshots, False)
    return (None,) * ncc + tuple(d_bc) + tuple(d_init)


def _check_predicate(api, fname, types):
    """A while_loop's cond_fun returns one boolean scalar (its output's (shape, dtype)s)."""
    if len(types) != 1 or types[0][0] != () or getattr(types[0][1], "kind", "") != "b":
        raise TypeError(
            f"{api}: cond_fun ({fname}) must return a boolean scalar (0-d bool array), got "
            f"{', '.join(_type_str(s, d) for s, d in types)}. Reduce it with "
            f"arrayad.all/any, or compare (x < n).")


def _predicate(api, fname, p):
    """A plain while_loop's predicate as a Python bool, checked as the traced one is."""
    if not (isinstance(p, bool) or (type(p) is _np_bool)):   # (NumPy's comparisons: np.bool_)
        _check_predicate(api, fname, _types([_as_array_leaf(p)]))
    return bool(p)


def _while_bind(api, fname, cond_fn, body_fn, cc, bc, init,
                snapshots=_loop_reverse.WHILE_SNAPSHOTS):
    """Trace ``cond_fn(*cc, *carry) -> [pred]`` and ``body_fn(*bc, *carry) -> [*carry]``, bind
    the primitive; returns the final carry leaves. ``snapshots``: the most states its reverse
    pass keeps (NOTE [loop reverse]; None: every one)."""
    cbody, cclos = _trace(api, fname + " (cond_fun)", cond_fn, list(cc) + list(init))
    _check_predicate(api, cond_fn.__name__, cbody.out_avals)
    bbody, bclos = _trace(api, fname, body_fn, list(bc) + list(init))
    _check_carry(api, fname, bbody, len(bc), len(init), "value")
    ccs = list(cclos) + list(cc)
    bcs = list(bclos) + list(bc)
    return list(bind(while_p, *ccs, *bcs, *init, cond=cbody, body=bbody, ncc=len(ccs),
                     nbc=len(bcs), snapshots=snapshots))


def _while_jvp(tangents, ans, *args, cond, body, ncc, nbc, snapshots):
    cc, bc, c = args[:ncc], args[ncc:ncc + nbc], args[ncc + nbc:]
    tangents = list(tangents)
    n = len(c)
    t_bc = _tangent_positions(body.in_avals[:nbc], tangents[ncc:ncc + nbc], 0, False, bc)
    t_c = _tangent_positions(body.in_avals[nbc:], tangents[ncc + nbc:], nbc, True, c)
    pb, pj = sorted(t_bc), sorted(t_c)
    nb_t, nj = len(pb), len(pj)

    def cond_fn(*a):
        return list(cond.evaluate(*a[:ncc], *a[ncc:ncc + n]))
    cond_fn.__name__ = cond.name

    def push(*a):
        bcs, tb = a[:nbc], a[nbc:nbc + nb_t]
        cs, tj = a[nbc + nb_t:nbc + nb_t + n], a[nbc + nb_t + n:]
        tan = dict(zip(pb, tb))
        tan.update(zip(pj, tj))
        primal, touts = _jvp_of(body, list(bcs) + list(cs), tan)
        return primal + touts
    push.__name__ = f"jvp_{body.name}"
    out = _while_bind("while_loop (JVP)", push.__name__, cond_fn, push, list(cc),
                      list(bc) + [t_bc[p] for p in pb], list(c) + [t_c[p] for p in pj],
                      snapshots)
    it = iter(out[n:])
    del nj
    return tuple(next(it) if _inexact(body.in_avals[nbc + j][1]) else None for j in range(n))


def _batched_while(cond, body, ncc, nbc, ncarry, size, cc_dims, bc_dims):
    """``cond_fn(*cc, *carry)`` and ``step(*cc, *bc, *carry)`` of a while loop whose carries
    are batched along 0 (its constants along ``cc_dims``/``bc_dims``): the loop goes on while
    any lane does, and a finished lane keeps its carry."""
    func = _func()
    ops = _ops()

    def preds(ccs, cs):
        return func.vmap(lambda *a: cond.evaluate(*a)[0],
                         in_dims=tuple(cc_dims) + (0,) * ncarry)(*ccs, *cs)

    def cond_fn(*a):
        return [ops.any(preds(a[:ncc], a[ncc:]))]
    cond_fn.__name__ = cond.name

    def step(*a):
        ccs, bcs, cs = a[:ncc], a[ncc:ncc + nbc], a[ncc + nbc:]
        p = preds(ccs, cs)
        new = func.vmap(lambda *b: tuple(body.evaluate(*b)),
                        in_dims=tuple(bc_dims) + (0,) * ncarry)(*bcs, *cs)
        out = []
        for o, old in zip(new, cs):
            mask = ops.reshape(p, (size,) + (1,) * (len(_core.shape_of(o)) - 1))
            out.append(ops.where(mask, o, old))   # (a finished lane keeps its carry)
        return out
    step.__name__ = f"vmap_{body.name}"
    return cond_fn, step


def _while_batch(args, dims, *, cond, body, ncc, nbc, snapshots):
    size = _batch_size(args, dims)
    cc, bc, c = args[:ncc], args[ncc:ncc + nbc], args[ncc + nbc:]
    dims = list(dims)
    n = len(c)
    carry = [_batched_at0(x, d, size) for x, d in zip(c, dims[ncc + nbc:])]
    cond_fn, step = _batched_while(cond, body, ncc, nbc, n, size, dims[:ncc],
                                   dims[ncc:ncc + nbc])
    out = _while_bind("while_loop (vmap)", step.__name__, cond_fn, step, list(cc),
                      list(cc) + list(bc), carry, snapshots)
    return tuple(out), (0,) * n


while_p = _loop_primitive("while_loop", _while_impl, _while_vjp, _while_jvp, _while_batch)


def while_loop(cond_fun, body_fun, init_val, *, checkpoint=None):
    """``while cond_fun(val): val = body_fun(val)``: ``jax.lax.while_loop``.

    Differentiable in both modes and batchable (a batched predicate runs until every lane is
    done, finished lanes keep their value), under ``jit`` too. Unlike JAX, reverse mode (grad,
    vjp, jacrev) works: its backward pass runs the loop again, counting the steps, and reverses
    them from snapshots of the value, at most ``checkpoint`` of them at once (the binomial
    schedule brings back the others; the control-flow guide gives the cost).

    Parameters
    ----------
    cond_fun : callable
        ``cond_fun(val) -> 0-d bool array``.
    body_fun : callable
        ``body_fun(val) -> val``, of the structure, shapes and dtypes of ``init_val``.
    init_val : pytree of arrays
        The initial value.
    checkpoint : int or 'all', optional
        The most values the reverse pass keeps at once: ``'all'`` keeps every step's; an int
        ``k`` keeps at most ``k`` and recomputes the others, as ``scan``'s ``checkpoint``.
        None (the default): 1024.

    Returns
    -------
    pytree of arrays
        The value when ``cond_fun`` first returns False.

    Raises
    ------
    TypeError
        If ``body_fun`` changes the value's structure, shapes or dtypes, or ``cond_fun`` does
        not return a boolean scalar.
    ValueError
        If ``checkpoint`` is not ``'all'`` or a positive int.

    Examples
    --------
    >>> ad.func.while_loop(lambda x: x < 10.0, lambda x: x * 2.0, np.array(1.0))
    array(16.)

    Its gradient, a loop whose number of steps depends on the value:

    >>> ad.func.grad(lambda x: ad.func.while_loop(lambda v: v < 10.0, lambda v: v * 2.0, x))(
    ...     np.array(1.5))
    array(8.)
    """
    return _while_loop(cond_fun, body_fun, init_val, "while_loop", checkpoint)


def _while_loop(cond_fun, body_fun, init_val, _api, checkpoint=None):
    """``while_loop``, its errors naming ``_api``: the function the user called
    (``fori_loop`` with array bounds is one)."""
    cond_fun, body_fun = _uncheckpointed(cond_fun), _uncheckpointed(body_fun)
    fname = _fname(body_fun)
    snapshots = _loop_reverse.WHILE_SNAPSHOTS if checkpoint is None else \
        _loop_reverse.check_checkpoint(_api, fname, checkpoint)
    for fn, nm in ((cond_fun, "cond_fun"), (body_fun, "body_fun")):
        if not callable(fn):
            raise TypeError(f"{_api}: {nm} must be a function, got {type(fn).__name__}.")
    leaves, spec = tree_flatten(init_val)
    like = next((x for x in leaves if _is_array(x)), None)
    leaves = [_as_array_leaf(x, like) for x in leaves]

    def check_out(out):
        ol, os = tree_flatten(out)
        _check_structure(_api, fname, spec, os, "value")
        return [_as_array_leaf(o, like) for o in ol]

    if _plain(leaves):
        # (NOTE [eager checks]: what _while_bind checks on the traced functions, checked on
        # each value)
        check_step = _step_checker(_api, fname, leaves, "value")
        cname = _fname(cond_fun)
        val = tree_unflatten(leaves, spec)
        while _predicate(_api, cname, cond_fun(val)):
            out = check_out(body_fun(val))
            check_step(out)
            val = tree_unflatten(out, spec)
        return _fixed(val)

    def cond_fn(*a):
        return [cond_fun(tree_unflatten(list(a), spec))]
    cond_fn.__name__ = _fname(cond_fun)

    def body_fn(*a):
        return check_out(body_fun(tree_unflatten(list(a), spec)))
    body_fn.__name__ = fname
    out = _while_bind(_api, fname, cond_fn, body_fn, [], [], leaves, snapshots)
    return tree_unflatten(out, spec)


# ---------------------------------------------------------------------------------------------
# switch / cond

def _switch_impl(xp, index, *args, branches, ncs, nops):
    i = int(index)
    i = min(max(i, 0), len(branches) - 1)
    start = sum(ncs[:i])
    consts = args[start:start + ncs[i]]
    operands = args[len(args) - nops:]
    return tuple(branches[i].replay(*consts, *operands))


def _check_branches(api, labels, results):
    """Every branch returns the same structure, shapes and dtypes: ``results`` holds (pytree
    spec or None, [(shape, dtype)] per leaf) of each branch, in ``labels``' order. Checked on
    the traced branches (``_switch_bind``) and on the branches of a call with a known index
    (NOTE [eager checks]), with one message."""
    spec0, types0 = results[0]
    for label, (spec, types) in zip(labels[1:], results[1:]):
        if spec0 is not None and spec is not None and spec != spec0:
            raise TypeError(
                f"{api}: every branch must return the same structure, shapes and dtypes; "
                f"{labels[0]} returns {spec0} but {label} returns {spec}. Return the same "
                f"pytree (same containers, same number of leaves) from each branch.")
        if len(types) != len(types0):
            raise TypeError(
                f"{api}: every branch must return the same structure, shapes and dtypes; "
                f"{labels[0]} returns {len(types0)} arrays but {label} returns {len(types)}. "
                f"Return the same pytree from each branch.")
        for j, ((s0, d0), (s1, d1)) in enumerate(zip(types0, types)):
            if s0 != s1 or d0 != d1:
                raise TypeError(
                    f"{api}: every branch must return the same structure, shapes and dtypes; "
                    f"output leaf {j} is {_type_str(s0, d0)} from {labels[0]} but "
                    f"{_type_str(s1, d1)} from {label}, so the "
                    f"{'shapes' if s0 != s1 else 'dtypes'} differ. Make them agree (cast with "
                    f".astype, broadcast, or return zeros of the other branch's shape).")


def _switch_bind(api, fnames, fns, index, operands, labels=None):
    """Trace each ``fns[k](*operands) -> [outs]`` and bind the switch primitive."""
    bodies, closures = [], []
    for fn, nm in zip(fns, fnames):
        b, clos = _trace(api, nm, fn, list(operands))
        bodies.append(b)
        closures.append(clos)
    _check_branches(api, labels or [b.name for b in bodies],
                    [(None, b.out_avals) for b in bodies])
    consts = [c for clos in closures for c in clos]
    return list(bind(switch_p, index, *consts, *operands, branches=tuple(bodies),
                     ncs=tuple(len(c) for c in closures), nops=len(operands)))


def _switch_jvp(tangents, ans, index, *args, branches, ncs, nops):
    consts, operands = list(args[:sum(ncs)]), list(args[sum(ncs):])
    tangents = list(tangents)[1:]
    everything = consts + operands
    # (the avals of every const and operand: from the branches' inputs)
    avals = []
    for k, b in enumerate(branches):
        avals += b.in_avals[:ncs[k]]
    avals += branches[0].in_avals[ncs[0]:]
    tan = _tangent_positions(avals, tangents, 0, False, everything)
    pos = sorted(tan)
    n = len(everything)
    out_ok = branches[0].out_inexact()

    def make(k):
        def push(*a):
            prim, ts = list(a[:n]), a[n:]
            t = dict(zip(pos, ts))
            start = sum(ncs[:k])
            idx = list(range(start, start + ncs[k])) + list(range(sum(ncs), n))
            local = {idx.index(p): v for p, v in t.items() if p in idx}
            primal, touts = _jvp_of(branches[k], [prim[i] for i in idx], local)
            return primal + touts
        push.__name__ = f"jvp_{branches[k].name}"
        return push
    fns = [make(k) for k in range(len(branches))]
    out = _switch_bind("switch (JVP)", [f.__name__ for f in fns], fns, index,
                       everything + [tan[p] for p in pos])
    nout = len(out_ok)
    it = iter(out[nout:])
    return tuple(next(it) if ok else None for ok in out_ok)


def _switch_vjp(g, ans, index, *args, branches, ncs, nops):
    func = _func()
    ops = _ops()
    consts, operands = list(args[:sum(ncs)]), list(args[sum(ncs):])
    everything = consts + operands
    n = len(everything)
    if not isinstance(g, tuple):
        g = (g,)
    out_ok = branches[0].out_inexact()
    gs = [ops.zeros_like(a) if t is None else t for t, a, ok in zip(g, ans, out_ok) if ok]
    avals = []
    for k, b in enumerate(branches):
        avals += b.in_avals[:ncs[k]]
    avals += branches[0].in_avals[ncs[0]:]
    pos = [i for i, (_, d) in enumerate(avals) if _inexact(d)]

    def make(k):
        def pull(*a):
            prim, cts = list(a[:n]), a[n:]
            start = sum(ncs[:k])
            idx = list(range(start, start + ncs[k])) + list(range(sum(ncs), n))
            mine = [p for p in pos if p in idx]
            res = {p: ops.zeros_like(prim[p]) for p in pos}
            if mine and cts:
                def f(*d):
                    full = [prim[i] for i in idx]
                    for p, v in zip(mine, d):
                        full[idx.index(p)] = v
                    out = branches[k].evaluate(*full)
                    return [o for o, ok in zip(out, out_ok) if ok]
                _, back = func.vjp(f, *[prim[p] for p in mine])
                res.update(zip(mine, back(list(cts))))
            return [res[p] for p in pos]
        pull.__name__ = f"vjp_{branches[k].name}"
        return pull
    fns = [make(k) for k in range(len(branches))]
    got = _switch_bind("switch (VJP)", [f.__name__ for f in fns], fns, index, everything + gs)
    res = [None] * (1 + n)
    for p, v in zip(pos, got):
        res[1 + p] = v
    return tuple(res)


def _switch_batch(args, dims, *, branches, ncs, nops):
    func = _func()
    ops = _ops()
    index, rest = args[0], list(args[1:])
    dims = list(dims)
    i_dim, rest_dims = dims[0], tuple(dims[1:])
    n = len(rest)

    def vmapped(k, vals):
        start = sum(ncs[:k])
        idx = list(range(start, start + ncs[k])) + list(range(sum(ncs), n))
        in_dims = tuple(rest_dims[i] for i in idx)
        return list(func.vmap(lambda *a: tuple(branches[k].evaluate(*a)),
                              in_dims=in_dims)(*[vals[i] for i in idx]))
    nout = len(branches[0].out_avals)
    if i_dim is None:
        fns = []
        for k in range(len(branches)):
            def fn(*a, k=k):
                return vmapped(k, a)
            fn.__name__ = f"vmap_{branches[k].name}"
            fns.append(fn)
        out = _switch_bind("switch (vmap)", [f.__name__ for f in fns], fns, index, rest)
        return tuple(out), (0,) * nout
    # a batched index: every branch runs, each lane selects its own (NOTE [control flow])
    size = _core.shape_of(index)[i_dim]
    idx = ops.clip(_move(index, i_dim, 0), 0, len(branches) - 1)
    result = vmapped(0, rest)
    for k in range(1, len(branches)):
        other = vmapped(k, rest)
        for j, o in enumerate(other):
            mask = ops.reshape(idx == k, (size,) + (1,) * (len(_core.shape_of(o)) - 1))
            result[j] = ops.where(mask, o, result[j])
    return tuple(result), (0,) * nout


switch_p = _loop_primitive("switch", _switch_impl, _switch_vjp, _switch_jvp, _switch_batch)


def _index_leaf(index, api):
    if isinstance(index, (bool, int)):
        return index
    if not _is_array(index):
        raise TypeError(f"{api}: the index must be an int or a 0-d integer array, got "
                        f"{type(index).__name__}.")
    if _core.shape_of(index) != ():
        raise TypeError(f"{api}: the index (predicate) must be a scalar (0-d array), got shape "
                        f"{_core.shape_of(index)}. For an elementwise choice use "
                        f"arrayad.where(cond, a, b); under vmap a batched scalar is fine.")
    return index


def switch(index, branches, *operands):
    """``branches[index](*operands)``: ``jax.lax.switch`` (the index is clamped to the range).

    One primitive: the branch taken is differentiated; under ``vmap`` with a batched index
    every branch runs and each lane selects its own result; under ``jit`` it is one
    instruction holding every branch.

    Parameters
    ----------
    index : int or 0-d integer array
        Which branch; clamped to ``[0, len(branches) - 1]``.
    branches : sequence of callables
        Functions of ``*operands`` returning the same structure, shapes and dtypes.
    *operands : pytrees of arrays
        The branches' arguments.

    Returns
    -------
    pytree of arrays
        The selected branch's result.

    Raises
    ------
    TypeError
        If the branches' results differ in structure, shape or dtype, or the index is not a
        scalar.

    Examples
    --------
    >>> ad.func.switch(1, [lambda x: x + 1.0, lambda x: x * 10.0], np.array(2.0))
    array(20.)
    """
    branches = [_uncheckpointed(b) for b in branches]
    if not branches or not all(callable(b) for b in branches):
        raise TypeError("switch: branches must be a non-empty sequence of functions.")
    return _switch_call("switch", index, branches, operands,
                        [f"branches[{k}] ({_fname(b)})" for k, b in enumerate(branches)])


# NOTE [eager checks]
# -------------------
# What the traced path checks (a branch's results against the other branches', a loop body's
# carry against the carry it was given, a while_loop's predicate), the plain path checks too
# (JAX checks both: it always traces): a plain loop compares each step's carry with the
# initial one, and a switch or cond whose index is known (a plain call, or a Python index
# under a transform) runs the branch it selects and then every other branch, for its
# results' types only. Those run on copies of the operands, so an in-place update in them
# reaches nothing (a raw array or a Tensor: a fresh Tensor of the same value, whose in-place
# updates rebind that Tensor alone; a tracer: its copy), with the random state put back
# after them, so that a draw in a branch not taken leaves the stream as the call without
# the check leaves it (and, its numbers unused, is taken as outside every transform: no
# vmap 'error' or jit refusal for it, ``types_only``). They cost a call of every branch, as
# the trace of every branch does on the traced path.

def _operand_copy(x):
    """``x`` for a branch run for its result types only (NOTE [eager checks])."""
    if isinstance(x, Tensor):
        return Tensor(x._value)
    if isinstance(x, Array):
        return x.__copy__()
    return Tensor(x) if _is_array(x) else x


def _branch_result(leaves, like):
    """(spec, [(shape, dtype)]) of a branch's result."""
    ol, os = tree_flatten(leaves)
    return os, _types([_as_array_leaf(o, like) for o in ol])


def _check_branches_not_taken(api, labels, branches, i, out, leaves, spec, like):
    """Run every branch but the ``i``-th (whose result is ``out``) for its result types, and
    check them (NOTE [eager checks])."""
    results = []
    state = get_rng_state()
    try:
        for k, b in enumerate(branches):
            if k == i:
                results.append(_branch_result(out, like))
            else:
                with _quiet(), types_only():
                    results.append(_branch_result(
                        b(*tree_unflatten([_operand_copy(x) for x in leaves], spec)), like))
    finally:
        if not same_rng_state(get_rng_state(), state):
            set_rng_state(state)
    _check_branches(api, labels, results)


def _quiet():
    """NumPy's floating-point warnings off (a branch not taken may divide by the zero that the
    predicate guards against)."""
    if _np_errstate is None:   # pragma: no cover
        return contextlib.nullcontext()
    return _np_errstate(all="ignore")


def _switch_call(api, index, branches, operands, labels):
    index = _index_leaf(index, api)
    leaves, spec = tree_flatten(operands)
    like = next((x for x in leaves if _is_array(x)), None)
    leaves = [_as_array_leaf(x, like) for x in leaves]
    if _plain(leaves + ([index] if _is_array(index) else [])) or not _is_array(index):
        i = min(max(int(index), 0), len(branches) - 1)
        out = branches[i](*tree_unflatten(leaves, spec))
        if len(branches) > 1:
            _check_branches_not_taken(api, labels, branches, i, out, leaves, spec, like)
        return _fixed(out)
    if getattr(_core.dtype_of(index), "kind", "") == "b":
        index = _ops().astype(index, _ops().int32)
    info = {}

    def wrap(k, b):
        def fn(*a):
            out = b(*tree_unflatten(list(a), spec))
            ol, os = tree_flatten(out)
            if "spec" in info and info["spec"] != os:
                _check_branches(api, [info["label"], labels[k]],
                                [(info["spec"], []), (os, [])])
            info["spec"], info["label"] = os, labels[k]
            return [_as_array_leaf(o, like) for o in ol]
        fn.__name__ = _fname(b)
        return fn
    fns = [wrap(k, b) for k, b in enumerate(branches)]
    out = _switch_bind(api, [f.__name__ for f in fns], fns, index, leaves, labels)
    return tree_unflatten(out, info["spec"])


def cond(pred, true_fn, false_fn, *operands, **kwargs):
    """``true_fn(*operands) if pred else false_fn(*operands)``: ``jax.lax.cond``/``torch.cond``.

    One primitive: the branch taken is differentiated; under ``vmap`` with a batched predicate
    both branches run and ``where`` selects per lane; under ``jit`` it is one instruction
    holding both branches (no error on a traced predicate).

    Parameters
    ----------
    pred : bool or 0-d array
        The predicate (a 0-d boolean or number; nonzero is True).
    true_fn, false_fn : callable
        Functions of ``*operands`` returning the same structure, shapes and dtypes.
    *operands : pytrees of arrays
        The branches' arguments, one by one (JAX's form): ``cond(p, t, f, (x, y))`` calls
        ``t((x, y))``. ``arrayad.cond``, torch's ``cond``, calls ``t(x, y)`` there.
    operands : tuple, optional (keyword)
        torch.cond's spelling: the branches' arguments as one tuple (instead of ``*operands``).

    Returns
    -------
    pytree of arrays
        The result of the branch the predicate selects.

    Raises
    ------
    TypeError
        If the branches' results differ in structure, shape or dtype, or ``pred`` is not a
        scalar.

    Examples
    --------
    >>> ad.func.cond(np.array(True), lambda x: x + 1.0, lambda x: x - 1.0, np.array(2.0))
    array(3.)
    """
    if kwargs:
        if set(kwargs) != {"operands"} or operands:
            raise TypeError(f"cond: unexpected keyword arguments {sorted(kwargs)}: pass the "
                            f"operands positionally (JAX: cond(pred, t, f, *operands)) or as "
                            f"operands=(...) (torch.cond), not both.")
        operands = tuple(kwargs["operands"])
    true_fn, false_fn = _uncheckpointed(true_fn), _uncheckpointed(false_fn)
    for fn, nm in ((true_fn, "true_fn"), (false_fn, "false_fn")):
        if not callable(fn):
            raise TypeError(f"cond: {nm} must be a function, got {type(fn).__name__}.")
    pred = _index_leaf(pred, "cond")
    if _is_array(pred):
        kind = getattr(_core.dtype_of(pred), "kind", "")
        if kind != "b":
            pred = pred != 0
        pred = _ops().astype(pred, _ops().int32)
    else:
        pred = int(bool(pred))
    return _switch_call("cond", pred, [false_fn, true_fn], operands,
                        [f"false_fn ({_fname(false_fn)})", f"true_fn ({_fname(true_fn)})"])


def torch_cond(pred, true_fn, false_fn, *operands, **kwargs):
    """``torch.cond(pred, true_fn, false_fn, operands)``: the branches get ``*operands``.

    ``arrayad.cond`` is torch's ``cond``; ``arrayad.func.cond`` is JAX's
    (``jax.lax.cond(pred, true_fun, false_fun, *operands)``). They differ in one call only:
    ``cond(pred, t, f, (x, y))`` (one tuple or list) calls ``t(x, y)`` here, as torch does,
    and ``t((x, y))`` in ``arrayad.func.cond``, as JAX does. Everything else is the same
    function: several operands one by one (JAX's form) and ``operands=`` by keyword work here
    too, and the rules for every transform are ``arrayad.func.cond``'s.

    Parameters
    ----------
    pred : bool or 0-d array
        The predicate (a 0-d boolean or number; nonzero is True).
    true_fn, false_fn : callable
        Functions of the operands returning the same structure, shapes and dtypes.
    *operands
        ``(operands,)``: a tuple or list of the branches' arguments (torch's form); or the
        arguments one by one (JAX's form); or nothing.
    operands : tuple, optional (keyword)
        torch.cond's keyword for the tuple of the branches' arguments.

    Returns
    -------
    pytree of arrays
        The result of the branch the predicate selects.

    Raises
    ------
    TypeError
        If the branches' results differ in structure, shape or dtype, ``pred`` is not a
        scalar, or the operands are given both positionally and by keyword.

    Examples
    --------
    >>> x = np.array([1.0, 2.0])
    >>> ad.cond(np.array(True), lambda a, b: a + b, lambda a, b: a * b, (x, x))
    array([2., 4.])
    >>> ad.cond(False, lambda a, b: a + b, lambda a, b: a * b, operands=[x, x])
    array([1., 4.])
    """
    if len(operands) == 1 and type(operands[0]) in (tuple, list):   # (not a namedtuple)
        operands = tuple(operands[0])
    return cond(pred, true_fn, false_fn, *operands, **kwargs)


torch_cond.__name__ = torch_cond.__qualname__ = "cond"
