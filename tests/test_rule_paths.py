"""Paths of the rules that the operator database does not reach: the vmap loop-and-stack
fallback (``arrayad._ops._rules.batch_fallback``) and moving arrays between devices
(``Array.to_device`` -> ``arrayad._ops._api._to_device``, the ``to_device`` primitive)."""
import itertools
import warnings

import numpy as np
import pytest

import arrayad as ad
from arrayad._core._core import bind
from arrayad._ops import _rules
from arrayad.func import grad, jvp, vjp, vmap
from conftest import to_numpy

_names = itertools.count()


def _unbatched_primitive(multiple_results=False):
    """A fresh primitive with no batching rule (a unique name: the fallback warns once per
    primitive)."""
    name = f"_test_fallback_{next(_names)}"
    if multiple_results:
        return _rules.primitive(name, lambda xp, x: (x * 2.0, x + 1.0), multiple_results=True)
    return _rules.primitive(name, lambda xp, x: x * 2.0)


@pytest.mark.parametrize("backend", ["numpy", "array_api_strict"], indirect=True)
def test_batch_fallback_loops_warns_once_and_counts(backend):
    p = _unbatched_primitive()
    x = np.arange(6.0).reshape(2, 3)
    with pytest.warns(UserWarning, match=f"{p.name} has no batching rule yet"):
        out = vmap(lambda a: bind(p, a))(backend(x))
    np.testing.assert_allclose(to_numpy(out), x * 2.0)
    assert _rules.fallback_counts[p.name] == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")    # the second call does not warn again
        out = vmap(lambda a: bind(p, a), in_dims=1)(backend(x))
    np.testing.assert_allclose(to_numpy(out), x.T * 2.0)
    assert _rules.fallback_counts[p.name] == 2


@pytest.mark.parametrize("backend", ["numpy", "array_api_strict"], indirect=True)
def test_batch_fallback_multiple_results_and_unbatched_arguments(backend):
    p = _unbatched_primitive(multiple_results=True)
    x = np.arange(6.0).reshape(3, 2)
    with pytest.warns(UserWarning, match="falling back to a Python loop"):
        a, b = vmap(lambda v: bind(p, v))(backend(x))
    np.testing.assert_allclose(to_numpy(a), x * 2.0)
    np.testing.assert_allclose(to_numpy(b), x + 1.0)
    # an unbatched argument next to a batched one is passed whole to every iteration
    q = _rules.primitive(f"_test_fallback_{next(_names)}", lambda xp, u, w: u * w)
    with pytest.warns(UserWarning):
        out = vmap(lambda u, w: bind(q, u, w), in_dims=(0, None))(backend(x), backend(x[0]))
    np.testing.assert_allclose(to_numpy(out), x * x[0])


@pytest.fixture
def backend(request):
    from conftest import Backend
    return Backend(request.param)


@pytest.mark.parametrize("backend", ["numpy", "array_api_strict"], indirect=True)
def test_to_device_same_device_is_the_array_itself(backend):
    x = backend.tensor(np.ones(3))
    assert x.to_device(x.device) is x
    g = grad(lambda a: ad.sum(a.to_device(a.device) ** 2))(backend(np.ones(3)))
    np.testing.assert_allclose(to_numpy(g), 2.0 * np.ones(3))


def _other_device(backend):
    devices = backend.xp.__array_namespace_info__().devices()
    others = [d for d in devices if d != backend(np.ones(1)).device]
    if not others:
        pytest.skip(f"{backend.name} has a single device")
    return others[0]


@pytest.mark.parametrize("backend", ["numpy", "array_api_strict"], indirect=True)
def test_to_device_rules(backend):
    """The to_device primitive: the VJP moves the cotangent back, the JVP moves the tangent,
    the batching rule keeps the batch dimension."""
    dev = _other_device(backend)
    x = np.array([1.0, 2.0, 3.0])
    t = backend.tensor(x)
    moved = t.to_device(dev)
    assert moved.device == dev
    np.testing.assert_allclose(to_numpy(moved), x)

    g = grad(lambda a: ad.sum(a.to_device(dev) * 2.0))(backend(x))
    assert g.device == backend(x).device          # the cotangent comes back to x's device
    np.testing.assert_allclose(to_numpy(g), 2.0 * np.ones(3))
    _, vjp_fn = vjp(lambda a: a.to_device(dev) ** 2, backend(x))
    (ct,) = vjp_fn(backend.xp.asarray(np.ones(3), device=dev))   # a cotangent on dev
    np.testing.assert_allclose(to_numpy(ct), 2.0 * x)

    out, tangent = jvp(lambda a: a.to_device(dev) * 3.0, (backend(x),), (backend(np.ones(3)),))
    assert out.device == dev and tangent.device == dev
    np.testing.assert_allclose(to_numpy(tangent), 3.0 * np.ones(3))

    xs = np.arange(6.0).reshape(2, 3)
    out = vmap(lambda a: a.to_device(dev) * 3.0, in_dims=1)(backend(xs.T))
    assert out.device == dev
    np.testing.assert_allclose(to_numpy(out), 3.0 * xs)
