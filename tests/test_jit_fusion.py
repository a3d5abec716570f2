"""Elementwise fusion of arrayad.jit programs (NOTE [fusion]): the generic pass gives valid
programs with the unfused results on every backend (the whole operator database's VJP and JVP
programs), the numba lowerer of NumPy gives them to the dtype's rounding, fused programs are
differentiable and batchable, and float32, nan and inf behave as unfused. References: hand-written
NumPy derivatives, finite differences (check_grads), the unfused replay of the same program."""

import importlib.util
import math

import numpy as np
import pytest

import arrayad as ad
from arrayad._jit import check, executable, passes
from arrayad._jit.ir import Program
from arrayad._ops._rules import FACTS, NO_FACTS
from arrayad._jit.fusion import fuse_elementwise
from arrayad._jit.replay import compile_replay
from arrayad.func import grad, jvp, make_program, vjp, vmap
from arrayad.testing import check_grads

from conftest import Backend, to_numpy
from reference import chain, chain_vec, chain_vec_np

import opdb

def facts_of(name):
    return FACTS.get(name, NO_FACTS)


BACKENDS = ["numpy", "array_api_strict"] + (
    ["torch"] if importlib.util.find_spec("torch") is not None else [])
NUMBA = importlib.util.find_spec("numba") is not None


@pytest.fixture(autouse=True)
def checked_passes():
    with ad.config.jit_check(True):
        yield


@pytest.fixture
def kernel_cache(tmp_path_factory, monkeypatch):
    """numba's kernels and their on-disk cache in a directory of this test session; programs
    lowered as soon as they are staged (NOTE [when to compile])."""
    from arrayad._jit import fusion, lower_numba
    monkeypatch.setattr(fusion, "LOWERERS", dict(fusion.LOWERERS))
    lower_numba.register()   # (NumPy programs keep the tiled replay otherwise)
    with ad.config.cache_dir(tmp_path_factory.getbasetemp() / "kernels"), \
            ad.config.jit_fuse_after(0), ad.config.jit_fuse(True):   # (fusion is opt-in)
        yield


def chain_vec_grad_np(x):   # (d chain_vec / dx elementwise, by hand)
    s = np.sin(x) * np.cos(x) + np.exp(-x * x)
    y = np.tanh(s) * 2 - s / 3
    dy = 2 * y / (1 + y * y)
    ds = dy * (2 * (1 - np.tanh(s) ** 2) - 1 / 3)
    return ds * (np.cos(x) ** 2 - np.sin(x) ** 2 - 2 * x * np.exp(-x * x))


def _leaves(out):
    return [to_numpy(v) for v in ad.func.tree_flatten(out)[0]]


def _same(got, want, what, rtol=1e-12, atol=1e-14):
    got, want = _leaves(got), _leaves(want)
    assert len(got) == len(want), what
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype, what
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, err_msg=what)


def _fused_names(prog):
    return [e.prim.name for e in prog.eqns if getattr(e.prim, "fused", False)]


def test_the_chain_and_its_gradient_fuse_into_one_instruction():
    x = np.random.default_rng(0).standard_normal(50)
    prog = make_program(grad(chain))(x)
    fused = fuse_elementwise(prog)
    check(fused)
    assert len(_fused_names(fused)) == 1 and len(fused.eqns) == 1
    np.testing.assert_allclose(compile_replay(fused)(x), chain_vec_grad_np(x), rtol=1e-10)


def test_escaping_values_are_outputs_and_readers_outside_close_a_group():
    x = np.random.default_rng(1).standard_normal(8)

    def f(x):
        a = ad.sin(x) * 2          # read by the sum (outside the group) and by exp
        b = ad.exp(a) + ad.sum(a)  # exp joins; the add reads the sum: a second group
        return b * 3, a

    prog = make_program(f)(x)
    fused = fuse_elementwise(prog)
    check(fused)
    a = np.sin(x) * 2
    _same(compile_replay(fused)(x), ((np.exp(a) + np.sum(a)) * 3, a), "f", rtol=1e-13)
    groups = [e for e in fused.eqns if getattr(e.prim, "fused", False)]
    assert len(groups) == 2
    # the first group (sin, multiply, exp) hands out ``a`` (read by the sum and returned) and
    # exp(a) (read by the second group); sin(x) never reaches memory
    assert [e.prim.name for e in groups[0].prim.prog.eqns] == ["sin", "multiply", "exp"]
    assert len(groups[0].outs) == 2 and groups[0].outs[0] in fused.outs


def test_different_shapes_or_dtypes_are_different_groups():
    x = np.random.default_rng(2).standard_normal((3, 4))

    def f(x):
        r = ad.sum(ad.sin(x) * 2, axis=0)   # (4,): another shape than x's
        return ad.cos(r) * ad.astype(ad.exp(x[0]), ad.float32)

    prog = make_program(f)(x)
    fused = fuse_elementwise(prog)
    check(fused)
    _same(compile_replay(fused)(x), compile_replay(prog)(x), "f")


# -- the operator database: generic fusion on every backend, numba on NumPy -------------------

FIRST_DIFF = [c for c in opdb.all_cases()
              if c.i == 0 and c.s0.args and c.op.differentiable and c.s0.diff_indices()]


def _programs(case, be):
    """(the VJP program, the JVP program, their arguments) of ``case`` on backend ``be``."""
    arrays = [be(a) if isinstance(a, np.ndarray) else a for a in case.s0.args]
    idx = case.s0.diff_indices()

    def f(*d):
        full = list(arrays)
        for i, v in zip(idx, d):
            full[i] = v
        return opdb.call_sample(case.op, case.s0, full)
    f.__name__ = case.op.name.replace(".", "_")
    diff = [arrays[i] for i in idx]
    out = f(*diff)
    rng = np.random.default_rng(5)
    cts = [be(rng.standard_normal(to_numpy(o).shape).astype(to_numpy(o).dtype))
           if to_numpy(o).dtype.kind == "f" else o for o in ad.func.tree_flatten(out)[0]]
    spec = ad.func.tree_flatten(out)[1]
    tangents = [be(rng.standard_normal(to_numpy(d).shape).astype(to_numpy(d).dtype))
                for d in diff]
    n = len(diff)

    def pull(*xs):
        return vjp(f, *xs[:n])[1](ad.func.tree_unflatten(list(xs[n:]), spec))

    def push(*xs):
        return jvp(f, tuple(xs[:n]), tuple(xs[n:]))

    out = []
    for g, extra in ((pull, cts), (push, tangents)):
        args = [*diff, *extra]
        try:
            prog = make_program(g)(*args)
        except (RuntimeError, TypeError, ValueError):   # (refused by jit itself: test_jit's)
            continue
        out.append((prog, args))
    return out


