"""einsum: Einstein summation in the subscript grammar of NumPy, torch and JAX, a primitive with
its rules, and the choice of a pairwise contraction order (``optimize=``).

NOTE [einsum]
-------------
The public function does everything that depends on the user's spelling: it parses the
subscripts (explicit ``->`` or implicit output, ``...``, NumPy's interleaved sublist form,
torch's list of operands), gives the ellipsis dimensions labels of their own, drops the size-one
axes that broadcast against a larger size elsewhere (NumPy, torch and JAX all broadcast them),
plans a pairwise order, and binds the primitive once per step. The primitive ``einsum`` takes one
or two operands and a ``spec`` of letters only (``"ab,bc->ac"``: no ellipsis, no broadcasting,
each letter of one size wherever it occurs, no letter twice in the output), so that its rules
stay small:

* JVP: einsum is linear in each operand, so the tangent is the same einsum with one operand
  replaced by its tangent, summed over the operands.
* VJP: the cotangent of an operand is the einsum of ``g`` with the other operand (conjugated:
  torch's convention for complex input) onto the operand's letters that ``g`` or the other
  operand carry. The letters only that operand carries were summed over, so the cotangent is
  constant along them (a broadcast), and a letter the operand repeats (a diagonal or a trace)
  gets the cotangent on the diagonal and zeros elsewhere (``_diagonal_embed``, by construction,
  not by multiplying with an identity, so an inf in ``g`` does not turn the zeros into nan). Both
  are einsums and arrayad operations, so second derivatives work.
* Batching: a fresh letter for the batch axis of each batched operand and the output's first
  axis.

The implementation on raw arrays calls the backend's ``einsum`` (torch, JAX, CuPy, Dask) and,
where there is none (array-api-strict) or where it is slower (NumPy's own loops do not call BLAS
for a pair of operands), lowers a pair to diagonals and sums of each operand, then
transpose + reshape + ``matmul`` (``_lowered``).

Orders (``_plan``): ``False`` contracts left to right; ``True``/``"greedy"``/``"auto"`` take at
each step, among the pairs that share an index (an outer product only grows), the one with the
fewest multiply-adds, ties going to the larger fall in size (by size alone, ``"ij,jk,k->i"``
would multiply the two matrices first); ``"optimal"`` searches every pairwise order for the
fewest multiply-adds (dynamic programming over subsets of operands, 3^n steps, so up to
``_OPTIMAL_MAX`` operands; beyond, greedy); a list of pairs (NumPy's ``einsum_path`` form) is
taken as given. The parse and the plan depend on the subscripts, the shapes and ``optimize``
only, so they are made once (``_recipe``, cached) and a call in a loop only binds.
"""

import functools
import math
import string

import array_api_compat.numpy as _NUMPY_XP
import numpy as np

from ._namespace import ops

from .._core._core import bind, shape_of
from ._rules import Declarations, batch_fallback, conj_if_complex, unbroadcast

decl = Declarations(globals())

LETTERS = string.ascii_lowercase + string.ascii_uppercase
_OPTIMAL_MAX = 10


# ---------------------------------------------------------------------------------------------
# The primitive's spec: "ab,bc->ac"

@functools.lru_cache(maxsize=1024)
def _split_spec(spec):
    """``"ab,bc->ac"`` -> ``(("ab", "bc"), "ac")``."""
    ins, out = spec.split("->")
    return tuple(ins.split(",")), out


def _unique(labels):
    """The labels in order of first appearance, each once."""
    return list(dict.fromkeys(labels))


# ---------------------------------------------------------------------------------------------
# The implementation on raw arrays

