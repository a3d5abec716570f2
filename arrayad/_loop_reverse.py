"""Reverse mode of loops run from snapshots: ``while_loop`` (its trip count is known at run time
only) and ``scan``/``fori_loop`` with a snapshot budget (``checkpoint=k``).

NOTE [loop reverse]
-------------------
The VJP of a ``scan`` that keeps every carry is a reverse scan of the body's pullback
(``_scan_vjp`` in ``_control.py``): its history has a shape known when it is traced. A
``while_loop``'s history has not, and a long scan's may not fit in memory. Both reverse through
one primitive, ``loop_vjp``, whose inputs are the loop's (body and predicate constants, initial
carry, xs) and the cotangents of its results (final carry, ys), and whose results are the
cotangents of the loop's inputs: shapes the trace fixes whatever the trip count. Its run
(``_loop_vjp_impl``, on raw arrays like every primitive's) does what no traced program can:

1. for a while loop, run it forward to count its steps (``_run_while``: NOTE [compiled while]),
   keeping the first carries of its parts with a budget (NOTE [online snapshots]);
2. cut the ``n`` steps into blocks (``_blocks``): with ``checkpoint="all"`` one block of every
   step; with a budget of ``k`` carries, blocks of ``k // 2`` steps, whose starting carries (at
   most ``k - k // 2`` of them held at once) come back by the binomial schedule of Griewank's
   Revolve (``reverse_sweep``): ``b`` blocks cost about ``t * b`` more block runs forward, ``t``
   the smallest with ``C(k - k // 2 + t, t) >= b`` (``sweeps``);
3. reverse the blocks from the last: run the block forward keeping its carries (a scan with
   ``save``), then the scan the other way of ``back``, one step of the body's pullback as a scan
   body traced once (carry: the cotangent of the carry and the constants' so far; xs: the saved
   carries, the xs and the ys' cotangents; ys: the xs' cotangents).

Both scans of a block go through the compiled-scan tiers where they take its body (NOTE
[compiled scan]): the cost of a block is a call of a tier, about 30-100 microseconds on top
of its steps, so a small budget over many tiny steps would pay that many times (the RK4 rows of
``benchmarks/loop_checkpoints.py``: 32 carries over 10^6 steps took 39 times the forward pass).
Where that many calls are due, the whole schedule runs in one numba function instead:

NOTE [compiled sweep]
---------------------
On NumPy, where the body and ``back`` lower to scalar statements (``scan_lower.py``) and the
schedule above would call the tiers at least ``SWEEP_MIN_CALLS`` times (``_jit/scan.py``),
``CompiledSweep`` (``_jit/scan_numba.py``) writes one numba module: three loops of the numba
tier's source (the body for its carry only; the body keeping the carry entering each step; the
pullback ``back`` from the last step) and ``kernel``, ``reverse_sweep`` over integers. Its unit
is ``u = min(SWEEP_UNIT, k // 4)`` steps (8; at least one): the schedule reverses the
``ceil(n / u)`` units from ``k - u + 1`` states, held in the rows of a ``(k + 1, elements)``
array per dtype whose rows above the schedule's stack are free. A part of ``m <= h`` units is
reversed by advancing to each unit's first state, into the rows from the part's own up, then
unit by unit from the last: the unit's carries kept in the rows from its first state's up (over
the units already reversed), the pullback over them. That holds at most ``k`` states (``k + 1``
where a part is down to one state, as in the Python driver, whose extra state the advance
makes). Reversing ``n`` steps then costs ``t`` forward runs of each step at most, ``C(k - u + 1
+ t, t) >= n / u``, one more keeping each unit's carries, and one step of the pullback: 10^6
steps from 32 states, ``u = 8``, ``t = 5``. Single steps as the unit would recompute about as
many (``t = 6``, 5.66 advances per step counted), but Revolve then reverses nearly every step
by itself, at a call of each loop (about 50 ns each): five times the calls of units of 8 steps
(the RK4 benchmark's reverse took 185 ms instead of 130). Those calls are between numba
functions; the Python driver's are of the tiers, 30-100 us each, one per block.

The values are the Python driver's: a step computes the same whatever schedule recomputes it
(up to an ulp of a libm function between the tiers, NOTE [compiled scan]), and the cotangents
are summed over the steps in the same order (the tests compare the two). A reverse scan runs in
the loop's order over its xs and ys' cotangents read from the end, and its xs' cotangents are
turned back. Whatever the numba tier does not take (larger values, instructions it does not
know, other backends, numba missing or failing to compile) runs the Python driver, as does a
schedule of fewer calls (``SWEEP_MIN_CALLS``, about a second of them: compiling costs 5-10
seconds the first time, about a second in a later process, from numba's on-disk cache).

NOTE [online snapshots]
-----------------------
A while loop's count is known once it has run, so the schedule of its ``n`` steps could only
start after a first pass that counted them, then ran forward again to the blocks' starts. With a
budget of ``k >= 2`` carries, that first pass (``_online_starts``) keeps, besides the count,
the carries at every multiple of a spacing, ``(k - k // 2) // 2`` steps to start with (a block
of the other half of the budget), at most ``k // 2`` of them: when one more comes, every other
one goes and the spacing doubles (a two-level scheme). The parts between them are then
reversed from the last, each from its first carry with the other ``k - k // 2`` (the blocks
and binomial schedule above, within a part). A loop of up to ``k // 2`` times the first spacing
(131,072 steps for the default 1,024) thus runs each step forward twice besides its pullback:
the first pass, and its part keeping its carries, where counting first ran it three times. In
a longer loop the spacing has doubled, and each part is reversed by the binomial schedule
within it. (Stumm and Walther's online checkpointing would place the snapshots for fewer
recomputations once a loop turns out long; it is not done here.) Where the compiled sweep takes
the loop (NOTE [compiled sweep]), it runs from the initial carry, the first pass having been
its count, and the parts' first carries are dropped.

The rules of ``loop_vjp`` are loops of ``loop_vjp`` again, so every order of
transforms composes with a dynamic trip count:

* batching: ``loop_vjp`` of the batched loop (every input batched; a while loop's finished lanes
  keep their carry through a ``where``, whose pullback passes the cotangent of a finished lane
  through unchanged, as the Python loop of that lane would);
* JVP (forward over reverse: ``jacfwd(grad)``): with ``B(a, g)`` the cotangent of the inputs
  ``a`` for the cotangent ``g`` of the results, ``dB = B(a, dg) + H_g(a) da``, which is the ``a``
  part of ``loop_vjp`` of the loop's JVP (carrying tangents) at ``(a, da)`` for the cotangents
  ``(dg, g)`` of its (primal, tangent) results;
* VJP (reverse over reverse): for a cotangent ``u`` of ``B``'s results, the ``a`` part of
  ``loop_vjp`` of the JVP loop at ``(a, u)`` for the cotangents ``(0, g)``, and, for ``g``, the
  tangent ``dF(a) u`` of the loop's results: the JVP loop run forward.
"""