def _lowered_runs(case, lower, be):
    """(name, lowered program, its results, the unfused results) of each VJP and JVP program of
    ``case`` on backend ``be`` that ``lower`` changes, the lowered program checked."""
    for prog, args in _programs(case, be):
        leaves = [a for a in args if not isinstance(a, (int, float, complex, bool))]
        lowered = lower(prog)
        if lowered is None:
            continue
        check(lowered)
        with np.errstate(all="ignore"):
            got, want = compile_replay(lowered)(*leaves), compile_replay(prog)(*leaves)
        yield prog.name, lowered, got, want


@pytest.mark.parametrize("backend_name", BACKENDS)
@pytest.mark.parametrize("case", FIRST_DIFF, ids=[c.id for c in FIRST_DIFF])
def test_fusion_on_and_off_give_the_same_programs_results(case, backend_name):
    # (the sub-programs replayed: any backend)
    for name, _, got, want in _lowered_runs(case, fuse_elementwise, Backend(backend_name)):
        _same(got, want, f"fused {name}")


# (the elementwise functions: their derivatives' programs are what numba compiles; every other
# function's programs get the same kernels, and the generic pass above covers them)
NUMBA_CASES = [c for c in FIRST_DIFF if facts_of(c.op.name).fusible]


@pytest.mark.skipif(not NUMBA, reason="numba is an optional extra")
@pytest.mark.parametrize("case", NUMBA_CASES, ids=[c.id for c in NUMBA_CASES])
def test_numba_lowering_gives_the_unfused_results(case, monkeypatch, kernel_cache):
    from arrayad._jit import lower_numba
    monkeypatch.setattr(lower_numba, "MIN_ELEMENTS", 1)   # (the samples are small)
    for name, _, got, want in _lowered_runs(case, lower_numba.lower, Backend("numpy")):
        # (libm's transcendental functions instead of NumPy's loops: an ulp or two)
        _same(got, want, f"numba {name}", rtol=1e-13, atol=1e-15)


# -- the tiled replay of NumPy programs (NOTE [tiled replay]) ----------------------------------

@pytest.fixture
def numpy_calls(monkeypatch):
    """The tiled replay with NumPy's calls only (NOTE [vector math]: ARRAYAD_JIT_VECTOR_MATH=0),
    so that its results are the unfused replay's bit for bit."""
    from arrayad._jit import vector_math
    monkeypatch.setattr(vector_math, "FUNCTIONS", {})
    monkeypatch.setattr(vector_math, "ADDRESSES", {})   # (no tile machine: NOTE [tile machine])


@pytest.fixture
def small_tiles(monkeypatch, numpy_calls):
    """Tiles of 3 elements (the last one shorter), from 1 element of a group on: the small
    samples of the operator database run through several tiles."""
    from arrayad._jit import lower_tiles
    monkeypatch.setattr(lower_tiles, "MIN_ELEMENTS", 1)
    monkeypatch.setattr(lower_tiles, "TILE_BYTES", 24)


def _bits(got, want, what):
    got, want = _leaves(got), _leaves(want)
    assert len(got) == len(want), what
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype, what
        # (bit for bit: NumPy's own calls on pieces of the same data; nan where nan)
        np.testing.assert_array_equal(g, w, err_msg=what, strict=True)
        for part in ((np.real, np.imag) if g.dtype.kind == "c" else
                     (lambda a: a,) if g.dtype.kind == "f" else ()):
            assert np.array_equal(np.signbit(part(g)), np.signbit(part(w))), what


@pytest.mark.parametrize("case", FIRST_DIFF, ids=[c.id for c in FIRST_DIFF])
def test_tiled_replay_gives_the_unfused_results_bit_for_bit(case, small_tiles):
    from arrayad._jit import lower_tiles
    for name, _, got, want in _lowered_runs(case, lower_tiles.lower, Backend("numpy")):
        _bits(got, want, f"tiled {name}")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_tiled_replay_keeps_dtype_edge_values_and_powers(dtype, small_tiles):
    from arrayad._jit import lower_tiles
    x = np.random.default_rng(6).standard_normal(40).astype(dtype)
    x[:7] = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e30, -1e-30]

    def f(x, y):
        # (x ** 2 and x ** 0.5 take NumPy's operator fast paths in the unfused replay)
        return (ad.log(x * x) / x + ad.sqrt(x) * 3 - ad.exp(x) + x ** 2 - y ** 0.5
                + ad.maximum(x, y) * -0.0 + x ** 3)

    y = x[::-1].copy()
    prog = make_program(f)(x, y)
    tiled = lower_tiles.lower(prog)
    assert tiled is not None and len(_fused_names(tiled)) == 1
    with np.errstate(all="ignore"):
        got = compile_replay(tiled)(x, y)
        _bits(got, compile_replay(prog)(x, y), "edge values")
    assert got.dtype == dtype


def _tile_ops():
    from arrayad._jit import lower_numba
    return sorted(lower_numba._UNARY) + sorted(lower_numba._BINARY)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", _tile_ops())
def test_tiles_of_a_few_elements_give_numpys_vectorised_results(name, dtype, small_tiles):
    # (tiles of 3 elements run NumPy's loops for the last few elements of an array, the whole
    # array its vectorised loops: their results are the same bits)
    from arrayad._jit import lower_numba, lower_tiles
    rng = np.random.default_rng(11)
    x = (rng.standard_normal(203) * 3).astype(dtype)
    y = (rng.standard_normal(203) * 3).astype(dtype)
    x[:5] = [np.nan, np.inf, -np.inf, 0.0, -0.0]
    op = getattr(ad, {"pow": "pow", "abs": "abs"}.get(name, name))
    if name in lower_numba._BINARY:
        def f(x, y):
            return op(x * 0.75, y) + 1
    else:
        def f(x, y):
            return op(x * 0.75) + y
    with np.errstate(all="ignore"):
        prog = make_program(f)(x, y)
        tiled = lower_tiles.lower(prog)
        assert tiled is not None and _fused_names(tiled)
        _bits(compile_replay(tiled)(x, y), compile_replay(prog)(x, y), name)