def _reduce_plan(labels, shape, target, steps):
    """Append to ``steps`` what makes an array labelled ``labels`` of ``shape`` the array
    labelled ``target`` (unique letters, each a letter of ``labels``): diagonals where
    ``labels`` repeats a letter, sums over the letters ``target`` lacks, then the axes in
    ``target``'s order. Returns the sizes of ``target``'s letters."""
    labels, shape = list(labels), list(shape)
    while len(set(labels)) < len(labels):
        letter = next(c for i, c in enumerate(labels) if c in labels[:i])
        p = labels.index(letter)
        q = labels.index(letter, p + 1)
        rest = [i for i in range(len(labels)) if i not in (p, q)]
        _permute_step(steps, rest + [p, q])
        n = shape[p]
        # the diagonal of the last two axes: every (n + 1)-th element of the flattened pair
        steps.append(("diagonal", (tuple(shape[i] for i in rest) + (n * n,), n + 1)))
        labels = [labels[i] for i in rest] + [letter]
        shape = [shape[i] for i in rest] + [n]
    summed = tuple(i for i, c in enumerate(labels) if c not in target)
    if summed:
        steps.append(("sum", summed))
        shape = [n for c, n in zip(labels, shape) if c in target]
        labels = [c for c in labels if c in target]
    order = [labels.index(c) for c in target]
    _permute_step(steps, order)
    return {c: shape[i] for c, i in zip(target, order)}


def _permute_step(steps, order):
    if order != list(range(len(order))):
        steps.append(("permute", tuple(order)))


@functools.lru_cache(maxsize=1024)
def _lowering(spec, shapes):
    """The steps of einsum from diagonals, sums, transposes, reshapes and one ``matmul``:
    ``(steps of each operand, steps of the product)``, planned once per spec and shapes."""
    ins, out = _split_spec(spec)
    if len(shapes) == 1:
        steps = []
        _reduce_plan(ins[0], shapes[0], out, steps)
        return (tuple(steps),), ()
    la, lb = ins
    # each operand first loses its diagonals and the letters no one else needs
    la2 = "".join(c for c in _unique(la) if c in lb or c in out)
    lb2 = "".join(c for c in _unique(lb) if c in la2 or c in out)
    steps_a, steps_b, steps_r = [], [], []
    size = _reduce_plan(la, shapes[0], la2, steps_a)
    size.update(_reduce_plan(lb, shapes[1], lb2, steps_b))
    batch = [c for c in la2 if c in lb2 and c in out]
    summed = [c for c in la2 if c in lb2 and c not in out]
    free_a = [c for c in la2 if c not in lb2]
    free_b = [c for c in lb2 if c not in la2]
    nb = tuple(size[c] for c in batch)
    m, k, n = (math.prod(size[c] for c in cs) for cs in (free_a, summed, free_b))
    _permute_step(steps_a, [la2.index(c) for c in batch + free_a + summed])
    steps_a.append(("reshape", nb + (m, k)))
    _permute_step(steps_b, [lb2.index(c) for c in batch + summed + free_b])
    steps_b.append(("reshape", nb + (k, n)))
    steps_r.append(("reshape", nb + tuple(size[c] for c in free_a + free_b)))
    have = batch + free_a + free_b
    _permute_step(steps_r, [have.index(c) for c in out])
    return (tuple(steps_a), tuple(steps_b)), tuple(steps_r)


def _run(xp, x, steps):
    for what, arg in steps:
        if what == "permute":
            x = xp.permute_dims(x, arg)
        elif what == "reshape":
            x = xp.reshape(x, arg)
        elif what == "diagonal":
            x = xp.reshape(x, arg[0])[..., ::arg[1]]
        else:
            x = xp.sum(x, axis=arg, dtype=x.dtype)
    return x


def _lowered(xp, spec, xs):
    """einsum without the backend's einsum (``_lowering``)."""
    operand_steps, product_steps = _lowering(spec, tuple(tuple(x.shape) for x in xs))
    xs = [_run(xp, x, st) for x, st in zip(xs, operand_steps)]
    return xs[0] if len(xs) == 1 else _run(xp, xp.matmul(*xs), product_steps)


# NumPy's einsum of two operands loops in C without BLAS; the lowering calls BLAS through
# ``matmul`` but costs a few microseconds of Python and a copy or two. Measured (one thread,
# float64, microseconds, np.einsum vs the lowering): 16x16 @ 16x16 8.5 vs 9.9, 32x32 42 vs 17,
# 64x64 166 vs 33; a batch of 64 (32x16 @ 16x8) 423 vs 62; a (1000, 20)x(1000, 30) contraction
# over the 1000 415 vs 82; gmm's "ijk,mik->mij" with (10, 20, 20)x(1000, 10, 20) 3,442 vs 580;
# a batch of 1000 (10x20 mat-vecs) 183 vs 198. So the lowering where a letter is summed and
# there are this many multiply-adds or more:
_NUMPY_MATMUL_MIN = 1 << 14


