"""``arrayad.config`` (NOTE [configuration] in arrayad/config.py): defaults from the environment,
``with`` blocks per thread and task, ``update`` for the process, what each setting changes, the
settings that are part of the jit cache key, and the errors."""

import asyncio
import contextvars
import gc
import json
import os
import subprocess
import sys
import threading

import numpy as np
import pytest

import arrayad as ad
from arrayad import config
from arrayad.func import grad

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _run(env, code):
    env = dict(os.environ, **env, OMP_NUM_THREADS="1")
    for k in list(env):
        if k.startswith("ARRAYAD_") and k not in os.environ and k not in env:
            env.pop(k)
    return subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True,
                          text=True, timeout=120)


# -- defaults from the environment (two subprocesses: they cost a second each) ----------------

def test_environment_variables_are_the_defaults():
    env = {"ARRAYAD_JIT_FUSE": "1", "ARRAYAD_JIT_TILES": "off", "ARRAYAD_JIT_FUSE_AFTER": "2.5",
           "ARRAYAD_JIT_TORCH_COMPILE_AFTER": "7", "ARRAYAD_JIT_VECTOR_MATH": "0",
           "ARRAYAD_JIT_CHECK": "yes", "ARRAYAD_SCAN_COMPILED": "false",
           "ARRAYAD_SCAN_NUMBA": "0", "ARRAYAD_CACHE_DIR": "/tmp/arrayad-env-test",
           "ARRAYAD_BACKEND": "array_api_strict", "ARRAYAD_DEBUG_NANS": "1",
           "ARRAYAD_REUSE_FREED_MEMORY": "0"}
    code = ("import json, threading, arrayad as ad\n"
            "seen = {}\n"
            "t = threading.Thread(target=lambda: seen.update(other=ad.config.read('debug_nans')))\n"
            "t.start(); t.join()\n"
            "print(json.dumps({**{n: ad.config.read(n) for n in ad.config.SETTINGS}, **seen}))")
    out = _run(env, code)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == {
        "jit_fuse": True, "jit_tiles": False, "jit_fuse_after": 2.5,
        "jit_torch_compile_after": 7.0, "jit_vector_math": False, "jit_check": True,
        "scan_compiled": False, "scan_numba": False, "cache_dir": "/tmp/arrayad-env-test",
        "default_backend": "array_api_strict", "reuse_freed_memory": False,
        "debug_nans": True, "other": False}   # (debug_nans: the importing thread only)


def test_freed_memory_is_reused_unless_the_user_tuned_the_allocator():
    """NOTE [freed memory]: importing arrayad sets glibc's allocator to keep freed memory (a
    large array made again takes no page faults), which ``update`` undoes and redoes, a block
    cannot (the allocator is the process's), and where the user set glibc's own variables,
    arrayad leaves the allocator alone."""
    code = ("import arrayad as ad\n"
            "from arrayad.backends import numpy as nb\n"
            "print(ad.config.read('reuse_freed_memory'), nb._mallopt() is not None)\n"
            "ad.config.update('reuse_freed_memory', False)\n"
            "print(ad.config.read('reuse_freed_memory'))\n"
            "try:\n"
            "    ad.config.reuse_freed_memory(True)\n"
            "except ValueError as e:\n"
            "    print('refused' if 'update' in str(e) else e)\n")
    out = _run({}, code)
    assert out.returncode == 0, out.stderr
    first, off, block = out.stdout.split("\n")[:3]
    glibc = first.split()[1] == "True"
    assert first.split()[0] == str(glibc) and off == "False" and block == "refused"
    out = _run({"MALLOC_TRIM_THRESHOLD_": "1000000"}, code)
    assert out.returncode == 0 and out.stdout.split()[0] == "False", out.stdout + out.stderr


def test_a_bad_environment_value_stops_the_import_naming_the_variable():
    out = _run({"ARRAYAD_JIT_FUSE_AFTER": "-1"}, "import arrayad")
    assert out.returncode != 0
    assert "ARRAYAD_JIT_FUSE_AFTER='-1'" in out.stderr and "0 or more" in out.stderr, out.stderr


