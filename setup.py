"""Build the Cython core (arrayad/_core). Everything else is declared in pyproject.toml."""
from Cython.Build import cythonize
from setuptools import Extension, setup

# the core's modules, each cimporting only the ones before it (the module docstring of _core.pyx)
CORE = ["_base", "_arrays", "_interp", "_zeros", "_tape", "_core"]
# and, cimporting nothing of them, the register machine of compiled scans (NOTE [scan machine])
# and the calls of vector math functions (NOTE [vector math])
MODULES = CORE + ["_loop_machine", "_vector_math"]
extensions = [Extension(f"arrayad._core.{name}", [f"arrayad/_core/{name}.pyx"])
              for name in MODULES]

setup(
    ext_modules=cythonize(
        extensions,
        language_level=3,
        compiler_directives={
            "embedsignature": True,
        },
    ),
)
