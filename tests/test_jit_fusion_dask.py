"""Elementwise fusion lowered for Dask (NOTE [fusion], lower_dask.py): a fused group is one
blockwise layer, so the graph of a jitted function has one task per chunk per group; fused and
unfused give the same values, dtypes and derivatives on chunked inputs, with inputs of different
chunks, broadcast operands and groups of several outputs, through the NumPy replay of a block and
through the numba loop. References: hand-written NumPy functions and derivatives, the unfused
replay of the same program, and Dask's own task counts of the inputs."""

import importlib.util

import numpy as np
import pytest

da = pytest.importorskip("dask.array")
dask = pytest.importorskip("dask")

import arrayad as ad  # noqa: E402
from arrayad._jit import check, executable, fusion, lower_dask, lower_numba  # noqa: E402
from arrayad._jit.replay import compile_replay  # noqa: E402
from arrayad.func import grad, vmap  # noqa: E402

from conftest import Backend, no_dask_compute, to_numpy  # noqa: E402
from reference import chain, chain_vec, chain_vec_np  # noqa: E402
from test_jit_fusion import NUMBA_CASES, _programs, _same, chain_vec_grad_np  # noqa: E402

NUMBA = importlib.util.find_spec("numba") is not None
# the block kernels: NumPy's replay of the group always, numba's loop where it is installed
KERNELS = ["numpy"] + (["numba"] if NUMBA else [])


@pytest.fixture
def fused(tmp_path_factory):
    """Fusion on (it is opt-in), numba's kernels cached in a directory of this test session."""
    with ad.config.cache_dir(tmp_path_factory.getbasetemp() / "kernels"), \
            ad.config.jit_fuse(True):
        yield


@pytest.fixture(params=KERNELS)
def kernel(request, fused, monkeypatch):
    """Which block kernel runs: numba's loop for blocks of any size, or NumPy's replay only."""
    if request.param == "numba":
        monkeypatch.setattr(lower_numba, "MIN_ELEMENTS", 1)
        load = lower_numba._load

        def counted(src):
            LOOPS.append(src)
            return load(src)
        monkeypatch.setattr(lower_numba, "_load", counted)
    else:
        monkeypatch.setattr(lower_numba, "available", lambda: False)
    LOOPS.clear()
    return request.param


LOOPS = []   # the numba loops loaded by the test running (the "numba" kernel)


def _ran(kernel):
    """Whether the block kernel chosen ran: numba's loops were loaded, or none was."""
    return bool(LOOPS) == (kernel == "numba")


def _jitted(f, *args, on=True):
    """``jit(f)``'s replay on ``args`` (its second call: the first returns the traced values),
    fused or not, and its executable."""
    with fusion.turned(on):
        j = ad.jit(f)
        j(*args)
        out = j(*args)
        return out, executable(j.lower(*args))


def _tasks(a):
    return len(a.__dask_graph__())


def _groups(exe):
    return [e for e in exe.run_prog.eqns if getattr(e.prim, "fused", False)]


def _x(n=1200, chunks=100, dtype=np.float64, seed=0):
    xn = np.random.default_rng(seed).standard_normal(n).astype(dtype)
    return xn, da.from_array(xn, chunks=chunks)


def test_chain_is_one_task_per_chunk(kernel):
    xn, x = _x()
    chunks = x.numblocks[0]
    got, exe = _jitted(chain_vec, x)
    want, plain = _jitted(chain_vec, x, on=False)
    assert len(_groups(exe)) == 1 and plain.fused is None
    # the input's tasks and one per chunk; unfused: one per chunk per operation (13 + the
    # constant-folded ones)
    assert _tasks(got) == _tasks(x) + chunks
    assert _tasks(want) == _tasks(x) + chunks * len(plain.prog.eqns)
    np.testing.assert_allclose(got.compute(), chain_vec_np(xn), rtol=1e-13)
    np.testing.assert_allclose(got.compute(), want.compute(), rtol=1e-13)
    assert _ran(kernel)


