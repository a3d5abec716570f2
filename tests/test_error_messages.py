"""Bad input gets an error that names the function, the argument and the fix, and leaves no
state behind (the transform stack, grad mode, the random state)."""

import numpy as np
import pytest

import arrayad as ad
from arrayad._core import _core
from arrayad.func import grad, jacrev, jvp, vjp, vmap

X = np.array([1.0, 2.0])


def _vjp_fn():
    return vjp(ad.sin, X)[1]


CASES = [
    ("float16 data", lambda: ad.asarray(np.ones(2, np.float16)), TypeError,
     r"unsupported dtype .*float16.*array API standard's dtypes.*convert first"),
    ("float16 dtype=", lambda: ad.zeros(2, dtype=np.float16), TypeError,
     r"unsupported dtype .*float16"),
    ("unknown dtype name", lambda: ad.astype(ad.asarray(X), "bogus"), TypeError,
     r"unsupported dtype 'bogus'"),
    ("object data", lambda: ad.asarray(object()), TypeError, r"unsupported dtype"),
    ("chunk_size 0", lambda: vmap(ad.sin, chunk_size=0)(X), ValueError,
     r"vmap: `chunk_size` should be None or an integer greater than 0, got 0"),
    ("chunk_size float", lambda: jacrev(ad.sin, chunk_size=1.5)(X), ValueError,
     r"jacrev: `chunk_size`"),
    ("out_dims string", lambda: vmap(ad.sin, out_dims="a")(X), ValueError,
     r"vmap: out_dims must be an int, None, or a \(nested\) tuple"),
    ("out_dims out of range", lambda: vmap(ad.sin, out_dims=5)(X), ValueError,
     r"vmap: out_dims=5 is out of range"),
    ("in_dims float", lambda: vmap(ad.sin, in_dims=0.5)(X), ValueError,
     r"expected `in_dims` to be int or a \(potentially nested\) tuple"),
    ("vjp_fn(None)", lambda: _vjp_fn()(None), RuntimeError,
     r"vjp_fn: grad_output\[0\] must be an array of output\[0\]'s shape \(2,\), got NoneType"),
    ("vjp_fn wrong shape", lambda: _vjp_fn()(np.ones(3)), RuntimeError,
     r"vjp_fn: Mismatch in shape: grad_output\[0\] has a shape of \(3,\)"),
    ("sum(None)", lambda: ad.sum(None), TypeError, r"sum expects an array, got None"),
    ("sin(None)", lambda: ad.sin(None), TypeError, r"sin expects an array, got None"),
    ("string as array", lambda: ad.sin("abc"), TypeError,
     r"builtins.str is not an array of a supported backend.*arrayad.asarray"),
    ("float tensor as list index", lambda: [10, 20, 30][ad.tensor(1.7)], TypeError,
     r"only integer arrays of a single element can be converted to an index"),
    ("complex output of grad", lambda: grad(lambda v: ad.sum(v * 1j))(X), RuntimeError,
     r"grad can be implicitly created only for real scalar outputs.*ad.real"),
    ("int input to grad", lambda: grad(ad.sum)(np.array([1, 2])), ValueError,
     r"Expected primal to be floating point or complex, but got int64.*astype"),
    ("non-callable to grad", lambda: grad(5), TypeError,
     r"grad\(func, \.\.\.\): func must be a callable"),
    ("non-callable to vmap", lambda: vmap("f"), TypeError,
     r"vmap\(func, \.\.\.\): func must be a callable"),
    ("grad argnums out of range", lambda: grad(ad.sin, argnums=5)(X), RuntimeError,
     r"Got argnum=5, but only 1 positional inputs"),
    ("escaped tracer", lambda: (lambda box: (grad(lambda v: (box.append(v), ad.sum(v))[1])(X),
                                            box[0] + 1))([]), RuntimeError,
     r"a tracer of a grad transform \(level 1\) was used after that transform returned"),
    (".grad = list", lambda: setattr(ad.tensor([1.0], requires_grad=True), "grad", [1.0]),
     TypeError, r"assigned grad expected to be a Tensor .* or None but got grad of type list"),
    (".grad of another shape", lambda: setattr(ad.tensor([1.0, 2.0], requires_grad=True), "grad",
                                               np.ones((2, 1))),
     RuntimeError, r"assigned grad has data of a different size"),
    ("set_grad_enabled('yes')", lambda: ad.set_grad_enabled("yes"), TypeError,
     r"set_grad_enabled\(mode\): mode must be a bool, got str"),
    ("manual_seed('abc')", lambda: ad.manual_seed("abc"), TypeError,
     r"manual_seed\(seed\): seed must be an int, got str"),
    ("unknown backend", lambda: ad.set_backend("bogus"), ValueError,
     r"unknown backend 'bogus'; choose one of"),
    ("NumPy's view(dtype)", lambda: ad.asarray(X).view(float), TypeError,
     r"view\(<class 'float'>\): arrayad's view takes a shape .*x.astype\(dtype\)"),
]


@pytest.mark.parametrize("what, call, exc, pattern", CASES, ids=[c[0] for c in CASES])
def test_clear_error_and_no_state_left(what, call, exc, pattern):
    rng = repr(ad.get_rng_state())
    with pytest.raises(exc, match=pattern):
        call()
    assert _core.stack_depth() == 0
    assert ad.is_grad_enabled()
    assert repr(ad.get_rng_state()) == rng


def test_tangent_or_cotangent_on_another_backend():
    torch = pytest.importorskip("torch")
    t = torch.ones(2, dtype=torch.float64)
    with pytest.raises(ValueError, match=r"jvp\(f, primals, tangents\): a tangent is a torch "
                                         r"array but its primal is numpy"):
        jvp(ad.sin, (X,), (t,))
    with pytest.raises(ValueError, match=r"vjp_fn: grad_output\[0\] is a torch array but "
                                         r"output\[0\] is numpy"):
        _vjp_fn()(t)
    assert _core.stack_depth() == 0