def _in_a_new_context(fn):
    """``fn()`` in an empty context, as a new thread's: no ``set_backend`` of this one (an
    earlier test's) hides the process's default."""
    return contextvars.Context().run(fn)


def test_an_unknown_backend_in_the_environment_is_named(monkeypatch):
    from arrayad.backends import _placement
    monkeypatch.setattr(_placement, "_process_default", [])
    monkeypatch.setitem(config._values, "default_backend", "nope")
    with pytest.raises(ValueError, match="ARRAYAD_BACKEND='nope'.*unknown backend"):
        _in_a_new_context(lambda: ad.zeros(2))


# -- blocks, update, threads and tasks -------------------------------------------------------

def test_a_block_restores_on_exit_and_on_an_exception():
    assert config.read("jit_tiles") is True
    with config.jit_tiles(False):
        assert config.jit_tiles.value is False
        with config.jit_tiles(True):
            assert config.read("jit_tiles") is True
        assert config.read("jit_tiles") is False
    assert config.read("jit_tiles") is True
    with pytest.raises(KeyError):
        with config.jit_tiles(False), config.jit_fuse_after(3):
            raise KeyError
    assert config.read("jit_tiles") is True and config.read("jit_fuse_after") == 0.25
    assert config._overrides.get() is None   # (nothing left in the context: NOTE [configuration])


def test_update_is_for_the_process_and_a_block_wins_where_it_is_open():
    try:
        with config.scan_numba(True):
            config.update("scan_numba", False)
            assert config.read("scan_numba") is True   # (the block's value)
        assert config.read("scan_numba") is False
        seen = []
        t = threading.Thread(target=lambda: seen.append(config.read("scan_numba")))
        t.start()
        t.join()
        assert seen == [False]   # (another thread sees the process's value)
    finally:
        config.update("scan_numba", True)


def test_a_block_belongs_to_its_thread():
    inside, go_on, seen = threading.Event(), threading.Event(), []

    def other():
        with config.jit_vector_math(False):
            inside.set()
            go_on.wait(10)
            seen.append(config.read("jit_vector_math"))

    t = threading.Thread(target=other)
    t.start()
    inside.wait(10)
    here = config.read("jit_vector_math")
    go_on.set()
    t.join()
    assert here is True and seen == [False]


def test_a_block_belongs_to_its_asyncio_task():
    async def holding(started, release):
        with config.jit_fuse_after(5):
            started.set()
            await release.wait()
            return config.read("jit_fuse_after")

    async def main():
        started, release = asyncio.Event(), asyncio.Event()
        task = asyncio.create_task(holding(started, release))
        await started.wait()
        other = config.read("jit_fuse_after")   # (while the task is inside its block)
        release.set()
        return other, await task

    assert asyncio.run(main()) == (0.25, 5.0)


# -- what each setting changes ---------------------------------------------------------------

def _f(x):
    s = ad.sin(x) * ad.cos(x) + ad.exp(-x * x)
    y = ad.tanh(s) * 2 - s / 3
    return ad.sum(ad.log(1 + y * y) + ad.expm1(x * 0.1) - ad.log1p(x * x))


@pytest.mark.parametrize("n", [64, 5000, 20000])
def test_without_vector_math_jit_is_eager_bit_for_bit(n):
    from arrayad._jit import vector_math
    x = np.random.default_rng(n).standard_normal(n)
    for fn in (_f, grad(_f)):
        j, eager = ad.jit(fn), fn(x)
        with config.jit_vector_math(False):
            j(x)
            assert np.array_equal(j(x), eager) and j(x).dtype == eager.dtype   # (the replay's)
        if vector_math.ADDRESSES and np.ndim(eager):
            j(x)
            # (vector math on: a few ulp off on many elements; the bound is on docs/jit.md)
            on = j(x)
            assert not np.array_equal(on, eager)
            np.testing.assert_allclose(on, eager, rtol=1e-13, atol=1e-13)