def test_gradient_of_the_chain_is_one_task_per_chunk(kernel):
    xn, x = _x()
    chunks = x.numblocks[0]
    got, exe = _jitted(grad(chain), x)
    want, plain = _jitted(grad(chain), x, on=False)
    assert len(_groups(exe)) == 1
    # the seed of the backward pass enters by its 0-d source (NOTE [lazy broadcasts]): one task
    assert _tasks(got) == _tasks(x) + chunks + 1
    assert _tasks(want) >= _tasks(x) + 30 * chunks
    np.testing.assert_allclose(got.compute(), chain_vec_grad_np(xn), rtol=1e-10, atol=1e-13)
    np.testing.assert_allclose(got.compute(), want.compute(), rtol=1e-13, atol=1e-15)
    assert _ran(kernel)   # (the seed of ones enters 0-d: the loop reads it as one element)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_float32_stays_float32(dtype, kernel):
    xn, x = _x(dtype=dtype, chunks=250)
    got, exe = _jitted(grad(chain), x)
    assert _groups(exe)
    value = got.compute()
    assert got.dtype == dtype and value.dtype == dtype
    want = chain_vec_grad_np(xn.astype(np.float64))
    tol = 1e-4 if dtype == np.float32 else 1e-10
    np.testing.assert_allclose(value, want, rtol=tol, atol=tol)
    assert _ran(kernel)


def test_inputs_of_different_chunks_and_broadcast_operands(kernel):
    rng = np.random.default_rng(1)
    xn, yn, wn = rng.standard_normal((40, 6)), rng.standard_normal((40, 6)), rng.standard_normal(6)
    sn = np.float64(0.7)
    x = da.from_array(xn, chunks=(7, 6))
    y = da.from_array(yn, chunks=(10, 3))      # (other chunks than x's: rechunked, as unfused)
    w = da.from_array(wn, chunks=2)            # (broadcast along the rows)
    s = da.from_array(np.asarray(sn))          # (0-d)

    def f(x, y, w, s):
        return ad.sum(ad.sin(x) * y + ad.exp(w) / (1 + s * s))

    got, exe = _jitted(grad(f, argnums=(0, 1, 2, 3)), x, y, w, s)
    want, _ = _jitted(grad(f, argnums=(0, 1, 2, 3)), x, y, w, s, on=False)
    assert _groups(exe)
    hand = (np.cos(xn) * yn, np.sin(xn), 40 * np.exp(wn) / (1 + sn * sn),
            -np.sum(40 * np.exp(wn)) * 2 * sn / (1 + sn * sn) ** 2)
    for g, u, h in zip(got, want, hand):
        assert g.shape == h.shape
        np.testing.assert_allclose(g.compute(), h, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(g.compute(), u.compute(), rtol=1e-13, atol=1e-15)
    # the forward values too: a 2-d result fused from all four
    fv, exe = _jitted(lambda x, y, w, s: ad.sin(x) * y + ad.exp(w) / (1 + s * s), x, y, w, s)
    assert _groups(exe)
    np.testing.assert_allclose(fv.compute(), np.sin(xn) * yn + np.exp(wn) / (1 + sn * sn),
                               rtol=1e-13)


def test_a_group_of_several_outputs(kernel):
    xn, x = _x(n=300, chunks=70)

    def f(x):
        a = ad.sin(x) * 2          # read by the sum (outside the group) and by exp
        b = ad.exp(a) + ad.sum(a)  # the add reads the sum: a second group
        return b * 3, a

    (b, a), exe = _jitted(f, x)
    groups = _groups(exe)
    assert [len(e.outs) for e in groups] == [2, 1]
    an = np.sin(xn) * 2
    np.testing.assert_allclose(a.compute(), an, rtol=1e-13)
    np.testing.assert_allclose(b.compute(), (np.exp(an) + np.sum(an)) * 3, rtol=1e-12)
    # one task per chunk for the tuple of the first group, one per chunk per output taken out
    first = [n for n in dict(a.__dask_graph__().layers) if n.startswith("fused-")]
    assert len(first) == 2 and all(len(a.__dask_graph__().layers[n]) == x.numblocks[0]
                                   for n in first)


def test_grad_and_vmap_of_a_jitted_function(kernel):
    xn, x = _x(n=600, chunks=150)
    with fusion.turned(True):
        jf = ad.jit(chain)
        jf(x)
        np.testing.assert_allclose(jf(x).compute(), np.sum(chain_vec_np(xn)), rtol=1e-12)
        assert _groups(executable(jf.lower(x)))
        # (the program as one primitive: its VJP is a jitted, fused pullback)
        with no_dask_compute():
            g = grad(jf)(x)
        np.testing.assert_allclose(g.compute(), chain_vec_grad_np(xn), rtol=1e-10, atol=1e-13)
        xsn = np.random.default_rng(2).standard_normal((3, 600))
        xs = da.from_array(xsn, chunks=(1, 200))
        jv = ad.jit(chain_vec)
        jv(xs[0])
        with no_dask_compute():
            v = vmap(jv)(xs)
        np.testing.assert_allclose(v.compute(), chain_vec_np(xsn), rtol=1e-13)
        jvg = ad.jit(vmap(grad(chain)))
        jvg(xs)
        got = jvg(xs)
        assert _groups(executable(jvg.lower(xs)))
        np.testing.assert_allclose(got.compute(), chain_vec_grad_np(xsn), rtol=1e-10, atol=1e-13)


def test_nan_inf_and_signed_zeros_as_unfused(kernel):
    xn, x = _x(n=64, chunks=16)
    xn[:6] = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e30]
    x = da.from_array(xn, chunks=16)

    def f(x):
        return ad.log(x * x) / x + ad.sqrt(x) * 3 - ad.exp(x)

    with np.errstate(all="ignore"):
        got, exe = _jitted(f, x)
        assert _groups(exe)
        got = got.compute()
        want = np.log(xn * xn) / xn + np.sqrt(xn) * 3 - np.exp(xn)
    np.testing.assert_allclose(got, want, rtol=1e-13)   # (nan and inf where they are)