def test_jit_tiles_large_programs_when_staged_and_not_small_ones(numpy_calls):
    from arrayad._jit import fusion, lower_tiles
    n = lower_tiles.MIN_ELEMENTS + 5   # (a last tile shorter than the others)
    x = np.random.default_rng(5).standard_normal(n)
    j = ad.jit(grad(chain))
    got = j(x)
    exe = executable(j.lower(x))
    assert exe.tiled is not None and _fused_names(exe.tiled) and exe.fused is None
    with fusion.turned(False):
        j0 = ad.jit(grad(chain))
        want = j0(x)
        assert executable(j0.lower(x)).tiled is None
    _bits(got, want, "jit(grad(chain))")
    np.testing.assert_allclose(got, chain_vec_grad_np(x), rtol=1e-9, atol=1e-12)
    small = ad.jit(grad(chain))
    small(x[:100])
    assert executable(small.lower(x[:100])).tiled is None
    with fusion.turned(False, tiles=True):   # (the tiles without the compilers: the default)
        j1 = ad.jit(grad(chain))
        j1(x)
        assert executable(j1.lower(x)).tiled is not None
    with fusion.turned(True, fuse_after=0):   # (compiled fusion on: NumPy keeps the tiles)
        j2 = ad.jit(grad(chain))
        j2(x)
        assert executable(j2.lower(x)).fused is None
        assert executable(j2.lower(x)).tiled is not None


def test_constants_of_one_value_are_read_as_numbers_in_tiles(small_tiles):
    from arrayad._jit import lower_tiles
    n = 50
    x = np.random.default_rng(15).standard_normal(n)

    def f(x):
        ones = ad.full((n,), 2.0)                                   # (one value: a number)
        ramp = ad.astype(ad.arange(n), ad.float64)                  # (different values)
        zeros = ad.where(ad.arange(n) > 3, 0.0, -0.0)               # (0.0 and -0.0 differ)
        return ad.sin(x) * ones + ad.cos(x) * ramp - x / zeros, ad.matmul(ramp, ramp)

    staged = make_program(f)(x)
    # (arrays made inside are captured, read at every call; as constants of the program they
    # are folded, as a gradient's are)
    prog = passes.optimize(Program(staged.name, staged.in_vars, staged.consts, staged.eqns,
                                   staged.outs, staged.in_spec, staged.out_spec, staged.backend))
    tiled = lower_tiles.lower(prog)
    check(tiled)
    assert sum(1 for v in prog.consts if v.shape) == 3
    # (left as arrays: the ramp, also read by matmul, and the zeros of both signs)
    big = [c for v, c in tiled.consts.items() if v.shape]
    assert len(big) == 2 and not any(lower_tiles._uniform(c) for c in big)
    with np.errstate(all="ignore"):
        _bits(compile_replay(tiled)(x), compile_replay(prog)(x), "constants")
    j = ad.jit(grad(chain))   # (the gradient's seed, 1 broadcast to x's shape)
    j(x)
    assert all(v.shape == () for v in executable(j.lower(x)).tiled.consts)


def test_tiled_kernels_take_any_layout_and_write_into_buffers(numpy_calls):
    from arrayad._jit import lower_tiles
    n = lower_tiles.MIN_ELEMENTS
    rng = np.random.default_rng(9)
    base = rng.standard_normal((2 * n,))
    x = base[::2]                                        # (not contiguous)
    y = np.broadcast_to(rng.standard_normal(1), (n,))    # (read-only, stride 0)
    z = rng.standard_normal((n // 4, 4)).T               # (2-d, Fortran order)

    def f(x, y, z):
        return ad.sin(x) * y + ad.cos(x), ad.exp(-z) * 2 + z

    j = ad.jit(f)
    got = j(x, y, z)
    assert executable(j.lower(x, y, z)).tiled is not None
    with np.errstate(all="ignore"):
        want = (np.sin(x) * y + np.cos(x), np.exp(-z) * 2 + z)
    _bits(got, want, "layouts")
    assert base[::2] is not x and np.array_equal(base[::2], x)   # (inputs untouched)
    # a group's one output written into an argument's dead buffer (out_kernel)
    prog = make_program(lambda x: ad.sin(ad.exp(x) * 2) + 1)(base)
    tiled = lower_tiles.lower(prog)
    (eqn,) = tiled.eqns
    buf = np.empty_like(base)
    assert eqn.prim.out_kernel(base, out=(buf,))[0] is buf
    _bits(buf, np.sin(np.exp(base) * 2) + 1, "out_kernel")


def test_a_failing_tiling_warns_and_leaves_the_unfused_replay(monkeypatch):
    from arrayad._jit import lower_tiles

    def broken(sub):
        raise RuntimeError("no tiles today")

    monkeypatch.setattr(lower_tiles, "make_kernel", broken)
    x = np.random.default_rng(17).standard_normal(2 * lower_tiles.MIN_ELEMENTS)
    j = ad.jit(grad(chain))
    with pytest.warns(RuntimeWarning, match="tiling its program failed .*no tiles today"):
        got = j(x)
    assert executable(j.lower(x)).tiled is None
    np.testing.assert_allclose(got, chain_vec_grad_np(x), rtol=1e-9, atol=1e-12)


def test_tiled_replay_from_threads(numpy_calls):
    import concurrent.futures
    from arrayad._jit import lower_tiles
    n = lower_tiles.MIN_ELEMENTS * 2
    xs = [np.random.default_rng(k).standard_normal(n) for k in range(8)]
    j = ad.jit(grad(chain))
    j(xs[0])
    with fusion_off():
        want = [ad.jit(grad(chain))(x) for x in xs]
    # (each call has its own tile buffers: calls from threads do not share them)
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        for _ in range(3):
            for got, w in zip(pool.map(j, xs), want):
                _bits(got, w, "threads")


def fusion_off():
    from arrayad._jit import fusion
    return fusion.turned(False)


def test_tiled_programs_under_grad_jvp_and_vmap():
    from arrayad._jit import lower_tiles
    n = lower_tiles.MIN_ELEMENTS
    x = np.random.default_rng(10).standard_normal(n)
    jf = ad.jit(chain)
    jf(x)
    assert executable(jf.lower(x)).tiled is not None
    t = np.cos(x)
    np.testing.assert_allclose(jvp(jf, (x,), (t,))[1], np.sum(t * chain_vec_grad_np(x)),
                               rtol=1e-9)
    np.testing.assert_allclose(grad(jf)(x), chain_vec_grad_np(x), rtol=1e-9, atol=1e-12)
    jv = ad.jit(chain_vec)
    jv(x)
    xs = np.stack([x, -x])
    np.testing.assert_allclose(vmap(jv)(xs), chain_vec_np(xs), rtol=1e-12)


# -- the tile machine (NOTE [tile machine]) -------------------------------------------------

@pytest.fixture
def machine(monkeypatch):
    """Every group of the tile machine's operations in it, in tiles of 3 elements."""
    from arrayad._jit import lower_tiles, vector_math
    if not vector_math.ADDRESSES:
        pytest.skip("no vector math library here (glibc's libmvec on x86-64)")
    monkeypatch.setattr(lower_tiles, "MACHINE_MIN", 1)
    monkeypatch.setattr(lower_tiles, "MACHINE_MIN_OPS", 1)
    monkeypatch.setattr(lower_tiles, "MACHINE_TILE", 3)


def _machine_names(prog):
    return [e.prim.name for e in prog.eqns if getattr(e.prim, "fused", False)
            and e.prim.kernel.source.startswith("tile machine")]


@pytest.mark.parametrize("case", FIRST_DIFF, ids=[c.id for c in FIRST_DIFF])
def test_the_tile_machine_gives_the_unfused_results(case, machine):
    from arrayad._jit import lower_tiles
    for name, tiled, got, want in _lowered_runs(case, lower_tiles.lower, Backend("numpy")):
        if not _machine_names(tiled):
            continue
        for g, w in zip(_leaves(got), _leaves(want)):
            assert g.dtype == w.dtype and g.shape == w.shape
            assert np.array_equal(np.isnan(g), np.isnan(w)), name
            # (libmvec's functions: a few ulp, through the derivative's products)
            np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-15, err_msg=name)


@pytest.mark.parametrize("shape, row", [((16, 16), (16,)), ((4, 5, 100), (1, 100)),
                                        ((3, 2048), (2048,)), ((5, 3000), (3000,)),
                                        ((2, 3, 7), (3, 7)), ((300, 7), (300, 1)),
                                        ((6, 5, 7), (6, 1, 7)), ((64, 3, 5), (64, 3, 1)),
                                        ((1500,), (1,))])
def test_the_tile_machine_reads_broadcast_operands_and_selects_bit_for_bit(shape, row):
    """Operands broadcast along the leading axes (a Hessian's rows times a vector, a k-means
    distance's centroid norms), along others (a column, a middle axis: gathered tile by tile,
    across tiles' edges) and where(mask, 0, x) (a structural zero) run in the machine, with
    the unfused replay's bits: tiles of a multiple of a short row's length, or dividing a long
    one (3,000: tiles of 1,000), and odd lengths too (7, 21)."""
    from arrayad._jit import lower_tiles, vector_math
    if not vector_math.ADDRESSES:
        pytest.skip("no vector math library here (glibc's libmvec on x86-64)")
    rng = np.random.default_rng(4)
    m, v = rng.standard_normal(shape), rng.standard_normal(row)
    m.reshape(-1)[:6] = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e308]
    v.reshape(-1)[:3] = [0.0, -0.0, np.inf][:v.size]
    mask = rng.random(shape) < 0.3

    def f(m, v, mask):
        a = ad.where(mask, 0.0, m * v)
        b = (m - v) / (v + 1.5) + a * v
        return ad.where(mask, b, -a) + m * 2.0 - v

    prog = make_program(f)(m, v, mask)
    tiled = lower_tiles.lower(prog)
    assert _machine_names(tiled) and not [e for e in tiled.eqns if e.prim.name == "where"]
    with np.errstate(all="ignore"):
        for mask in (mask, ~mask):   # (another mask: converted anew)
            got, want = compile_replay(tiled)(m, v, mask), compile_replay(prog)(m, v, mask)
            # (the same bits, zeros' signs too; a nan is a nan, its sign bit being unspecified
            # by IEEE 754 for arithmetic, which picks between two nan operands)
            np.testing.assert_array_equal(got, want, strict=True)
            real = ~np.isnan(want)
            assert np.array_equal(np.signbit(got[real]), np.signbit(want[real]))


