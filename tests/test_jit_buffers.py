"""The buffers of arrayad.jit's NumPy replay: large temporaries are written into buffers the
replay keeps across calls (NOTE [buffer pool]), and a 0-d value broadcast into a fused group is
read as a number. References: the same program replayed with no buffer plan at all (bit for
bit), hand-written NumPy, and the values a first call returned, kept across later calls."""

import threading

import numpy as np
import pytest

import arrayad as ad
from arrayad._jit import executable, lower_tiles, passes
from arrayad._jit.replay import compile_replay, writes_into
from arrayad.func import grad, make_program

# (large enough that the replay plans buffers for them: 128 KiB and more)
N = 40_000


@pytest.fixture(autouse=True)
def checked_passes():
    with ad.config.jit_check(True):
        yield


def _plain(prog):
    """The replay of ``prog`` with no buffer plan: every value a fresh array."""
    return compile_replay(prog, plan=passes.MemoryPlan())


def _same_bits(got, want):
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want, strict=True)
    assert np.array_equal(np.signbit(got), np.signbit(want))


def lse(x):
    m = ad.max(x)
    return m + ad.log(ad.sum(ad.exp(x - m)))


def test_the_log_sum_exp_gradient_is_the_softmax_through_pooled_buffers():
    x = np.random.default_rng(0).standard_normal(N)
    x[7] = x.max()   # (a tie at the maximum: max's gradient splits between the two)
    g = ad.jit(grad(lse))
    g(x)   # (the tracing call: its values are eager arrayad's, a few ulp from the replay's)
    first = g(x)
    kept = first.copy()
    e = np.exp(x - x.max())
    np.testing.assert_allclose(first, e / e.sum(), rtol=1e-12, atol=1e-18)
    for _ in range(3):   # (later calls take the pooled buffers: the first result stays)
        np.testing.assert_allclose(g(x), first, rtol=0, atol=0)
        g(-x)
    np.testing.assert_array_equal(first, kept)
    prog = g.lower(x)
    assert passes.plan_memory(executable(prog).run_prog, writes_into).pooled


@pytest.mark.parametrize("dtype", ["int64", "int16", "float32", "bool", "float64"])
def test_a_large_cast_writes_into_a_pooled_buffer_with_astypes_values(dtype):
    """A cast of a large temporary (a mask made float, in max's gradient) writes into a buffer
    the replay keeps (a fresh array's page faults cost more than the cast): NumPy's astype's
    values, nan, infinities and out-of-range values included, at every call."""
    x = np.linspace(-3e9, 3e9, N)
    x[:5] = [np.nan, np.inf, -np.inf, -0.0, 0.5]

    def f(x):
        return ad.astype(ad.astype(x * 2.0, getattr(ad, dtype)), ad.float64) + 1.0

    jf = ad.jit(f)
    with np.errstate(invalid="ignore", over="ignore"):
        want = (x * 2.0).astype(dtype).astype(np.float64) + 1.0
        for _ in range(3):
            np.testing.assert_array_equal(jf(x), want)
    plan = passes.plan_memory(executable(jf.lower(x)).run_prog, writes_into)
    assert any(v.label == "astype" for v in plan.pooled) or dtype == "float64", plan


def test_a_broadcast_0d_value_is_read_as_a_number_by_its_group():
    f = grad(lambda x: ad.sum(x * x * 3.0 + x) / ad.sum(x * 0.5 + 2.0))
    x = np.linspace(-2, 2, N)
    prog = make_program(f)(x)
    assert "broadcast_to" in prog.primitive_names()
    tiled = lower_tiles.lower(prog)
    assert "broadcast_to" not in tiled.primitive_names()
    for p in (tiled, prog):
        _same_bits(compile_replay(p)(x), _plain(prog)(x))


def test_pooled_buffers_never_reach_an_output_nor_a_view():
    def f(x, y):
        t = ad.exp(x) * y            # (a large temporary, read by sums and a group)
        u = ad.reshape(t * 2.0, (-1,))
        return u[::2] + 1.0, ad.sum(t), ad.tanh(t) - y

    x = np.linspace(-1, 1, N).reshape(200, 200)
    y = np.cos(x)
    jf = ad.jit(f)
    jf(x, y)
    first = [np.array(a, copy=True) for a in jf(x, y)]
    results = [jf(x, y), jf(2 * x, y), jf(x, -y)]
    t = np.exp(x) * y
    want = ((t * 2.0).reshape(-1)[::2] + 1.0, np.sum(t), np.tanh(t) - y)
    for got, w in zip(results[0], want):
        np.testing.assert_allclose(got, w, rtol=1e-13, atol=1e-15)
    for a, b in zip(results[0], first):   # (each call's outputs its own)
        np.testing.assert_array_equal(a, b)
    assert not np.shares_memory(results[0][0], results[1][0])


