"""The package as users install it: the wheel built from this checkout holds the compiled core,
the type information and one version; installed on its own it runs the tour; type checkers see
the namespace's functions (the stubs are current) and accept the tour's and the getting-started
page's code."""
import glob
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import zipfile

import pytest

import arrayad

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _run(cmd, **kw):
    done = subprocess.run(cmd, capture_output=True, text=True, **kw)
    assert done.returncode == 0, f"{' '.join(map(str, cmd))} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def test_stubs_are_current():
    """``arrayad/__init__.pyi`` and ``special.pyi`` list what the package declares."""
    _run([sys.executable, os.path.join(ROOT, "tools", "make_stubs.py"), "--check"])


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    if importlib.util.find_spec("Cython") is None:
        pytest.skip("building the wheel needs Cython (a test extra)")
    # (built from a copy of the tracked files, so that the build leaves nothing in the checkout)
    tracked = _run(["git", "ls-files", "--cached", "--others", "--exclude-standard"],
                   cwd=ROOT).splitlines()
    src = tmp_path_factory.mktemp("src")
    for rel in tracked:
        if os.path.exists(os.path.join(ROOT, rel)):
            os.makedirs(os.path.dirname(os.path.join(src, rel)), exist_ok=True)
            shutil.copy2(os.path.join(ROOT, rel), os.path.join(src, rel))
    dist = tmp_path_factory.mktemp("dist")
    _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
          "-w", str(dist), str(src)])
    (path,) = dist.glob("arrayad-*.whl")
    return path


def test_wheel_contents(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    for module in ("_base", "_arrays", "_interp", "_zeros", "_tape", "_core"):   # (setup.py)
        assert any(re.fullmatch(rf"arrayad/_core/{module}\..*\.(so|pyd)", n) for n in names), names
        assert f"arrayad/_core/{module}.pyx" in names
    for stub in ("arrayad/py.typed", "arrayad/__init__.pyi", "arrayad/special.pyi",
                 "arrayad/_core/_core.pyi"):
        assert stub in names
    # one version: the file name, the metadata and the package say the same
    assert wheel.name.startswith(f"arrayad-{arrayad.__version__}-")
    meta = next(n for n in names if n.endswith(".dist-info/METADATA"))
    assert f"\nVersion: {arrayad.__version__}\n" in zipfile.ZipFile(wheel).read(meta).decode()


def test_installed_wheel_runs_the_tour(wheel, tmp_path):
    """The wheel installed alone (into a folder of its own, ahead of this checkout on the path)
    imports from there and runs the tour."""
    target = tmp_path / "site"
    _run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target),
          str(wheel)])
    env = dict(os.environ, PYTHONPATH=str(target), OMP_NUM_THREADS="1")
    where = _run([sys.executable, "-c", "import arrayad; print(arrayad.__file__)"],
                 cwd=tmp_path, env=env)
    assert where.strip().startswith(str(target)), where
    out = _run([sys.executable, "-m", "arrayad"], cwd=tmp_path, env=env)
    assert f"arrayad {arrayad.__version__}" in out


def _code_cells(markdown):
    text = open(os.path.join(ROOT, markdown)).read()
    blocks = re.findall(r"```\{code-cell\}[^\n]*\n(.*?)```", text, re.S)
    # (a notebook cell's options, ``:tags:`` lines, are not code)
    return [re.sub(r"^:[a-z_-]+:.*$", "", b, flags=re.M) for b in blocks]


def test_type_checker_accepts_user_code(tmp_path):
    """mypy, with the stubs, on the tour, the getting-started page and every tutorial: a
    function the namespace declares at import time is known (``ad.sin``), a transform's result
    unpacks as documented, a Tensor has its attributes, what ``arrayad.func`` sets at import
    time (``custom_vjp``, ``checkpoint``) is seen there."""
    if importlib.util.find_spec("mypy") is None:
        pytest.skip("mypy is a test extra")
    files = [os.path.join(ROOT, "arrayad", "__main__.py")]
    pages = ["docs/getting_started.md"] + sorted(
        os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "docs", "tutorials", "*.md")))
    for page in pages:
        cells = _code_cells(page)
        if cells:
            path = tmp_path / (os.path.basename(page)[:-3] + ".py")
            path.write_text("\n".join(cells))
            files.append(str(path))
    assert len(files) > 5, files
    done = subprocess.run([sys.executable, "-m", "mypy", "--follow-imports=silent",
                           "--ignore-missing-imports", "--cache-dir", os.devnull, *files],
                          capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