def test_a_captured_mask_written_in_place_is_read_by_the_machine_at_every_call():
    from arrayad._jit import vector_math
    if not vector_math.ADDRESSES:
        pytest.skip("no vector math library here (glibc's libmvec on x86-64)")
    rng = np.random.default_rng(6)
    m, v = rng.standard_normal((64, 32)), rng.standard_normal(32)
    mask = np.zeros((64, 32), dtype=bool)
    j = ad.jit(lambda m, v: ad.where(mask, 0.0, m * v) + m)
    assert any(getattr(e.prim, "fused", False) and "where" in e.prim.name
               for e in executable(j.lower(m, v)).run_prog.eqns)
    np.testing.assert_array_equal(j(m, v), m * v + m)
    mask[::2] = True   # (in place: the program's captured array, new values)
    np.testing.assert_array_equal(j(m, v), np.where(mask, 0.0, m * v) + m)


def test_a_group_the_machine_cannot_run_keeps_its_tiles_and_replays_the_rest():
    """A broadcast operand in a group with an operation the machine does not compute
    (maximum, which NumPy's calls on tiles run): the broadcast product is left to one call,
    the rest is still fused, with the unfused replay's bits."""
    from arrayad._jit import lower_tiles
    rng = np.random.default_rng(5)
    m, v = rng.standard_normal((8, 512)), rng.standard_normal(512)

    def f(m, v):
        return ad.maximum(m * v, 0.5) + m * 2.0

    prog = make_program(f)(m, v)
    tiled = lower_tiles.lower(prog)
    fused = [e for e in tiled.eqns if getattr(e.prim, "fused", False)]
    assert fused and all(e.prim.kernel is not None for e in fused)
    assert [e.prim.name for e in tiled.eqns if not getattr(e.prim, "fused", False)] == \
        ["multiply"]
    _bits(compile_replay(tiled)(m, v), compile_replay(prog)(m, v), "mixed")


def _machine_group_names(tiled):
    return [e.prim.name for e in tiled.eqns if getattr(e.prim, "fused", False)
            and e.prim.kernel is not None and e.prim.kernel.tier == "tile machine"]


@pytest.mark.parametrize("shape", [(700, 3), (40, 10), (9, 129), (3, 1000), (2, 5, 17),
                                   (300,)])
@pytest.mark.parametrize("name", ["sum", "min", "max"])
def test_the_tile_machine_ends_a_group_with_a_reduction_along_the_last_axis(
        shape, name, monkeypatch):
    """A float64 group followed by a sum, min or max along its last axis (a k-means cost's
    nearest centroid) reduces each tile's rows in the machine: the unreduced value never
    reaches memory unless it is read elsewhere, and the result has the unfused replay's bits
    (NumPy's pairwise sum; a min or max is nan from a row's first nan), rows of 3 to 1,000
    values, 1-d too, keepdims or not."""
    from arrayad._jit import lower_tiles, vector_math
    if not vector_math.ADDRESSES:
        pytest.skip("no vector math library here (glibc's libmvec on x86-64)")
    monkeypatch.setattr(lower_tiles, "MACHINE_MIN_OPS", 1)
    rng = np.random.default_rng(7)
    x, y = rng.standard_normal(shape) * 1e3, rng.standard_normal(shape[-1:])
    x.reshape(-1)[:4] = [np.inf, -np.inf, 1e308, 0.0]
    x.reshape(-1)[-2:] = np.nan   # (the last row: a nan among numbers)
    reduce = getattr(ad, name)

    def f(x, y):
        d = (x - y) * x + 2.0 * y
        return reduce(d, axis=-1), reduce(d * d, axis=len(shape) - 1, keepdims=True), d

    prog = make_program(f)(x, y)
    tiled = lower_tiles.lower(prog)
    ending = [g for g in _machine_group_names(tiled) if g.endswith(f",{name}]")]
    assert len(ending) == 2 and ending[1] == f"fused[multiply,{name}]", ending
    with np.errstate(all="ignore"):
        _bits(compile_replay(tiled)(x, y), compile_replay(prog)(x, y), name)


