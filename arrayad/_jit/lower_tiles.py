"""The NumPy replay of fused groups in tiles (NOTE [tiled replay]): no compiler, NumPy's own loops.

NOTE [tiled replay]
-------------------
The unfused replay of an elementwise chain on a large array makes one pass over memory per
operation: each result (8 MB for 10^6 float64 elements) is written out and read back by the next
operation, which waits on memory rather than computing. The tiled replay runs a fused group
(NOTE [fusion]) as a loop over tiles of ``TILE_BYTES`` of its flattened elements: each tile goes
through the group's operations, one NumPy call each, into a few tile-sized buffers that stay in
the processor's cache, and only the group's outputs are written out (into slices of the output
arrays). The calls are the ones the unfused replay makes (NumPy's ufuncs with ``out=``, or the
primitive's own backend call where it has no ufunc), on contiguous pieces of the same data, so
the results are the unfused replay's, bit for bit, but for float64 ``sin`` and ``cos``, which
are vectorised where the C library offers it (NOTE [vector math]); a float64 group of arithmetic
and vector functions runs in the tile machine instead (NOTE [tile machine], below), with no
Python between its operations, also on small arrays; and nothing is compiled: a
program is tiled when it is staged, at no cost beyond writing the loop's Python source. A large
constant of one value read by the group (the gradient's seed, 1 broadcast to the input's shape)
is read as a number (``_uniform_constants``).

What it costs is one NumPy call per operation per tile instead of per operation, and an ``out=``
call costs more than a plain one on a small array, so groups of fewer than ``MIN_ELEMENTS``
elements stay unfused. Measured single-threaded (CPU time) on the gradient of the 13-operation
chain (``benchmarks/compare.py``'s ``chain``, with ``sin`` and ``cos``) and of the same chain
with ``exp(x) * x`` in their place, tiled over unfused: 1.21x and 1.14x at 16 elements, 0.89x
and 1.02x at 256, 0.64x and 0.97x at 1,024, 0.44x and 0.85x at 4,096, 0.43x and 1.06x at 16,384;
at 10^6, 0.53x for tiles of 8 KiB, 0.39x for 16 KiB, 0.30x for 32 KiB, 0.27x for 64 KiB and
0.25x for 128 KiB (a few of these buffers at once must stay in a core's cache).
"""

import math

import numpy as np

from .. import config as _config
from . import vector_math
from .._core._vector_math import SHORT_ROW
from .fusion import _writable, fuse_elementwise, fusible, register_tiler
from .ir import Eqn, Lit, Var
from .passes import _fresh, dce
from .replay import _callable, numpy_ufunc

# The bytes of one tile of a group's values: a few such buffers live at once per group, which
# stay in a core's L2 cache (512 kB to 2 MB on current x86 and ARM cores) while each of NumPy's
# calls still has enough elements to run its vectorised loop at full speed.
TILE_BYTES = 65536
# Groups of fewer elements replay unfused (see the module's docstring).
MIN_ELEMENTS = 1024


def tileable(e):
    """Whether the tiled replay computes ``e`` tile by tile: each operand has the result's shape
    or is 0-d or a Python number (so a tile of the result reads the same tile of each operand)."""
    out = e.outs[0]
    if e.prim.xp_name is None:   # (an impl of arrayad's own may look at the whole array)
        return False
    if getattr(out.dtype, "kind", "c") == "c":
        # (NumPy's vectorised complex products round as fused multiply-adds, its scalar loop
        # for the last few elements does not: a tile would move which elements get which)
        return False
    for a in e.ins:
        if isinstance(a, Var):
            if a.shape not in (out.shape, ()):
                return False
        elif type(a.value) not in (bool, int, float, complex):
            return False
    return True


def accept(e):
    """Whether ``e`` joins a tiled group: ``tileable``, with a large enough result; or, from
    ``MACHINE_MIN`` elements, an operation of the tile machine (NOTE [tile machine]), which
    also reads broadcast operands and selects (``where``)."""
    n = math.prod(e.outs[0].shape)
    if n >= MACHINE_MIN and _machine_op(e) is not None:
        return True
    return tileable(e) and n >= MIN_ELEMENTS