@functools.lru_cache(maxsize=1024)
def _numpy_prefers_matmul(spec, shape_a, shape_b):
    (la, lb), out = _split_spec(spec)
    if not any(c in lb and c not in out for c in la):
        return False
    size = dict(zip(la, shape_a))
    size.update(zip(lb, shape_b))
    return math.prod(size.values()) >= _NUMPY_MATMUL_MIN


def _einsum_impl(xp, *xs, spec):
    if xp is _NUMPY_XP or xp is np:   # (NumPy's own functions: the compat layer's cost more)
        if len(xs) == 2 and _numpy_prefers_matmul(spec, xs[0].shape, xs[1].shape):
            return _lowered(np, spec, xs)
        return np.einsum(spec, *xs)
    fn = getattr(xp, "einsum", None)
    return _lowered(xp, spec, xs) if fn is None else fn(spec, *xs)


# ---------------------------------------------------------------------------------------------
# Rules (NOTE [einsum])

def _diagonal_embed(v):
    """``(..., n)`` -> ``(..., n, n)`` with ``v`` on the diagonal and zeros elsewhere: ``v``
    as a column beside n columns of zeros, read back n x n (row i of the (n, n + 1) array
    starts at i * (n + 1), which is (i, i) of the n x n one)."""
    s = shape_of(v)
    n = s[-1]
    col = ops.expand_dims(v, axis=-1)
    zeros = ops.broadcast_to(ops.zeros_like(col), s[:-1] + (n, n))
    flat = ops.reshape(ops.concat([col, zeros], axis=-1), s[:-1] + (n * (n + 1),))
    return ops.reshape(flat[..., :n * n], s[:-1] + (n, n))


def _spread(ct, kept, target, shape):
    """The cotangent ``ct`` over the letters ``kept`` as the cotangent of an operand labelled
    ``target`` of shape ``shape``: broadcast along its letters ``ct`` lacks, on the diagonal
    where ``target`` repeats a letter."""
    size = {c: n for c, n in zip(target, shape)}
    uniq = _unique(target)
    if len(kept) < len(uniq):
        ct = ops.reshape(ct, tuple(size[c] if c in kept else 1 for c in uniq))
        ct = ops.broadcast_to(ct, tuple(size[c] for c in uniq))
    if len(uniq) == len(target):
        return ct
    have = [(c, 0) for c in uniq]
    want, seen = [], {}
    for c in target:
        want.append((c, seen.get(c, 0)))
        seen[c] = seen.get(c, 0) + 1
    for c, k in want:
        if k:
            axis = have.index((c, 0))
            ct = _diagonal_embed(ops.moveaxis(ct, axis, -1))
            have = have[:axis] + have[axis + 1:] + [(c, 0), (c, k)]
    return ops.permute_dims(ct, tuple(have.index(w) for w in want))


def _einsum_vjp(k):
    def vjp(g, ans, *xs, spec):
        ins, out = _split_spec(spec)
        x, target = xs[k], ins[k]
        others = [i for i in range(len(xs)) if i != k]
        carried = set(out).union(*(ins[i] for i in others))
        kept = "".join(c for c in _unique(target) if c in carried)
        ct_spec = ",".join([out] + [ins[i] for i in others]) + "->" + kept
        if others or out != kept:
            g = bind(einsum_p, g, *(conj_if_complex(xs[i]) for i in others), spec=ct_spec)
        # (unbroadcast: in the dtype of x, as torch and JAX return it - the real part for a
        # real x, float32 for a float32 x that a float64 operand promoted)
        return unbroadcast(_spread(g, kept, target, shape_of(x)), x)
    return vjp


def _einsum_batch(args, dims, spec):
    ins, out = _split_spec(spec)
    fresh = next((c for c in LETTERS if c not in spec), None)
    if fresh is None:   # (all 52 letters taken by one step: a loop over the batch)
        return batch_fallback(einsum_p, args, dims, {"spec": spec}, None)
    ins = [s if d is None else s[:d] + fresh + s[d:] for s, d in zip(ins, dims)]
    return bind(einsum_p, *args, spec=",".join(ins) + "->" + fresh + out), 0


# ---------------------------------------------------------------------------------------------
# Parsing the user's subscripts

def _error(msg):
    return ValueError(f"einsum: {msg}")