@pytest.mark.parametrize("shape, axis", [((1000, 10), 0), ((37, 64), (0,)), ((5, 1000), 0),
                                         ((3, 4, 5), (0, 1)), ((6, 4, 5), 0), ((700, 3), -2)])
@pytest.mark.parametrize("name", ["sum", "min", "max"])
def test_the_tile_machine_ends_a_group_with_a_reduction_along_the_leading_axes(
        shape, axis, name, monkeypatch):
    """A float64 group followed by a sum, min or max along its leading axes (a k-means
    gradient's sum over points) accumulates each tile's rows into the result in order, as
    NumPy does: the unfused replay's bits (a nan wherever one was met); rows longer than
    ``SHORT_ROW`` are left to NumPy's vectorised loop."""
    from arrayad._jit import lower_tiles, vector_math
    if not vector_math.ADDRESSES:
        pytest.skip("no vector math library here (glibc's libmvec on x86-64)")
    monkeypatch.setattr(lower_tiles, "MACHINE_MIN_OPS", 1)
    rng = np.random.default_rng(9)
    x = rng.standard_normal(shape) * 1e3
    x.reshape(-1)[:4] = [np.inf, -np.inf, 1e308, 0.0]
    x.reshape(-1)[-2] = np.nan
    reduce = getattr(ad, name)

    def f(x):
        d = x * x - 3.0 * x
        return reduce(d, axis=axis), reduce(d + 1.0, axis=axis, keepdims=True)

    prog = make_program(f)(x)
    tiled = lower_tiles.lower(prog)
    ending = [g for g in _machine_group_names(tiled) if g.endswith(f",{name}]")]
    short = math.prod(shape[len(axis) if isinstance(axis, tuple) else 1:]) <= \
        lower_tiles.SHORT_ROW
    assert len(ending) == (2 if short else 0), _machine_group_names(tiled)
    with np.errstate(all="ignore"):
        _bits(compile_replay(tiled)(x), compile_replay(prog)(x), name)


def test_comparisons_casts_and_broadcast_columns_run_in_the_tile_machine():
    """k-means' gradient counts each point's nearest centroids (``equal(d, min(d)[:, None])``
    cast to float64 and summed) and selects on comparisons: the condition stays in the machine
    as 1.0 or 0.0, the column is read as it is (not broadcast first); the unfused replay's
    bits, nan and ties included; the gradient of the nearest-centroid cost matches the
    eager one. A condition the program returns never leaves the machine: its comparison is
    left to NumPy, the rest stays fused."""
    from arrayad._jit import lower_tiles, vector_math
    if not vector_math.ADDRESSES:
        pytest.skip("no vector math library here (glibc's libmvec on x86-64)")
    rng = np.random.default_rng(8)
    x, y = rng.standard_normal((300, 10)), rng.standard_normal(10)
    x[::7, 3] = x[::7, 2]   # (ties)
    x[5, 4] = np.nan

    def f(x, y):
        d = x * y + 1.0
        ties = ad.sum(ad.astype(d == ad.min(d, axis=1)[:, None], ad.float64), axis=1)
        picked = ad.where(d > 0.5, d, -d) + ad.astype(d <= y, ad.float64) * 3.0
        return ties, picked

    prog = make_program(f)(x, y)
    tiled = lower_tiles.lower(prog)
    names = _machine_group_names(tiled)
    assert "fused[equal,where,sum]" in names and any("greater" in n for n in names), names
    assert not [e for e in tiled.eqns if e.prim.name in ("broadcast_to", "astype", "equal")]
    with np.errstate(invalid="ignore"):
        _bits(compile_replay(tiled)(x, y), compile_replay(prog)(x, y), "comparisons")

    def returns_condition(x, y):
        c = x * y > 0.1
        return ad.where(c, x, y) * 2.0 - x, c

    prog = make_program(returns_condition)(x, y)
    tiled = lower_tiles.lower(prog)
    assert [e.prim.name for e in tiled.eqns if not getattr(e.prim, "fused", False)] == \
        ["multiply", "greater"]   # (its product's group cannot hand out a condition)
    _bits(compile_replay(tiled)(x, y), compile_replay(prog)(x, y), "condition out")

    c = rng.standard_normal((10, 3))
    p = rng.standard_normal((400, 3))

    def nearest_cost(c):
        d = ad.sum(p**2, axis=1)[:, None] + ad.sum(c**2, axis=1)[None, :] - 2 * (
            p @ ad.matrix_transpose(c))
        return ad.sum(ad.min(d, axis=1))

    j = ad.jit(grad(nearest_cost))
    np.testing.assert_allclose(j(c), grad(nearest_cost)(c), rtol=1e-12)
    assert any(n.endswith(",min]") for n in _machine_group_names(executable(j.lower(c)).run_prog))


def test_a_broadcast_is_read_as_it_is_only_where_the_result_keeps_its_shape():
    """A broadcast whose reader's other operands are numbers stays a broadcast: where no group
    takes the reader (a product alone), NumPy would give the operand's shape, not the
    result's; read directly it is where another operand has the result's shape."""
    a, x = np.arange(10.0), np.linspace(0, 1, 5000)
    m = np.linspace(-1, 1, 3000).reshape(300, 10)

    def f(a, x, m):
        return (ad.broadcast_to(a, (300, 10)) * 2.0, ad.sin(x) * ad.cos(x),
                ad.broadcast_to(a, (300, 10)) * m - m)

    jf = ad.jit(f)
    for _ in range(2):   # (the trace, then the replay)
        got = jf(a, x, m)
        assert got[0].shape == (300, 10)
        np.testing.assert_array_equal(got[0], np.broadcast_to(a * 2.0, (300, 10)))
        np.testing.assert_array_equal(got[2], a * m - m)