def _period(a, shape):
    """How a tile of a result of ``shape`` reads the operand ``a``: 0, a piece of it (it has
    the result's shape); its element count ``p``, where it is broadcast along the leading axes
    (its shape without leading 1s is the result's last axes: element i of the result reads
    element i % p); ``(dims, strides)`` where it is broadcast otherwise (a column, a middle
    axis: gathered into a tile buffer, its element strides 0 along the broadcast axes); None
    for a number (0-d, or a literal)."""
    if not isinstance(a, Var) or a.shape == ():
        return None
    if a.shape == shape:
        return 0
    dims = list(a.shape)
    while dims and dims[0] == 1:
        dims.pop(0)
    if tuple(dims) == tuple(shape[len(shape) - len(dims):]):
        return math.prod(dims)
    own = (1,) * (len(shape) - len(a.shape)) + tuple(a.shape)
    strides, step = [0] * len(shape), 1
    for d in range(len(shape) - 1, -1, -1):
        strides[d] = step if own[d] == shape[d] else 0
        step *= own[d]
    return tuple(shape), tuple(strides)


# NOTE [tile machine]
# -------------------
# A float64 group whose every operation is arithmetic (add, subtract, multiply, divide, negate,
# square, abs, sqrt) or a function of glibc's vector math library (NOTE [vector math]: sin, cos,
# exp, log, tanh, expm1, log1p) runs without Python between its operations: the tile machine of
# ``arrayad._core._vector_math`` executes the group as instructions of four ints over tiles of
# ``MACHINE_TILE`` elements, its temporaries tile-sized buffers in the cache, in loops the C
# compiler vectorises for the processor's widest registers. Arithmetic is IEEE, each operation
# rounded once as NumPy's (the same bits); the functions are libmvec's, within 4 ulp. With no
# Python call per operation and tile, it pays from ``MACHINE_MIN`` elements (a long program on
# small arrays, where the unfused replay pays a NumPy call per operation); other groups keep
# the tiled NumPy calls. The machine also reads operands broadcast along the leading axes (a
# Jacobian's or Hessian's rows times a vector, (16, 16) * (16,); ``_period``: element i reads
# element i % p, its tiles a multiple of a short row or dividing a long one, ``_machine_tile``),
# other broadcast operands (a column, (n, 1) in (n, k); a middle axis: gathered into a tile
# buffer before each tile) and runs ``where`` (a select; the structural zeros of NOTE [strong
# zeros] put one after each product with the basis) and comparisons (a condition, 1.0 or 0.0,
# read by a select or a cast in the same group; ``_machine_reads`` hands it a broadcast column
# and a cast condition as they are), and it ends a group with a sum, min or max along the
# last axis (rows of fewer than ``MACHINE_TILE`` values), or along the leading axes (rows of at
# most ``SHORT_ROW``, where NumPy's reduction is slow: NOTE [short reductions])
# (``_reduction``: the tile a multiple of the row, each tile's rows reduced after its
# operations, or accumulated in order, NumPy's pairwise sum along a row done the same way: the
# same bits), which NumPy's calls on tiles cannot: a group holding one of those that
# the machine cannot run is fused again without them (``lower``). On the 16-element chain's
# ``jit(hessian)`` the machine took 96 backend calls down to 20 and the time from 55 to 20-23
# us (CPU time, ``benchmarks/compare.py --only hessian16 --cpu-time``, 2026-12-07); the
# reductions keep a k-means distance matrix out of memory: ``jit`` of GradBench's kmeans cost
# went from 87 to 36 us at k=10, n=1000, d=8 (CPU time, 2026-12-08). (Signed zeros: the min
# or max of a row holding both 0.0 and -0.0 may be either, as with NumPy's own loops, whose
# answer depends on the row's length.)

MACHINE_TILE = 1024
MACHINE_MIN = 16
MACHINE_MIN_OPS = 8
BLOCK_ELEMENTS = 65536   # (outputs of groups up to this many values in all share one array)

_MACHINE_ARITHMETIC = {"add": "add", "subtract": "subtract", "multiply": "multiply",
                       "divide": "divide", "negative": "negative", "positive": "copy",
                       "square": "square", "abs": "abs", "sqrt": "sqrt"}
_BINARY = ("add", "subtract", "multiply", "divide")
# (comparisons of float64 values: a condition, 1.0 or 0.0, that a select or a float64 astype
# reads in the same group; a condition never leaves the machine, ``_machine_program``)
_COMPARISONS = ("equal", "not_equal", "less", "less_equal", "greater", "greater_equal")