def _from_sublists(args):
    """NumPy's interleaved form ``einsum(op0, sublist0, op1, sublist1, ..., [sublistout])``
    as a subscripts string and the operands."""
    args = list(args)
    out = args.pop() if len(args) % 2 else None
    operands, terms = args[0::2], args[1::2]

    def term(sub):
        text = ""
        for s in sub:
            if s is Ellipsis:
                text += "..."
            elif isinstance(s, int) and not isinstance(s, bool) and 0 <= s < len(LETTERS):
                text += LETTERS[s]
            else:
                raise _error(f"a sublist holds integers in [0, {len(LETTERS)}) and Ellipsis, "
                             f"got {s!r}")
        return text

    subscripts = ",".join(term(t) for t in terms)
    if out is not None:
        subscripts += "->" + term(out)
    return subscripts, operands


def _terms(text, where):
    """One operand's (or the output's) subscripts as a list of letters with ``...`` for the
    ellipsis."""
    out, i = [], 0
    while i < len(text):
        c = text[i]
        if c in LETTERS:
            out.append(c)
            i += 1
        elif text.startswith("...", i):
            if "..." in out:
                raise _error(f"{where} has more than one ellipsis '...'")
            out.append("...")
            i += 3
        elif c == ".":
            raise _error(f"{where} has a '.' that is not part of an ellipsis '...'")
        else:
            raise _error(f"invalid character {c!r} in {where}: indices are letters a-z, A-Z "
                         f"(with ',' between operands, '...' and one '->')")
    return out


def _parse(subscripts, shapes):
    """(one label list per operand, the output's labels, the size of every label). Labels are
    the user's letters, and integers for the ellipsis dimensions (right-aligned over the
    operands, as broadcasting aligns them)."""
    text = subscripts.replace(" ", "")
    if text.count("->") > 1 or text.count(">") != text.count("->"):
        raise _error(f"the subscripts {subscripts!r} need at most one '->' (between the inputs "
                     f"and the output)")
    inputs, arrow, output = text.partition("->")
    pieces = inputs.split(",")
    if len(pieces) != len(shapes):
        raise _error(f"the subscripts {subscripts!r} name {len(pieces)} operand"
                     f"{'s' * (len(pieces) != 1)} but {len(shapes)} "
                     f"{'were' if len(shapes) != 1 else 'was'} given")
    terms = [_terms(p, f"the subscripts of operand {k} ({p!r})") for k, p in enumerate(pieces)]
    ranks = []
    for k, (t, s) in enumerate(zip(terms, shapes)):
        named = len(t) - ("..." in t)
        if named > len(s) or ("..." not in t and named != len(s)):
            hint = "" if "..." in t or named > len(s) else \
                " (add '...' to stand for the others)"
            raise _error(f"operand {k} has {len(s)} dimension{'s' * (len(s) != 1)} but its "
                         f"subscripts {pieces[k]!r} name {named}{hint}")
        ranks.append(len(s) - named)
    rank = max(ranks)
    ins = []
    for t, r in zip(terms, ranks):
        labels = []
        for c in t:
            labels.extend(range(rank - r, rank) if c == "..." else [c])
        ins.append(labels)
    size, origin = {}, {}
    for k, (labels, s) in enumerate(zip(ins, shapes)):
        mine = {}
        for label, n in zip(labels, s):
            if label in mine and mine[label] != n:
                raise _error(f"index {label!r} repeats in operand {k} with sizes {mine[label]} "
                             f"and {n}: a repeated index takes a diagonal, which needs equal "
                             f"sizes")
            mine[label] = n
        for label, n in mine.items():
            if label not in size or size[label] == 1:
                size[label], origin[label] = n, k
            elif n != 1 and n != size[label]:
                what = f"index {label!r}" if isinstance(label, str) else \
                    "a dimension covered by '...'"
                raise _error(f"{what} has size {size[label]} in operand {origin[label]} and "
                             f"size {n} in operand {k}, which do not broadcast")
    if arrow:
        out_terms = _terms(output, f"the output ({output!r})")
        out = []
        for c in out_terms:
            if c == "...":
                out.extend(range(rank))
            elif c in out:
                raise _error(f"index {c!r} appears more than once in the output {output!r}")
            elif c not in size:
                raise _error(f"index {c!r} of the output {output!r} is not an index of any "
                             f"operand")
            else:
                out.append(c)
    else:   # implicit: the ellipsis, then the letters that occur once, in alphabetical order
        count = {}
        for labels in ins:
            for c in labels:
                count[c] = count.get(c, 0) + 1
        out = list(range(rank)) + sorted(c for c in count if isinstance(c, str) and count[c] == 1)
    return ins, out, size