def test_the_tile_machine_does_ieee_arithmetic_bit_for_bit(machine):
    from arrayad._jit import lower_tiles
    rng = np.random.default_rng(18)
    x, y = rng.standard_normal(41), rng.standard_normal(41)
    x[:8] = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e308, 5e-324, -2.0]
    y[:8] = [1.0, np.inf, 0.0, -0.0, 0.0, 1e308, 2.0, -0.0]
    c = np.array(-1.5)   # (a 0-d input: a number given at each call)

    def f(x, y, c):
        return (x + y) * c - x / y + ad.abs(-x) * 2.5 + ad.sqrt(y) + x ** 2 - (3 - y) / c

    prog = make_program(f)(x, y, c)
    tiled = lower_tiles.lower(prog)
    assert _machine_names(tiled)
    with np.errstate(all="ignore"):
        _bits(compile_replay(tiled)(x, y, c), compile_replay(prog)(x, y, c), "arithmetic")
        _bits(compile_replay(tiled)(x, y, np.array(4.0)),
              compile_replay(prog)(x, y, np.array(4.0)), "another number")


def test_the_tile_machine_functions_on_edge_values(machine):
    from arrayad._jit import lower_tiles, vector_math
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-310, -1e-310, 700.0, -750.0, 1e5, 3.0])
    for name in vector_math.ADDRESSES:
        prog = make_program(lambda x: getattr(ad, name)(x * 1.0 + 0.0))(x)
        tiled = lower_tiles.lower(prog)
        assert _machine_names(tiled), name
        with np.errstate(all="ignore"):
            got, want = compile_replay(tiled)(x), compile_replay(prog)(x)
        assert np.array_equal(np.isnan(got), np.isnan(want)), name
        fin = np.isfinite(want)
        assert np.array_equal(got[~fin & ~np.isnan(want)], want[~fin & ~np.isnan(want)]), name
        assert _ulps(got[fin], want[fin]).max() <= 4, name
        zero = want == 0
        assert np.array_equal(np.signbit(got[zero]), np.signbit(want[zero])), name


def test_jit_runs_long_programs_on_small_arrays_in_the_tile_machine():
    from arrayad._jit import fusion, lower_tiles, vector_math
    if not vector_math.ADDRESSES:
        pytest.skip("no vector math library here (glibc's libmvec on x86-64)")

    def deep(x):
        for _ in range(60):
            x = ad.sin(x) * 0.5 + ad.cos(x * 0.7)
        return ad.sum(x)

    x = np.random.default_rng(19).standard_normal(64)
    j = ad.jit(grad(deep))
    j(x)
    got = j(x)
    tiled = executable(j.lower(x)).tiled
    assert tiled is not None and len(_machine_names(tiled)) == len(tiled.eqns)
    assert any(len(e.outs) > 1 for e in tiled.eqns)   # (outputs that share one array)
    with fusion.turned(False):
        want = ad.jit(grad(deep))(x)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)
    # a large group of several outputs: an array each; into a dead buffer: out_kernel
    big = np.random.default_rng(20).standard_normal(70000)
    two = ad.jit(lambda x: (ad.exp(x) * 2 + x, ad.sum(ad.exp(x) * 2)))
    a, b = two(big)
    np.testing.assert_allclose(a, np.exp(big) * 2 + big, rtol=1e-14)
    np.testing.assert_allclose(b, np.sum(np.exp(big) * 2), rtol=1e-12)
    prog = make_program(lambda x: ad.sin(ad.exp(x) * 2) + 1)(big)
    (eqn,) = lower_tiles.lower(prog).eqns
    buf = np.empty_like(big)
    assert eqn.prim.out_kernel(big, out=(buf,))[0] is buf
    np.testing.assert_allclose(buf, np.sin(np.exp(big) * 2) + 1, rtol=1e-13, atol=1e-15)


# -- vector sin and cos (NOTE [vector math]) --------------------------------------------------

def _vector_functions():
    from arrayad._jit import vector_math
    if not vector_math.FUNCTIONS:
        pytest.skip("no vector math library here (glibc's libmvec on x86-64)")
    return vector_math.FUNCTIONS


def _ulps(a, b):
    """The distance in units in the last place between float64 arrays (0 for nan and nan)."""
    ia, ib = (v.view(np.int64) for v in (a, b))
    ia = np.where(ia < 0, np.int64(-2 ** 63) - ia, ia)   # (ordered like the floats)
    ib = np.where(ib < 0, np.int64(-2 ** 63) - ib, ib)
    d = np.abs(ia.astype(object) - ib.astype(object)).astype(float)
    return np.where(np.isnan(a) & np.isnan(b), 0, d)


@pytest.mark.parametrize("name", ["sin", "cos"])
def test_vector_sin_and_cos_stay_within_4_ulp_of_numpy(name):
    f = _vector_functions()[name]
    rng = np.random.default_rng(12)
    parts = [rng.uniform(-s, s, 20001) for s in (1e-300, 1e-8, 1, 4, 100, 1e5, 1e9, 1e300)]
    special = [0.0, -0.0, np.inf, -np.inf, np.nan, 5e-324, -5e-324, np.pi, -np.pi / 2,
               1.7976931348623157e308, 2.0 ** 1000, 1e22]
    x = np.concatenate(parts + [np.array(special)])
    got = f(x, out=np.empty_like(x))
    with np.errstate(invalid="ignore"):
        want = getattr(np, name)(x)
    assert np.array_equal(np.isnan(got), np.isnan(want))
    assert _ulps(got, want).max() <= 4
    zero = want == 0
    assert np.array_equal(np.signbit(got[zero]), np.signbit(want[zero]))


def test_vector_functions_take_any_length_in_place_and_fall_back():
    fs = _vector_functions()
    rng = np.random.default_rng(13)
    for n in range(0, 20):   # (every rest after the full vectors of 2, 4 or 8 values)
        x = rng.standard_normal(n) * 10
        for name, f in fs.items():
            want = getattr(np, name)(x)
            got = f(x, out=np.empty_like(x))
            assert _ulps(got, want).max() <= 4 if n else got.shape == (0,)
            y = x.copy()
            assert f(y, out=y) is y and np.array_equal(y, got)   # (in place: the same values)
    x = rng.standard_normal(64)
    for name, f in fs.items():   # (float32, strided: NumPy's own function)
        x32 = x.astype(np.float32)
        assert np.array_equal(f(x32, out=np.empty_like(x32)), getattr(np, name)(x32))
        assert np.array_equal(f(x[::2], out=np.empty(32)), getattr(np, name)(x[::2]))


def test_every_vector_width_this_processor_has():
    # (the 2-, 4- and 8-lane loops: a machine uses its widest; here each is run and checked)
    import ctypes
    from arrayad._core import _vector_math
    from arrayad._jit import vector_math
    _vector_functions()
    lib = ctypes.CDLL("libmvec.so.1")
    x = np.random.default_rng(16).standard_normal(37) * 20
    widths = [w for w in (2, 4, 8) if w <= _vector_math.width()]
    assert widths and _vector_math.width() in widths
    for lanes in widths:
        for name in ("sin", "cos"):
            address = ctypes.cast(getattr(lib, vector_math._PREFIX[lanes] + name),
                                  ctypes.c_void_p).value
            out = np.empty_like(x)
            _vector_math.apply(address, x, out, lanes)
            assert _ulps(out, getattr(np, name)(x)).max() <= 4, (name, lanes)
    with pytest.raises(ValueError, match="lanes"):
        _vector_math.apply(address, x, out, 3)


