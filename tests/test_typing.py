"""The public API's types: what a type checker sees of the transforms (``grad(f)`` takes ``f``'s
parameters) and of the namespace's stubs, and that the stubs' precise claims hold at run time.

One mypy run (``mypy.api``, its cache in a temporary directory) reads a snippet of
``reveal_type`` calls; the checks read the revealed types line by line.
"""
import importlib.util
import os
import re
import sys
import textwrap

import numpy as np
import pytest

import arrayad as ad

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SNIPPET = '''\
import numpy as np
import arrayad as ad
from arrayad.func import (grad, grad_and_value, hessian, jacrev, jvp, linearize, value_and_grad,
                          vjp, vmap)
from arrayad.autograd import no_grad


def f(x: np.ndarray, w: float, *, scale: int = 1) -> np.ndarray:
    return ad.sum(x * w) * scale


@no_grad()
def evaluate(x: np.ndarray) -> ad.Tensor:
    return ad.tensor(x)


x = np.ones(3)
reveal_type(grad(f))                          # GRAD
reveal_type(grad(f, argnums=(0, 1)))          # GRAD_ARGNUMS
reveal_type(vmap(f))                          # VMAP
reveal_type(vmap(grad(f), in_dims=(0, None))) # VMAP_GRAD
reveal_type(grad_and_value(f))                # GRAD_AND_VALUE
reveal_type(value_and_grad(f))                # VALUE_AND_GRAD
reveal_type(jacrev(f))                        # JACREV
reveal_type(hessian(f))                       # HESSIAN
reveal_type(vjp(f, x, 2.0))                   # VJP
reveal_type(vjp(f, x, 2.0, has_aux=True))     # VJP_AUX
reveal_type(jvp(f, (x, 2.0), (x, 0.0)))       # JVP
reveal_type(linearize(f, x, 2.0))             # LINEARIZE
reveal_type(evaluate)                         # NO_GRAD
reveal_type(ad.sin(ad.tensor([1.0])))         # SIN_TENSOR
reveal_type(ad.sin(x))                        # SIN_NDARRAY
reveal_type(ad.special.erf(x))                # ERF_NDARRAY
reveal_type(ad.isdtype(ad.float64, "real floating"))  # ISDTYPE
reveal_type(ad.jit(f))                        # JIT
reveal_type(ad.jit(static_argnums=1)(f))      # JIT_DECORATOR
reveal_type(ad.jit(f).lower(x, 2.0))          # JIT_LOWER
grad(f)(x)                                    # TOO_FEW
grad(f)(x, 2.0, scale="3")                    # BAD_KEYWORD
'''


@pytest.fixture(scope="module")
def revealed(tmp_path_factory):
    """{marker: the mypy lines (notes and errors) of the snippet's line with that marker}."""
    if importlib.util.find_spec("mypy") is None:
        pytest.skip("mypy is a test extra")
    from mypy import api
    tmp = tmp_path_factory.mktemp("typing")
    path = tmp / "snippet.py"
    path.write_text(SNIPPET)
    # func, autograd, jit and the stubs are read; the rest of arrayad's internal modules are
    # skipped (Any), which keeps one cold run to a few seconds.
    config = tmp / "mypy.ini"
    config.write_text(textwrap.dedent(f"""\
        [mypy]
        mypy_path = {ROOT}
        follow_imports = silent
        cache_dir = {tmp / "cache"}
        [mypy-arrayad._ops.*,arrayad._sparsity.*,arrayad.backends.*]
        follow_imports = skip
        [mypy-arrayad._control,arrayad._custom,arrayad._pytree,arrayad.backends]
        follow_imports = skip
        """))
    stdout, stderr, status = api.run(["--config-file", str(config), str(path)])
    assert status in (0, 1) and not stderr, stdout + stderr
    markers = {}
    for number, line in enumerate(SNIPPET.splitlines(), 1):
        m = re.search(r"# ([A-Z_]+)$", line)
        if m:
            markers[number] = m.group(1)
    out = {name: [] for name in markers.values()}
    for line in stdout.splitlines():
        m = re.match(r".*snippet\.py:(\d+): (.*)$", line)
        if m and int(m.group(1)) in markers:
            out[markers[int(m.group(1))]].append(m.group(2))
        elif m:
            # (no other line of the snippet may fail: its definitions type-check)
            pytest.fail(f"unexpected mypy output: {line}")
    return out


def _type(revealed, marker):
    lines = [line for line in revealed[marker] if "Revealed type is" in line]
    assert len(lines) == 1, revealed[marker]
    return re.search(r'Revealed type is "(.*)"', lines[0]).group(1)