def _machine_op(e):
    """(the tile machine's operation, the vector function it calls or None) for ``e``, or None
    where the machine does not compute it (NOTE [tile machine])."""
    found = vector_math.addresses()
    out = e.outs[0]
    compare = e.prim.xp_name in _COMPARISONS and len(e.ins) == 2
    if not found or getattr(out.dtype, "name", None) != ("bool" if compare else "float64"):
        return None
    select = e.prim.name == "where" and len(e.ins) == 3
    for k, a in enumerate(e.ins):
        want = "bool" if select and k == 0 else "float64"
        if isinstance(a, Var):
            if getattr(a.dtype, "name", None) != want:
                return None
        elif type(a.value) not in ((bool,) if want == "bool" else (int, float)):
            return None
    if select:
        return ("select", None)
    name = e.prim.xp_name
    if compare:
        return (name, None)
    first_var = bool(e.ins) and isinstance(e.ins[0], Var)
    if name == "pow":   # (x ** 2: NumPy's operator squares)
        ok = (len(e.ins) == 2 and first_var and not isinstance(e.ins[1], Var)
              and e.ins[1].value == 2)
        return ("square", None) if ok else None
    op = _MACHINE_ARITHMETIC.get(name)
    if op is not None:
        return (op, None) if op in _BINARY or first_var else None
    if name in found and first_var and len(e.ins) == 1:
        return ("call", name)
    return None


_REDUCTIONS = {"sum": 1, "min": 2, "max": 3}   # (the machine's kinds: its C enum; +3 along
# the leading axes)


def _reduction(e):
    """(the tile machine's kind of reduction, its row's length) for ``e`` (NOTE [tile
    machine]): a sum, minimum or maximum of a float64 value along its last axis (rows of fewer
    than ``MACHINE_TILE`` elements) or along all its leading axes (rows of at most
    ``SHORT_ROW``); or None."""
    kind = _REDUCTIONS.get(e.prim.name)
    if kind is None or len(e.ins) != 1 or not set(e.params) <= {"axis", "keepdims"}:
        return None
    a = e.ins[0]
    if (not isinstance(a, Var) or getattr(a.dtype, "name", None) != "float64" or not a.shape
            or not vector_math.addresses()):
        return None
    ndim = len(a.shape)
    axis = e.params.get("axis")
    axes = (tuple(range(ndim)) if axis is None else
            tuple(sorted(k % ndim for k in (axis if isinstance(axis, tuple) else (axis,)))))
    if axes == (ndim - 1,):
        row = a.shape[-1]
    elif axes == tuple(range(len(axes))) and len(axes) < ndim:
        row, kind = math.prod(a.shape[len(axes):]), kind + 3
    else:
        return None
    # (over the leading axes, NumPy's own loop runs along rows longer than ``SHORT_ROW``
    # vectorised, faster than the machine's accumulation: NOTE [short reductions])
    longest = MACHINE_TILE - 1 if kind <= 3 else SHORT_ROW
    return (kind, row) if 1 < row <= longest or row == 1 and kind <= 3 else None


def _places(sub, buffered):
    """Where each value of the group ``sub`` is written in a tile: ``("out", j)`` for its j-th
    output (a slice of that output array), ``("tmp", t)`` for a value of an instruction that
    ``buffered[k]`` says writes into a temporary tile buffer; the others are absent (a new tile).
    A buffer is reused once the value it holds is read for the last time, also by the
    instruction that writes over it (an elementwise operation reads each element before it
    writes it). Returns (places, how many buffers)."""
    outs = {}
    for j, v in enumerate(sub.outs):
        outs.setdefault(v, j)
    last = {}
    for k, e in enumerate(sub.eqns):
        for a in e.ins:
            if isinstance(a, Var):
                last[a] = k
    places, free, owner, n_bufs = {}, [], {}, 0
    for k, (e, into_buffer) in enumerate(zip(sub.eqns, buffered)):
        for a in dict.fromkeys(e.ins):
            if isinstance(a, Var) and last[a] == k and a in owner:
                free.append(owner.pop(a))
        v = e.outs[0]
        if v in outs:
            places[v] = ("out", outs[v])
        elif into_buffer:
            if free:
                t = free.pop()
            else:
                t, n_bufs = n_bufs, n_bufs + 1
            owner[v] = t
            places[v] = ("tmp", t)
    return places, n_bufs


