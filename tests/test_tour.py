"""The tour (``python -m arrayad``) runs to the end, shows every section, and says how to install a
backend whose library is missing instead of skipping it."""
import os
import pathlib
import subprocess
import sys

import pytest

from arrayad.__main__ import backend_install_hint

ROOT = pathlib.Path(__file__).resolve().parents[1]

SECTIONS = [
    "eager autograd, as in torch: requires_grad, backward(), .grad",
    "grad, and grad of grad",
    "NumPy in, NumPy out",
    "vjp, jvp and linearize",
    "Jacobians and Hessians: jacrev, jacfwd, hessian",
    "vmap: per-sample gradients",
    "array-API code inside a transform: arrays it makes, masks, in-place writes",
    "arrayad.jit: trace once, replay",
    "the same code on other backends",
    "autograd.Function: a derivative rule of your own, as in torch",
]

INSTALL = {
    "torch": "pip install torch==2.13.0",
    "array_api_strict": "pip install array-api-strict",
    "dask": 'pip install "dask[array]"',
}


def run_tour(env=None):
    proc = subprocess.run([sys.executable, "-m", "arrayad"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"the tour failed:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def backend_lines(out):
    part = out.split("== the same code on other backends", 1)[1].split("\n== ", 1)[0]
    return {line.split(":", 1)[0].strip(): line.split(":", 1)[1].strip()
            for line in part.splitlines()[1:] if ":" in line}


def test_tour_runs_and_shows_every_section():
    out = run_tour()
    for title in SECTIONS:
        assert f"== {title} " in out, f"section {title!r} missing from the tour:\n{out}"
    assert "seed" not in out.lower()
    lines = backend_lines(out)
    for name in ("array_api_strict", "torch", "dask", "jax", "cupy"):
        assert name in lines, f"the tour says nothing about the {name} backend:\n{out}"
    for name, line in lines.items():
        # a backend is either run (its array type and True) or comes with its install command
        assert line.endswith(" True") or "install it with: pip install" in line, line


@pytest.mark.parametrize("hidden", ["torch", "array_api_strict", "dask"])
def test_tour_says_how_to_install_a_missing_backend(tmp_path, hidden):
    # A module of the same name earlier on the path that fails to import: the library is "missing".
    (tmp_path / f"{hidden}.py").write_text(f"raise ImportError('{hidden} is hidden by the test')\n")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path)] + [p for p in [env.get("PYTHONPATH")] if p])
    env.pop("ARRAYAD_BACKEND", None)
    out = run_tour(env)
    for title in SECTIONS:
        assert f"== {title} " in out
    line = backend_lines(out)[hidden]
    assert line == f"not installed here; install it with: {INSTALL[hidden]}", line


def test_backend_install_hint():
    for name, command in INSTALL.items():
        assert backend_install_hint(name, ImportError("No module named x")) == (
            f"not installed here; install it with: {command}")
        assert backend_install_hint(name).endswith(command)
    assert "pip install jax" in backend_install_hint("jax")
    hint = backend_install_hint("cupy", RuntimeError("CUDA driver not found"))
    assert hint.startswith("cannot start here (RuntimeError: CUDA driver not found)")
    assert "pip install cupy" in hint