# f's parameters as mypy prints them: x: numpy.ndarray[...], w: float, *, scale: int =
F_PARAMS = (r"def \(x: numpy\.ndarray\[.*\], w: (builtins\.)?float, "
            r"\*, scale: (builtins\.)?int =?.*\)")


@pytest.mark.parametrize("marker", ["GRAD", "GRAD_ARGNUMS", "VMAP", "VMAP_GRAD"])
def test_grad_and_vmap_take_the_parameters_of_f(revealed, marker):
    # (their results: arrays of the caller's kind, not f's return type: NOTE [typed transforms])
    t = _type(revealed, marker)
    assert re.fullmatch(F_PARAMS + r" -> Any", t), t


@pytest.mark.parametrize("marker", ["GRAD_AND_VALUE", "VALUE_AND_GRAD"])
def test_gradient_and_value_is_a_pair(revealed, marker):
    t = _type(revealed, marker)
    assert re.fullmatch(F_PARAMS + r" -> tuple\[Any, Any\]", t), t


@pytest.mark.parametrize("marker", ["JACREV", "HESSIAN"])
def test_jacobians_take_positional_arguments_of_any_type(revealed, marker):
    # (their wrapper refuses keyword arguments, which f's parameters would allow)
    assert _type(revealed, marker) == "def (*Any, **Any) -> Any"


def test_vjp_jvp_linearize_results_follow_has_aux(revealed):
    vjp_fn = "def (*Any, **Any) -> tuple[Any, ...]"   # (one cotangent per primal)
    assert _type(revealed, "VJP").replace("builtins.", "") == f"tuple[Any, {vjp_fn}]"
    assert _type(revealed, "VJP_AUX").replace("builtins.", "") == f"tuple[Any, {vjp_fn}, Any]"
    assert _type(revealed, "JVP") == "tuple[Any, Any]"
    assert _type(revealed, "LINEARIZE") == "tuple[Any, def (*Any, **Any) -> Any]"


def test_a_grad_mode_decorator_keeps_the_signature(revealed):
    t = _type(revealed, "NO_GRAD")
    assert re.fullmatch(r"def \(x: numpy\.ndarray\[.*\]\) -> arrayad\._core\._core\.Tensor", t), t


def test_stubs_type_elementwise_functions_by_the_kind_of_their_argument(revealed):
    assert _type(revealed, "SIN_TENSOR") == "arrayad._core._core.Tensor"
    assert _type(revealed, "SIN_NDARRAY").startswith("numpy.ndarray[")
    assert _type(revealed, "ERF_NDARRAY").startswith("numpy.ndarray[")
    assert _type(revealed, "ISDTYPE") in ("bool", "builtins.bool")


@pytest.mark.parametrize("marker", ["JIT", "JIT_DECORATOR"])
def test_jit_keeps_the_parameters_and_the_return_type_of_f(revealed, marker):
    t = _type(revealed, marker)
    params = F_PARAMS[len(r"def \("):-len(r"\)")]
    assert re.fullmatch(rf"arrayad\._jit\.Jitted\[\[{params}\], numpy\.ndarray\[.*\]\]", t), t
    assert _type(revealed, "JIT_LOWER") == "arrayad._jit.ir.Program"


def test_a_call_that_does_not_fit_f_is_an_error(revealed):
    assert any("Too few arguments" in line for line in revealed["TOO_FEW"]), revealed["TOO_FEW"]
    assert any('"scale"' in line and "incompatible type" in line
               for line in revealed["BAD_KEYWORD"]), revealed["BAD_KEYWORD"]


def _elementwise_unary():
    sys.path.insert(0, os.path.join(ROOT, "tools"))
    try:
        import make_stubs
    finally:
        sys.path.pop(0)
    return ([(n, getattr(ad, n)) for n in make_stubs.elementwise_unary(ad)]
            + [(f"special.{n}", getattr(ad.special, n))
               for n in make_stubs.elementwise_unary(ad.special)])


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_the_stubs_elementwise_overloads_hold():
    """What the stubs say of every elementwise function of one array: an arrayad Tensor in, a
    Tensor out; a NumPy array in, a NumPy array out (0-d included)."""
    functions = _elementwise_unary()
    assert len(functions) > 60, [n for n, _ in functions]
    for name, fn in functions:
        for values in ([0.5, 0.25], [1, 2], [True, False]):   # (the first dtype it accepts)
            try:
                fn(np.asarray(values))
            except (TypeError, ValueError):
                continue
            break
        else:
            pytest.fail(f"{name} accepts no float, int or bool array")
        for raw in (np.asarray(values), np.asarray(values[0])):
            assert type(fn(raw)) is np.ndarray, name
            assert type(fn(ad.tensor(raw))) is ad.Tensor, name