def _machine_program(sub):
    """(code, constants, positions of the 0-d inputs, temporaries, function addresses) of the
    tile machine for the group ``sub``, or None (NOTE [tile machine])."""
    from .._core import _vector_math
    kinds = [_reduction(e) for e in sub.eqns]
    ops = [_machine_op(e) if kind is None else ("reduce", kind)
           for e, kind in zip(sub.eqns, kinds)]
    if not ops or None in ops or any(v.dtype.name != "float64" for v in sub.outs):
        return None
    full = [v for v in sub.in_vars if v.shape != ()]
    scalar_pos = [i for i, v in enumerate(sub.in_vars) if v.shape == ()]
    slot = {v: k for k, v in enumerate(full)}
    consts = [0.0] * len(scalar_pos)   # (the 0-d inputs, given at each call, then literals)
    const_of = {sub.in_vars[i]: k for k, i in enumerate(scalar_pos)}
    places, n_temps = _places(sub, [kind is None for kind in kinds])
    first_slot = {"out": len(full), "tmp": len(full) + len(sub.outs)}

    def operand(a):
        if isinstance(a, Var):
            return -1 - const_of[a] if a in const_of else slot[a]
        consts.append(float(a.value))   # (a bool condition: 0.0 or 1.0)
        return -len(consts)

    fns, code, reductions = [], [], []
    for e, (op, call) in zip(sub.eqns, ops):
        if op == "reduce":   # (``call``: its kind and row; rows reduced after each tile)
            kind, index = places[e.outs[0]]
            reductions.append((call[0], slot[e.ins[0]], index))
            continue
        a = operand(e.ins[0])
        c = 0
        if op == "select":   # (where(c, x1, x2): the condition is the third operand)
            a, b, c = operand(e.ins[1]), operand(e.ins[2]), a
        elif op in _BINARY or op in _COMPARISONS:
            b = operand(e.ins[1])
        else:
            if a < 0:   # (a unary operation of a number: folded)
                return None
            b = 0
            if op == "call":
                address = vector_math.addresses()[call]
                if address not in fns:
                    fns.append(address)
                b = fns.index(address)
        kind, index = places[e.outs[0]]
        slot[e.outs[0]] = first_slot[kind] + index
        code.append((_vector_math.OPERATIONS.index(op), slot[e.outs[0]], a, b, c))
    return code, consts, scalar_pos, n_temps, tuple(fns), tuple(reductions)