import math

from ._core import _core
from ._core._core import bind
from ._jit.scan import compiled_sweep

# A ``while_loop`` (or ``fori_loop`` with array bounds) keeps at most this many carries for its
# reverse pass unless told otherwise (``checkpoint=``): a loop of up to 512 steps is one block,
# reversed with no recomputation beyond its count; a longer one recomputes its blocks' starts.
WHILE_SNAPSHOTS = 1024


def _control():
    import sys
    return sys.modules["arrayad._control"]


def _ops():
    from ._ops._namespace import ops
    return ops


def check_checkpoint(api, fname, checkpoint):
    """The snapshot budget of ``checkpoint=`` (None for ``"all"``), or a ValueError that names
    the parameter and what it takes."""
    if checkpoint == "all" and isinstance(checkpoint, str):
        return None
    ok = isinstance(checkpoint, int) and not isinstance(checkpoint, bool) and checkpoint >= 1
    if not ok:
        raise ValueError(
            f"{api}({fname}): checkpoint must be 'all' (keep every state for the reverse pass) "
            f"or a positive int (the most states the reverse pass keeps at once; fewer cost "
            f"more recomputation), got {checkpoint!r}. Pass checkpoint=1 or more.")
    return int(checkpoint)


# ---------------------------------------------------------------------------------------------
# The binomial schedule

def _beta(s, t):
    """Steps that ``s`` held states reverse with at most ``t`` advances of each step."""
    return math.comb(s + t, t)


def sweeps(n, s):
    """The fewest advances of each step that reverse ``n`` steps from ``s`` held states (the
    repetition number of Revolve)."""
    t = 0
    while _beta(s, t) < n:
        t += 1
    return t


