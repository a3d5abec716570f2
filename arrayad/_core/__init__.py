"""arrayad's Cython core. See the module docstring of ``_core.pyx``."""
try:
    from . import _core  # noqa: F401
except ImportError as e:  # pragma: no cover - only on an unbuilt checkout
    raise ImportError(
        "arrayad's Cython extension (arrayad._core._core) is not built. From the repository root "
        "run `pip install -e .` (or `python setup.py build_ext --inplace`); it needs Cython and a "
        f"C compiler. Original error: {e}") from e
