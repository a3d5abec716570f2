"""Build the Cython core (arrayad/_core). Everything else is declared in pyproject.toml."""
from Cython.Build import cythonize
from setuptools import Extension, setup

extensions = [Extension("arrayad._core._core", ["arrayad/_core/_core.pyx"])]

setup(
    ext_modules=cythonize(
        extensions,
        language_level=3,
        compiler_directives={
            "embedsignature": True,
        },
    ),
)