def reverse_sweep(advance, visit, p0, c0, n, held):
    """Visit the steps ``p0 + n - 1`` down to ``p0`` (``visit(p, state_p)``), from ``c0``, the
    state at ``p0``, holding at most ``held`` states at once (``c0`` among them); new states come
    from ``advance(state_p, p, k)``, the state at ``p + k``. The first snapshot goes where both
    parts reverse within ``sweeps(n, held)`` advances of each step (Griewank's binomial bound);
    the part before it waits on a stack (its state is one of those held) while the part after
    it is reversed with one state fewer."""
    stack = [(p0, c0, n, held)]
    while stack:
        p0, c0, n, held = stack.pop()
        while n > 0:
            if n <= held:   # (room for every state: one pass forward)
                states = [c0]
                for p in range(p0, p0 + n - 1):
                    states.append(advance(states[-1], p, 1))
                for k in range(n - 1, -1, -1):
                    visit(p0 + k, states.pop())
                break
            if held <= 1:   # (one state: each step from it)
                for k in range(n - 1, -1, -1):
                    visit(p0 + k, advance(c0, p0, k) if k else c0)
                break
            m = max(1, min(n - 1, _beta(held, sweeps(n, held) - 1)))
            stack.append((p0, c0, m, held))
            p0, c0, n, held = p0 + m, advance(c0, p0, m), n - m, held - 1


# ---------------------------------------------------------------------------------------------
# The primitive

def _positions(body, nbc, ncarry, nx):
    """The inexact (differentiable) positions of a loop body: constants, carries, xs, ys."""
    inexact = _control()._inexact
    ins = [inexact(d) for _, d in body.in_avals]
    ny = len(body.out_avals) - ncarry
    return ([k for k in range(nbc) if ins[k]], [j for j in range(ncarry) if ins[nbc + j]],
            [k for k in range(nx) if ins[nbc + ncarry + k]],
            [j for j in range(ny) if inexact(body.out_avals[ncarry + j][1])])