def test_vector_math_can_be_turned_off():
    from arrayad._jit import vector_math
    with ad.config.jit_vector_math(False):
        assert vector_math.addresses() == {} and vector_math.functions() == {}
    assert vector_math.addresses() == vector_math.ADDRESSES


def test_jit_of_large_arrays_calls_vector_sin_and_cos(monkeypatch):
    from arrayad._jit import fusion, lower_tiles, vector_math
    fs = _vector_functions()
    x = np.random.default_rng(14).standard_normal(lower_tiles.MIN_ELEMENTS + 3) * 5
    j = ad.jit(grad(chain))
    got = j(x)
    kernel = executable(j.lower(x)).tiled.eqns[0].prim.kernel
    assert {f.__name__ for f in fs.values()} <= set(kernel.source_names)
    with fusion.turned(False):
        want = ad.jit(grad(chain))(x)
    # (the gradient's sums of products of sin and cos: a few ulp of each term)
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-14)
    np.testing.assert_allclose(got, chain_vec_grad_np(x), rtol=1e-9, atol=1e-12)
    # a lone sin is a group of its own (the sum outside it)
    lone = ad.jit(lambda x: ad.sum(ad.sin(x)))
    np.testing.assert_allclose(lone(x), np.sum(np.sin(x)), rtol=1e-13)
    assert _fused_names(executable(lone.lower(x)).tiled) == ["fused[sin]"]
    monkeypatch.setattr(vector_math, "FUNCTIONS", {})   # (NumPy's sin: nothing to gain alone)
    lone = ad.jit(lambda x: ad.sum(ad.sin(x)))
    lone(x)
    assert executable(lone.lower(x)).tiled is None


# -- fused programs under transforms -----------------------------------------------------------

def _fused_chain(n, dtype=np.float64):
    x = np.random.default_rng(3).standard_normal(n).astype(dtype)
    prog = make_program(chain_vec)(x)
    fused = fuse_elementwise(prog)
    assert _fused_names(fused)
    return x, compile_replay(fused, bound=True)


def test_fused_programs_under_grad_vjp_jvp_and_vmap():
    x, f = _fused_chain(9)
    np.testing.assert_allclose(to_numpy(grad(lambda x: ad.sum(f(x)))(x)), chain_vec_grad_np(x),
                               rtol=1e-10)
    ct = np.cos(x)
    _, pull = vjp(f, x)
    np.testing.assert_allclose(to_numpy(pull(ct)[0]), ct * chain_vec_grad_np(x), rtol=1e-10)
    t = np.sin(x)
    np.testing.assert_allclose(to_numpy(jvp(f, (x,), (t,))[1]), t * chain_vec_grad_np(x),
                               rtol=1e-10)
    xs = np.random.default_rng(4).standard_normal((3, 9))
    np.testing.assert_allclose(to_numpy(vmap(f)(xs)), chain_vec_np(xs), rtol=1e-12)
    check_grads(lambda x: ad.sum(f(x)), (x,), order=2, modes=("fwd", "rev"))


@pytest.mark.skipif(not NUMBA, reason="numba is an optional extra")
def test_jit_of_large_arrays_runs_numba_kernels_and_transforms_them(kernel_cache):
    from arrayad._jit import lower_numba
    n = 2 * lower_numba.MIN_ELEMENTS
    x = np.random.default_rng(5).standard_normal(n)
    j = ad.jit(grad(chain))
    for _ in range(2):
        np.testing.assert_allclose(j(x), chain_vec_grad_np(x), rtol=1e-9, atol=1e-12)
    exe = executable(j.lower(x))
    assert exe.fused is not None and _fused_names(exe.fused)
    # the fused kernel under the outer transforms: the primitive's rules (jitted themselves)
    jf = ad.jit(chain)
    jf(x)
    t = np.cos(x)
    np.testing.assert_allclose(jvp(jf, (x,), (t,))[1], np.sum(t * chain_vec_grad_np(x)),
                               rtol=1e-9)
    np.testing.assert_allclose(grad(jf)(x), chain_vec_grad_np(x), rtol=1e-9, atol=1e-12)


@pytest.mark.skipif(not NUMBA, reason="numba is an optional extra")
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_numba_keeps_the_dtype_and_nan_inf(dtype, kernel_cache):
    from arrayad._jit import lower_numba
    n = lower_numba.MIN_ELEMENTS
    x = np.random.default_rng(6).standard_normal(n).astype(dtype)
    x[:6] = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e30]

    def f(x):
        return ad.log(x * x) / x + ad.sqrt(x) * 3 - ad.exp(x)

    prog = make_program(f)(x)
    fused = lower_numba.lower(prog)
    assert fused is not None and _fused_names(fused)
    with np.errstate(all="ignore"):
        got, want = compile_replay(fused)(x), compile_replay(prog)(x)
        # (the terms' sizes: the sum's rounding errors are relative to them)
        x64 = x.astype(np.float64)
        scale = np.abs(np.log(x64 * x64) / x64) + np.abs(3 * np.sqrt(x64)) + np.exp(x64)
    assert got.dtype == want.dtype == dtype
    fin = np.isfinite(want)
    assert np.all(np.abs(got[fin] - want[fin]) <= 8 * np.finfo(dtype).eps * scale[fin])
    assert np.array_equal(np.isnan(got), np.isnan(want))
    assert np.array_equal(got[np.isinf(want)], want[np.isinf(want)])


@pytest.mark.skipif(not NUMBA, reason="numba is an optional extra")
def test_a_program_is_lowered_once_its_replays_took_long_enough(monkeypatch, kernel_cache):
    from arrayad._jit import fusion, lower_numba
    x = np.random.default_rng(8).standard_normal(lower_numba.MIN_ELEMENTS)
    with ad.config.jit_fuse_after(3600.0):
        j = ad.jit(grad(chain))
        for _ in range(3):
            np.testing.assert_allclose(j(x), chain_vec_grad_np(x), rtol=1e-9, atol=1e-12)
        assert executable(j.lower(x)).fused is None   # (an hour of replays not reached)
    with ad.config.jit_fuse_after(1e-9):
        j = ad.jit(grad(chain))
        j(x)                                          # (traced)
        assert executable(j.lower(x)).fused is None
        j(x)                                          # (one replay: over the budget, lowered)
        assert executable(j.lower(x)).fused is not None
        np.testing.assert_allclose(j(x), chain_vec_grad_np(x), rtol=1e-9, atol=1e-12)
    with fusion.turned(False):
        j = ad.jit(grad(chain))
        j(x)
        assert not fusion.wanted(j.lower(x))
    # (turned(..., fuse_after=0): compiled when staged, within the block only)
    with ad.config.jit_fuse_after(3600.0):
        with fusion.turned(True, fuse_after=0):
            j = ad.jit(grad(chain))
            j(x)
            assert executable(j.lower(x)).fused is not None
        assert ad.config.read("jit_fuse_after") == 3600.0