def test_compile_settings_are_part_of_the_jit_cache_key():
    x = np.linspace(0.0, 1.0, 4096)
    j = ad.jit(lambda v: v * 2 + 1)
    j(x)
    with config.jit_tiles(False):
        j(x)
        assert j.explain(x).replay == "unfused"
    assert j.explain(x).replay == "tiled" and j.traces == 2
    for _ in range(2):   # (each finds its own program again: the fast path too)
        j(x)
        with config.jit_tiles(False):
            j(x)
    assert j.traces == 2
    with config.jit_check(True), config.scan_numba(False):   # (no compile setting changed)
        j(x)
    assert j.traces == 2


def test_fusion_settings_reach_the_lowerers(monkeypatch):
    from arrayad._jit import fusion
    lowered_under = []

    def lower(prog):   # (a compiler that fuses nothing, and says when it ran)
        lowered_under.append(config.read("jit_fuse_after"))
        return None

    monkeypatch.setattr(fusion, "LOWERERS", dict(fusion.LOWERERS))
    fusion.register_lowerer("numpy", lower)   # (its budget: jit_fuse_after)
    x = np.ones(4096)
    j = ad.jit(lambda v: ad.sin(v) * 2)
    assert "compiled groups" not in j.explain(x).header   # (jit_fuse is off by default)
    with config.jit_fuse(True), config.jit_fuse_after(2):
        assert "take over after 2 s of replays" in j.explain(x).header
        exe = ad._jit.executable(j.lower(x))
    assert exe.settings["jit_fuse_after"] == 2.0 and exe.settings["jit_fuse"] is True
    exe.lower()   # (outside the block: under the values it was staged with)
    assert lowered_under == [2.0]
    with config.jit_fuse(True), config.jit_fuse_after(0):
        j(x)      # (staged and lowered at once)
    assert lowered_under == [2.0, 0.0]


def test_torch_compile_budget():
    torch = pytest.importorskip("torch")
    j = ad.jit(lambda v: ad.sin(v) * 2 + 1)
    x = torch.ones(16, dtype=torch.float64)
    with config.jit_fuse(True):
        assert "take over after 20 s of replays" in j.explain(x).header
        with config.jit_torch_compile_after(300):
            assert "take over after 300 s of replays" in j.explain(x).header


def test_jit_check_runs_the_checker_after_every_pass(monkeypatch):
    from arrayad._jit import passes
    checked = []
    monkeypatch.setattr(passes, "check", lambda prog, what: checked.append(what))
    ad.jit(lambda v: v * 1 + 0)(np.ones(3))
    assert checked == []
    with config.jit_check(True):
        ad.jit(lambda v: v * 1 + 0)(np.ones(3))
    assert "the staged program" in checked and len(checked) > 1


def test_scan_settings_choose_the_tier(monkeypatch):
    from arrayad._jit import scan as tiers
    monkeypatch.setattr(tiers, "NUMBA_AFTER", 0.0)   # (numba would be due at once)
    step = lambda c, x: (c * 0.5 + x, c)  # noqa: E731
    xs = np.linspace(0.0, 1.0, 300)
    before = dict(tiers.runs)
    with config.scan_compiled(False):
        replayed = ad.func.scan(step, np.float64(0.0), xs)
    assert tiers.runs == before
    with config.scan_numba(False):
        machine = ad.func.scan(step, np.float64(0.0), xs)
    assert tiers.runs["machine"] == before["machine"] + 1
    assert tiers.runs["numba"] == before["numba"]
    np.testing.assert_allclose(machine[0], replayed[0], rtol=1e-15)


def test_cache_dir(tmp_path):
    from arrayad._jit import lower_numba
    with config.cache_dir(tmp_path):
        assert lower_numba.cache_dir() == os.path.join(str(tmp_path), "numba")
    assert lower_numba.cache_dir() != os.path.join(str(tmp_path), "numba")


def test_default_backend_is_the_backend_blocks_setting():
    _in_a_new_context(_default_backend)


