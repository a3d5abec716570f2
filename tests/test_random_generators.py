"""arrayad.Generator: generator= in randn/rand/randint draws from a stream of its own, per
backend, as torch.Generator does (it used to be ignored silently)."""

import numpy as np
import pytest

import arrayad as ad
from arrayad.func import vmap
from conftest import to_numpy


@pytest.mark.parametrize("name", ["numpy", "array_api_strict", "torch"])
def test_a_generator_is_its_own_reproducible_stream(name):
    if name == "torch":
        pytest.importorskip("torch")
    g = ad.Generator(backend=name).manual_seed(7)
    thread_state = ad.get_rng_state()
    with ad.backend(name):
        a = ad.randn(4, generator=g)
        state = g.get_state()
        b = ad.rand(3, generator=g)
        c = ad.randint(0, 100, (5,), generator=g)
        g.set_state(state)
        np.testing.assert_array_equal(to_numpy(ad.rand(3, generator=g)), to_numpy(b))
        np.testing.assert_array_equal(to_numpy(ad.randint(0, 100, (5,), generator=g)),
                                      to_numpy(c))
        again = ad.randn(4, generator=ad.Generator(backend=name).manual_seed(7))
        np.testing.assert_array_equal(to_numpy(again), to_numpy(a))
        other = ad.randn(4, generator=ad.Generator(backend=name).manual_seed(8))
        assert not np.array_equal(to_numpy(other), to_numpy(a))
        assert ad.backends.backend_of(a).name == name
    # drawing from g leaves the thread's own stream where it was
    after = ad.get_rng_state()
    assert repr(after) == repr(thread_state)
    assert g.initial_seed() == 7


def test_generator_backend_must_match_the_array():
    g = ad.Generator(backend="array_api_strict")
    with pytest.raises(ValueError, match="randn: generator= draws array_api_strict numbers but "
                                         "the array is made on numpy"):
        ad.randn(2, generator=g)
    with pytest.raises(TypeError, match="rand: generator= must be an arrayad.Generator"):
        ad.rand(2, generator=np.random.default_rng(0))


def test_generator_under_vmap_with_different_randomness():
    g = ad.Generator().manual_seed(1)
    out = vmap(lambda x: x + ad.randn(3, generator=g), randomness="different")(np.zeros((2, 3)))
    assert not np.array_equal(out[0], out[1])
    ref = ad.randn(2, 3, generator=ad.Generator().manual_seed(1))
    np.testing.assert_array_equal(out, to_numpy(ref))