def _machine_tile(periods):
    """The machine's tile for inputs of these periods (``_period``, 0 for a full input): a
    multiple of every period below ``MACHINE_TILE`` that divides every period above it, as
    near ``MACHINE_TILE`` as may be; None where there is none (the group is replayed)."""
    small = [p for p in periods if 0 < p < MACHINE_TILE]
    large = [p for p in periods if p >= MACHINE_TILE]
    step = math.lcm(*small) if small else 1
    if step > MACHINE_TILE:
        return None
    tile = step * (MACHINE_TILE // step)
    if large:
        g = math.gcd(*large)
        while tile >= step and g % tile:
            tile -= step
        if tile < min(step * 16, MACHINE_TILE // 4):   # (tiles this short cost their calls)
            return None
    return tile


def _as_condition(raw):
    """A boolean input as the machine reads it: 0.0 or 1.0, converted at every call (a
    captured mask may have been written in place since the last)."""
    return raw.reshape(-1).astype(np.float64)


def _machine_kernel(sub, program):
    """(kernel, out_kernel) running the group ``sub`` in the tile machine (``FusedPrimitive``),
    or None where its inputs' periods fit no tile."""
    from .._core._vector_math import run_program
    code, consts, scalar_pos, n_temps, fns, reductions = program
    code = np.asarray(code, dtype=np.int32).reshape(-1, 5)
    base = np.asarray(consts, dtype=np.float64)
    shape = tuple(sub.eqns[0].outs[0].shape)   # (the group's; a reduced output's is shorter)
    n = math.prod(shape)
    row = next((r[1] for r in map(_reduction, sub.eqns) if r is not None), 1)
    full_pos = [i for i, v in enumerate(sub.in_vars) if v.shape != ()]
    reads = [_period(sub.in_vars[i], shape) for i in full_pos]
    periods = tuple(r if isinstance(r, int) else 0 for r in reads)
    layouts = (tuple(r if isinstance(r, tuple) else None for r in reads)
               if any(isinstance(r, tuple) for r in reads) else None)
    tile = _machine_tile(periods + ((row,) if row > 1 else ()))
    if tile is None or tile % row:
        return None
    masks = {i for i in full_pos if sub.in_vars[i].dtype.name == "bool"}
    n_out = len(sub.outs)
    out_shapes = [tuple(v.shape) for v in sub.outs]

    # (the outputs of a group on small arrays are rows of one array: a group of a long program
    # has a hundred outputs, which one allocation each would cost more than computing them;
    # large ones are arrays of their own, so that each is freed when it dies)
    block = n * n_out <= BLOCK_ELEMENTS and n_out > 1 and not reductions

    # (the machine reads and writes C-contiguous arrays of any shape by their element count,
    # and copies a strided input itself: the arrays are handed over as they are, as the raw
    # arguments themselves where every one is an array it reads, with no Python between)
    direct = not scalar_pos and not masks and full_pos == list(range(len(sub.in_vars)))
    reductions = reductions or None

    def run(raw, outputs):
        c = base
        if scalar_pos:
            c = base.copy()
            for k, i in enumerate(scalar_pos):
                c[k] = raw[i]
        inputs = raw if direct else [raw[i] if i not in masks else _as_condition(raw[i])
                                     for i in full_pos]
        run_program(code, c, inputs, outputs, n_temps, fns, n, tile, periods, layouts,
                    reductions, row)

    def kernel(*raw):
        if block:
            outs = np.empty((n_out, n), np.float64)
            run(raw, outs)
            return tuple(outs.reshape((n_out,) + shape))
        outs = [np.empty(s, np.float64) for s in out_shapes]
        run(raw, outs)
        return tuple(outs)

    def out_kernel(*raw, out):
        outs = [o if _writable(o) else np.empty(s, np.float64) for o, s in zip(out, out_shapes)]
        run(raw, outs)
        return tuple(outs)

    kernel.tier = "tile machine"
    kernel.source = f"tile machine: {len(code)} instructions, {n_temps} temporaries"
    kernel.source_names = ["tile machine"] + [
        f"vector_{c}" for op, c in map(_machine_op, sub.eqns[:len(code)]) if c]
    return kernel, out_kernel


def _writer(e):
    """The function computing ``e`` into an ``out=`` buffer, or None (it returns a new tile)."""
    name = e.prim.xp_name
    if name == "pow":
        # (the replay's ``x ** k`` takes NumPy's fast path for small integer powers, which
        # np.power does not: the same call keeps the same bits)
        return None
    functions = vector_math.functions()
    if name in functions and getattr(e.outs[0].dtype, "name", None) == "float64":
        return functions[name]   # (NOTE [vector math])
    return numpy_ufunc(e)


def _source(sub, b, ns):
    """The Python source of the tiled kernel of the sub-program ``sub``; ``ns`` receives the
    functions and constants it names."""
    n_in = len(sub.in_vars)
    shape = tuple(sub.outs[0].shape)
    dtype = np.dtype(sub.outs[0].dtype.name)
    tile = max(1, TILE_BYTES // dtype.itemsize)
    ns.update(_empty=np.empty, _writable=_writable, _shape=shape, _dtype=dtype,
              _n=math.prod(shape), _T=tile)
    names = {}
    full = []      # the inputs read tile by tile
    for i, v in enumerate(sub.in_vars):
        if v.shape == ():
            names[v] = f"a{i}"
        else:
            full.append(i)
    writers = [_writer(e) for e in sub.eqns]
    places, n_bufs = _places(sub, [w is not None for w in writers])

    def atom(a):
        if isinstance(a, Var):
            return names[a]
        key = f"_k{len(ns)}"
        ns[key] = a.value
        return key

    body = [f"        x{i} = f{i}[s:e]" for i in full]
    for i in full:
        names[sub.in_vars[i]] = f"x{i}"
    for k, (e, write) in enumerate(zip(sub.eqns, writers)):
        args = [atom(a) for a in e.ins]
        v = e.outs[0]
        fn = write if write is not None else _callable(e.prim, b)[0]
        fname = f"_u{k}"
        ns[fname] = fn
        call = f"{fname}({', '.join(args)}"
        kind, index = places.get(v, (None, None))
        if kind == "out" and write is None:
            body.append(f"        t{v.n} = p{index}[s:e]")
            body.append(f"        t{v.n}[...] = {call})")
        elif kind is not None:
            target = f"p{index}[s:e]" if kind == "out" else f"b{index}"
            body.append(f"        t{v.n} = {call}, out={target})")
        else:
            body.append(f"        t{v.n} = {call})")
        names[v] = f"t{v.n}"
    params = [f"a{i}" for i in range(n_in)]
    lines = [f"def kernel({', '.join(params + ['out=None'])}):"]
    lines += [f"    f{i} = a{i}.reshape(-1)" for i in full]
    outs = [f"o{j}" for j in range(len(sub.outs))]
    lines.append("    if out is None:")
    lines += [f"        o{j} = _empty(_shape, _dtype)" for j in range(len(sub.outs))]
    lines.append("    else:   # (given buffers, None where the kernel makes one)")
    lines.append(f"        {', '.join(outs)}, = [o if _writable(o) else _empty(_shape, _dtype) "
                 f"for o in out]")
    lines += [f"    p{j} = o{j}.reshape(-1)" for j in range(len(sub.outs))]
    lines += [f"    b{i} = _empty(_T, _dtype)" for i in range(n_bufs)]
    lines.append("    for s in range(0, _n, _T):")
    lines.append("        e = s + _T")
    if n_bufs:
        lines.append("        if e > _n:   # (the last tile: the buffers' first elements)")
        lines += [f"            b{i} = b{i}[:_n - s]" for i in range(n_bufs)]
    lines += body
    lines.append(f"    return ({', '.join(outs)},)")
    return "\n".join(lines) + "\n"


def make_kernel(sub):
    """(kernel, out_kernel) of a fused group (NOTE [fusion]): ``kernel(*raw)`` the tuple of its
    outputs; ``out_kernel(*raw, out=buffers)`` writes into the given ones (``FusedPrimitive``);
    None where neither the machine nor NumPy's calls on tiles run it (the group is replayed)."""
    program = _machine_program(sub)
    if program is not None:
        return _machine_kernel(sub, program)
    if not all(map(tileable, sub.eqns)) or _mixed(sub.eqns):   # (a broadcast operand, a
        return None    # select, a reduction, a comparison in a float64 group: the machine's)
    ns = {}
    src = _source(sub, sub.backend, ns)
    exec(compile(src, f"<arrayad.jit tiles {sub.name}>", "exec"), ns)
    kernel = ns["kernel"]
    kernel.tier = "NumPy's calls on tiles"
    kernel.source = src
    # (the names of the functions it calls, for tests and for reading the source)
    kernel.source_names = [getattr(v, "__name__", "") for k, v in ns.items() if k.startswith("_u")]

    def out_kernel(*raw, out):
        return kernel(*raw, out=out)

    return kernel, out_kernel


def _group_kind(e):
    """What the instructions of one tiled group share (``fuse_elementwise``'s ``kind_of``): the
    result's shape and dtype, but a comparison the machine runs joins its float64 operands'
    group (its condition is read by a select or an astype there)."""
    if e.prim.xp_name in _COMPARISONS and _machine_op(e) is not None:
        return (e.outs[0].shape, next(a.dtype for a in e.ins if isinstance(a, Var)))
    return (e.outs[0].shape, e.outs[0].dtype)


def _mixed(eqns):
    """Whether a group's elementwise instructions have results of more than one dtype (a
    comparison in a float64 group: the machine's only)."""
    return len({e.outs[0].dtype for e in eqns if _reduction(e) is None}) > 1


def _vectorised(e):
    """Whether ``e`` calls a vector math function (NOTE [vector math]): worth a group of its
    own, as a lone ``sin`` of a large array."""
    return _writer(e) in vector_math.functions().values()


def _worth(eqns):
    """Whether a group of these instructions is tiled: two or more, or a lone one that calls a
    vector math function; below ``MIN_ELEMENTS``, where only the tile machine runs them, at least
    ``MACHINE_MIN_OPS`` of them (one call of the machine costs a few NumPy calls)."""
    if len(eqns) < 2 and not _vectorised(eqns[0]):
        return False
    return math.prod(eqns[0].outs[0].shape) >= MIN_ELEMENTS or len(eqns) >= MACHINE_MIN_OPS


def wanted(prog):
    """Whether ``lower`` might tile something of ``prog``: two instructions it accepts, or one
    that calls a vector math function."""
    ok = [e for e in prog.eqns if fusible(e) and accept(e)]
    return len(ok) > 1 or any(map(_vectorised, ok))


def _uniform(c):
    """Whether every element of the NumPy array ``c`` has the same bits as the first."""
    flat = c.reshape(-1)
    bits = flat.view(f"u{c.dtype.itemsize}") if c.dtype.itemsize in (1, 2, 4, 8) else None
    return bits is not None and bool((bits == bits[0]).all())


def _reads_as_number(v, readers):
    """Whether every instruction reading ``v`` joins a tiled group and has another operand of
    its result's shape: ``v`` may then be read as a 0-d value of the same dtype (NumPy's
    broadcasting gives the same elements, and a 0-d array promotes as an array of any shape
    does), so a tile reads nothing for it."""
    return v in readers and all(
        fusible(e) and accept(e) and any(isinstance(a, Var) and a is not v
                                         and a.shape == e.outs[0].shape for a in e.ins)
        for e in readers[v])


def _readers_and_kept(prog):
    """({variable: the instructions reading it}, the variables a rewrite must keep: captured
    arrays and outputs)."""
    readers = {}
    for e in prog.eqns:
        for a in e.ins:
            if isinstance(a, Var):
                readers.setdefault(a, []).append(e)
    return readers, set(prog.captured) | {a for a in prog.outs if isinstance(a, Var)}


def _uniform_constants(prog):
    """``prog`` with each value that is one number repeated, where every reader is an accepted
    instruction with another operand of its result's shape (``_reads_as_number``), read as a
    0-d value instead: a large constant whose elements have one value (the gradient's seed: 1
    broadcast to the input's shape, folded into an array), and a ``broadcast_to`` of a 0-d
    value (a sum's or a max's cotangent, NOTE [tiled replay]; else each tile reads a stride-0
    view that the machine first copies whole: ``grad`` of a log-sum-exp spent more than half
    its time on such copies). The same values, bit for bit."""
    readers, kept = _readers_and_kept(prog)
    fresh = _fresh(prog)
    swap, consts = {}, {}
    for v, c in prog.consts.items():
        if (v not in kept and type(c) is np.ndarray and c.size >= MIN_ELEMENTS
                and _reads_as_number(v, readers) and _uniform(c)):
            swap[v] = Var(fresh, (), v.dtype, v.label)
            fresh += 1
            consts[swap[v]] = c.reshape(-1)[:1].reshape(()).copy()
        else:
            consts[v] = c
    for e in prog.eqns:
        if e.prim.name == "broadcast_to" and isinstance(e.ins[0], Var) and e.ins[0].shape == ():
            v = e.outs[0]
            if v not in kept and _reads_as_number(v, readers):
                swap[v] = e.ins[0]   # (the broadcast itself is then dead code)
    if not swap:
        return prog
    eqns = [Eqn(e.prim, tuple(swap.get(a, a) if isinstance(a, Var) else a for a in e.ins),
                e.params, e.outs) for e in prog.eqns]
    return dce(prog.replace(consts=consts, eqns=eqns))


# (operations that give the same bits on a 0-d value as on each element of its broadcast: one
# IEEE operation, rounded once; NumPy's vectorised transcendental functions may not)
_EXACT_ON_NUMBERS = ("add", "subtract", "multiply", "divide", "negative")


def _sink_broadcasts(prog):
    """``prog`` with arithmetic on broadcast 0-d values (``broadcast_to(s) * 0.5``: a
    cotangent scaled before it meets an array) done on the 0-d values, and broadcast after: the
    same bits, one operation on one value instead of on every element, and a broadcast that
    ``_uniform_constants`` then reads as a number."""
    source = {}    # broadcast variable -> its 0-d value
    fresh = _fresh(prog)
    eqns, changed = [], False
    for e in prog.eqns:
        if e.prim.name == "broadcast_to" and isinstance(e.ins[0], Var) and e.ins[0].shape == ():
            source[e.outs[0]] = (e.ins[0], e)
        elif (e.prim.xp_name in _EXACT_ON_NUMBERS and fusible(e)
              and any(isinstance(a, Var) and a in source for a in e.ins)
              and all(not isinstance(a, Var) or a in source or a.shape == () for a in e.ins)):
            out = e.outs[0]
            number = Var(fresh, (), out.dtype, e.prim.name)
            fresh += 1
            ins = tuple(source[a][0] if isinstance(a, Var) and a in source else a
                        for a in e.ins)
            eqns.append(Eqn(e.prim, ins, e.params, (number,)))
            broadcast = source[next(a for a in e.ins if isinstance(a, Var) and a in source)][1]
            e = Eqn(broadcast.prim, (number,), dict(broadcast.params, shape=out.shape), (out,))
            source[out] = (number, e)
            changed = True
        eqns.append(e)
    return dce(prog.replace(eqns=eqns)) if changed else prog


def _machine_reads(prog):
    """``prog`` with what the tile machine reads as it is passed to it directly: the operand
    of a ``broadcast_to`` (a column, (n, 1) to (n, k)) whose every reader the machine runs
    (it reads broadcast operands: ``_period``), and a condition cast to float64 as a select of
    1.0 or 0.0 (``where(c, 1.0, 0.0)``, an operation of the machine). NumPy's broadcasting and
    ``where`` give the same values where a group does not take them."""
    from .._ops.manipulation import where_p
    readers, kept = _readers_and_kept(prog)
    broadcasts = {e.outs[0] for e in prog.eqns if e.prim.name == "broadcast_to"}

    def keeps_its_shape(r, v):
        # (another operand, not a broadcast read as it is, has the result's shape: NumPy's
        # broadcasting gives the same shape where no group takes ``r``)
        return any(isinstance(b, Var) and b is not v and b not in broadcasts
                   and b.shape == r.outs[0].shape for b in r.ins)

    swap, eqns, changed = {}, [], False
    for e in prog.eqns:
        out = e.outs[0] if len(e.outs) == 1 else None
        machine_read = out is not None and out not in kept and all(
            _machine_op(r) is not None and r.outs[0].shape == out.shape
            and keeps_its_shape(r, out) for r in readers.get(out, ()))
        if e.prim.name == "broadcast_to" and isinstance(e.ins[0], Var) and e.ins[0].shape \
                and machine_read and out in readers:
            swap[out] = e.ins[0]   # (the broadcast itself is then dead code)
        elif (e.prim.name == "astype" and isinstance(e.ins[0], Var) and out is not None
              and e.ins[0].dtype.name == "bool" and out.dtype.name == "float64"
              and e.params.get("device") is None
              and all(_machine_op(r) is not None or _reduction(r) for r in readers.get(out, ()))):
            e = Eqn(where_p, (e.ins[0], Lit(1.0), Lit(0.0)), {}, e.outs)
            changed = True
        eqns.append(e)
    if not swap and not changed:
        return prog
    eqns = [Eqn(e.prim, tuple(swap.get(a, a) if isinstance(a, Var) else a for a in e.ins),
                e.params, e.outs) for e in eqns]
    return dce(prog.replace(eqns=eqns))


def lower(prog):
    """The fused program of ``prog`` with tiled kernels (NOTE [tiled replay]), or None."""
    if not wanted(prog):
        return None
    base = _uniform_constants(_sink_broadcasts(_machine_reads(prog)))
    left_out = set()   # (ids of instructions only the machine runs, in groups it could not run)
    while True:
        out = fuse_elementwise(base, lambda e: id(e) not in left_out and accept(e),
                               make_kernel, worth=_worth,
                               epilogue=lambda e: id(e) not in left_out and _reduction(e),
                               kind_of=_group_kind)
        # A group the machine cannot run (another operation in it, operands' periods that fit
        # no tile) and that holds what NumPy's calls on tiles cannot run (a broadcast operand,
        # a select, a reduction, a comparison among float64 operations) has no kernel: fused
        # again without those, the rest keeps its tiles; one whose condition is read outside
        # (the machine holds it as 1.0 or 0.0), again without that condition's comparison
        failed = [e.prim.prog for e in out.eqns if getattr(e.prim, "fused", False)
                  and e.prim.kernel is None]
        if not failed:
            return out
        for sub in failed:
            conditions = {v for v in sub.outs if v.dtype.name == "bool"}
            left_out |= {id(m) for m in sub.eqns if m.outs[0] in conditions} if conditions else {
                id(m) for m in sub.eqns
                if not tileable(m) or _mixed(sub.eqns) and m.prim.xp_name in _COMPARISONS}


def _why_not_tiled(e, prog):
    """Why no tiled group took ``e``, an elementwise instruction (NOTE [explained lowering])."""
    if not _config.read("jit_tiles"):
        return "tiles are off (arrayad.config.jit_tiles)"
    n = math.prod(e.outs[0].shape)
    if not tileable(e) and _machine_op(e) is None:
        if e.prim.xp_name is None:
            return "arrayad's own implementation: a tile cannot run it on a piece"
        if getattr(e.outs[0].dtype, "kind", "c") == "c":
            return "complex: NumPy's complex loops round differently on pieces"
        return ("an operand of another shape than the result: a tile cannot read a piece of it "
                "(the tile machine reads broadcast operands, in float64 only)")
    if not tileable(e):
        if n < MACHINE_MIN:
            return f"{n} elements, under the tile machine's {MACHINE_MIN}"
        return ("a group of one, or one whose broadcast operands fit no tile of the machine: "
                "nothing to fuse")
    if _machine_op(e) is None:
        machine = ("the tile machine computes float64 arithmetic and "
                   + ", ".join(sorted(vector_math.addresses())) + " only")
        if n < MIN_ELEMENTS:
            return f"{n} elements, under {MIN_ELEMENTS}, and {machine}"
        return f"a group of one ({machine})"
    if n < MIN_ELEMENTS:
        return (f"{n} elements: its group has fewer than {MACHINE_MIN_OPS} operations, "
                f"what a call of the tile machine needs to pay")
    return "a group of one: nothing to fuse"


register_tiler("numpy", lower, _why_not_tiled)