def _default_backend():
    with config.default_backend("array_api_strict"):
        assert ad.backends.backend_of(ad.zeros(2)).name == "array_api_strict"
        assert config.read("default_backend") == "array_api_strict"
        with ad.backend("numpy"):
            assert config.read("default_backend") == "numpy"
    try:
        config.update("default_backend", "strict")   # (an alias: the name is kept)
        assert config.read("default_backend") == "array_api_strict"
        seen = []
        t = threading.Thread(target=lambda: seen.append(ad.backends.default_backend().name))
        t.start()
        t.join()
        assert seen == ["array_api_strict"]
    finally:
        config.update("default_backend", "numpy")
    assert ad.backends.backend_of(ad.zeros(2)).name == "numpy"


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_debug_nans_is_detect_nans():
    from arrayad._core import _core
    from arrayad._jit import replay
    bad = np.array([0.0])
    with config.debug_nans(True):
        assert config.read("debug_nans") is True
        with pytest.raises(FloatingPointError, match="log made a NaN or an infinity"):
            ad.log(bad)
        with config.debug_nans(False):   # (off within an enclosing block)
            ad.log(bad)
        with ad.debug.detect_nans(False):
            ad.log(bad)
            assert config.read("debug_nans") is False
    with ad.debug.detect_nans():
        assert config.read("debug_nans") is True
    try:
        config.update("jax_debug_nans", True)   # (JAX's name)
        with pytest.raises(FloatingPointError, match="divide made a NaN or an infinity"):
            grad(lambda v: ad.sum(ad.sqrt(v)))(np.array([1.0, 0.0]))
        with pytest.raises(FloatingPointError):
            ad.jit(lambda v: ad.log(v) * 2)(bad)
        seen = []
        t = threading.Thread(target=lambda: seen.append((config.read("debug_nans"),
                                                         np.isinf(ad.log(bad))[0])))
        t.start()
        t.join()
        assert seen == [(False, True)]   # (per thread: the hook is the thread's)
        with ad.debug.detect_nans(True):
            config.update("debug_nans", False)   # (in force once the block ends)
            with pytest.raises(FloatingPointError):
                ad.log(bad)
        assert config.read("debug_nans") is False
        ad.log(bad)
    finally:
        config.update("debug_nans", False)
    assert _core.thread_state().staging is None and replay.EVALUATING[0] == 0
    # (a thread that ends with the check on leaves no hook counted: jit replays again)
    t = threading.Thread(target=lambda: config.update("debug_nans", True))
    t.start()
    t.join()
    gc.collect()
    assert replay.EVALUATING[0] == 0


# -- errors ----------------------------------------------------------------------------------

def test_bad_values_and_names_are_refused_clearly():
    with pytest.raises(TypeError, match=r"arrayad.config.jit_fuse: takes True or False, got 'yes'"):
        config.jit_fuse("yes")
    with pytest.raises(ValueError, match=r"jit_fuse_after.*0 or more, got -1"):
        config.update("jit_fuse_after", -1)
    with pytest.raises(TypeError, match="jit_torch_compile_after"):
        config.jit_torch_compile_after("20")
    with pytest.raises(TypeError, match="cache_dir"):
        config.update("cache_dir", 3)
    with pytest.raises(TypeError, match=r"arrayad.debug.detect_nans: takes True or False"):
        ad.debug.detect_nans("on")
    with pytest.raises(ValueError, match="unknown backend 'nope'"):
        with config.default_backend("nope"):
            pass
    with pytest.raises(ValueError, match=r"unknown setting 'jit_fusion'; the settings are "
                                         r"debug_nans, default_backend, jit_tiles"):
        config.read("jit_fusion")
    with pytest.raises(ValueError, match="'jax_enable_x64' is JAX's .* dtype of its inputs"):
        config.update("jax_enable_x64", True)
    assert config.read("jax_debug_infs") is False   # (debug_nans checks infinities too)
    assert config.read("jit_fuse_after") == 0.25 and config.read("jit_fuse") is False