def _broadcast_axes(ins, shapes, size):
    """The size-one axes of each operand whose label is larger elsewhere (they broadcast, and
    are dropped: the primitive sees each label with one size), and the labels left."""
    drops, left = [], []
    for labels, s in zip(ins, shapes):
        drop = tuple(i for i, (c, n) in enumerate(zip(labels, s)) if n == 1 and size[c] != 1)
        drops.append(drop)
        left.append([c for i, c in enumerate(labels) if i not in drop])
    return tuple(drops), left


# ---------------------------------------------------------------------------------------------
# Contraction orders (NOTE [einsum]). A path is a list of pairs of term ids: the operands are
# 0..n-1 and each step's result takes the next id.

def _left_to_right(n):
    return [(0, 1)] + [(n + i, i + 2) for i in range(n - 2)] if n > 1 else []


def _greedy(ins, out, size):
    live = {i: frozenset(labels) for i, labels in enumerate(ins)}
    count = {}
    for labels in live.values():
        for c in labels:
            count[c] = count.get(c, 0) + 1
    out = set(out)
    path, next_id = [], len(ins)
    while len(live) > 1:
        best = None
        ids = sorted(live)
        for p, i in enumerate(ids):
            for j in ids[p + 1:]:
                a, b = live[i], live[j]
                r = frozenset(c for c in a | b
                              if c in out or count[c] - (c in a) - (c in b) > 0)
                # pairs that share an index first (an outer product only grows), then the
                # fewest multiply-adds, then the largest fall in size
                key = (not (a & b), _size(a | b, size),
                       _size(r, size) - _size(a, size) - _size(b, size))
                if best is None or key < best[0]:
                    best = (key, i, j, r)
        _, i, j, r = best
        for c in live.pop(i):
            count[c] -= 1
        for c in live.pop(j):
            count[c] -= 1
        for c in r:
            count[c] = count.get(c, 0) + 1
        live[next_id] = r
        path.append((i, j))
        next_id += 1
    return path


def _size(labels, size):
    return math.prod(size[c] for c in labels)


def _optimal(ins, out, size):
    """The pairwise order with the fewest multiply-adds: the best cost of contracting each
    subset of the operands into one term, from the best split of it into two subsets."""
    n = len(ins)
    full = (1 << n) - 1
    union = [frozenset()] * (full + 1)
    for s in range(1, full + 1):
        low = (s & -s).bit_length() - 1
        union[s] = union[s & (s - 1)] | frozenset(ins[low])
    out = frozenset(out)
    kept = [union[s] & (out | union[full ^ s]) for s in range(full + 1)]
    cost = [0] * (full + 1)
    split = [0] * (full + 1)
    for s in range(1, full + 1):
        if s & (s - 1) == 0:
            continue
        low = s & -s
        best = None
        sub = (s - 1) & s
        while sub:
            if sub & low:
                rest = s ^ sub
                c = cost[sub] + cost[rest] + _size(kept[sub] | kept[rest], size)
                if best is None or c < best:
                    best, split[s] = c, sub
            sub = (sub - 1) & s
        cost[s] = best
    path = []

    def build(s):
        if s & (s - 1) == 0:
            return s.bit_length() - 1
        a, b = build(split[s]), build(s ^ split[s])
        path.append((a, b))
        return n + len(path) - 1

    build(full)
    return path


def _given_path(steps, n):
    """NumPy's path form (``["einsum_path", (0, 2), (0, 1)]``: positions in the list of terms
    left, each step's result appended at its end) as pairs of term ids."""
    steps = [s for s in steps if not isinstance(s, str)]
    current, path, next_id = list(range(n)), [], n
    for step in steps:
        try:
            positions = sorted({int(p) for p in step}, reverse=True)
            picked = [current[p] for p in positions]
        except (TypeError, ValueError, IndexError):
            raise _error(f"the contraction path {steps!r} must list tuples of positions among "
                         f"the terms left; step {step!r} is not one ({len(current)} terms are "
                         f"left there)") from None
        for p in positions:
            del current[p]
        picked.reverse()
        acc = picked[0]
        for other in picked[1:]:
            path.append((acc, other))
            acc, next_id = next_id, next_id + 1
        current.append(acc)
    if len(current) != 1:
        raise _error(f"the contraction path {steps!r} leaves {len(current)} terms "
                     f"uncontracted; it must end with one")
    return path