def test_small_programs_are_fused_and_lowered_when_staged(fused):
    # (whatever the size: what fusion saves on Dask is tasks; and at once, not after
    # jit_fuse_after seconds of replays, which on Dask only build graphs)
    with ad.config.jit_fuse_after(3600.0):
        xn, x = _x(n=8, chunks=3)
        got, exe = _jitted(chain_vec, x)
    assert _groups(exe) and _tasks(got) == 2 * x.numblocks[0]
    np.testing.assert_allclose(got.compute(), chain_vec_np(xn), rtol=1e-13)
    with fusion.turned(False):
        assert lower_dask.wanted(exe.prog) and not fusion.wanted(exe.prog)


def test_building_the_fused_graph_computes_nothing(fused):
    _, x = _x()
    with fusion.turned(True):
        j = ad.jit(grad(chain))
        with no_dask_compute():
            j(x)
            j(x)


# -- the operator database: the elementwise functions' VJP and JVP programs, fused on Dask -----

class _Chunked(Backend):
    """Dask arrays in chunks of two along each axis (several blocks per sample)."""

    def __init__(self):
        super().__init__("dask")

    def __call__(self, a, dtype=None):
        a = np.asarray(a, dtype=dtype)
        return da.from_array(a, chunks=tuple(2 for _ in a.shape))


@pytest.mark.parametrize("case", NUMBA_CASES, ids=[c.id for c in NUMBA_CASES])
def test_dask_lowering_gives_the_unfused_results(case, kernel):
    for prog, args in _programs(case, _Chunked()):
        leaves = [a for a in args if not isinstance(a, (int, float, complex, bool))]
        lowered = lower_dask.lower(prog)
        if lowered is None:
            continue
        check(lowered)
        want = compile_replay(prog)(*leaves)
        got = compile_replay(lowered)(*leaves)
        with np.errstate(all="ignore"):
            # (numba's loops call the C library's transcendental functions: an ulp or two)
            _same(got, want, f"dask {prog.name}", rtol=1e-13, atol=1e-15)


# -- a dask.distributed cluster: the fused layers' functions travel to other processes ---------

def test_fused_graph_on_a_local_cluster(fused):
    distributed = pytest.importorskip("distributed")
    xn, x = _x(n=400, chunks=100)
    got, exe = _jitted(grad(chain), x)
    assert _groups(exe)
    with distributed.LocalCluster(n_workers=1, processes=True, threads_per_worker=1,
                                  host="127.0.0.1", dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        remote = client.compute(got, sync=True)
    np.testing.assert_allclose(to_numpy(remote), chain_vec_grad_np(xn), rtol=1e-10, atol=1e-13)