def test_a_fortran_ordered_dead_buffer_is_not_written_through_a_copy():
    base = np.random.default_rng(1).standard_normal((300, 300))
    x = base.T   # (a ufunc's result of it is Fortran-ordered too)
    f = ad.jit(lambda x: ad.sin(ad.exp(x) * 2.0) + ad.cos(ad.exp(x) * 3.0) - 1.0)
    want = np.sin(np.exp(x) * 2.0) + np.cos(np.exp(x) * 3.0) - 1.0
    for _ in range(2):
        np.testing.assert_allclose(f(x), want, rtol=1e-10, atol=1e-12)


def test_threads_share_one_replay_and_its_pool():
    g = ad.jit(grad(lse))
    xs = [np.random.default_rng(k).standard_normal(N) for k in range(4)]
    g(xs[0])   # (traced: the replays below are compared with replays)
    want = [g(x).copy() for x in xs]
    errors = []

    def run(k):
        try:
            for _ in range(20):
                np.testing.assert_array_equal(g(xs[k]), want[k])
        except Exception as e:   # (reported in the main thread)
            errors.append(e)

    threads = [threading.Thread(target=run, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]


# -- what jit(f).explain(*args) says (NOTE [explained lowering]) --------------------------------

def test_explain_names_the_tier_of_each_instruction_and_why_one_stayed_unfused():
    x = np.random.default_rng(0).standard_normal(N)
    text = ad.jit(grad(lse)).explain(x)
    rows = {r[0].split(" = ")[1]: r for r in text.rows}
    assert text.replay == "tiled"
    assert rows["fused[subtract,exp]"][1] == "tile machine"
    assert rows["max"][1:] == ("one backend call", "not elementwise")
    # (a comparison alone, its condition read by an astype the machine does not take)
    assert rows["equal"][1] == "one backend call"
    assert rows["equal"][2].startswith("a group of one: nothing to fuse")
    assert "pooled buffer" in str(text) and str(text).startswith("jit(lse) on numpy")
    # the same program on 100 float32 values: nothing fused, each instruction says why
    small = ad.jit(grad(lse)).explain(x[:100].astype(np.float32))
    assert small.replay == "unfused" and set(small.tiers()) == {"one backend call"}
    assert any("under 1024" in r[2] for r in small.rows)


@pytest.mark.parametrize("backend", ["array_api_strict", "torch"])
def test_explain_on_other_backends_says_no_lowering_fused_them(backend):
    xp = pytest.importorskip(backend)
    x = xp.asarray(np.linspace(-1, 1, 50))
    text = ad.jit(grad(lse)).explain(x)
    assert text.replay == "unfused" and str(text).startswith(f"jit(lse) on {backend}")
    notes = {r[2] for r in text.rows if r[0].endswith(" = exp")}
    assert notes and all("fusion" in n or "lowering" in n for n in notes), notes


# -- basic indexing in the NumPy replay and in the backend's scatter-add ------------------------

@pytest.mark.parametrize("key", [
    (slice(1, None),), (slice(None, -1),), (slice(None, None, -2),), (3,), (-1, slice(0, 2)),
    (Ellipsis, 1), (None, slice(2, 5)), (slice(1, 4), None, -2)])
def test_a_basic_key_scatters_and_gathers_as_numpys_own(key):
    from arrayad.backends import get_backend
    x = np.arange(24.0).reshape(6, 4) * 0.5 - 3.0
    numpy_backend = get_backend("numpy")
    v = np.linspace(-1, 1, x[key].size).reshape(x[key].shape)
    want = x.copy()
    np.add.at(want, key, v)
    got = numpy_backend.index_add(x, key, v)
    _same_bits(got, want)
    assert got is not x and np.array_equal(x, np.arange(24.0).reshape(6, 4) * 0.5 - 3.0)
    f = ad.jit(lambda a: a[key] * 2.0)
    f(x)
    _same_bits(np.asarray(f(x)), np.asarray(x[key] * 2.0))
    g = ad.jit(grad(lambda a: ad.sum(ad.sin(a[key]))))
    g(x)
    want_g = np.zeros_like(x)
    np.add.at(want_g, key, np.cos(x[key]))
    np.testing.assert_allclose(g(x), want_g, rtol=1e-15, atol=0)


def test_equal_slices_are_one_instruction():
    prog = ad.jit(lambda x: ad.sum(x[:1] * x[:1]) + ad.sum(x[1:] * x[1:])).lower(np.arange(4.))
    assert prog.primitive_names().count("getitem") == 2   # (not four: slices key the CSE)
    prog = ad.jit(lambda x: x[:2] + x[:3][:2] * x[0:2:1]).lower(np.arange(4.))
    # (x[:2] and x[0:2:1] select the same, but are other parameters: kept apart)
    assert prog.primitive_names().count("getitem") == 4