def _blocks(snapshots, n):
    """(steps per block, states held between blocks) for a budget of ``snapshots`` states
    (None: every state, one block): half the budget holds the states that start blocks, half
    the history of the block being reversed."""
    if snapshots is None:
        return max(n, 1), 1
    size = max(1, snapshots // 2)
    return size, max(1, snapshots - size)


def _loop_vjp_impl(xp, *args, cond, body, back, length, ncc, nbc, ncarry, nx, snapshots,
                   reverse):
    scan_impl = _control()._scan_impl
    nbk = back.n_closure
    bk, args = args[:nbk], args[nbk:]
    cc, bc = args[:ncc], args[ncc:ncc + nbc]
    init = args[ncc + nbc:ncc + nbc + ncarry]
    xs = args[ncc + nbc + ncarry:ncc + nbc + ncarry + nx]
    cts = args[ncc + nbc + ncarry + nx:]
    bi, ji, xi, yi = _positions(body, nbc, ncarry, nx)
    ct = list(cts[:len(ji)])
    gy = cts[len(ji):]
    nb, nj = len(bi), len(ji)
    starts = None
    if length is None and snapshots is not None and snapshots >= 2:
        # (a while loop: its parts' first carries come with its count, NOTE [online snapshots])
        n, starts = _online_starts(xp, cond, body, cc, bc, init, snapshots // 2,
                                   max(1, (snapshots - snapshots // 2) // 2))
    elif length is None:   # (run it to count its steps)
        n = _control()._run_while(xp, cond, body, cc, bc, init)[1]
    else:
        n = length
    acc = [xp.zeros_like(bc[k]) for k in bi]
    size, held = _blocks(snapshots, n)
    if n and snapshots is not None:   # (the whole schedule in one numba function, where it pays)
        blocks = -(-n // size)
        sweep = compiled_sweep(body, back, nbk, nbc, ncarry, nj + nb, args + bk,
                               (sweeps(blocks, held) + 2) * blocks)
        if sweep is not None:
            starts = None   # (the sweep's states are its own: the parts' first carries go)
            out = sweep(bk, bc, init, xs, ct, acc, gy, n, snapshots, reverse)
            if out is not None:
                carry, d_xs = out
                return tuple(carry[nj:] + carry[:nj] + d_xs)
    d_xs = {}   # first element of a block -> the cotangents of its xs

    def elements(p, k):
        """The slice of xs that positions p .. p + k - 1 read (in the order of the loop)."""
        return slice(n - p - k, n - p) if reverse else slice(p, p + k)

    def run(c, p, k, save):
        sl = elements(p, k)
        return scan_impl(xp, *bc, *c, *[x[sl, ...] for x in xs], body=body, length=k,
                         reverse=reverse, nc=nbc, ncarry=ncarry, save=save)

    def reverse_part(c0, p0, m, budget):
        """Reverse the steps p0 .. p0 + m - 1 from ``c0``, the carry at p0, holding at most
        ``budget`` carries (None: every one)."""
        size, held = _blocks(budget, m)

        def advance(c, j, k):   # (k blocks from the start of block j)
            p = p0 + j * size
            return tuple(run(c, p, min(k * size, p0 + m - p), False)[:ncarry])

        def visit(j, c):
            nonlocal ct, acc
            p = p0 + j * size
            k = min(size, p0 + m - p)
            out = run(c, p, k, True)
            hist = out[len(out) - ncarry:]
            sl = elements(p, k)
            # (the block's pullback: a scan the other way over its history, NOTE [loop
            # reverse])
            out = scan_impl(xp, *bk, *bc, *ct, *acc, *hist, *[x[sl, ...] for x in xs],
                            *[g[sl, ...] for g in gy], body=back, length=k,
                            reverse=not reverse, nc=nbk + nbc, ncarry=nj + nb, save=False)
            ct, acc = list(out[:nj]), list(out[nj:nj + nb])
            d_xs[sl.start] = out[nj + nb:]

        reverse_sweep(advance, visit, 0, tuple(c0), -(-m // size), held)

    if n and starts is None:
        reverse_part(init, 0, n, snapshots)
    elif n:   # (the parts from the last, each from its first carry with the other half)
        ends = [p for p, _ in starts[1:]] + [n]
        for (p, c), end in reversed(list(zip(starts, ends))):
            if end > p:
                reverse_part(c, p, end - p, snapshots - snapshots // 2)
    out = list(acc) + list(ct)
    firsts = sorted(d_xs)
    for k, m in enumerate(xi):
        if not n:
            out.append(xp.zeros_like(xs[m]))
        elif len(firsts) == 1:
            out.append(d_xs[firsts[0]][k])
        else:
            out.append(xp.concat([d_xs[s][k] for s in firsts], axis=0))
    return tuple(out)


def _online_starts(xp, cond, body, cc, bc, init, most, part):
    """(steps of the while loop, [(p, carry at step p)] at most ``most`` of them, every
    multiple of a spacing from ``part`` steps up, doubled to stay within ``most``): NOTE
    [online snapshots]."""
    run_while = _control()._run_while
    starts, c, n, spacing = [(0, tuple(init))], tuple(init), 0, part
    while True:
        want = spacing - n % spacing
        c, k = run_while(xp, cond, body, cc, bc, c, limit=want)
        n += k
        if k < want:   # (the loop stopped)
            return n, starts
        starts.append((n, c))
        if len(starts) > most:   # (every other one: the spacing doubles)
            spacing *= 2
            starts = [(p, s) for p, s in starts if p % spacing == 0]


class _LoopRules:
    """The rules of one application of ``loop_vjp`` (NOTE [loop reverse]), built from its
    arguments and params."""

    def __init__(self, args, params):
        p = self.params = params
        self.body, self.cond = p["body"], p["cond"]
        self.ncc, self.nbc, self.ncarry, self.nx = p["ncc"], p["nbc"], p["ncarry"], p["nx"]
        self.length, self.snapshots, self.reverse = p["length"], p["snapshots"], p["reverse"]
        self.npc = p["back"].n_closure
        a = list(args)
        self.args = a
        a = a[self.npc:]
        ncc, nbc, ncarry, nx = self.ncc, self.nbc, self.ncarry, self.nx
        self.cc, self.bc = a[:ncc], a[ncc:ncc + nbc]
        self.init, self.xs = a[ncc + nbc:ncc + nbc + ncarry], a[ncc + nbc + ncarry:][:nx]
        self.bi, self.ji, self.xi, self.yi = _positions(self.body, nbc, ncarry, nx)
        cts = a[ncc + nbc + ncarry + nx:]
        self.gc, self.gy = cts[:len(self.ji)], cts[len(self.ji):]
        self.ny = len(self.body.out_avals) - ncarry
        self.name = self.body.name

    def _full(self, values, at, n):
        """A list of ``n`` with ``values`` at the positions ``at``, None elsewhere."""
        out = [None] * n
        for k, v in zip(at, values):
            out[k] = v
        return out

    def _results(self, d_bc, d_init, d_xs):
        """loop_vjp's results (inexact positions) out of the three lists of ``bind_loop_vjp``."""
        return ([d_bc[k] for k in self.bi] + [d_init[j] for j in self.ji]
                + [d_xs[k] for k in self.xi])

    def _jvp_loop(self):
        """The loop carrying tangents (NOTE [loop reverse]): ``cond(*cc, *c, *tc)`` and
        ``step(*bc, *tbc, *c, *tc, *x, *tx) -> [*c, *tc, *y, *ty]``, tangents of the inexact
        positions only."""
        ctl = _control()
        body, cond = self.body, self.cond
        nbc, ncarry, nx, ncc = self.nbc, self.ncarry, self.nx, self.ncc
        bi, ji, xi = self.bi, self.ji, self.xi
        at = bi + [nbc + j for j in ji] + [nbc + ncarry + k for k in xi]

        def step(*a):
            bcs, r = list(a[:nbc]), a[nbc:]
            tb, r = r[:len(bi)], r[len(bi):]
            c, r = list(r[:ncarry]), r[ncarry:]
            tc, r = r[:len(ji)], r[len(ji):]
            x, tx = list(r[:nx]), r[nx:]
            primal, touts = ctl._jvp_of(body, bcs + c + x, dict(zip(at, list(tb) + list(tc)
                                                                    + list(tx))))
            return primal[:ncarry] + touts[:len(ji)] + primal[ncarry:] + touts[len(ji):]
        step.__name__ = f"jvp_{self.name}"

        def cond_fn(*a):
            return list(cond.evaluate(*a[:ncc], *a[ncc:ncc + ncarry]))
        cond_fn.__name__ = f"jvp_{self.name}"
        return (cond_fn if cond is not None else None), step

    def _reverse_jvp_loop(self, api, t_bc, t_init, t_xs, ct_primal_c, ct_primal_y):
        """``bind_loop_vjp`` of the loop carrying tangents ``t_*`` (of the inexact positions),
        for the cotangents ``ct_primal_*`` of its primal results and this loop's own
        cotangents (``gc``, ``gy``) for its tangent results."""
        cond_fn, step = self._jvp_loop()
        nj, ny = len(self.ji), self.ny
        g_carry = self._full(ct_primal_c, self.ji, self.ncarry) + list(self.gc)
        g_ys = self._full(ct_primal_y, self.yi, ny) + list(self.gy)
        return bind_loop_vjp(api, step.__name__, cond_fn, step, self.cc, self.bc + t_bc,
                             self.init + t_init, self.xs + t_xs, g_carry, g_ys, self.length,
                             self.snapshots, self.reverse), nj

    def _instantiate(self, ts, values):
        ops = _ops()
        return [ops.zeros_like(v) if t is None else t for t, v in zip(ts, values)]

    def jvp(self, tangents):
        t = list(tangents)[self.npc:]
        ncc, nbc, ncarry, nx = self.ncc, self.nbc, self.ncarry, self.nx
        t_bc, t_init = t[ncc:ncc + nbc], t[ncc + nbc:ncc + nbc + ncarry]
        t_xs, t_g = t[ncc + nbc + ncarry:ncc + nbc + ncarry + nx], t[ncc + nbc + ncarry + nx:]
        ta_bc = self._instantiate([t_bc[k] for k in self.bi], [self.bc[k] for k in self.bi])
        ta_c = self._instantiate([t_init[j] for j in self.ji], [self.init[j] for j in self.ji])
        ta_x = self._instantiate([t_xs[k] for k in self.xi], [self.xs[k] for k in self.xi])
        tg = self._instantiate(t_g, list(self.gc) + list(self.gy))
        nj = len(self.ji)
        (d_bc, d_init, d_xs), _ = self._reverse_jvp_loop(
            f"{self._api()} (JVP)", ta_bc, ta_c, ta_x, tg[:nj], tg[nj:])
        return tuple(self._results(d_bc, d_init, d_xs))

    def _api(self):
        return "while_loop" if self.length is None else "scan"

    def vjp(self, u):
        ctl = _control()
        ops = _ops()
        u = list(u) if isinstance(u, (tuple, list)) else [u]
        nb, nj = len(self.bi), len(self.ji)
        res = [None] * len(self.args)
        if all(x is None for x in u):
            return tuple(res)
        u_bc = self._instantiate(u[:nb], [self.bc[k] for k in self.bi])
        u_c = self._instantiate(u[nb:nb + nj], [self.init[j] for j in self.ji])
        u_x = self._instantiate(u[nb + nj:], [self.xs[k] for k in self.xi])
        api = f"{self._api()} (VJP of VJP)"
        zc = [ops.zeros_like(g) for g in self.gc]
        zy = [ops.zeros_like(g) for g in self.gy]
        (d_bc, d_init, d_xs), _ = self._reverse_jvp_loop(api, u_bc, u_c, u_x, zc, zy)
        # (the cotangent of g: the tangent of the loop's results along u, the loop carrying
        # tangents run forward)
        cond_fn, step = self._jvp_loop()
        if self.length is None:
            out = ctl._while_bind(api, step.__name__, cond_fn, step, list(self.cc),
                                  list(self.bc) + u_bc, list(self.init) + u_c)
            d_g = out[self.ncarry:]
        else:
            carry, ys, _ = ctl._scan_bind(api, step.__name__, step, list(self.bc) + u_bc,
                                          list(self.init) + u_c, list(self.xs) + u_x,
                                          self.length, self.reverse, save=False)
            d_g = carry[self.ncarry:] + ys[self.ny:]
        start = self.npc + self.ncc
        for k in range(self.nbc):
            res[start + k] = d_bc[k]
        start += self.nbc
        for j in range(self.ncarry):
            res[start + j] = d_init[j]
        start += self.ncarry
        for k in range(self.nx):
            res[start + k] = d_xs[k]
        start += self.nx
        for k, d in enumerate(d_g):
            res[start + k] = d
        return tuple(res)

    def batch(self, dims):
        ctl = _control()
        func = ctl._func()
        ops = _ops()
        args = self.args
        size = ctl._batch_size(args, dims)
        dims = list(dims)[self.npc:]
        ncc, nbc, ncarry, nx = self.ncc, self.nbc, self.ncarry, self.nx
        body, cond = self.body, self.cond

        def at0(vals, ds):
            return [ctl._batched_at0(v, d, size) for v, d in zip(vals, ds)]

        def at1(vals, ds):   # (stacked values: the batch after the steps' axis)
            out = []
            for v, d in zip(vals, ds):
                if d is None:
                    shape = tuple(_core.shape_of(v))
                    v = ops.broadcast_to(ops.expand_dims(v, axis=1),
                                         (shape[0], size) + shape[1:])
                else:
                    v = ctl._move(v, d, 1)
                out.append(v)
            return out
        o = ncc + nbc + ncarry + nx
        # (every input batched: the cotangent of a constant is then one per lane, as vmap of
        # the loop's gradient wants it)
        cc, bc = at0(self.cc, dims[:ncc]), at0(self.bc, dims[ncc:ncc + nbc])
        init = at0(self.init, dims[ncc + nbc:ncc + nbc + ncarry])
        xs = at1(self.xs, dims[ncc + nbc + ncarry:o])
        gc = at0(self.gc, dims[o:o + len(self.ji)])
        gy = at1(self.gy, dims[o + len(self.ji):])

        api = f"{self._api()} (vmap of VJP)"
        g_carry = self._full(gc, self.ji, ncarry)
        g_ys = self._full(gy, self.yi, self.ny)
        if cond is None:
            def step(*a):
                return list(func.vmap(lambda *b: tuple(body.evaluate(*b)))(*a))
            step.__name__ = f"vmap_{self.name}"
            d_bc, d_init, d_xs = bind_loop_vjp(api, step.__name__, None, step, [], bc, init, xs,
                                               g_carry, g_ys, self.length, self.snapshots,
                                               self.reverse)
        else:   # (a finished lane keeps its carry: NOTE [loop reverse])
            cond_fn, step = ctl._batched_while(cond, body, ncc, nbc, ncarry, size, [0] * ncc,
                                               [0] * nbc)
            d_bc, d_init, d_xs = bind_loop_vjp(api, step.__name__, cond_fn, step, cc, cc + bc,
                                               init, [], g_carry, [], None, self.snapshots,
                                               False)
            d_bc = d_bc[ncc:]
        out = self._results(d_bc, d_init, d_xs)
        out_dims = [0] * (len(self.bi) + len(self.ji)) + [1] * len(self.xi)
        return tuple(out), tuple(out_dims)


def _loop_vjp_vjp(u, ans, *args, **params):
    return _LoopRules(args, params).vjp(u)


def _loop_vjp_jvp(tangents, ans, *args, **params):
    return _LoopRules(args, params).jvp(tangents)


def _loop_vjp_batch(args, dims, **params):
    return _LoopRules(args, params).batch(dims)


loop_vjp_p = _core.Primitive("loop_vjp", _loop_vjp_impl, multiple_results=True)
loop_vjp_p.vjp, loop_vjp_p.jvp, loop_vjp_p.batch = _loop_vjp_vjp, _loop_vjp_jvp, _loop_vjp_batch
_core.register_primitive(loop_vjp_p)


def bind_loop_vjp(api, fname, cond_fn, body_fn, cc, bc, init, xs, g_carry, g_ys, length,
                  snapshots, reverse):
    """The cotangents of a loop's inputs for those of its results, reversed from snapshots.

    The loop: ``while cond_fn(*cc, *carry): carry = body_fn(*bc, *carry)`` (``length`` None), or
    ``length`` steps of ``body_fn(*bc, *carry, *x) -> [*carry, *y]`` over ``xs`` (a scan, from the
    end with ``reverse``). ``g_carry``/``g_ys``: cotangents of the final carry and the stacked
    ys (a carry's None: zero; every inexact y's is given). Returns three lists, cotangents of
    ``bc``, ``init`` and ``xs`` (None where the input is not inexact)."""
    ctl = _control()
    ops = _ops()
    x0 = [ctl._slice0(x) for x in xs]
    body, bclos = ctl._trace(api, fname, body_fn, list(bc) + list(init) + x0)
    ctl._check_carry(api, fname, body, len(bc), len(init))
    bcs = list(bclos) + list(bc)
    ccs = []
    cond = None
    if cond_fn is not None:
        cond, cclos = ctl._trace(api, fname + " (cond_fun)", cond_fn, list(cc) + list(init))
        ccs = list(cclos) + list(cc)
    nbc, ncarry, nx = len(bcs), len(init), len(xs)
    bi, ji, xi, yi = _positions(body, nbc, ncarry, nx)
    gc = [ops.zeros_like(init[j]) if g_carry[j] is None else g_carry[j] for j in ji]
    gy = [g_ys[j] for j in yi]   # (the callers give every inexact y's: zeros of its shape)
    pos = bi + [nbc + j for j in ji] + [nbc + ncarry + k for k in xi]

    nj, nb = len(ji), len(bi)

    def back_fn(*a):
        """One step of the pullback as a scan body: constants ``bc``; carry the cotangent of
        the carry and the constants' so far; xs the carry entering the step, its x and the
        cotangent of its y; y the cotangent of x."""
        cs, ct, acc = list(a[:nbc]), list(a[nbc:nbc + nj]), list(a[nbc + nj:nbc + nj + nb])
        r = a[nbc + nj + nb:]
        prim = cs + list(r[:ncarry + nx])
        d = ctl._pullback(body, prim, pos, ji + [ncarry + j for j in yi],
                          ct + list(r[ncarry + nx:]))
        return d[nb:nb + nj] + [s + e for s, e in zip(acc, d[:nb])] + d[nb + nj:]
    back_fn.__name__ = f"vjp_{fname}"
    leaves = bcs + list(gc) + [ops.zeros_like(bcs[k]) for k in bi] + list(init) + x0 \
        + [ctl._slice0(g) for g in gy]
    back, bkclos = ctl._trace(api, back_fn.__name__, back_fn, leaves)
    out = bind(loop_vjp_p, *bkclos, *ccs, *bcs, *init, *xs, *gc, *gy, cond=cond, body=body,
               back=back, length=length, ncc=len(ccs), nbc=nbc, ncarry=ncarry, nx=nx,
               snapshots=snapshots, reverse=reverse)
    it = iter(out)
    d_bcs = [None] * nbc
    for k in bi:
        d_bcs[k] = next(it)
    d_init = [None] * ncarry
    for j in ji:
        d_init[j] = next(it)
    d_xs = [None] * nx
    for k in xi:
        d_xs[k] = next(it)
    return d_bcs[len(bclos):], d_init, d_xs