def _plan(ins, out, size, optimize):
    n = len(ins)
    if isinstance(optimize, (list, tuple)):
        return _given_path(optimize, n)
    if n <= 2 or optimize is False:
        return _left_to_right(n)
    if optimize is True or optimize in ("greedy", "auto"):
        return _greedy(ins, out, size)
    # "optimal" (the rest is refused by _check_optimize)
    return _optimal(ins, out, size) if n <= _OPTIMAL_MAX else _greedy(ins, out, size)


def _check_optimize(optimize):
    """``optimize`` as ``_plan`` takes it (a path as a tuple of tuples, hashable for the cache
    of recipes), or a clear error."""
    if isinstance(optimize, (list, tuple)):
        return tuple(tuple(o) if isinstance(o, (list, tuple)) else o for o in optimize)
    if isinstance(optimize, str) and optimize in ("greedy", "optimal", "auto"):
        return optimize
    if isinstance(optimize, int) and optimize in (0, 1):
        return bool(optimize)
    raise _error(f"optimize must be False, True, 'greedy', 'optimal', 'auto' or a contraction "
                 f"path (a list of pairs of positions), got {optimize!r}")


def _spec(labels, out):
    """The primitive's spec of one step: the labels renamed to letters."""
    letter = {}
    for c in [c for ls in labels for c in ls] + list(out):
        if c not in letter:
            if len(letter) == len(LETTERS):
                raise _error(f"one contraction step has more than {len(LETTERS)} distinct "
                             f"indices; contract fewer at a time")
            letter[c] = LETTERS[len(letter)]
    return ",".join("".join(letter[c] for c in ls) for ls in labels) + "->" + \
        "".join(letter[c] for c in out)


@functools.lru_cache(maxsize=512)
def _recipe(subscripts, shapes, optimize):
    """What one call does, from the subscripts, the operands' shapes and ``optimize`` (cached:
    a call in a loop parses and plans once): the axes to squeeze from each operand and the
    steps, each ``(term ids, spec)``, its result the next term."""
    ins, out, size = _parse(subscripts, shapes)
    drops, ins = _broadcast_axes(ins, shapes, size)
    if len(ins) == 1:
        return drops, (((0,), _spec(ins, out)),)
    path = _plan(ins, out, size, optimize)
    labels = list(ins)
    count = {}
    for ls in ins:
        for c in set(ls):
            count[c] = count.get(c, 0) + 1
    wanted, steps = set(out), []
    for step, (i, j) in enumerate(path):
        la, lb = labels[i], labels[j]
        for c in set(la) | set(lb):
            count[c] -= (c in la) + (c in lb)
        if step == len(path) - 1:
            keep = list(out)
        else:
            keep = [c for c in _unique(la + lb) if c in wanted or count[c] > 0]
        for c in keep:
            count[c] += 1
        labels.append(keep)
        steps.append(((i, j), _spec((la, lb), keep)))
    return drops, tuple(steps)


# ---------------------------------------------------------------------------------------------
# The public function