def test_small_arrays_are_not_fused():
    from arrayad._jit import lower_numba
    x = np.random.default_rng(7).standard_normal(16)
    j = ad.jit(grad(chain))
    j(x)
    assert executable(j.lower(x)).fused is None
    assert lower_numba.lower(j.lower(x)) is None


def test_groups_are_split_at_max_group():
    x = np.random.default_rng(9).standard_normal(5)

    def deep(x):
        for _ in range(25):
            x = ad.sin(x) * 1.5
        return x

    prog = make_program(deep)(x)
    fused = fuse_elementwise(prog, max_group=10)
    check(fused)
    sizes = [len(e.prim.prog.eqns) for e in fused.eqns if getattr(e.prim, "fused", False)]
    assert sizes == [10, 10, 10, 10, 10]
    want = x
    for _ in range(25):
        want = np.sin(want) * 1.5
    np.testing.assert_allclose(compile_replay(fused)(x), want, rtol=1e-12)


@pytest.mark.skipif(not NUMBA, reason="numba is an optional extra")
def test_numba_kernels_take_read_only_inputs(kernel_cache):
    # (a read-only array, a broadcast view: the loop's inputs are typed read-only; before, numba
    # found no matching signature for them)
    from arrayad._jit import lower_numba
    x = np.random.default_rng(10).standard_normal(lower_numba.MIN_ELEMENTS)
    x.flags.writeable = False
    j = ad.jit(grad(chain))
    for _ in range(2):
        np.testing.assert_allclose(j(x), chain_vec_grad_np(x), rtol=1e-9, atol=1e-12)
    assert executable(j.lower(x)).fused is not None
    c = np.broadcast_to(np.float64(0.3), x.shape)
    jf = ad.jit(lambda x, c: ad.sin(x) * c + ad.exp(c))
    for _ in range(2):
        np.testing.assert_allclose(jf(x, c), np.sin(x) * 0.3 + np.exp(0.3), rtol=1e-13)
    assert executable(jf.lower(x, c)).fused is not None


# -- torch.compile of fused groups on torch tensors (lower_torch.py) ---------------------------

TORCH_COMPILE = importlib.util.find_spec("torch") is not None


@pytest.fixture
def torch_compiled(monkeypatch):
    """Fusion on; torch-backed programs compiled when staged (each group compiles once, for
    seconds: these tests compile five)."""
    from arrayad._jit import lower_torch
    with ad.config.jit_fuse(True), ad.config.jit_torch_compile_after(0):
        yield lower_torch


@pytest.mark.skipif(not TORCH_COMPILE, reason="torch is an optional extra")
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_torch_compile_gives_the_unfused_results_and_dtype(dtype, torch_compiled):
    import torch
    xn = np.random.default_rng(11).standard_normal(256).astype(dtype)
    x = torch.asarray(xn)
    j = ad.jit(grad(chain))
    j(x)
    got = j(x)
    exe = executable(j.lower(x))
    assert exe.fused is not None and _fused_names(exe.fused)
    want = compile_replay(exe.prog)(x)
    assert got.dtype == want.dtype == getattr(torch, dtype)
    tol = 1e-5 if dtype == "float32" else 1e-13
    np.testing.assert_allclose(to_numpy(got), to_numpy(want), rtol=tol, atol=tol)
    np.testing.assert_allclose(to_numpy(got), chain_vec_grad_np(xn.astype(np.float64)),
                               rtol=10 * tol, atol=10 * tol)


@pytest.mark.skipif(not TORCH_COMPILE, reason="torch is an optional extra")
def test_torch_compiled_groups_under_grad_and_vmap(torch_compiled):
    import torch
    xn = np.random.default_rng(12).standard_normal(128)
    x = torch.asarray(xn)
    prog = make_program(chain_vec)(x)
    fused = torch_compiled.lower(prog)
    assert fused is not None and _fused_names(fused)
    f = compile_replay(fused, bound=True)   # (binds the fused primitive: its compiled impl)
    np.testing.assert_allclose(to_numpy(f(x)), chain_vec_np(xn), rtol=1e-13)
    # its VJP and batching rules: jitted programs of the sub-program, compiled in turn
    np.testing.assert_allclose(to_numpy(grad(lambda x: ad.sum(f(x)))(x)), chain_vec_grad_np(xn),
                               rtol=1e-10, atol=1e-13)
    xsn = np.random.default_rng(13).standard_normal((3, 128))
    np.testing.assert_allclose(to_numpy(vmap(f)(torch.asarray(xsn))), chain_vec_np(xsn),
                               rtol=1e-13)


def test_torch_programs_wait_before_compiling():
    # (a compiler that takes seconds: lowered after jit_torch_compile_after seconds of replays)
    torch = pytest.importorskip("torch")
    from arrayad._jit import fusion
    x = torch.asarray(np.random.default_rng(14).standard_normal(4096))
    with ad.config.jit_fuse(True):
        j = ad.jit(grad(chain))
        j(x)
        prog = j.lower(x)
        assert fusion.wanted(prog) and fusion.budget(prog) == ad.config.read(
            "jit_torch_compile_after") > 1
        j(x)
        assert executable(prog).fused is None


def test_a_torch_compile_failure_leaves_the_unfused_replay(torch_compiled, monkeypatch):
    torch = pytest.importorskip("torch")

    def broken(fn, **options):   # (what a machine without a C++ compiler gets)
        def run(*args):
            raise RuntimeError("no C++ compiler")
        return run
    monkeypatch.setattr(torch, "compile", broken)
    xn = np.random.default_rng(15).standard_normal(64)
    x = torch.asarray(xn)
    j = ad.jit(grad(chain))
    j(x)
    assert executable(j.lower(x)).fused is not None
    with pytest.warns(RuntimeWarning, match="torch.compile of a fused group failed"):
        got = j(x)
    np.testing.assert_allclose(to_numpy(got), chain_vec_grad_np(xn), rtol=1e-10, atol=1e-13)
    np.testing.assert_allclose(to_numpy(j(x)), chain_vec_grad_np(xn), rtol=1e-10, atol=1e-13)