def einsum(subscripts, /, *operands, optimize="greedy"):
    """Einstein summation: the products of the operands' elements summed over the indices the
    subscripts leave out of the output (NumPy's, torch's and JAX's ``einsum``).

    Parameters
    ----------
    subscripts : str
        One group of index letters (``a-z``, ``A-Z``) per operand, separated by commas, then
        optionally ``->`` and the output's letters: ``"ij,jk->ik"`` is a matrix product,
        ``"ii->"`` a trace, ``"ii->i"`` a diagonal, ``"ij->ji"`` a transpose, ``"i,j->ij"`` an
        outer product. Without ``->`` the output holds the letters that occur once, in
        alphabetical order (``"ij,jk"`` is ``"ij,jk->ik"``). ``...`` stands for the dimensions
        no letter names; they broadcast across operands (right-aligned, as NumPy broadcasts)
        and lead an implicit output; an explicit output without ``...`` sums them (torch and
        JAX; NumPy refuses). A letter repeated within an operand takes its diagonal; an axis of
        size one broadcasts against a larger size of the same letter. Spaces are ignored.
        NumPy's interleaved form ``einsum(x, [0, 1], y, [1, 2], [0, 2])`` (integers for
        letters, ``Ellipsis`` for ``...``) and torch's single list of operands
        (``einsum("ij,jk", [x, y])``) are accepted too.
    *operands : array
        The arrays, one per group of letters.
    optimize : {"greedy", True, False, "optimal", "auto"} or list, optional
        The order in which three or more operands are contracted, a pair at a time: ``False``
        left to right; ``True``, ``"greedy"`` (the default) and ``"auto"`` (JAX's spelling)
        the cheapest pair that shares an index first; ``"optimal"`` the
        order with the fewest multiply-adds (an exhaustive search, for up to 10 operands;
        beyond, greedy); or a path as ``numpy.einsum_path`` gives it
        (``["einsum_path", (0, 1), (0, 1)]``, positions in the list of what is left, each
        result appended to its end). The value is the same up to rounding; the time is not.

    Returns
    -------
    array
        Of the operands' backend (inside a transform, a value of that transform) and promoted
        dtype. Each pairwise step is the backend's ``einsum`` or, where it has none
        (array-api-strict) or it is slower (NumPy, when the step sums over an index both
        operands carry), transposes, reshapes and one ``matmul``. The derivatives are einsums
        too (the cotangent of an operand is ``g`` contracted with the other operands,
        conjugated for complex input), so every transform, ``jit`` and ``.backward()`` apply,
        to any order.

    Raises
    ------
    ValueError
        If the subscripts are malformed (a character that is not a letter, a stray ``.``, a
        second ``->``), name another number of operands or dimensions than given, repeat an
        output letter or name one no operand has, give one letter sizes that do not broadcast,
        or ``optimize`` is not one of the values above; the message names the operand and the
        letter.
    TypeError
        If ``subscripts`` is neither a string nor an array (the interleaved form).

    Examples
    --------
    >>> a = ad.asarray([[1., 2.], [3., 4.]])
    >>> ad.einsum("ij,jk->ik", a, a)
    tensor([[ 7., 10.],
            [15., 22.]])
    >>> ad.einsum("ii", a)   # the trace
    tensor(5.)
    >>> ad.func.grad(lambda a: ad.einsum("ij,ij->", a, a))(a)
    tensor([[2., 4.],
            [6., 8.]])
    >>> ad.einsum("...ij->...ji", ad.ones((5, 2, 3))).shape
    (5, 3, 2)
    """
    if not isinstance(subscripts, str):
        if isinstance(subscripts, (int, float, complex, bytes, list, tuple, dict)) or \
                subscripts is None:
            raise TypeError(f"einsum: the subscripts must be a string such as 'ij,jk->ik' (or "
                            f"an array, for NumPy's interleaved form), got "
                            f"{type(subscripts).__name__}")
        subscripts, operands = _from_sublists((subscripts,) + operands)
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])   # torch's einsum(equation, [x, y])
    if not operands:
        raise _error("expected at least one operand after the subscripts")
    for k, x in enumerate(operands):
        if isinstance(x, (int, float, complex, bool, list, tuple)) or x is None:
            raise TypeError(f"einsum: operand {k} is a {type(x).__name__}, expected an array "
                            f"(convert it with ad.asarray)")
    optimize = _check_optimize(optimize)
    drops, steps = _recipe(subscripts, tuple(tuple(shape_of(x)) for x in operands), optimize)
    terms = [ops.squeeze(x, axis=d) if d else x for x, d in zip(operands, drops)]
    for ids, spec in steps:
        terms.append(bind(einsum_p, *[terms[i] for i in ids], spec=spec))
    return terms[-1]


einsum_p = decl.primitive(
    "einsum", _einsum_impl, public=einsum,
    vjp=(_einsum_vjp(0), _einsum_vjp(1)), reads=("x2", "x1"),
    jvp=(lambda t, ans, *xs, spec: bind(einsum_p, t, *xs[1:], spec=spec),
         lambda t, ans, *xs, spec: bind(einsum_p, xs[0], t, spec=spec)),
    batch=_einsum_batch)
